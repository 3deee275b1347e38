//! What the platform does with a write, told once for `check` and `simulate`: what the API
//! servers refuse before admission ([`apiserver`]), what cozystack-api does with an
//! Application write ([`application`], with its tenant quota, [`quota`]), what a stock install
//! writes after it (the release, helm-controller's Tenant render: [`writes`]; helm-controller's
//! finalizer and deletion: [`helm_controller`]), what one write sets off, in the order the
//! platform sends it, through one entry ([`sequence::Platform::play`]), and Flux: its source,
//! build and apply ([`flux`]). The cluster as the writes leave it is a [`state::State`]; the
//! module judges each request as the platform's admission ([`admission`]).
//!
//! A crate of its own, so that the compiler holds the layers: the simulator and the operator's
//! tool choose writes and read outcomes; nothing here knows either.

pub mod admission;
pub mod apiserver;
pub mod application;
pub mod error;
pub mod flux;
pub mod helm_controller;
pub mod quota;
pub mod sequence;
pub mod state;
pub mod writes;
