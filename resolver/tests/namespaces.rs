mod common;
use common::*;
use cozystack_resolver::{Operation, RawField, RuleField};
#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

fn ns_labels(name: &str, providers: &[(&str, &str)]) -> cozystack_resolver::tenant::Labels {
    tenant_ns(name, providers).labels
}

#[test]
fn tenants_cannot_touch_provider_or_ancestor_labels() {
    let old = ns_labels("tenant-a-b", &[("monitoring", "tenant-a")]);
    let mut new = old.clone();
    new.insert(
        "namespace.cozystack.io/monitoring".into(),
        "tenant-root".into(),
    );
    new.remove("tenant.cozystack.io/tenant-a");
    let verdict = decide(
        &namespace_update("tenant-a-b", old, new, user("alice", &["tenant-a-admin"])),
        &cluster(),
    );
    assert_denied(
        &verdict,
        403,
        "Namespace tenant-a-b: labels namespace.cozystack.io/monitoring, tenant.cozystack.io/tenant-a are managed by the Cozystack platform and alice may not set, change or remove them; ask a platform administrator",
    );
}

#[test]
fn unrelated_labels_are_free() {
    let old = ns_labels("tenant-a", &[("monitoring", "tenant-a")]);
    let mut new = old.clone();
    new.insert("team".into(), "blue".into());
    new.insert("namespace.cozystack.io/host".into(), "a.example.org".into());
    assert_allowed(
        &decide(
            &namespace_update("tenant-a", old, new, user("alice", &[])),
            &cluster(),
        ),
        &[],
    );
}

#[test]
fn even_the_platform_may_only_point_providers_up_the_tree() {
    let old = ns_labels("tenant-a-b", &[("monitoring", "tenant-a")]);
    let mut new = old.clone();
    new.insert(
        "namespace.cozystack.io/monitoring".into(),
        "tenant-c".into(),
    );
    assert_denied(
        &decide(
            &namespace_update("tenant-a-b", old.clone(), new, user(FLUX, &[])),
            &cluster(),
        ),
        403,
        "Namespace tenant-a-b: namespace.cozystack.io/monitoring=tenant-c names neither this namespace nor one of its tenant ancestors (tenant-root, tenant-a, tenant-a-b); a provider label may only point up the tenant tree",
    );
}

const CONTROLLER: &str = "system:serviceaccount:cozy-system:cozystack-controller";

/// The capability reconciler setting `capability.monitoring=<value>` on `namespace`.
fn capability_write(
    namespace: &str,
    value: &str,
    cluster: &cozystack_resolver::Snapshot,
) -> cozystack_resolver::Verdict {
    let old = ns_labels(namespace, &[]);
    let mut new = old.clone();
    new.insert(
        "namespace.cozystack.io/capability.monitoring".into(),
        value.into(),
    );
    decide(
        &namespace_update(
            namespace,
            old,
            new,
            user(CONTROLLER, &["system:serviceaccounts:cozy-system"]),
        ),
        cluster,
    )
}

#[test]
fn capability_labels_name_the_nearest_live_provider() {
    let c = cluster();
    assert_allowed(&capability_write("tenant-a-b", "tenant-a", &c), &[]);
    assert_allowed(&capability_write("tenant-a-b", "", &c), &[]);
    assert_denied(
        &capability_write("tenant-a-b", "tenant-root", &c),
        403,
        "Namespace tenant-a-b: namespace.cozystack.io/capability.monitoring=tenant-root does not resolve: it skips tenant-a (a nearer live monitoring provider); the nearest live provider is Monitoring tenant-a/monitoring in tenant-a, so the label must be tenant-a",
    );
    assert_denied(
        &capability_write("tenant-a-b", "tenant-a-b", &c),
        403,
        "Namespace tenant-a-b: namespace.cozystack.io/capability.monitoring=tenant-a-b does not resolve: tenant-a-b has no live monitoring provider; the nearest live provider is Monitoring tenant-a/monitoring in tenant-a, so the label must be tenant-a",
    );
}

