mod common;
use common::*;
use cozystack_resolver::Operation::*;
use cozystack_resolver::{Instance, Snapshot};
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
    let verdict = decide(&delete_a_monitoring(), &cluster());
    assert_denied(&verdict, 403, A_MONITORING_HELD);
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
    let verdict = decide(&delete_a_monitoring(), &c);
    assert_allowed(&verdict, &[]);
}

#[test]
fn a_second_provider_that_renders_keeps_the_class_served() {
    // Another kind providing the class in the namespace renders: the consumers stay served.
    let mut c = cluster();
    c.definitions.push(definition(
        "metrics",
        "Metrics",
        json!({"capability": {"provides": ["monitoring"], "share": "children"}}),
    ));
    c.instances.push(instance("Metrics", "tenant-a", "metrics"));
    assert_allowed(&decide(&delete_a_monitoring(), &c), &[]);
}

#[test]
fn a_leftover_its_chart_never_rendered_keeps_nothing_served() {
    // A Monitoring named `backup` beside the slot holder: the chart's check-release-name.yaml
    // fails on any release name but `monitoring`, so it never ran and serves no one.
    let mut c = cluster();
    c.instances
        .push(instance("Monitoring", "tenant-a", "backup"));
    assert_denied(&decide(&delete_a_monitoring(), &c), 403, A_MONITORING_HELD);
    // Removing the leftover itself strands no one: it is how it is moved onto its slot.
    let leftover = app(
        Delete,
        "Monitoring",
        "tenant-a",
        "backup",
        user("alice", &["tenant-a-admin"]),
    );
    assert_allowed(&decide(&leftover, &c), &[]);
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
    let carol = || user("carol", &["tenant-c-use"]);
    // An empty label: the chart renders the awaiting beacon.
    let mut empty = cluster();
    empty.namespaces[3]
        .labels
        .insert("namespace.cozystack.io/etcd".into(), String::new());
    let verdict = decide(
        &app(Create, "Kubernetes", "tenant-c", "k8s", carol()),
        &empty,
    );
    assert_allowed(
        &verdict,
        &[
            "Kubernetes consumes etcd, but namespace tenant-c has no etcd provider (namespace.cozystack.io/etcd is empty): the app will wait (awaiting-etcd) until this tenant or an ancestor provides etcd",
        ],
    );
    // A label naming tenant-root, whose values always say so, while the root runs no Etcd.
    let mut rootless = cluster();
    rootless.instances.retain(|i| i.kind != "Etcd");
    *root_values(&mut rootless) = json!({"monitoring": true});
    let verdict = decide(
        &app(Create, "Kubernetes", "tenant-c", "k8s", carol()),
        &rootless,
    );
    assert_allowed(
        &verdict,
        &[
            "Kubernetes consumes etcd, and namespace tenant-c resolves it to tenant-root (namespace.cozystack.io/etcd), but tenant-root runs no live etcd provider that serves tenant-c: the app gets no etcd until tenant-root provides etcd or this tenant gets its own",
        ],
    );
    // tenant-root itself resolves through its values.
    let verdict = decide(
        &app(Create, "Kubernetes", "tenant-root", "k8s", carol()),
        &rootless,
    );
    assert_allowed(
        &verdict,
        &[
            "Kubernetes consumes etcd, and namespace tenant-root resolves it to tenant-root (_namespace.etcd of its cozystack-values), but tenant-root runs no live etcd provider that serves tenant-root: the app gets no etcd until tenant-root provides etcd or this tenant gets its own",
        ],
    );
    // With the root's Etcd there, and tenant-a's own Monitoring, nothing to say.
    for namespace in ["tenant-c", "tenant-a", "tenant-a-b", "tenant-root"] {
        let verdict = decide(
            &app(Create, "Kubernetes", namespace, "k8s", user("a", &[])),
            &cluster(),
        );
        assert_allowed(&verdict, &[]);
    }
}

