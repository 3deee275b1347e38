//! `simulate`: long random lifecycles of a Cozystack install played through the real module,
//! deterministic from a seed. Actors with their real identities create, switch and delete
//! Tenants and apps through cozystack-api; cozystack-api and helm-controller write what follows
//! ([`world`], the model `check` applies); after every step the rules' guarantees are checked
//! on the state apart from the module ([`oracle`]). A violation is shrunk to the shortest
//! sequence that still shows it and written out as an e2e scenario. One job a room: drawing
//! (`draw`), refereeing (`referee`), shrinking (`shrink`), and the runs here.

mod draw;
pub mod oracle;
mod referee;
mod shrink;
pub mod statement;
pub mod streams;
pub mod validation;
pub mod world;

use draw::*;
use referee::*;
pub use referee::{Tally, Violation, never_fired};
pub use shrink::scenario;

use std::sync::Arc;
use std::time::{Duration, Instant};

use cozystack_platform::application::Api;
use cozystack_platform::writes::TenantChart;
use cozystack_policy_runtime::cluster::ClusterObjects;
use cozystack_policy_runtime::policy::Policy;
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;
use serde_json::Value;

use cozystack_platform::error::Error;
use oracle::Facts;
use statement::Statement;
use world::{Action, Upgrade, World};

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
    use cozystack_platform::flux::apply::{Applier, ChangeSet};
    use cozystack_policy_runtime::policy::warned_by;
    use serde_json::json;
    use statement::Role;
    use world::{Actor, Stray, manifest};

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
        let settings = cozystack_platform::admission::Settings::new(json!({}));
        let resolved = settings.resolved().unwrap_or_else(|e| panic!("{e}"));
        let dump = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../e2e/cluster");
        let cluster = ClusterObjects::read_dump(&[dump]).unwrap_or_else(|e| panic!("{e}"));
        let platform = (TenantChart::of(resolved), Api::of(resolved));
        let shared = Arc::new(settings.value().clone());
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
