mod common;
use common::*;
use cozystack_resolver::{Operation::*, Settings};
#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

#[test]
fn module_needs_a_tenant_administrator_of_the_namespace_or_an_ancestor() {
    let c = cluster();
    let denied = decide(
        &app(
            Create,
            "Monitoring",
            "tenant-c",
            "monitoring",
            user("dave", &["tenant-c-use", "tenant-a-admin"]),
        ),
        &c,
    );
    assert_denied(
        &denied,
        403,
        "Monitoring is a tenant module: only tenant administrators (members of tenant-c-admin, tenant-c-super-admin or of an ancestor tenant's admin groups) and the platform may create it in tenant-c, and dave is neither; ask a tenant administrator to create it from Administration → Modules",
    );
    for group in [
        "tenant-c-admin",
        "tenant-c-super-admin",
        "tenant-root-admin",
    ] {
        let verdict = decide(
            &app(
                Create,
                "Monitoring",
                "tenant-c",
                "monitoring",
                user("x", &[group]),
            ),
            &c,
        );
        assert_allowed(&verdict, &[]);
    }
    let verdict = decide(
        &app(
            Create,
            "Monitoring",
            "tenant-c",
            "monitoring",
            user(API, &[]),
        ),
        &c,
    );
    assert_allowed(&verdict, &[]);
}

#[test]
fn module_applies_to_updates_and_deletes_too() {
    let c = cluster();
    let verdict = decide(
        &app(
            Update,
            "Etcd",
            "tenant-root",
            "etcd",
            user("eve", &["tenant-root-use"]),
        ),
        &c,
    );
    assert_denied(
        &verdict,
        403,
        "Etcd is a tenant module: only tenant administrators (members of tenant-root-admin, tenant-root-super-admin or of an ancestor tenant's admin groups) and the platform may change it in tenant-root, and eve is neither; ask a tenant administrator to change it from Administration → Modules",
    );
}

#[test]
fn dashboard_module_true_counts_as_module() {
    // cluster()'s Monitoring definition only says dashboard.module: true.
    let verdict = decide(
        &app(Create, "Monitoring", "tenant-c", "m", user("u", &[])),
        &cluster(),
    );
    assert!(!verdict.allowed);
    assert!(
        verdict
            .message
            .unwrap()
            .starts_with("Monitoring is a tenant module")
    );
}

#[test]
fn hidden_is_for_platform_identities_only() {
    let c = cluster();
    let verdict = decide(
        &app(
            Create,
            "Gateway",
            "tenant-a",
            "gateway",
            user("alice", &["tenant-a-super-admin"]),
        ),
        &c,
    );
    assert_denied(
        &verdict,
        403,
        "Gateway is a hidden kind: only the Cozystack platform may create it, and alice is not a platform identity; it is managed by the platform, so ask a platform administrator",
    );
    for who in [
        user(FLUX, &[]),
        user("admin", &["cozystack-cluster-admin"]),
        user("kubeadm", &["system:masters"]),
    ] {
        assert_allowed(
            &decide(&app(Create, "Gateway", "tenant-a", "gateway", who), &c),
            &[],
        );
    }
}

#[test]
fn catalog_kinds_are_open_to_anyone() {
    let verdict = decide(
        &app(
            Create,
            "Redis",
            "tenant-a",
            "cache",
            user("bob", &["tenant-a-use"]),
        ),
        &cluster(),
    );
    assert_allowed(&verdict, &[]);
}

#[test]
fn oidc_group_prefix_and_custom_suffixes() {
    let settings = Settings {
        tenant_group_prefix: "oidc:".into(),
        tenant_admin_group_suffixes: vec!["-owners".into()].into(),
        ..Settings::default()
    };
    let c = cluster();
    let ok = cozystack_resolver::evaluate(
        &app(
            Create,
            "Monitoring",
            "tenant-c",
            "m",
            user("u", &["oidc:tenant-c-owners"]),
        ),
        &settings,
        &c,
    );
    assert_allowed(&ok, &[]);
    let denied = cozystack_resolver::evaluate(
        &app(
            Create,
            "Monitoring",
            "tenant-c",
            "m",
            user("u", &["tenant-c-admin"]),
        ),
        &settings,
        &c,
    );
    assert_eq!(
        denied.message.as_deref(),
        Some(
            "Monitoring is a tenant module: only tenant administrators (members of oidc:tenant-c-owners or of an ancestor tenant's admin groups) and the platform may create it in tenant-c, and u is neither; ask a tenant administrator to create it from Administration → Modules"
        )
    );
}

/// A tenant namespace is placed by its name: its drifted labels are the Namespace rule's to
/// refuse, and do not change who administers it. A namespace outside the naming rule belongs to
/// a tenant only through its labels, and a broken chain there fails closed.
#[test]
fn broken_ancestor_labels_fail_closed_where_they_place_the_namespace() {
    let mut c = cluster();
    c.namespaces[3]
        .labels
        .remove("tenant.cozystack.io/tenant-root");
    let create = |namespace: &str| {
        app(
            Create,
            "Monitoring",
            namespace,
            "m",
            user("u", &["tenant-c-admin"]),
        )
    };
    assert_allowed(&decide(&create("tenant-c"), &c), &[]);
    c.namespaces.push(cozystack_resolver::Namespace {
        name: "vm-pool".into(),
        labels: labels(&[("tenant.cozystack.io/tenant-c", "")]),
    });
    assert_denied(
        &decide(&create("vm-pool"), &c),
        403,
        "namespace vm-pool: tenant ancestor labels disagree with the tenant naming rule (missing tenant.cozystack.io/tenant-root); the policy cannot place the request in the tenant tree — ask a platform administrator to repair the namespace labels",
    );
}

#[test]
fn edit_admin_only_gates_spec_changes_not_metadata() {
    let c = cluster();
    let mut request = app(
        Update,
        "ComputePlane",
        "tenant-a",
        "cp",
        user("alice", &["tenant-a-admin"]),
    );
    assert_allowed(&decide(&request, &c), &[]);
    request.object.as_mut().unwrap().spec = serde_json::json!({"size": 2});
    assert_denied(
        &decide(&request, &c),
        403,
        "ComputePlane tenant-a/cp: only the platform may change its spec (protection.edit: adminOnly), and alice is not a platform identity; ask a platform administrator to make the change",
    );
    request.user = user("admin", &["cozystack-cluster-admin"]);
    assert_allowed(&decide(&request, &c), &[]);
}
