//! `simulate`: long random lifecycles of a Cozystack install played through the real module,
//! deterministic from a seed. Actors with their real identities create, switch and delete
//! Tenants and apps through cozystack-api; cozystack-api and helm-controller write what follows
//! ([`world`], the model `check` applies); after every step the rules' guarantees are checked
//! on the state apart from the module ([`oracle`]). A violation is shrunk to the shortest
//! sequence that still shows it and written out as an e2e scenario.

pub mod oracle;
pub mod world;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::writes::TenantChart;
use cozystack_policy_runtime::cluster::{ClusterObjects, index_key};
use cozystack_policy_runtime::policy::Policy;
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;
use serde_json::{Value, json};

use crate::error::Error;
use oracle::Facts;
use world::{Action, Actor, Judged, World, Writer, manifest};

/// Kinds an actor creates, module kinds among them (the policy decides who may).
const KINDS: &[&str] = &[
    "Postgres",
    "Redis",
    "Bucket",
    "Kubernetes",
    "Harbor",
    "ExternalDNS",
    "Monitoring",
    "Etcd",
    "Ingress",
    "SeaweedFS",
    "Info",
];
/// The catalog kinds, each released under its own prefix: what a GitOps repository applies.
const CATALOG: &[&str] = &["Postgres", "Redis", "Bucket", "Kubernetes", "Harbor"];
/// Names tried: slots, names the charts render, and others.
const NAMES: &[&str] = &[
    "monitoring",
    "etcd",
    "ingress",
    "seaweedfs",
    "info",
    "db",
    "cache",
    "metrics",
    "dev",
    "monitoring-system",
    "bootbox",
];
const TENANT_NAMES: &[&str] = &["a", "b", "dev", "qa"];
/// The deepest tenant the simulator makes (tenant-root is depth 0).
const DEPTH: usize = 3;

/// What went wrong, at which step, on which request.
#[derive(Debug, Clone)]
pub struct Violation {
    pub invariant: String,
    pub what: String,
    /// The request that should have been answered otherwise, and how.
    pub request: Value,
    pub expect_allowed: bool,
    /// The cluster that request was judged on.
    pub cluster: ClusterObjects,
}

impl Violation {
    /// Whether `other` is this break and not another one found on the way: the same
    /// guarantee, on the same write (operation, kind, namespace and name of its request),
    /// answered wrongly the same way. A shrunk sequence that breaks the guarantee elsewhere, or
    /// with no request to show, is a different counterexample.
    pub fn same_cause(&self, other: &Violation) -> bool {
        let write = |v: &Violation| {
            let r = &v.request;
            (
                r["operation"].clone(),
                r["kind"]["kind"].clone(),
                r["namespace"].clone(),
                r["name"].clone(),
            )
        };
        self.invariant == other.invariant
            && self.expect_allowed == other.expect_allowed
            && write(self) == write(other)
            && (self.request.is_null() || !other.request.is_null())
    }
}

/// Counts for the summary.
#[derive(Debug, Default)]
pub struct Tally {
    pub steps: usize,
    pub actions: BTreeMap<String, usize>,
    pub verdicts: BTreeMap<&'static str, usize>,
    pub rules: BTreeMap<String, usize>,
    pub rejected: usize,
    pub largest: usize,
}

impl Tally {
    fn count(&mut self, action: &Action, writes: &[Judged], rejected: bool, size: usize) {
        self.steps += 1;
        *self.actions.entry(action.label()).or_default() += 1;
        self.rejected += usize::from(rejected);
        self.largest = self.largest.max(size);
        for judged in writes {
            let verdict = match (judged.allowed(), judged.warned()) {
                (false, _) => "denied",
                (true, false) => "allowed",
                (true, true) => "warned",
            };
            *self.verdicts.entry(verdict).or_default() += 1;
            let message = judged.response["message"].as_str().map(str::to_owned);
            let warnings = cozystack_policy_runtime::policy::warnings_of(&judged.response);
            for text in message.iter().chain(&warnings) {
                if let Some(rule) = rule_of(text) {
                    *self.rules.entry(rule).or_default() += 1;
                }
            }
        }
    }
}

