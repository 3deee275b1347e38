mod common;
use common::Expect::{Allowed, Denied};
use common::*;
use cozystack_resolver::Operation::*;
use cozystack_resolver::{RawField, RuleField, Settings};
use serde_json::json;
#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

/// The count on the Cozystack-shaped cluster: Monitoring is `tenant/1`, and tenant-root,
/// tenant-a and tenant-a-b hold one each.
const COUNT: &[Case] = &[
    Case {
        name: "a second tenant singleton is refused, the one present named",
        write: "CREATE Monitoring tenant-a/extra by alice tenant-a-admin",
        expect: Denied(
            "Monitoring: at most 1 per tenant tenant-a; already present: monitoring; use or edit the existing Monitoring instead of creating another (cardinality tenant/1)",
        ),
    },
    Case {
        name: "the first in a tenant",
        write: "CREATE Monitoring tenant-c/monitoring by carol tenant-c-admin",
        expect: Allowed(&[]),
    },
    Case {
        name: "tenant scope counts neither the parent's nor the grandparent's",
        write: "CREATE Monitoring tenant-a-b/monitoring by alice tenant-a-admin",
        expect: Allowed(&[]),
    },
    Case {
        name: "the object itself never counts (a background audit replays it as a CREATE)",
        write: "CREATE Monitoring tenant-a/monitoring by alice tenant-a-admin",
        expect: Allowed(&[]),
    },
];

#[test]
fn count() {
    run_table(COUNT, &cluster(), &common::listed());
}

#[test]
fn platform_writers_get_a_warning_by_default_and_a_denial_in_deny_mode() {
    let request = app(Create, "Monitoring", "tenant-a", "extra", user(FLUX, &[]));
    let message = "Monitoring: at most 1 per tenant tenant-a; already present: monitoring; use or edit the existing Monitoring instead of creating another (cardinality tenant/1)";
    let warn = decide(&request, &cluster());
    assert_allowed(
        &warn,
        &[&format!(
            "{message} (admitted because {FLUX} is a platform writer and platformWriters is warn)"
        )],
    );
    let settings = deny_writers();
    let deny = cozystack_resolver::evaluate(&request, &settings, &cluster());
    assert_denied(
        &deny,
        403,
        &format!(
            "{message} (refused although {FLUX} is a platform writer, because platformWriters is deny)"
        ),
    );
}

#[test]
fn cluster_scope_counts_everywhere_and_names_namespaces() {
    let mut c = cluster();
    c.definitions.push(definition(
        "bootbox",
        "BootBox",
        json!({"cardinality": {"scope": "cluster", "max": 2}}),
    ));
    c.instances.push(instance("BootBox", "tenant-a", "one"));
    c.instances.push(instance("BootBox", "tenant-c", "two"));
    let verdict = decide(
        &app(Create, "BootBox", "tenant-root", "three", user("root", &[])),
        &c,
    );
    assert_denied(
        &verdict,
        403,
        "BootBox: at most 2 per cluster; already present: tenant-a/one, tenant-c/two; use or edit the existing BootBox instead of creating another (cardinality cluster/2)",
    );
    let verdict = decide(
        &app(Create, "BootBox", "tenant-root", "three", user("root", &[])),
        &{
            let mut c = c.clone();
            c.instances.pop();
            c
        },
    );
    assert_allowed(&verdict, &[]);
}

#[test]
fn namespace_scope_counts_only_the_namespace() {
    let mut c = cluster();
    c.definitions.push(definition(
        "info",
        "Info",
        json!({"cardinality": {"scope": "namespace", "max": 1}}),
    ));
    c.instances.push(instance("Info", "tenant-a", "info"));
    assert_allowed(
        &decide(&app(Create, "Info", "tenant-c", "info", user("u", &[])), &c),
        &[],
    );
    assert_denied(
        &decide(
            &app(Create, "Info", "tenant-a", "other", user("u", &[])),
            &c,
        ),
        403,
        "Info: at most 1 per namespace tenant-a; already present: info; use or edit the existing Info instead of creating another (cardinality namespace/1)",
    );
}

