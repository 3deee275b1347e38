//! `make bench`: the per-request cost of the policy wasm in the waPC host, against an
//! accept-all policy built with the same SDK and profile (the floor: decoding alone) and the
//! same policy code compiled natively, on the same inputs. Host answers are memoised per list
//! key, as the policy-server's reflectors hold them, so the numbers are the policy's own.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cozystack_e2e::cluster::FixtureCluster;
use cozystack_e2e::host::{NativeHost, ResponseCache};
use cozystack_e2e::policy::{Metadata, Policy, read_module};
use cozystack_e2e::scenario::{self, Bundle, ShortRequest};
use cozystack_e2e::{policy_path, workspace};
use serde_json::{Value, json};

/// Median, p99 and spread of one measured operation.
struct Stats {
    samples: Vec<Duration>,
}

impl Stats {
    fn quantile(&self, q: f64) -> Duration {
        let index = ((self.samples.len() - 1) as f64 * q).round() as usize;
        self.samples[index]
    }
    fn median(&self) -> Duration {
        self.quantile(0.5)
    }
    fn p99(&self) -> Duration {
        self.quantile(0.99)
    }
    /// Interquartile range relative to the median.
    fn spread(&self) -> f64 {
        (self.quantile(0.75).as_secs_f64() - self.quantile(0.25).as_secs_f64())
            / self.median().as_secs_f64()
    }
}

/// Warm up, then sample until `budget` is spent (between 20 and 5,000 samples of each).
/// The operations take turns, so a noisy neighbour slows all of them alike and the ratios
/// between them hold even when the absolute numbers move.
fn measure<const N: usize>(budget: Duration, mut runs: [&mut dyn FnMut(); N]) -> [Stats; N] {
    let warm = Instant::now();
    while warm.elapsed() < budget / 10 {
        runs.iter_mut().for_each(|run| run());
    }
    let mut samples: [Vec<Duration>; N] = std::array::from_fn(|_| Vec::new());
    let start = Instant::now();
    while (start.elapsed() < budget || samples[0].len() < 20) && samples[0].len() < 5000 {
        for (run, samples) in runs.iter_mut().zip(samples.iter_mut()) {
            let t = Instant::now();
            run();
            samples.push(t.elapsed());
        }
    }
    samples.map(|mut samples| {
        samples.sort();
        Stats { samples }
    })
}

fn micros(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e6)
}

struct Workload {
    name: String,
    cluster: Arc<FixtureCluster>,
    payload: Vec<u8>,
    listed: usize,
}

fn namespace(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}})
}

fn tenant_labels(name: &str, monitoring: &str) -> Value {
    let mut labels = json!({"kubernetes.io/metadata.name": name, "namespace.cozystack.io/host": format!("{name}.example.org"),
        "namespace.cozystack.io/monitoring": monitoring, "namespace.cozystack.io/etcd": "", "namespace.cozystack.io/ingress": "tenant-root",
        "namespace.cozystack.io/seaweedfs": "tenant-root", "tenant.cozystack.io/tenant-root": ""});
    labels[format!("tenant.cozystack.io/{name}")] = json!("");
    labels
}

fn release(namespace: &str, name: &str, kind: &str, app: &str) -> Value {
    json!({"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
        "metadata": {"name": name, "namespace": namespace, "labels": {
            "apps.cozystack.io/application.kind": kind, "apps.cozystack.io/application.group": "apps.cozystack.io",
            "apps.cozystack.io/application.name": app, "sharding.fluxcd.io/key": "tenants"}},
        "spec": {"interval": "5m", "chartRef": {"kind": "ExternalArtifact", "name": format!("cozystack-{}", kind.to_lowercase()), "namespace": "cozy-system"},
                 "valuesFrom": [{"kind": "Secret", "name": "cozystack-values"}], "values": {}}})
}

/// The bundled definitions, the root, and `tenants` child tenants built by `each`.
fn tree(bundle: &Bundle, tenants: usize, each: impl Fn(&str, &mut Vec<Value>)) -> FixtureCluster {
    let mut cluster = FixtureCluster {
        objects: bundle
            .cluster
            .objects
            .iter()
            .filter(|o| o["kind"] == "ApplicationDefinition")
            .cloned()
            .collect(),
    };
    cluster.objects.push(namespace(
        "tenant-root",
        json!({"namespace.cozystack.io/monitoring": "tenant-root"}),
    ));
    cluster.objects.push(release(
        "tenant-root",
        "monitoring",
        "Monitoring",
        "monitoring",
    ));
    for i in 0..tenants {
        let name = format!("tenant-t{i}");
        cluster
            .objects
            .push(namespace(&name, tenant_labels(&name, "tenant-root")));
        each(&name, &mut cluster.objects);
    }
    cluster.objects.push(namespace(
        "tenant-new",
        tenant_labels("tenant-new", "tenant-root"),
    ));
    cluster
}

