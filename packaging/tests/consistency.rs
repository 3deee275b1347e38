//! Everything that ships must agree: versions, rules and context-aware resources across
//! Cargo.toml, policy-metadata.yml, artifacthub-pkg.yml and deploy/; the manifests must parse
//! as the ClusterAdmissionPolicy CRD expects; the RBAC must cover every lookup.

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde::Deserialize;
use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn metadata() -> Value {
    cozystack_packaging::metadata::from_yaml(&read("policy-metadata.yml")).unwrap()
}

fn version() -> String {
    metadata()["annotations"]["io.kubewarden.policy.version"]
        .as_str()
        .unwrap()
        .to_owned()
}

// The ClusterAdmissionPolicy fields (policies.kubewarden.io/v1); unknown ones are errors.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ClusterAdmissionPolicy {
    api_version: String,
    kind: String,
    metadata: ObjectMeta,
    spec: Spec,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ObjectMeta {
    name: String,
    #[serde(default)]
    #[allow(dead_code)]
    annotations: std::collections::BTreeMap<String, String>,
}

#[derive(Deserialize, PartialEq, Eq, Debug)]
#[serde(rename_all = "lowercase")]
enum Mode {
    Protect,
    Monitor,
}

#[derive(Deserialize, PartialEq, Eq, Debug)]
enum FailurePolicy {
    Fail,
    Ignore,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MatchCondition {
    name: String,
    expression: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[allow(dead_code)]
struct Spec {
    module: String,
    mode: Mode,
    #[serde(default)]
    policy_server: Option<String>,
    mutating: bool,
    #[serde(default)]
    background_audit: Option<bool>,
    failure_policy: FailurePolicy,
    #[serde(default)]
    match_policy: Option<String>,
    #[serde(default)]
    timeout_seconds: Option<u32>,
    #[serde(default)]
    timeout_eval_seconds: Option<u32>,
    rules: Vec<Value>,
    context_aware_resources: Vec<Value>,
    #[serde(default)]
    namespace_selector: Option<Value>,
    #[serde(default)]
    object_selector: Option<Value>,
    #[serde(default)]
    match_conditions: Vec<MatchCondition>,
    #[serde(default)]
    message: Option<String>,
    settings: Value,
}

fn policies() -> Vec<(String, ClusterAdmissionPolicy)> {
    ["deploy/policy-protect.yaml", "deploy/policy-monitor.yaml"]
        .iter()
        .map(|p| {
            (
                p.to_string(),
                serde_yaml::from_str(&read(p)).unwrap_or_else(|e| panic!("{p}: {e}")),
            )
        })
        .collect()
}

#[test]
fn versions_agree() {
    let version = version();
    let cargo: toml_version::Manifest = toml_version::parse(&read("Cargo.toml"));
    assert_eq!(
        cargo.workspace_version, version,
        "Cargo.toml [workspace.package] version"
    );
    let package: Value = serde_yaml::from_str(&read("artifacthub-pkg.yml")).unwrap();
    assert_eq!(package["version"], version.as_str());
    assert!(
        package["containersImages"][0]["image"]
            .as_str()
            .unwrap()
            .ends_with(&format!(":v{version}"))
    );
    for (path, policy) in policies() {
        assert!(
            policy.spec.module.ends_with(&format!(":v{version}")),
            "{path}: module tag"
        );
    }
}

#[test]
fn manifests_match_the_metadata() {
    let metadata = metadata();
    let modes: BTreeSet<String> = policies()
        .iter()
        .map(|(_, p)| format!("{:?}", p.spec.mode))
        .collect();
    assert_eq!(
        modes,
        BTreeSet::from(["Monitor".to_owned(), "Protect".to_owned()])
    );
    for (path, policy) in policies() {
        assert_eq!(policy.api_version, "policies.kubewarden.io/v1", "{path}");
        assert_eq!(policy.kind, "ClusterAdmissionPolicy", "{path}");
        assert!(
            policy.metadata.name.starts_with("cozystack-capabilities"),
            "{path}"
        );
        let spec = &policy.spec;
        assert_eq!(
            serde_json::to_value(&spec.rules).unwrap(),
            metadata["rules"],
            "{path}: rules"
        );
        assert_eq!(
            serde_json::to_value(&spec.context_aware_resources).unwrap(),
            metadata["contextAwareResources"],
            "{path}: contextAwareResources"
        );
        assert_eq!(
            Some(spec.mutating),
            metadata["mutating"].as_bool(),
            "{path}"
        );
        assert_eq!(
            spec.background_audit,
            metadata["backgroundAudit"].as_bool(),
            "{path}"
        );
        assert_eq!(spec.failure_policy, FailurePolicy::Fail, "{path}");
        assert!(
            spec.module.starts_with("registry://"),
            "{path}: module scheme"
        );
        let timeout = spec.timeout_seconds.unwrap_or(10);
        assert!((2..=30).contains(&timeout), "{path}: timeoutSeconds");
        let eval = spec.timeout_eval_seconds.unwrap_or(timeout);
        assert!(
            (2..=30).contains(&eval) && eval <= timeout,
            "{path}: timeoutEvalSeconds"
        );
        assert!(
            spec.match_conditions.len() <= 64,
            "{path}: at most 64 matchConditions"
        );
        let names: BTreeSet<_> = spec.match_conditions.iter().map(|m| &m.name).collect();
        assert_eq!(
            names.len(),
            spec.match_conditions.len(),
            "{path}: matchCondition names are unique"
        );
        assert!(
            spec.match_conditions
                .iter()
                .all(|m| !m.expression.trim().is_empty())
        );
        assert_ne!(
            spec.match_policy.as_deref(),
            Some("Exact"),
            "{path}: keep matchPolicy Equivalent"
        );
        let settings = serde_json::to_string(&spec.settings).unwrap();
        cozystack_resolver::Settings::from_json(&settings)
            .unwrap_or_else(|e| panic!("{path}: settings: {e}"));
        let bundled: Value = serde_yaml::from_str(&read("e2e/cluster/settings.yaml")).unwrap();
        assert_eq!(
            spec.settings, bundled,
            "{path}: settings differ from e2e/cluster/settings.yaml"
        );
    }
}

/// Whether the ClusterRole of `path` grants every one of `verbs` on `plural` in `group`.
fn grants(path: &str, group: &str, plural: &str, verbs: &[&str]) -> bool {
    let docs: Vec<Value> = serde_yaml::Deserializer::from_str(&read(path))
        .map(|d| Value::deserialize(d).unwrap())
        .collect();
    let role = docs
        .iter()
        .find(|d| d["kind"] == "ClusterRole")
        .unwrap_or_else(|| panic!("{path}: a ClusterRole"));
    role["rules"].as_array().unwrap().iter().any(|rule| {
        let has = |key: &str, v: &str| rule[key].as_array().unwrap().iter().any(|x| x == v);
        has("apiGroups", group) && has("resources", plural) && verbs.iter().all(|v| has("verbs", v))
    })
}

/// (group, plural) of every context-aware resource of the metadata.
fn context_aware_resources() -> Vec<(String, String)> {
    metadata()["contextAwareResources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|resource| {
            let api = resource["apiVersion"].as_str().unwrap();
            let group = api.rsplit_once('/').map_or("", |(g, _)| g);
            let plural = format!("{}s", resource["kind"].as_str().unwrap().to_lowercase());
            (group.to_owned(), plural)
        })
        .collect()
}

#[test]
fn rbac_covers_every_context_aware_resource() {
    for (group, plural) in context_aware_resources() {
        assert!(
            grants(
                "deploy/rbac.yaml",
                &group,
                &plural,
                &["get", "list", "watch"]
            ),
            "deploy/rbac.yaml does not grant get/list/watch on {plural} ({group})"
        );
        // The operator's tool lists the same kinds, cluster-wide.
        assert!(
            grants("deploy/preflight-rbac.yaml", &group, &plural, &["list"]),
            "deploy/preflight-rbac.yaml does not grant list on {plural} ({group})"
        );
    }
    assert!(
        grants(
            "deploy/preflight-rbac.yaml",
            "policies.kubewarden.io",
            "clusteradmissionpolicies",
            &["get"]
        ),
        "deploy/preflight-rbac.yaml does not grant get on clusteradmissionpolicies (--from-policy)"
    );
}

#[test]
fn artifacthub_package_is_current() {
    let committed = read("artifacthub-pkg.yml");
    let created = cozystack_packaging::artifacthub::created_at(&committed).expect("createdAt");
    let generated = cozystack_packaging::artifacthub::package(
        &metadata(),
        &created,
        Some(&read("questions-ui.yml")),
    )
    .unwrap();
    assert!(
        committed == generated,
        "artifacthub-pkg.yml is out of date: run `make artifacthub-pkg.yml`"
    );
}

/// The one line of Cargo.toml this test reads, without a TOML parser dependency.
mod toml_version {
    pub struct Manifest {
        pub workspace_version: String,
    }

