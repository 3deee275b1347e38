//! The pre-flight over a 4,000-tenant cluster: from a `kubectl get -o yaml` dump and live
//! through kube-rs from a loopback API.

use std::sync::Arc;
use std::time::{Duration, Instant};

use cozystack_e2e::scenario::Bundle;
use cozystack_e2e::workspace;
use cozystack_policy::settings::Settings;
use cozystack_policy_runtime::cluster::ClusterObjects;
use cozystack_policy_runtime::policy::Policy;
use serde_json::{Value, json};

use crate::workloads::{info, kubernetes, tree};

pub struct PreflightRun {
    pub objects: usize,
    /// Objects flagged in a dump that has no problem (`usize::MAX`: the run failed).
    pub findings: usize,
    pub read: Duration,
    pub replay: Duration,
    /// The same objects read live through kube-rs from a loopback API, and replayed.
    pub live: LiveRun,
    /// A 1,000-manifest change set judged against the same dump by `check`.
    pub check: CheckRun,
    /// The lifecycle simulator on the bundled cluster.
    pub simulate: SimulateRun,
    /// With `BENCH_PREFLIGHT_TENANTS` set.
    pub large: Option<LargeRun>,
}

/// `cozystack-policy check` of a change set against the dump, run as an operator runs it (the
/// release binary, a child process): its wall time, its own peak memory, and its summary.
pub struct CheckRun {
    pub manifests: usize,
    pub wall: Duration,
    /// VmHWM the binary reports of itself (MiB; `u64::MAX`: it did not say).
    pub peak_mib: u64,
    /// The summary line, or why the run failed.
    pub summary: String,
    /// Exit code (`None`: killed).
    pub code: Option<i32>,
    /// The same against the dump as `kubectl get -o json` prints it: wall time and peak.
    pub json: (Duration, u64),
}

/// `cozystack-policy simulate` on the bundled cluster with fixed seeds, run by the release
/// binary as a child: its steps per second and its first line.
pub struct SimulateRun {
    pub steps_per_second: f64,
    pub summary: String,
    pub code: Option<i32>,
}

/// The simulator's 10 runs of 200 steps from seed 1, through the module measured.
pub fn simulate_run() -> SimulateRun {
    let binary = workspace().join("target/release/cozystack-policy");
    let output = std::process::Command::new(&binary)
        .current_dir(workspace())
        .args([
            "simulate",
            "--dump",
            "e2e/cluster",
            "--settings",
            "e2e/cluster/settings.yaml",
        ])
        .args(["--seed", "1", "--runs", "10", "--steps", "200"])
        .arg("--policy")
        .arg(cozystack_e2e::policy_path())
        .output();
    let output = match output {
        Ok(output) => output,
        Err(e) => {
            return SimulateRun {
                steps_per_second: 0.0,
                summary: format!("{}: {e} (make bench builds it)", binary.display()),
                code: None,
            };
        }
    };
    let stdout = String::from_utf8_lossy(&output.stdout);
    // The report opens with what judged it; the runs' line is `N runs (seeds …), N steps, R
    // steps/s: …`.
    let summary = stdout
        .lines()
        .find(|line| line.contains(" runs (seeds "))
        .unwrap_or_default()
        .to_owned();
    let steps_per_second = summary
        .split(", ")
        .find_map(|part| part.split_once(" steps/s").map(|(rate, _)| rate))
        .and_then(|rate| rate.parse().ok())
        .unwrap_or(0.0);
    SimulateRun {
        steps_per_second,
        summary,
        code: output.status.code(),
    }
}

pub struct LiveRun {
    pub objects: usize,
    pub findings: usize,
    /// What the read said it listed (kinds, pages), or why it failed.
    pub listed: String,
    pub read: Duration,
    pub replay: Duration,
}

/// The pre-flight over a 4,000-tenant dump, as `kubectl get -o yaml` prints it: reading the
/// YAML and replaying every Namespace and HelmRelease through the wasm.
pub fn preflight_run(policy: &Policy, bundle: &Bundle) -> PreflightRun {
    let cluster = tree(bundle, 4000, |ns, objects| {
        objects.push(info(bundle, ns));
        objects.push(kubernetes(bundle, ns, "dev"));
    });
    let items: Vec<Value> = cluster
        .values()
        .map(|o| cluster.with_managed_fields(o))
        .collect();
    let dump = serde_yaml::to_string(&json!({"apiVersion": "v1", "kind": "List",
        "metadata": {"resourceVersion": ""}, "items": items}))
    .expect("yaml");
    let started = Instant::now();
    let read = ClusterObjects::from_yaml(&dump).expect("dump");
    let read_time = started.elapsed();
    let objects = read.len();
    let started = Instant::now();
    let findings = cozystack_policy::ops::preflight::run(
        policy,
        Arc::new(read),
        &Settings::new(bundle.settings.clone()),
        &|_, _| {},
    )
    .map_or(usize::MAX, |report| report.findings());
    let replay = started.elapsed();
    PreflightRun {
        objects,
        findings,
        read: read_time,
        replay,
        check: check_run(bundle, &dump, &items),
        simulate: simulate_run(),
        // Opt-in: at 40,000 tenants the replay runs for more than a quarter of an hour.
        large: std::env::var("BENCH_PREFLIGHT_TENANTS")
            .ok()
            .and_then(|n| n.parse().ok())
            .map(|tenants| large_preflight(bundle, tenants)),
        live: live_preflight(policy, bundle, items),
    }
}

