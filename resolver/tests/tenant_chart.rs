//! What the Tenant chart makes of a Tenant's values, and which module instances it owns.
mod common;
use common::*;
use cozystack_resolver::Operation::*;
use cozystack_resolver::{Instance, Request, Settings, Snapshot};
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
    let verdict = cozystack_resolver::evaluate(&request, &listed(), &recording);
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

/// The HelmRelease of Tenant `name` in `parent`, as cozystack-api writes it, with `values`.
fn tenant_release(parent: &str, name: &str, values: Value) -> Instance {
    Instance {
        release: format!("tenant-{name}"),
        values,
        ..instance("Tenant", parent, name)
    }
}

const C_MONITORING_RENDERED: &str = "Monitoring tenant-c/monitoring is rendered by Tenant tenant-root/c (Helm release tenant-root/tenant-c), which would create it again; turn monitoring off in Tenant tenant-root/c instead of deleting it (protection.deletion: protect)";

#[test]
fn a_module_the_chart_renders_is_known_by_its_tenants_switch() {
    let admin = || user("carol", &["tenant-c-admin"]);
    let delete = |app_name| app(Delete, "Monitoring", "tenant-c", app_name, admin());
    for (switch, rendered_by, refused) in [
        // Rendered by the chart and never edited.
        (true, Some("tenant-root/tenant-c"), true),
        // Edited from Administration → Modules: cozystack-api's UPDATE drops Helm's metadata,
        // and the chart still renders it.
        (true, None, true),
        // Annotations of another release do not matter either: the switch does.
        (true, Some("cozy-system/cozystack-basics"), true),
        // The switch went off in an upgrade that failed half-way: the chart renders it no more.
        (false, Some("tenant-root/tenant-c"), false),
        // Created from Administration → Modules with the switch off.
        (false, None, false),
    ] {
        let mut snapshot = stock();
        snapshot.instances.push(tenant_release(
            "tenant-root",
            "c",
            json!({ "monitoring": switch }),
        ));
        snapshot
            .instances
            .push(module("Monitoring", "tenant-c", "monitoring", rendered_by));
        let verdict = decide(&delete("monitoring"), &snapshot);
        if refused {
            assert_denied(&verdict, 403, C_MONITORING_RENDERED);
        } else {
            assert_allowed(&verdict, &[]);
        }
    }
    // A Monitoring not named after the switch is none of the chart's, switch on or not.
    let mut snapshot = stock();
    snapshot.instances.push(tenant_release(
        "tenant-root",
        "c",
        json!({"monitoring": true}),
    ));
    snapshot
        .instances
        .push(module("Monitoring", "tenant-c", "monitoring", None));
    snapshot
        .instances
        .push(module("Monitoring", "tenant-c", "metrics", None));
    assert_allowed(&decide(&delete("metrics"), &snapshot), &[]);
    // Without the Tenant's release nothing renders the module.
    let mut snapshot = stock();
    snapshot
        .instances
        .push(module("Monitoring", "tenant-c", "monitoring", None));
    assert_allowed(&decide(&delete("monitoring"), &snapshot), &[]);
    // The root Tenant's modules are rendered by the tenant-root release in tenant-root, whose
    // values switch monitoring on.
    let mut snapshot = stock();
    snapshot.instances.retain(|i| i.namespace != "tenant-c");
    let delete_root = || {
        app(
            Delete,
            "Monitoring",
            "tenant-root",
            "monitoring",
            user("r", &["tenant-root-admin"]),
        )
    };
    assert_denied(
        &decide(&delete_root(), &snapshot),
        403,
        "Monitoring tenant-root/monitoring is rendered by Tenant tenant-root/root (Helm release tenant-root/tenant-root), which would create it again; turn monitoring off in Tenant tenant-root/root instead of deleting it (protection.deletion: protect)",
    );
    root_values(&mut snapshot)["monitoring"] = json!(false);
    assert_allowed(&decide(&delete_root(), &snapshot), &[]);
}

