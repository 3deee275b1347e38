//! `simulate`: long random lifecycles of a Cozystack install played through the real module,
//! deterministic from a seed. Actors with their real identities create, switch and delete
//! Tenants and apps through cozystack-api; cozystack-api and helm-controller write what follows
//! ([`world`], the model `check` applies); after every step the rules' guarantees are checked
//! on the state apart from the module ([`oracle`]). A violation is shrunk to the shortest
//! sequence that still shows it and written out as an e2e scenario.

pub mod oracle;
pub mod statement;
pub mod streams;
pub mod validation;
pub mod world;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cozystack_platform::application::Api;
use cozystack_platform::writes::{RELEASE_API, TenantChart};
use cozystack_policy_runtime::cluster::{ClusterObjects, index_key};
use cozystack_policy_runtime::policy::{Policy, rule_of, waived_by, warned_by};
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;
use serde_json::{Value, json};

use cozystack_platform::error::Error;
use cozystack_platform::flux::apply::{self, Applier, ChangeSet};
use cozystack_platform::sequence::Sender;
use oracle::Facts;
use statement::{Role, Statement};
use world::{Action, Actor, Chain, Judged, Stray, Upgrade, World, Writer, manifest};

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
    "ComputePlane",
    "Gateway",
    "BootBox",
];
/// The catalog kinds, each released under its own prefix: what a GitOps repository applies.
const CATALOG: &[&str] = &["Postgres", "Redis", "Bucket", "Kubernetes", "Harbor"];
/// The kinds whose HelmReleases a GitOps repository holds, in the simulator's draws.
const STRAY_KINDS: &[&str] = &["Postgres", "Redis", "Bucket", "Kubernetes", "ExternalDNS"];
/// One step in this many is preceded by a user's label of a Namespace.
const LABEL_ODDS: u32 = 30;
/// Mixed into a run's seed for the stream labels are drawn from.
const LABEL_STREAM: u64 = 0x6c61_6265_6c73;
/// One step in this many is preceded by helm-controller finishing an uninstall under way.
const FINISH_ODDS: u32 = 4;
/// Mixed into a run's seed for the stream of those.
const FINISH_STREAM: u64 = 0x6669_6e69_7368;
/// One step in this many is preceded by a platform write its release never renders.
const STRAY_ODDS: u32 = 20;
/// Mixed into a run's seed for the stream of those writes.
const STRAY_STREAM: u64 = 0x7374_7261_7973;

/// The Namespace labels a user sets or removes: the platform's (the ancestor chain, the chart's
/// provider labels, a capability label) and others.
const LABELS: &[&str] = &[
    "tenant.cozystack.io/tenant-root",
    "tenant.cozystack.io/tenant-acme",
    "namespace.cozystack.io/monitoring",
    "namespace.cozystack.io/etcd",
    "namespace.cozystack.io/capability.monitoring",
    "namespace.cozystack.io/host",
    "team",
];

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
    "computeplane",
    "gateway",
    "seaweedfs-db",
    "computeplane-cluster",
];
/// Tenant names: `super` binds, below tenant-root, its parent's super-admin group.
const TENANT_NAMES: &[&str] = &["a", "b", "dev", "qa", "super"];
/// The Tenant chart's switches (`packages/apps/tenant/values.yaml`).
const SWITCHES: &[&str] = &[
    "monitoring",
    "etcd",
    "ingress",
    "seaweedfs",
    "gateway",
    "computeplane",
];
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
    /// The row of `RULES` at stake: the one the module cited refusing the request, or the one
    /// that should have refused it.
    pub rule: Option<&'static str>,
    /// The rows the statement says refuse the request, one of which the module must cite
    /// (empty: `rule` or a row before it).
    pub rows: Vec<&'static str>,
    /// The cluster that request was judged on.
    pub cluster: ClusterObjects,
}

impl Violation {
    /// Whether `other` is this break and not another one found on the way: the same
    /// guarantee and rule, on the same write (operation, kind, namespace and name of its
    /// request), answered wrongly the same way. A shrunk sequence that breaks the guarantee elsewhere, or
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
            && self.rule == other.rule
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
    /// Refusals and warnings per row of `RULES`, by the row's name.
    pub rules: BTreeMap<&'static str, usize>,
    pub rejected: usize,
    pub largest: usize,
    /// User requests the rules' statement says must be admitted (each one was).
    pub admissible: usize,
}

impl Tally {
    /// Adds what another run counted.
    pub fn merge(&mut self, other: Tally) {
        fn add<K: Ord>(into: &mut BTreeMap<K, usize>, from: BTreeMap<K, usize>) {
            for (key, n) in from {
                *into.entry(key).or_default() += n;
            }
        }
        self.steps += other.steps;
        add(&mut self.actions, other.actions);
        add(&mut self.verdicts, other.verdicts);
        add(&mut self.rules, other.rules);
        self.rejected += other.rejected;
        self.largest = self.largest.max(other.largest);
        self.admissible += other.admissible;
    }

    fn count(&mut self, action: &Action, stepped: &Stepped, size: usize) {
        let (writes, rejected) = (&stepped.writes, stepped.rejected);
        // A label comes between the steps `--steps` counts (see `Run::random`).
        self.steps += usize::from(!matches!(
            action,
            Action::Label { .. } | Action::Stray(_) | Action::Upgrade(_) | Action::Finish { .. }
        ));
        self.admissible += stepped.admissible;
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
            let response = &judged.response;
            let warned = warned_by(response).into_iter().filter_map(row);
            for row in cited_by(response).into_iter().chain(warned) {
                *self.rules.entry(row).or_default() += 1;
            }
        }
    }
}

/// The row of `RULES` named `name` (or `describe`), as the module names it in its audit
/// annotations.
fn row(name: &str) -> Option<&'static str> {
    cozystack_resolver::rules::refusal(name)
}

/// The row of `RULES` a response's refusal came from.
fn cited_by(response: &Value) -> Option<&'static str> {
    rule_of(response).and_then(row)
}

/// The rows of `RULES` no refusal or warning of `tally` came from.
pub fn never_fired(tally: &Tally) -> Vec<&'static str> {
    cozystack_resolver::rules::RULES
        .iter()
        .map(|row| row.name)
        .filter(|name| !tally.rules.contains_key(name))
        .collect()
}

/// A run's inputs.
pub struct Run<'p> {
    pub policy: &'p Policy,
    pub settings: Value,
    pub chart: TenantChart,
    /// cozystack-api as the release runs it.
    pub api: Api,
    pub cluster: ClusterObjects,
    /// The releases the run upgrades to, in order, spread evenly over its steps.
    pub upgrades: Vec<Arc<Upgrade>>,
    /// The rules the oracle holds the module to.
    pub against: statement::Against,
}

