//! At most `max`, even when requests race. Cardinality is judged against the policy-server's
//! cached lists, so CREATEs that arrive within the cache's lag all see the same cluster. Here N
//! CREATEs of one singleton are judged by the real wasm against one snapshot (concurrent
//! requests meeting one cache), and the admitted ones are then written into a store that
//! refuses a second object of one namespace and name, as the API server does (409
//! AlreadyExists, decided in etcd). Without slots the race lets several instances in; with the
//! stock slots exactly `max` land, whichever order the writes take.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::{Value, json};

use cozystack_e2e::scenario::{Bundle, ShortRequest, without_slots};
use cozystack_e2e::{policy_path, workspace};
use cozystack_policy_runtime::cluster::ClusterObjects;
use cozystack_policy_runtime::policy::Policy;

/// The API server's one lock: a HelmRelease name is unique within its namespace.
#[derive(Default)]
struct Store(BTreeSet<(String, String)>);

impl Store {
    /// `false` is the API server's 409 AlreadyExists.
    fn create(&mut self, namespace: &str, name: &str) -> bool {
        self.0.insert((namespace.to_owned(), name.to_owned()))
    }

    fn in_namespace(&self, namespace: &str) -> usize {
        self.0.iter().filter(|(ns, _)| ns == namespace).count()
    }
}

/// What one racer asks for, and the HelmRelease its admission makes.
enum Racer {
    /// An Application created through cozystack-api: release `<prefix><name>`.
    Application(&'static str),
    /// Tenant acme's `monitoring` switch turned on: the chart renders release `monitoring`.
    Switch,
}

struct Race {
    policy: Policy,
    bundle: Bundle,
}

impl Race {
    fn new() -> Race {
        let policy = Policy::load_annotated(&policy_path()).unwrap_or_else(|e| panic!("{e}"));
        let bundle =
            Bundle::load(&workspace().join("e2e/cluster")).unwrap_or_else(|e| panic!("{e}"));
        Race { policy, bundle }
    }

    /// The bundled settings, with every kind's slots dropped when `slots` is false.
    fn settings(&self, slots: bool) -> Value {
        if slots {
            self.bundle.settings.clone()
        } else {
            without_slots(&self.bundle.settings)
        }
    }

    /// Monitoring's release prefix, as its ApplicationDefinition states it.
    fn prefix(&self) -> String {
        self.bundle
            .cluster
            .values()
            .find(|o| o.pointer("/spec/application/kind") == Some(&json!("Monitoring")))
            .and_then(|d| {
                d.pointer("/spec/release/prefix")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            })
            .expect("Monitoring's definition states its prefix")
    }

    /// Judges every racer against one snapshot, then writes the admitted ones in order; returns
    /// the Monitoring releases tenant-acme ends with and the refusals' messages.
    fn run(&self, racers: &[Racer], slots: bool) -> (usize, Vec<String>) {
        let snapshot: Arc<ClusterObjects> = Arc::new(self.bundle.cluster.clone());
        let settings = self.settings(slots);
        let prefix = self.prefix();
        let mut store = Store::default();
        let mut refusals = Vec::new();
        let mut admitted = Vec::new();
        for racer in racers {
            let (request, release) = match racer {
                Racer::Application(name) => (
                    ShortRequest::new(
                        "CREATE",
                        "Monitoring",
                        "tenant-acme",
                        name,
                        "sam",
                        &["tenant-acme-super-admin"],
                    ),
                    format!("{prefix}{name}"),
                ),
                Racer::Switch => (
                    ShortRequest {
                        object: Some(json!({"spec": {"monitoring": true}})),
                        ..ShortRequest::new(
                            "UPDATE",
                            "Tenant",
                            "tenant-root",
                            "acme",
                            "rita",
                            &["tenant-root-super-admin"],
                        )
                    },
                    "monitoring".to_owned(),
                ),
            };
            let evaluation = self
                .policy
                .validate(
                    &request.expand(&snapshot),
                    &settings,
                    snapshot.clone(),
                    vec![],
                )
                .unwrap_or_else(|e| panic!("{e}"));
            let response = &evaluation.response;
            if response["accepted"] == true {
                admitted.push(release);
            } else {
                refusals.push(response["message"].as_str().unwrap_or_default().to_owned());
            }
        }
        // The writes land after every verdict was given: none of them was in the cache.
        for release in admitted {
            store.create("tenant-acme", &release);
        }
        (store.in_namespace("tenant-acme"), refusals)
    }
}

const OFF_SLOT: &str = "Monitoring: Monitoring is held to at most 1 per tenant by its name: create it as tenant-acme/monitoring (cardinality.slots)";

#[test]
fn racing_creates_of_a_singleton_land_once_with_slots() {
    let race = Race::new();
    // A double click in the dashboard, GitOps applies and a second administrator, all within
    // the cache's lag: eight CREATEs, four names.
    let racers: Vec<Racer> = [
        "monitoring",
        "monitoring",
        "metrics",
        "monitoring",
        "stack",
        "monitoring",
        "prometheus",
        "monitoring",
    ]
    .into_iter()
    .map(Racer::Application)
    .collect();
    assert!(racers.len() >= 8);
    // Without slots every CREATE sees no Monitoring in tenant-acme and is admitted: each name
    // lands once, four instances of a kind held to one.
    let (landed, refusals) = race.run(&racers, false);
    assert_eq!((landed, refusals.len()), (4, 0), "{refusals:?}");
    // With the stock slot only `monitoring` is admitted; the API server keeps one of them.
    let (landed, refusals) = race.run(&racers, true);
    assert_eq!(landed, 1);
    let mut refused: Vec<String> = refusals;
    refused.sort();
    let expected: Vec<String> = ["metrics", "prometheus", "stack"]
        .iter()
        .map(|name| OFF_SLOT.replacen("Monitoring:", &format!("Monitoring tenant-acme/{name}:"), 1))
        .collect();
    assert_eq!(refused, expected);
}

#[test]
fn an_application_racing_a_tenant_switch_lands_once_with_slots() {
    let race = Race::new();
    // The owner turns monitoring on while an administrator creates one from the dashboard.
    for name in ["metrics", "monitoring"] {
        let racers = [Racer::Switch, Racer::Application(name)];
        let (landed, refusals) = race.run(&racers, false);
        // Without slots: the chart's `monitoring` and the Application's own name.
        let expected_without = if name == "monitoring" { 1 } else { 2 };
        assert_eq!(
            (landed, refusals.len()),
            (expected_without, 0),
            "{name}: {refusals:?}"
        );
        let (landed, refusals) = race.run(&racers, true);
        assert_eq!(landed, 1, "{name}");
        let expected: Vec<String> = match name {
            "metrics" => {
                vec![OFF_SLOT.replacen("Monitoring:", "Monitoring tenant-acme/metrics:", 1)]
            }
            _ => Vec::new(),
        };
        assert_eq!(refusals, expected, "{name}");
    }
}
