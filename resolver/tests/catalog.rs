//! The dashboard's catalog: the policy's half and RBAC's, and which one refused.
mod common;
use common::*;
use cozystack_resolver::access::Access;
use cozystack_resolver::catalog::{Entry, Placement, RefusedBy, catalog};
use cozystack_resolver::{RawField, RuleField};
use serde_json::json;
#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

fn entries(name: &str, groups: &[&str], access: Option<&Access>) -> Vec<Entry> {
    let c = cluster();
    let mut definitions = c.definitions.clone();
    for d in &mut definitions {
        d.plural = Some(match d.kind.as_str() {
            "Postgres" => "postgreses".into(),
            "Redis" => "redises".into(),
            kind => format!("{}s", kind.to_lowercase()),
        });
    }
    let namespace = c.namespaces[3].clone();
    assert_eq!(namespace.name, "tenant-c");
    catalog(
        &definitions,
        &user(name, groups),
        &namespace,
        &c.instances,
        &listed(),
        access,
    )
}

fn entry<'e>(entries: &'e [Entry], kind: &str) -> &'e Entry {
    entries.iter().find(|e| e.kind == kind).expect(kind)
}

#[test]
fn can_create_is_both_halves_and_the_reason_names_the_one_that_refused() {
    // What cozy:tenant:admin grants: every kind read, writes on a list without the modules.
    let admin: Access = serde_json::from_value(json!({
        "resourceRules": [
            {"verbs": ["get", "list", "watch"], "apiGroups": ["apps.cozystack.io"], "resources": ["*"]},
            {"verbs": ["create", "update", "patch", "delete"], "apiGroups": ["apps.cozystack.io"], "resources": ["postgreses", "redises"]}
        ]
    }))
    .unwrap();
    let e = entries("carol", &["tenant-c-admin"], Some(&admin));
    // Both halves allow.
    let redis = entry(&e, "Redis");
    assert!(redis.can_create);
    assert_eq!((redis.reason.as_deref(), redis.refused_by), (None, None));
    assert_eq!(redis.placement, Placement::Marketplace);
    // The policy would allow a Monitoring in tenant-c (it has none), RBAC does not.
    let monitoring = entry(&e, "Monitoring");
    assert!(!monitoring.can_create);
    assert_eq!(monitoring.refused_by, Some(RefusedBy::Rbac));
    assert_eq!(
        monitoring.reason.as_deref(),
        Some(
            "RBAC: carol may not create monitorings.apps.cozystack.io in tenant-c (no role grants it); ask an administrator of the tenant for a role that grants it"
        )
    );
    // A reader: RBAC refuses the catalog app; for a module both refuse, RBAC named first.
    let reader: Access = serde_json::from_value(json!({"redises": ["get", "list"]})).unwrap();
    let e = entries("dave", &["tenant-c-use"], Some(&reader));
    assert_eq!(entry(&e, "Redis").refused_by, Some(RefusedBy::Rbac));
    let etcd = entry(&e, "Etcd");
    assert_eq!(etcd.refused_by, Some(RefusedBy::Both));
    assert_eq!(
        etcd.reason.as_deref(),
        Some(
            "RBAC: dave may not create etcds.apps.cozystack.io in tenant-c (no role grants it); ask an administrator of the tenant for a role that grants it; the policy would refuse it too: Etcd is a tenant module: only tenant administrators (members of tenant-c-admin, tenant-c-super-admin or of an ancestor tenant's admin groups) and the platform may create it in tenant-c, and dave is neither; ask a tenant administrator to create it from Administration → Modules"
        )
    );
    // Without RBAC's answer, the policy's half alone.
    let e = entries("dave", &["tenant-c-use"], None);
    assert!(entry(&e, "Redis").can_create);
    assert_eq!(entry(&e, "Etcd").refused_by, Some(RefusedBy::Policy));
}

#[test]
fn a_slotted_kind_is_offered_under_its_free_slot() {
    let mut c = cluster();
    c.definitions[0].set(
        RuleField::Cardinality,
        Some(RawField::from_value(
            &json!({"scope": "tenant", "slots": ["monitoring"]}),
        )),
    );
    let entry = |namespace: usize, who: &str, groups: &[&str]| {
        catalog(
            &c.definitions,
            &user(who, groups),
            &c.namespaces[namespace],
            &c.instances,
            &listed(),
            None,
        )
        .into_iter()
        .find(|e| e.kind == "Monitoring")
        .expect("Monitoring")
    };
    // tenant-c has no Monitoring: the create takes the slot, and admission would admit it.
    let free = entry(3, "carol", &["tenant-c-admin"]);
    assert_eq!(
        (free.slot.as_deref(), free.can_create, free.reason),
        (Some("monitoring"), true, None)
    );
    // tenant-a's slot is held: no name is offered, and the count is the reason.
    let held = entry(1, "alice", &["tenant-a-admin"]);
    assert_eq!((held.slot, held.can_create), (None, false));
    assert_eq!(
        held.reason.as_deref(),
        Some(
            "Monitoring: at most 1 per tenant tenant-a; already present: monitoring; use or edit the existing Monitoring instead of creating another (cardinality tenant/1)"
        )
    );
    // A kind without slots carries none.
    let redis = catalog(
        &c.definitions,
        &user("carol", &["tenant-c-admin"]),
        &c.namespaces[3],
        &c.instances,
        &listed(),
        None,
    )
    .into_iter()
    .find(|e| e.kind == "Redis")
    .expect("Redis");
    assert_eq!(redis.slot, None);
}

#[test]
fn a_catalog_refusal_names_a_create_without_a_name() {
    // ComputePlane is adminOnly and, in this cluster, held by no slot: the catalog's create has
    // no name yet, and the refusal says so instead of printing `tenant-c/`.
    let computeplane = entries("carol", &["tenant-c-admin"], None)
        .into_iter()
        .find(|e| e.kind == "ComputePlane")
        .expect("ComputePlane");
    assert_eq!(
        computeplane.reason.as_deref(),
        Some(
            "a ComputePlane in tenant-c: only the platform may create it (protection.edit: adminOnly), and carol is not a platform identity; ask a platform administrator to make the change"
        )
    );
}
