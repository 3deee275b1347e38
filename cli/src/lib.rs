//! `cozystack-policy`, the operator's tool: the released policy module run the way Kubewarden
//! runs it (through the runtime crate) on one request, on a change set in order, or on every
//! object of a cluster, read from a dump or live through kube-rs, kwctl's packaging verbs, and
//! cosign's signing verbs.

//!
//! The folders show the layers: `flux/` is Flux as modelled (what source-controller packs,
//! what kustomize-controller builds and substitutes, Kustomizations in dependsOn order),
//! `platform/` the writers around the policy (the API servers, cozystack-api, helm-controller
//! and the Tenant chart, Flux's applier), `ops/` what each verb computes (as cargo's `ops`),
//! the verbs themselves in the binary's `commands/`; the rest is shared.

pub mod error;
pub mod flux;
pub mod live;
pub mod ops;
pub mod output;
pub mod platform;
pub mod settings;
pub mod source;
pub mod state;
pub mod trust;
