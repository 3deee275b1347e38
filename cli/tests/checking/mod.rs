//! What the `check` tests share: running the verb, the bundled cluster's dump and settings,
//! the identities and the tenant's commit they apply.
// Each test file uses what it needs of these.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use cozystack_e2e::loopback;

use crate::common::{scratch, workspace};

pub fn write(name: &str, text: &str) -> PathBuf {
    let path = scratch(name);
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("{e}"));
    path
}

pub struct Ran {
    pub code: Option<i32>,
    /// The text report's first line: which settings, rules and release judged it.
    pub judged_by: Option<String>,
    /// The report after it.
    pub stdout: String,
    pub stderr: String,
}

pub fn check(args: &[&str], kubeconfig: Option<&Path>) -> Ran {
    let mut command = Command::new(env!("CARGO_BIN_EXE_cozystack-policy"));
    command.current_dir(workspace()).arg("check").args(args);
    for var in loopback::ELSEWHERE {
        command.env_remove(var);
    }
    match kubeconfig {
        Some(path) => command.env("KUBECONFIG", path),
        None => command.env_remove("KUBECONFIG"),
    };
    let Output {
        status,
        stdout,
        stderr,
    } = command.output().unwrap_or_else(|e| panic!("{e}"));
    let stdout = String::from_utf8_lossy(&stdout).into_owned();
    let (judged_by, stdout) = match stdout.strip_prefix("judged by: ") {
        Some(rest) => {
            let (line, report) = rest.split_once('\n').unwrap_or((rest, ""));
            (Some(format!("judged by: {line}")), report.to_owned())
        }
        None => (None, stdout),
    };
    Ran {
        code: status.code(),
        judged_by,
        stdout,
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
    }
}

/// What `DUMP`'s settings are named as in every report.
pub const PROTECT_JUDGED_BY: &str = "judged by: ClusterAdmissionPolicy cozystack-capabilities in deploy/policy-protect.yaml; rules: the built-in rule set (cozystack/cozystack 3c780acd); release: any supported Cozystack release (v1.5.0, v1.5.1, v1.5.2, v1.5.3, v1.5.4, v1.6.0, v1.6.1, v1.6.2, main)";

pub const DUMP: &[&str] = &[
    "--dump",
    "e2e/cluster",
    "--settings",
    "deploy/policy-protect.yaml",
];
pub const ALICE: &[&str] = &["--as", "alice", "--as-group", "tenant-acme-admin"];
/// A person applying with `kubectl apply --server-side`: one manifest after the other.
pub const IN_ORDER: &[&str] = &["--in-order"];
pub const FLUX: &[&str] = &["--as", "system:serviceaccount:cozy-fluxcd:flux"];

/// A tenant administrator's commit: two Monitorings for one tenant, an edit of an existing
/// Postgres, and a ConfigMap.
pub const TENANT_COMMIT: &str = "\
apiVersion: apps.cozystack.io/v1alpha1
kind: Monitoring
metadata: {name: monitoring, namespace: tenant-acme}
spec: {}
---
apiVersion: apps.cozystack.io/v1alpha1
kind: Monitoring
metadata: {name: metrics, namespace: tenant-acme}
spec: {}
---
apiVersion: apps.cozystack.io/v1alpha1
kind: Postgres
metadata: {name: shop, namespace: tenant-acme}
spec: {replicas: 3}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: shop-config, namespace: tenant-acme}
data: {mode: production}
";

pub const SECOND_MONITORING: &str = "Monitoring: at most 1 per tenant tenant-acme; already present: monitoring; use or edit the existing Monitoring instead of creating another (cardinality tenant/1)";

pub fn args<'a>(parts: &[&'a [&'a str]]) -> Vec<&'a str> {
    parts.iter().flat_map(|p| p.iter().copied()).collect()
}

/// Writes a change set, checks it as Flux applies it, and asserts the exit code.
/// The note on the first object whose dry run fails its stage.
pub const DRY_RUN_FAILS: &str =
    "the dry run fails here: nothing of this stage is applied, no later stage, and no prune runs";

/// The note on an Application cozystack-api writes during Flux's dry run (every supported
/// release drops a server-side apply's dryRun in `rest.go` `Update`).
pub const LANDED: &str = "landed during the dry run: cozystack-api drops a server-side apply's dryRun (pkg/registry/apps/application/rest.go Update), so this write is made now, whatever becomes of the stage, and the rest of the dry run sees it";
