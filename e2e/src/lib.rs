//! End-to-end harness: the built policy wasm in a waPC host on wasmtime (the runtime pieces
//! Kubewarden's policy-evaluator uses), served by a fixture cluster, driven by YAML scenarios.

pub mod cluster;
pub mod demo;
pub mod export;
pub mod host;
pub mod masks;
pub mod parity;
pub mod policy;
pub mod scenario;
pub mod selector;

use std::path::PathBuf;

/// The workspace root (where `policy.wasm` and `policy-metadata.yml` live).
pub fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The policy module under test: `$POLICY_WASM`, else the workspace's annotated module.
pub fn policy_path() -> PathBuf {
    std::env::var_os("POLICY_WASM")
        .map_or_else(|| workspace().join("annotated-policy.wasm"), PathBuf::from)
}
