//! The targets `make bench` checks, each with the measured cause printed when it is missed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cozystack_e2e::native::NativeHost;
use cozystack_e2e::scenario::{self, Bundle};
use cozystack_e2e::workspace;
use cozystack_policy_runtime::host::HostCache;
use cozystack_policy_runtime::policy::Policy;
use serde_json::Value;

use crate::model::{
    RESIDUAL_PER_BYTE_NS, RESIDUAL_PER_CALL_US, RESIDUAL_PER_PAYLOAD_BYTE_NS,
    RESIDUAL_PER_REQUEST_US, measure, micros, millis, timed,
};
use crate::preflight::PreflightRun;
use crate::workloads::Row;
use crate::workloads::{
    DEFINITIONS_READ, NO_SLOTS, SETTINGS_ONLY, STOCK_DEPLOYMENT_CREATE, STOCK_DEPLOYMENT_ZERO_CALL,
    ZERO_CALL_EMPTY_SETTINGS,
};
use cozystack_policy::ops::footprint::{DEPLOYED_TIMEOUT_EVAL_SECONDS, Footprint};

/// The module before #26 compiled the stock rule set in (the parent of commit 2de2a5a), and
/// what the table and its code added to it (582,429 → 587,483 bytes): the size budget.
const BEFORE_BUILTIN: u64 = 582_429;
const BUILTIN_TABLE: u64 = 5_054;

/// What the 40,000-tenant pre-flight's time is made of (docs/benchmarks.md, round #35).
const LARGE_PREFLIGHT_CAUSE: &str = "each object is replayed once, and no replay reads a list of every tenant: the Info releases and the modules a Tenant switches on are on their slots, which an audit replay does not count (a surplus is reported on the instances off the slots); the YAML is streamed with the managed fields dropped as lines, and each replay is one evaluation on a warm instance per core, its payload written from the object's stored text and the settings without decoding them. On live-sized objects the dump is 541 MB (each object with its writers' managed fields and helm-controller's status) and took 11.9-12.8 s, 4.6 s of it the read, measured 2026-12-04 with the accept-all floor at 56-64 µs; the dump of 388 MB before took 9.2-10.6 s. 451.7 s before the slot holders were kept, each Info replay reading 40,000 releases. What is left is CPU on both cores: the read (8.4 CPU-s, libyaml's scanner the most of it) and the replays (12.5 CPU-s, two thirds of them the module's own evaluation)";

/// What the 40,000-tenant pre-flight's peak memory is made of (docs/benchmarks.md, round #35).
const LARGE_PREFLIGHT_MEMORY: &str = "the snapshot keeps each object as its JSON text beside its identity, stripped of its managed fields, the YAML is streamed in batches of 2,048 items with the managed fields dropped as lines, and a list is masked one object at a time; the rest is the GET index, the memoised answers and one instance per core (484 MiB measured 2026-12-04 on live-sized objects; 396-410 MiB on the smaller ones before; 647 MiB while each Info replay read every tenant's release)";

/// What the module's bytes are when the annotated module is over 450 KB (docs/benchmarks.md,
/// round #35, "the module under 450 KB"): `twiggy top` of an unstripped build.
const ANNOTATED_SIZE_CAUSE: &str = "the rules (~97 KB), serde_json's deserialisers for the settings, the rule blocks and a release's values (~55 KB), data (~48 KB: messages, std's error names), core and alloc (~81 KB), the scanner that reads the request and the host's answers (~35 KB), the ordered maps still used (~21 KB: labels, JSON objects, raw blocks, field masks), core's float formatting for serde's messages (~15 KB); the annotation adds policy-metadata.yml and the README as usage (~14 KB). `twiggy paths` tells what retains a function: a second serde reader type, a JSON value written back or a new BTreeMap key and value type each cost 3-12 KB. A smaller build gives up speed: rustc's opt-level z made the warm zero-call request 2.2× the floor, wasm-opt -Os 1.45-1.52×";