/// The rules messages cite in their closing parenthesis (`(cardinality tenant/1)`,
/// `(protection.deletion: protect)`, `(tenantModules.etcd)`).
const RULES: &[&str] = &[
    "visibility",
    "cardinality",
    "protection",
    "capability",
    "tenantModules",
];

/// The rule a message cites; the rendered-name refusal cites none and is named for it.
fn rule_of(message: &str) -> Option<String> {
    if message.contains("takes the name under which") {
        return Some("rendered names".to_owned());
    }
    let open = message.rfind('(')?;
    let inner = &message[open + 1..];
    RULES
        .iter()
        .find(|rule| inner.starts_with(**rule))
        .map(|rule| (*rule).to_owned())
}

/// A run's inputs.
pub struct Run<'p> {
    pub policy: &'p Policy,
    pub settings: &'p Value,
    pub chart: TenantChart,
    pub cluster: ClusterObjects,
}

impl Run<'_> {
    fn player(&self) -> Player<'_> {
        let world = World::new(
            self.policy,
            self.settings,
            self.chart.clone(),
            self.cluster.clone(),
        );
        let facts = Facts::of(&world.settled());
        Player {
            world,
            facts,
            steps: 0,
        }
    }

    /// Plays `steps` actions drawn from `seed`; the actions played and the first violation.
    pub fn random(
        &self,
        seed: u64,
        steps: usize,
        tally: &mut Tally,
        tick: &mut dyn FnMut(),
    ) -> Result<(Vec<Action>, Option<Violation>), Error> {
        let mut rng = Pcg64::seed_from_u64(seed);
        let mut player = self.player();
        let mut played = Vec::new();
        for _ in 0..steps {
            let action = draw(&mut rng, player.world.state.cluster());
            let stepped = player.step(&action)?;
            let size = player.world.state.cluster().len();
            tally.count(&action, &stepped.writes, stepped.rejected, size);
            played.push(action);
            tick();
            if let Some(violation) = stepped.violation {
                return Ok((played, Some(violation)));
            }
        }
        Ok((played, None))
    }

    /// Plays `actions` from the start: the index and the violation of the first step that
    /// breaks `invariant`.
    fn replay(
        &self,
        actions: &[Action],
        target: &Violation,
    ) -> Result<Option<(usize, Violation)>, Error> {
        let mut player = self.player();
        for (i, action) in actions.iter().enumerate() {
            if let Some(violation) = player.step(action)?.violation
                && target.same_cause(&violation)
            {
                return Ok(Some((i, violation)));
            }
        }
        Ok(None)
    }

    /// The shortest sequence found (removing chunks, then single actions, as delta debugging
    /// does) that still breaks the same guarantee on the same write ([`Violation::same_cause`]),
    /// with its violation.
    pub fn shrink(
        &self,
        actions: Vec<Action>,
        violation: Violation,
    ) -> Result<(Vec<Action>, Violation), Error> {
        let mut current = actions;
        let mut found = violation;
        loop {
            let mut shrunk = false;
            let mut size = current.len().div_ceil(2);
            while size >= 1 {
                let mut at = 0;
                while at < current.len() {
                    let mut candidate = current.clone();
                    candidate.drain(at..(at + size).min(current.len()));
                    match self.replay(&candidate, &found)? {
                        Some((end, violation)) => {
                            candidate.truncate(end + 1);
                            current = candidate;
                            found = violation;
                            shrunk = true;
                        }
                        None => at += size,
                    }
                }
                size /= 2;
            }
            if !shrunk {
                return Ok((current, found));
            }
        }
    }
}

/// What one step came to.
struct Stepped {
    violation: Option<Violation>,
    writes: Vec<Judged>,
    rejected: bool,
}

