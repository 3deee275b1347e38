//! Flux as this tool models it, at the versions Cozystack pins: what source-controller packs
//! of a repository, what kustomize-controller builds of a folder and substitutes after the
//! build, and several Kustomizations reached in `dependsOn` order. Flux's applier (stages, dry
//! run, prune) is a platform writer: `platform::flux`.

pub mod build;
pub mod kustomizations;
pub mod manifests;
pub mod postbuild;
pub mod sourceignore;