impl Run<'_> {
    fn player(&self) -> Result<Player<'_>, Error> {
        let world = World::new(
            self.policy,
            Arc::new(self.settings.clone()),
            (self.chart.clone(), self.api),
            self.cluster.clone(),
        );
        let stated = Arc::new(Statement::under(&self.settings, self.against)?);
        let facts = Facts::of(&world.settled(), &stated);
        Ok(Player {
            world,
            facts,
            stated,
            against: self.against,
            steps: 0,
            admissible: 0,
            leftovers: false,
        })
    }

    /// The upgrade played before step `step` of `steps`: the k-th of n at step k·steps/(n+1).
    fn upgrade_before(&self, step: usize, steps: usize) -> Option<Action> {
        let n = self.upgrades.len();
        (1..=n)
            .find(|k| k * steps / (n + 1) == step)
            .map(|k| Action::Upgrade(Arc::clone(&self.upgrades[k - 1])))
    }

    /// The settings the last step of `actions` was judged under: the run's, naming the release
    /// of the last upgrade among them.
    pub fn settings_after(&self, actions: &[Action]) -> Value {
        match actions.iter().rev().find_map(|a| match a {
            Action::Upgrade(to) => Some(to),
            _ => None,
        }) {
            Some(to) => to.settings(&self.settings),
            None => self.settings.clone(),
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
        // Namespace labels come from a stream of their own, between the other actions: a
        // label a user may set changes nothing a rule reads, so the other actions of a seed play
        // as they did before labels were drawn, and the seeds named in the docs and tests hold.
        let mut labels = Pcg64::seed_from_u64(seed ^ LABEL_STREAM);
        // So do the platform's stray writes.
        let mut strays = Pcg64::seed_from_u64(seed ^ STRAY_STREAM);
        // And helm-controller's uninstalls coming to an end.
        let mut finishes = Pcg64::seed_from_u64(seed ^ FINISH_STREAM);
        let mut player = self.player()?;
        let mut played = Vec::new();
        for step in 0..steps {
            // Upgrades come at fixed steps, drawing nothing: a seed plays the same actions with
            // and without them.
            let upgrade = self.upgrade_before(step, steps);
            let cluster = player.world.state.cluster();
            let label =
                (labels.random_range(0..LABEL_ODDS) == 0).then(|| draw_label(&mut labels, cluster));
            let stray =
                (strays.random_range(0..STRAY_ODDS) == 0).then(|| draw_stray(&mut strays, cluster));
            let finish = (finishes.random_range(0..FINISH_ODDS) == 0)
                .then(|| draw_finish(&mut finishes, cluster))
                .flatten();
            let drawn: Vec<Action> = [upgrade, finish, label, stray]
                .into_iter()
                .flatten()
                .chain([draw(&mut rng, cluster)])
                .collect();
            for action in drawn {
                let stepped = player.step(&action)?;
                let size = player.world.state.cluster().len();
                tally.count(&action, &stepped, size);
                played.push(action);
                if let Some(violation) = stepped.violation {
                    tick();
                    return Ok((played, Some(violation)));
                }
            }
            tick();
        }
        // The audit scanner's last word on what the run left, held against the statement.
        let audited = player.audit_agrees()?;
        Ok((played, audited))
    }

    /// Plays `actions` from the start: the index and the violation of the first step that
    /// breaks `invariant`.
    fn replay(
        &self,
        actions: &[Action],
        target: &Violation,
    ) -> Result<Option<(usize, Violation)>, Error> {
        let mut player = self.player()?;
        for (i, action) in actions.iter().enumerate() {
            if let Some(violation) = player.step(action)?.violation
                && target.same_cause(&violation)
            {
                return Ok(Some((i, violation)));
            }
        }
        match player.audit_agrees()? {
            Some(violation) if target.same_cause(&violation) && !actions.is_empty() => {
                Ok(Some((actions.len() - 1, violation)))
            }
            _ => Ok(None),
        }
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

/// Which seeds a set of runs plays: `runs` seeds from `first`, or as many as start within
/// `budget`, whichever ends first.
#[derive(Debug, Clone, Copy)]
pub struct Seeds {
    pub first: u64,
    pub runs: Option<u64>,
    pub budget: Option<Duration>,
    pub steps: usize,
}

/// What a set of runs came to: the tally of every run played, the seeds played, and the
/// lowest seed that broke a guarantee with its actions and violation.
pub struct Played {
    pub tally: Tally,
    pub runs: u64,
    pub last: u64,
    pub broken: Option<(u64, Vec<Action>, Violation)>,
}

/// Plays each set of runs given, all of them on every core (each run is its own world,
/// deterministic from its seed); what each set came to, in the order given. In a set, the
/// lowest broken seed is the one reported, whatever order the runs ended in; once a run breaks,
/// no run of a later seed or set starts.
pub fn play(sets: &[(&Run<'_>, Seeds)], tick: &(dyn Fn() + Sync)) -> Result<Vec<Played>, Error> {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    type Ended = (usize, u64, Tally, Option<(Vec<Action>, Violation)>);
    let started = Instant::now();
    // Each set's seeds are taken in turn; `next[i]` counts the runs of set i started.
    let next: Vec<AtomicUsize> = sets.iter().map(|_| AtomicUsize::new(0)).collect();
    let stop = AtomicBool::new(false);
    let ended: Mutex<Vec<Ended>> = Mutex::new(Vec::new());
    let failed: Mutex<Option<Error>> = Mutex::new(None);
    let take = || -> Option<(usize, u64)> {
        for (i, (_, seeds)) in sets.iter().enumerate() {
            let n = next[i].fetch_add(1, Ordering::SeqCst) as u64;
            let over = seeds.runs.is_some_and(|runs| n >= runs)
                || (n > 0 && seeds.budget.is_some_and(|b| started.elapsed() >= b));
            if !over {
                return Some((i, seeds.first + n));
            }
        }
        None
    };
    let workers = std::thread::available_parallelism().map_or(1, usize::from);
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                while !stop.load(Ordering::SeqCst) {
                    let Some((i, seed)) = take() else {
                        return;
                    };
                    let (run, seeds) = sets[i];
                    let mut tally = Tally::default();
                    match run.random(seed, seeds.steps, &mut tally, &mut || tick()) {
                        Ok((actions, violation)) => {
                            stop.fetch_or(violation.is_some(), Ordering::SeqCst);
                            let broken = violation.map(|v| (actions, v));
                            if let Ok(mut ended) = ended.lock() {
                                ended.push((i, seed, tally, broken));
                            }
                        }
                        Err(e) => {
                            stop.store(true, Ordering::SeqCst);
                            if let Ok(mut failed) = failed.lock() {
                                failed.get_or_insert(e);
                            }
                        }
                    }
                }
            });
        }
    });
    if let Some(e) = failed.into_inner().ok().flatten() {
        return Err(e);
    }
    let mut ended = ended.into_inner().unwrap_or_default();
    ended.sort_by_key(|(i, seed, _, _)| (*i, *seed));
    let mut played: Vec<Played> = sets
        .iter()
        .map(|(_, seeds)| Played {
            tally: Tally::default(),
            runs: 0,
            last: seeds.first,
            broken: None,
        })
        .collect();
    for (i, seed, tally, broken) in ended {
        let set = &mut played[i];
        if set.broken.is_some() {
            continue;
        }
        set.tally.merge(tally);
        set.runs += 1;
        set.last = seed;
        if let Some((actions, violation)) = broken {
            set.broken = Some((seed, actions, violation));
        }
    }
    Ok(played)
}

