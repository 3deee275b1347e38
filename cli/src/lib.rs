//! `cozystack-policy`, the operator's tool: the released policy module run the way Kubewarden
//! runs it (through the runtime crate) on one request, on a change set in order, or on every
//! object of a cluster, read from a dump or live through kube-rs, kwctl's packaging verbs, and
//! cosign's signing verbs.

//!
//! The folders show the layers: `platform/` the writers around the policy (the API servers,
//! cozystack-api, helm-controller and the Tenant chart, what one write sets off, and Flux in
//! `platform/flux/`: what source-controller packs, what kustomize-controller builds,
//! substitutes and applies, Kustomizations in dependsOn order), `ops/` what each verb computes
//! (as cargo's `ops`), the verbs themselves in the binary's `commands/`; the rest is shared.

pub mod error;
pub mod live;
pub mod ops;
pub mod output;
pub mod platform;
pub mod settings;
pub mod source;
pub mod state;
pub mod trust;