#[test]
fn tenant_scope_includes_namespaces_the_tenant_owns_through_labels() {
    let mut c = cluster();
    c.namespaces.push(cozystack_resolver::Namespace {
        name: "vm-disks".into(),
        labels: labels(&[
            ("tenant.cozystack.io/tenant-root", ""),
            ("tenant.cozystack.io/tenant-c", ""),
        ]),
    });
    c.instances.push(instance("Monitoring", "vm-disks", "side"));
    let verdict = decide(
        &app(
            Create,
            "Monitoring",
            "tenant-c",
            "monitoring",
            user("c", &["tenant-c-admin"]),
        ),
        &c,
    );
    assert_denied(
        &verdict,
        403,
        "Monitoring: at most 1 per tenant tenant-c; already present: vm-disks/side; use or edit the existing Monitoring instead of creating another (cardinality tenant/1)",
    );
}

#[test]
fn a_namespace_outside_every_tenant_is_counted_on_its_own() {
    let mut c = cluster();
    c.instances.push(instance("Monitoring", "cozy-system", "m"));
    let verdict = decide(
        &app(
            Create,
            "Monitoring",
            "cozy-system",
            "n",
            user("root", &["system:masters"]),
        ),
        &c,
    );
    assert_allowed(
        &verdict,
        &[
            "Monitoring: at most 1 per namespace cozy-system (it belongs to no tenant); already present: m; use or edit the existing Monitoring instead of creating another (cardinality tenant/1) (admitted because root is a platform writer and platformWriters is warn)",
        ],
    );
}

#[test]
fn terminating_instances_still_count_and_are_marked() {
    let mut c = cluster();
    c.instances[1].terminating = true;
    let verdict = decide(
        &app(
            Create,
            "Monitoring",
            "tenant-a",
            "new",
            user("a", &["tenant-a-admin"]),
        ),
        &c,
    );
    assert_denied(
        &verdict,
        403,
        "Monitoring: at most 1 per tenant tenant-a; already present: monitoring (terminating); use or edit the existing Monitoring instead of creating another (cardinality tenant/1)",
    );
}

#[test]
fn long_lists_are_cut_with_and_n_more() {
    let mut c = cluster();
    c.definitions.push(definition(
        "redis2",
        "Cache",
        json!({"cardinality": {"scope": "namespace", "max": 3}}),
    ));
    for i in 0..8 {
        c.instances
            .push(instance("Cache", "tenant-a", &format!("c{i}")));
    }
    assert_denied(
        &decide(&app(Create, "Cache", "tenant-a", "new", user("u", &[])), &c),
        403,
        "Cache: at most 3 per namespace tenant-a; already present: c0, c1, c2, c3, c4 and 3 more; use or edit the existing Cache instead of creating another (cardinality namespace/3)",
    );
}

#[test]
fn updates_and_deletes_are_not_counted() {
    let mut c = cluster();
    c.instances
        .push(instance("Monitoring", "tenant-a", "second"));
    let who = user("a", &["tenant-a-admin"]);
    assert_allowed(
        &decide(
            &app(Update, "Monitoring", "tenant-a", "second", who.clone()),
            &c,
        ),
        &[],
    );
    assert_allowed(
        &decide(&app(Delete, "Monitoring", "tenant-a", "second", who), &c),
        &[],
    );
}

#[test]
fn max_zero_is_unlimited() {
    let mut c = cluster();
    c.definitions[0] = definition(
        "monitoring",
        "Monitoring",
        json!({"cardinality": {"scope": "tenant", "max": 0}}),
    );
    assert_allowed(
        &decide(
            &app(Create, "Monitoring", "tenant-a", "x", user("u", &[])),
            &c,
        ),
        &[],
    );
}

#[test]
fn two_concurrent_creates_race_and_the_next_one_sees_the_first() {
    // Admission cannot serialise requests: both CREATEs are judged on the same state and both
    // pass (docs/security.md: the race, its window, and what closes it).
    let c = cluster();
    let first = app(
        Create,
        "Monitoring",
        "tenant-c",
        "one",
        user("c", &["tenant-c-admin"]),
    );
    let second = app(
        Create,
        "Monitoring",
        "tenant-c",
        "two",
        user("c", &["tenant-c-admin"]),
    );
    assert_allowed(&decide(&first, &c), &[]);
    assert_allowed(&decide(&second, &c), &[]);
    // Once the first is visible to the policy, a third is refused.
    let mut after = c.clone();
    after
        .instances
        .push(instance("Monitoring", "tenant-c", "one"));
    let third = app(
        Create,
        "Monitoring",
        "tenant-c",
        "three",
        user("c", &["tenant-c-admin"]),
    );
    assert_denied(
        &decide(&third, &after),
        403,
        "Monitoring: at most 1 per tenant tenant-c; already present: one; use or edit the existing Monitoring instead of creating another (cardinality tenant/1)",
    );
}