#[test]
fn terminating_and_unshared_providers_do_not_serve_descendants() {
    // tenant-a's Monitoring is being deleted: the root's is the nearest live one.
    let mut c = cluster();
    c.instances[1].terminating = true;
    assert_allowed(&capability_write("tenant-a-b", "tenant-root", &c), &[]);
    assert_denied(
        &capability_write("tenant-a-b", "tenant-a", &c),
        403,
        "Namespace tenant-a-b: namespace.cozystack.io/capability.monitoring=tenant-a does not resolve: tenant-a has no live monitoring provider; the nearest live provider is Monitoring tenant-root/monitoring in tenant-root, so the label must be tenant-root",
    );
    // A provider that shares with no one serves its own namespace and nothing below it.
    let mut c = cluster();
    c.definitions[0].set(
        RuleField::Capability,
        Some(RawField::from_value(
            &serde_json::json!({"provides": ["monitoring"], "share": "none"}),
        )),
    );
    assert_allowed(&capability_write("tenant-a", "tenant-a", &c), &[]);
    assert_denied(
        &capability_write("tenant-a-b", "tenant-a", &c),
        403,
        "Namespace tenant-a-b: namespace.cozystack.io/capability.monitoring=tenant-a does not resolve: tenant-a's monitoring provider (Monitoring tenant-a/monitoring) serves only its own namespace (share: none); no live monitoring provider serves tenant-a-b, so the label must be empty until one exists",
    );
}

#[test]
fn namespaces_outside_the_tree_attach_only_attachable_classes() {
    let gateway = |key: &str, value: &str| {
        let mut new = labels(&[]);
        new.insert(key.into(), value.into());
        decide(
            &namespace_update("cozy-system", labels(&[]), new, user(CONTROLLER, &[])),
            &cluster(),
        )
    };
    assert_allowed(&gateway("namespace.cozystack.io/gateway", "tenant-a"), &[]);
    assert_denied(
        &gateway("namespace.cozystack.io/monitoring", "tenant-a"),
        403,
        "Namespace cozy-system: namespace.cozystack.io/monitoring=tenant-a on a namespace outside the tenant tree; only the classes in attachableClasses (gateway) may attach such a namespace to a tenant's provider — add monitoring there if a platform component attaches it",
    );
    assert_denied(
        &gateway("namespace.cozystack.io/gateway", "cozy-dashboard"),
        403,
        "Namespace cozy-system: namespace.cozystack.io/gateway=cozy-dashboard does not name a tenant namespace; a namespace outside the tenant tree may only be attached to a tenant's gateway provider",
    );
    // Tenants may not attach anything, anywhere.
    let mut new = labels(&[]);
    new.insert("namespace.cozystack.io/gateway".into(), "tenant-a".into());
    assert_denied(
        &decide(
            &namespace_update(
                "cozy-system",
                labels(&[]),
                new,
                user("alice", &["tenant-a-admin"]),
            ),
            &cluster(),
        ),
        403,
        "Namespace cozy-system: labels namespace.cozystack.io/gateway are managed by the Cozystack platform and alice may not set, change or remove them; ask a platform administrator",
    );
}

#[test]
fn ancestor_labels_must_follow_the_naming_rule() {
    let old = ns_labels("tenant-a-b", &[]);
    let mut new = old.clone();
    new.insert("tenant.cozystack.io/tenant-c".into(), String::new());
    assert_denied(
        &decide(
            &namespace_update("tenant-a-b", old, new, user(FLUX, &[])),
            &cluster(),
        ),
        403,
        "namespace tenant-a-b: tenant ancestor labels disagree with the tenant naming rule (unexpected tenant.cozystack.io/tenant-c); the platform must write exactly the chain the name implies (tenant-root carries none)",
    );
    let verdict = decide(
        &namespace_update(
            "tenant-root",
            labels(&[]),
            labels(&[("tenant.cozystack.io/tenant-root", "")]),
            user(FLUX, &[]),
        ),
        &cluster(),
    );
    assert!(
        verdict
            .message
            .unwrap()
            .contains("(unexpected tenant.cozystack.io/tenant-root)")
    );
}

