//! Scenarios: a fixture cluster, settings, one admission request and the expected verdict,
//! in YAML an operator can read. Requests may be written in a short form that expands to the
//! AdmissionRequest the API server would send.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use regex::Regex;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use cozystack_policy_runtime::cluster::ClusterObjects;
use cozystack_policy_runtime::host::{Exchange, Failure};
use cozystack_policy_runtime::policy::{Evaluation, Policy, payload};

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Scenario {
    pub name: String,
    /// What the scenario shows, for the operator reading it (and the demo's narration).
    #[serde(default)]
    pub description: String,
    /// Start from the bundled example cluster (default) or from an empty one.
    #[serde(default = "default_true")]
    pub bundled_cluster: bool,
    /// Manifests added to (or replacing objects of) the cluster.
    #[serde(default)]
    pub apply: Vec<Value>,
    /// Objects removed from the cluster: `Kind/name` or `Kind/namespace/name`.
    #[serde(default)]
    pub remove: Vec<String>,
    /// The bundled cluster as this Cozystack release renders it (`e2e/releases/<release>`),
    /// under the bundled settings naming it in `cozystackRelease`.
    #[serde(default)]
    pub release: Option<String>,
    /// Policy settings; the bundled `e2e/cluster/settings.yaml` when absent.
    #[serde(default)]
    pub settings: Option<Value>,
    /// Merged into the settings (bundled or given), to change one field.
    #[serde(default)]
    pub settings_patch: Option<Value>,
    /// Host calls that fail.
    #[serde(default)]
    pub host_failures: Vec<Failure>,
    /// The request in short form …
    #[serde(default)]
    pub request: Option<ShortRequest>,
    /// … or a full AdmissionRequest …
    #[serde(default)]
    pub admission_request: Option<Value>,
    /// … or raw payload bytes handed to `validate` as they are …
    #[serde(default)]
    pub raw_payload: Option<String>,
    /// … or an object of the cluster (`Kind/name`, `Kind/namespace/name`) replayed as
    /// Kubewarden's audit scanner replays it.
    #[serde(default)]
    pub replay: Option<String>,
    pub expect: Expect,
}

