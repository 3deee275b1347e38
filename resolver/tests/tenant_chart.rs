//! What the Tenant chart makes of a Tenant's values, and which module instances it owns.
mod common;
use common::*;
use cozystack_resolver::Operation::*;
use cozystack_resolver::{Instance, Request, Snapshot};
use serde_json::{Value, json};
#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

/// A Tenant `name` in `parent` with `old` values (UPDATE) or none (CREATE) becoming `new`.
fn tenant(parent: &str, name: &str, old: Option<Value>, new: Value) -> Request {
    let operation = if old.is_some() { Update } else { Create };
    let mut request = app(operation, "Tenant", parent, name, root_owner());
    request.object.as_mut().unwrap().spec = new;
    match old {
        Some(old) => request.old_object.as_mut().unwrap().spec = old,
        None => request.old_object = None,
    }
    request
}

/// A super-admin of the root: may write Tenants there (RBAC), is no platform identity.
fn root_owner() -> cozystack_resolver::User {
    user("rita", &["tenant-root-super-admin"])
}

/// The test cluster with the gateway and compute-plane kinds of a stock install.
fn stock() -> Snapshot {
    let mut snapshot = cluster();
    snapshot.definitions.retain(|d| d.kind != "ComputePlane");
    snapshot.definitions.push(definition(
        "computeplane",
        "ComputePlane",
        json!({
        "dashboard": {"visibility": "module"},
        "cardinality": {"scope": "tenant", "max": 1},
        "protection": {"edit": "adminOnly"},
        "capability": {"consumes": ["etcd", "monitoring"], "share": "none"}}),
    ));
    snapshot
}

fn module(kind: &str, namespace: &str, app: &str, rendered_by: Option<&str>) -> Instance {
    Instance {
        rendered_by: rendered_by.map(str::to_owned),
        ..instance(kind, namespace, app)
    }
}

#[test]
fn switches_are_the_owners_on_create_and_update_alike() {
    let snapshot = stock();
    for switch in ["gateway", "computeplane"] {
        let on = json!({ switch: true });
        let created = decide(&tenant("tenant-root", "d", None, on.clone()), &snapshot);
        assert_allowed(&created, &[]);
        let updated = decide(
            &tenant("tenant-root", "c", Some(json!({})), on.clone()),
            &snapshot,
        );
        assert_allowed(&updated, &[]);
    }
    // Creating either directly stays the platform's.
    let gateway = decide(
        &app(Create, "Gateway", "tenant-c", "gateway", root_owner()),
        &snapshot,
    );
    assert_denied(
        &gateway,
        403,
        "Gateway is a hidden kind: only the Cozystack platform may create it, and rita is not a platform identity; it is managed by the platform, so ask a platform administrator",
    );
    let computeplane = decide(
        &app(
            Create,
            "ComputePlane",
            "tenant-c",
            "computeplane",
            root_owner(),
        ),
        &snapshot,
    );
    assert_denied(
        &computeplane,
        403,
        "ComputePlane tenant-c/computeplane: only the platform may create it (protection.edit: adminOnly), and rita is not a platform identity; ask a platform administrator to make the change",
    );
}

#[test]
fn a_switch_on_counts_what_is_there_without_reading_the_new_namespace() {
    let mut snapshot = stock();
    // Left over from an earlier Tenant d whose namespace is still being deleted.
    snapshot.instances.push(Instance {
        terminating: true,
        ..instance("Monitoring", "tenant-d", "metrics")
    });
    let recording = Recording::new(&snapshot);
    let request = tenant("tenant-root", "d", None, json!({"monitoring": true}));
    let verdict = cozystack_resolver::evaluate(&request, &Default::default(), &recording);
    assert_denied(
        &verdict,
        403,
        "Tenant tenant-root/d: turning monitoring on creates Monitoring tenant-d/monitoring: Monitoring: at most 1 per tenant tenant-d; already present: metrics (terminating); use or edit the existing Monitoring instead of creating another (cardinality tenant/1)",
    );
    assert_eq!(
        *recording.calls.borrow(),
        [
            "list ApplicationDefinitions",
            "list HelmReleases of kind Monitoring"
        ]
    );
    // Switched on, as an UPDATE, in a tenant whose admin created one through the API.
    snapshot
        .instances
        .push(instance("Monitoring", "tenant-c", "metrics"));
    let verdict = decide(
        &tenant(
            "tenant-root",
            "c",
            Some(json!({})),
            json!({"monitoring": true}),
        ),
        &snapshot,
    );
    assert_denied(
        &verdict,
        403,
        "Tenant tenant-root/c: turning monitoring on creates Monitoring tenant-c/monitoring: Monitoring: at most 1 per tenant tenant-c; already present: metrics; use or edit the existing Monitoring instead of creating another (cardinality tenant/1)",
    );
}