/// What one step came to.
struct Stepped {
    violation: Option<Violation>,
    /// User requests the rules admit.
    admissible: usize,
    writes: Vec<Judged>,
    rejected: bool,
}

/// The world, and the guarantees' facts of its settled state.
struct Player<'p> {
    world: World<'p>,
    /// Read from the cluster as helm-controller's next reconcile of every Tenant leaves it:
    /// what a reconcile would bring back anyway is not a step's doing.
    facts: Facts,
    /// The rules the settings judge by, and what the release renders ([`Statement`]).
    stated: Arc<Statement>,
    against: statement::Against,
    /// Steps played, for the ones `check` replays.
    steps: usize,
    /// User requests of the step the rules admit.
    admissible: usize,
    /// Whether a release from before the policy was put: the platform may meet it.
    leftovers: bool,
}

/// The promise a platform write admitted only as a platform writer's breaks.
const PLATFORM_INVARIANT: &str = "platform: no write a stock component makes is refused, or waived";

/// The promise a consumer created without a live provider of its class and without the
/// warning breaks.
const AWAITING_INVARIANT: &str =
    "awaiting: a consumer created where its class has no live provider is told it waits";

/// The promise an audit replay answered otherwise than the statement breaks.
const AUDIT_INVARIANT: &str =
    "one answer: the audit scanner refuses exactly what the statement says breaks a rule";

/// The promise a platform write the rules admit, refused or waived, breaks.
const STRAY_INVARIANT: &str =
    "platform: a write the rules admit from the platform is admitted, with no waiver";

/// Every how many steps `check` replays the step's own request.
const CHECKED: usize = 4;

