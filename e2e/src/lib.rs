//! End-to-end tests of the built policy wasm: YAML scenarios over the bundled example cluster
//! (`e2e/cluster`), run through the runtime crate (the waPC host Kubewarden's evaluator is made
//! of), with the demo, the kwctl export and the dashboard parity cases derived from them.

pub mod demo;
pub mod export;
pub mod loopback;
pub mod native;
pub mod parity;
pub mod scenario;

use std::path::PathBuf;

pub use cozystack_policy_runtime::yaml_files;

/// The workspace root (where `policy.wasm` and `policy-metadata.yml` live).
pub fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The policy module under test: `$POLICY_WASM`, else the workspace's annotated module.
pub fn policy_path() -> PathBuf {
    std::env::var_os("POLICY_WASM")
        .map_or_else(|| workspace().join("annotated-policy.wasm"), PathBuf::from)
}
