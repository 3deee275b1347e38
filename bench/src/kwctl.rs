//! `make bench-kwctl`: the workloads `make bench` names, measured where their cost is paid, in
//! Kubewarden's own evaluator (`kwctl bench`, the stock deployment's settings per workload),
//! their lookups served by [`cozystack_e2e::loopback::serve_watched`] from the same live-sized
//! trees, beside the
//! accept-all floor and Kubewarden's context-aware-test-policy (the peer) in the same run.
//! The targets of docs/benchmarks.md are judged on these figures; the model's are checked
//! against them (it must err high).

use std::path::{Path, PathBuf};
use std::process::Command;

use cozystack_e2e::scenario::Bundle;
use serde_json::{Value, json};

use crate::workloads::{Workload, ZERO_CALL_EMPTY_SETTINGS, workloads};

/// kwctl's bench settings: as kubewarden.md measured them (warm-up 1 s, measurement 2 s).
const WARM_UP: &str = "1";
const MEASUREMENT: &str = "2";

/// What one `kwctl bench` run of a module took per `validate`, its median in µs.
fn median(output: &str) -> Option<f64> {
    // tiny-bench prints a block per label; `validate_settings` comes first.
    let block = output.split("validate [").nth(1)?;
    let med = block.split("med = ").nth(1)?;
    let mut words = med.split_whitespace();
    let number: f64 = words.next()?.trim_end_matches(',').parse().ok()?;
    let unit = words.next()?.trim_end_matches(',');
    let scale = match unit {
        "ns" => 1e-3,
        "µs" | "us" => 1.0,
        "ms" => 1e3,
        "s" => 1e6,
        _ => return None,
    };
    Some(number * scale)
}

/// A module measured by kwctl: where it is, and whether its metadata allows lookups.
struct Module {
    path: PathBuf,
    context_aware: bool,
}

/// `kwctl bench` of `module` on `request` under `settings`, its lookups from `objects`; the
/// median µs, or the step that failed.
fn bench(
    kwctl: &Path,
    module: &Module,
    request: &Value,
    settings: &Value,
    objects: Vec<Value>,
    dir: &Path,
) -> Result<f64, String> {
    let api = cozystack_e2e::loopback::serve_watched(objects, dir);
    let request_path = dir.join("request.json");
    std::fs::write(&request_path, request.to_string()).map_err(|e| e.to_string())?;
    let mut command = Command::new(kwctl);
    command
        .arg("bench")
        .args(["--warm-up-time", WARM_UP, "--measurement-time", MEASUREMENT])
        .arg("--request-path")
        .arg(&request_path)
        .args(["--settings-json", &settings.to_string()])
        .env("KUBECONFIG", &api.kubeconfig)
        .env_remove("KUBERNETES_SERVICE_HOST");
    if module.context_aware {
        command.arg("--allow-context-aware");
    }
    command.arg(&module.path);
    let output = command
        .output()
        .map_err(|e| format!("running {}: {e}", kwctl.display()))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(format!(
            "kwctl bench {}: {}",
            module.path.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    median(&stdout).ok_or_else(|| format!("no median for validate in kwctl's output: {stdout}"))
}

/// The accept-all floor, annotated by kwctl as a policy with no lookups.
fn floor(kwctl: &Path, root: &Path, dir: &Path) -> Result<Module, String> {
    let metadata = dir.join("accept-all-metadata.yml");
    std::fs::write(
        &metadata,
        "rules:\n- apiGroups: [\"\"]\n  apiVersions: [v1]\n  resources: [namespaces]\n  operations: [UPDATE]\nmutating: false\nexecutionMode: kubewarden-wapc\n",
    )
    .map_err(|e| e.to_string())?;
    let path = dir.join("accept-all-annotated.wasm");
    let annotated = Command::new(kwctl)
        .arg("annotate")
        .arg("-m")
        .arg(&metadata)
        .arg("-o")
        .arg(&path)
        .arg(root.join("target/accept-all-policy.wasm"))
        .output()
        .map_err(|e| e.to_string())?;
    if !annotated.status.success() {
        return Err(format!(
            "kwctl annotate of the accept-all floor: {}",
            String::from_utf8_lossy(&annotated.stderr).trim()
        ));
    }
    Ok(Module {
        path,
        context_aware: false,
    })
}

/// What the peer looks up (context-aware-test-policy 0.2.1, `src/lib.rs`): the customer's
/// Namespace by label, its Deployments, its API authentication Service; and the Deployment it
/// admits (an API component, its customer's label, a ServiceAccount `can_i` refuses).
fn peer_objects() -> (Value, Vec<Value>) {
    let deployment = |name: &str, component: &str| {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": "customer-1", "uid": format!("uid-{name}"),
                "labels": {"app.kubernetes.io/component": component, "customer-id": "1"}},
            "spec": {"selector": {"matchLabels": {"app": name}},
                "template": {"metadata": {"labels": {"app": name}},
                    "spec": {"serviceAccountName": "api",
                        "containers": [{"name": name, "image": "registry.example.org/app:1"}]}}}})
    };
    let objects = vec![
        json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "customer-1", "uid": "uid-ns",
                "labels": {"customer-id": "1", "kubernetes.io/metadata.name": "customer-1"}}}),
        deployment("db", "database"),
        deployment("web", "frontend"),
        json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "api-auth-service", "namespace": "customer-1", "uid": "uid-svc",
                "labels": {"app.kubernetes.io/part-of": "api"}},
            "spec": {"ports": [{"port": 443}]}}),
    ];
    let api = deployment("api", "api");
    let request = json!({"uid": "peer", "kind": {"group": "apps", "version": "v1",
            "kind": "Deployment"},
        "resource": {"group": "apps", "version": "v1", "resource": "deployments"},
        "requestKind": {"group": "apps", "version": "v1", "kind": "Deployment"},
        "requestResource": {"group": "apps", "version": "v1", "resource": "deployments"},
        "name": "api", "namespace": "customer-1", "operation": "CREATE",
        "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
        "object": api, "oldObject": null, "dryRun": false,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}});
    (request, objects)
}

