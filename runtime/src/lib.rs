//! The policy wasm run the way Kubewarden runs it, without Kubewarden: a waPC host on wasmtime
//! (the runtime pieces of policy-evaluator) that serves the `kubewarden/kubernetes/*` host calls
//! from a snapshot of cluster objects, and the requests the audit scanner replays. The operator's
//! CLI, the e2e harness and the benchmark all run the policy through this crate.

pub mod audit;
pub mod cluster;
pub mod error;
pub mod host;
pub mod masks;
pub mod policy;
pub mod selector;

use std::path::{Path, PathBuf};

/// The `*.yaml` files of a directory, in name order (fixtures and scenarios).
pub fn yaml_files(dir: &Path) -> Result<Vec<PathBuf>, error::Error> {
    files_ending(dir, &["yaml"])
}

/// The files of a dump folder, in name order: what `kubectl get -o yaml` or `-o json` writes
/// (`*.yaml`, `*.yml`, `*.json`).
pub fn dump_files(dir: &Path) -> Result<Vec<PathBuf>, error::Error> {
    files_ending(dir, &["yaml", "yml", "json"])
}

fn files_ending(dir: &Path, extensions: &[&str]) -> Result<Vec<PathBuf>, error::Error> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|source| error::Error::Read {
            path: dir.to_owned(),
            source,
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension()
                .is_some_and(|x| extensions.iter().any(|e| x == *e))
        })
        .collect();
    paths.sort();
    Ok(paths)
}
