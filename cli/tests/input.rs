//! What the verbs do with input they cannot judge as given: nothing the user gave is dropped
//! or guessed (exit 2, naming it), no live read waits for ever, and `--output json|junit`
//! writes a valid report after every exit.

mod common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use cozystack_e2e::loopback;
use serde_json::Value;

use common::{cli, ran, scratch, workspace};

fn write(name: &str, text: &str) -> PathBuf {
    let path = scratch(name);
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("{e}"));
    path
}

/// Two files `cat`-ed together without a `---` between them.
const CONCATENATED: &str = "apiVersion: apps.cozystack.io/v1alpha1\nkind: Monitoring\nmetadata: {name: monitoring, namespace: tenant-acme}\nspec: {}\napiVersion: apps.cozystack.io/v1alpha1\nkind: Monitoring\nmetadata: {name: metrics, namespace: tenant-acme}\nspec: {}\n";

/// The same two Monitorings as two documents.
fn separated() -> String {
    CONCATENATED.replace("spec: {}\napiVersion", "spec: {}\n---\napiVersion")
}

const STOCK: &[&str] = &[
    "--dump",
    "e2e/cluster",
    "--as",
    "alice",
    "--as-group",
    "tenant-acme-admin",
];

#[test]
fn piped_files_without_separators_are_refused_as_flux_refuses_the_file() {
    let piped = ran(cli()
        .args(["check", "-"])
        .args(STOCK)
        .write_stdin(CONCATENATED));
    assert_eq!(piped.code, Some(2), "{}\n{}", piped.stdout, piped.stderr);
    assert!(
        piped
            .stderr
            .contains("error: -, document 1: duplicate entry with key \"apiVersion\"")
            && piped.stderr.contains("separate documents with `---`"),
        "{}",
        piped.stderr
    );
    // The same bytes as a file: refused the same way, never one write of the two.
    let file = write("concatenated.yaml", CONCATENATED);
    let given = ran(cli().arg("check").arg(&file).args(STOCK));
    assert_eq!(given.code, Some(2), "{}\n{}", given.stdout, given.stderr);
    assert!(
        given
            .stderr
            .contains("document 1: duplicate entry with key \"apiVersion\""),
        "{}",
        given.stderr
    );
}

#[test]
fn usage_mistakes_are_refused_before_any_verdict() {
    // An unset variable, or a ServiceAccount missing its parts: no user to judge as.
    for user in ["", "system:serviceaccount::", "system:serviceaccount:flux"] {
        let out = ran(cli()
            .args(["check", "-", "--dump", "e2e/cluster", "--as", user])
            .write_stdin(""));
        assert_eq!(out.code, Some(2), "{user:?}: {}", out.stderr);
        assert!(
            out.stderr.contains("invalid value") && out.stderr.contains("--as"),
            "{user:?}: {}",
            out.stderr
        );
    }
    // simulate: nothing played proves nothing; an endless budget never ends.
    for (flag, value, said) in [
        ("--runs", "0", "0 is not in 1.."),
        ("--steps", "0", "must be at least 1"),
        (
            "--seconds",
            "inf",
            "must be a finite number of seconds above 0",
        ),
        (
            "--seconds",
            "0",
            "must be a finite number of seconds above 0",
        ),
    ] {
        let out = ran(cli().args(["simulate", flag, value]));
        assert_eq!(out.code, Some(2), "{flag} {value}: {}", out.stderr);
        assert!(out.stderr.contains(said), "{flag} {value}: {}", out.stderr);
        assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
    }
}

#[test]
fn a_dump_missing_a_kind_the_policy_reads_is_refused() {
    // The tenant Namespaces alone: the HelmReleases' and definitions' `kubectl get` failed.
    let out = ran(cli().args(["preflight", "--dump", "e2e/cluster/namespaces.yaml"]));
    assert_eq!(out.code, Some(2), "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains("holds no cozystack.io/v1alpha1 ApplicationDefinition, no helm.toolkit.fluxcd.io/v2 HelmRelease: a Cozystack cluster always has them"),
        "{}",
        out.stderr
    );
    // `kubectl get -o json` into a folder: read, not refused as empty.
    let folder = scratch("json-dump");
    let _ = std::fs::remove_dir_all(&folder);
    std::fs::create_dir_all(&folder).unwrap_or_else(|e| panic!("{e}"));
    let objects: Vec<Value> = cozystack_policy_runtime::cluster::ClusterObjects::read_dump(&[
        workspace().join("e2e/cluster"),
    ])
    .unwrap_or_else(|e| panic!("{e}"))
    .values()
    .collect();
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": objects});
    std::fs::write(folder.join("dump.json"), list.to_string()).unwrap_or_else(|e| panic!("{e}"));
    let from_json = ran(cli().arg("preflight").arg("--dump").arg(&folder));
    let from_yaml = ran(cli().args(["preflight", "--dump", "e2e/cluster"]));
    assert_eq!(from_json.code, from_yaml.code, "{}", from_json.stderr);
    assert_eq!(from_json.stdout, from_yaml.stdout);
}

