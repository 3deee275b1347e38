//! Everything that ships must agree: versions, rules and context-aware resources across
//! Cargo.toml, policy-metadata.yml, artifacthub-pkg.yml and deploy/; the manifests must parse
//! as the ClusterAdmissionPolicy CRD expects; the RBAC must cover every lookup.

use std::collections::{BTreeMap, BTreeSet};
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
    // The chart ships this release: its version, and the tag it deploys.
    let chart: Value =
        serde_yaml::from_str(&read("charts/cozystack-capabilities/Chart.yaml")).unwrap();
    assert_eq!(chart["version"], version.as_str(), "Chart.yaml version");
    assert_eq!(
        chart["appVersion"],
        format!("v{version}").as_str(),
        "Chart.yaml appVersion"
    );
    let js: Value = serde_json::from_str(&read("js/package.json")).unwrap();
    assert_eq!(js["version"], version.as_str(), "js/package.json version");
    // The changelog says what this version changed.
    assert!(
        read("CHANGELOG.md").contains(&format!("\n## [{version}] - ")),
        "CHANGELOG.md has no section ## [{version}] - DATE"
    );
}

/// The release workflow runs on a `v*` tag, and `make release-check` (its first step) takes
/// exactly the tag of the version the repository states, refusing another version and a tag
/// that is no version, each with its own line.
#[test]
fn a_release_tag_is_the_stated_version() {
    let workflow: Value = serde_yaml::from_str(&read(".github/workflows/release.yml")).unwrap();
    // YAML 1.1 reads the key `on` as true.
    let on = workflow
        .get("on")
        .or_else(|| workflow.get("true"))
        .expect("on:");
    assert_eq!(
        on["push"]["tags"],
        serde_json::json!(["v*"]),
        "release.yml tags"
    );
    assert!(
        on["push"].get("branches").is_none(),
        "release.yml runs on tags alone"
    );
    let check = |tag: &str| {
        std::process::Command::new("make")
            .current_dir(root())
            .args(["-s", "release-check", &format!("TAG={tag}")])
            .output()
            .unwrap_or_else(|e| panic!("make: {e}"))
    };
    let version = version();
    let ok = check(&format!("v{version}"));
    assert_eq!(
        ok.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&ok.stdout)
    );
    // make exits 2 whenever a recipe fails: the line says which refusal.
    let refused = |tag: &str, said: &str| {
        let out = check(tag);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert_eq!(out.status.code(), Some(2), "{tag:?}: {stdout}");
        assert!(stdout.contains(said), "{tag:?}: {stdout}");
    };
    refused(
        "v0.0.1",
        &format!("the tag v0.0.1 is not v{version}, the version the repository states"),
    );
    for bad in [version.as_str(), "vnext", ""] {
        refused(bad, "is no release tag: vMAJOR.MINOR.PATCH");
    }
}

/// The workflow that signs is the release workflow of this repository, the identity
/// deploy/verification-config.yaml requires: it holds the OIDC token, signs the module and the
/// SBOM keyless after the tag check and the tests, its actions pinned by commit.
#[test]
fn the_signing_workflow_is_the_identity_the_verification_config_requires() {
    let text = read(".github/workflows/release.yml");
    let workflow: Value = serde_yaml::from_str(&text).unwrap();
    let job = &workflow["jobs"]["release"];
    assert_eq!(
        job["permissions"]["id-token"], "write",
        "keyless signing needs the OIDC token"
    );
    assert_eq!(
        workflow["permissions"],
        serde_json::json!({}),
        "no permission outside the job"
    );
    let runs: Vec<&str> = job["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .filter_map(|step| step["run"].as_str())
        .collect();
    for (what, needle) in [
        ("checks the tag", "make release-check"),
        ("runs the tests", "make test"),
        ("pushes with make", "make -s push"),
        (
            "signs the module keyless",
            "cosign sign --yes \"$(jq -r .immutableRef",
        ),
        (
            "signs the SBOM keyless",
            "cosign sign --yes \"$(jq -r .sbom",
        ),
        ("publishes the release", "gh release create"),
    ] {
        assert!(
            runs.iter().any(|r| r.contains(needle)),
            "release.yml {what}: no step runs {needle}"
        );
    }
    // Every action pinned by a full commit.
    for line in text
        .lines()
        .filter(|l| l.trim_start().starts_with("- uses:") || l.trim_start().starts_with("uses:"))
    {
        let reference = line.split('@').nth(1).unwrap_or_default();
        let sha = reference.split_whitespace().next().unwrap_or_default();
        assert!(
            sha.len() == 40 && sha.chars().all(|c| c.is_ascii_hexdigit()),
            "release.yml: {line} is not pinned by commit"
        );
    }
    // Its identity, this repository's release workflow, is what the verification config
    // requires: the_verification_config_requires_the_project_release_workflow.
    assert_eq!(
        workflow["name"], "release",
        "the workflow the certificate names"
    );
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
        assert_eq!(
            spec.settings,
            serde_json::json!({"platformWriters": "warn", "definitionSource": "builtin"}),
            "{path}: a stock install carries nothing the built-in rule set holds"
        );
        assert_eq!(
            stock_rules(&settings),
            stock_rules(&bundled_settings()),
            "{path}: its settings give other rules than e2e/cluster/settings.yaml"
        );
    }
}