#[test]
fn creating_a_tenant_namespace_with_its_chain_is_fine_for_flux() {
    let mut request = namespace_update(
        "tenant-a-z",
        labels(&[]),
        ns_labels("tenant-a-z", &[("monitoring", "tenant-a"), ("etcd", "")]),
        user(FLUX, &[]),
    );
    request.operation = Operation::Create;
    request.old_object = None;
    assert_allowed(&decide(&request, &cluster()), &[]);
    request.user = user("bob", &[]);
    assert!(!decide(&request, &cluster()).allowed);
}

#[test]
fn deleting_a_tenant_namespace_hosting_a_referenced_provider_is_admitted() {
    // The subtree goes with it: child tenants are HelmReleases inside this namespace, so the
    // consumers are deleted with the provider (docs/security.md). Not even a lookup.
    let c = cluster();
    let recording = Recording::new(&c);
    let mut request = namespace_update(
        "tenant-a",
        ns_labels("tenant-a", &[]),
        labels(&[]),
        user("admin", &["system:masters"]),
    );
    request.operation = Operation::Delete;
    request.object = None;
    let verdict = cozystack_resolver::evaluate(&request, &common::listed(), &recording);
    assert_allowed(&verdict, &[]);
    assert!(recording.calls.borrow().is_empty());
}

