//! What the CLI's end-to-end tests share: where the verbs run, and a scratch folder per test
//! file.

use std::path::PathBuf;

/// The workspace root: the verbs run there, as an operator runs them from a checkout.
pub fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `name` in this test file's own scratch folder, `target/tmp/cli-<file>`, made if missing.
// The pre-flight's tests read dumps only.
#[allow(dead_code)]
pub fn scratch(name: &str) -> PathBuf {
    let dir = workspace().join(format!("target/tmp/cli-{}", env!("CARGO_CRATE_NAME")));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    dir.join(name)
}
