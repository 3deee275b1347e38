//! Packaging the policy the way kwctl does, with maintained libraries instead of kwctl:
//! the `io.kubewarden.metadata` custom section (wasmparser + wasm-encoder), the OCI
//! artifact (oci-client), its cosign signatures and its SBOM (sigstore).

pub mod artifacthub;
#[cfg(feature = "oci")]
pub mod keys;
pub mod metadata;
#[cfg(feature = "oci")]
pub mod oci;
#[cfg(feature = "oci")]
pub mod sbom;
pub mod section;
#[cfg(feature = "oci")]
pub mod signing;
#[cfg(feature = "oci")]
pub mod verification;
