//! What the platform does with a write, told once for `check` and `simulate`: what the API
//! servers refuse before admission ([`apiserver`]), what cozystack-api does with an
//! Application write ([`application`], with its tenant quota, [`quota`]), what a stock install
//! writes after it (the release, helm-controller's Tenant render: [`writes`]), what one write
//! sets off, in the order the platform sends it ([`sequence`]), and Flux: its source, build and
//! apply ([`flux`]).

pub mod apiserver;
pub mod application;
pub mod flux;
pub mod quota;
pub mod sequence;
pub mod writes;
