//! The pre-flight over the fixture dumps in `e2e/preflight`, through the built policy wasm: the
//! dump with known problems yields exactly the committed report (text and PolicyReports), the
//! clean dump yields nothing, and the CLI's exit code says which. One test, so the module is
//! compiled once in process (the CLI compiles it once per dump).

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;

use cozystack_e2e::policy::Policy;
use cozystack_e2e::preflight;
use cozystack_e2e::{policy_path, workspace};

fn dir() -> PathBuf {
    workspace().join("e2e/preflight")
}

fn committed(name: &str) -> String {
    std::fs::read_to_string(dir().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn preflight_reports_exactly_the_known_problems() {
    let policy = Policy::load_annotated(&policy_path()).unwrap_or_else(|e| panic!("{e}"));
    let settings_path = workspace().join("deploy/policy-protect.yaml");
    let settings = preflight::read_settings(&settings_path).unwrap_or_else(|e| panic!("{e}"));
    let replay = |dump: &str| {
        let cluster = preflight::read_dump(&[dir().join(dump)]).unwrap_or_else(|e| panic!("{e}"));
        preflight::run(&policy, Arc::new(cluster), &settings, &|_, _| {})
            .unwrap_or_else(|e| panic!("{e}"))
    };

    let report = replay("problems.yaml");
    assert_eq!(report.findings(), 5);
    let text = report.text(false);
    assert_eq!(text, committed("problems.txt"));
    // The clean namespaces are counted; named only on request.
    assert!(
        text.ends_with(
            "5 findings in 4 namespaces; 3 namespaces clean (--list-clean names them)\n"
        ),
        "{text}"
    );
    assert!(report.text(true).ends_with(
        "5 findings in 4 namespaces; 3 clean: cozy-system, tenant-clean, tenant-root\n"
    ));
    // Each duplicate is reported, naming the other.
    for (release, other) in [
        ("monitoring", "monitoring-2"),
        ("monitoring-2", "monitoring"),
    ] {
        assert!(
            text.contains(&format!(
                "HelmRelease tenant-dup/{release} [fail] Monitoring: at most 1 per tenant tenant-dup; already present: {other}; keep 1 and delete the others (cardinality tenant/1)"
            )),
            "{text}"
        );
    }
    let reports = preflight::to_yaml_stream(&report.policy_reports("cozystack-capabilities"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(reports, committed("problems.policyreport.yaml"));

    let clean = replay("clean.yaml");
    assert_eq!(clean.findings(), 0);
    assert_eq!(
        clean.text(false),
        "Pre-flight: 6 objects replayed as the audit scanner sends them, in 3 namespaces\n\nNo findings: every namespace is clean.\n"
    );
    assert!(
        clean
            .policy_reports("cozystack-capabilities")
            .iter()
            .all(|r| r["summary"]["fail"] == 0 && r["summary"]["error"] == 0)
    );

    // Rules in the settings alone: stock definitions agree with them and pass; one that
    // states a different block is reported, since the policy would not read it.
    let mut dump =
        preflight::read_dump(&[dir().join("clean.yaml")]).unwrap_or_else(|e| panic!("{e}"));
    dump.objects.push(serde_json::json!({
        "apiVersion": "cozystack.io/v1alpha1", "kind": "ApplicationDefinition",
        "metadata": {"name": "redis"},
        "spec": {"application": {"kind": "Redis"}, "cardinality": {"scope": "cluster", "max": 1}}
    }));
    let dump = Arc::new(dump);
    let mut settings_only = settings.clone();
    settings_only["definitionSource"] = "settings".into();
    settings_only["releasePrefixes"] = serde_json::json!({"Monitoring": "", "Etcd": ""});
    let report = preflight::run(&policy, dump.clone(), &settings_only, &|_, _| {})
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(report.findings(), 1, "{}", report.text(false));
    assert!(report.text(false).contains(
        "(ApplicationDefinitions): 1 finding\n  ApplicationDefinition redis [fail] ApplicationDefinition redis states rules for Redis that differ from the settings, and definitionSource is settings, so the policy does not read them; move them into the settings' definitions.Redis, or set definitionSource: applicationDefinitions\n"
    ), "{}", report.text(false));

    // The release prefixes stand in for the definitions' own: a wrong one misnames every
    // release of its kind, a missing one for a kind with rules makes its lists carry labels.
    settings_only["releasePrefixes"] = serde_json::json!({"Monitoring": "monitoring-"});
    let report =
        preflight::run(&policy, dump, &settings_only, &|_, _| {}).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(report.findings(), 3, "{}", report.text(false));
    let text = report.text(false);
    for line in [
        "  ApplicationDefinition monitoring [fail] releasePrefixes.Monitoring is \"monitoring-\", but ApplicationDefinition monitoring states spec.release.prefix \"\": the policy would name every Monitoring release wrongly; set releasePrefixes.Monitoring: \"\"\n",
        "  ApplicationDefinition etcd [warn] ApplicationDefinition etcd states spec.release.prefix \"\" for Etcd, which has rules in the settings, and releasePrefixes has no entry for it: the policy reads Etcd's release names from their labels, about 4x the bytes per list; set releasePrefixes.Etcd: \"\"\n",
    ] {
        assert!(text.contains(line), "{text}");
    }

    let cli = |dump: &str| {
        Command::new(env!("CARGO_BIN_EXE_cozystack-e2e"))
            .args(["preflight", "--settings"])
            .arg(&settings_path)
            .arg(dir().join(dump))
            .output()
            .unwrap_or_else(|e| panic!("{e}"))
    };
    let problems = cli("problems.yaml");
    assert_eq!(problems.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&problems.stdout),
        committed("problems.txt")
    );
    // Piped, stderr carries no progress bar: the dump's size, then one closing line.
    let stderr = String::from_utf8_lossy(&problems.stderr);
    assert!(
        stderr.starts_with("read 20 objects in ")
            && stderr.contains("\nreplayed 16 objects, done in ")
            && stderr.lines().count() == 2,
        "{stderr}"
    );
    assert_eq!(cli("clean.yaml").status.code(), Some(0));
    let missing = cli("no-such-dump.yaml");
    assert_eq!(missing.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(
        stderr.contains("no-such-dump.yaml: No such file"),
        "{stderr}"
    );
}