/// 1,000 manifests as a platform repository would commit them across the 4,000 tenants, applied
/// by Flux: 700 new Postgres, 100 edits of an existing Kubernetes cluster (a consumer), 100 new
/// Monitorings (a provider, counted per tenant) and 100 new Tenants with two switches each
/// (their namespace and modules rendered into the state the manifests after them see).
pub fn change_set() -> String {
    let mut out = String::new();
    let mut doc = |text: String| {
        out.push_str("---\n");
        out.push_str(&text);
    };
    for i in 0..700 {
        doc(format!(
            "apiVersion: apps.cozystack.io/v1alpha1\nkind: Postgres\nmetadata: {{name: db, namespace: tenant-t{i}}}\nspec: {{replicas: 2}}\n"
        ));
    }
    for i in 700..800 {
        doc(format!(
            "apiVersion: apps.cozystack.io/v1alpha1\nkind: Kubernetes\nmetadata: {{name: dev, namespace: tenant-t{i}}}\nspec: {{version: v1.33}}\n"
        ));
    }
    for i in 800..900 {
        doc(format!(
            "apiVersion: apps.cozystack.io/v1alpha1\nkind: Monitoring\nmetadata: {{name: monitoring, namespace: tenant-t{i}}}\nspec: {{}}\n"
        ));
    }
    for i in 0..100 {
        doc(format!(
            "apiVersion: apps.cozystack.io/v1alpha1\nkind: Tenant\nmetadata: {{name: n{i}, namespace: tenant-root}}\nspec: {{monitoring: true, etcd: true}}\n"
        ));
    }
    out
}

/// `check` of [`change_set`] against `dump` (YAML) and the same `items` as JSON.
pub fn check_run(bundle: &Bundle, dump: &str, items: &[Value]) -> CheckRun {
    let dir = workspace().join("target/tmp/bench-check");
    let failed = |summary: String| CheckRun {
        manifests: 1000,
        wall: Duration::ZERO,
        peak_mib: u64::MAX,
        summary,
        code: None,
        json: (Duration::ZERO, u64::MAX),
    };
    let json_dump = serde_json::to_string(&json!({"apiVersion": "v1", "kind": "List",
        "metadata": {"resourceVersion": ""}, "items": items}))
    .unwrap_or_default();
    // The change set as a platform repository holds it: one folder a Flux Kustomization
    // builds (`check` packs it, writes the generator's kustomization and runs kustomize).
    let files = [
        ("dump.yaml", dump.to_owned()),
        ("dump.json", json_dump),
        ("repo/.git/HEAD", String::new()),
        ("repo/tenants/changes.yaml", change_set()),
        ("tenants.yaml", "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: tenants, namespace: cozy-fluxcd}\nspec: {prune: true, path: ./tenants, interval: 10m, sourceRef: {kind: GitRepository, name: platform}}\n".to_owned()),
        ("settings.json", bundle.settings.to_string()),
    ];
    for (name, text) in &files {
        let path = dir.join(name);
        let written = path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::write(&path, text));
        if let Err(e) = written {
            return failed(format!("{name}: {e}"));
        }
    }
    let binary = workspace().join("target/release/cozystack-policy");
    let run = |dump: &str| {
        let started = Instant::now();
        let output = std::process::Command::new(&binary)
            .current_dir(&dir)
            .args(["check", "repo/tenants", "--kustomization", "tenants.yaml"])
            .args(["--dump", dump])
            .args(["--settings", "settings.json"])
            .args(["--as", "system:serviceaccount:cozy-fluxcd:flux"])
            .output();
        (started.elapsed(), output)
    };
    let (wall, output) = run("dump.yaml");
    let output = match output {
        Ok(output) => output,
        Err(e) => return failed(format!("{}: {e} (make bench builds it)", binary.display())),
    };
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let summary = stdout
        .lines()
        .rfind(|l| l.contains(" manifests: "))
        .map_or_else(|| stderr.trim().to_owned(), str::to_owned);
    let (json_wall, json_output) = run("dump.json");
    let json_peak = json_output.map_or(u64::MAX, |o| peak_mib(&String::from_utf8_lossy(&o.stderr)));
    CheckRun {
        manifests: 1000,
        wall,
        peak_mib: peak_mib(&stderr),
        summary,
        code: output.status.code(),
        json: (json_wall, json_peak),
    }
}

