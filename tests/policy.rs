//! The policy adapter with the host calls answered by a fake host: request decoding, the exact
//! host-call payloads (field masks, selectors), and verdicts through the wire format.

use std::cell::RefCell;

use cozystack_capabilities_policy::host::Host;
use cozystack_capabilities_policy::{evaluate, response};
use serde_json::{Value, json};

/// Answers host calls from a list of objects, the way the policy-server would.
struct FakeHost {
    namespaces: Vec<Value>,
    definitions: Vec<Value>,
    releases: Vec<Value>,
    calls: RefCell<Vec<(String, Value)>>,
    fail: Option<&'static str>,
}

fn matches_selector(labels: &Value, selector: &str) -> bool {
    selector.split(',').all(|term| {
        let (key, value) = term.split_once('=').expect("equality selector");
        labels.get(key).and_then(Value::as_str) == Some(value)
    })
}

impl FakeHost {
    /// Each call as `<operation> <kind>`, in order.
    fn operations(&self) -> Vec<String> {
        self.calls
            .borrow()
            .iter()
            .map(|(op, r)| format!("{op} {}", r["kind"].as_str().unwrap()))
            .collect()
    }
}

impl Host for FakeHost {
    fn kubernetes(&self, operation: &str, request: &[u8]) -> Result<Vec<u8>, String> {
        let request: Value = serde_json::from_slice(request).unwrap();
        self.calls
            .borrow_mut()
            .push((operation.to_owned(), request.clone()));
        if self.fail == Some(operation) {
            return Err("the server is currently unable to handle the request".into());
        }
        let kind = request["kind"].as_str().unwrap();
        let items: Vec<Value> = match kind {
            "Namespace" => self.namespaces.clone(),
            "ApplicationDefinition" => self.definitions.clone(),
            "HelmRelease" => self.releases.clone(),
            other => return Err(format!("no such kind {other}")),
        };
        let body = match operation {
            "get_resource" => {
                let name = request["name"].as_str().unwrap();
                let namespace = request["namespace"].as_str();
                // The evaluator's answer for a missing object (`client.rs`): the namespace as
                // Rust prints an `Option<&str>`.
                items
                    .into_iter()
                    .find(|o| {
                        o["metadata"]["name"] == name
                            && namespace.is_none_or(|ns| o["metadata"]["namespace"] == ns)
                    })
                    .ok_or_else(|| {
                        format!(
                            "Cannot find {}/{kind} named '{name}' inside of namespace '{namespace:?}'",
                            request["api_version"].as_str().unwrap()
                        )
                    })?
            }
            "list_resources_all" => {
                let selector = request["label_selector"].as_str();
                let keeps_labels = request["field_masks"]
                    .as_array()
                    .is_none_or(|m| m.iter().any(|p| p == "metadata.labels"));
                let items: Vec<Value> = items
                    .into_iter()
                    .filter(|o| {
                        selector.is_none_or(|s| matches_selector(&o["metadata"]["labels"], s))
                    })
                    .map(|mut o| {
                        // The one mask this fake applies: labels left out stay out.
                        if !keeps_labels {
                            o["metadata"].as_object_mut().unwrap().remove("labels");
                        }
                        o
                    })
                    .collect();
                json!({"apiVersion": request["api_version"], "kind": format!("{kind}List"), "metadata": {}, "items": items})
            }
            other => return Err(format!("unexpected operation {other}")),
        };
        Ok(serde_json::to_vec(&body).unwrap())
    }
}

fn ns(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}})
}