/// What each manifest's header promises is what its spec does: monitor refuses nothing, not even
/// when the policy-server cannot answer (`Ignore`); protect fails closed. Both carry one name, so
/// applying protect over monitor switches that one policy in place (monitor to protect is the
/// direction Kubewarden allows) and two policies never judge the same write.
#[test]
fn each_manifest_s_mode_failure_policy_and_header_agree() {
    let header = |path: &str| -> String {
        read(path)
            .lines()
            .take_while(|line| line.starts_with('#'))
            .map(|line| line.trim_start_matches('#').trim())
            .collect::<Vec<_>>()
            .join(" ")
    };
    let mut names = BTreeSet::new();
    let mut specs = Vec::new();
    for (path, policy) in policies() {
        let header = header(&path);
        let spec = &policy.spec;
        let (mode, failure, promise) = match spec.mode {
            Mode::Monitor => (
                "Monitor mode",
                "failurePolicy: Ignore",
                "nothing is refused, not even while the policy-server is down or slow",
            ),
            Mode::Protect => (
                "Protect mode",
                "failurePolicy: Fail",
                "denials reject the request, and so does a policy-server that cannot answer",
            ),
        };
        assert!(header.starts_with(mode), "{path}: {header}");
        assert!(header.contains(failure), "{path}: {header}");
        assert!(header.contains(promise), "{path}: {header}");
        let expected = match spec.mode {
            Mode::Monitor => FailurePolicy::Ignore,
            Mode::Protect => FailurePolicy::Fail,
        };
        assert_eq!(spec.failure_policy, expected, "{path}");
        names.insert(policy.metadata.name.clone());
        let mut value: Value = serde_yaml::from_str(&read(&path)).unwrap();
        let spec = value["spec"].as_object_mut().unwrap();
        spec.remove("mode");
        spec.remove("failurePolicy");
        specs.push(value);
    }
    assert_eq!(
        names,
        BTreeSet::from(["cozystack-capabilities".to_owned()]),
        "one policy, switched from monitor to protect in place"
    );
    assert_eq!(
        specs[0], specs[1],
        "the manifests differ only in mode and failurePolicy"
    );
}

/// No settings at all judge as the deployed ones: `{}` is the stock deployment.
#[test]
fn empty_settings_are_the_deployed_ones() {
    let deployed = serde_json::to_string(&policies()[0].1.spec.settings).unwrap();
    assert_eq!(
        cozystack_resolver::Settings::from_json("{}").unwrap(),
        cozystack_resolver::Settings::from_json(&deployed).unwrap()
    );
    assert_eq!(stock_rules("{}"), stock_rules(&deployed));
}

fn bundled_settings() -> String {
    let bundled: Value = serde_yaml::from_str(&read("e2e/cluster/settings.yaml")).unwrap();
    serde_json::to_string(&bundled).unwrap()
}

/// The rules every kind gets under `settings` in the bundled cluster (its ApplicationDefinitions
/// as today's CRD serves them: the prefix, no rule fields), kind by kind; a kind without a
/// definition has no prefix to state, which the built-in set writes `""`.
fn stock_rules(settings: &str) -> BTreeMap<String, Option<cozystack_resolver::KindRules>> {
    use cozystack_resolver::{Definition, DefinitionSet, DefinitionSource, Settings};
    let settings = Settings::from_json(settings).unwrap();
    let definitions: Vec<Definition> =
        serde_yaml::Deserializer::from_str(&read("e2e/cluster/definitions.yaml"))
            .map(|d| Value::deserialize(d).unwrap())
            .filter(|d| d["kind"] == "ApplicationDefinition")
            .map(|d| {
                let name = d["metadata"]["name"].as_str().unwrap();
                let mut definition =
                    Definition::new(name, d["spec"]["application"]["kind"].as_str().unwrap());
                definition.release_prefix =
                    d["spec"]["release"]["prefix"].as_str().map(str::to_owned);
                definition
            })
            .collect();
    let kinds: BTreeSet<String> = definitions
        .iter()
        .map(|d| d.kind.clone())
        .chain(settings.definitions.kinds().map(str::to_owned))
        .chain(
            cozystack_resolver::model::builtin::KINDS
                .iter()
                .map(|k| k.kind.to_owned()),
        )
        .collect();
    let set = match settings.definition_source {
        DefinitionSource::Builtin => cozystack_resolver::model::builtin::definitions(
            Box::new(cozystack_resolver::listing::Unread),
            &settings.definitions,
            &settings.release_prefixes,
        ),
        _ => DefinitionSet::build(definitions, &settings.definitions),
    };
    kinds
        .into_iter()
        .map(|kind| {
            let rules = set.get(&kind).unwrap().cloned().map(|mut rules| {
                rules.release_prefix.get_or_insert_with(String::new);
                rules
            });
            (kind, rules)
        })
        .collect()
}

