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

/// The binary, run from the workspace root with no kubeconfig, no in-cluster fallback and no
/// proxy of the machine the tests run on.
#[allow(dead_code)]
pub fn cli() -> assert_cmd::Command {
    let mut command =
        assert_cmd::Command::cargo_bin("cozystack-policy").unwrap_or_else(|e| panic!("{e}"));
    command.current_dir(workspace()).env_remove("KUBECONFIG");
    for var in cozystack_e2e::loopback::ELSEWHERE {
        command.env_remove(var);
    }
    command
}

/// What a run of the binary came to.
#[allow(dead_code)]
pub struct Ran {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

#[allow(dead_code)]
pub fn ran(command: &mut assert_cmd::Command) -> Ran {
    let output = command.output().unwrap_or_else(|e| panic!("{e}"));
    Ran {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}