impl Player<'_> {
    /// Plays one action and checks what it left.
    fn step(&mut self, action: &Action) -> Result<Stepped, Error> {
        let played = self.world.play(action)?;
        if let Action::Upgrade(_) = action {
            self.stated = Arc::new(Statement::under(&self.world.settings, self.against)?);
            self.facts = Facts::of(&self.world.settled(), &self.stated);
        }
        // `kubectl label` patches the live object: it has no manifest for `check` to apply, and
        // is no step of those every fourth of which `check` runs on.
        let manifest = !matches!(action, Action::Label { .. });
        self.steps += usize::from(manifest);
        let mut violation = None;
        if manifest && self.steps.is_multiple_of(CHECKED) {
            violation = self.check_agrees(action, &played)?;
        }
        if violation.is_none() {
            violation = self.judge(action, &played)?;
        }
        Ok(Stepped {
            violation,
            admissible: std::mem::take(&mut self.admissible),
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
            Some("DELETE") => ChangeSet {
                applies: Vec::new(),
                deletes: vec![manifest(&request["oldObject"])],
            },
            _ => ChangeSet {
                applies: vec![manifest(&request["object"])],
                deletes: Vec::new(),
            },
        };
        let identity = cozystack_platform::apiserver::Identity {
            username: request["userInfo"]["username"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            groups: serde_json::from_value(request["userInfo"]["groups"].clone())
                .unwrap_or_default(),
        };
        let client = Sender::Client {
            identity,
            manager: Applier::InOrder.manager(),
        };
        let apply::Applied { report, .. } = apply::run(
            &mut self.world.platform.fresh(),
            before.clone(),
            &changes,
            client,
            Applier::InOrder,
            &mut self.world.module(),
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
            rule: cited_by(&user.response),
            cluster: before.clone(),
            rows: Vec::new(),
        }))
    }

    /// The first user request answered otherwise than the rules' statement says.
    fn asked(&mut self, action: &Action, played: &world::Played) -> Option<Violation> {
        let before = played.before.as_ref()?;
        let mut facts = None;
        let mut users: Vec<&Judged> = played
            .writes
            .iter()
            .filter(|j| j.writer == Writer::User)
            .collect();
        for ask in action.asks() {
            // An ask the API server stopped before admission sent nothing.
            let Some(at) = users.iter().position(|j| ask.sent(&j.request)) else {
                continue;
            };
            let judged = users.remove(at);
            let facts = facts.get_or_insert_with(|| Facts::of(before, &self.stated));
            // A switch turned off takes what the chart renders, as its next reconcile leaves it:
            // a module gone while its switch is on comes back, and its consumers with it.
            let admits = match ask.op {
                world::Op::Switch { on: false, .. } => {
                    Facts::of(&self.world.settle(before), &self.stated).admits(&ask)
                }
                _ => facts.admits(&ask),
            };
            self.admissible += usize::from(admits);
            let broken = match judged.allowed() {
                true => facts.refuses(&ask),
                false if admits => Some(oracle::Broken::TooStrict {
                    cited: cited_by(&judged.response).unwrap_or("no rule").to_owned(),
                    what: format!(
                        "{}: {}",
                        ask.describe(),
                        judged.response["message"].as_str().unwrap_or_default()
                    ),
                }),
                // Refused by a row the statement names: the module must cite one of them.
                false => {
                    let rows = facts.rows(&ask);
                    let cited = cited_by(&judged.response);
                    (!rows.is_empty() && !cited.is_some_and(|c| rows.contains(&c))).then(|| {
                        oracle::Broken::WrongRow {
                            cited: cited.unwrap_or("no rule").to_owned(),
                            rows,
                            what: ask.describe(),
                        }
                    })
                }
            };
            if let Some(broken) = broken {
                return Some(Violation {
                    invariant: broken.invariant().to_owned(),
                    what: format!("{}: {}", action.describe(), broken.describe()),
                    request: judged.request.clone(),
                    expect_allowed: !judged.allowed()
                        && !matches!(broken, oracle::Broken::WrongRow { .. }),
                    rule: match judged.allowed() {
                        true => broken.rule(),
                        false => cited_by(&judged.response),
                    },
                    cluster: before.clone(),
                    rows: match &broken {
                        oracle::Broken::WrongRow { rows, .. } => rows.clone(),
                        _ => Vec::new(),
                    },
                });
            }
        }
        None
    }

    fn judge(
        &mut self,
        action: &Action,
        played: &world::Played,
    ) -> Result<Option<Violation>, Error> {
        if let Some(violation) = self.platform_refused(action, played) {
            return Ok(Some(violation));
        }
        if let Some(violation) = self.stray_answered(action, played) {
            return Ok(Some(violation));
        }
        let writes = &played.writes;
        self.leftovers |= matches!(action, Action::Leftover { .. });
        // Each user request against the rules' statement, on the state it was judged on: one
        // they refuse whatever the state, admitted; one they admit, refused.
        if let Some(violation) = self.asked(action, played) {
            return Ok(Some(violation));
        }
        if let Some(violation) = self.awaiting(action, played) {
            return Ok(Some(violation));
        }
        let changed = matches!(
            action,
            Action::Leftover { .. } | Action::Reconcile { .. } | Action::Finish { .. }
        ) || writes.iter().any(Judged::allowed);
        if !changed {
            return Ok(None);
        }
        let after = Facts::of(&self.world.settled(), &self.stated);
        let before = std::mem::replace(&mut self.facts, after);
        let Some(user) = writes
            .iter()
            .rev()
            .find(|j| j.writer == Writer::User && j.allowed())
        else {
            return Ok(None);
        };
        // A platform identity's write the deployment chose to warn about (`platformWriters:
        // warn`) is admitted by design, its breakage said in the warning.
        if !waived_by(&user.response).is_empty() {
            return Ok(None);
        }
        // Two creates at once of a kind counted without slots both pass a count read from one
        // state (docs/rules.md, "Slots: at most one, even when requests race"): the overshoot
        // is the audit's to report, no promise of admission's.
        let raced = self.unslotted_race(action).map(str::to_owned);
        if raced.is_none()
            && let Some(violation) = self.replay_refuses(action, played, user)?
        {
            return Ok(Some(violation));
        }
        let newly = oracle::newly_broken(&before, &self.facts);
        if newly.is_empty() {
            return Ok(None);
        }
        // The cluster as it stood, read only when something broke: a consumer only the next
        // reconcile would render (a switch an older chart ignored, before the Tenant reconciles
        // after an upgrade) had no provider yet to lose, and what it already broke (a reconcile
        // would have hidden it, as helm-controller adopting a name a switch renders) is not the
        // step's doing.
        let live = played.before.as_ref().map(|b| Facts::of(b, &self.stated));
        let was = live.as_ref().map(Facts::broken).unwrap_or_default();
        Ok(newly
            .into_iter()
            .filter(|broken| !was.contains(broken))
            .find(|broken| match broken {
                oracle::Broken::Cardinality { kind, .. } => Some(kind) != raced.as_ref(),
                oracle::Broken::Stranded { consumer, .. } => {
                    live.as_ref().is_none_or(|live| live.holds(consumer))
                }
                _ => true,
            })
            .map(|broken| Violation {
                invariant: broken.invariant().to_owned(),
                what: format!("{}: {}", action.describe(), broken.describe()),
                request: user.request.clone(),
                expect_allowed: false,
                rule: broken.rule(),
                cluster: played.before.clone().unwrap_or_default(),
                rows: Vec::new(),
            }))
    }

    /// A user's admitted CREATE of a consumer whose class has no live provider where it
    /// resolves (every one there being uninstalled) carries the warning that it waits
    /// ([`Facts::awaited`]), on the state it was judged on.
    fn awaiting(&self, action: &Action, played: &world::Played) -> Option<Violation> {
        let before = played.before.as_ref()?;
        let facts = Facts::of(before, &self.stated);
        let creates = played.writes.iter().filter(|j| {
            j.writer == Writer::User && j.allowed() && j.request["operation"] == "CREATE"
        });
        for user in creates {
            let request = &user.request;
            let kind = request["kind"]["kind"].as_str().unwrap_or_default();
            let namespace = request["namespace"].as_str().unwrap_or_default();
            let warnings = cozystack_policy_runtime::policy::warnings_of(&user.response);
            let unwarned = facts.awaited(kind, namespace).into_iter().find(|class| {
                let said = format!("{kind} consumes {class}");
                !warnings.iter().any(|w| w.contains(&said))
            });
            if let Some(class) = unwarned {
                return Some(Violation {
                    invariant: AWAITING_INVARIANT.into(),
                    what: format!(
                        "{}: {kind} {namespace}/{} consumes {class}, whose every provider where {namespace} resolves it is being uninstalled, and was admitted without the warning",
                        action.describe(),
                        request["name"].as_str().unwrap_or_default()
                    ),
                    request: request.clone(),
                    expect_allowed: true,
                    rule: Some("capability"),
                    cluster: before.clone(),
                    rows: Vec::new(),
                });
            }
        }
        None
    }

    /// A platform identity's write its release never renders ([`Stray`]) is answered as the
    /// rules say even of the platform: a Namespace given a chain the release's chart never
    /// writes, or a provider label pointing off the tree, refused; one that keeps the chain it
    /// found (an older release's, until its Tenant reconciles) or writes the release's, and
    /// points provider labels at itself or an ancestor, admitted. An app HelmRelease Flux
    /// applies under a name Cozystack renders for another kind is refused or warned about;
    /// one of a kind counted by nothing under a free name is admitted, with no waiver.
    fn stray_answered(&self, action: &Action, played: &world::Played) -> Option<Violation> {
        let Action::Stray(stray) = action else {
            return None;
        };
        let judged = played.writes.iter().find(|j| j.writer == Writer::Stray)?;
        let waived = || !waived_by(&judged.response).is_empty();
        // (must be refused, must be admitted without a waiver, the rule at stake)
        let (refuse, admit, rule) = match stray {
            Stray::Namespace { namespace, .. } => {
                let labels = |o: &Value| o["metadata"]["labels"].as_object().cloned();
                let (old, new) = (
                    labels(&judged.request["oldObject"]).unwrap_or_default(),
                    labels(&judged.request["object"]).unwrap_or_default(),
                );
                let ancestors = |l: &serde_json::Map<String, Value>| -> Vec<String> {
                    let chain = l
                        .keys()
                        .filter_map(|k| k.strip_prefix("tenant.cozystack.io/"));
                    let mut chain: Vec<String> = chain.map(str::to_owned).collect();
                    chain.sort();
                    chain
                };
                let sorted = |mut chain: Vec<String>| {
                    chain.sort();
                    chain
                };
                let written = ancestors(&new);
                let chain_ok = ancestors(&old) == written
                    || written == sorted(statement::chain(namespace))
                    || (self.stated.short_chain
                        && written == sorted(statement::short_chain(namespace)));
                let within = statement::chain(namespace);
                let providers_ok = statement::CHART_PROVIDERS.iter().all(|class| {
                    let key = format!("namespace.cozystack.io/{class}");
                    old.get(&key) == new.get(&key)
                        || new[&key]
                            .as_str()
                            .is_some_and(|to| within.iter().any(|t| t == to))
                });
                let refuse = !(chain_ok && providers_ok);
                (refuse, !refuse, oracle::Refuses::Labels)
            }
            Stray::Release {
                kind,
                namespace,
                name,
            } => {
                let stated = self.stated.kind(kind)?;
                let release = format!("{}{name}", self.stated.prefix(stated));
                let tenant = namespace.starts_with("tenant-");
                let refuse = self
                    .stated
                    .rendered(namespace, &release, tenant)
                    .is_some_and(|holder| holder != Some(stated.kind));
                let admit = !refuse && stated.limit.is_none();
                (refuse, admit, oracle::Refuses::Names)
            }
        };
        let before = played.before.clone().unwrap_or_default();
        let what = |how: &str| {
            format!(
                "{}: {how}: {}",
                action.describe(),
                judged.response["message"].as_str().unwrap_or("admitted")
            )
        };
        if refuse && judged.allowed() && !waived() {
            return Some(Violation {
                invariant: rule.invariant().to_owned(),
                what: what("admitted from the platform, though the rules refuse it"),
                request: judged.request.clone(),
                expect_allowed: false,
                rule: Some(rule.rule()),
                cluster: before,
                rows: Vec::new(),
            });
        }
        if admit && (!judged.allowed() || waived()) {
            return Some(Violation {
                invariant: STRAY_INVARIANT.to_owned(),
                what: what("refused or waived, though the rules admit it from the platform"),
                request: judged.request.clone(),
                expect_allowed: true,
                rule: cited_by(&judged.response),
                cluster: before,
                rows: Vec::new(),
            });
        }
        None
    }

    /// A stock component's write that follows an admitted request is never refused, nor waived
    /// as a platform writer's on a cluster with no release from before the policy (the rules
    /// then have nothing to say to the platform's own writes).
    fn platform_refused(&self, action: &Action, played: &world::Played) -> Option<Violation> {
        let writes = &played.writes;
        // Under `platformWriters: deny` what `warn` waives is refused: on a cluster with a
        // release from before the policy, by the deployment's choice.
        let denies = self.world.settings["platformWriters"] == "deny" && self.leftovers;
        // A stock component's write that follows an admitted request is never refused.
        if let Some(refused) = writes
            .iter()
            .find(|j| j.writer == Writer::Platform && !j.allowed())
            .filter(|_| !denies)
        {
            return Some(Violation {
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
                rule: cited_by(&refused.response),
                cluster: played
                    .refused_on
                    .clone()
                    .unwrap_or_else(|| self.world.state.cluster().clone()),
                rows: Vec::new(),
            });
        }
        // Nor is one waived as a platform writer's: on a cluster with no release from before
        // the policy, the rules have nothing to say to the platform's own writes.
        if !self.leftovers
            && let Some(warned) = writes
                .iter()
                .find(|j| j.writer == Writer::Platform && !waived_by(&j.response).is_empty())
        {
            let warnings = cozystack_policy_runtime::policy::warnings_of(&warned.response);
            return Some(Violation {
                invariant: PLATFORM_INVARIANT.into(),
                what: format!(
                    "{}: {} {} {} admitted only as a platform writer's: {}",
                    action.describe(),
                    warned.request["operation"].as_str().unwrap_or_default(),
                    warned.request["kind"]["kind"].as_str().unwrap_or_default(),
                    reference(&warned.request),
                    warnings.join("; ")
                ),
                request: warned.request.clone(),
                expect_allowed: true,
                rule: warned_by(&warned.response).into_iter().find_map(row),
                cluster: played
                    .before
                    .clone()
                    .unwrap_or_else(|| self.world.state.cluster().clone()),
                rows: Vec::new(),
            });
        }
        None
    }

    /// One answer: the audit scanner's replay of the release admission let in, on the state it
    /// left, is accepted too.
    /// The audit scanner replays every live app release on the state the run left: it refuses
    /// exactly those the statement says it must ([`Facts::audited`]), naming that rule.
    fn audit_agrees(&mut self) -> Result<Option<Violation>, Error> {
        // What exists now, not what the next reconcile would make of it: the scanner reads it.
        let cluster = self.world.state.cluster().clone();
        let facts = Facts::of(&cluster, &self.stated);
        let expected = facts.audited();
        for (id, namespace, name) in facts.live() {
            let Some(release) = cluster.get(RELEASE_API, "HelmRelease", &name, Some(&namespace))
            else {
                continue;
            };
            let replayed = self.world.replay(&release)?;
            let refused = replayed["accepted"] != true;
            let rule = expected.get(&id).copied();
            let cited = rule_of(&replayed);
            let agrees = match rule {
                None => !refused,
                Some(rule) => {
                    refused && cited.is_some_and(|c| rows_through(Some(rule)).contains(&c))
                }
            };
            if !agrees {
                let request = cozystack_policy_runtime::audit::replay_request(&release)?;
                return Ok(Some(Violation {
                    invariant: AUDIT_INVARIANT.into(),
                    what: format!(
                        "the audit scanner's replay of {id} answered {}, the statement says {}",
                        match refused {
                            true => format!(
                                "refused ({})",
                                replayed["message"].as_str().unwrap_or_default()
                            ),
                            false => "accepted".to_owned(),
                        },
                        match rule {
                            Some(rule) => format!("refused by {rule}"),
                            None => "accepted".to_owned(),
                        }
                    ),
                    request,
                    expect_allowed: rule.is_none(),
                    rule,
                    cluster,
                    rows: Vec::new(),
                }));
            }
        }
        Ok(None)
    }

    /// The kind of a race of two creates of one kind the statement counts without slots.
    fn unslotted_race(&self, action: &Action) -> Option<&str> {
        let Action::Race { first, .. } = action else {
            return None;
        };
        let Action::Create { kind, .. } = first.as_ref() else {
            return None;
        };
        let stated = self.stated.kind(kind)?;
        (stated.limit.is_some() && stated.slot.is_none()).then_some(stated.kind)
    }

    fn replay_refuses(
        &mut self,
        action: &Action,
        played: &world::Played,
        user: &Judged,
    ) -> Result<Option<Violation>, Error> {
        if let Some(release) = &played.release {
            let replayed = self.world.replay(release)?;
            let before = played.before.as_ref();
            if replayed["accepted"] != true
                && !before.map_or(Ok(false), |b| self.world.refused_before(b, release))?
            {
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
                    // Refused by any rule: the replay's may be a later row's.
                    rule: None,
                    cluster: played.before.clone().unwrap_or_default(),
                    rows: Vec::new(),
                }));
            }
        }
        Ok(None)
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