/// Why a workload costs more than its protocol floor (docs/benchmarks.md#the-protocol-floor).
const FLOOR_CAUSE: &str = "the floor hands each answer over and reads none of it; the policy scans every answer (an item is its whole metadata: the guest column, about 3 ns a byte) and decodes its request, its settings and the rules a request needs, which on a fresh instance is the whole gap of the small CREATEs (100-300 µs over the accept-all policy); its calls beyond the floor's are small: the protected DELETE's list of ComputePlane (its empty release prefix cannot tell its releases from Kubernetes' by name) and of the providers, and up to six Namespaces read to name consumers in the message (about 2.2 KB a GET with its managed fields)";

/// Why the first evaluation after a start outlasts the budget at 40,000 tenants
/// (docs/benchmarks.md#the-policy-servers-memory-and-first-evaluation).
const FIRST_FILL_CAUSE: &str = "the first evaluation to open a list key waits for the policy-server's reflector to take its initial LIST, inside timeoutEvalSeconds; the estimate is fitted to the real policy-server on live-sized trees (cli/src/ops/footprint.rs: 374 ms plus 63.4 ms a MiB listed; 7.0 s measured at 40,000 tenants, where the evaluation was interrupted), and no lookup of the policy avoids a LIST its decision needs (the protocol floor); at that scale raise timeoutEvalSeconds as deploy/README.md#sizing says";

/// One target: what it says with the measured numbers, whether it is met, and why not.
pub struct Target {
    pub text: String,
    pub met: bool,
    pub cause: String,
}