/// The peak memory the release binary reports of itself on its closing line (`VmHWM`).
fn peak_mib(stderr: &str) -> u64 {
    stderr
        .split(", peak memory ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(u64::MAX)
}

/// The pre-flight at ten times the scale (#35), as an operator runs it: the release binary as
/// a child on a `kubectl get -o yaml` dump of 40,000 tenants, its wall time and the peak memory
/// it reports.
pub struct LargeRun {
    pub tenants: usize,
    pub objects: usize,
    pub megabytes: f64,
    pub wall: Duration,
    pub peak_mib: u64,
    pub code: Option<i32>,
    pub summary: String,
}

/// Writes the dump item by item in kubectl's layout (each item `- ` at the margin, its lines
/// indented by two: a List of 120,000 served objects is too big to build as one value here),
/// then runs `cozystack-policy preflight --dump` on it.
pub fn large_preflight(bundle: &Bundle, tenants: usize) -> LargeRun {
    let cluster = tree(bundle, tenants, |ns, objects| {
        objects.push(info(bundle, ns));
        objects.push(kubernetes(bundle, ns, "dev"));
    });
    let dir = workspace().join("target/tmp/bench-preflight");
    let failed = |summary: String| LargeRun {
        tenants,
        objects: cluster.len(),
        megabytes: 0.0,
        wall: Duration::ZERO,
        peak_mib: u64::MAX,
        code: None,
        summary,
    };
    let write = || -> std::io::Result<u64> {
        use std::io::Write;
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join("settings.json"), bundle.settings.to_string())?;
        let mut out = std::io::BufWriter::new(std::fs::File::create(dir.join("dump.yaml"))?);
        out.write_all(b"apiVersion: v1\nitems:\n")?;
        for object in cluster.values() {
            let text = serde_yaml::to_string(&object).map_err(std::io::Error::other)?;
            for (n, line) in text.lines().enumerate() {
                out.write_all(if n == 0 { b"- " } else { b"  " })?;
                out.write_all(line.as_bytes())?;
                out.write_all(b"\n")?;
            }
        }
        out.write_all(b"kind: List\nmetadata:\n  resourceVersion: \"\"\n")?;
        out.flush()?;
        Ok(std::fs::metadata(dir.join("dump.yaml"))?.len())
    };
    let bytes = match write() {
        Ok(bytes) => bytes,
        Err(e) => return failed(format!("writing the dump: {e}")),
    };
    let binary = workspace().join("target/release/cozystack-policy");
    let started = Instant::now();
    let output = std::process::Command::new(&binary)
        .current_dir(&dir)
        .args([
            "preflight",
            "--dump",
            "dump.yaml",
            "--settings",
            "settings.json",
        ])
        .output();
    let wall = started.elapsed();
    let output = match output {
        Ok(output) => output,
        Err(e) => return failed(format!("{}: {e} (make bench builds it)", binary.display())),
    };
    let stderr = String::from_utf8_lossy(&output.stderr);
    LargeRun {
        megabytes: bytes as f64 / 1e6,
        wall,
        peak_mib: peak_mib(&stderr),
        code: output.status.code(),
        summary: stderr.trim().lines().last().unwrap_or_default().to_owned(),
        ..failed(String::new())
    }
}

/// `cozystack-policy preflight` without a dump: the objects listed through kube-rs in pages of
/// 500 from a loopback API (which serialises each page as the API server does), then replayed.
pub fn live_preflight(policy: &Policy, bundle: &Bundle, items: Vec<Value>) -> LiveRun {
    let api = cozystack_e2e::loopback::serve(
        items,
        None,
        500,
        &workspace().join("target/tmp/bench-live"),
    );
    let target = cozystack_policy::live::Target::of(api.kubeconfig.clone());
    let started = Instant::now();
    let snapshot =
        cozystack_policy::live::read(&target, &policy.metadata.context_aware_resources, None);
    let read = started.elapsed();
    let snapshot = match snapshot {
        Ok(snapshot) => snapshot,
        Err(err) => {
            return LiveRun {
                objects: 0,
                findings: usize::MAX,
                listed: err.to_string(),
                read,
                replay: Duration::ZERO,
            };
        }
    };
    let objects = snapshot.cluster.len();
    let started = Instant::now();
    let findings = cozystack_policy::ops::preflight::run(
        policy,
        Arc::new(snapshot.cluster),
        &Settings::new(bundle.settings.clone()),
        &|_, _| {},
    )
    .map_or(usize::MAX, |report| report.findings());
    LiveRun {
        objects,
        findings,
        listed: snapshot.listed.join(", "),
        read,
        replay: started.elapsed(),
    }
}