/// Settings naming a Cozystack release (`None`: any supported one).
fn on(release: Option<&str>) -> cozystack_resolver::Settings {
    match release {
        Some(name) => {
            cozystack_resolver::Settings::from_json(&format!(r#"{{"cozystackRelease": "{name}"}}"#))
                .unwrap()
        }
        None => Default::default(),
    }
}

/// The chain v1.5.0–v1.5.3's Tenant chart writes: itself and its parent's dash-prefixes.
fn short_chain(name: &str, providers: &[(&str, &str)]) -> cozystack_resolver::tenant::Labels {
    let mut labels = ns_labels(name, providers);
    labels.remove("tenant.cozystack.io/tenant-root");
    labels
}

const SHORT_REFUSED: &str = "namespace tenant-a-b: tenant ancestor labels disagree with the tenant naming rule (missing tenant.cozystack.io/tenant-root); the platform must write exactly the chain the name implies (tenant-root carries none)";

#[test]
fn each_release_s_chart_writes_its_own_ancestor_chain() {
    // helm-controller creates tenant-a-b's Namespace as the release's Tenant chart renders it.
    let create = |labels| {
        let mut request =
            namespace_update("tenant-a-b", Default::default(), labels, user(FLUX, &[]));
        request.operation = Operation::Create;
        request.old_object = None;
        request
    };
    let short = short_chain("tenant-a-b", &[("monitoring", "tenant-a")]);
    let full = ns_labels("tenant-a-b", &[("monitoring", "tenant-a")]);
    for release in [None, Some("v1.5.0"), Some("v1.5.3")] {
        let settings = on(release);
        for labels in [&short, &full] {
            let verdict =
                cozystack_resolver::evaluate(&create(labels.clone()), &settings, &cluster());
            assert_allowed(&verdict, &[]);
        }
    }
    for release in ["v1.5.4", "v1.6.0", "v1.6.2", "main"] {
        let settings = on(Some(release));
        let verdict = cozystack_resolver::evaluate(&create(short.clone()), &settings, &cluster());
        assert_denied(&verdict, 403, SHORT_REFUSED);
        let verdict = cozystack_resolver::evaluate(&create(full.clone()), &settings, &cluster());
        assert_allowed(&verdict, &[]);
    }
}

#[test]
fn a_write_that_leaves_an_older_chain_as_it_was_is_not_refused_for_it() {
    // Upgraded to v1.5.4 (no backfill) or v1.6 (migration 49, best-effort): a namespace can
    // still hold the shorter chain when the capability reconciler relabels a provider.
    let old = short_chain("tenant-a-b", &[("monitoring", "tenant-a")]);
    let mut new = old.clone();
    new.insert(
        "namespace.cozystack.io/capability.monitoring".into(),
        "tenant-a".into(),
    );
    let controller = "system:serviceaccount:cozy-system:cozystack-controller";
    for release in ["v1.5.4", "main"] {
        let verdict = cozystack_resolver::evaluate(
            &namespace_update(
                "tenant-a-b",
                old.clone(),
                new.clone(),
                user(controller, &[]),
            ),
            &on(Some(release)),
            &cluster(),
        );
        assert_allowed(&verdict, &[]);
    }
    // Helm's upgrade to the full chain adds tenant-root: admitted; taking it away again is not.
    let full = ns_labels("tenant-a-b", &[("monitoring", "tenant-a")]);
    let upgrade = namespace_update("tenant-a-b", old.clone(), full.clone(), user(FLUX, &[]));
    assert_allowed(
        &cozystack_resolver::evaluate(&upgrade, &on(Some("v1.6.0")), &cluster()),
        &[],
    );
    let drop = namespace_update("tenant-a-b", full, old, user(FLUX, &[]));
    assert_denied(
        &cozystack_resolver::evaluate(&drop, &on(Some("main")), &cluster()),
        403,
        SHORT_REFUSED,
    );
}

#[test]
fn on_every_release_a_tenant_writes_no_ancestor_label() {
    let old = short_chain("tenant-a-b", &[("monitoring", "tenant-a")]);
    let mut forged = old.clone();
    forged.insert("tenant.cozystack.io/tenant-root".into(), String::new());
    let mut dropped = old.clone();
    dropped.remove("tenant.cozystack.io/tenant-a");
    for release in [None, Some("v1.5.3"), Some("main")] {
        for (new, key) in [
            (&forged, "tenant.cozystack.io/tenant-root"),
            (&dropped, "tenant.cozystack.io/tenant-a"),
        ] {
            let verdict = cozystack_resolver::evaluate(
                &namespace_update(
                    "tenant-a-b",
                    old.clone(),
                    new.clone(),
                    user("alice", &["tenant-a-admin"]),
                ),
                &on(release),
                &cluster(),
            );
            assert_denied(
                &verdict,
                403,
                &format!(
                    "Namespace tenant-a-b: labels {key} are managed by the Cozystack platform and alice may not set, change or remove them; ask a platform administrator"
                ),
            );
        }
    }
}

#[test]
fn a_switch_of_a_kind_the_release_does_not_serve_renders_nothing() {
    // Under the built-in rule set every stock kind is served; v1.6's Tenant chart has no
    // computeplane switch, so a Tenant's computeplane value renders nothing there.
    let settings = |release: &str| {
        cozystack_resolver::Settings::from_json(&format!(
            r#"{{"definitionSource": "builtin", "cozystackRelease": "{release}"}}"#
        ))
        .unwrap()
    };
    let mut request = app(
        Operation::Update,
        "Tenant",
        "tenant-root",
        "a",
        user(FLUX, &[]),
    );
    request.old_object.as_mut().unwrap().spec = serde_json::json!({});
    request.object.as_mut().unwrap().spec = serde_json::json!({"computeplane": true});
    let snapshot = cluster();
    let recording = Recording::new(&snapshot);
    let verdict = cozystack_resolver::evaluate(&request, &settings("v1.6.2"), &recording);
    assert_allowed(&verdict, &[]);
    assert!(
        recording.calls.borrow().is_empty(),
        "{:?}",
        recording.calls.borrow()
    );
    let recording = Recording::new(&snapshot);
    cozystack_resolver::evaluate(&request, &settings("main"), &recording);
    // On main the module it creates is counted.
    assert!(
        recording
            .calls
            .borrow()
            .iter()
            .any(|c| c.contains("ComputePlane")),
        "{:?}",
        recording.calls.borrow()
    );
}