/// The world, and the guarantees' facts of its settled state.
struct Player<'p> {
    world: World<'p>,
    /// Read from the cluster as helm-controller's next reconcile of every Tenant leaves it:
    /// what a reconcile would bring back anyway is not a step's doing.
    facts: Facts,
    /// Steps played, for the ones `check` replays.
    steps: usize,
}

/// Every how many steps `check` replays the step's own request.
const CHECKED: usize = 4;

impl Player<'_> {
    /// Plays one action and checks what it left.
    fn step(&mut self, action: &Action) -> Result<Stepped, Error> {
        let played = self.world.play(action)?;
        self.steps += 1;
        let mut violation = None;
        if self.steps.is_multiple_of(CHECKED) {
            violation = self.check_agrees(action, &played)?;
        }
        if violation.is_none() {
            violation = self.judge(action, &played)?;
        }
        Ok(Stepped {
            violation,
            writes: played.writes,
            rejected: played.rejected,
        })
    }

    /// One answer: `check` of the action's own manifest, applied as the actor applies it, on
    /// the cluster the request was judged on, answers as admission did.
    fn check_agrees(
        &self,
        action: &Action,
        played: &world::Played,
    ) -> Result<Option<Violation>, Error> {
        let (Some(user), Some(before)) = (
            played.writes.iter().find(|j| j.writer == Writer::User),
            &played.before,
        ) else {
            return Ok(None);
        };
        let request = &user.request;
        let changes = match request["operation"].as_str() {
            Some("DELETE") => crate::check::ChangeSet {
                applies: Vec::new(),
                deletes: vec![manifest(&request["oldObject"])],
            },
            _ => crate::check::ChangeSet {
                applies: vec![manifest(&request["object"])],
                deletes: Vec::new(),
            },
        };
        let identity = crate::check::Identity {
            username: request["userInfo"]["username"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            groups: serde_json::from_value(request["userInfo"]["groups"].clone())
                .unwrap_or_default(),
        };
        let mut observe = |_: usize, _: &Value, _: &ClusterObjects| Ok(());
        let (report, _) = crate::check::run(
            self.world.policy,
            self.world.settings,
            before.clone(),
            &changes,
            &identity,
            crate::check::Applier::InOrder,
            &mut observe,
        )?;
        let answer = |response: &Value| {
            (
                response["accepted"].clone(),
                response["message"].clone(),
                cozystack_policy_runtime::policy::warnings_of(response),
            )
        };
        let checked = report.steps.first().and_then(|step| step.response.as_ref());
        if checked.map(answer) == Some(answer(&user.response)) {
            return Ok(None);
        }
        Ok(Some(Violation {
            invariant: "one answer: check on the step answers as admission did".into(),
            what: format!(
                "{}: admission answered {}, check {}",
                action.describe(),
                user.response,
                checked.cloned().unwrap_or(Value::Null)
            ),
            request: request.clone(),
            expect_allowed: user.allowed(),
            cluster: before.clone(),
        }))
    }

    fn judge(
        &mut self,
        action: &Action,
        played: &world::Played,
    ) -> Result<Option<Violation>, Error> {
        let writes = &played.writes;
        // A stock component's write that follows an admitted request is never refused.
        if let Some(refused) = writes
            .iter()
            .find(|j| j.writer == Writer::Platform && !j.allowed())
        {
            return Ok(Some(Violation {
                invariant: "platform: no write a stock component makes after an admitted request is refused".into(),
                what: format!(
                    "{}: {} {} {} refused: {}",
                    action.describe(),
                    refused.request["operation"].as_str().unwrap_or_default(),
                    refused.request["kind"]["kind"].as_str().unwrap_or_default(),
                    reference(&refused.request),
                    refused.response["message"].as_str().unwrap_or_default()
                ),
                request: refused.request.clone(),
                expect_allowed: true,
                cluster: played
                    .refused_on
                    .clone()
                    .unwrap_or_else(|| self.world.state.cluster().clone()),
            }));
        }
        let changed = matches!(action, Action::Leftover { .. } | Action::Reconcile { .. })
            || writes.iter().any(Judged::allowed);
        if !changed {
            return Ok(None);
        }
        let after = Facts::of(&self.world.settled());
        let before = std::mem::replace(&mut self.facts, after);
        let Some(user) = writes
            .iter()
            .find(|j| j.writer == Writer::User && j.allowed())
        else {
            return Ok(None);
        };
        // A platform identity's write the deployment chose to warn about (`platformWriters:
        // warn`) is admitted by design, its breakage said in the warning.
        if cozystack_policy_runtime::policy::warnings_of(&user.response)
            .iter()
            .any(|w| w.contains(" is a platform writer and platformWriters is warn"))
        {
            return Ok(None);
        }
        // One answer: the audit scanner's replay of the release admission let in, on the state
        // it left, is accepted too.
        if let Some(release) = &played.release {
            let replayed = self.world.replay(release)?;
            if replayed["accepted"] != true {
                return Ok(Some(Violation {
                    invariant: "one answer: the audit replay accepts what admission admitted"
                        .into(),
                    what: format!(
                        "{}: admitted, then its release replayed by the audit scanner is refused: {}",
                        action.describe(),
                        replayed["message"].as_str().unwrap_or_default()
                    ),
                    request: user.request.clone(),
                    expect_allowed: false,
                    cluster: played.before.clone().unwrap_or_default(),
                }));
            }
        }
        Ok(oracle::newly_broken(&before, &self.facts)
            .into_iter()
            .next()
            .map(|broken| Violation {
                invariant: broken.invariant().to_owned(),
                what: format!("{}: {}", action.describe(), broken.describe()),
                request: user.request.clone(),
                expect_allowed: false,
                cluster: played.before.clone().unwrap_or_default(),
            }))
    }
}