fn host() -> FakeHost {
    FakeHost {
        namespaces: vec![
            // cozystack-basics labels tenant-root with no provider label: its apps resolve
            // every class to tenant-root through its cozystack-values.
            ns(
                "tenant-root",
                json!({"platform.cozystack.io/no-delete": "true", "namespace.cozystack.io/host": "example.org"}),
            ),
            ns(
                "tenant-a",
                json!({"tenant.cozystack.io/tenant-root": "", "tenant.cozystack.io/tenant-a": "", "namespace.cozystack.io/monitoring": "tenant-root"}),
            ),
        ],
        definitions: vec![
            json!({"metadata": {"name": "monitoring"}, "spec": {
            "application": {"kind": "Monitoring"},
            "dashboard": {"module": true},
            "cardinality": {"scope": "tenant", "max": 1},
            "protection": {"deletion": "protect"},
            "capability": {"provides": ["monitoring"], "share": "children"}}}),
            json!({"metadata": {"name": "postgres"}, "spec": {"application": {"kind": "Postgres"}, "release": {"prefix": "postgres-"},
                "capability": {"consumes": ["monitoring"]}}}),
        ],
        releases: vec![
            json!({"metadata": {"name": "monitoring", "namespace": "tenant-root", "labels": {
                "apps.cozystack.io/application.kind": "Monitoring", "apps.cozystack.io/application.group": "apps.cozystack.io", "apps.cozystack.io/application.name": "monitoring"}}}),
            json!({"metadata": {"name": "postgres-db", "namespace": "tenant-a", "labels": {
                "apps.cozystack.io/application.kind": "Postgres", "apps.cozystack.io/application.group": "apps.cozystack.io", "apps.cozystack.io/application.name": "db"}}}),
            // The root Tenant with no module switched on: its Monitoring was created through
            // the API, and the Tenant chart renders none.
            json!({"metadata": {"name": "tenant-root", "namespace": "tenant-root", "labels": {
                "apps.cozystack.io/application.kind": "Tenant", "apps.cozystack.io/application.group": "apps.cozystack.io", "apps.cozystack.io/application.name": "root"}},
                "spec": {"values": {"host": "example.org"}}}),
        ],
        calls: RefCell::default(),
        fail: None,
    }
}

fn app_request(operation: &str, namespace: &str, name: &str, user: &str, groups: &[&str]) -> Value {
    let object = json!({"apiVersion": "apps.cozystack.io/v1alpha1", "kind": "Monitoring",
        "metadata": {"name": name, "namespace": namespace}, "spec": {}});
    let mut request = json!({
        "uid": "1", "kind": {"group": "apps.cozystack.io", "version": "v1alpha1", "kind": "Monitoring"},
        "resource": {"group": "apps.cozystack.io", "version": "v1alpha1", "resource": "monitorings"},
        "name": name, "namespace": namespace, "operation": operation,
        "userInfo": {"username": user, "groups": groups},
    });
    if operation == "DELETE" {
        request["oldObject"] = object;
    } else {
        request["object"] = object;
    }
    request
}

/// The root administrator deletes the root's Monitoring.
fn root_deletes_monitoring() -> Value {
    app_request(
        "DELETE",
        "tenant-root",
        "monitoring",
        "root",
        &["tenant-root-admin"],
    )
}

/// Settings that read the rules from the ApplicationDefinitions the fake host lists (the
/// default is the built-in rule set, which lists none).
fn listed() -> Value {
    json!({"definitionSource": "applicationDefinitions"})
}

fn run(host: &FakeHost, request: Value, settings: Value) -> Value {
    let payload = serde_json::to_vec(&json!({"request": request, "settings": settings})).unwrap();
    serde_json::to_value(response(evaluate(&payload, host))).unwrap()
}

#[test]
fn cardinality_through_the_wire_with_exact_host_calls() {
    let host = host();
    let out = run(
        &host,
        app_request(
            "CREATE",
            "tenant-root",
            "second",
            "root",
            &["tenant-root-admin"],
        ),
        listed(),
    );
    assert_eq!(out["accepted"], false);
    assert_eq!(out["code"], 403);
    assert_eq!(
        out["message"],
        "Monitoring: at most 1 per tenant tenant-root; already present: monitoring; use or edit the existing Monitoring instead of creating another (cardinality tenant/1)"
    );
    // tenant-root is placed by its name (visibility, tenant scope): no Namespace is read.
    let calls = host.calls.borrow();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(calls[0].0, "list_resources_all");
    assert_eq!(
        calls[0].1,
        json!({"api_version": "cozystack.io/v1alpha1", "kind": "ApplicationDefinition", "label_selector": null, "field_selector": null,
               "field_masks": ["metadata.name", "spec.application.group", "spec.application.kind", "spec.capability", "spec.cardinality", "spec.dashboard.module", "spec.dashboard.visibility", "spec.protection", "spec.release.prefix"]})
    );
    // Monitoring's definition states no release prefix, so app names come from the labels.
    assert_eq!(
        calls[1].1,
        json!({"api_version": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
               "label_selector": "apps.cozystack.io/application.kind=Monitoring,apps.cozystack.io/application.group=apps.cozystack.io",
               "field_selector": null,
               "field_masks": ["metadata.deletionTimestamp", "metadata.labels", "metadata.name", "metadata.namespace"]})
    );
}