/// The test cluster with Monitoring held to one per tenant by the name `monitoring`.
fn slotted() -> cozystack_resolver::Snapshot {
    let mut c = cluster();
    c.definitions[0] = definition(
        "monitoring",
        "Monitoring",
        json!({
        "dashboard": {"visibility": "module"},
        "cardinality": {"scope": "tenant", "slots": ["monitoring"]},
        "protection": {"deletion": "protect"},
        "capability": {"provides": ["monitoring"], "share": "children"}}),
    );
    c
}

#[test]
fn a_slotted_kind_is_created_under_its_slot_only() {
    let c = slotted();
    let carol = || user("carol", &["tenant-c-admin"]);
    // max defaults to the number of slots: one.
    assert_allowed(
        &decide(
            &app(Create, "Monitoring", "tenant-c", "monitoring", carol()),
            &c,
        ),
        &[],
    );
    assert_denied(
        &decide(
            &app(Create, "Monitoring", "tenant-c", "metrics", carol()),
            &c,
        ),
        403,
        "Monitoring tenant-c/metrics: Monitoring is held to at most 1 per tenant by its name: create it as tenant-c/monitoring (cardinality.slots)",
    );
    // Where the slot is held, the count speaks first.
    assert_denied(
        &decide(
            &app(
                Create,
                "Monitoring",
                "tenant-a",
                "metrics",
                user("alice", &["tenant-a-admin"]),
            ),
            &c,
        ),
        403,
        "Monitoring: at most 1 per tenant tenant-a; already present: monitoring; use or edit the existing Monitoring instead of creating another (cardinality tenant/1)",
    );
    // Updates and deletes of an instance off its slot stay admitted.
    let mut off = c.clone();
    off.instances
        .push(instance("Monitoring", "tenant-c", "metrics"));
    for op in [Update, Delete] {
        assert_allowed(
            &decide(&app(op, "Monitoring", "tenant-c", "metrics", carol()), &off),
            &[],
        );
    }
}

#[test]
fn the_slot_check_reads_nothing_the_count_has_not() {
    let c = slotted();
    let carol = || user("carol", &["tenant-c-admin"]);
    let calls = |name: &str| {
        let recording = Recording::new(&c);
        cozystack_resolver::evaluate(
            &app(Create, "Monitoring", "tenant-c", name, carol()),
            &common::listed(),
            &recording,
        );
        recording.calls.borrow().clone()
    };
    assert_eq!(calls("metrics"), calls("monitoring"));
}

#[test]
fn an_audit_keeps_the_slot_holder_and_reports_the_surplus() {
    // tenant-a runs its Monitoring on the slot and a second one off it. The audit scanner
    // replays both: the holder is the one kept, read without listing the kind; the other is
    // the surplus, counted against it. Without slots each is counted against the other.
    let mut c = slotted();
    c.instances
        .push(instance("Monitoring", "tenant-a", "metrics"));
    let replay = |app: &str| {
        release(
            Create,
            "tenant-a",
            app,
            release_labels("Monitoring", app),
            user("", &[]),
        )
    };
    let judged = |app: &str, c: &cozystack_resolver::Snapshot| {
        let recording = Recording::new(c);
        let verdict = cozystack_resolver::evaluate(&replay(app), &common::listed(), &recording);
        let listed = recording
            .calls
            .borrow()
            .iter()
            .any(|call| call.starts_with("list HelmReleases"));
        (verdict, listed)
    };
    let (keeper, listed) = judged("monitoring", &c);
    assert_allowed(&keeper, &[]);
    assert!(!listed, "the slot holder's replay lists no instances");
    let (surplus, listed) = judged("metrics", &c);
    assert_denied(
        &surplus,
        403,
        "Monitoring: at most 1 per tenant tenant-a; already present: monitoring; keep 1 and delete the others (cardinality tenant/1)",
    );
    assert!(listed);
    // The same pair without slots: no instance is the one kept, so both are reported.
    let mut unslotted = c.clone();
    unslotted.definitions[0] = cluster().definitions[0].clone();
    let (first, _) = judged("monitoring", &unslotted);
    assert_denied(
        &first,
        403,
        "Monitoring: at most 1 per tenant tenant-a; already present: metrics; keep 1 and delete the others (cardinality tenant/1)",
    );
}