/// A module provider is one release the Tenant chart names after its switch: one GET of it tells
/// whether it is live, without listing instances. A label does not: it still names a provider
/// helm-controller is uninstalling, and a consumer created then is told it waits.
#[test]
fn a_module_provider_is_read_by_one_get_and_a_terminating_one_serves_nobody() {
    let snapshot = cluster();
    let recording = Recording::new(&snapshot);
    let request = app(Create, "Kubernetes", "tenant-a-b", "k8s", user("b", &[]));
    let verdict = cozystack_resolver::evaluate(&request, &listed(), &recording);
    assert_allowed(&verdict, &[]);
    assert_eq!(
        *recording.calls.borrow(),
        [
            "list ApplicationDefinitions",
            "get Namespace tenant-a-b",
            "get HelmRelease tenant-root/etcd",
            "get HelmRelease tenant-a/monitoring",
        ],
        "etcd resolves to the root's Etcd, monitoring to tenant-a's Monitoring: a GET each"
    );
    // The root's Etcd terminating: its labels and the root's switch still name it.
    let mut snapshot = cluster();
    for i in &mut snapshot.instances {
        if i.kind == "Etcd" && i.namespace == "tenant-root" {
            i.terminating = true;
        }
    }
    let recording = Recording::new(&snapshot);
    let verdict = cozystack_resolver::evaluate(&request, &listed(), &recording);
    assert_allowed(
        &verdict,
        &[
            "Kubernetes consumes etcd, and namespace tenant-a-b resolves it to tenant-root (namespace.cozystack.io/etcd), but tenant-root runs no live etcd provider that serves tenant-a-b: the app gets no etcd until tenant-root provides etcd or this tenant gets its own",
        ],
    );
    assert!(
        recording
            .calls
            .borrow()
            .contains(&"list HelmReleases of kind Etcd".to_owned()),
        "a terminating module release leaves the listed instances to decide"
    );
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
    let expected = A_MONITORING_HELD;
    let request = app(
        Delete,
        "Monitoring",
        "tenant-a",
        "monitoring",
        user("flux", &["cozystack-cluster-admin"]),
    );
    let settings = cozystack_resolver::Settings {
        platform_writers: cozystack_resolver::PlatformWriters::Deny,
        ..listed()
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

/// tenant-root carries no provider label; its own apps resolve every class to it through its
/// cozystack-values, so they hold its providers.
#[test]
fn tenant_root_consumers_hold_its_providers_through_its_values() {
    let mut snapshot = cluster();
    snapshot.instances.retain(|i| i.kind != "Kubernetes");
    // An Etcd created through the API: the root's switch is off, so the chart holds none.
    root_values(&mut snapshot)["etcd"] = json!(false);
    let delete_etcd = || {
        app(
            Delete,
            "Etcd",
            "tenant-root",
            "etcd",
            user("root", &["tenant-root-admin"]),
        )
    };
    // tenant-a-b's cluster is gone; tenant-c's Postgres consumes monitoring only.
    assert_allowed(&decide(&delete_etcd(), &snapshot), &[]);
    snapshot
        .instances
        .push(instance("Kubernetes", "tenant-root", "ops"));
    assert_denied(
        &decide(&delete_etcd(), &snapshot),
        403,
        "Etcd tenant-root/etcd is protected while it provides etcd to consumers: tenant-root/ops (Kubernetes); delete or move those consumers first, or give their tenants another etcd provider (protection.deletion: protect)",
    );
}

/// A descendant whose ancestor labels drifted is still below its ancestors by its name.
#[test]
fn a_drifted_chain_does_not_take_a_namespace_out_of_the_subtree() {
    let mut snapshot = cluster();
    snapshot.namespaces[2]
        .labels
        .remove("tenant.cozystack.io/tenant-a");
    assert_eq!(snapshot.namespaces[2].name, "tenant-a-b");
    let verdict = decide(&delete_a_monitoring(), &snapshot);
    assert_denied(&verdict, 403, A_MONITORING_HELD);
}

/// With the rules in the settings, a release prefix that is not the definition's would name the
/// instance being removed wrongly, and the real one would pass for another provider.
#[test]
fn a_wrong_release_prefix_fails_closed() {
    let snapshot = cluster();
    let mut settings: cozystack_resolver::Settings = serde_json::from_value(json!({
        "definitionSource": "settings",
        "definitions": {
            "Monitoring": {
                "protection": {"deletion": "protect"},
                "capability": {"provides": ["monitoring"], "share": "children"}},
            "Postgres": {"capability": {"consumes": ["monitoring"]}},
            "Kubernetes": {"capability": {"consumes": ["monitoring"]}}},
        "releasePrefixes": {"Monitoring": "mon-"}
    }))
    .unwrap();
    let delete = app(
        Delete,
        "Monitoring",
        "tenant-a",
        "monitoring",
        user("alice", &["tenant-a-admin"]),
    );
    let verdict = cozystack_resolver::evaluate(&delete, &settings, &snapshot);
    assert_denied(
        &verdict,
        403,
        "Monitoring tenant-a/monitoring: its release tenant-a/mon-monitoring is not among the listed Monitoring releases, so the policy cannot tell it from the other providers in tenant-a; check releasePrefixes.Monitoring (\"mon-\") in the policy settings: it must equal the ApplicationDefinition's spec.release.prefix",
    );
    settings
        .release_prefixes
        .insert("Monitoring".into(), String::new());
    let verdict = cozystack_resolver::evaluate(&delete, &settings, &snapshot);
    assert_denied(&verdict, 403, A_MONITORING_HELD);
}

/// A module kind among the consumers (its prefix is empty) shares their list too: it takes the
/// releases no other prefix fits, and its own list, read only when the shared one holds
/// anything, tells its releases from the others'.
#[test]
fn a_module_kind_shares_the_consumer_list() {
    let mut c = cluster();
    c.definitions.retain(|d| d.kind != "Postgres");
    c.instances.retain(|i| i.kind != "Postgres");
    c.definitions.push(definition(
        "computeplane-consumer",
        "ComputePlane",
        json!({"capability": {"consumes": ["monitoring"]}}),
    ));
    c.definitions.retain(|d| d.name != "computeplane");
    for d in &mut c.definitions {
        d.release_prefix = match d.kind.as_str() {
            "Kubernetes" => Some("kubernetes-".into()),
            "ComputePlane" => Some(String::new()),
            _ => None,
        };
    }
    for i in c.instances.iter_mut().filter(|i| i.kind == "Kubernetes") {
        i.release = format!("kubernetes-{}", i.app);
    }
    let settings = deny_writers();
    let request = app(
        Delete,
        "Monitoring",
        "tenant-a",
        "monitoring",
        user("admin", &["cozystack-cluster-admin"]),
    );
    let decide = |c: &Snapshot| {
        let recording = Recording::new(c);
        let verdict = cozystack_resolver::evaluate(&request, &settings, &recording);
        let calls = recording.calls.borrow().clone();
        (verdict, calls)
    };
    // No consumer anywhere: one list finds none of either kind.
    let mut none = c.clone();
    none.instances.retain(|i| i.kind != "Kubernetes");
    let (verdict, calls) = decide(&none);
    assert_allowed(&verdict, &[]);
    assert_eq!(
        calls[..2],
        [
            "list ApplicationDefinitions",
            "list HelmReleases of kinds Kubernetes, ComputePlane"
        ]
    );
    assert!(!calls.iter().any(|c| c.ends_with("of kind ComputePlane")));
    // A ComputePlane whose name starts like a Kubernetes release is still a ComputePlane.
    c.instances.push(Instance {
        release: "kubernetes-lab".into(),
        ..instance("ComputePlane", "tenant-a-b", "kubernetes-lab")
    });
    let (verdict, calls) = decide(&c);
    assert_denied(
        &verdict,
        403,
        "Monitoring tenant-a/monitoring is protected while it provides monitoring to consumers: tenant-a-b/dev (Kubernetes), tenant-a-b/kubernetes-lab (ComputePlane); delete or move those consumers first, or give their tenants another monitoring provider (protection.deletion: protect) (refused although admin is a platform writer, because platformWriters is deny)",
    );
    assert_eq!(
        calls[..3],
        [
            "list ApplicationDefinitions",
            "list HelmReleases of kinds Kubernetes, ComputePlane",
            "list HelmReleases of kind ComputePlane"
        ]
    );
    // A Kubernetes release without its prefix is neither kind's by name: kind by kind.
    c.instances
        .push(instance("Kubernetes", "tenant-c", "legacy"));
    let (verdict, calls) = decide(&c);
    assert_eq!(verdict.code, Some(403));
    assert!(
        calls.contains(&"list HelmReleases of kind Kubernetes".to_owned()),
        "{calls:?}"
    );
}