#[test]
fn switches_follow_go_template_truth() {
    let snapshot = stock();
    let off_message = &format!(
        "Tenant tenant-root/a: turning monitoring off removes Monitoring tenant-a/monitoring: {A_MONITORING_HELD}"
    );
    for off in [
        json!(false),
        json!(""),
        json!(0),
        json!([]),
        json!({}),
        Value::Null,
    ] {
        let verdict = decide(
            &tenant(
                "tenant-root",
                "a",
                Some(json!({"monitoring": true})),
                json!({ "monitoring": off }),
            ),
            &snapshot,
        );
        assert_denied(&verdict, 403, off_message);
    }
    for on in [json!("yes"), json!(1), json!(["x"]), json!({"a": 1})] {
        let verdict = decide(
            &tenant(
                "tenant-root",
                "a",
                Some(json!({"monitoring": true})),
                json!({ "monitoring": on }),
            ),
            &snapshot,
        );
        assert_allowed(&verdict, &[]);
    }
}

#[test]
fn the_release_path_judges_the_same_switches() {
    let snapshot = stock();
    let mut request = release(
        Update,
        "tenant-root",
        "tenant-a",
        release_labels("Tenant", "a"),
        user(API, &[]),
    );
    request.old_object.as_mut().unwrap().spec = json!({"values": {"monitoring": true}});
    request.object.as_mut().unwrap().spec = json!({"values": {"monitoring": false}});
    let verdict = decide(&request, &snapshot);
    assert_allowed(
        &verdict,
        &[&format!(
            "Tenant tenant-root/a: turning monitoring off removes Monitoring tenant-a/monitoring: {A_MONITORING_HELD} (admitted because system:serviceaccount:cozy-system:cozystack-api is a platform writer and platformWriters is warn)"
        )],
    );
    // A new Tenant release with a hidden kind switched on: the chart's to render.
    let mut created = release(
        Create,
        "tenant-root",
        "tenant-d",
        release_labels("Tenant", "d"),
        user(API, &[]),
    );
    created.object.as_mut().unwrap().spec = json!({"values": {"gateway": true}});
    assert_allowed(&decide(&created, &snapshot), &[]);
}

#[test]
fn a_module_the_chart_renders_is_known_by_helm_ownership() {
    let admin = || user("carol", &["tenant-c-admin"]);
    let delete = || app(Delete, "Monitoring", "tenant-c", "monitoring", admin());
    for (rendered_by, refused) in [
        // Created from Administration → Modules: cozystack-api writes no Helm metadata.
        (None, false),
        // Rendered by another Helm release: not the Tenant's switch.
        (Some("cozy-system/cozystack-basics"), false),
        (Some("tenant-root/tenant-c"), true),
    ] {
        let mut snapshot = stock();
        snapshot
            .instances
            .push(module("Monitoring", "tenant-c", "monitoring", rendered_by));
        let verdict = decide(&delete(), &snapshot);
        if refused {
            assert_denied(
                &verdict,
                403,
                "Monitoring tenant-c/monitoring is rendered by Tenant tenant-root/c (Helm release tenant-root/tenant-c), which would create it again; turn monitoring off in Tenant tenant-root/c instead of deleting it (protection.deletion: protect)",
            );
        } else {
            assert_allowed(&verdict, &[]);
        }
    }
    // The root Tenant's modules are rendered by the tenant-root release in tenant-root.
    let mut snapshot = stock();
    snapshot
        .instances
        .retain(|i| i.kind != "Monitoring" || i.namespace != "tenant-root");
    snapshot.instances.push(module(
        "Monitoring",
        "tenant-root",
        "monitoring",
        Some("tenant-root/tenant-root"),
    ));
    snapshot.instances.retain(|i| i.namespace != "tenant-c");
    let verdict = decide(
        &app(
            Delete,
            "Monitoring",
            "tenant-root",
            "monitoring",
            user("r", &["tenant-root-admin"]),
        ),
        &snapshot,
    );
    assert_denied(
        &verdict,
        403,
        "Monitoring tenant-root/monitoring is rendered by Tenant tenant-root/root (Helm release tenant-root/tenant-root), which would create it again; turn monitoring off in Tenant tenant-root/root instead of deleting it (protection.deletion: protect)",
    );
}

#[test]
fn consumers_are_named_before_the_switch() {
    let mut snapshot = stock();
    snapshot
        .instances
        .retain(|i| !(i.kind == "Monitoring" && i.namespace == "tenant-a"));
    snapshot.instances.push(module(
        "Monitoring",
        "tenant-a",
        "monitoring",
        Some("tenant-root/tenant-a"),
    ));
    let verdict = decide(&delete_a_monitoring(), &snapshot);
    assert_denied(&verdict, 403, A_MONITORING_HELD);
}