fn reference(request: &Value) -> String {
    match request["namespace"].as_str() {
        Some(ns) => format!("{ns}/{}", request["name"].as_str().unwrap_or_default()),
        None => request["name"].as_str().unwrap_or_default().to_owned(),
    }
}

/// A tenant namespace's depth below tenant-root.
fn depth(namespace: &str) -> usize {
    namespace.strip_prefix("tenant-").map_or(0, |rest| {
        if rest == "root" {
            0
        } else {
            rest.split('-').count()
        }
    })
}

fn pick<'a, T>(rng: &mut Pcg64, items: &'a [T]) -> Option<&'a T> {
    (!items.is_empty()).then(|| &items[rng.random_range(0..items.len())])
}

/// An action drawn for the state: who acts on what is there, or could be.
fn draw(rng: &mut Pcg64, cluster: &ClusterObjects) -> Action {
    let mut tenants = Vec::new();
    let mut apps = Vec::new();
    let mut namespaces = Vec::new();
    for (api, kind, namespace, name) in cluster.keys() {
        match (api.as_str(), kind.as_str()) {
            ("v1", "Namespace") if name.starts_with("tenant-") => namespaces.push(name.clone()),
            (crate::writes::RELEASE_API, "HelmRelease") => {
                apps.push((namespace.clone(), name.clone()))
            }
            _ => {}
        }
    }
    namespaces.sort();
    apps.sort();
    let apps: Vec<(String, String, String)> = apps
        .into_iter()
        .filter_map(|(ns, name)| {
            let object =
                cluster.get(crate::writes::RELEASE_API, "HelmRelease", &name, Some(&ns))?;
            let labels = &object["metadata"]["labels"];
            let kind = labels["apps.cozystack.io/application.kind"]
                .as_str()?
                .to_owned();
            let app = labels["apps.cozystack.io/application.name"]
                .as_str()?
                .to_owned();
            Some((ns, kind, app))
        })
        .collect();
    for (ns, kind, name) in &apps {
        if kind == "Tenant" {
            tenants.push((ns.clone(), name.clone()));
        }
    }
    let admin = |rng: &mut Pcg64, ns: &str| match rng.random_range(0..10) {
        0 | 1 => Actor::TenantAccount(ns.to_owned()),
        2 => Actor::SuperAdmin(ns.to_owned()),
        _ => Actor::Admin(ns.to_owned()),
    };
    let root = "tenant-root".to_owned();
    let namespace = pick(rng, &namespaces).cloned().unwrap_or(root);
    match rng.random_range(0..22) {
        // A GitOps Kustomization: catalog apps applied where their tenants are, one pruned.
        20 | 21 => {
            let mut applies = Vec::new();
            for _ in 0..rng.random_range(1..4) {
                let namespace = pick(rng, &namespaces)
                    .cloned()
                    .unwrap_or_else(|| "tenant-root".to_owned());
                let kind = pick(rng, CATALOG).copied().unwrap_or("Postgres");
                let name = pick(rng, &["db", "cache", "www", "dev"])
                    .copied()
                    .unwrap_or("db");
                let app = json!({"apiVersion": "apps.cozystack.io/v1alpha1", "kind": kind,
                    "metadata": {"name": name, "namespace": namespace}, "spec": {}});
                // kustomize refuses an object twice in one build.
                if !applies.contains(&app) {
                    applies.push(app);
                }
            }
            let prunes = pick(rng, &apps)
                .filter(|(_, kind, _)| CATALOG.contains(&kind.as_str()))
                .map(|(ns, kind, name)| {
                    json!({"apiVersion": "apps.cozystack.io/v1alpha1",
                    "kind": kind, "metadata": {"name": name, "namespace": ns}})
                })
                .into_iter()
                .collect();
            Action::Flux { applies, prunes }
        }
        0..=6 => {
            let kind = pick(rng, KINDS).copied().unwrap_or("Postgres");
            let name = pick(rng, NAMES).copied().unwrap_or("db");
            Action::Create {
                by: admin(rng, &namespace),
                kind: kind.into(),
                namespace,
                name: name.into(),
                spec: json!({}),
            }
        }
        7..=9 if depth(&namespace) < DEPTH => {
            let name = pick(rng, TENANT_NAMES).copied().unwrap_or("a");
            let mut spec = serde_json::Map::new();
            for key in ["monitoring", "etcd", "ingress", "seaweedfs"] {
                if rng.random_range(0..3) == 0 {
                    spec.insert(key.into(), json!(true));
                }
            }
            Action::Create {
                by: admin(rng, &namespace),
                kind: "Tenant".into(),
                namespace,
                name: name.into(),
                spec: Value::Object(spec),
            }
        }
        10..=14 if !tenants.is_empty() => {
            let (ns, name) = pick(rng, &tenants).cloned().unwrap_or_default();
            let key = pick(rng, &["monitoring", "etcd", "ingress", "seaweedfs"])
                .copied()
                .unwrap_or("etcd");
            Action::Switch {
                by: admin(rng, &ns),
                namespace: ns,
                name,
                key: key.into(),
                on: rng.random_range(0..2) == 0,
            }
        }
        16 if !tenants.is_empty() => {
            let (namespace, name) = pick(rng, &tenants).cloned().unwrap_or_default();
            Action::Reconcile { namespace, name }
        }
        15 => {
            let kind = pick(rng, KINDS).copied().unwrap_or("Monitoring");
            let name = pick(rng, NAMES).copied().unwrap_or("metrics");
            Action::Leftover {
                kind: kind.into(),
                namespace,
                name: name.into(),
            }
        }
        // Any app, the root Tenant too: its administrators may try; the root Tenant must stay.
        _ => match pick(rng, &apps).cloned() {
            Some((ns, kind, name)) => Action::Delete {
                by: admin(rng, &ns),
                kind,
                namespace: ns,
                name,
            },
            _ => Action::Create {
                by: admin(rng, &namespace),
                kind: "Postgres".into(),
                namespace,
                name: "db".into(),
                spec: json!({}),
            },
        },
    }
}