/// Every target, computed from the measured rows and the pre-flight; and the distinct list keys
/// the scenarios open.
pub fn targets(
    policy: &Policy,
    bundle: &Bundle,
    root: &Path,
    rows: &[Row],
    budget: Duration,
    preflight: &PreflightRun,
) -> (Vec<Target>, BTreeSet<String>) {
    // The summary checks the targets.
    // The module the policy-server compiles; the annotated file adds the README as usage.
    let bytes = |file: &str| {
        std::fs::metadata(root.join(file))
            .map(|m| m.len())
            .unwrap_or(u64::MAX)
    };
    let size = bytes("policy.wasm");
    // What is pushed and what `kwctl pull` fetches, less its custom sections (the metadata and
    // the README as usage, which the documentation may grow): the code the policy-server loads.
    let annotated = std::fs::read(root.join("annotated-policy.wasm"))
        .ok()
        .and_then(|wasm| cozystack_packaging::section::code_size(&wasm).ok())
        .map_or(u64::MAX, |code| code as u64);
    let keys = list_keys(policy, bundle);
    let kinds = bundle
        .cluster
        .keys()
        .filter(|(_, kind, _, _)| kind == "ApplicationDefinition")
        .count()
        + bundle.settings["definitions"].as_object().map_or(0, |d| {
            d.keys()
                .filter(|k| {
                    !bundle.cluster.values().any(|o| {
                        o.pointer("/spec/application/kind").and_then(Value::as_str) == Some(k)
                    })
                })
                .count()
        });
    // A class's consumer kinds may share one list (their release prefixes tell them apart).
    let classes = bundle.settings["definitions"]
        .as_object()
        .map_or(BTreeSet::new(), |d| {
            d.values()
                .filter_map(|f| f.pointer("/capability/consumes")?.as_array())
                .flatten()
                .filter_map(Value::as_str)
                .collect::<BTreeSet<_>>()
        })
        .len();
    let find = |prefix: &str| {
        rows.iter()
            .find(|r| r.workload.name.starts_with(prefix))
            .expect("workload")
    };
    let counted = |n: usize| {
        rows.iter()
            .find(|r| r.workload.listed == n && r.workload.name.starts_with("CREATE counted"))
            .expect("counted")
    };
    // The policy's own share: the guest's time per listed item (the host's is the model's).
    let slope_per_byte = (counted(4000).model.guest().as_secs_f64()
        - counted(1).model.guest().as_secs_f64())
        / (counted(4000).model.bytes - counted(1).model.bytes).max(1) as f64
        * 1e9;
    let slope_ns = (counted(4000).model.guest().as_secs_f64()
        - counted(1).model.guest().as_secs_f64())
        / 3999.0
        * 1e9;
    // Today's CRD prunes the rules, so today's configuration reads them from the settings.
    let small_creates: Vec<&Row> = rows
        .iter()
        .filter(|r| {
            let name = &r.workload.name;
            name.starts_with("CREATE") && name.ends_with(SETTINGS_ONLY) && r.workload.listed <= 100
        })
        .collect();
    let over_one: Vec<String> = small_creates
        .iter()
        .filter(|r| r.model.calls > 1)
        .map(|r| format!("{} ({})", r.workload.name, r.model.calls))
        .collect();
    let consumed = find("DELETE shared provider, 4000");
    let consumed_40k = find("DELETE shared provider, 40000");
    let consumed_rows = [
        consumed,
        find("UPDATE Tenant switching a shared provider off, 4000"),
        consumed_40k,
    ];
    let timeout = DEPLOYED_TIMEOUT_EVAL_SECONDS;
    // The first evaluation's wait for the initial LIST, at each scale, plus the warm cost.
    let first_fills: Vec<(usize, f64, f64)> = [(4000, consumed), (40_000, consumed_40k)]
        .into_iter()
        .map(|(n, row)| {
            let footprint = Footprint::of(&row.workload.cluster);
            let fill = footprint.first_fill_ms() / 1000.0;
            (
                n,
                fill + row.model.total.as_secs_f64(),
                footprint.memory_mib().0,
            )
        })
        .collect();
    let worst_floor = rows
        .iter()
        .max_by(|a, b| a.over_floor().total_cmp(&b.over_floor()))
        .expect("workloads");
    let over_floor: Vec<String> = rows
        .iter()
        .filter(|r| r.over_floor() > 1.5)
        .map(|r| {
            format!(
                "{} {:.2}× ({} calls and {} bytes against the floor's {} and {})",
                r.workload.name,
                r.over_floor(),
                r.model.calls,
                r.model.bytes,
                r.protocol.calls,
                r.protocol.bytes
            )
        })
        .collect();
    let unconsumed = find("DELETE unconsumed provider, 4000");
    let by_flux = find("DELETE unconsumed provider by Flux");
    let slotted_create = find(&format!(
        "CREATE of a module by its tenant admin, 100 tenants{SETTINGS_ONLY}"
    ));
    let unslotted_create = find(&format!(
        "CREATE of a module by its tenant admin, 100 tenants{SETTINGS_ONLY}{NO_SLOTS}"
    ));
    // The slot check alone: the two native CREATEs measured in turns, so that the shared
    // machine's noise falls on both alike and the difference of their medians is the check.
    let native_run = |row: &Row| {
        let cache = Arc::<HostCache>::default();
        let (cluster, payload) = (row.workload.cluster.clone(), row.workload.payload.clone());
        move || {
            let host = NativeHost(Mutex::new(policy.host_state(
                cluster.clone(),
                vec![],
                Some(cache.clone()),
            )));
            timed(|| {
                std::hint::black_box(cozystack_capabilities_policy::evaluate(&payload, &host));
            })
        }
    };
    let (mut slotted_run, mut unslotted_run) =
        (native_run(slotted_create), native_run(unslotted_create));
    // On a thread of its own: the main thread's heap holds every tree, and its allocator's
    // free lists slow the native host's clones several times over.
    let [with_slots, without] = std::thread::scope(|scope| {
        scope
            .spawn(|| measure(budget, [&mut slotted_run, &mut unslotted_run]))
            .join()
            .expect("the slot check's thread")
    });
    let slot_cost = with_slots.median().as_secs_f64() - without.median().as_secs_f64();
    let stock_zero = find("Namespace label UPDATE, stock rule set");
    let empty_zero = find(ZERO_CALL_EMPTY_SETTINGS);
    let deployed_zero = find(STOCK_DEPLOYMENT_ZERO_CALL);
    let deployed_create = find(STOCK_DEPLOYMENT_CREATE);
    // The accept-all floor on the payload with settings {}.
    // The stock deployment's zero-call request against the floor on the payload with
    // settings {}, timed in turns.
    let (deployed_fresh, empty_floor) = deployed_zero
        .empty_floor
        .expect("a zero-call row is timed against the floor with settings {}");
    let deployed_floors = deployed_fresh.as_secs_f64() / empty_floor.as_secs_f64();
    let deployed_warm = deployed_zero.warm_floors.unwrap_or(f64::INFINITY);
    // The same CREATE reading 14 and 140 ApplicationDefinitions: the guest's share.
    let (few, many) = (
        find(&format!("{DEFINITIONS_READ}14 ")),
        find(&format!("{DEFINITIONS_READ}140 ")),
    );
    let definitions_growth = many.model.guest().as_secs_f64() / few.model.guest().as_secs_f64();
    let extra_guest = many.model.guest().as_secs_f64() - few.model.guest().as_secs_f64();
    let per_definition_ns = extra_guest / 126.0 * 1e9;
    let per_byte_ns =
        extra_guest / many.model.bytes.saturating_sub(few.model.bytes).max(1) as f64 * 1e9;
    // (what, met, the measured cause when missed)
    // The model against kwctl's medians where `make bench-kwctl` measured the workload.
    let against: Vec<(f64, &Row)> = rows
        .iter()
        .filter_map(|r| {
            let (low, _) = r.workload.kwctl?;
            Some((r.model.total.as_secs_f64() * 1e6 / low, r))
        })
        .collect();
    let low: Vec<String> = against
        .iter()
        .filter(|(ratio, _)| *ratio < 1.0)
        .map(|(ratio, r)| format!("{} {ratio:.2}×", r.workload.name))
        .collect();
    let lowest = against
        .iter()
        .map(|(ratio, _)| *ratio)
        .fold(f64::INFINITY, f64::min);
    // A figure whose workload was renamed or dropped would hold the model to nothing.
    let unmatched: Vec<&str> = (crate::workloads::KWCTL_MEASURED.iter())
        .map(|(name, _)| *name)
        .filter(|name| rows.iter().all(|r| r.workload.name != *name))
        .collect();
    let mut checks: Vec<(String, bool, String)> = vec![
        (
            format!(
                "the model errs high: on each of the {} workloads `make bench-kwctl` measured, the modelled median at least kwctl's: lowest {lowest:.2}×{}{}",
                against.len(),
                if low.is_empty() { String::new() } else { format!("; under it: {}", low.join(", ")) },
                if unmatched.is_empty() { String::new() } else { format!("; kwctl figures naming no workload: {}", unmatched.join(", ")) },
            ),
            !against.is_empty() && low.is_empty() && unmatched.is_empty(),
            format!(
                "the residuals (bench/src/model.rs: {RESIDUAL_PER_REQUEST_US} µs a request and {RESIDUAL_PER_PAYLOAD_BYTE_NS} ns a byte of its payload, {RESIDUAL_PER_CALL_US} µs a call, {RESIDUAL_PER_BYTE_NS} ns a byte answered) were fitted to kwctl's medians of one day; a change that makes the module cheaper in the harness than in kwctl needs `make bench-kwctl` again and a refit"
            ),
        ),
        (
            format!(
                "with definitionSource: applicationDefinitions, the guest's cost grows with the kinds a request needs, not with the definitions listed: 140 definitions at most 1.2× the guest time of 14: {definitions_growth:.2}× ({} µs against {} µs; the host's share, one list call, {} against {} µs)",
                micros(many.model.guest()),
                micros(few.model.guest()),
                micros(many.model.host),
                micros(few.model.host),
            ),
            definitions_growth <= 1.2,
            format!(
                "the guest decodes only the kinds a request asks for, but it still scans every listed item for its kind and name and checks its grammar: {per_definition_ns:.0} ns per definition, {per_byte_ns:.1} ns per byte the list grew, the rate at which the guest scans any list answer (docs/benchmarks.md)"
            ),
        ),
        (
            format!(
                "a request without host calls under the stock deployment (built-in rules) at most 1.5× the accept-all floor with settings {{}}: {deployed_floors:.2}× on a fresh instance, as the policy-server runs every request ({} µs against {} µs, medians timed in turns), {deployed_warm:.2}× on a warm one, as kwctl bench loops; a module CREATE there makes {} host call(s) in {} µs",
                micros(deployed_fresh),
                micros(empty_floor),
                deployed_create.model.calls,
                micros(deployed_create.model.total),
            ),
            deployed_floors <= 1.5 && deployed_warm <= 1.5,
            format!(
                "the built-in rules cost what settings {{}} cost ({} µs against {} µs); on a warm instance the fixed cost of a call (the first call's lazy set-up, the instance's teardown) is gone and the guest's own work shows (its native phases are printed above): one walk of the payload that reads every string of the request (a fifth of the instructions), the labels a rule reads copied into owned maps for the resolver, and the rules, where the accept-all policy decodes one typed request",
                micros(deployed_zero.model.total),
                micros(empty_zero.model.total),
            ),
        ),
        (
            format!(
                "a request without host calls, with the stock rule set, at most 2× the accept-all floor: {:.2}× ({:.2}× with settings {{}})",
                stock_zero.floors, empty_zero.floors
            ),
            stock_zero.floors <= 2.0,
            format!(
                "the guest decodes the payload, the request and the settings' shared fields on every request ({} µs over the floor with {{}}, {} µs more with the stock rule set, whose kind blocks are only scanned)",
                micros(empty_zero.model.total.saturating_sub(empty_zero.model.total.div_f64(empty_zero.floors))),
                micros(stock_zero.model.total.saturating_sub(empty_zero.model.total)),
            ),
        ),
        (
            format!(
                "every CREATE at ≤100 instances makes at most 1 host call (stock rule set): {}",
                if over_one.is_empty() { "all".to_owned() } else { format!("more in {}", over_one.join(", ")) }
            ),
            over_one.is_empty(),
            "a consumer's CREATE reads its namespace (the provider labels its name cannot give) and, where a label names an ancestor, whether that ancestor's provider runs (its Namespace's own label, or the root Tenant's switches): a label copied from the parent's values says nothing of it; a Tenant's CREATE lists the instances of each module kind it switches on (module kinds have no release prefix to share a list by)".to_owned(),
        ),
        (
            format!(
                "every workload within 1.5× of its protocol floor (the smallest set of host calls that decides it, served by the same host, plus the accept-all policy on its payload): worst {:.2}× ({}: {} µs against {} µs){}",
                worst_floor.over_floor(),
                worst_floor.workload.name,
                micros(worst_floor.model.total),
                micros(worst_floor.protocol.total),
                if over_floor.is_empty() { String::new() } else { format!("; over it: {}", over_floor.join(", ")) },
            ),
            over_floor.is_empty(),
            FLOOR_CAUSE.to_owned(),
        ),
        (
            format!(
                "the DELETE or switch-off of a provider consumed by 4,000 and by 40,000 tenants, warm, under a tenth of the deployed timeoutEvalSeconds ({timeout:.0} s): {}",
                consumed_rows
                    .iter()
                    .map(|r| format!(
                        "{} {} ms (allowed={})",
                        r.workload.name,
                        millis(r.model.total),
                        r.verdict
                    ))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
            consumed_rows
                .iter()
                .all(|r| r.model.total.as_secs_f64() < timeout / 10.0),
            format!(
                "the consumer kinds' release list, every consumer's whole metadata: {} bytes at 40,000 tenants, cloned and serialised by the host ({} ms) and scanned by the guest ({} ms)",
                consumed_40k.model.bytes,
                millis(consumed_40k.model.host),
                millis(consumed_40k.model.guest()),
            ),
        ),
        (
            format!(
                "the first such DELETE after a policy-server start, which waits inside its budget for the initial LIST of the releases it lists, under the deployed timeoutEvalSeconds ({timeout:.0} s): {}",
                first_fills.iter().map(|(n, s, mib)| format!("{n} tenants {s:.1} s (the policy-server then holds about {mib:.0} MiB)")).collect::<Vec<_>>().join(", "),
            ),
            first_fills.iter().all(|(_, s, _)| *s < timeout),
            FIRST_FILL_CAUSE.to_owned(),
        ),
        (
            format!(
                "unconsumed DELETE at 4,000 tenants makes at most 2 host calls: {} by Flux (the release, after a Tenant switch); {} by a tenant administrator through the API (+ the owning Tenant's release: is the module's switch on?)",
                by_flux.model.calls, unconsumed.model.calls
            ),
            by_flux.model.calls <= 2,
            String::new(),
        ),
        (
            format!(
                "the slot check on a module CREATE costs no host call and under 5 µs natively: {} calls with slots, {} without; {:+.1} µs ({} µs against {} µs, medians measured in turns)",
                slotted_create.model.calls,
                unslotted_create.model.calls,
                slot_cost * 1e6,
                micros(with_slots.median()),
                micros(without.median()),
            ),
            slotted_create.model.calls == unslotted_create.model.calls && slot_cost < 5e-6,
            "the slot check runs after the count on the instances it listed: the free slots are a scan of that list in the slot's namespace".to_owned(),
        ),
        (
            format!(
                "the guest's slope over a listed item under 3 ns per byte the host hands over (an item is its whole metadata, ~820 bytes for an Info release): {slope_per_byte:.2} ns/byte, {slope_ns:.0} ns/item"
            ),
            slope_per_byte < 3.0,
            "the scanner checks the grammar of every byte it skips and reads each item's name, namespace and deletion mark; the many short strings of labels, annotations and managed fields cost it per string, not per byte".to_owned(),
        ),
        (
            format!(
                "policy module grown by no more than the built-in rule set's table since #26 began: at most {BEFORE_BUILTIN} + {BUILTIN_TABLE} bytes, {size} bytes"
            ),
            size <= BEFORE_BUILTIN + BUILTIN_TABLE,
            "code added to the module beyond the rule table: `twiggy diff` of two unstripped builds names it (docs/benchmarks.md)".to_owned(),
        ),
        (
            format!("policy module under 500 KB: {size} bytes"),
            size < 500_000,
            "serde's code for every wire type the policy reads (the request, the settings, the definitions, the host's answers) and the rules'; the `wasm` profile is opt-level s, then wasm-opt -O2".to_owned(),
        ),
        (
            format!("annotated policy module's code (its custom sections, the metadata and the README, left out) at most 450 KB: {annotated} bytes"),
            annotated <= 450_000,
            ANNOTATED_SIZE_CAUSE.to_owned(),
        ),
        (
            format!(
                "list keys bounded by kinds: {} distinct over the scenarios of one set of settings (the largest), bound 2 + {kinds} kinds + {classes} classes = {}",
                keys.len(),
                kinds + classes + 2
            ),
            keys.len() <= kinds + classes + 2,
            String::new(),
        ),
        (
            format!(
                "pre-flight of a 4,000-tenant `kubectl get -o yaml` dump ({} objects, {} flagged) under 10 s: read {:.1} s, replayed {:.1} s",
                preflight.objects,
                preflight.findings,
                preflight.read.as_secs_f64(),
                preflight.replay.as_secs_f64()
            ),
            preflight.findings == 0 && preflight.read + preflight.replay < Duration::from_secs(10),
            "reading the YAML and replaying every Namespace and HelmRelease on this machine's cores".to_owned(),
        ),
        (
            format!(
                "live pre-flight of the same cluster through kube-rs from a loopback API ({} objects: {}; {} flagged) under 10 s: read {:.1} s, replayed {:.1} s",
                preflight.live.objects,
                preflight.live.listed,
                preflight.live.findings,
                preflight.live.read.as_secs_f64(),
                preflight.live.replay.as_secs_f64()
            ),
            preflight.live.findings == 0
                && preflight.live.objects == preflight.objects
                && preflight.live.read + preflight.live.replay < Duration::from_secs(10),
            "listing every page (HTTP, JSON into kube-rs's objects and back) and replaying on this machine's cores".to_owned(),
        ),
        (
            format!(
                "check of a {}-manifest change set, a folder built as its Flux Kustomization builds it, against the same dump under 5 s and 500 MiB: {:.1} s, {} MiB peak (exit {:?}: {}); from the same dump as JSON: {:.1} s, {} MiB",
                preflight.check.manifests,
                preflight.check.wall.as_secs_f64(),
                preflight.check.peak_mib,
                preflight.check.code,
                preflight.check.summary,
                preflight.check.json.0.as_secs_f64(),
                preflight.check.json.1,
            ),
            preflight.check.code.is_some_and(|c| c <= 1)
                && preflight.check.wall < Duration::from_secs(5)
                && preflight.check.peak_mib < 500,
            "the release binary as a child: the dump is read once for the cluster (managed fields parsed only for what the change set applies over) and its Flux objects apart without parsing the rest; the writes update the reflectors' lists in place, and a list answer is put together from its items' texts. What is left, under `perf record`: `kubectl kustomize` (14% of the CPU), reading the YAML, compiling the module (9%), the evaluations and helm-controller's renders".to_owned(),
        ),
        (
            format!(
                "lifecycle simulator on the bundled cluster, 10 runs of 200 steps, at least 200 steps/s: {:.0} steps/s (exit {:?}: {})",
                preflight.simulate.steps_per_second, preflight.simulate.code, preflight.simulate.summary
            ),
            preflight.simulate.code == Some(0) && preflight.simulate.steps_per_second >= 200.0,
            "each step is one to a dozen evaluations, each on a fresh instance as the policy-server makes one, and the settled state's facts read again after every change".to_owned(),
        ),
    ];
    // The 40,000-tenant pre-flight's two halves, from one run.
    checks.extend(match &preflight.large {
        Some(large) => {
            let what = format!(
                "pre-flight of a {}-tenant `kubectl get -o yaml` dump ({} objects, {:.0} MB) by the release binary (exit {:?}: {})",
                large.tenants, large.objects, large.megabytes, large.code, large.summary,
            );
            let ran = large.code == Some(0);
            [
                (
                    format!("{what} under 1 GiB peak: {} MiB", large.peak_mib),
                    ran && large.peak_mib < 1024,
                    LARGE_PREFLIGHT_MEMORY.to_owned(),
                ),
                (
                    format!("{what} under 10 s: {:.1} s", large.wall.as_secs_f64()),
                    ran && large.wall < Duration::from_secs(10),
                    LARGE_PREFLIGHT_CAUSE.to_owned(),
                ),
            ]
        }
        None => [
            ("1 GiB peak", LARGE_PREFLIGHT_MEMORY),
            ("10 s", LARGE_PREFLIGHT_CAUSE),
        ]
        .map(|(bound, cause)| {
            (
                format!("pre-flight of a 40,000-tenant dump under {bound}: not run (BENCH_PREFLIGHT_TENANTS=40000 runs it)"),
                false,
                cause.to_owned(),
            )
        }),
    });
    let targets = checks
        .into_iter()
        .map(|(text, met, cause)| Target { text, met, cause })
        .collect();
    (targets, keys)
}

/// The distinct list keys the scenarios open, per settings: one deployment runs one set of
/// settings (say `definitionSource: settings` without release prefixes, whose lists carry
/// labels), so the bound holds per settings. The largest such set.
pub fn list_keys(policy: &Policy, bundle: &Bundle) -> BTreeSet<String> {
    let scenarios =
        scenario::load_dir(&workspace().join("e2e/scenarios")).unwrap_or_else(|e| panic!("{e}"));
    let mut by_settings: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (_, s) in &scenarios {
        let Ok(outcome) = scenario::run(policy, bundle, s) else {
            continue;
        };
        by_settings
            .entry(outcome.prepared.settings.to_string())
            .or_default()
            .extend(
                outcome
                    .exchanges()
                    .iter()
                    .filter_map(|e| e.request.list_key()),
            );
    }
    by_settings
        .into_values()
        .max_by_key(BTreeSet::len)
        .unwrap_or_default()
}