#[test]
fn a_tenant_being_deleted_renders_its_modules_no_more() {
    let delete = || {
        app(
            Delete,
            "Monitoring",
            "tenant-c",
            "monitoring",
            user("carol", &["tenant-c-admin"]),
        )
    };
    // helm-controller is uninstalling the Tenant's release (its deletionTimestamp is set):
    // nothing will render the module again, so deleting it is no fight with the chart.
    let mut snapshot = stock();
    snapshot.instances.push(Instance {
        terminating: true,
        ..tenant_release("tenant-root", "c", json!({"monitoring": true}))
    });
    snapshot.instances.push(module(
        "Monitoring",
        "tenant-c",
        "monitoring",
        Some("tenant-root/tenant-c"),
    ));
    let recording = Recording::new(&snapshot);
    let verdict = cozystack_resolver::evaluate(&delete(), &listed(), &recording);
    assert_allowed(&verdict, &[]);
    assert!(
        recording
            .calls
            .borrow()
            .contains(&"get HelmRelease tenant-root/tenant-c".to_owned()),
        "{:?}",
        recording.calls.borrow()
    );
    // Once it is gone the answer is the same, a verdict and not a failed lookup.
    snapshot
        .instances
        .retain(|i| i.kind != "Tenant" || i.app != "c");
    assert_allowed(&decide(&delete(), &snapshot), &[]);
}

#[test]
fn a_switch_off_over_a_module_being_deleted_is_not_protected_again() {
    let switch_off = || {
        tenant(
            "tenant-root",
            "a",
            Some(json!({"monitoring": true})),
            json!({"monitoring": false}),
        )
    };
    let off_message = format!(
        "Tenant tenant-root/a: turning monitoring off removes Monitoring tenant-a/monitoring: {A_MONITORING_HELD}"
    );
    let mut snapshot = stock();
    assert_denied(&decide(&switch_off(), &snapshot), 403, &off_message);
    // Its DELETE was admitted (the consumers came later) and helm-controller is uninstalling
    // it: the switch decides nothing the DELETE did not, as the same module's DELETE again.
    snapshot
        .instances
        .iter_mut()
        .find(|i| i.kind == "Monitoring" && i.namespace == "tenant-a")
        .unwrap()
        .terminating = true;
    assert_allowed(&decide(&switch_off(), &snapshot), &[]);
    let mut delete = app(Delete, "Monitoring", "tenant-a", "monitoring", root_owner());
    delete.old_object.as_mut().unwrap().terminating = true;
    assert_allowed(&decide(&delete, &snapshot), &[]);
}

#[test]
fn an_edit_of_a_tenant_being_deleted_switches_nothing() {
    // helm-controller uninstalls a release carrying a deletionTimestamp and renders it no
    // more (`reconcileDelete`): turning a switch off in its values removes nothing.
    let snapshot = stock();
    let mut edit = tenant(
        "tenant-root",
        "a",
        Some(json!({"monitoring": true})),
        json!({"monitoring": false}),
    );
    edit.old_object.as_mut().unwrap().terminating = true;
    assert_allowed(&decide(&edit, &snapshot), &[]);
    // The same edit of a live Tenant removes the module, which is protected.
    edit.old_object.as_mut().unwrap().terminating = false;
    assert_denied(
        &decide(&edit, &snapshot),
        403,
        &format!(
            "Tenant tenant-root/a: turning monitoring off removes Monitoring tenant-a/monitoring: {A_MONITORING_HELD}"
        ),
    );
    // The release path, as cozystack-api or Flux writes the Tenant's HelmRelease.
    let flux = user("system:serviceaccount:cozy-fluxcd:flux", &[]);
    let mut release = release(
        Update,
        "tenant-root",
        "tenant-a",
        release_labels("Tenant", "a"),
        flux,
    );
    release.old_object.as_mut().unwrap().spec = json!({"values": {"monitoring": true}});
    release.object.as_mut().unwrap().spec = json!({"values": {"monitoring": false}});
    let verdict = decide(&release, &snapshot);
    assert!(!verdict.warnings.is_empty(), "{verdict:?}");
    release.old_object.as_mut().unwrap().terminating = true;
    assert_allowed(&decide(&release, &snapshot), &[]);
}

