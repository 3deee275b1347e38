mod common;
use common::*;
use cozystack_resolver::Operation::*;
use serde_json::json;
#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

/// The root administrator deletes the root's Monitoring.
fn delete_root_monitoring() -> cozystack_resolver::Request {
    app(
        Delete,
        "Monitoring",
        "tenant-root",
        "monitoring",
        user("root", &["tenant-root-admin"]),
    )
}

#[test]
fn deleting_a_provider_that_children_consume_is_denied_with_the_consumers() {
    let verdict = decide(
        &app(
            Delete,
            "Monitoring",
            "tenant-a",
            "monitoring",
            user("alice", &["tenant-a-admin"]),
        ),
        &cluster(),
    );
    assert_denied(
        &verdict,
        403,
        "Monitoring tenant-a/monitoring is protected while it provides monitoring to consumers: tenant-a-b/db (Postgres), tenant-a-b/dev (Kubernetes); delete or move those consumers first, or give their tenants another monitoring provider (protection.deletion: protect)",
    );
}

#[test]
fn only_namespaces_resolving_to_this_provider_reference_it() {
    // tenant-a shadows tenant-root's monitoring for its subtree: root's consumers are tenant-c's.
    let verdict = decide(&delete_root_monitoring(), &cluster());
    assert_denied(
        &verdict,
        403,
        "Monitoring tenant-root/monitoring is protected while it provides monitoring to consumers: tenant-c/db (Postgres); delete or move those consumers first, or give their tenants another monitoring provider (protection.deletion: protect)",
    );
}

#[test]
fn legacy_and_capability_labels_both_reference() {
    let mut c = cluster();
    // tenant-c moves to the new label pointing at tenant-root; the legacy one goes empty.
    let labels = &mut c.namespaces[3].labels;
    labels.insert("namespace.cozystack.io/monitoring".into(), String::new());
    labels.insert(
        "namespace.cozystack.io/capability.monitoring".into(),
        "tenant-root".into(),
    );
    let verdict = decide(&delete_root_monitoring(), &c);
    assert!(
        verdict
            .message
            .unwrap()
            .contains("consumers: tenant-c/db (Postgres)")
    );
}

#[test]
fn unreferenced_providers_may_go() {
    let mut c = cluster();
    c.instances.retain(|i| i.namespace != "tenant-a-b");
    let verdict = decide(
        &app(
            Delete,
            "Monitoring",
            "tenant-a",
            "monitoring",
            user("alice", &["tenant-a-admin"]),
        ),
        &c,
    );
    assert_allowed(&verdict, &[]);
}

#[test]
fn a_second_live_provider_keeps_the_class_served() {
    let mut c = cluster();
    c.instances
        .push(instance("Monitoring", "tenant-a", "backup"));
    let verdict = decide(
        &app(
            Delete,
            "Monitoring",
            "tenant-a",
            "monitoring",
            user("alice", &["tenant-a-admin"]),
        ),
        &c,
    );
    assert_allowed(&verdict, &[]);
}

#[test]
fn teardown_identities_are_never_blocked() {
    for who in [
        "system:serviceaccount:kube-system:namespace-controller",
        "system:serviceaccount:kube-system:generic-garbage-collector",
        "system:serviceaccount:cozy-system:tenant-a-cleanup",
    ] {
        let verdict = decide(
            &app(
                Delete,
                "Monitoring",
                "tenant-a",
                "monitoring",
                user(who, &[]),
            ),
            &cluster(),
        );
        assert_allowed(&verdict, &[]);
    }
}

#[test]
fn platform_writer_deletes_warn_or_deny() {
    let request = app(Delete, "Etcd", "tenant-root", "etcd", user(FLUX, &[]));
    let message = "Etcd tenant-root/etcd is protected while it provides etcd to consumers: tenant-a-b/dev (Kubernetes); delete or move those consumers first, or give their tenants another etcd provider (protection.deletion: protect)";
    assert_allowed(
        &decide(&request, &cluster()),
        &[&format!(
            "{message} (admitted because {FLUX} is a platform writer and platformWriters is warn)"
        )],
    );
    let settings = deny_writers();
    assert_denied(
        &cozystack_resolver::evaluate(&request, &settings, &cluster()),
        403,
        &format!(
            "{message} (refused although {FLUX} is a platform writer, because platformWriters is deny)"
        ),
    );
}

#[test]
fn an_instance_already_terminating_is_not_protected_again() {
    let mut request = app(
        Delete,
        "Monitoring",
        "tenant-a",
        "monitoring",
        user("alice", &["tenant-a-admin"]),
    );
    request.old_object.as_mut().unwrap().terminating = true;
    assert_allowed(&decide(&request, &cluster()), &[]);
}

#[test]
fn share_none_protects_only_the_own_tenant() {
    let mut c = cluster();
    c.definitions[0] = definition(
        "monitoring",
        "Monitoring",
        json!({
        "protection": {"deletion": "protect"},
        "capability": {"provides": ["monitoring"], "share": "none"}}),
    );
    // tenant-a-b resolves to tenant-a, but a non-shared provider serves tenant-a only.
    let verdict = decide(
        &app(
            Delete,
            "Monitoring",
            "tenant-a",
            "monitoring",
            user("u", &[]),
        ),
        &c,
    );
    assert_allowed(&verdict, &[]);
    c.instances.push(instance("Postgres", "tenant-a", "own"));
    let verdict = decide(
        &app(
            Delete,
            "Monitoring",
            "tenant-a",
            "monitoring",
            user("u", &[]),
        ),
        &c,
    );
    assert_eq!(
        verdict.message.as_deref(),
        Some(
            "Monitoring tenant-a/monitoring is protected while it provides monitoring to consumers: tenant-a/own (Postgres); delete or move those consumers first, or give their tenants another monitoring provider (protection.deletion: protect)"
        )
    );
}

