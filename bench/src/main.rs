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

mod bench;
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
use cozystack_policy_runtime::policy::{Metadata, Policy, read_module};

use crate::bench::Bench;
use crate::model::measure;
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
    let bench = Bench::load(&root);
    let bundle = Bundle::load(&root.join("e2e/cluster")).unwrap_or_else(|e| panic!("{e}"));

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
        let measured = bench.row(w, &empty_payload);
        if measured.row.workload.name.starts_with("Namespace") {
            floor = Some(measured.accept_all);
        }
        phases.extend(measured.phases);
        report::row(&measured.row);
        rows.push(measured.row);
    }
    if !only.is_empty() {
        // A filtered run (profiling one workload) has no summary to check.
        report::phases(&phases);
        return;
    }
    let floor = floor.expect("the Namespace workload measures the floor");
    report::floor(&floor);
    bench.summary(&root, &bundle, &rows, &phases);
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
