//! Packaging the policy the way kwctl does, with maintained libraries instead of kwctl:
//! the `io.kubewarden.metadata` custom section (wasmparser + wasm-encoder) and the OCI
//! artifact (oci-client).

pub mod artifacthub;
pub mod metadata;
#[cfg(feature = "oci")]
pub mod oci;
pub mod section;
