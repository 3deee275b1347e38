//! Hostile and malformed input through the real wasm: oversized objects, unicode and
//! over-long names, forged and cyclic ancestor labels, truncated and mistyped payloads.
//! Each case states the exact verdict and message.

use std::sync::Arc;

use cozystack_e2e::scenario::{Bundle, ShortRequest};
use cozystack_e2e::{policy_path, workspace};
use cozystack_policy_runtime::policy::Policy;
use serde_json::{Value, json};

struct Harness {
    policy: Policy,
    bundle: Bundle,
}

impl Harness {
    /// One compiled module for every test of this file.
    fn new() -> &'static Harness {
        static HARNESS: std::sync::OnceLock<Harness> = std::sync::OnceLock::new();
        HARNESS.get_or_init(|| Harness {
            policy: Policy::load_annotated(&policy_path()).unwrap_or_else(|e| panic!("{e}")),
            bundle: Bundle::load(&workspace().join("e2e/cluster"))
                .unwrap_or_else(|e| panic!("{e}")),
        })
    }

    fn run(&self, request: &ShortRequest, apply: &[Value], patch: impl Fn(&mut Value)) -> Value {
        let mut cluster = self.bundle.cluster.clone();
        for object in apply {
            cluster.apply(object.clone());
        }
        let mut admission = request.expand(&cluster);
        patch(&mut admission);
        let payload =
            serde_json::to_vec(&json!({"request": admission, "settings": self.bundle.settings}))
                .unwrap();
        self.raw(&payload, apply)
    }

    fn raw(&self, payload: &[u8], apply: &[Value]) -> Value {
        let mut cluster = self.bundle.cluster.clone();
        for object in apply {
            cluster.apply(object.clone());
        }
        self.policy
            .validate_raw(payload, Arc::new(cluster), vec![])
            .unwrap()
            .response
    }
}

#[track_caller]
fn denied(response: &Value, code: u16, message: &str) {
    assert_eq!(response["accepted"], false, "{response}");
    assert_eq!(response["code"], code, "{response}");
    assert_eq!(response["message"], message);
}

#[track_caller]
fn allowed(response: &Value, warnings: &[&str]) {
    assert_eq!(response["accepted"], true, "{response}");
    let got: Vec<&str> = response["warnings"]
        .as_array()
        .map(|w| w.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    assert_eq!(got, warnings);
}

fn namespace(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}})
}

#[test]
fn thousands_of_labels_and_megabyte_values() {
    let h = Harness::new();
    let labels: serde_json::Map<String, Value> = (0..5000)
        .map(|i| (format!("example.org/label-{i}"), json!("v")))
        .collect();
    let mut request = ShortRequest::new(
        "UPDATE",
        "Namespace",
        "",
        "tenant-acme",
        "carol",
        &["tenant-acme-admin"],
    );
    request.object = Some(json!({"metadata": {"labels": labels}}));
    allowed(&h.run(&request, &[], |_| {}), &[]);

    let mut request = ShortRequest::new(
        "CREATE",
        "Postgres",
        "tenant-ktj-htdev",
        "big",
        "bob",
        &["tenant-ktj-htdev-use"],
    );
    request.object = Some(json!({"spec": {"blob": "x".repeat(1 << 20)}}));
    allowed(&h.run(&request, &[], |_| {}), &[]);
}

#[test]
fn unicode_and_over_long_names() {
    let h = Harness::new();
    let request = ShortRequest::new(
        "CREATE",
        "Namespace",
        "",
        "tenant-ä",
        "system:serviceaccount:cozy-fluxcd:flux",
        &[],
    );
    let mut request = request;
    request
        .labels
        .insert("tenant.cozystack.io/tenant-root".into(), String::new());
    request
        .labels
        .insert("tenant.cozystack.io/tenant-ä".into(), String::new());
    denied(
        &h.run(&request, &[], |_| {}),
        403,
        "namespace tenant-ä: \"tenant-ä\" is not a valid tenant namespace name (tenant-<word>[-<word>…], words of lower-case letters and digits); the platform must write exactly the chain the name implies (tenant-root carries none)",
    );
    let long = "m".repeat(10_000);
    let request = ShortRequest::new(
        "CREATE",
        "Monitoring",
        "tenant-ktj",
        &long,
        "alice",
        &["tenant-ktj-admin"],
    );
    denied(
        &h.run(&request, &[], |_| {}),
        403,
        "Monitoring: at most 1 per tenant tenant-ktj; already present: monitoring; use or edit the existing Monitoring instead of creating another (cardinality tenant/1)",
    );
}