#[test]
fn the_root_tenant_is_deleted_by_the_platform_only() {
    let delete = |who| app(Delete, "Tenant", "tenant-root", "root", who);
    // A super-admin of tenant-root has apps.cozystack.io */* there, and one API edit of the
    // root Tenant drops the no-delete label Cozystack's own guard keys on.
    assert_denied(
        &decide(&delete(root_owner()), &stock()),
        403,
        "Tenant tenant-root/root is the root tenant: deleting it uninstalls every tenant of the platform (its Helm release tenant-root/tenant-root renders them all), and rita is not a platform identity; delete the tenants you mean to remove one by one, or have a platform administrator uninstall Cozystack",
    );
    // The tenant's own ServiceAccount, which cozy:tenant binds the same way.
    assert_denied(
        &decide(
            &delete(user("system:serviceaccount:tenant-root:tenant-root", &[])),
            &stock(),
        ),
        403,
        "Tenant tenant-root/root is the root tenant: deleting it uninstalls every tenant of the platform (its Helm release tenant-root/tenant-root renders them all), and system:serviceaccount:tenant-root:tenant-root is not a platform identity; delete the tenants you mean to remove one by one, or have a platform administrator uninstall Cozystack",
    );
    // The platform may; any other Tenant is an ordinary delete.
    assert_allowed(&decide(&delete(user(API, &[])), &stock()), &[]);
    assert_allowed(
        &decide(
            &app(Delete, "Tenant", "tenant-root", "c", root_owner()),
            &stock(),
        ),
        &[],
    );
}

