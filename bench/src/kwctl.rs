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

/// What one `kwctl bench` run of a module took per `validate`, its median in µs. tiny-bench
/// prints a block per label (`validate_settings` first), colored, its median as
/// `med = 220.00µs`.
fn median(output: &str) -> Option<f64> {
    let plain = strip_colors(output);
    let block = plain.split("\nvalidate [").nth(1)?;
    let med = block.split("med = ").nth(1)?;
    let value = med.split([',', ')']).next()?.trim();
    let at = value.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let (number, unit) = value.split_at(at);
    let scale = match unit.trim() {
        "ns" => 1e-3,
        "µs" | "us" => 1.0,
        "ms" => 1e3,
        "s" => 1e6,
        _ => return None,
    };
    Some(number.parse::<f64>().ok()? * scale)
}

/// `text` without its terminal color sequences (`ESC [ … m`).
fn strip_colors(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
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
fn floor(kwctl: &Path, root: &Path, dir: &Path, context_aware: bool) -> Result<Module, String> {
    let name = if context_aware {
        "accept-all-calls"
    } else {
        "accept-all"
    };
    let metadata = dir.join(format!("{name}-metadata.yml"));
    // Making a workload's protocol-floor calls, it is granted what this policy is.
    let resources = if context_aware {
        "contextAwareResources:\n- {apiVersion: v1, kind: Namespace}\n- {apiVersion: cozystack.io/v1alpha1, kind: ApplicationDefinition}\n- {apiVersion: helm.toolkit.fluxcd.io/v2, kind: HelmRelease}\n"
    } else {
        ""
    };
    std::fs::write(
        &metadata,
        format!("rules:\n- apiGroups: [\"\"]\n  apiVersions: [v1]\n  resources: [namespaces]\n  operations: [UPDATE]\nmutating: false\nexecutionMode: kubewarden-wapc\n{resources}"),
    )
    .map_err(|e| e.to_string())?;
    let path = dir.join(format!("{name}-annotated.wasm"));
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
        context_aware,
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
    let protocol = floor(kwctl, root, &dir, true).unwrap_or_else(|e| fail("the protocol floor", e));
    let floor = floor(kwctl, root, &dir, false).unwrap_or_else(|e| fail("the floor", e));
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
            objects.clone(),
            &dir,
        )
        .unwrap_or_else(|e| fail(&w.name, e));
        line(&w.name, micros, floor_us, peer_us);
        // The protocol floor: the accept-all policy making the workload's smallest set of
        // calls that decides it, on the same request and objects.
        if w.floor.is_empty() {
            continue;
        }
        let settings = crate::floor::with_calls(&payload["settings"], &w.floor);
        let floor_of = bench(
            kwctl,
            &protocol,
            &payload["request"],
            &settings,
            objects,
            &dir,
        )
        .unwrap_or_else(|e| fail(&format!("{}: its protocol floor", w.name), e));
        println!(
            "{:<70} {floor_of:>10.0} µs  the workload {:>5.2}× it ({} call(s))",
            "  its protocol floor (accept-all making its calls)",
            micros / floor_of,
            w.floor.len()
        );
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
        // As kwctl 1.36.0-beta.1 prints it, colors and all.
        let output = "\u{1b}[1;32mvalidate_settings\u{1b}[0m [20.2 thousand iterations in 2.42s with 100.0 samples]:\n\telapsed\t[\u{1b}[0;37mmin\u{1b}[0m]:\t[44.17µs] (sample data: med = 113.93µs, var = 81.01s², stddev = 284.63µs)\n\u{1b}[1;32mvalidate\u{1b}[0m warming up for \u{1b}[0;97m1.00s\u{1b}[0m\n\u{1b}[1;32mvalidate\u{1b}[0m [15.2 thousand iterations in 3.10s with 100.0 samples]:\n\telapsed\t[[57.86µs 216.18µs 570.33µs] (sample data: med = 220.00µs, var = 9.43s², stddev = 97.08µs)\n";
        assert_eq!(median(output), Some(220.0));
        let ms = output.replace("med = 220.00µs", "med = 1.5ms");
        assert_eq!(median(&ms), Some(1500.0));
        let ns = output.replace("med = 220.00µs", "med = 900ns");
        assert_eq!(median(&ns), Some(0.9));
        assert_eq!(median("validate_settings only"), None);
    }
}
