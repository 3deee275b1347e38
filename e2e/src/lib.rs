//! End-to-end harness: the built policy wasm in a waPC host on wasmtime (the runtime pieces
//! Kubewarden's policy-evaluator uses), served by a fixture cluster, driven by YAML scenarios.

pub mod cluster;
pub mod demo;
pub mod export;
pub mod host;
pub mod masks;
pub mod parity;
pub mod policy;
pub mod preflight;
pub mod scenario;
pub mod selector;

use std::path::PathBuf;

/// The `*.yaml` files of a directory, in name order (fixtures and scenarios alike).
pub fn yaml_files(dir: &std::path::Path) -> Result<Vec<PathBuf>, String> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    paths.sort();
    Ok(paths)
}

/// The workspace root (where `policy.wasm` and `policy-metadata.yml` live).
pub fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The policy module under test: `$POLICY_WASM`, else the workspace's annotated module.
pub fn policy_path() -> PathBuf {
    std::env::var_os("POLICY_WASM")
        .map_or_else(|| workspace().join("annotated-policy.wasm"), PathBuf::from)
}