/// The counterexample as an e2e scenario: the cluster the request was judged on, as what it
/// adds to and removes from the starting one, the settings it ran under, the request, and the
/// verdict the rules require.
pub fn scenario(
    run: &Run<'_>,
    actions: &[Action],
    violation: &Violation,
    seed: u64,
) -> Result<String, Error> {
    let start = &run.cluster;
    let before: std::collections::HashMap<_, Value> =
        start.values().map(|o| (index_key(&o), o)).collect();
    let after: std::collections::HashMap<_, Value> = violation
        .cluster
        .values()
        .map(|o| (index_key(&o), o))
        .collect();
    let mut apply: Vec<Value> = after
        .iter()
        .filter(|(key, object)| before.get(*key) != Some(*object))
        .map(|(_, object)| object.clone())
        .collect();
    apply.sort_by_key(index_key);
    let mut remove: Vec<String> = before
        .keys()
        .filter(|key| !after.contains_key(*key))
        .map(|(_, kind, ns, name)| match ns.is_empty() {
            true => format!("{kind}/{name}"),
            false => format!("{kind}/{ns}/{name}"),
        })
        .collect();
    remove.sort();
    let steps: Vec<String> = actions.iter().map(Action::describe).collect();
    /// The scenario's fields in the order the scenario files write them.
    #[derive(serde::Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Scenario {
        name: String,
        description: String,
        apply: Vec<Value>,
        remove: Vec<String>,
        settings: Value,
        admission_request: Value,
        expect: Value,
    }
    let scenario = Scenario {
        name: format!("simulate-seed-{seed}"),
        description: format!(
            "Found by the lifecycle simulator (seed {seed}), shrunk to {} steps: {}. Broken: {} ({}).",
            steps.len(),
            steps.join("; then "),
            violation.invariant,
            violation.what
        ),
        apply,
        remove,
        settings: run.settings.clone(),
        admission_request: violation.request.clone(),
        expect: match violation.expect_allowed {
            true => json!({"allowed": true}),
            // The rule the denial must cite, as its messages do.
            false => {
                json!({"allowed": false, "code": 403, "messageMatches": cited(&violation.invariant)})
            }
        },
    };
    serde_yaml::to_string(&[scenario]).map_err(|e| Error::Encode {
        what: "the counterexample",
        reason: e.to_string(),
    })
}

