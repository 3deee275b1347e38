//! `cozystack-policy`, the operator's tool: the released policy module run the way Kubewarden
//! runs it (through the runtime crate) on one request, on a change set in order, or on every
//! object of a cluster, read from a dump or live through kube-rs, kwctl's packaging verbs, and
//! cosign's signing verbs.

//!
//! The layers are crates: the writers around the policy and the module as their admission in
//! `cozystack-platform` (`platform/` at the workspace root: the API servers, cozystack-api,
//! helm-controller and the Tenant chart, what one write sets off, and Flux), the lifecycle
//! simulator in `cozystack-simulator` (`simulator/`). Here, `ops/` what each verb computes (as
//! cargo's `ops`), the verbs themselves in the binary's `commands/`; the rest is shared.

pub mod error;
pub mod live;
pub mod ops;
pub mod output;
pub mod settings;
pub mod source;
pub mod trust;
