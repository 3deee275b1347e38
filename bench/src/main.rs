//! `make bench`: the per-request cost of the policy wasm under a host that costs what
//! Kubewarden's evaluator costs, against an accept-all policy built with the same SDK and
//! profile (the floor) and the same policy code compiled natively.
//!
//! The host model (`cozystack_policy_runtime::host`, `cozystack_policy_runtime::policy`): a fresh instance rehydrated
//! from the precompiled module per request; every host call handed to a callback thread and
//! waited for; list answers rebuilt from the reflector's stored (stripped, masked) objects and
//! serialised on every call; `get_resource` from a 5-second cache, masked and serialised per
//! call. What that mechanism does not reproduce (the policy-server's async runtime, kube-rs's
//! typed objects) is a residual per call and per byte, fitted once to kwctl's table (docs/benchmarks.md).
//! Each workload is also held against its protocol floor: the accept-all policy making the
//! smallest set of host calls that decides it (`floor.rs`).

mod breakdown;
mod floor;
mod heap;
mod kwctl;
mod model;
mod peer;
mod preflight;
mod report;
mod targets;
mod workloads;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cozystack_e2e::native::NativeHost;
use cozystack_e2e::scenario::Bundle;
use cozystack_e2e::{policy_path, workspace};
use cozystack_policy_runtime::host::HostCache;
use cozystack_policy_runtime::policy::{Instance, Metadata, Policy, read_module};
use serde_json::Value;

use crate::model::{Modelled, measure, timed};
use crate::preflight::preflight_run;
use crate::workloads::Row;
use crate::workloads::{ZERO_CALL_EMPTY_SETTINGS, workloads};

#[global_allocator]
static ALLOCATOR: heap::Counting = heap::Counting;

fn main() {
    let root = workspace();
    if let Ok(runs) = std::env::var("BENCH_NATIVE_RUNS") {
        return native_profile(&root, runs.parse().unwrap_or(1));
    }
    if let Some(other) = std::env::var_os("BENCH_AGAINST") {
        return against(&root, std::path::Path::new(&other));
    }
    // `make bench-kwctl`: the same workloads in Kubewarden's own evaluator.
    if let Some(kwctl) = std::env::var_os("BENCH_KWCTL") {
        return kwctl::run(std::path::Path::new(&kwctl), &root);
    }
    let policy = Policy::load_annotated(&policy_path())
        .unwrap_or_else(|e| panic!("{e}"))
        .with_callback_thread();
    let floor_wasm =
        read_module(&root.join("target/accept-all-policy.wasm")).unwrap_or_else(|e| panic!("{e}"));
    let floor_policy =
        Policy::load(&floor_wasm, Metadata::default()).unwrap_or_else(|e| panic!("{e}"));
    // The same floor making a workload's protocol-floor calls, its callback thread as ours.
    let floor_calls = Policy::load(&floor_wasm, Metadata::default())
        .unwrap_or_else(|e| panic!("{e}"))
        .with_callback_thread();
    let bundle = Bundle::load(&root.join("e2e/cluster")).unwrap_or_else(|e| panic!("{e}"));
    let budget = budget();

    // The floor as kwctl measures accept-all: on the Namespace request, no host calls, in
    // turns with the same request to this policy (kwctl's table comes from one run too).
    let mut floor = None;
    report::header();
    // Each workload, its cost in the model, and the verdict.
    let mut rows: Vec<Row> = Vec::new();
    // The native phases of each request without host calls, printed after the table.
    let mut phases = Vec::new();
    let only = std::env::var("BENCH_ONLY").unwrap_or_default();
    let all = workloads(&bundle);
    let empty_payload = all
        .iter()
        .find(|w| w.name == ZERO_CALL_EMPTY_SETTINGS)
        .map(|w| w.payload.clone())
        .expect("the zero-call workload with settings {}");
    for w in all.into_iter().filter(|w| w.name.contains(&only)) {
        // The policy-server's reflectors and caches, warm across this workload's requests.
        let cache: Arc<HostCache> = Arc::default();
        let probe = policy
            .validate_with(
                &w.payload,
                policy.host_state(w.cluster.clone(), vec![], Some(cache.clone())),
            )
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
            let host = NativeHost(Mutex::new(policy.host_state(
                w.cluster.clone(),
                vec![],
                Some(cache.clone()),
            )));
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
            let state = policy.host_state(w.cluster.clone(), vec![], Some(cache.clone()));
            let instance = policy.instantiate(state).expect("instantiate");
            let t = Instant::now();
            let evaluation = instance.validate(&w.payload).expect("validate");
            let elapsed = t.elapsed();
            host_samples.push(evaluation.host_time);
            elapsed
        };
        let floor_fresh = |payload: &[u8]| {
            let instance = floor_policy
                .instantiate(floor_policy.host_state(Arc::default(), vec![], None))
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
                    let host = NativeHost(Mutex::new(policy.host_state(
                        w.cluster.clone(),
                        vec![],
                        Some(cache.clone()),
                    )));
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
                [&mut ours_fresh, &mut || floor_fresh(&empty_payload)],
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
        );
        let floors = model.total.as_secs_f64() / accept_all.median().as_secs_f64();
        let protocol = floor::measured(
            &floor_calls,
            || policy.host_state(w.cluster.clone(), vec![], Some(cache.clone())),
            &w.payload,
            &w.floor,
            budget / 4,
        );
        if w.name.starts_with("Namespace") {
            floor = Some(accept_all);
        }
        // kwctl bench's loop: one instance, evaluated again and again (both warmed by a call).
        let warm_floors = probe.exchanges.is_empty().then(|| {
            let ours = policy
                .instantiate(policy.host_state(w.cluster.clone(), vec![], Some(cache.clone())))
                .expect("instantiate");
            let theirs = floor_policy
                .instantiate(floor_policy.host_state(Arc::default(), vec![], None))
                .expect("instantiate");
            let payload = &w.payload;
            let warm = |instance: &Instance| {
                timed(|| drop(instance.validate_warm(payload).expect("validate")))
            };
            let mut ours_run = || warm(&ours);
            let mut floor_run = || warm(&theirs);
            let [ours, theirs] = measure(budget / 4, [&mut ours_run, &mut floor_run]);
            ours.median().as_secs_f64() / theirs.median().as_secs_f64()
        });
        if warm_floors.is_some() {
            let split = breakdown::phases(&w.payload, budget / 4)
                .unwrap_or_else(|e| panic!("{}: {e}", w.name));
            phases.push((w.name.clone(), split));
        }
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
        report::row(&row);
        rows.push(row);
    }
    if !only.is_empty() {
        // A filtered run (profiling one workload) has no summary to check.
        report::phases(&phases);
        return;
    }
    let floor = floor.expect("the Namespace workload measures the floor");
    report::floor(&floor);
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
    let preflight = preflight_run(&policy, &bundle);

    let create = rows
        .iter()
        .find(|r| r.workload.name == workloads::STOCK_DEPLOYMENT_CREATE)
        .expect("the stock deployment's CREATE");
    let peer = peer::measure_peer(&floor_wasm, create, budget);
    report::peer(&peer);
    report::phases(&phases);
    report::audit(&rows);
    // The upstream change that would lower the largest floors: masks reaching metadata.
    let reaching: Vec<(&Row, floor::Floor)> = rows
        .iter()
        .filter(|r| r.workload.name.starts_with(floor::UPSTREAM_WEIGHED))
        .map(|r| {
            let cache = Arc::new(HostCache::masking_metadata());
            let floor = floor::measured(
                &floor_calls,
                || policy.host_state(r.workload.cluster.clone(), vec![], Some(cache.clone())),
                &r.workload.payload,
                &r.workload.floor,
                budget / 4,
            );
            (r, floor)
        })
        .collect();
    report::upstream(&reaching);

    let (targets, keys) = targets::targets(&policy, &bundle, &root, &rows, budget, &preflight);
    if report::targets(&targets, &keys) > 0 {
        std::process::exit(1);
    }
}

