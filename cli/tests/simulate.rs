//! `simulate` end to end on the bundled example cluster: fixed seeds play the same lifecycles
//! through the embedded module and break no guarantee; a deployment that drops a stock
//! protection is caught, and the counterexample it writes is an e2e scenario the module runs.

mod common;

use std::process::Command;

use cozystack_e2e::scenario::{self, Bundle};
use cozystack_policy::source::Source;

use common::{scratch, workspace};

/// Runs `simulate` on the bundled cluster; exit code and stdout.
fn simulate(settings: &str, args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_cozystack-policy"))
        .current_dir(workspace())
        .args(["simulate", "--dump", "e2e/cluster", "--settings", settings])
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("policy: the embedded policy"), "{stderr}");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn fixed_seeds_play_the_same_lifecycles_and_break_no_guarantee() {
    let args = ["--seed", "1", "--runs", "3", "--steps", "80"];
    let (code, first) = simulate("e2e/cluster/settings.yaml", &args);
    assert_eq!(code, Some(0), "{first}");
    let lines: Vec<&str> = first.lines().collect();
    assert!(
        lines[0].starts_with("3 runs (seeds 1..=3), 240 steps, ")
            && lines[0].ends_with(" steps/s: no guarantee broken"),
        "{first}"
    );
    // Every actor's kind of action happens, and the module refuses some.
    for action in [
        "create Tenant",
        "delete Tenant",
        "switch etcd off",
        "reconcile Tenant",
        "leftover",
        "Flux change set",
    ] {
        assert!(lines[1].contains(action), "{action}: {}", lines[1]);
    }
    assert!(lines[2].contains("denied "), "{}", lines[2]);
    // The same seeds, the same runs: everything but the speed.
    let (_, second) = simulate("e2e/cluster/settings.yaml", &args);
    assert_eq!(
        first.lines().skip(1).collect::<Vec<_>>(),
        second.lines().skip(1).collect::<Vec<_>>()
    );
    // Both limits hold, whichever comes first: no time left after the first run stops it.
    let (code, out) = simulate(
        "e2e/cluster/settings.yaml",
        &["--runs", "3", "--seconds", "0", "--steps", "5"],
    );
    assert_eq!(code, Some(0), "{out}");
    assert!(out.starts_with("1 runs (seeds 1..=1), 5 steps, "), "{out}");
}

#[test]
fn a_deployment_without_the_ingress_protection_is_caught_with_a_scenario() {
    let mut settings: serde_json::Value = serde_yaml::from_str(
        &std::fs::read_to_string(workspace().join("e2e/cluster/settings.yaml"))
            .unwrap_or_else(|e| panic!("{e}")),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    settings["definitions"]["Ingress"]["protection"] = serde_json::json!({"deletion": "allow"});
    let path = scratch("no-ingress-protection.json");
    std::fs::write(&path, settings.to_string()).unwrap_or_else(|e| panic!("{e}"));
    let out = scratch("out");
    let _ = std::fs::remove_dir_all(&out);
    let (code, stdout) = simulate(
        path.to_str().unwrap_or_default(),
        &[
            "--seed",
            "1",
            "--runs",
            "10",
            "--steps",
            "100",
            "--out",
            out.to_str().unwrap_or_default(),
        ],
    );
    assert_eq!(code, Some(1), "{stdout}");
    let counterexample = out.join("counterexample.yaml");
    assert_eq!(
        stdout,
        format!(
            "BROKEN protection: no consumer left without the provider it resolved to\n  \
             seed 3, step 30, shrunk to 1 steps: Admin(\"tenant-root\") turns ingress off on Tenant tenant-root/root\n  \
             Admin(\"tenant-root\") turns ingress off on Tenant tenant-root/root: Bucket tenant-acme/bucket-media consumed ingress from a live provider and no longer does\n  \
             counterexample: {} (an e2e scenario: add it to e2e/scenarios/ once fixed)\n",
            counterexample.display()
        )
    );
    // The counterexample is a scenario: under the settings it ran with the module admits the
    // switch-off (the scenario fails); under the stock ones it refuses it, citing protection.
    let mut written = scenario::load_file(&counterexample).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(written.len(), 1);
    let mut case = written.remove(0);
    assert_eq!(case.name, "simulate-seed-3");
    assert_eq!(case.expect.allowed, Some(false));
    assert_eq!(
        case.expect.message_matches.as_deref(),
        Some(r"\(protection")
    );
    let (policy, _) = Source::Embedded
        .load(None)
        .unwrap_or_else(|e| panic!("{e}"));
    let bundle = Bundle::load(&workspace().join("e2e/cluster")).unwrap_or_else(|e| panic!("{e}"));
    let weak = scenario::run(&policy, &bundle, &case).unwrap_or_else(|e| panic!("{e}"));
    assert!(!weak.passed(), "the settings it ran with admit it");
    case.settings = None;
    let stock = scenario::run(&policy, &bundle, &case).unwrap_or_else(|e| panic!("{e}"));
    assert!(stock.passed(), "the stock settings refuse it");
}