#[test]
fn a_silent_api_server_stops_the_verb_within_its_limits() {
    let api = loopback::silent(&scratch("silent"));
    // Each request's read is bounded: exit 2 naming the server, the request and the cause.
    let started = Instant::now();
    let out = ran(cli()
        .args(["preflight", "--request-timeout", "1"])
        .env("KUBECONFIG", &api.kubeconfig));
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    let last = out.stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with(&format!(
            "error: reading applicationdefinitions.cozystack.io from context silent at {} failed: ",
            api.url
        )) && last.contains("timed out"),
        "{last}"
    );
    // The verb's deadline bounds them all, whatever each request's timeout.
    let started = Instant::now();
    let out = ran(cli()
        .args(["check", "-", "--deadline", "2", "--as", "alice"])
        .env("KUBECONFIG", &api.kubeconfig)
        .write_stdin(separated()));
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert_eq!(
        out.stderr.lines().last().unwrap_or_default(),
        format!(
            "error: list applicationdefinitions.cozystack.io,helmreleases.helm.toolkit.fluxcd.io,namespaces on context silent at {}: not done within the deadline of 2 s (--deadline): the API server, or a proxy before it, accepts the connection and does not answer in time",
            api.url
        )
    );
}

#[test]
fn a_closed_port_says_the_server_and_the_cause() {
    // Nobody listens on port 1: the connection is refused, said once, with the server.
    let kubeconfig = write(
        "kubeconfig-closed.yaml",
        "apiVersion: v1\nkind: Config\nclusters:\n- name: closed\n  cluster: {server: 'http://127.0.0.1:1'}\nusers:\n- name: u\n  user: {token: t}\ncontexts:\n- name: closed\n  context: {cluster: closed, user: u}\ncurrent-context: closed\n",
    );
    let out = ran(cli().arg("preflight").env("KUBECONFIG", &kubeconfig));
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    let last = out.stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("error: reading applicationdefinitions.cozystack.io from context closed at http://127.0.0.1:1 failed: ")
            && last.contains("Connection refused")
            && !last.contains("ServiceError"),
        "{last}"
    );
    // check without --as: who the credentials are cannot be asked; --as is no advice then.
    let out = ran(cli()
        .args(["check", "-"])
        .env("KUBECONFIG", &kubeconfig)
        .write_stdin(separated()));
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    let last = out.stderr.lines().last().unwrap_or_default();
    assert!(
        last.contains("cannot ask context closed at http://127.0.0.1:1 who its credentials are")
            && last.contains("Connection refused")
            && !last.contains("--as"),
        "{last}"
    );
}

#[test]
fn every_report_is_written_whatever_stops_the_run() {
    let settings = ["--settings", "deploy/policy-protect.yaml"];
    // The cluster cannot be read: JUnit still gets an error test case naming the settings.
    let out = ran(cli()
        .args([
            "check",
            "-",
            "--dump",
            "nonexistent.yaml",
            "--as",
            "alice",
            "--output",
            "junit",
        ])
        .args(settings)
        .write_stdin(separated()));
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(
        out.stdout.starts_with("<?xml")
            && out.stdout.contains("<error type=\"unusable\"")
            && out.stdout.contains("nonexistent.yaml")
            && out.stdout.contains("<property name=\"judgedBy\" value=\"judged by: ClusterAdmissionPolicy cozystack-capabilities"),
        "{}",
        out.stdout
    );
    // An unreadable change set names the settings too; JSON carries the error.
    let out = ran(cli()
        .args([
            "check",
            "-",
            "--dump",
            "e2e/cluster",
            "--as",
            "alice",
            "--output",
            "json",
        ])
        .args(settings)
        .write_stdin(CONCATENATED));
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    let report: Value =
        serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", out.stdout));
    assert!(
        report["error"]
            .as_str()
            .is_some_and(|e| e.contains("duplicate entry"))
            && report["judgedBy"].as_str().is_some_and(
                |j| j.starts_with("judged by: ClusterAdmissionPolicy cozystack-capabilities")
            ),
        "{report}"
    );
    // run --output json: the same.
    let out = ran(cli().args(["run", "nonexistent.json", "--output", "json"]));
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    let report: Value =
        serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", out.stdout));
    assert!(
        report["error"]
            .as_str()
            .is_some_and(|e| e.contains("nonexistent.json")),
        "{report}"
    );
}
