//! Refereeing: each step played and held to the rules' statement and to the guarantees apart
//! from the module; what broke, as a [`Violation`], and what was seen, as a [`Tally`].

use crate::*;
use cozystack_platform::error::Error;
use cozystack_platform::flux::apply::{self, Applier, ChangeSet};
use cozystack_platform::sequence::Sender;
use cozystack_platform::writes::RELEASE_API;
use cozystack_policy_runtime::cluster::ClusterObjects;
use cozystack_policy_runtime::policy::{rule_of, waived_by, warned_by};
use oracle::Facts;
use serde_json::Value;
use statement::Statement;
use std::collections::BTreeMap;
use std::sync::Arc;
use world::{Action, Judged, Stray, World, Writer, manifest};

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

    pub(crate) fn count(&mut self, action: &Action, stepped: &Stepped, size: usize) {
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
pub(crate) fn row(name: &str) -> Option<&'static str> {
    cozystack_resolver::rules::refusal(name)
}

/// The row of `RULES` a response's refusal came from.
pub(crate) fn cited_by(response: &Value) -> Option<&'static str> {
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

/// What one step came to.
pub(crate) struct Stepped {
    pub(crate) violation: Option<Violation>,
    /// User requests the rules admit.
    pub(crate) admissible: usize,
    pub(crate) writes: Vec<Judged>,
    pub(crate) rejected: bool,
}

/// The world, and the guarantees' facts of its settled state.
pub(crate) struct Player<'p> {
    pub(crate) world: World<'p>,
    /// Read from the cluster as helm-controller's next reconcile of every Tenant leaves it:
    /// what a reconcile would bring back anyway is not a step's doing.
    pub(crate) facts: Facts,
    /// The rules the settings judge by, and what the release renders ([`Statement`]).
    pub(crate) stated: Arc<Statement>,
    pub(crate) against: statement::Against,
    /// Steps played, for the ones `check` replays.
    pub(crate) steps: usize,
    /// User requests of the step the rules admit.
    pub(crate) admissible: usize,
    /// Whether a release from before the policy was put: the platform may meet it.
    pub(crate) leftovers: bool,
}

/// The promise a platform write admitted only as a platform writer's breaks.
pub(crate) const PLATFORM_INVARIANT: &str =
    "platform: no write a stock component makes is refused, or waived";

/// The promise a consumer created without a live provider of its class and without the
/// warning breaks.
pub(crate) const AWAITING_INVARIANT: &str =
    "awaiting: a consumer created where its class has no live provider is told it waits";

/// The promise an audit replay answered otherwise than the statement breaks.
pub(crate) const AUDIT_INVARIANT: &str =
    "one answer: the audit scanner refuses exactly what the statement says breaks a rule";

/// The promise a platform write the rules admit, refused or waived, breaks.
pub(crate) const STRAY_INVARIANT: &str =
    "platform: a write the rules admit from the platform is admitted, with no waiver";

/// The promise a refusal that names no row of the table breaks.
pub(crate) const NAMED_INVARIANT: &str =
    "every refusal is a row: a 403 names its row of the rule table (or describe)";

/// Every how many steps `check` replays the step's own request.
pub(crate) const CHECKED: usize = 4;

impl Player<'_> {
    /// Plays one action and checks what it left.
    pub(crate) fn step(&mut self, action: &Action) -> Result<Stepped, Error> {
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
    pub(crate) fn check_agrees(
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
    pub(crate) fn asked(&mut self, action: &Action, played: &world::Played) -> Option<Violation> {
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

    pub(crate) fn judge(
        &mut self,
        action: &Action,
        played: &world::Played,
    ) -> Result<Option<Violation>, Error> {
        if let Some(violation) = unnamed(action, played) {
            return Ok(Some(violation));
        }
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
    pub(crate) fn awaiting(&self, action: &Action, played: &world::Played) -> Option<Violation> {
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
    pub(crate) fn stray_answered(
        &self,
        action: &Action,
        played: &world::Played,
    ) -> Option<Violation> {
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
    pub(crate) fn platform_refused(
        &self,
        action: &Action,
        played: &world::Played,
    ) -> Option<Violation> {
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
    pub(crate) fn audit_agrees(&mut self) -> Result<Option<Violation>, Error> {
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
    pub(crate) fn unslotted_race(&self, action: &Action) -> Option<&str> {
        let Action::Race { first, .. } = action else {
            return None;
        };
        let Action::Create { kind, .. } = first.as_ref() else {
            return None;
        };
        let stated = self.stated.kind(kind)?;
        (stated.limit.is_some() && stated.slot.is_none()).then_some(stated.kind)
    }

    pub(crate) fn replay_refuses(
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

pub(crate) fn reference(request: &Value) -> String {
    match request["namespace"].as_str() {
        Some(ns) => format!("{ns}/{}", request["name"].as_str().unwrap_or_default()),
        None => request["name"].as_str().unwrap_or_default().to_owned(),
    }
}

/// The rows whose refusal a request `rule` should have refused may cite: that rule, or a row
/// before it in `RULES` (a blocker the writer must clear first); with no rule named, any row.
pub(crate) fn rows_through(rule: Option<&str>) -> Vec<&'static str> {
    let rows = cozystack_resolver::rules::RULES;
    let last = rule
        .and_then(|rule| rows.iter().position(|row| row.name == rule))
        .unwrap_or(rows.len() - 1);
    rows[..=last].iter().map(|row| row.name).collect()
}

/// The first request of the step refused (403) without naming a row of `RULES` (or
/// `describe`): the audit log, `check` and the simulator lose why.
fn unnamed(action: &Action, played: &world::Played) -> Option<Violation> {
    let judged = played
        .writes
        .iter()
        .find(|j| j.response["code"] == 403 && cited_by(&j.response).is_none())?;
    Some(Violation {
        invariant: NAMED_INVARIANT.to_owned(),
        what: format!(
            "{}: {} refused naming no row: {}",
            action.describe(),
            reference(&judged.request),
            judged.response["message"].as_str().unwrap_or_default()
        ),
        request: judged.request.clone(),
        expect_allowed: false,
        rule: None,
        rows: Vec::new(),
        cluster: played.before.clone().unwrap_or_default(),
    })
}