/// What a denial for `invariant` says, as a pattern: the rule its messages cite.
fn cited(invariant: &str) -> &'static str {
    match invariant.split(':').next().unwrap_or_default() {
        "cardinality" => r"\(cardinality",
        "protection" => r"\(protection",
        "rendered names" => "takes the name under which",
        _ => ".+",
    }
}

/// How long a budget of seconds is.
pub fn budget(seconds: f64) -> Duration {
    Duration::from_secs_f64(seconds.max(0.0))
}

/// Steps per second over `started`.
pub fn rate(steps: usize, started: Instant) -> f64 {
    steps as f64 / started.elapsed().as_secs_f64().max(1e-9)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn violation(invariant: &str, request: Value, expect_allowed: bool) -> Violation {
        Violation {
            invariant: invariant.to_owned(),
            what: String::new(),
            request,
            expect_allowed,
            cluster: ClusterObjects::default(),
        }
    }

    #[test]
    fn a_shrunk_break_is_the_same_only_on_the_same_write_answered_the_same_way() {
        let write = |name: &str| json!({"operation": "CREATE", "kind": {"kind": "Monitoring"}, "namespace": "tenant-a", "name": name, "uid": name});
        let found = violation("cardinality", write("second"), false);
        // The same write, another uid or cluster: the same break.
        let mut again = violation("cardinality", write("second"), false);
        again.request["uid"] = json!("other");
        assert!(found.same_cause(&again));
        for other in [
            violation("protection", write("second"), false),
            violation("cardinality", write("third"), false),
            violation("cardinality", write("second"), true),
            // No request to show: never a counterexample for one that had one.
            violation("cardinality", Value::Null, false),
        ] {
            assert!(!found.same_cause(&other), "{other:?}");
        }
    }
}
