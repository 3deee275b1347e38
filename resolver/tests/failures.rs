mod common;
use common::*;
use cozystack_resolver::Operation::*;
use serde_json::json;
#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

#[test]
fn kinds_without_rules_need_no_lookups_beyond_definitions() {
    let c = cluster();
    let recording = Recording::new(&c);
    let request = app(Create, "Redis", "tenant-a", "cache", user("bob", &[]));
    let verdict = cozystack_resolver::evaluate(&request, &common::listed(), &recording);
    assert_allowed(&verdict, &[]);
    let mut c2 = c.clone();
    c2.definitions.retain(|d| d.kind != "Redis");
    let recording2 = Recording::new(&c2);
    let verdict = cozystack_resolver::evaluate(
        &app(Create, "Unknown", "tenant-a", "x", user("bob", &[])),
        &common::listed(),
        &recording2,
    );
    assert_allowed(&verdict, &[]);
    assert_eq!(*recording.calls.borrow(), ["list ApplicationDefinitions"]);
    assert_eq!(*recording2.calls.borrow(), ["list ApplicationDefinitions"]);
}

#[test]
fn a_failed_lookup_rejects_and_names_the_lookup() {
    let c = cluster();
    // A second Monitoring reads the definitions and the instances (tenant-c is placed by its
    // name); a Kubernetes cluster, a consumer, reads its namespace's provider labels.
    for (kind, fail, expected) in [
        (
            "Monitoring",
            "list ApplicationDefinitions",
            "lookup failed: list ApplicationDefinitions: connection refused",
        ),
        (
            "Monitoring",
            "list HelmReleases",
            "lookup failed: list HelmReleases of kind Monitoring: connection refused",
        ),
        (
            "Kubernetes",
            "get Namespace",
            "lookup failed: get Namespace tenant-c: connection refused",
        ),
    ] {
        let mut recording = Recording::new(&c);
        recording.fail = vec![fail];
        let request = app(
            Create,
            kind,
            "tenant-c",
            "m",
            user("c", &["tenant-c-admin"]),
        );
        let verdict = cozystack_resolver::evaluate(&request, &common::listed(), &recording);
        assert_denied(
            &verdict,
            500,
            &format!(
                "{expected}; the request is rejected because the policy could not read the cluster state it needs (retry, or check the policy-server's access)"
            ),
        );
    }
    let mut recording = Recording::new(&c);
    // The consumers' namespaces cannot be read one by one, nor listed.
    recording.fail = vec!["get Namespace", "list Namespaces"];
    let verdict = cozystack_resolver::evaluate(
        &app(
            Delete,
            "Monitoring",
            "tenant-a",
            "monitoring",
            user(FLUX, &[]),
        ),
        &common::listed(),
        &recording,
    );
    assert_eq!(verdict.code, Some(500));
    assert!(
        verdict
            .message
            .unwrap()
            .starts_with("lookup failed: list Namespaces: connection refused")
    );
}

#[test]
fn a_malformed_definition_rejects_only_requests_that_need_it() {
    let mut c = cluster();
    c.definitions[0] = definition(
        "monitoring",
        "Monitoring",
        json!({
            "cardinality": {"scope": "tenant", "max": "one"},
            "capability": {"provides": ["monitoring"], "consumes": ["etcd"]},
        }),
    );
    let verdict = decide(
        &app(Create, "Monitoring", "tenant-c", "m", user(FLUX, &[])),
        &c,
    );
    assert_denied(
        &verdict,
        403,
        "ApplicationDefinition monitoring: spec.cardinality.max: invalid type: string \"one\", expected u32; the rules of kind Monitoring cannot be read, so the request is rejected — fix the ApplicationDefinition or the policy settings",
    );
    assert_allowed(
        &decide(&app(Create, "Redis", "tenant-c", "r", user("u", &[])), &c),
        &[],
    );
    // Protection must know every consumer kind: a broken definition whose capability names the
    // class blocks the removal when one of its instances sits where the class resolves to it.
    let delete_etcd = app(
        Delete,
        "Etcd",
        "tenant-root",
        "etcd",
        user("root", &["tenant-root-admin"]),
    );
    let verdict = decide(&delete_etcd, &c);
    assert_denied(
        &verdict,
        403,
        "ApplicationDefinition monitoring: spec.cardinality.max: invalid type: string \"one\", expected u32; the rules of kind Monitoring cannot be read, so the policy cannot tell whether tenant-root/monitoring consumes the etcd that Etcd tenant-root/etcd provides — fix the ApplicationDefinition",
    );
    // A broken definition whose capability cannot name the class plays no part, however its
    // other fields read: the removal is judged by the real consumers.
    let mut unrelated = c.clone();
    unrelated.definitions[0] = definition(
        "monitoring",
        "Monitoring",
        json!({"cardinality": {"scope": "tenant", "max": "one"}, "capability": {"provides": ["monitoring"]}}),
    );
    assert_denied(
        &decide(&delete_etcd, &unrelated),
        403,
        "Etcd tenant-root/etcd is protected while it provides etcd to consumers: tenant-a-b/dev (Kubernetes); delete or move those consumers first, or give their tenants another etcd provider (protection.deletion: protect)",
    );
    // ... and not when none of its instances is at stake (with the root's etcd switch off,
    // so that the chart does not hold the Etcd either).
    c.instances.retain(|i| i.kind != "Monitoring");
    c.instances.retain(|i| i.kind != "Kubernetes");
    root_values(&mut c)["etcd"] = json!(false);
    assert_allowed(&decide(&delete_etcd, &c), &[]);
}