/// A protected removal reads the labels of the few namespaces that host a consumer, one
/// cached GET each, not the whole namespace list.
#[test]
fn protection_reads_only_the_consumers_namespaces() {
    let host = host();
    let out = run(&host, root_deletes_monitoring(), listed());
    assert_eq!(
        out["message"],
        "Monitoring tenant-root/monitoring is protected while it provides monitoring to consumers: tenant-a/db (Postgres); delete or move those consumers first, or give their tenants another monitoring provider (protection.deletion: protect)"
    );
    assert_eq!(
        host.operations(),
        [
            "list_resources_all ApplicationDefinition",
            "list_resources_all HelmRelease",
            "list_resources_all HelmRelease",
            "get_resource Namespace",
        ]
    );
    assert_eq!(host.calls.borrow()[3].1["name"], "tenant-a");
    // Postgres states `postgres-`: its releases are listed without labels, and `db` is read
    // from the name `postgres-db`.
    let calls = host.calls.borrow();
    let postgres = calls
        .iter()
        .find(|(_, r)| {
            r["label_selector"]
                .as_str()
                .is_some_and(|s| s.contains("=Postgres"))
        })
        .expect("a Postgres list");
    assert_eq!(
        postgres.1["field_masks"],
        json!([
            "metadata.deletionTimestamp",
            "metadata.name",
            "metadata.namespace"
        ])
    );
}

/// Without a consumer anywhere, deleting a provider needs no namespace and not even the
/// providers' releases: the consumers' releases are read first.
#[test]
fn an_unconsumed_provider_goes_without_listing_namespaces() {
    let mut host = host();
    host.releases
        .retain(|r| r["metadata"]["name"] != "postgres-db");
    let out = run(&host, root_deletes_monitoring(), listed());
    assert_eq!(out["accepted"], true, "{out}");
    assert_eq!(out["message"], Value::Null);
    assert_eq!(
        host.operations(),
        [
            "list_resources_all ApplicationDefinition",
            "list_resources_all HelmRelease",
            "get_resource HelmRelease",
        ]
    );
    assert!(
        host.calls.borrow()[1].1["label_selector"]
            .as_str()
            .is_some_and(|s| s.contains("=Postgres")),
        "{:?}",
        host.calls.borrow()[1]
    );
    // Then, with no consumer in the way: is this the Tenant chart's module? The owning
    // Tenant's switch tells (the root's release, tenant-root/tenant-root, monitoring off).
    let get = &host.calls.borrow()[2].1;
    assert_eq!(
        (&get["name"], &get["namespace"]),
        (&json!("tenant-root"), &json!("tenant-root"))
    );
    assert_eq!(
        get["field_masks"],
        json!([
            "metadata.annotations",
            "metadata.deletionTimestamp",
            "metadata.labels",
            "spec.values"
        ])
    );
}

#[test]
fn warnings_travel_on_accepted_responses() {
    let host = host();
    let out = run(
        &host,
        app_request(
            "CREATE",
            "tenant-root",
            "second",
            "system:serviceaccount:cozy-fluxcd:flux",
            &[],
        ),
        listed(),
    );
    assert_eq!(out["accepted"], true);
    assert_eq!(out["message"], Value::Null);
    assert_eq!(out["warnings"].as_array().unwrap().len(), 1);
}

#[test]
fn a_host_error_rejects_and_names_the_lookup() {
    let mut host = host();
    host.fail = Some("list_resources_all");
    let out = run(
        &host,
        app_request("CREATE", "tenant-root", "second", "root", &[]),
        listed(),
    );
    assert_eq!(out["accepted"], false);
    assert_eq!(out["code"], 500);
    assert_eq!(
        out["message"],
        "lookup failed: list ApplicationDefinitions: the server is currently unable to handle the request; the request is rejected because the policy could not read the cluster state it needs (retry, or check the policy-server's access)"
    );
}

/// A consumer's CREATE reads its namespace's provider labels, which its name cannot give.
#[test]
fn a_missing_namespace_rejects() {
    let host = host();
    let mut request = app_request("CREATE", "tenant-gone", "m", "u", &["tenant-gone-admin"]);
    request["kind"]["kind"] = "Postgres".into();
    request["resource"]["resource"] = "postgreses".into();
    request["object"]["kind"] = "Postgres".into();
    let out = run(&host, request, listed());
    assert_eq!(out["code"], 500);
    assert_eq!(
        out["message"],
        "lookup failed: get Namespace tenant-gone: Cannot find v1/Namespace named 'tenant-gone' inside of namespace 'None'; the request is rejected because the policy could not read the cluster state it needs (retry, or check the policy-server's access)"
    );
}

