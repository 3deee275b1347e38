mod common;
use common::*;
use cozystack_resolver::Operation;
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
    c.definitions[0].capability = Some(cozystack_resolver::RawField::from_value(
        &serde_json::json!({"provides": ["monitoring"], "share": "none"}),
    ));
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
    let verdict = cozystack_resolver::evaluate(
        &request,
        &cozystack_resolver::Settings::default(),
        &recording,
    );
    assert_allowed(&verdict, &[]);
    assert!(recording.calls.borrow().is_empty());
}