#[test]
fn slots_in_each_scope() {
    // A cluster scope holds its slots in slotNamespace.
    let mut c = cluster();
    c.definitions.push(definition(
        "bootbox",
        "BootBox",
        json!({"cardinality": {"scope": "cluster", "slots": ["bootbox"], "slotNamespace": "tenant-root"}}),
    ));
    // A tenant administrator: a platform writer would only be warned.
    let admin = user("carol", &["tenant-c-admin"]);
    assert_denied(
        &decide(
            &app(Create, "BootBox", "tenant-c", "bootbox", admin.clone()),
            &c,
        ),
        403,
        "BootBox tenant-c/bootbox: BootBox is held to at most 1 per cluster by its name: create it as tenant-root/bootbox (cardinality.slots)",
    );
    assert_allowed(
        &decide(
            &app(
                Create,
                "BootBox",
                "tenant-root",
                "bootbox",
                user("root", &["tenant-root-admin"]),
            ),
            &c,
        ),
        &[],
    );
    // A namespace scope with two slots names both while both are free, then the free one.
    c.definitions.push(definition(
        "redis",
        "Redis",
        json!({"cardinality": {"scope": "namespace", "slots": ["cache", "queue"]}}),
    ));
    c.definitions
        .retain(|d| d.name != "redis" || d.field(RuleField::Cardinality).is_some());
    assert_denied(
        &decide(
            &app(Create, "Redis", "tenant-c", "store", admin.clone()),
            &c,
        ),
        403,
        "Redis tenant-c/store: Redis is held to at most 2 per namespace by its name: create it as one of tenant-c/cache, tenant-c/queue (cardinality.slots)",
    );
    c.instances.push(instance("Redis", "tenant-c", "cache"));
    assert_denied(
        &decide(
            &app(Create, "Redis", "tenant-c", "store", admin.clone()),
            &c,
        ),
        403,
        "Redis tenant-c/store: Redis is held to at most 2 per namespace by its name: create it as tenant-c/queue (cardinality.slots)",
    );
    // A tenant scope holds its slots in the tenant's own namespace, even from a namespace the
    // tenant owns through its labels.
    let mut c = slotted();
    c.namespaces.push(cozystack_resolver::Namespace {
        name: "c-web".into(),
        labels: labels(&[
            ("tenant.cozystack.io/tenant-root", ""),
            ("tenant.cozystack.io/tenant-c", ""),
        ]),
    });
    assert_denied(
        &decide(
            &app(
                Create,
                "Monitoring",
                "c-web",
                "monitoring",
                user("carol", &["tenant-c-admin"]),
            ),
            &c,
        ),
        403,
        "Monitoring c-web/monitoring: Monitoring is held to at most 1 per tenant by its name: create it as tenant-c/monitoring (cardinality.slots)",
    );
}

#[test]
fn beyond_the_slots_the_count_alone_holds() {
    let mut c = slotted();
    c.definitions[0].set(
        RuleField::Cardinality,
        Some(RawField::from_value(
            &json!({"scope": "tenant", "max": 2, "slots": ["monitoring"]}),
        )),
    );
    let alice = || user("alice", &["tenant-a-admin"]);
    // tenant-a's slot is held: a second instance may take another name.
    assert_allowed(
        &decide(
            &app(Create, "Monitoring", "tenant-a", "metrics", alice()),
            &c,
        ),
        &[],
    );
    // tenant-c's is free: the first one takes it.
    assert_denied(
        &decide(
            &app(
                Create,
                "Monitoring",
                "tenant-c",
                "metrics",
                user("carol", &["tenant-c-admin"]),
            ),
            &c,
        ),
        403,
        "Monitoring tenant-c/metrics: Monitoring is held to at most 2 per tenant by its name: create it as tenant-c/monitoring (cardinality.slots)",
    );
}