#[test]
fn duplicate_definitions_of_a_kind_are_rejected() {
    let mut c = cluster();
    c.definitions
        .push(definition("monitoring-v2", "Monitoring", json!({})));
    let verdict = decide(
        &app(Create, "Monitoring", "tenant-c", "m", user(FLUX, &[])),
        &c,
    );
    assert_eq!(
        verdict.message.as_deref(),
        Some(
            "ApplicationDefinition monitoring-v2: spec.application.kind: ApplicationDefinition monitoring also defines kind Monitoring; the rules of kind Monitoring cannot be read, so the request is rejected — fix the ApplicationDefinition or the policy settings"
        )
    );
}

#[test]
fn settings_fill_what_definitions_lack_and_definitions_win() {
    let mut c = cluster();
    c.definitions.push(definition(
        "bucket",
        "Bucket",
        json!({"dashboard": {"category": "Storage"}}),
    ));
    let settings: cozystack_resolver::Settings = serde_json::from_value(json!({"definitionSource": "applicationDefinitions", "definitions": {
        "Bucket": {"cardinality": {"scope": "namespace", "max": 1}, "dashboard": {"visibility": "hidden"}},
        "Monitoring": {"cardinality": {"scope": "cluster", "max": 5}, "dashboard": {"visibility": "hidden"}}
    }})).unwrap();
    c.instances.push(instance("Bucket", "tenant-a", "b1"));
    let verdict = cozystack_resolver::evaluate(
        &app(Create, "Bucket", "tenant-a", "b2", user(FLUX, &[])),
        &settings,
        &c,
    );
    assert_eq!(verdict.warnings.len(), 1, "{verdict:?}");
    let verdict = cozystack_resolver::evaluate(
        &app(
            Create,
            "Bucket",
            "tenant-a",
            "b2",
            user("u", &["tenant-a-admin"]),
        ),
        &settings,
        &c,
    );
    assert!(
        verdict
            .message
            .unwrap()
            .starts_with("Bucket is a hidden kind")
    );
    // Monitoring's definition states cardinality (tenant/1) and module: the settings do not apply.
    let verdict = cozystack_resolver::evaluate(
        &app(
            Create,
            "Monitoring",
            "tenant-a",
            "m2",
            user("u", &["tenant-a-admin"]),
        ),
        &settings,
        &c,
    );
    assert!(
        verdict
            .message
            .unwrap()
            .starts_with("Monitoring: at most 1 per tenant tenant-a")
    );
}

#[test]
fn subresources_and_dry_run() {
    let c = cluster();
    let mut request = app(Update, "Gateway", "tenant-a", "gateway", user("alice", &[]));
    request.subresource = Some("status".into());
    assert_allowed(&decide(&request, &c), &[]);
    request.subresource = None;
    let denied = decide(&request, &c);
    request.dry_run = true;
    assert_eq!(
        decide(&request, &c),
        denied,
        "dry-run gets the same verdict"
    );
}

#[test]
fn a_create_without_an_object_is_malformed() {
    let mut request = app(Create, "Monitoring", "tenant-a", "m", user("u", &[]));
    request.object = None;
    assert_denied(
        &decide(&request, &cluster()),
        400,
        "CREATE Monitoring tenant-a/m: the request has no object",
    );
}