/// The profiling aid (`BENCH_NATIVE_RUNS=<n>`, e.g. under `valgrind --tool=callgrind`): only the
/// native build of the workloads `BENCH_ONLY` names, `runs` times each, against the same host
/// state. Nothing is compiled to machine code first, so a profiler counts the policy's work and
/// not wasmtime's compiler (ten minutes under callgrind).
fn native_profile(root: &std::path::Path, runs: usize) {
    let wasm = read_module(&policy_path()).unwrap_or_else(|e| panic!("{e}"));
    let metadata = Metadata::from_module(&wasm).unwrap_or_else(|e| panic!("{e}"));
    let bundle = Bundle::load(&root.join("e2e/cluster")).unwrap_or_else(|e| panic!("{e}"));
    let only = std::env::var("BENCH_ONLY").unwrap_or_default();
    for w in workloads(&bundle)
        .into_iter()
        .filter(|w| w.name.contains(&only))
    {
        let cache: Arc<HostCache> = Arc::default();
        for _ in 0..runs {
            let host = NativeHost(Mutex::new(metadata.host_state(
                w.cluster.clone(),
                vec![],
                Some(cache.clone()),
            )));
            std::hint::black_box(cozystack_capabilities_policy::evaluate(&w.payload, &host));
        }
    }
}

/// `BENCH_AGAINST=<annotated module>`: the module under test and another (an older commit's)
/// on the workloads `BENCH_ONLY` names, measured in turns in one process, so that a change of a
/// few microseconds shows through a shared machine's drift between runs. Prints each one's
/// median guest time (the evaluation less the time blocked in host calls) and their ratio.
fn against(root: &std::path::Path, other: &std::path::Path) {
    let load = |path: &std::path::Path| {
        Policy::load_annotated(path)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
            .with_callback_thread()
    };
    let (ours, theirs) = (load(&policy_path()), load(other));
    let bundle = Bundle::load(&root.join("e2e/cluster")).unwrap_or_else(|e| panic!("{e}"));
    let budget = budget();
    let only = std::env::var("BENCH_ONLY").unwrap_or_default();
    println!(
        "| workload | guest µs | guest µs, {} | ratio |",
        other.display()
    );
    println!("|---|---|---|---|");
    for w in workloads(&bundle)
        .into_iter()
        .filter(|w| w.name.contains(&only))
    {
        let guest = |policy: &Policy, cache: &Arc<HostCache>| {
            let state = policy.host_state(w.cluster.clone(), vec![], Some(cache.clone()));
            let instance = policy.instantiate(state).expect("instantiate");
            let t = Instant::now();
            let evaluation = instance.validate(&w.payload).expect("validate");
            t.elapsed().saturating_sub(evaluation.host_time)
        };
        let (our_cache, their_cache): (Arc<HostCache>, Arc<HostCache>) = Default::default();
        let [a, b] = measure(
            budget,
            [&mut || guest(&ours, &our_cache), &mut || {
                guest(&theirs, &their_cache)
            }],
        );
        println!(
            "| {} | {} | {} | {:.3} |",
            w.name,
            crate::model::micros(a.median()),
            crate::model::micros(b.median()),
            a.median().as_secs_f64() / b.median().as_secs_f64()
        );
    }
}

/// Each workload's measuring time: `BENCH_MS`, 2 s by default.
fn budget() -> Duration {
    Duration::from_millis(
        std::env::var("BENCH_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(2000),
    )
}
