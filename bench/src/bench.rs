//! One run of `make bench`: the modules loaded once, each workload measured into its row, and
//! the summary after the table (settings, pre-flight, the peer, the audit, the targets).

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cozystack_e2e::native::NativeHost;
use cozystack_e2e::policy_path;
use cozystack_e2e::scenario::Bundle;
use cozystack_policy_runtime::host::HostCache;
use cozystack_policy_runtime::policy::{Instance, Metadata, Policy, read_module};
use serde_json::Value;

use crate::breakdown::Phases;
use crate::model::{Modelled, Stats, measure, timed};
use crate::preflight::preflight_run;
use crate::workloads::{Row, Workload};
use crate::{budget, floor, heap, peer, report, targets, workloads};

/// The modules a run measures, loaded once, and the time each measurement may take.
pub struct Bench {
    policy: Policy,
    floor_wasm: Vec<u8>,
    floor_policy: Policy,
    /// The same floor making a workload's protocol-floor calls, its callback thread as ours.
    floor_calls: Policy,
    budget: Duration,
}

/// A workload measured: its row, the accept-all floor on its payload, and the native phases
/// of a request without host calls.
pub struct Measured {
    pub row: Row,
    /// The accept-all floor on the workload's payload, and that payload's length.
    pub accept_all: (Stats, usize),
    pub phases: Option<(String, Phases)>,
}

impl Bench {
    pub fn load(root: &Path) -> Bench {
        let policy = Policy::load_annotated(&policy_path())
            .unwrap_or_else(|e| panic!("{e}"))
            .with_callback_thread();
        let floor_wasm = read_module(&root.join("target/accept-all-policy.wasm"))
            .unwrap_or_else(|e| panic!("{e}"));
        let load =
            || Policy::load(&floor_wasm, Metadata::default()).unwrap_or_else(|e| panic!("{e}"));
        let (floor_policy, floor_calls) = (load(), load().with_callback_thread());
        Bench {
            policy,
            floor_wasm,
            floor_policy,
            floor_calls,
            budget: budget(),
        }
    }

    /// Measures `w` in the model, natively, against the accept-all floor and against its
    /// protocol floor; `empty_payload` is the zero-call request with settings `{}`.
    pub fn row(&self, w: Workload, empty_payload: &[u8]) -> Measured {
        let (policy, budget) = (&self.policy, self.budget);
        // The policy-server's reflectors and caches, warm across this workload's requests.
        let cache: Arc<HostCache> = Arc::default();
        let state = || policy.host_state(w.cluster.clone(), vec![], Some(cache.clone()));
        let probe = policy
            .validate_with(&w.payload, state())
            .unwrap_or_else(|e| panic!("{}: {e}", w.name));
        // `BENCH_CALLS=1`: each host call and what it answered, to weigh a change of lookups.
        if std::env::var_os("BENCH_CALLS").is_some() {
            for exchange in &probe.exchanges {
                eprintln!("{}: {exchange}", w.name);
            }
        }
        // The largest answer one call hands the guest, and the guest's peak heap (the payload
        // is copied into it too).
        let largest = probe
            .exchanges
            .iter()
            .map(|e| e.response.as_ref().map_or(0, |body| body.len()))
            .max()
            .unwrap_or(0);
        let heap_peak = {
            let host = NativeHost(Mutex::new(state()));
            heap::peak_of(|| {
                std::hint::black_box(cozystack_capabilities_policy::evaluate(
                    &w.payload,
                    &heap::Uncounted(&host),
                ));
            }) + w.payload.len()
        };
        let mut host_samples = Vec::new();
        // A fresh instance per request, as the policy-server runs each: this policy on the
        // workload's payload, and the accept-all floor on a payload given.
        let mut ours_fresh = || {
            let instance = policy.instantiate(state()).expect("instantiate");
            let t = std::time::Instant::now();
            let evaluation = instance.validate(&w.payload).expect("validate");
            let elapsed = t.elapsed();
            host_samples.push(evaluation.host_time);
            elapsed
        };
        let floor_fresh = |payload: &[u8]| {
            let instance = self
                .floor_policy
                .instantiate(self.floor_policy.host_state(Arc::default(), vec![], None))
                .expect("instantiate");
            timed(|| {
                instance.validate(payload).expect("floor");
            })
        };
        let [wasm, accept_all, native] = measure(
            budget,
            [
                &mut ours_fresh,
                &mut || floor_fresh(&w.payload),
                &mut || {
                    let host = NativeHost(Mutex::new(state()));
                    timed(|| {
                        std::hint::black_box(cozystack_capabilities_policy::evaluate(
                            &w.payload, &host,
                        ));
                    })
                },
            ],
        );
        // A request without host calls against the floor on the payload with settings {}, in
        // turns (its host time, which these runs add to the samples, is nil).
        let empty_floor = probe.exchanges.is_empty().then(|| {
            let [ours, theirs] = measure(
                budget / 4,
                [&mut ours_fresh, &mut || floor_fresh(empty_payload)],
            );
            (ours.median(), theirs.median())
        });
        host_samples.sort();
        let host_median = host_samples[host_samples.len() / 2];
        let model = Modelled::new(
            wasm.median(),
            host_median,
            probe.exchanges.len(),
            probe.response_bytes(),
            w.payload.len(),
        );
        let floors = model.total.as_secs_f64()
            / (accept_all.median() + crate::model::per_request(w.payload.len())).as_secs_f64();
        let protocol = floor::measured(&self.floor_calls, state, &w.payload, &w.floor, budget / 4);
        let warm_floors = probe
            .exchanges
            .is_empty()
            .then(|| self.warm_floors(&w, &cache));
        let phases = warm_floors.is_some().then(|| {
            let split = crate::breakdown::phases(&w.payload, budget / 4)
                .unwrap_or_else(|e| panic!("{}: {e}", w.name));
            (w.name.clone(), split)
        });
        let row = Row {
            verdict: probe.response["accepted"].clone(),
            workload: w,
            model,
            floors,
            protocol,
            heap_peak,
            largest,
            p99: wasm.p99(),
            spread: wasm.spread(),
            native: native.median(),
            warm_floors,
            empty_floor,
        };
        let payload = row.workload.payload.len();
        Measured {
            row,
            accept_all: (accept_all, payload),
            phases,
        }
    }