#[test]
fn a_namespace_without_labels_resolves_no_provider() {
    let h = Harness::new();
    let request = ShortRequest::new(
        "CREATE",
        "Kubernetes",
        "scratch",
        "k",
        "system:masters-user",
        &["system:masters"],
    );
    let scratch = namespace("scratch", json!({}));
    allowed(
        &h.run(&request, &[scratch], |_| {}),
        &[
            "Kubernetes consumes etcd, but namespace scratch has no etcd provider (namespace.cozystack.io/etcd is empty): the app will wait (awaiting-etcd) until this tenant or an ancestor provides etcd",
            "Kubernetes consumes ingress, but namespace scratch has no ingress provider (namespace.cozystack.io/ingress is empty): the app will wait (awaiting-ingress) until this tenant or an ancestor provides ingress",
            "Kubernetes consumes monitoring, but namespace scratch has no monitoring provider (namespace.cozystack.io/monitoring is empty): the app will wait (awaiting-monitoring) until this tenant or an ancestor provides monitoring",
        ],
    );
}

#[test]
fn forged_and_cyclic_ancestor_labels_grant_nothing() {
    let h = Harness::new();
    // tenant-acme claims to sit below tenant-ktj, so that tenant-ktj's admin would administer it.
    let forged = namespace(
        "tenant-acme",
        json!({"tenant.cozystack.io/tenant-root": "", "tenant.cozystack.io/tenant-ktj": "", "tenant.cozystack.io/tenant-acme": ""}),
    );
    let request = ShortRequest::new(
        "CREATE",
        "Etcd",
        "tenant-acme",
        "etcd",
        "alice",
        &["tenant-ktj-admin"],
    );
    // A tenant namespace is placed by its name, which labels cannot forge.
    denied(
        &h.run(&request, &[forged], |_| {}),
        403,
        "Etcd is a tenant module: only tenant administrators (members of tenant-acme-admin, tenant-acme-super-admin or of an ancestor tenant's admin groups) and the platform may create it in tenant-acme, and alice is neither; ask a tenant administrator to create it from Administration → Modules",
    );
    // tenant-ktj claims its own child as an ancestor: a cycle.
    let cyclic = namespace(
        "tenant-ktj",
        json!({"tenant.cozystack.io/tenant-root": "", "tenant.cozystack.io/tenant-ktj": "", "tenant.cozystack.io/tenant-ktj-htdev": ""}),
    );
    let request = ShortRequest::new(
        "CREATE",
        "Info",
        "tenant-ktj",
        "info2",
        "hank",
        &["tenant-ktj-htdev-admin"],
    );
    denied(
        &h.run(&request, &[cyclic], |_| {}),
        403,
        "Info is a tenant module: only tenant administrators (members of tenant-ktj-admin, tenant-ktj-super-admin or of an ancestor tenant's admin groups) and the platform may create it in tenant-ktj, and hank is neither; ask a tenant administrator to create it from Administration → Modules",
    );
    // Outside the naming rule the labels are all there is, and a forged chain fails closed.
    let outside = namespace(
        "vm-pool",
        json!({"tenant.cozystack.io/tenant-root": "", "tenant.cozystack.io/tenant-ktj-htdev": ""}),
    );
    let request = ShortRequest::new(
        "CREATE",
        "Info",
        "vm-pool",
        "info",
        "hank",
        &["tenant-ktj-htdev-admin"],
    );
    denied(
        &h.run(&request, &[outside], |_| {}),
        403,
        "namespace vm-pool: tenant ancestor labels disagree with the tenant naming rule (missing tenant.cozystack.io/tenant-ktj); the policy cannot place the request in the tenant tree — ask a platform administrator to repair the namespace labels",
    );
}

#[test]
fn truncated_and_mistyped_payloads() {
    let h = Harness::new();
    let request = ShortRequest::new(
        "CREATE",
        "Monitoring",
        "tenant-ktj",
        "m",
        "alice",
        &["tenant-ktj-admin"],
    );
    let admission = request.expand(&h.bundle.cluster);
    let payload =
        serde_json::to_vec(&json!({"request": admission, "settings": h.bundle.settings})).unwrap();
    let cut = &payload[..payload.len() / 2];
    let response = h.raw(cut, &[]);
    assert_eq!(response["accepted"], false);
    assert_eq!(response["code"], 400);
    assert!(
        response["message"]
            .as_str()
            .unwrap()
            .starts_with("cannot decode the validation payload: EOF while parsing"),
        "{response}"
    );

    denied(
        &h.run(&request, &[], |r| r["operation"] = json!(5)),
        400,
        "cannot decode request: invalid type: integer `5`, expected a string",
    );
    denied(
        &h.run(&request, &[], |r| {
            r["userInfo"]["groups"] = json!("tenant-ktj-admin")
        }),
        400,
        "cannot decode request: invalid type: string \"tenant-ktj-admin\", expected a sequence",
    );
    denied(
        &h.run(&request, &[], |r| r["object"] = json!([1, 2])),
        400,
        "cannot decode request.object: must be a JSON object",
    );
    denied(
        &h.raw(br#"{"request": [1, 2]}"#, &[]),
        400,
        "cannot decode request: must be a JSON object",
    );
    denied(
        &h.run(&request, &[], |r| {
            r.as_object_mut().unwrap().remove("userInfo");
        }),
        400,
        "cannot decode request: missing field `userInfo`",
    );
    denied(
        &h.raw(b"", &[]),
        400,
        "cannot decode the validation payload: EOF while parsing a value at line 1 column 0",
    );
}