fn default_true() -> bool {
    true
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ShortRequest {
    pub operation: String,
    /// An application kind (`Monitoring`), `HelmRelease` or `Namespace`.
    pub kind: String,
    #[serde(default)]
    pub namespace: String,
    pub name: String,
    pub user: String,
    #[serde(default)]
    pub groups: Vec<String>,
    /// Labels of a new object (CREATE).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Labels set (string) or removed (null) on the existing object (UPDATE).
    #[serde(default)]
    pub set_labels: BTreeMap<String, Option<String>>,
    /// Merged into the generated object.
    #[serde(default)]
    pub object: Option<Value>,
    /// Replaces the generated old object.
    #[serde(default)]
    pub old_object: Option<Value>,
    #[serde(default)]
    pub dry_run: bool,
    #[serde(default)]
    pub sub_resource: Option<String>,
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Expect {
    #[serde(default)]
    pub allowed: Option<bool>,
    #[serde(default)]
    pub code: Option<u16>,
    /// The exact message.
    #[serde(default)]
    pub message: Option<String>,
    /// A regular expression the message must match.
    #[serde(default)]
    pub message_matches: Option<String>,
    /// The row of the rule table that refused, by its stable name.
    #[serde(default)]
    pub rule: Option<String>,
    /// Rows any one of which may refuse (a counterexample: the rule it broke, or a row before it
    /// that the writer must clear first).
    #[serde(default)]
    pub rule_in: Option<Vec<String>>,
    /// The exact warnings (an empty list: none).
    #[serde(default)]
    pub warnings: Option<Vec<String>>,
    /// Regular expressions, one per warning, in order.
    #[serde(default)]
    pub warnings_match: Option<Vec<String>>,
    /// Rows of the rule table each of which must have warned (among others): a counterexample
    /// of a missing warning, whose wording is the module's.
    #[serde(default)]
    pub warned_by: Option<Vec<String>>,
    /// The rows whose refusal a platform writer was let through with a warning, exactly (the
    /// response's `waived-by`): stated wherever one is.
    #[serde(default)]
    pub waived_by: Option<Vec<String>>,
    /// Exact number of host calls.
    #[serde(default)]
    pub host_calls: Option<usize>,
    /// `validate_settings` verdict (default: valid).
    #[serde(default)]
    pub settings_valid: Option<bool>,
    #[serde(default)]
    pub settings_message: Option<String>,
}

/// A scenario file: a list of scenarios.
pub fn load_file(path: &Path) -> Result<Vec<Scenario>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_yaml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Every `*.yaml` in a directory, in name order, with the file each came from.
pub fn load_dir(dir: &Path) -> Result<Vec<(PathBuf, Scenario)>, String> {
    let mut all = Vec::new();
    for path in crate::yaml_files(dir)? {
        for scenario in load_file(&path)? {
            all.push((path.clone(), scenario));
        }
    }
    let mut names = std::collections::BTreeSet::new();
    for (_, s) in &all {
        if !names.insert(s.name.clone()) {
            return Err(format!("duplicate scenario name {:?}", s.name));
        }
    }
    Ok(all)
}

fn merge(target: &mut Value, patch: &Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                merge(t.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
        (t, p) => *t = p.clone(),
    }
}

fn plural_of(cluster: &ClusterObjects, kind: &str) -> String {
    cluster
        .values()
        .find(|o| {
            o["kind"] == "ApplicationDefinition"
                && o.pointer("/spec/application/kind").and_then(Value::as_str) == Some(kind)
        })
        .and_then(|o| {
            o.pointer("/spec/application/plural")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .unwrap_or_else(|| format!("{}s", kind.to_lowercase()))
}

fn set_labels(object: &mut Value, labels: &BTreeMap<String, Option<String>>) {
    if labels.is_empty() {
        return;
    }
    let meta = object.as_object_mut().and_then(|o| {
        o.entry("metadata")
            .or_insert_with(|| json!({}))
            .as_object_mut()
    });
    if let Some(meta) = meta {
        let current = meta.entry("labels").or_insert_with(|| json!({}));
        if !current.is_object() {
            *current = json!({});
        }
        if let Some(map) = current.as_object_mut() {
            for (k, v) in labels {
                match v {
                    Some(v) => {
                        map.insert(k.clone(), json!(v));
                    }
                    None => {
                        map.remove(k);
                    }
                }
            }
        }
    }
}

impl ShortRequest {
    /// A request with no object patches: the common case of generated workloads and tests.
    pub fn new(
        operation: &str,
        kind: &str,
        namespace: &str,
        name: &str,
        user: &str,
        groups: &[&str],
    ) -> ShortRequest {
        ShortRequest {
            operation: operation.into(),
            kind: kind.into(),
            namespace: namespace.into(),
            name: name.into(),
            user: user.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            ..ShortRequest::default()
        }
    }

    /// The object the request finds: the Namespace or HelmRelease of its name, or an
    /// Application as cozystack-api converts it from its HelmRelease.
    fn existing(
        &self,
        cluster: &ClusterObjects,
        api_version: &str,
        namespace: Option<&str>,
    ) -> Option<Value> {
        match self.kind.as_str() {
            "Namespace" => cluster.get("v1", "Namespace", &self.name, None),
            "HelmRelease" => cluster.get(api_version, "HelmRelease", &self.name, namespace),
            // An Application's old object is converted from its HelmRelease.
            kind => cluster
                .list("helm.toolkit.fluxcd.io/v2", "HelmRelease", namespace, &cozystack_policy_runtime::selector::Selector::parse(&format!(
                    "apps.cozystack.io/application.kind={kind},apps.cozystack.io/application.name={}", self.name
                )).unwrap_or_default())
                .next()
                .map(|hr| {
                    let mut meta = json!({"name": self.name, "namespace": self.namespace});
                    if let Some(ts) = hr.pointer("/metadata/deletionTimestamp") {
                        meta["deletionTimestamp"] = ts.clone();
                    }
                    json!({"apiVersion": api_version, "kind": kind, "metadata": meta,
                           "spec": hr.pointer("/spec/values").cloned().unwrap_or(json!({}))})
                }),
        }
    }

    /// The AdmissionRequest the API server would send for this request on `cluster`.
    pub fn expand(&self, cluster: &ClusterObjects) -> Value {
        let op = self.operation.as_str();
        let (group, version, resource) = match self.kind.as_str() {
            "Namespace" => ("", "v1", "namespaces".to_owned()),
            "HelmRelease" => ("helm.toolkit.fluxcd.io", "v2", "helmreleases".to_owned()),
            kind => ("apps.cozystack.io", "v1alpha1", plural_of(cluster, kind)),
        };
        let api_version = if group.is_empty() {
            version.to_owned()
        } else {
            format!("{group}/{version}")
        };
        let namespace = (self.kind != "Namespace").then_some(self.namespace.as_str());
        let existing = self.existing(cluster, &api_version, namespace);
        let mut fresh =
            json!({"apiVersion": api_version, "kind": self.kind, "metadata": {"name": self.name}});
        if let Some(ns) = namespace {
            fresh["metadata"]["namespace"] = json!(ns);
        }
        if !self.labels.is_empty() {
            fresh["metadata"]["labels"] = json!(self.labels);
        }
        if self.kind != "Namespace" {
            fresh["spec"] = json!({});
        }
        let old = self
            .old_object
            .clone()
            .or_else(|| existing.clone())
            .unwrap_or_else(|| fresh.clone());
        let mut new = match op {
            "CREATE" => fresh,
            _ => old.clone(),
        };
        set_labels(&mut new, &self.set_labels);
        if let Some(patch) = &self.object {
            merge(&mut new, patch);
        }
        let mut request = Map::new();
        request.insert("uid".into(), json!(format!("e2e-{}", self.name)));
        let gvk = json!({"group": group, "version": version, "kind": self.kind});
        let gvr = json!({"group": group, "version": version, "resource": resource});
        request.insert("kind".into(), gvk.clone());
        request.insert("resource".into(), gvr.clone());
        request.insert("requestKind".into(), gvk);
        request.insert("requestResource".into(), gvr);
        if let Some(sub) = &self.sub_resource {
            request.insert("subResource".into(), json!(sub));
            request.insert("requestSubResource".into(), json!(sub));
        }
        request.insert("name".into(), json!(self.name));
        if let Some(ns) = namespace {
            request.insert("namespace".into(), json!(ns));
        }
        request.insert("operation".into(), json!(op));
        request.insert(
            "userInfo".into(),
            json!({"username": self.user, "groups": self.groups}),
        );
        match op {
            "DELETE" => {
                request.insert("oldObject".into(), old);
                request.insert(
                    "options".into(),
                    json!({"apiVersion": "meta.k8s.io/v1", "kind": "DeleteOptions"}),
                );
            }
            "UPDATE" => {
                request.insert("object".into(), new);
                request.insert("oldObject".into(), old);
                request.insert(
                    "options".into(),
                    json!({"apiVersion": "meta.k8s.io/v1", "kind": "UpdateOptions"}),
                );
            }
            _ => {
                request.insert("object".into(), new);
                request.insert(
                    "options".into(),
                    json!({"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}),
                );
            }
        }
        request.insert("dryRun".into(), json!(self.dry_run));
        Value::Object(request)
    }
}

/// The inputs of one scenario, resolved against the bundled cluster and settings.
pub struct Prepared {
    pub cluster: Arc<ClusterObjects>,
    pub settings: Value,
    pub payload: Vec<u8>,
    pub request: Option<Value>,
}

/// The outcome of one scenario, with the inputs it was run on.
pub struct Outcome {
    pub prepared: Prepared,
    pub settings_response: Value,
    pub evaluation: Option<Evaluation>,
    pub problems: Vec<String>,
}

impl Outcome {
    pub fn passed(&self) -> bool {
        self.problems.is_empty()
    }

    pub fn exchanges(&self) -> &[Exchange] {
        self.evaluation.as_ref().map_or(&[], |e| &e.exchanges)
    }
}

/// The bundled cluster keeps every object's managed fields: a GET answers with them, as the API
/// server's does (the reflectors' lists drop them).
const EVERY_OBJECT: cozystack_policy_runtime::cluster::Keep<'static> = Some(&|_| true);

pub struct Bundle {
    pub cluster: ClusterObjects,
    pub settings: Value,
    /// The folder of the release variants (`e2e/releases`).
    releases: PathBuf,
}

impl Bundle {
    /// The bundled example cluster: `e2e/cluster/*.yaml`, settings in `settings.yaml`; its
    /// release variants in `e2e/releases` beside it.
    pub fn load(dir: &Path) -> Result<Bundle, String> {
        let cluster = ClusterObjects::read_dump_keeping(&[dir.to_owned()], EVERY_OBJECT)?;
        let path = dir.join("settings.yaml");
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let settings =
            serde_yaml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        let releases = dir.with_file_name("releases");
        Ok(Bundle {
            cluster,
            settings,
            releases,
        })
    }

    /// The bundled cluster as `release` renders it: its kustomization in `e2e/releases`, built
    /// by the real kustomize (`kubectl kustomize`; the overlay reads `e2e/cluster` beside it).
    pub fn release_cluster(&self, release: &str) -> Result<ClusterObjects, String> {
        let dir = self.releases.join(release);
        let output = std::process::Command::new("kubectl")
            .args(["kustomize", "--load-restrictor", "LoadRestrictionsNone"])
            .arg(&dir)
            .output()
            .map_err(|e| format!("kubectl kustomize {}: {e}", dir.display()))?;
        if !output.status.success() {
            return Err(format!(
                "kubectl kustomize {}: {}",
                dir.display(),
                String::from_utf8_lossy(&output.stderr).trim()
            ));
        }
        let text = String::from_utf8(output.stdout).map_err(|e| e.to_string())?;
        Ok(ClusterObjects::from_yaml_keeping(&text, EVERY_OBJECT)?)
    }

    pub fn prepare(&self, scenario: &Scenario) -> Result<Prepared, String> {
        let mut cluster = match (&scenario.release, scenario.bundled_cluster) {
            (Some(release), true) => self.release_cluster(release)?,
            (None, true) => self.cluster.clone(),
            (_, false) => ClusterObjects::default(),
        };
        for reference in &scenario.remove {
            cluster.remove(reference)?;
        }
        for object in &scenario.apply {
            cluster.apply(object.clone());
        }
        let mut settings = scenario
            .settings
            .clone()
            .unwrap_or_else(|| self.settings.clone());
        if let Some(release) = &scenario.release {
            merge(&mut settings, &json!({"cozystackRelease": release}));
        }
        if let Some(patch) = &scenario.settings_patch {
            merge(&mut settings, patch);
        }
        let request = match (
            &scenario.request,
            &scenario.admission_request,
            &scenario.replay,
        ) {
            (Some(short), None, None) => Some(short.expand(&cluster)),
            (None, Some(full), None) => Some(full.clone()),
            (None, None, Some(reference)) => {
                let object = cluster.find(reference)?;
                Some(cozystack_policy_runtime::audit::replay_request(&object)?)
            }
            (None, None, None) => None,
            _ => {
                return Err(format!(
                    "{}: give one of request, admissionRequest and replay",
                    scenario.name
                ));
            }
        };
        let payload = match (&scenario.raw_payload, &request) {
            (Some(raw), None) => raw.clone().into_bytes(),
            (None, Some(request)) => payload(request, &settings)?,
            (None, None) => Vec::new(),
            (Some(_), Some(_)) => {
                return Err(format!(
                    "{}: give rawPayload or a request, not both",
                    scenario.name
                ));
            }
        };
        Ok(Prepared {
            cluster: Arc::new(cluster),
            settings,
            payload,
            request,
        })
    }
}

fn check_regex(pattern: &str, text: &str, what: &str, problems: &mut Vec<String>) {
    match Regex::new(pattern) {
        Ok(re) if re.is_match(text) => {}
        Ok(_) => problems.push(format!("{what} {text:?} does not match /{pattern}/")),
        Err(e) => problems.push(format!("bad pattern /{pattern}/: {e}")),
    }
}

/// Runs a scenario through the policy and checks every expectation.
pub fn run(policy: &Policy, bundle: &Bundle, scenario: &Scenario) -> Result<Outcome, String> {
    let prepared = bundle.prepare(scenario)?;
    let expect = &scenario.expect;
    let mut problems = Vec::new();
    let settings_response = policy.validate_settings(&prepared.settings)?;
    settings(expect, &settings_response, &mut problems);
    if prepared.payload.is_empty() {
        return Ok(Outcome {
            prepared,
            settings_response,
            evaluation: None,
            problems,
        });
    }
    let evaluation = policy.validate_raw(
        &prepared.payload,
        prepared.cluster.clone(),
        scenario.host_failures.clone(),
    )?;
    let response = &evaluation.response;
    let accepted = response["accepted"].as_bool().unwrap_or(false);
    let message = response["message"].as_str().unwrap_or_default();
    let warnings = cozystack_policy_runtime::policy::warnings_of(response);
    if let Some(allowed) = expect.allowed
        && allowed != accepted
    {
        problems.push(format!("expected allowed={allowed}, got {response}"));
    }
    if expect.code.map(u64::from) != response["code"].as_u64()
        && (expect.code.is_some() || !accepted)
    {
        problems.push(format!(
            "expected code {:?}, got {}",
            expect.code, response["code"]
        ));
    }
    if let Some(expected) = &expect.message
        && expected != message
    {
        problems.push(format!(
            "message:\n  expected {expected:?}\n  got      {message:?}"
        ));
    }
    if let Some(pattern) = &expect.message_matches {
        check_regex(pattern, message, "message", &mut problems);
    }
    rows(expect, response, warnings.len(), &mut problems);
    if let Some(expected) = &expect.warnings
        && expected != &warnings
    {
        problems.push(format!(
            "warnings:\n  expected {expected:?}\n  got      {warnings:?}"
        ));
    }
    if let Some(patterns) = &expect.warnings_match {
        if patterns.len() != warnings.len() {
            problems.push(format!(
                "expected {} warnings, got {warnings:?}",
                patterns.len()
            ));
        }
        for (pattern, warning) in patterns.iter().zip(&warnings) {
            check_regex(pattern, warning, "warning", &mut problems);
        }
    }
    if let Some(calls) = expect.host_calls
        && calls != evaluation.exchanges.len()
    {
        problems.push(format!(
            "expected {calls} host calls, got {}: {:?}",
            evaluation.exchanges.len(),
            evaluation
                .exchanges
                .iter()
                .map(|e| &e.request)
                .collect::<Vec<_>>()
        ));
    }
    if !accepted
        && expect.message.is_none()
        && expect.message_matches.is_none()
        && expect.rule_in.is_none()
    {
        problems.push(
            "a denial must state its expected message (message or messageMatches) or rules (ruleIn)"
                .into(),
        );
    }
    Ok(Outcome {
        prepared,
        settings_response,
        evaluation: Some(evaluation),
        problems,
    })
}

/// `validate_settings`' answer held to the scenario: valid unless it says not, with its message.
fn settings(expect: &Expect, response: &Value, problems: &mut Vec<String>) {
    let valid = response["valid"].as_bool().unwrap_or(false);
    if valid != expect.settings_valid.unwrap_or(true) {
        problems.push(format!("validate_settings: {response}"));
    }
    if let Some(message) = &expect.settings_message
        && response["message"].as_str() != Some(message.as_str())
    {
        problems.push(format!(
            "settings message {} != {message:?}",
            response["message"]
        ));
    }
}

/// The rows a response names, held to the scenario: the refusing row (`rule`, `ruleIn`), every
/// 403 naming a row of the table (or `describe`) and its row stated, each warning's row
/// (`warnedBy`), and the waivers (`waivedBy`), exactly where one is.
fn rows(expect: &Expect, response: &Value, warnings: usize, problems: &mut Vec<String>) {
    let rule = cozystack_policy_runtime::policy::rule_of(response);
    if let Some(expected) = &expect.rule
        && Some(expected.as_str()) != rule
    {
        problems.push(format!("expected rule {expected}, got {rule:?}"));
    }
    if let Some(rows) = &expect.rule_in
        && !rule.is_some_and(|rule| rows.iter().any(|row| row == rule))
    {
        problems.push(format!("expected a rule of {rows:?}, got {rule:?}"));
    }
    // Every refusal names its row of the table (or `describe`, made before it), and each
    // warning its own row.
    let named = |row: &str| cozystack_resolver::rules::row(row).is_some();
    let refused_by = |row: &str| cozystack_resolver::rules::refusal(row).is_some();
    if response["code"] == 403 && !rule.is_some_and(refused_by) {
        problems.push(format!("a 403 names no row of the rule table: {rule:?}"));
    }
    // A scenario states which row must answer: another row answering is a failure, so the
    // rows are part of what the suite holds the module to.
    if response["code"] == 403 && expect.rule.is_none() && expect.rule_in.is_none() {
        problems.push(format!(
            "a refusal's row is not stated: add `rule: {}` to expect",
            rule.unwrap_or("?")
        ));
    }
    let warned_by = cozystack_policy_runtime::policy::warned_by(response);
    if !warned_by.is_empty() && expect.warned_by.is_none() && expect.warnings_match.is_none() {
        problems.push(format!(
            "the warnings' rows are not stated: add `warnedBy: [{}]` to expect",
            warned_by.join(", ")
        ));
    }
    if warned_by.len() != warnings || !warned_by.iter().all(|row| named(row)) {
        problems.push(format!(
            "the warnings' rows {warned_by:?} are not one row of the table per warning"
        ));
    }
    let waived_by = cozystack_policy_runtime::policy::waived_by(response);
    match &expect.waived_by {
        None if !waived_by.is_empty() => problems.push(format!(
            "a waiver is not stated: add `waivedBy: [{}]` to expect",
            waived_by.join(", ")
        )),
        Some(rows) if *rows != waived_by => {
            problems.push(format!("expected waivers of {rows:?}, got {waived_by:?}"))
        }
        _ => {}
    }
    if let Some(rows) = &expect.warned_by
        && !rows.iter().all(|row| warned_by.iter().any(|w| w == row))
    {
        problems.push(format!(
            "expected warnings of {rows:?}, got rows {warned_by:?}"
        ));
    }
}

/// `settings` with every kind's `cardinality.slots` and `slotNamespace` dropped: the same rules
/// held by the count alone (the race test and the benchmark compare the two).
pub fn without_slots(settings: &Value) -> Value {
    let mut settings = settings.clone();
    let blocks = settings
        .get_mut("definitions")
        .and_then(Value::as_object_mut)
        .into_iter()
        .flat_map(|definitions| definitions.values_mut());
    for block in blocks {
        if let Some(cardinality) = block.get_mut("cardinality").and_then(Value::as_object_mut) {
            cardinality.remove("slots");
            cardinality.remove("slotNamespace");
        }
    }
    settings
}
