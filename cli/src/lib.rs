//! `cozystack-policy`, the operator's tool: the released policy module run the way Kubewarden
//! runs it (through the runtime crate) on one request, on a change set in order, or on every
//! object of a cluster, read from a dump or live through kube-rs, kwctl's packaging verbs, and
//! cosign's signing verbs.

pub mod check;
pub mod error;
pub mod evaluate;
pub mod fluxbuild;
pub mod footprint;
pub mod kustomizations;
pub mod live;
pub mod manifests;
pub mod output;
pub mod platform;
pub mod postbuild;
pub mod preflight;
pub mod settings;
pub mod simulate;
pub mod source;
pub mod sourceignore;
pub mod state;
pub mod trust;