/// Someone holding a role in `ns`, mostly its administrators; now and then one of an
/// ancestor's, or of another tenant's (`namespaces`).
fn actor(rng: &mut Pcg64, ns: &str, namespaces: &[String]) -> Actor {
    let role = match rng.random_range(0..20) {
        0..=2 => Role::Account,
        3 | 4 => Role::SuperAdmin,
        5..=7 => Role::Use,
        8 => Role::View,
        _ => Role::Admin,
    };
    let chain = statement::chain(ns);
    let of = match rng.random_range(0..10) {
        0 | 1 => pick(rng, &chain).cloned(),
        2 => pick(rng, namespaces).cloned(),
        _ => None,
    };
    Actor::new(role, &of.unwrap_or_else(|| ns.to_owned()))
}

/// The tenant Namespaces of `cluster`, sorted.
fn tenant_namespaces(cluster: &ClusterObjects) -> Vec<String> {
    let mut namespaces: Vec<String> = cluster
        .keys()
        .filter(|(api, kind, _, name)| {
            api == "v1" && kind == "Namespace" && name.starts_with("tenant-")
        })
        .map(|(_, _, _, name)| name.clone())
        .collect();
    namespaces.sort();
    namespaces
}

/// A user labels a tenant Namespace: a label the platform writes, or one of their own, set to
/// a tenant's name or removed.
fn draw_label(rng: &mut Pcg64, cluster: &ClusterObjects) -> Action {
    let namespaces = tenant_namespaces(cluster);
    let namespace = pick(rng, &namespaces)
        .cloned()
        .unwrap_or_else(|| "tenant-root".to_owned());
    let key = pick(rng, LABELS).copied().unwrap_or("team");
    let value = match rng.random_range(0..4) {
        0 => None,
        _ => pick(rng, &namespaces).cloned(),
    };
    Action::Label {
        by: actor(rng, &namespace, &namespaces),
        namespace,
        key: key.to_owned(),
        value,
    }
}