/// The built-in rule set, which `resolver/build.rs` compiles from the stock rule set
/// (`resolver/stock-rules.yaml`), gives every kind the rules `e2e/cluster/settings.yaml` spells out and
/// the release prefix of its ApplicationDefinition, so the table, the bundled settings and the
/// deploy manifests' `definitionSource: builtin` cannot disagree; settings blocks override it
/// block by block.
#[test]
fn the_builtin_rule_set_is_the_bundled_settings() {
    let builtin = stock_rules(r#"{"definitionSource": "builtin"}"#);
    assert_eq!(builtin, stock_rules(&bundled_settings()));
    assert!(builtin.values().flatten().count() >= 11, "{builtin:?}");
    // A kind's block overrides that block only; a block for a kind the set lacks adds it.
    let patched = stock_rules(
        r#"{"definitionSource": "builtin", "definitions": {"Monitoring": {"cardinality": {"scope": "tenant", "max": 2}}, "Redis": {"cardinality": {"scope": "namespace", "max": 1}}}, "releasePrefixes": {"Bucket": "b-"}}"#,
    );
    let monitoring = patched["Monitoring"].as_ref().unwrap();
    let stock = builtin["Monitoring"].as_ref().unwrap();
    assert_eq!(
        monitoring
            .cardinality
            .as_ref()
            .map(|c| (c.max, c.slots.is_none())),
        Some((2, true))
    );
    assert_eq!(
        (
            &monitoring.capability,
            monitoring.deletion,
            monitoring.visibility
        ),
        (&stock.capability, stock.deletion, stock.visibility)
    );
    assert!(patched["Redis"].is_some() && builtin["Redis"].is_none());
    assert_eq!(
        patched["Bucket"]
            .as_ref()
            .unwrap()
            .release_prefix
            .as_deref(),
        Some("b-")
    );
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
        Some(&read("CHANGELOG.md")),
    )
    .unwrap();
    assert!(
        committed == generated,
        "artifacthub-pkg.yml is out of date: run `make artifacthub-pkg.yml`"
    );
}

/// The GitHub owner and repository `[workspace.package] repository` names.
fn github_repository() -> (String, String) {
    let repository = read("Cargo.toml")
        .lines()
        .find_map(|l| l.strip_prefix("repository = \""))
        .and_then(|l| l.strip_suffix('"'))
        .expect("[workspace.package] repository")
        .to_owned();
    let (owner, repo) = repository
        .trim_start_matches("https://github.com/")
        .split_once('/')
        .expect("a GitHub repository");
    (owner.to_owned(), repo.to_owned())
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
        .filter(|name| name.ends_with(".md"))
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

/// deploy/'s verification config is Kubewarden's format, requires the project's release
/// workflow (the repository Cargo.toml names), and keeps Kubewarden's own policies loading on
/// the same PolicyServer.
#[test]
fn the_verification_config_requires_the_project_release_workflow() {
    use cozystack_packaging::verification::{Requirement, VerificationConfig};
    let path = cozystack_packaging::artifacthub::VERIFICATION_CONFIG;
    let config = VerificationConfig::read(&read(path), path).unwrap_or_else(|e| panic!("{e}"));
    let (owner, repo) = github_repository();
    let repository = format!("https://github.com/{owner}/{repo}");
    let any = config.any_of.expect("anyOf");
    assert_eq!(any.minimum_matches, 1);
    let actions: Vec<(String, Option<String>)> = any
        .signatures
        .iter()
        .map(|r| match r {
            Requirement::GithubAction { owner, repo, .. } => (owner.clone(), repo.clone()),
            other => panic!("{path}: unexpected requirement {other:?}"),
        })
        .collect();
    assert!(
        actions.contains(&(owner.to_owned(), Some(repo.to_owned()))),
        "{path} does not require {repository}'s release workflow: {actions:?}"
    );
    assert!(
        actions.contains(&("kubewarden".to_owned(), None)),
        "{path} would stop Kubewarden's own policies on the same PolicyServer: {actions:?}"
    );
    assert!(
        config.all_of.is_empty(),
        "{path}: allOf would bind every policy of the server"
    );
}