#[test]
fn consumer_lists_are_cut_after_five() {
    let mut c = cluster();
    for i in 0..7 {
        c.instances
            .push(instance("Postgres", "tenant-c", &format!("pg{i}")));
    }
    let verdict = decide(&delete_root_monitoring(), &c);
    assert_eq!(
        verdict.message.as_deref(),
        Some(
            "Monitoring tenant-root/monitoring is protected while it provides monitoring to consumers: tenant-c/db (Postgres), tenant-c/pg0 (Postgres), tenant-c/pg1 (Postgres), tenant-c/pg2 (Postgres), tenant-c/pg3 (Postgres) and 3 more; delete or move those consumers first, or give their tenants another monitoring provider (protection.deletion: protect)"
        )
    );
}

/// Listed in the order the text reads: `tenant-c-x/…` before `tenant-c/…`, as `-` sorts
/// before `/`, and terminating consumers marked.
#[test]
fn consumer_lists_read_in_text_order() {
    let mut c = cluster();
    c.namespaces
        .push(tenant_ns("tenant-c-x", &[("monitoring", "tenant-root")]));
    for i in (0..6).rev() {
        c.instances
            .push(instance("Postgres", "tenant-c-x", &format!("pg{i}")));
    }
    let mut kube = instance("Kubernetes", "tenant-c-x", "k");
    kube.terminating = true;
    c.instances.push(kube);
    let verdict = decide(&delete_root_monitoring(), &c);
    assert_eq!(
        verdict.message.as_deref(),
        Some(
            "Monitoring tenant-root/monitoring is protected while it provides monitoring to consumers: tenant-c-x/k (Kubernetes) terminating, tenant-c-x/pg0 (Postgres), tenant-c-x/pg1 (Postgres), tenant-c-x/pg2 (Postgres), tenant-c-x/pg3 (Postgres) and 3 more; delete or move those consumers first, or give their tenants another monitoring provider (protection.deletion: protect)"
        )
    );
}

#[test]
fn consumers_without_a_provider_are_admitted_with_a_warning() {
    let verdict = decide(
        &app(
            Create,
            "Kubernetes",
            "tenant-c",
            "k8s",
            user("carol", &["tenant-c-use"]),
        ),
        &cluster(),
    );
    assert_allowed(
        &verdict,
        &[
            "Kubernetes consumes etcd, but namespace tenant-c has no etcd provider (namespace.cozystack.io/etcd is empty): the app will wait (awaiting-etcd) until this tenant or an ancestor provides etcd",
        ],
    );
    let verdict = decide(
        &app(Create, "Kubernetes", "tenant-a", "k8s", user("a", &[])),
        &cluster(),
    );
    assert_allowed(&verdict, &[]);
}

/// The consumer kinds of a class are read with one list when their release prefixes tell them
/// apart, and kind by kind when a release fits no prefix; the verdict is the same either way.
#[test]
fn a_class_consumer_kinds_share_one_list_when_their_prefixes_allow() {
    let mut c = cluster();
    for d in &mut c.definitions {
        d.release_prefix = match d.kind.as_str() {
            "Kubernetes" => Some("kubernetes-".into()),
            "Postgres" => Some("postgres-".into()),
            _ => None,
        };
    }
    for i in &mut c.instances {
        if let Some(prefix) = match i.kind.as_str() {
            "Kubernetes" => Some("kubernetes-"),
            "Postgres" => Some("postgres-"),
            _ => None,
        } {
            i.release = format!("{prefix}{}", i.app);
        }
    }
    let expected = "Monitoring tenant-a/monitoring is protected while it provides monitoring to consumers: tenant-a-b/db (Postgres), tenant-a-b/dev (Kubernetes); delete or move those consumers first, or give their tenants another monitoring provider (protection.deletion: protect)";
    let request = app(
        Delete,
        "Monitoring",
        "tenant-a",
        "monitoring",
        user("flux", &["cozystack-cluster-admin"]),
    );
    let settings = cozystack_resolver::Settings {
        platform_writers: cozystack_resolver::PlatformWriters::Deny,
        ..Default::default()
    };
    let denied = |recording: &Recording| {
        let verdict = cozystack_resolver::evaluate(&request, &settings, recording);
        assert_eq!(verdict.code, Some(403));
        let message = verdict.message.unwrap_or_default();
        assert!(message.starts_with(expected), "{message}");
    };
    let shared = Recording::new(&c);
    denied(&shared);
    assert_eq!(
        shared.calls.borrow()[..2],
        [
            "list ApplicationDefinitions",
            "list HelmReleases of kinds Kubernetes, Postgres"
        ]
    );
    // A Postgres release named without its prefix: the shared list cannot sort it.
    c.instances
        .push(instance("Postgres", "tenant-c", "legacy-name"));
    let apart = Recording::new(&c);
    denied(&apart);
    assert_eq!(
        apart.calls.borrow()[..4],
        [
            "list ApplicationDefinitions",
            "list HelmReleases of kinds Kubernetes, Postgres",
            "list HelmReleases of kind Kubernetes",
            "list HelmReleases of kind Postgres"
        ]
    );
}
