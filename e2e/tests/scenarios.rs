//! Every scenario under `e2e/scenarios` through the built `policy.wasm`, and the kwctl export
//! kept current. Needs `make policy.wasm` (or `POLICY_WASM`) first; `make e2e` does both.

use cozystack_e2e::scenario::{self, Bundle};
use cozystack_e2e::{export, policy_path, workspace};
use cozystack_policy_runtime::policy::Policy;

fn setup() -> (Policy, Bundle) {
    let root = workspace();
    let policy = Policy::load_annotated(&policy_path()).unwrap_or_else(|e| panic!("{e}"));
    let bundle = Bundle::load(&root.join("e2e/cluster")).unwrap_or_else(|e| panic!("{e}"));
    (policy, bundle)
}

#[test]
fn every_scenario_meets_its_expectation() {
    let (policy, bundle) = setup();
    let scenarios =
        scenario::load_dir(&workspace().join("e2e/scenarios")).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        scenarios.len() >= 40,
        "the suite has shrunk to {} scenarios",
        scenarios.len()
    );
    let mut failures = Vec::new();
    for (file, s) in &scenarios {
        let outcome =
            scenario::run(&policy, &bundle, s).unwrap_or_else(|e| panic!("{}: {e}", s.name));
        if !outcome.passed() {
            failures.push(format!(
                "{} ({}):\n  {}",
                s.name,
                file.display(),
                outcome.problems.join("\n  ")
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} scenarios failed:\n{}",
        failures.len(),
        scenarios.len(),
        failures.join("\n")
    );
}

#[test]
fn the_host_reads_the_metadata_from_the_annotated_module() {
    let (policy, _) = setup();
    assert_eq!(policy.protocol_version().unwrap(), "v1");
    let kinds: Vec<String> = policy
        .metadata
        .context_aware_resources
        .iter()
        .map(|r| format!("{}/{}", r.api_version, r.kind))
        .collect();
    assert_eq!(
        kinds,
        [
            "cozystack.io/v1alpha1/ApplicationDefinition",
            "helm.toolkit.fluxcd.io/v2/HelmRelease",
            "v1/Namespace"
        ]
    );
    assert_eq!(policy.metadata.rules.len(), 4);
}

#[test]
fn the_demo_plays() {
    let (policy, bundle) = setup();
    let scenarios =
        scenario::load_file(&workspace().join("e2e/demo.yaml")).unwrap_or_else(|e| panic!("{e}"));
    let text =
        cozystack_e2e::demo::play(&policy, &bundle, &scenarios).unwrap_or_else(|e| panic!("{e}"));
    assert!(text.contains("DENIED (403)"), "{text}");
    assert!(text.contains("ALLOWED with warning"), "{text}");
}

#[test]
fn the_kwctl_export_is_current() {
    let (policy, bundle) = setup();
    let root = workspace();
    let scenarios: Vec<_> = scenario::load_dir(&root.join("e2e/scenarios"))
        .unwrap()
        .into_iter()
        .map(|(_, s)| s)
        .collect();
    let files = export::export_all(&policy, &bundle, &scenarios).unwrap_or_else(|e| panic!("{e}"));
    let dir = root.join("e2e/kwctl");
    let mut stale = Vec::new();
    for (path, content) in &files {
        if std::fs::read_to_string(dir.join(path)).ok().as_deref() != Some(content.as_str()) {
            stale.push(path.clone());
        }
    }
    let on_disk = walk(&dir);
    let extra: Vec<_> = on_disk.iter().filter(|p| !files.contains_key(*p)).collect();
    assert!(
        stale.is_empty() && extra.is_empty(),
        "e2e/kwctl is out of date (run `make export`): stale {stale:?}, extra {extra:?}"
    );
}

fn walk(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            for sub in walk(&path) {
                out.push(format!("{}/{sub}", entry.file_name().to_string_lossy()));
            }
        } else {
            out.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    out
}