#[test]
fn slot_errors_name_the_field() {
    let mut c = cluster();
    for (cardinality, message) in [
        (
            json!({"scope": "tenant", "slots": ["Mon"]}),
            "ApplicationDefinition monitoring: spec.cardinality.slots[0]: \"Mon\" is not a DNS-1123 label (lower-case letters, digits and inner dashes, at most 63)",
        ),
        (
            json!({"scope": "tenant", "slots": ["a", "a"]}),
            "ApplicationDefinition monitoring: spec.cardinality.slots[1]: \"a\" is listed twice; each slot holds one instance",
        ),
        (
            json!({"scope": "tenant", "max": 1, "slots": ["a", "b"]}),
            "ApplicationDefinition monitoring: spec.cardinality.max: 1 is below the 2 slots (one name per allowed instance); raise max or drop slots",
        ),
        (
            json!({"scope": "cluster", "slots": ["a"]}),
            "ApplicationDefinition monitoring: spec.cardinality.slotNamespace: scope cluster with slots needs the one namespace its slots live in",
        ),
        (
            json!({"scope": "tenant", "max": 0, "slots": ["a", "b"]}),
            "ApplicationDefinition monitoring: spec.cardinality.max: 0 means unlimited, and slots hold the kind to one instance per name (2 here): unlimited and slots do not mix; drop max to allow 2, or drop slots",
        ),
    ] {
        c.definitions[0].set(
            RuleField::Cardinality,
            Some(RawField::from_value(&cardinality)),
        );
        let verdict = decide(
            &app(
                Create,
                "Monitoring",
                "tenant-c",
                "a",
                user("carol", &["tenant-c-admin"]),
            ),
            &c,
        );
        assert_denied(
            &verdict,
            403,
            &format!(
                "{message}; the rules of kind Monitoring cannot be read, so the request is rejected — fix the ApplicationDefinition or the policy settings"
            ),
        );
    }
}

#[test]
fn an_instance_off_its_slot_is_told_how_to_move_onto_it() {
    // The stock rule set, replayed as the audit scanner sends it: what moving onto the slot
    // costs is the kind's chart's (docs/stock-rules.md, off its slot).
    let settings = Settings {
        definition_source: cozystack_resolver::DefinitionSource::Builtin,
        ..common::listed()
    };
    let mut c = cluster();
    c.instances.retain(|i| i.namespace != "tenant-c");
    c.instances
        .push(instance("Ingress", "tenant-root", "ingress"));
    for ns in c.namespaces.iter_mut().filter(|n| n.name == "tenant-c") {
        ns.labels.insert(
            "namespace.cozystack.io/ingress".into(),
            "tenant-root".into(),
        );
    }
    // The cluster with one instance `app` of `kind` in tenant-c, and its replay.
    let with = |kind: &str, app: &str| {
        let mut state = c.clone();
        state.instances.push(instance(kind, "tenant-c", app));
        state
    };
    let replay = |kind: &str, app: &str| {
        release(
            Create,
            "tenant-c",
            app,
            release_labels(kind, app),
            user("", &[]),
        )
    };
    for (kind, app, remedy) in [
        (
            "Monitoring",
            "metrics",
            "Monitoring tenant-c/metrics is off its slot: Monitoring is held to at most 1 per tenant by its name (tenant-c/monitoring); its chart renders no release of another name, so it never ran and nothing is lost: delete tenant-c/metrics, then turn monitoring on in Tenant tenant-root/c, whose chart creates it as tenant-c/monitoring (cardinality.slots)",
        ),
        (
            "SeaweedFS",
            "s3",
            "SeaweedFS tenant-c/s3 is off its slot: SeaweedFS is held to at most 1 per tenant by its name (tenant-c/seaweedfs); it runs, and deleting it drops its data (the chart's cleanup deletes its volumes): to keep it as it is, leave SeaweedFS without slots (definitions.SeaweedFS.cardinality: {scope: tenant, max: 1} in the policy settings); to move it, copy its data off, delete tenant-c/s3, then turn seaweedfs on in Tenant tenant-root/c, whose chart creates it as tenant-c/seaweedfs (cardinality.slots)",
        ),
        (
            "Info",
            "about",
            "Info tenant-c/about is off its slot: Info is held to at most 1 per tenant by its name (tenant-c/info); delete tenant-c/about, then create it anew as tenant-c/info with the same values (cardinality.slots)",
        ),
    ] {
        let verdict = cozystack_resolver::evaluate(&replay(kind, app), &settings, &with(kind, app));
        assert_allowed(&verdict, &[remedy]);
    }
    // The remedy that keeps a SeaweedFS as it is works: its settings block without slots.
    let kept = Settings::from_json(
        r#"{"definitionSource": "builtin", "definitions": {"SeaweedFS": {"cardinality": {"scope": "tenant", "max": 1}}}}"#,
    )
    .unwrap();
    let verdict =
        cozystack_resolver::evaluate(&replay("SeaweedFS", "s3"), &kept, &with("SeaweedFS", "s3"));
    assert_allowed(&verdict, &[]);
}