#[test]
fn a_create_of_another_kind_under_a_module_name_is_refused() {
    let create = |kind, name| app(Create, kind, "tenant-c", name, root_owner());
    let mut snapshot = stock();
    snapshot.instances.retain(|i| i.namespace != "tenant-c");
    // The definitions' release prefixes, as the stock ones state them.
    snapshot
        .definitions
        .push(definition("external-dns", "ExternalDNS", json!({})));
    for (kind, prefix) in [
        ("ExternalDNS", ""),
        ("Monitoring", ""),
        ("Postgres", "postgres-"),
    ] {
        for d in snapshot.definitions.iter_mut().filter(|d| d.kind == kind) {
            d.release_prefix = Some(prefix.to_owned());
        }
    }
    // Another kind under a module's name would be rewritten into the module: refused before
    // the name is taken, although ExternalDNS has no rules of its own.
    assert_denied(
        &decide(&create("ExternalDNS", "monitoring"), &snapshot),
        403,
        "ExternalDNS tenant-c/monitoring: its release tenant-c/monitoring takes the name under which Tenant tenant-root/c renders its Monitoring module (tenantModules.monitoring), and helm-controller adopts an existing object of the name it renders, so turning monitoring on would rewrite this ExternalDNS into the Monitoring module; choose another name",
    );
    assert_allowed(&decide(&create("ExternalDNS", "dns"), &snapshot), &[]);
    // A Postgres named monitoring is released as postgres-monitoring: no name is taken.
    assert_allowed(&decide(&create("Postgres", "monitoring"), &snapshot), &[]);
    // Under the built-in set ExternalDNS has its stock prefix, "", without any definition; a
    // releasePrefixes entry names its releases otherwise, rules or none.
    let builtin = |prefixes: &str| {
        Settings::from_json(&format!(
            r#"{{"definitionSource": "builtin", "releasePrefixes": {prefixes}}}"#
        ))
        .unwrap()
    };
    let verdict = cozystack_resolver::evaluate(
        &create("ExternalDNS", "monitoring"),
        &builtin("{}"),
        &snapshot,
    );
    assert_denied(
        &verdict,
        403,
        "ExternalDNS tenant-c/monitoring: its release tenant-c/monitoring takes the name under which Tenant tenant-root/c renders its Monitoring module (tenantModules.monitoring), and helm-controller adopts an existing object of the name it renders, so turning monitoring on would rewrite this ExternalDNS into the Monitoring module; choose another name",
    );
    let verdict = cozystack_resolver::evaluate(
        &create("ExternalDNS", "monitoring"),
        &builtin(r#"{"ExternalDNS": "dns-"}"#),
        &snapshot,
    );
    assert_allowed(&verdict, &[]);
    // A block the settings give the kind changes its rules, not the name of its releases: the
    // stock prefix still holds, so the same create is refused with the block as without it.
    let blocked = Settings::from_json(
        r#"{"definitionSource": "builtin", "definitions": {"ExternalDNS": {"cardinality": {"scope": "tenant", "max": 3}}}}"#,
    )
    .unwrap();
    assert_denied(
        &cozystack_resolver::evaluate(&create("ExternalDNS", "monitoring"), &blocked, &snapshot),
        403,
        "ExternalDNS tenant-c/monitoring: its release tenant-c/monitoring takes the name under which Tenant tenant-root/c renders its Monitoring module (tenantModules.monitoring), and helm-controller adopts an existing object of the name it renders, so turning monitoring on would rewrite this ExternalDNS into the Monitoring module; choose another name",
    );
    // Under `definitionSource: settings` no definition is read and no built-in rule applies,
    // but the kind still names its releases as a stock install does: the same refusal.
    let settings = Settings::from_json(
        r#"{"definitionSource": "settings", "definitions": {"ExternalDNS": {"cardinality": {"scope": "tenant", "max": 3}}}}"#,
    )
    .unwrap();
    assert_denied(
        &cozystack_resolver::evaluate(&create("ExternalDNS", "monitoring"), &settings, &snapshot),
        403,
        "ExternalDNS tenant-c/monitoring: its release tenant-c/monitoring takes the name under which Tenant tenant-root/c renders its Monitoring module (tenantModules.monitoring), and helm-controller adopts an existing object of the name it renders, so turning monitoring on would rewrite this ExternalDNS into the Monitoring module; choose another name",
    );
    // The module's own kind under its name is on its slot; the switch adopts it when it turns
    // on (a_switch_on_adopts_its_twin_and_refuses_another_kind).
    assert_allowed(&decide(&create("Monitoring", "monitoring"), &snapshot), &[]);
}

#[test]
fn every_name_a_chart_renders_is_guarded_on_create() {
    let create = |kind, namespace, name| app(Create, kind, namespace, name, root_owner());
    let mut snapshot = stock();
    snapshot.instances.retain(|i| i.namespace != "tenant-c");
    // The definitions a stock install lists beside the test cluster's.
    for (name, kind) in [
        ("external-dns", "ExternalDNS"),
        ("info", "Info"),
        ("bootbox", "BootBox"),
    ] {
        snapshot.definitions.push(definition(name, kind, json!({})));
    }
    for d in snapshot
        .definitions
        .iter_mut()
        .filter(|d| ["ExternalDNS", "Info", "BootBox"].contains(&d.kind.as_str()))
    {
        d.release_prefix = Some(String::new());
    }
    // The Tenant chart always renders info: its admin may delete it, not take its name.
    assert_denied(
        &decide(&create("ExternalDNS", "tenant-c", "info"), &snapshot),
        403,
        "ExternalDNS tenant-c/info: its release tenant-c/info takes the name under which Tenant tenant-root/c always renders its Info, and helm-controller adopts an existing object of the name it renders, so the Tenant's next reconcile would rewrite this ExternalDNS into the Info; choose another name",
    );
    // Monitoring's chart renders monitoring-system beside the module.
    assert_denied(
        &decide(
            &create("ExternalDNS", "tenant-c", "monitoring-system"),
            &snapshot,
        ),
        403,
        "ExternalDNS tenant-c/monitoring-system: its release tenant-c/monitoring-system takes the name under which the Monitoring module of Tenant tenant-root/c renders a HelmRelease while monitoring is on, and helm-controller adopts an existing object of the name it renders, so turning monitoring on would rewrite this ExternalDNS into that HelmRelease and uninstall what it runs; choose another name",
    );
    // ComputePlane's cluster renders its addons under its own fixed name.
    assert_denied(
        &decide(
            &create("ExternalDNS", "tenant-c", "computeplane-cluster-cilium"),
            &snapshot,
        ),
        403,
        "ExternalDNS tenant-c/computeplane-cluster-cilium: its release tenant-c/computeplane-cluster-cilium takes the name under which the ComputePlane module of Tenant tenant-root/c renders a HelmRelease while computeplane is on, and helm-controller adopts an existing object of the name it renders, so turning computeplane on would rewrite this ExternalDNS into that HelmRelease and uninstall what it runs; choose another name",
    );
    // The optional BootBox package renders tenant-root/bootbox, and only there.
    assert_denied(
        &decide(&create("ExternalDNS", "tenant-root", "bootbox"), &snapshot),
        403,
        "ExternalDNS tenant-root/bootbox: its release tenant-root/bootbox takes the name under which the platform's optional BootBox package renders its release, and helm-controller adopts an existing object of the name it renders, so enabling that package would rewrite this ExternalDNS into the BootBox and uninstall what it runs; choose another name",
    );
    assert_allowed(
        &decide(&create("ExternalDNS", "tenant-c", "bootbox"), &snapshot),
        &[],
    );
    // The kind a name renders as takes it: that is its slot.
    assert_allowed(&decide(&create("Info", "tenant-c", "info"), &snapshot), &[]);
    // Outside a tenant's namespace no Tenant renders anything.
    assert_allowed(
        &decide(&create("ExternalDNS", "cozy-public", "info"), &snapshot),
        &[],
    );
}

#[test]
fn a_kind_the_cluster_does_not_serve_renders_nothing() {
    // Cozystack v1.6.x: no ComputePlane definition, and its Tenant chart renders nothing for
    // `computeplane: true`, so neither the switch nor the names it would render are judged.
    let mut snapshot = stock();
    snapshot.definitions.retain(|d| d.kind != "ComputePlane");
    snapshot.instances.retain(|i| i.namespace != "tenant-c");
    let mut externaldns = definition("external-dns", "ExternalDNS", json!({}));
    externaldns.release_prefix = Some(String::new());
    snapshot.definitions.push(externaldns);
    snapshot
        .instances
        .push(instance("ExternalDNS", "tenant-c", "computeplane"));
    let on = tenant(
        "tenant-root",
        "c",
        Some(json!({})),
        json!({"computeplane": true}),
    );
    assert_allowed(&decide(&on, &snapshot), &[]);
    let create = |name| app(Create, "ExternalDNS", "tenant-c", name, root_owner());
    assert_allowed(
        &decide(&create("computeplane-cluster-cilium"), &snapshot),
        &[],
    );
    assert_allowed(&decide(&create("computeplane"), &snapshot), &[]);
    // Where the cluster lists it (main), the same switch over that ExternalDNS is refused.
    let served = stock();
    let mut snapshot_main = snapshot.clone();
    snapshot_main.definitions.extend(
        served
            .definitions
            .into_iter()
            .filter(|d| d.kind == "ComputePlane"),
    );
    assert_denied(
        &decide(&on, &snapshot_main),
        403,
        "Tenant tenant-root/c: turning computeplane on creates ComputePlane tenant-c/computeplane: its name is taken by ExternalDNS tenant-c/computeplane (HelmRelease tenant-c/computeplane), and helm-controller adopts an existing object of the name it renders: it would rewrite that release into the ComputePlane module and uninstall what it runs; delete ExternalDNS tenant-c/computeplane (or create it anew under another name) first, or leave computeplane off (tenantModules.computeplane)",
    );
    // The built-in set reads no definition: tenantModules says which switches render.
    let v16 = Settings::from_json(
        r#"{"definitionSource": "builtin", "tenantModules": {"monitoring": "Monitoring", "etcd": "Etcd", "ingress": "Ingress", "seaweedfs": "SeaweedFS", "gateway": "Gateway"}}"#,
    )
    .unwrap();
    assert_allowed(
        &cozystack_resolver::evaluate(&create("computeplane-cluster-cilium"), &v16, &snapshot),
        &[],
    );
}

#[test]
fn a_switch_on_over_an_app_holding_a_name_its_module_renders_is_refused() {
    let on = tenant(
        "tenant-root",
        "c",
        Some(json!({})),
        json!({"monitoring": true}),
    );
    let mut snapshot = stock();
    snapshot.instances.retain(|i| i.namespace != "tenant-c");
    snapshot
        .instances
        .push(instance("ExternalDNS", "tenant-c", "monitoring-system"));
    let refusal = "Tenant tenant-root/c: turning monitoring on creates Monitoring tenant-c/monitoring: the name tenant-c/monitoring-system its chart renders beside it is taken by ExternalDNS tenant-c/monitoring-system (HelmRelease tenant-c/monitoring-system), and helm-controller adopts an existing object of the name it renders: it would rewrite that release into the Monitoring module and uninstall what it runs; delete ExternalDNS tenant-c/monitoring-system (or create it anew under another name) first, or leave monitoring off (tenantModules.monitoring)";
    assert_denied(&decide(&on, &snapshot), 403, refusal);
    // Its API-created twin under the module's own name is adopted, but does not clear the name
    // beside it.
    snapshot
        .instances
        .push(module("Monitoring", "tenant-c", "monitoring", None));
    assert_denied(&decide(&on, &snapshot), 403, refusal);
    // Being deleted, it frees the name.
    snapshot
        .instances
        .iter_mut()
        .find(|i| i.kind == "ExternalDNS")
        .unwrap()
        .terminating = true;
    assert_eq!(decide(&on, &snapshot).warnings.len(), 1);
    snapshot.instances.pop();
    assert_allowed(&decide(&on, &snapshot), &[]);
}

/// tenant-a runs an Etcd and provides etcd to its subtree, as the Tenant chart labels it.
fn etcd_in_tenant_a(snapshot: &mut Snapshot) {
    for ns in snapshot
        .namespaces
        .iter_mut()
        .filter(|ns| ns.name.starts_with("tenant-a"))
    {
        ns.labels
            .insert("namespace.cozystack.io/etcd".into(), "tenant-a".into());
    }
    snapshot
        .instances
        .push(instance("Etcd", "tenant-a", "etcd"));
}

#[test]
fn switches_turned_off_together_are_judged_together() {
    // tenant-a's Etcd beside its Monitoring, and a ComputePlane there that consumes both.
    let mut snapshot = stock();
    snapshot
        .instances
        .retain(|i| !(i.kind == "Kubernetes" && i.namespace == "tenant-a-b"));
    snapshot.instances.retain(|i| i.kind != "Postgres");
    etcd_in_tenant_a(&mut snapshot);
    snapshot
        .instances
        .push(instance("ComputePlane", "tenant-a", "computeplane"));
    let on = json!({"monitoring": true, "etcd": true, "computeplane": true});
    let turn = |new: Value, snapshot: &Snapshot| {
        decide(&tenant("tenant-root", "a", Some(on.clone()), new), snapshot)
    };
    // The consumer goes in the same write: nothing is stranded.
    assert_allowed(&turn(json!({"monitoring": true}), &snapshot), &[]);
    // Etcd alone strands the ComputePlane that stays.
    assert_denied(
        &turn(json!({"monitoring": true, "computeplane": true}), &snapshot),
        403,
        "Tenant tenant-root/a: turning etcd off removes Etcd tenant-a/etcd: Etcd tenant-a/etcd is protected while it provides etcd to consumers: tenant-a/computeplane (ComputePlane); delete or move those consumers first, or give their tenants another etcd provider (protection.deletion: protect)",
    );
    // A consumer that stays elsewhere is still named, the removed one is not.
    snapshot
        .instances
        .push(instance("Kubernetes", "tenant-a-b", "dev"));
    assert_denied(
        &turn(json!({"monitoring": true}), &snapshot),
        403,
        "Tenant tenant-root/a: turning etcd off removes Etcd tenant-a/etcd: Etcd tenant-a/etcd is protected while it provides etcd to consumers: tenant-a-b/dev (Kubernetes); delete or move those consumers first, or give their tenants another etcd provider (protection.deletion: protect)",
    );
    // Two providers of one class switched off together leave it unserved: neither keeps it.
    let mut snapshot = stock();
    snapshot.definitions.push(definition(
        "metrics",
        "Metrics",
        json!({"protection": {"deletion": "protect"},
               "capability": {"provides": ["monitoring"], "share": "children"}}),
    ));
    snapshot
        .instances
        .push(instance("Metrics", "tenant-a", "metrics"));
    let mut settings = common::listed();
    settings
        .tenant_modules
        .insert("metrics".to_owned(), "Metrics".to_owned());
    let both = json!({"monitoring": true, "metrics": true});
    let verdict = cozystack_resolver::evaluate(
        &tenant("tenant-root", "a", Some(both), json!({})),
        &settings,
        &snapshot,
    );
    assert_denied(
        &verdict,
        403,
        "Tenant tenant-root/a: turning metrics off removes Metrics tenant-a/metrics: Metrics tenant-a/metrics is protected while it provides monitoring to consumers: tenant-a-b/db (Postgres), tenant-a-b/dev (Kubernetes); delete or move those consumers first, or give their tenants another monitoring provider (protection.deletion: protect)",
    );
}

#[test]
fn a_switch_off_moves_the_consumers_whatever_else_sits_in_the_namespace() {
    // tenant-a provides etcd to its subtree; tenant-a-b runs a Kubernetes cluster on it.
    let mut snapshot = stock();
    etcd_in_tenant_a(&mut snapshot);
    let on = json!({"monitoring": true, "etcd": true});
    let off = json!({"monitoring": true});
    let refusal = "Tenant tenant-root/a: turning etcd off removes Etcd tenant-a/etcd: Etcd tenant-a/etcd is protected while it provides etcd to consumers: tenant-a-b/dev (Kubernetes); delete or move those consumers first, or give their tenants another etcd provider (protection.deletion: protect)";
    let turn_off = |snapshot: &Snapshot| {
        decide(
            &tenant("tenant-root", "a", Some(on.clone()), off.clone()),
            snapshot,
        )
    };
    assert_denied(&turn_off(&snapshot), 403, refusal);
    // A leftover from before the policy, off its slot: its chart never rendered it.
    snapshot
        .instances
        .push(instance("Etcd", "tenant-a", "etcd2"));
    assert_denied(&turn_off(&snapshot), 403, refusal);
    // Even a provider that renders stays behind in vain: the chart writes the parent's provider
    // into tenant-a's labels and its children's, so the cluster's control plane moves.
    snapshot.definitions.push(definition(
        "keystore",
        "KeyStore",
        json!({"capability": {"provides": ["etcd"], "share": "children"}}),
    ));
    snapshot
        .instances
        .push(instance("KeyStore", "tenant-a", "keys"));
    assert_denied(&turn_off(&snapshot), 403, refusal);
    // Without the consumer the switch goes off.
    snapshot
        .instances
        .retain(|i| !(i.kind == "Kubernetes" && i.namespace == "tenant-a-b"));
    assert_allowed(&turn_off(&snapshot), &[]);
}

#[test]
fn a_switch_on_adopts_its_twin_and_refuses_another_kind() {
    let on = || {
        tenant(
            "tenant-root",
            "c",
            Some(json!({})),
            json!({"monitoring": true}),
        )
    };
    // Created through the API under the key's name: helm-controller adopts it.
    let adopted = "Tenant tenant-root/c: turning monitoring on creates Monitoring tenant-c/monitoring: Monitoring tenant-c/monitoring exists already and Helm release tenant-root/tenant-c does not own it (it was created through the API): helm-controller will adopt it into the Tenant's release and apply the module's chart over it, so from then on its settings come from the Tenant and it is removed by turning monitoring off";
    let mut snapshot = stock();
    snapshot
        .instances
        .push(module("Monitoring", "tenant-c", "monitoring", None));
    let recording = Recording::new(&snapshot);
    let verdict = cozystack_resolver::evaluate(&on(), &listed(), &recording);
    assert_allowed(&verdict, &[adopted]);
    // The count and the slot read the kind's list; each name the switch renders costs one GET
    // after them: the module's, then the one its chart renders beside it.
    assert_eq!(
        *recording.calls.borrow(),
        [
            "list ApplicationDefinitions",
            "list HelmReleases of kind Monitoring",
            "get HelmRelease tenant-c/monitoring",
            "get HelmRelease tenant-c/monitoring-system",
        ]
    );
    // The leftover of an uninstall that failed is the module itself.
    let mut snapshot = stock();
    snapshot.instances.push(module(
        "Monitoring",
        "tenant-c",
        "monitoring",
        Some("tenant-root/tenant-c"),
    ));
    assert_allowed(&decide(&on(), &snapshot), &[]);
    // One being deleted goes by itself; Flux retries the install.
    let mut snapshot = stock();
    snapshot.instances.push(Instance {
        terminating: true,
        ..module("Monitoring", "tenant-c", "monitoring", None)
    });
    assert_allowed(&decide(&on(), &snapshot), &[]);
    // A release of another kind under the key's name would be rewritten into the module.
    let mut snapshot = stock();
    snapshot
        .instances
        .push(instance("ExternalDNS", "tenant-c", "monitoring"));
    assert_denied(
        &decide(&on(), &snapshot),
        403,
        "Tenant tenant-root/c: turning monitoring on creates Monitoring tenant-c/monitoring: its name is taken by ExternalDNS tenant-c/monitoring (HelmRelease tenant-c/monitoring), and helm-controller adopts an existing object of the name it renders: it would rewrite that release into the Monitoring module and uninstall what it runs; delete ExternalDNS tenant-c/monitoring (or create it anew under another name) first, or leave monitoring off (tenantModules.monitoring)",
    );
    // A platform writer under platformWriters warn is told.
    let mut through_release = release(
        Update,
        "tenant-root",
        "tenant-c",
        release_labels("Tenant", "c"),
        user(API, &[]),
    );
    through_release.object.as_mut().unwrap().spec = json!({"values": {"monitoring": true}});
    through_release.old_object.as_mut().unwrap().spec = json!({"values": {}});
    let verdict = decide(&through_release, &snapshot);
    assert_allowed(
        &verdict,
        &[
            "Tenant tenant-root/c: turning monitoring on creates Monitoring tenant-c/monitoring: its name is taken by ExternalDNS tenant-c/monitoring (HelmRelease tenant-c/monitoring), and helm-controller adopts an existing object of the name it renders: it would rewrite that release into the Monitoring module and uninstall what it runs; delete ExternalDNS tenant-c/monitoring (or create it anew under another name) first, or leave monitoring off (tenantModules.monitoring) (admitted because system:serviceaccount:cozy-system:cozystack-api is a platform writer and platformWriters is warn)",
        ],
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