    /// kwctl bench's loop: one instance, evaluated again and again (both warmed by a call);
    /// this policy's median over the accept-all floor's.
    fn warm_floors(&self, w: &Workload, cache: &Arc<HostCache>) -> f64 {
        let ours = self
            .policy
            .instantiate(
                self.policy
                    .host_state(w.cluster.clone(), vec![], Some(cache.clone())),
            )
            .expect("instantiate");
        let theirs = self
            .floor_policy
            .instantiate(self.floor_policy.host_state(Arc::default(), vec![], None))
            .expect("instantiate");
        let warm = |instance: &Instance| {
            timed(|| drop(instance.validate_warm(&w.payload).expect("validate")))
        };
        let mut ours_run = || warm(&ours);
        let mut floor_run = || warm(&theirs);
        let [ours, theirs] = measure(self.budget / 4, [&mut ours_run, &mut floor_run]);
        ours.median().as_secs_f64() / theirs.median().as_secs_f64()
    }

    /// What follows the table: `validate_settings`, the pre-flight, the peer, the phases, the
    /// audit, the upstream change, and the targets (exit 1 when one is missed).
    pub fn summary(&self, root: &Path, bundle: &Bundle, rows: &[Row], phases: &[(String, Phases)]) {
        let (policy, budget) = (&self.policy, self.budget);
        let settings_payload = serde_json::to_vec(&bundle.settings).expect("settings");
        let [settings] = measure(
            budget,
            [&mut || {
                timed(|| {
                    policy
                        .validate_settings(
                            &serde_json::from_slice::<Value>(&settings_payload).expect("json"),
                        )
                        .expect("settings");
                })
            }],
        );
        report::validate_settings(&settings);
        let preflight = preflight_run(policy, bundle);

        let create = rows
            .iter()
            .find(|r| r.workload.name == workloads::STOCK_DEPLOYMENT_CREATE)
            .expect("the stock deployment's CREATE");
        let peer = peer::measure_peer(&self.floor_wasm, create, budget);
        report::peer(&peer);
        report::phases(phases);
        report::audit(rows);
        // The upstream change that would lower the largest floors: masks reaching metadata.
        let reaching: Vec<(&Row, floor::Floor)> = rows
            .iter()
            .filter(|r| r.workload.name.starts_with(floor::UPSTREAM_WEIGHED))
            .map(|r| {
                let cache = Arc::new(HostCache::masking_metadata());
                let floor = floor::measured(
                    &self.floor_calls,
                    || policy.host_state(r.workload.cluster.clone(), vec![], Some(cache.clone())),
                    &r.workload.payload,
                    &r.workload.floor,
                    budget / 4,
                );
                (r, floor)
            })
            .collect();
        report::upstream(&reaching);

        let (targets, keys) = targets::targets(policy, bundle, root, rows, budget, &preflight);
        if report::targets(&targets, &keys) > 0 {
            std::process::exit(1);
        }
    }
}