/// helm-controller finishing one of the uninstalls under way, if any.
fn draw_finish(rng: &mut Pcg64, cluster: &ClusterObjects) -> Option<Action> {
    let terminating: Vec<(String, String)> = cluster
        .keys()
        .enumerate()
        .filter(|(_, (api, kind, _, _))| api == RELEASE_API && kind == "HelmRelease")
        .filter_map(|(at, _)| cluster.value(at))
        .filter(cozystack_platform::helm_controller::terminating)
        .map(|hr| {
            let meta = &hr["metadata"];
            (
                meta["namespace"].as_str().unwrap_or_default().to_owned(),
                meta["name"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    let (namespace, name) = pick(rng, &terminating)?.clone();
    Some(Action::Finish { namespace, name })
}

/// A platform write its release never renders: a tenant Namespace relabelled by
/// helm-controller (another release's chain, a provider label up the tree or sideways), or an
/// app HelmRelease applied by Flux from a repository.
fn draw_stray(rng: &mut Pcg64, cluster: &ClusterObjects) -> Action {
    let namespaces = tenant_namespaces(cluster);
    if rng.random_range(0..3) == 0 {
        // ExternalDNS's prefix is "": any name it takes is its release, one Cozystack may render.
        return Action::Stray(Stray::Release {
            kind: pick(rng, STRAY_KINDS)
                .copied()
                .unwrap_or("Postgres")
                .to_owned(),
            namespace: pick(rng, &namespaces)
                .cloned()
                .unwrap_or_else(|| "tenant-root".to_owned()),
            name: pick(rng, NAMES).copied().unwrap_or("db").to_owned(),
        });
    }
    let below: Vec<String> = namespaces
        .iter()
        .filter(|ns| *ns != "tenant-root")
        .cloned()
        .collect();
    let namespace = pick(rng, &below)
        .cloned()
        .unwrap_or_else(|| "tenant-root".to_owned());
    let chain = match rng.random_range(0..3) {
        0 => Some(Chain::Full),
        1 => Some(Chain::Short),
        _ => None,
    };
    let class = pick(rng, &statement::CHART_PROVIDERS)
        .copied()
        .unwrap_or("monitoring");
    let up = statement::chain(&namespace);
    let to = match rng.random_range(0..3) {
        0 if chain.is_some() => None,
        1 => pick(rng, &namespaces).cloned(),
        _ => pick(rng, &up).cloned(),
    };
    Action::Stray(Stray::Namespace {
        namespace,
        chain,
        provider: to.map(|to| (class.to_owned(), to)),
    })
}

/// An action drawn for the state: who acts on what is there, or could be.
fn draw(rng: &mut Pcg64, cluster: &ClusterObjects) -> Action {
    let mut tenants = Vec::new();
    let namespaces = tenant_namespaces(cluster);
    let mut apps: Vec<(String, String)> = cluster
        .keys()
        .filter(|(api, kind, _, _)| api == RELEASE_API && kind == "HelmRelease")
        .map(|(_, _, namespace, name)| (namespace.clone(), name.clone()))
        .collect();
    apps.sort();
    let apps: Vec<(String, String, String)> = apps
        .into_iter()
        .filter_map(|(ns, name)| {
            let object = cluster.get(RELEASE_API, "HelmRelease", &name, Some(&ns))?;
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
    let actor = |rng: &mut Pcg64, ns: &str| actor(rng, ns, &namespaces);
    let admin = |rng: &mut Pcg64, ns: &str| {
        let role = match rng.random_range(0..10) {
            0 | 1 => Role::Account,
            2 => Role::SuperAdmin,
            _ => Role::Admin,
        };
        Actor::new(role, ns)
    };
    let root = "tenant-root".to_owned();
    let namespace = pick(rng, &namespaces).cloned().unwrap_or(root);
    let create = |rng: &mut Pcg64, namespace: &str| {
        let kind = pick(rng, KINDS).copied().unwrap_or("Postgres");
        let name = pick(rng, NAMES).copied().unwrap_or("db");
        Action::Create {
            by: actor(rng, namespace),
            kind: kind.into(),
            namespace: namespace.to_owned(),
            name: name.into(),
            spec: json!({}),
        }
    };
    match rng.random_range(0..29) {
        // Someone in tenant-root tries to delete the root Tenant.
        28 => Action::Delete {
            by: actor(rng, "tenant-root"),
            kind: "Tenant".into(),
            namespace: "tenant-root".into(),
            name: "root".into(),
        },
        // A user changes an app's values.
        22 | 23 if !apps.is_empty() => {
            let (ns, kind, name) = pick(rng, &apps).cloned().unwrap_or_default();
            if kind == "Tenant" {
                return create(rng, &ns);
            }
            Action::Edit {
                by: actor(rng, &ns),
                kind,
                namespace: ns,
                name,
                key: "replicas".into(),
                value: json!(rng.random_range(1..4)),
            }
        }
        // A user writes an app's HelmRelease directly.
        24 => match pick(rng, &apps).cloned() {
            Some((ns, kind, name)) if rng.random_range(0..2) == 0 => Action::Release {
                by: actor(rng, &ns),
                kind,
                namespace: ns,
                name,
                delete: true,
            },
            _ => Action::Release {
                by: actor(rng, &namespace),
                kind: pick(rng, KINDS).copied().unwrap_or("Postgres").into(),
                namespace: namespace.clone(),
                name: pick(rng, NAMES).copied().unwrap_or("db").into(),
                delete: false,
            },
        },
        // Two creates of one kind in one namespace at once.
        25 | 26 => {
            let first = create(rng, &namespace);
            let mut second = create(rng, &namespace);
            if let (Action::Create { kind, .. }, Action::Create { kind: other, .. }) =
                (&first, &mut second)
            {
                other.clone_from(kind);
            }
            Action::Race {
                first: Box::new(first),
                second: Box::new(second),
            }
        }
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
                let app = world::app_object(kind, &namespace, name, &json!({}));
                // kustomize refuses an object twice in one build.
                if !applies.contains(&app) {
                    applies.push(app);
                }
            }
            // What the Kustomization applied once and drops: a catalog app, or a module it
            // applied before a Tenant switch rendered it (its release then stays terminating
            // while helm-controller uninstalls it, the switch still on: slow teardown).
            let prunes = pick(rng, &apps)
                .filter(|(_, kind, _)| kind != "Tenant")
                .map(|(ns, kind, name)| {
                    json!({"apiVersion": "apps.cozystack.io/v1alpha1",
                    "kind": kind, "metadata": {"name": name, "namespace": ns}})
                })
                .into_iter()
                .collect();
            Action::Flux { applies, prunes }
        }
        0..=6 => create(rng, &namespace),
        7..=9 if depth(&namespace) < DEPTH => {
            let name = pick(rng, TENANT_NAMES).copied().unwrap_or("a");
            let mut spec = serde_json::Map::new();
            for key in SWITCHES {
                if rng.random_range(0..4) == 0 {
                    spec.insert((*key).into(), json!(true));
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
            let key = pick(rng, SWITCHES).copied().unwrap_or("etcd");
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
                by: actor(rng, &ns),
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
        settings: run.settings_after(actions),
        admission_request: violation.request.clone(),
        expect: match violation.expect_allowed {
            // Admitted with no waiver's warning.
            true if violation.invariant == PLATFORM_INVARIANT => {
                json!({"allowed": true, "warnings": []})
            }
            // A missing warning: the row that must give it (its wording is the module's).
            true if violation.invariant == AWAITING_INVARIANT => {
                json!({"allowed": true, "warnedBy": [violation.rule]})
            }
            true => json!({"allowed": true}),
            // One of the rows the statement says refuse it.
            false if !violation.rows.is_empty() => {
                json!({"allowed": false, "code": 403, "ruleIn": violation.rows})
            }
            // The rule the denial must come from, or a row before it.
            false => {
                json!({"allowed": false, "code": 403, "ruleIn": rows_through(violation.rule)})
            }
        },
    };
    serde_yaml::to_string(&[scenario]).map_err(|e| Error::Encode {
        what: "the counterexample",
        reason: e.to_string(),
    })
}

/// The rows whose refusal a request `rule` should have refused may cite: that rule, or a row
/// before it in `RULES` (a blocker the writer must clear first); with no rule named, any row.
fn rows_through(rule: Option<&str>) -> Vec<&'static str> {
    let rows = cozystack_resolver::rules::RULES;
    let last = rule
        .and_then(|rule| rows.iter().position(|row| row.name == rule))
        .unwrap_or(rows.len() - 1);
    rows[..=last].iter().map(|row| row.name).collect()
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
    use cozystack_platform::apiserver::Identity;
    use serde_json::json;

    fn violation(invariant: &str, request: Value, expect_allowed: bool) -> Violation {
        Violation {
            invariant: invariant.to_owned(),
            what: String::new(),
            request,
            expect_allowed,
            rule: Some("cardinality"),
            cluster: ClusterObjects::default(),
            rows: Vec::new(),
        }
    }

    /// What one request looks like to admission, and what it answered.
    fn exchange(request: &Value, response: &Value) -> Value {
        json!({"user": request["userInfo"]["username"], "operation": request["operation"],
            "kind": request["kind"]["kind"], "namespace": request["namespace"],
            "name": request["name"], "object": request["object"], "oldObject": request["oldObject"],
            "accepted": response["accepted"], "message": response["message"],
            "warnings": cozystack_policy_runtime::policy::warnings_of(response)})
    }

    /// What `check` sends for `changes` applied as `identity`, and what the simulator sends
    /// playing `action`, on the bundled cluster under the stock settings.
    fn both(action: &Action, changes: ChangeSet, identity: &Identity) -> (Vec<Value>, Vec<Value>) {
        let policy =
            Policy::load_annotated(&cozystack_e2e::policy_path()).unwrap_or_else(|e| panic!("{e}"));
        let settings = json!({});
        let resolved =
            cozystack_platform::admission::resolved(&settings).unwrap_or_else(|e| panic!("{e}"));
        let dump = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../e2e/cluster");
        let cluster = ClusterObjects::read_dump(&[dump]).unwrap_or_else(|e| panic!("{e}"));
        let platform = (TenantChart::of(&resolved), Api::of(&resolved));
        let shared = Arc::new(settings.clone());
        let mut world = World::new(&policy, shared, platform, cluster.clone());
        let played = world.play(action).unwrap_or_else(|e| panic!("{e}"));
        let simulated: Vec<Value> = played
            .writes
            .iter()
            .map(|j| exchange(&j.request, &j.response))
            .collect();
        let mut observe = |_: usize, _: &Value, _: &ClusterObjects| Ok(());
        let cozystack_platform::flux::apply::Applied { report, .. } =
            cozystack_platform::admission::run(
                &policy,
                &settings,
                cluster,
                &changes,
                identity,
                Applier::InOrder,
                &mut observe,
            )
            .unwrap_or_else(|e| panic!("{e}"));
        let step = &report.steps[0];
        let first = exchange(
            step.request.as_ref().unwrap_or(&Value::Null),
            step.response.as_ref().unwrap_or(&Value::Null),
        );
        let checked: Vec<Value> = std::iter::once(first)
            .chain(step.then.iter().map(|s| exchange(&s.request, &s.response)))
            .collect();
        (checked, simulated)
    }

    /// Who sent each request.
    fn senders(exchanges: &[Value]) -> Vec<&str> {
        exchanges
            .iter()
            .map(|e| e["user"].as_str().unwrap_or_default())
            .collect()
    }

    const API: &str = "system:serviceaccount:cozy-system:cozystack-api";
    const FLUX: &str = cozystack_platform::helm_controller::FLUX;

    /// `check` and the simulator reach the same account of what a write sets off
    /// (`Platform::play`): the same requests, from the same senders, with the same answers.
    #[test]
    fn one_application_write_sends_the_same_requests_through_check_and_the_simulator() {
        let writes = [
            ("Kubernetes", "tenant-acme", "k8s", json!({})),
            ("Tenant", "tenant-acme", "web", json!({"monitoring": true})),
        ];
        for (kind, namespace, name, spec) in writes {
            let by = Actor::new(Role::Admin, namespace);
            let action = Action::Create {
                by: by.clone(),
                kind: kind.into(),
                namespace: namespace.into(),
                name: name.into(),
                spec: spec.clone(),
            };
            let changes = ChangeSet {
                applies: vec![manifest(&world::app_object(kind, namespace, name, &spec))],
                deletes: Vec::new(),
            };
            let (checked, simulated) = both(&action, changes, &by.identity());
            assert_eq!(checked, simulated, "{kind} {namespace}/{name}");
            // The user's, then cozystack-api's release, then helm-controller's finalizer.
            assert_eq!(
                senders(&simulated)[..3],
                ["admin@tenant-acme", API, FLUX],
                "{kind}"
            );
            assert!(
                simulated.iter().all(|e| e["accepted"] == true),
                "{simulated:#?}"
            );
        }
    }

    /// An Application's DELETE: the user's, then cozystack-api's DELETE of its release.
    #[test]
    fn one_delete_sends_the_same_requests_through_check_and_the_simulator() {
        let by = Actor::new(Role::Admin, "tenant-acme");
        let action = Action::Delete {
            by: by.clone(),
            kind: "Redis".into(),
            namespace: "tenant-acme".into(),
            name: "cache".into(),
        };
        let changes = ChangeSet {
            applies: Vec::new(),
            deletes: vec![manifest(&world::app_object(
                "Redis",
                "tenant-acme",
                "cache",
                &json!({}),
            ))],
        };
        let (checked, simulated) = both(&action, changes, &by.identity());
        assert_eq!(checked, simulated);
        assert_eq!(senders(&simulated), ["admin@tenant-acme", API]);
        let operations: Vec<&Value> = simulated.iter().map(|e| &e["operation"]).collect();
        assert_eq!(operations, ["DELETE", "DELETE"]);
        assert!(simulated.iter().all(|e| e["accepted"] == true));
    }

    /// A HelmRelease Flux applies straight: its CREATE, then helm-controller's finalizer, the
    /// same request `check` judges after it.
    #[test]
    fn one_release_write_sends_the_same_requests_through_check_and_the_simulator() {
        let stray = Stray::Release {
            kind: "Redis".into(),
            namespace: "tenant-acme".into(),
            name: "sessions".into(),
        };
        let dump = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../e2e/cluster");
        let cluster = ClusterObjects::read_dump(&[dump]).unwrap_or_else(|e| panic!("{e}"));
        let served = cozystack_platform::writes::Kinds::read(&cluster)
            .get("Redis")
            .unwrap_or_else(|| panic!("the bundled cluster serves Redis"));
        let app = world::app_object("Redis", "tenant-acme", "sessions", &json!({}));
        let changes = ChangeSet {
            applies: vec![manifest(&served.release_for(&app, None))],
            deletes: Vec::new(),
        };
        let flux = Identity::impersonated(FLUX, &[]);
        let (checked, simulated) = both(&Action::Stray(stray), changes, &flux);
        assert_eq!(checked, simulated);
        assert_eq!(senders(&simulated), [FLUX, FLUX]);
        let operations: Vec<&Value> = simulated.iter().map(|e| &e["operation"]).collect();
        assert_eq!(operations, ["CREATE", "UPDATE"]);
        assert_eq!(
            simulated[1]["object"]["metadata"]["finalizers"],
            json!([cozystack_platform::helm_controller::FINALIZER])
        );
    }

    #[test]
    fn a_refusal_names_its_row_from_the_annotations_and_a_counterexample_the_rows_before() {
        let refused = json!({"accepted": false, "message": "any wording",
            "audit_annotations": {"rule": "slots", "warned-by": "protection,capability"}});
        assert_eq!(cited_by(&refused), Some("slots"));
        assert_eq!(warned_by(&refused), ["protection", "capability"]);
        assert_eq!(
            cited_by(&json!({"audit_annotations": {"rule": "nothing"}})),
            None
        );
        assert_eq!(cited_by(&json!({"accepted": true})), None);
        assert_eq!(
            rows_through(Some("groups")),
            ["releases", "root_tenant", "groups"]
        );
        assert_eq!(
            rows_through(None).len(),
            cozystack_resolver::rules::RULES.len()
        );
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
            Violation {
                rule: Some("slots"),
                ..violation("cardinality", write("second"), false)
            },
            // No request to show: never a counterexample for one that had one.
            violation("cardinality", Value::Null, false),
        ] {
            assert!(!found.same_cause(&other), "{other:?}");
        }
    }
}