fn workload(
    name: &str,
    cluster: FixtureCluster,
    request: ShortRequest,
    settings: &Value,
    listed: usize,
) -> Workload {
    let admission = request.expand(&cluster);
    Workload {
        name: name.to_owned(),
        cluster: Arc::new(cluster),
        payload: serde_json::to_vec(&json!({"request": admission, "settings": settings}))
            .expect("payload"),
        listed,
    }
}

fn workloads(bundle: &Bundle) -> Vec<Workload> {
    let settings = &bundle.settings;
    let mut out = Vec::new();
    for n in [1usize, 100, 4000] {
        let cluster = tree(bundle, n, |ns, objects| {
            objects.push(release(ns, "info", "Info", "info"))
        });
        let request = ShortRequest::new(
            "CREATE",
            "Info",
            "tenant-new",
            "info",
            "carol",
            &["tenant-new-admin"],
        );
        out.push(workload(
            &format!("CREATE counted kind, {n} instance(s)"),
            cluster,
            request,
            settings,
            n,
        ));
    }
    let request = ShortRequest::new(
        "CREATE",
        "Redis",
        "tenant-new",
        "cache",
        "carol",
        &["tenant-new-use"],
    );
    out.push(workload(
        "CREATE uncounted catalog app",
        tree(bundle, 100, |_, _| {}),
        request,
        settings,
        0,
    ));
    let cluster = tree(bundle, 4000, |ns, objects| {
        objects.push(release(ns, "postgres-db", "Postgres", "db"))
    });
    let delete_root_monitoring = || {
        ShortRequest::new(
            "DELETE",
            "Monitoring",
            "tenant-root",
            "monitoring",
            "rita",
            &["tenant-root-admin"],
        )
    };
    out.push(workload(
        "DELETE shared provider, 4000 tenants",
        cluster,
        delete_root_monitoring(),
        settings,
        8002,
    ));
    // The common DELETE: a provider nobody consumes, in the same 4,000-tenant tree.
    out.push(workload(
        "DELETE unconsumed provider, 4000 tenants",
        tree(bundle, 4000, |_, _| {}),
        delete_root_monitoring(),
        settings,
        0,
    ));
    let mut request = ShortRequest::new(
        "UPDATE",
        "Namespace",
        "",
        "tenant-t0",
        "system:serviceaccount:cozy-system:cozystack-controller",
        &[],
    );
    request.set_labels.insert(
        "namespace.cozystack.io/capability.monitoring".into(),
        Some("tenant-root".into()),
    );
    out.push(workload(
        "Namespace label UPDATE",
        tree(bundle, 1, |_, _| {}),
        request,
        settings,
        0,
    ));
    out
}

