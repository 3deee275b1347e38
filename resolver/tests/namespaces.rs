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
    for value in ["", "tenant-a-b", "tenant-a", "tenant-root"] {
        let mut new = old.clone();
        new.insert(
            "namespace.cozystack.io/capability.monitoring".into(),
            value.into(),
        );
        let verdict = decide(
            &namespace_update(
                "tenant-a-b",
                old.clone(),
                new,
                user(
                    "system:serviceaccount:cozy-system:cozystack-controller",
                    &[],
                ),
            ),
            &cluster(),
        );
        assert_allowed(&verdict, &[]);
    }
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
    // consumers are deleted with the provider (README, Security model). Not even a lookup.
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