/// A release looked up by name that does not exist is an answer: a module of a Tenant whose
/// release is gone is rendered by nothing, so its DELETE gets a verdict, not a 500.
#[test]
fn a_missing_tenant_release_is_an_answer() {
    let mut host = host();
    // No consumer holds the Monitoring, so the DELETE comes to the Tenant's release.
    host.releases.retain(|r| {
        !["tenant-root", "postgres-db"].contains(&r["metadata"]["name"].as_str().unwrap())
    });
    let out = run(&host, root_deletes_monitoring(), listed());
    assert_eq!(out["accepted"], true, "{out}");
    let gets: Vec<Value> = host
        .calls
        .borrow()
        .iter()
        .filter(|(op, r)| op == "get_resource" && r["kind"] == "HelmRelease")
        .map(|(_, r)| r["field_masks"].clone())
        .collect();
    assert_eq!(
        gets,
        [json!([
            "metadata.annotations",
            "metadata.deletionTimestamp",
            "metadata.labels",
            "spec.values"
        ])]
    );
    // Any other failure of the same GET is still a failed lookup.
    let failing = FakeHost {
        fail: Some("get_resource"),
        ..host
    };
    let out = run(&failing, root_deletes_monitoring(), listed());
    assert_eq!(out["code"], 500, "{out}");
}

#[test]
fn undecodable_input_is_rejected_with_400() {
    let host = host();
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (b"not json".to_vec(), "cannot decode the validation payload: expected ident at line 1 column 2"),
        (br#"{"settings":{}}"#.to_vec(), "cannot decode the validation payload: missing field `request` at line 1 column 15"),
        (serde_json::to_vec(&json!({"request": {"operation": "CREATE"}})).unwrap(), "cannot decode request: missing field `kind`"),
        (serde_json::to_vec(&json!({"request": app_request("PATCH", "tenant-a", "m", "u", &[])})).unwrap(),
         "unsupported operation \"PATCH\": expected CREATE, UPDATE, DELETE or CONNECT"),
        (serde_json::to_vec(&json!({"request": {"kind": {"group": "", "version": "v1", "kind": "Pod"}, "operation": "CREATE", "userInfo": {"username": "u"}}})).unwrap(),
         "the policy does not handle v1/Pod; match only apps.cozystack.io applications, helm.toolkit.fluxcd.io HelmReleases and core Namespaces"),
        (serde_json::to_vec(&json!({"request": app_request("DELETE", "tenant-a", "m", "", &[])})).unwrap(), "request.userInfo.username is empty"),
        (serde_json::to_vec(&json!({"request": {"kind": {"group": "apps.cozystack.io", "version": "v1alpha1", "kind": "Monitoring"},
            "operation": "CREATE", "namespace": "tenant-a", "name": "m", "userInfo": {"username": "u"}, "object": {"metadata": {"labels": "x"}}}})).unwrap(),
         "cannot decode request.object: invalid type: string \"x\", expected a map"),
        (serde_json::to_vec(&json!({"request": app_request("CREATE", "tenant-a", "m", "u", &[]), "settings": {"platformWriters": "maybe"}})).unwrap(),
         "invalid policy settings: platformWriters: unknown variant `maybe`, expected `warn` or `deny`"),
    ];
    for (payload, message) in cases {
        let out = serde_json::to_value(response(evaluate(&payload, &host))).unwrap();
        assert_eq!(out["accepted"], false, "{message}");
        assert_eq!(out["code"], 400, "{message}");
        assert_eq!(out["message"], message);
    }
    assert!(
        host.calls.borrow().is_empty(),
        "nothing is looked up for a bad request"
    );
}

#[test]
fn delete_with_only_old_object_reads_name_and_namespace_from_it() {
    let host = host();
    let mut request = app_request(
        "DELETE",
        "tenant-root",
        "monitoring",
        "root",
        &["tenant-root-admin"],
    );
    request.as_object_mut().unwrap().remove("name");
    request.as_object_mut().unwrap().remove("namespace");
    let out = run(&host, request, listed());
    assert_eq!(out["accepted"], false);
    assert!(
        out["message"]
            .as_str()
            .unwrap()
            .starts_with("Monitoring tenant-root/monitoring is protected")
    );
}

#[test]
fn snake_case_field_names_are_read_too() {
    let host = host();
    let mut request = app_request("CREATE", "tenant-root", "second", "root", &[]);
    let user = request.as_object_mut().unwrap().remove("userInfo").unwrap();
    request["user_info"] = user;
    request["sub_resource"] = json!("status");
    let out = run(&host, request, listed());
    assert_eq!(out["accepted"], true, "status subresource: {out}");
}