fn main() {
    let root = workspace();
    let policy = Policy::load_annotated(&policy_path()).unwrap_or_else(|e| panic!("{e}"));
    let floor_path = root.join("target/accept-all-policy.wasm");
    let floor = Policy::load(
        &read_module(&floor_path).unwrap_or_else(|e| panic!("{e}")),
        Metadata::default(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let bundle = Bundle::load(&root.join("e2e/cluster")).unwrap_or_else(|e| panic!("{e}"));
    let budget = Duration::from_millis(
        std::env::var("BENCH_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(2000),
    );

    println!(
        "| workload | wasm median µs | wasm p99 µs | spread (IQR/median) | floor median µs | × floor | native median µs | × native | host calls | bytes from host |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let mut medians = Vec::new();
    let only = std::env::var("BENCH_ONLY").unwrap_or_default();
    for w in workloads(&bundle)
        .into_iter()
        .filter(|w| w.name.contains(&only))
    {
        let cache: Arc<ResponseCache> = Arc::default();
        if let Ok(runs) = std::env::var("BENCH_NATIVE_RUNS") {
            // Profiling aid (e.g. under callgrind): only the native build, a fixed number of runs.
            for _ in 0..runs.parse::<usize>().unwrap_or(1) {
                let host = NativeHost(Mutex::new(policy.host_state(
                    w.cluster.clone(),
                    vec![],
                    Some(cache.clone()),
                )));
                std::hint::black_box(cozystack_capabilities_policy::evaluate(&w.payload, &host));
            }
            continue;
        }
        let probe = policy
            .validate_with(
                &w.payload,
                policy.host_state(w.cluster.clone(), vec![], Some(cache.clone())),
            )
            .unwrap_or_else(|e| panic!("{}: {e}", w.name));
        let [wasm, floor_stats, native] = measure(
            budget,
            [
                &mut || {
                    let state = policy.host_state(w.cluster.clone(), vec![], Some(cache.clone()));
                    policy.validate_with(&w.payload, state).expect("validate");
                },
                &mut || {
                    floor
                        .validate_with(
                            &w.payload,
                            floor.host_state(w.cluster.clone(), vec![], None),
                        )
                        .expect("floor");
                },
                &mut || {
                    let host = NativeHost(Mutex::new(policy.host_state(
                        w.cluster.clone(),
                        vec![],
                        Some(cache.clone()),
                    )));
                    std::hint::black_box(cozystack_capabilities_policy::evaluate(
                        &w.payload, &host,
                    ));
                },
            ],
        );
        println!(
            "| {} | {} | {} | {:.2} | {} | {:.2} | {} | {:.1} | {} | {} |",
            w.name,
            micros(wasm.median()),
            micros(wasm.p99()),
            wasm.spread(),
            micros(floor_stats.median()),
            wasm.median().as_secs_f64() / floor_stats.median().as_secs_f64(),
            micros(native.median()),
            wasm.median().as_secs_f64() / native.median().as_secs_f64(),
            probe.exchanges.len(),
            probe.response_bytes(),
        );
        medians.push((
            w.name.clone(),
            w.listed,
            wasm.median(),
            floor_stats.median(),
            probe.response["accepted"].clone(),
        ));
    }
    if !only.is_empty() {
        // A filtered run (profiling one workload) has no summary to check.
        return;
    }
    let settings_payload = serde_json::to_vec(&bundle.settings).expect("settings");
    let [settings] = measure(
        budget,
        [&mut || {
            policy
                .validate_settings(
                    &serde_json::from_slice::<Value>(&settings_payload).expect("json"),
                )
                .expect("settings");
        }],
    );
    println!(
        "| validate_settings (bundled) | {} | {} | {:.2} | – | – | – | – | 0 | 0 |",
        micros(settings.median()),
        micros(settings.p99()),
        settings.spread()
    );

    // The summary checks the targets.
    let size = std::fs::metadata(policy_path())
        .map(|m| m.len())
        .unwrap_or(u64::MAX);
    let keys = list_keys(&policy, &bundle);
    let kinds = bundle
        .cluster
        .objects
        .iter()
        .filter(|o| o["kind"] == "ApplicationDefinition")
        .count()
        + bundle.settings["definitions"].as_object().map_or(0, |d| {
            d.keys()
                .filter(|k| {
                    !bundle.cluster.objects.iter().any(|o| {
                        o.pointer("/spec/application/kind").and_then(Value::as_str) == Some(k)
                    })
                })
                .count()
        });
    let find = |prefix: &str| {
        medians
            .iter()
            .find(|m| m.0.starts_with(prefix))
            .expect("workload")
    };
    let one = medians.iter().find(|m| m.1 == 1).expect("1");
    let many = medians
        .iter()
        .find(|m| m.1 == 4000 && m.0.starts_with("CREATE"))
        .expect("4000");
    let slope_ns = (many.2.as_secs_f64() - one.2.as_secs_f64()) / 3999.0 * 1e9;
    let worst_small_ratio = medians
        .iter()
        .filter(|m| m.0.starts_with("CREATE") && m.1 <= 100)
        .map(|m| m.2.as_secs_f64() / m.3.as_secs_f64())
        .fold(0.0, f64::max);
    let delete = find("DELETE shared");
    let checks = [
        (
            format!("CREATE at ≤100 instances within 2× the floor: worst {worst_small_ratio:.2}×"),
            worst_small_ratio <= 2.0,
        ),
        (
            format!("per-listed-item slope under 1 µs: {slope_ns:.0} ns/item"),
            slope_ns < 1000.0,
        ),
        (
            format!(
                "DELETE at 4,000 namespaces under 5 ms: {} µs (verdict allowed={})",
                micros(delete.2),
                delete.4
            ),
            delete.2 < Duration::from_millis(5),
        ),
        (
            format!("annotated wasm under 500 KB: {size} bytes"),
            size < 500_000,
        ),
        (
            format!(
                "list keys bounded by kinds: {} distinct over every scenario, bound 2 + {kinds} kinds = {}",
                keys.len(),
                kinds + 2
            ),
            keys.len() <= kinds + 2,
        ),
    ];
    println!("\nTargets");
    let mut missed = 0;
    for (text, ok) in &checks {
        println!("  [{}] {text}", if *ok { "met" } else { "MISSED" });
        missed += usize::from(!ok);
    }
    println!("\nbench: {} passed, {missed} failed", checks.len() - missed);
    for key in &keys {
        println!("  list key: {key}");
    }
    if missed > 0 {
        std::process::exit(1);
    }
}

/// Every distinct list request the policy made over the whole scenario suite.
fn list_keys(policy: &Policy, bundle: &Bundle) -> BTreeSet<String> {
    let scenarios =
        scenario::load_dir(&workspace().join("e2e/scenarios")).unwrap_or_else(|e| panic!("{e}"));
    let mut keys = BTreeSet::new();
    for (_, s) in &scenarios {
        if let Ok(outcome) = scenario::run(policy, bundle, s) {
            keys.extend(
                outcome
                    .exchanges()
                    .iter()
                    .filter_map(|e| e.request.list_key()),
            );
        }
    }
    keys
}