/// One line of the table: the workload, kwctl's median, and the ratios against the floor and
/// the peer.
fn line(name: &str, micros: f64, floor: f64, peer: f64) {
    println!(
        "{name:<70} {micros:>10.0} µs  {:>5.2}× floor  {:>5.2}× peer",
        micros / floor,
        micros / peer
    );
}

/// Runs `make bench-kwctl`'s measurements with `kwctl` (exit 2 naming the step that failed).
pub fn run(kwctl: &Path, root: &Path) {
    let dir = root.join("target/bench-kwctl");
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let fail = |step: &str, why: String| -> ! {
        eprintln!("bench-kwctl: {step}: {why}");
        std::process::exit(2);
    };
    let bundle = Bundle::load(&root.join("e2e/cluster")).unwrap_or_else(|e| panic!("{e}"));
    let all = workloads(&bundle);
    let only = std::env::var("BENCH_ONLY").unwrap_or_default();
    let ours = Module {
        path: root.join("annotated-policy.wasm"),
        context_aware: true,
    };
    let floor = floor(kwctl, root, &dir).unwrap_or_else(|e| fail("the floor", e));
    let peer = Module {
        path: std::env::var_os("PEER").map_or_else(
            || dirs_home().join("kw/peer/context-aware-test-policy.wasm"),
            PathBuf::from,
        ),
        context_aware: true,
    };
    let zero = all
        .iter()
        .find(|w| w.name == ZERO_CALL_EMPTY_SETTINGS)
        .unwrap_or_else(|| fail("the workloads", "no zero-call workload".into()));
    let payload = |w: &Workload| -> Value {
        serde_json::from_slice(&w.payload).unwrap_or_else(|e| fail("a payload", e.to_string()))
    };
    let zero_payload = payload(zero);
    let floor_us = bench(
        kwctl,
        &floor,
        &zero_payload["request"],
        &json!({}),
        Vec::new(),
        &dir,
    )
    .unwrap_or_else(|e| fail("the floor", e));
    let (peer_request, peer_cluster) = peer_objects();
    let peer_us = bench(kwctl, &peer, &peer_request, &json!({}), peer_cluster, &dir)
        .unwrap_or_else(|e| fail("the peer", e));
    println!(
        "kwctl bench ({}), warm-up {WARM_UP} s, measurement {MEASUREMENT} s, medians",
        kwctl.display()
    );
    line("accept-all floor, settings {}", floor_us, floor_us, peer_us);
    line(
        "context-aware-test-policy 0.2.1 (the peer, 4 lookups)",
        peer_us,
        floor_us,
        peer_us,
    );
    for w in all.iter().filter(|w| w.name.contains(&only)) {
        let payload = payload(w);
        let objects: Vec<Value> = w.cluster.values().collect();
        let micros = bench(
            kwctl,
            &ours,
            &payload["request"],
            &payload["settings"],
            objects,
            &dir,
        )
        .unwrap_or_else(|e| fail(&w.name, e));
        line(&w.name, micros, floor_us, peer_us);
    }
}

/// The home folder, where `../shared/tools/build-kubewarden.sh` puts its work by default.
fn dirs_home() -> PathBuf {
    std::env::var_os("HOME").map_or_else(|| PathBuf::from("/root"), PathBuf::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_is_read_in_microseconds_from_the_validate_block() {
        let output = "validate_settings [10 iterations in 1.00s with 10 samples]:\n\telapsed\t[min mean max]:\t[1.000 µs 2.000 µs 3.000 µs] (sample data: med = 2.000 µs, var = 0.1µs², stddev = 0.3µs)\nvalidate [100 iterations in 2.00s with 100 samples]:\n\telapsed\t[min mean max]:\t[20.0 µs 31.5 µs 90.0 µs] (sample data: med = 30.125 µs, var = 1µs², stddev = 1µs)\n";
        assert_eq!(median(output), Some(30.125));
        let ms = output.replace("med = 30.125 µs", "med = 1.5 ms");
        assert_eq!(median(&ms), Some(1500.0));
        assert_eq!(median("validate_settings only"), None);
    }
}
