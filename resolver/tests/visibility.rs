mod common;
use common::Expect::{Allowed, Denied};
use common::*;
use cozystack_resolver::{Operation::*, Settings};
#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

/// Who may write a kind: `catalog` anyone, `module` tenant administrators of the namespace or an
/// ancestor and the platform, `hidden` the platform alone; on every operation.
const VISIBILITY: &[Case] = &[
    Case {
        name: "a module needs an administrator of its tenant or an ancestor",
        write: "CREATE Monitoring tenant-c/monitoring by dave tenant-c-use,tenant-a-admin",
        expect: Denied(
            "Monitoring is a tenant module: only tenant administrators (members of tenant-c-admin, tenant-c-super-admin or of an ancestor tenant's admin groups) and the platform may create it in tenant-c, and dave is neither; ask a tenant administrator to create it from Administration → Modules",
        ),
    },
    Case {
        name: "the tenant's admin",
        write: "CREATE Monitoring tenant-c/monitoring by x tenant-c-admin",
        expect: Allowed(&[]),
    },
    Case {
        name: "the tenant's super-admin",
        write: "CREATE Monitoring tenant-c/monitoring by x tenant-c-super-admin",
        expect: Allowed(&[]),
    },
    Case {
        name: "an ancestor's admin",
        write: "CREATE Monitoring tenant-c/monitoring by x tenant-root-admin",
        expect: Allowed(&[]),
    },
    Case {
        name: "cozystack-api writes for the platform",
        write: "CREATE Monitoring tenant-c/monitoring by system:serviceaccount:cozy-system:cozystack-api",
        expect: Allowed(&[]),
    },
    Case {
        name: "a module's UPDATE meets the same rule",
        write: "UPDATE Etcd tenant-root/etcd by eve tenant-root-use",
        expect: Denied(
            "Etcd is a tenant module: only tenant administrators (members of tenant-root-admin, tenant-root-super-admin or of an ancestor tenant's admin groups) and the platform may change it in tenant-root, and eve is neither; ask a tenant administrator to change it from Administration → Modules",
        ),
    },
    Case {
        name: "dashboard.module: true counts as module (cluster()'s Monitoring says only that)",
        write: "CREATE Monitoring tenant-c/m by u",
        expect: Denied(
            "Monitoring is a tenant module: only tenant administrators (members of tenant-c-admin, tenant-c-super-admin or of an ancestor tenant's admin groups) and the platform may create it in tenant-c, and u is neither; ask a tenant administrator to create it from Administration → Modules",
        ),
    },
    Case {
        name: "hidden: not even a tenant's super-admin",
        write: "CREATE Gateway tenant-a/gateway by alice tenant-a-super-admin",
        expect: Denied(
            "Gateway is a hidden kind: only the Cozystack platform may create it, and alice is not a platform identity; it is managed by the platform, so ask a platform administrator",
        ),
    },
    Case {
        name: "hidden: Flux",
        write: "CREATE Gateway tenant-a/gateway by system:serviceaccount:cozy-fluxcd:kustomize-controller",
        expect: Allowed(&[]),
    },
    Case {
        name: "hidden: a cluster admin",
        write: "CREATE Gateway tenant-a/gateway by admin cozystack-cluster-admin",
        expect: Allowed(&[]),
    },
    Case {
        name: "hidden: system:masters",
        write: "CREATE Gateway tenant-a/gateway by kubeadm system:masters",
        expect: Allowed(&[]),
    },
    Case {
        name: "catalog kinds are open to anyone RBAC lets in",
        write: "CREATE Redis tenant-a/cache by bob tenant-a-use",
        expect: Allowed(&[]),
    },
];

#[test]
fn visibility() {
    run_table(VISIBILITY, &cluster(), &common::listed());
}

#[test]
fn oidc_group_prefix_and_custom_suffixes() {
    let settings = Settings {
        tenant_group_prefix: "oidc:".into(),
        tenant_admin_group_suffixes: vec!["-owners".into()].into(),
        ..common::listed()
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