    pub fn parse(text: &str) -> Manifest {
        let section = text
            .split("[workspace.package]")
            .nth(1)
            .expect("[workspace.package]");
        let line = section
            .lines()
            .find(|l| l.trim_start().starts_with("version"))
            .expect("version");
        let version = line.split('"').nth(1).expect("quoted version").to_owned();
        Manifest {
            workspace_version: version,
        }
    }
}

/// The stock rule set (`docs/stock-rules.md`), one row per kind, is what `e2e/cluster/settings.yaml` (and so
/// `deploy/`, checked above) carries: a kind, a block or a class in one and not the other fails.
#[test]
fn the_stock_rule_table_is_the_bundled_settings() {
    use cozystack_resolver::kinds::RuleFields;
    use std::collections::BTreeMap;

    let section = read("docs/stock-rules.md");
    let rows = section
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2);
    let none = |cell: &str| cell.is_empty() || cell == "—";
    let list = |cell: &str| -> Vec<String> {
        if none(cell) {
            Vec::new()
        } else {
            cell.split(',').map(|c| c.trim().to_owned()).collect()
        }
    };
    let mut table: BTreeMap<String, Value> = BTreeMap::new();
    for row in rows {
        let cells: Vec<&str> = row.trim_matches('|').split('|').map(str::trim).collect();
        let [
            kind,
            visibility,
            cardinality,
            protection,
            provides,
            consumes,
            share,
            _read_in,
            slots,
            _named_by,
        ] = cells[..]
        else {
            panic!("a stock rule row has 10 cells: {row}");
        };
        let mut fields = serde_json::Map::new();
        if visibility != "catalog" {
            fields.insert(
                "dashboard".into(),
                serde_json::json!({"visibility": visibility}),
            );
        }
        if let Some((scope, max)) = cardinality.split_once('/') {
            let max: u32 = max.parse().unwrap_or_else(|e| panic!("{row}: {e}"));
            let mut block = serde_json::json!({"scope": scope, "max": max});
            // `name`, or `name (in namespace)` for a cluster scope's slotNamespace.
            if !none(slots) {
                let (names, namespace) = match slots.split_once(" (in ") {
                    Some((names, ns)) => (names, Some(ns.trim_end_matches(')'))),
                    None => (slots, None),
                };
                block["slots"] = serde_json::json!(list(names));
                if let Some(namespace) = namespace {
                    block["slotNamespace"] = namespace.into();
                }
            }
            fields.insert("cardinality".into(), block);
        }
        if !none(protection) {
            let (key, value) = protection
                .split_once(": ")
                .unwrap_or_else(|| panic!("{row}: protection is `deletion: …` or `edit: …`"));
            fields.insert("protection".into(), serde_json::json!({key: value}));
        }
        let (provides, consumes) = (list(provides), list(consumes));
        if !provides.is_empty() || !consumes.is_empty() || !none(share) {
            let mut capability = serde_json::Map::new();
            if !provides.is_empty() {
                capability.insert("provides".into(), serde_json::json!(provides));
            }
            if !consumes.is_empty() {
                capability.insert("consumes".into(), serde_json::json!(consumes));
            }
            if !none(share) {
                capability.insert("share".into(), share.into());
            }
            fields.insert("capability".into(), Value::Object(capability));
        }
        table.insert(kind.trim_matches('`').to_owned(), Value::Object(fields));
    }
    assert!(table.len() >= 10, "the table was not read: {table:?}");
    let decode = |value: &Value| -> BTreeMap<String, RuleFields> {
        serde_json::from_value(value.clone()).unwrap_or_else(|e| panic!("{e}: {value}"))
    };
    let bundled: Value = serde_yaml::from_str(&read("e2e/cluster/settings.yaml")).unwrap();
    let expected = decode(&serde_json::to_value(&table).unwrap());
    let actual = decode(&bundled["definitions"]);
    for kind in expected
        .keys()
        .chain(actual.keys())
        .collect::<BTreeSet<_>>()
    {
        assert_eq!(
            expected.get(kind),
            actual.get(kind),
            "{kind}: docs/stock-rules.md and e2e/cluster/settings.yaml disagree"
        );
    }
}

/// Every reference page Artifact Hub links to exists, and the README links every page of docs/.
#[test]
fn the_documentation_links_resolve() {
    for (name, path) in cozystack_packaging::artifacthub::DOCS {
        assert!(
            root().join(path).is_file(),
            "Artifact Hub link {name:?} names {path}, which does not exist"
        );
    }
    let readme = read("README.md");
    let mut pages: Vec<String> = std::fs::read_dir(root().join("docs"))
        .expect("docs/")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    pages.sort();
    assert!(pages.len() >= 8, "{pages:?}");
    for page in pages {
        assert!(
            readme.contains(&format!("](docs/{page})")),
            "the README does not link docs/{page}"
        );
    }
}
