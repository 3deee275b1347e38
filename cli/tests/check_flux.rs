//! `check` of what Flux does with a change set, end to end on the bundled example cluster:
//! kustomize-controller's stages and dry runs, a folder built as the Kustomization builds it,
//! server-side apply's merge, the API servers' refusals after admission, and Kustomizations in
//! dependsOn order.

mod checking;
mod common;

use cozystack_e2e::loopback;
use cozystack_policy_runtime::cluster::ClusterObjects;
use serde_json::{Value, json};

use checking::*;
use common::{scratch, workspace};

/// The bundled install with what a GitOps team's Kustomization cozy-fluxcd/htdev applied on it.
const GITOPS: &[&str] = &[
    "--dump",
    "e2e/cluster",
    "--dump",
    "cli/tests/dumps/gitops.yaml",
    "--settings",
    "deploy/policy-protect.yaml",
];

/// A tenant's own Kustomization (`spec.serviceAccountName` its tenant's ServiceAccount): Flux
/// applies as that ServiceAccount, an administrator of the tenant, not a platform writer.
fn tenant_flux(namespace: &str) -> [String; 2] {
    [
        "--as".to_owned(),
        format!("system:serviceaccount:{namespace}:{namespace}"),
    ]
}

#[test]
fn flux_dry_runs_each_stage_whole_before_it_applies_any_of_it() {
    // The tenant administrator's commit, applied by the tenant's Kustomization: sorted, the
    // Monitoring named metrics comes first, and the dry run of the stage refuses it (on the
    // cluster before the stage), so Flux applies nothing of the stage, not even the ConfigMap;
    // but the Applications after it in the dry run are written by cozystack-api, which drops
    // the dryRun, and stay.
    let set = write("flux-commit.yaml", TENANT_COMMIT);
    let set = set.to_str().unwrap_or_default();
    let acme = tenant_flux("tenant-acme");
    let acme: Vec<&str> = acme.iter().map(String::as_str).collect();
    let out = check(&args(&[&[set], DUMP, &acme]), None);
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert_eq!(
        out.stdout,
        format!(
            "stage 3, resources: every other object, all dry-run before any is applied\n\
             BLOCKED  ConfigMap tenant-acme/shop-config ({set}, document 4) | not applied: Monitoring tenant-acme/metrics failed the dry run of its stage\n\
             DENIED   CREATE Monitoring tenant-acme/metrics ({set}, document 2): Monitoring tenant-acme/metrics: Monitoring is held to at most 1 per tenant by its name: create it as tenant-acme/monitoring (cardinality.slots) | {DRY_RUN_FAILS}\n\
             ALLOWED  CREATE Monitoring tenant-acme/monitoring ({set}, document 1) | {LANDED}; it stays although Monitoring tenant-acme/metrics failed the dry run of its stage\n\
             ALLOWED  UPDATE Postgres tenant-acme/shop ({set}, document 3) | {LANDED}; it stays although Monitoring tenant-acme/metrics failed the dry run of its stage\n\
             \n4 manifests: 3 writes judged (2 allowed, 0 with warnings, 1 denied), 0 not judged by this policy, 0 absent, 0 errors\n\
             1 not applied by Flux: each line says what stops it\n\
             2 written by cozystack-api during the dry run of a stage that failed: they stay in the cluster\n"
        )
    );
    // Each dry run is a request with dryRun set, sent with kustomize-controller's field manager.
    let json_out = check(&args(&[&[set, "--output", "json"], DUMP, &acme]), None);
    let report: Value = serde_json::from_str(&json_out.stdout).unwrap_or_else(|e| panic!("{e}"));
    let denied = &report["steps"][1];
    assert_eq!(denied["stage"], "resources");
    assert_eq!(denied["request"]["dryRun"], true);
    assert_eq!(
        denied["request"]["options"],
        json!({"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions", "fieldManager": "kustomize-controller", "dryRun": ["All"]})
    );
    assert_eq!(report["summary"]["blocked"], 1);
}

#[test]
fn cozystack_api_makes_an_application_s_dry_run_and_it_stays_when_the_stage_fails() {
    // One Bucket per tenant (a platform's own rule). Flux dry-runs the stage; cozystack-api
    // drops the dryRun of the server-side apply (`rest.go` `Update` creates through `r.Create`
    // with fresh options, every supported release), so the first Bucket is created during the
    // dry run, the second's dry run finds it and is refused, the stage fails, and the first
    // stays, with the Postgres edit after it; nothing is pruned.
    let mut settings =
        cozystack_policy::settings::read(Some(&workspace().join("deploy/policy-protect.yaml")))
            .unwrap_or_else(|e| panic!("{e}"))
            .value()
            .clone();
    settings["definitions"]["Bucket"]["cardinality"] = json!({"scope": "tenant", "max": 1});
    let one_bucket = write("one-bucket.json", &settings.to_string());
    let one_bucket = one_bucket.to_str().unwrap_or_default();
    let set = write(
        "two-buckets.yaml",
        "apiVersion: apps.cozystack.io/v1alpha1\nkind: Bucket\nmetadata: {name: b, namespace: tenant-ktj-htdev}\nspec: {}\n---\napiVersion: apps.cozystack.io/v1alpha1\nkind: Bucket\nmetadata: {name: a, namespace: tenant-ktj-htdev}\nspec: {}\n---\napiVersion: apps.cozystack.io/v1alpha1\nkind: Postgres\nmetadata: {name: db, namespace: tenant-ktj-htdev}\nspec: {replicas: 3}\n",
    );
    let set = set.to_str().unwrap_or_default();
    let inventory = write(
        "htdev.yaml",
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: htdev, namespace: cozy-fluxcd}\nspec: {prune: true, path: ./tenants/htdev, sourceRef: {kind: GitRepository, name: platform}}\nstatus:\n  inventory:\n    entries:\n    - {id: tenant-ktj-htdev_orders_apps.cozystack.io_Postgres, v: v1alpha1}\n",
    );
    let inventory = inventory.to_str().unwrap_or_default();
    let htdev = tenant_flux("tenant-ktj-htdev");
    let htdev: Vec<&str> = htdev.iter().map(String::as_str).collect();
    let dump = [
        "--dump",
        "e2e/cluster",
        "--dump",
        "cli/tests/dumps/gitops.yaml",
        "--settings",
        one_bucket,
    ];
    let out = check(
        &args(&[&[set, "--inventory", inventory], &dump, &htdev]),
        None,
    );
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    // What the live inventory will have Flux delete is said first.
    assert_eq!(
        lines[0],
        format!(
            "Kustomization cozy-fluxcd/htdev prunes 1 of the 1 objects its live status.inventory ({inventory}) lists; these DELETEs will be judged, as system:serviceaccount:tenant-ktj-htdev:tenant-ktj-htdev (groups system:serviceaccounts, system:serviceaccounts:tenant-ktj-htdev, system:authenticated) (Flux sends one for each that carries its owner labels): Postgres tenant-ktj-htdev/orders"
        )
    );
    assert_eq!(
        lines[2..8],
        [
            "stage 3, resources: every other object, all dry-run before any is applied",
            format!("ALLOWED  CREATE Bucket tenant-ktj-htdev/a ({set}, document 2) | {LANDED}; it stays although Bucket tenant-ktj-htdev/b failed the dry run of its stage").as_str(),
            format!("DENIED   CREATE Bucket tenant-ktj-htdev/b ({set}, document 1): Bucket: at most 1 per tenant tenant-ktj-htdev; already present: a; use or edit the existing Bucket instead of creating another (cardinality tenant/1) | {DRY_RUN_FAILS}").as_str(),
            format!("ALLOWED  UPDATE Postgres tenant-ktj-htdev/db ({set}, document 3) | {LANDED}; it stays although Bucket tenant-ktj-htdev/b failed the dry run of its stage").as_str(),
            "prune: what the change set no longer holds, in reverse apply order, once every stage has applied",
            format!("BLOCKED  Postgres tenant-ktj-htdev/orders ({inventory}, inventory entry 1) | not pruned: Bucket tenant-ktj-htdev/b failed the dry run of its stage, so kustomize-controller applies nothing of it, no later stage, and prunes nothing").as_str(),
        ],
        "{}",
        out.stdout
    );

    // Without the rule the apply succeeds and the prune runs: the Postgres the Kustomization
    // applied before (its owner labels on the Application, carried onto the release by
    // cozystack-api) is deleted.
    let out = check(
        &args(&[&[set, "--inventory", inventory], GITOPS, &htdev]),
        None,
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(
        out.stdout.contains(&format!(
            "\nALLOWED  DELETE Postgres tenant-ktj-htdev/orders ({inventory}, inventory entry 1)\n"
        )),
        "{}",
        out.stdout
    );

    // With spec.prune false kustomize-controller deletes nothing the change set drops
    // (`kustomization_controller.go` prunes only `if obj.Spec.Prune`): no DELETE is judged.
    let kept = write(
        "htdev-unpruned.yaml",
        &std::fs::read_to_string(inventory)
            .unwrap_or_default()
            .replace("prune: true", "prune: false"),
    );
    let kept = kept.to_str().unwrap_or_default();
    let out = check(
        &args(&[&[set, "--kustomization", kept], GITOPS, &htdev]),
        None,
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(!out.stdout.contains("DELETE"), "{}", out.stdout);
    assert!(
        out.stderr.contains("the Kustomization cozy-fluxcd/htdev has spec.prune false: nothing the change set drops is deleted, so 1 deletion(s) are not judged"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_folder_is_judged_as_the_kustomization_builds_it() {
    // kustomize-controller builds spec.path with the Kustomization's targetNamespace and
    // namePrefix set in the kustomization it writes (fluxcd/pkg kustomize v1.27.0
    // `WriteFile`): the Application is judged under the name and namespace Flux applies.
    let folder = scratch("built-folder");
    let _ = std::fs::remove_dir_all(&folder);
    std::fs::create_dir_all(folder.join(".git")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        folder.join("bucket.yaml"),
        "apiVersion: apps.cozystack.io/v1alpha1\nkind: Bucket\nmetadata: {name: media}\nspec: {}\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let kustomization = write(
        "htdev-built.yaml",
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: htdev, namespace: cozy-fluxcd}\nspec: {prune: true, path: ./, targetNamespace: tenant-ktj-htdev, namePrefix: team-, sourceRef: {kind: GitRepository, name: platform}}\n",
    );
    let htdev = tenant_flux("tenant-ktj-htdev");
    let htdev: Vec<&str> = htdev.iter().map(String::as_str).collect();
    let folder_arg = folder.to_str().unwrap_or_default();
    let ks = kustomization.to_str().unwrap_or_default();
    let out = check(
        &args(&[&[folder_arg, "--kustomization", ks], GITOPS, &htdev]),
        None,
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(
        out.stdout.contains(&format!(
            "ALLOWED  CREATE Bucket tenant-ktj-htdev/team-media ({folder_arg} (built as cozy-fluxcd/htdev builds it), document 1)"
        )),
        "{}",
        out.stdout
    );
    // spec.postBuild: the built YAML substituted, `substitute` over the variables of a
    // `substituteFrom` ConfigMap of the Kustomization's namespace (here from a dump).
    std::fs::write(
        folder.join("bucket.yaml"),
        "apiVersion: apps.cozystack.io/v1alpha1\nkind: Bucket\nmetadata: {name: '${app}-${tier:=gold}'}\nspec: {}\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let substituted = write(
        "htdev-substituted.yaml",
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: htdev, namespace: cozy-fluxcd}\nspec: {prune: true, path: ./, targetNamespace: tenant-ktj-htdev, sourceRef: {kind: GitRepository, name: platform}, postBuild: {substitute: {app: store}, substituteFrom: [{kind: ConfigMap, name: vars}]}}\n",
    );
    let vars = write(
        "vars-dump.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: vars, namespace: cozy-fluxcd}\ndata: {app: media, tier: silver}\n",
    );
    let with_vars = [GITOPS, &["--dump", vars.to_str().unwrap_or_default()]].concat();
    let out = check(
        &args(&[
            &[
                folder_arg,
                "--kustomization",
                substituted.to_str().unwrap_or_default(),
            ],
            &with_vars,
            &htdev,
        ]),
        None,
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(
        out.stdout
            .contains("ALLOWED  CREATE Bucket tenant-ktj-htdev/store-silver ("),
        "{}",
        out.stdout
    );
    // Without the ConfigMap Flux fails the build: exit 2, naming it.
    let out = check(
        &args(&[
            &[
                folder_arg,
                "--kustomization",
                substituted.to_str().unwrap_or_default(),
            ],
            GITOPS,
            &htdev,
        ]),
        None,
    );
    assert_eq!(out.code, Some(2), "{}", out.stdout);
    assert!(
        out.stderr
            .contains("substitute from 'ConfigMap/vars' error: not found in namespace cozy-fluxcd"),
        "{}",
        out.stderr
    );
    // Two files holding one object: kustomize refuses the build, so nothing lands: exit 2.
    std::fs::copy(folder.join("bucket.yaml"), folder.join("again.yaml"))
        .unwrap_or_else(|e| panic!("{e}"));
    let out = check(
        &args(&[&[folder_arg, "--kustomization", ks], GITOPS, &htdev]),
        None,
    );
    assert_eq!(out.code, Some(2), "{}", out.stdout);
    assert!(
        out.stderr
            .contains("may not add resource with an already registered id"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_server_side_apply_keeps_what_the_manifest_omits_unless_flux_alone_owned_it() {
    // The Tenant ktj manifest leaves etcd out. cozystack-api keeps no managed fields of an
    // Application, so every live field is before-first-apply's and stays: etcd is not turned off
    // (no removal to judge). The release cache leaves authEnabled (kustomize-controller's alone:
    // removed) and size (kubectl-edit's: kept) out.
    let set = write(
        "omits.yaml",
        "apiVersion: apps.cozystack.io/v1alpha1\nkind: Tenant\nmetadata: {name: ktj, namespace: tenant-root}\nspec: {monitoring: true}\n---\napiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: cache, namespace: tenant-ktj-htdev}\nspec:\n  chart:\n    spec:\n      chart: redis\n      sourceRef: {kind: HelmRepository, name: bitnami}\n  interval: 10m\n  values: {replicas: 3}\n",
    );
    let set = set.to_str().unwrap_or_default();
    // The Kustomization also applied Postgres db once; it no longer carries its owner labels
    // (the bundled release has none), so the prune leaves it.
    let inventory = write(
        "htdev-kept.yaml",
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: htdev, namespace: cozy-fluxcd}\nspec: {prune: true, path: ./tenants/htdev, sourceRef: {kind: GitRepository, name: platform}}\nstatus:\n  inventory:\n    entries:\n    - {id: tenant-ktj-htdev_cache_helm.toolkit.fluxcd.io_HelmRelease, v: v2}\n    - {id: tenant-ktj-htdev_db_apps.cozystack.io_Postgres, v: v1alpha1}\n",
    );
    let inventory = inventory.to_str().unwrap_or_default();
    let out = check(
        &args(&[&[set, "--inventory", inventory], GITOPS, FLUX]),
        None,
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(
        out.stdout,
        format!(
            "Kustomization cozy-fluxcd/htdev prunes 1 of the 2 objects its live status.inventory ({inventory}) lists; these DELETEs will be judged, as system:serviceaccount:cozy-fluxcd:flux (groups system:serviceaccounts, system:serviceaccounts:cozy-fluxcd, system:authenticated) (Flux sends one for each that carries its owner labels): Postgres tenant-ktj-htdev/db\n\
             \n\
             stage 3, resources: every other object, all dry-run before any is applied\n\
             ALLOWED  UPDATE Tenant tenant-root/ktj ({set}, document 1)\n\
             ALLOWED  UPDATE HelmRelease tenant-ktj-htdev/cache ({set}, document 2)\n\
             prune: what the change set no longer holds, in reverse apply order, once every stage has applied\n\
             UNCHANGED Postgres tenant-ktj-htdev/db ({inventory}, inventory entry 2): left in place: the object in the cluster does not carry the owner labels of Kustomization cozy-fluxcd/htdev (kustomize.toolkit.fluxcd.io/name: htdev, kustomize.toolkit.fluxcd.io/namespace: cozy-fluxcd), so Flux's garbage collection skips it\n\
             \n3 manifests: 2 writes judged (2 allowed, 0 with warnings, 0 denied), 0 not judged by this policy, 0 absent, 0 errors\n\
             1 left as they are by Flux\n"
        )
    );
    let json_out = check(
        &args(&[
            &[set, "--inventory", inventory, "--output", "json"],
            GITOPS,
            FLUX,
        ]),
        None,
    );
    let report: Value = serde_json::from_str(&json_out.stdout).unwrap_or_else(|e| panic!("{e}"));
    let tenant = &report["steps"][0]["request"]["object"];
    assert_eq!(tenant["spec"], json!({"etcd": true, "monitoring": true}));
    // Flux's owner labels, stamped on what it applies.
    assert_eq!(
        tenant["metadata"]["labels"],
        json!({"kustomize.toolkit.fluxcd.io/name": "htdev", "kustomize.toolkit.fluxcd.io/namespace": "cozy-fluxcd"})
    );
    let cache = &report["steps"][1]["request"]["object"];
    assert_eq!(
        cache["spec"]["values"],
        json!({"replicas": 3, "size": "2Gi"})
    );
    assert_eq!(
        cache["metadata"]["finalizers"],
        json!(["finalizers.fluxcd.io"])
    );
    assert!(cache["metadata"].get("managedFields").is_none());

    // Applied one by one by another manager (kubectl), nothing of Flux's is removed.
    let by_hand = check(
        &args(&[&[set, "--output", "json"], GITOPS, FLUX, IN_ORDER]),
        None,
    );
    let report: Value = serde_json::from_str(&by_hand.stdout).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        report["steps"][1]["request"]["object"]["spec"]["values"],
        json!({"authEnabled": true, "replicas": 3, "size": "2Gi"})
    );
}

#[test]
fn a_release_name_another_release_holds_fails_after_admission() {
    // ExternalDNS releases take the app's own name: `cache` is the HelmRelease the Kustomization
    // applied as it is. cozystack-api runs the admission chain, then creates the release, and
    // the API server answers 409 (pkg/registry/apps/application/rest.go, Create).
    let set = write(
        "taken.yaml",
        "apiVersion: apps.cozystack.io/v1alpha1\nkind: ExternalDNS\nmetadata: {name: cache, namespace: tenant-ktj-htdev}\nspec: {}\n",
    );
    let set = set.to_str().unwrap_or_default();
    let out = check(&args(&[&[set], GITOPS, FLUX]), None);
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert_eq!(
        out.stdout.lines().nth(1).unwrap_or_default(),
        format!(
            "REJECTED CREATE ExternalDNS tenant-ktj-htdev/cache ({set}, document 1): cozystack-api refuses it after admission: failed to create HelmRelease: helmreleases.helm.toolkit.fluxcd.io \"cache\" already exists (a HelmRelease of no app holds the name in tenant-ktj-htdev); choose another name | {DRY_RUN_FAILS}"
        )
    );
}

#[test]
fn a_sub_tenant_over_its_parent_s_quota_is_refused_where_cozystack_api_checks_quotas() {
    // tenant-ktj is given a CPU quota, then a child of it asks for more than that: from v1.6.0
    // cozystack-api refuses the create before admission (validateTenantResourceQuotas,
    // pkg/registry/apps/application/rest.go); v1.5.x's takes it.
    let set = write(
        "quota.yaml",
        "apiVersion: apps.cozystack.io/v1alpha1\nkind: Tenant\nmetadata: {name: ktj, namespace: tenant-root}\nspec: {monitoring: true, etcd: true, resourceQuotas: {cpu: \"4\", memory: 8Gi}}\n---\napiVersion: apps.cozystack.io/v1alpha1\nkind: Tenant\nmetadata: {name: web, namespace: tenant-ktj}\nspec: {resourceQuotas: {cpu: \"6\", memory: 2Gi}}\n",
    );
    let set = set.to_str().unwrap_or_default();
    let settings = |release: &str| {
        let path = write(
            &format!("quota-settings-{release}.json"),
            &json!({"platformWriters": "warn", "definitionSource": "builtin", "cozystackRelease": release}).to_string(),
        );
        path.to_str().unwrap_or_default().to_owned()
    };
    // A cluster administrator applies `set` in order under the settings naming `release`.
    let apply = |set: &str, release: &str| {
        let settings = settings(release);
        check(
            &[
                set,
                "--dump",
                "e2e/cluster",
                "--settings",
                &settings,
                "--in-order",
                "--as",
                "rita",
                "--as-group",
                "cozystack-cluster-admin",
            ],
            None,
        )
    };
    let out = apply(set, "v1.6.2");
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert_eq!(
        out.stdout.lines().nth(1).unwrap_or_default(),
        format!(
            "REJECTED Tenant tenant-ktj/web ({set}, document 2): cozystack-api refuses it before admission: Tenant.apps.cozystack.io \"web\" is invalid: spec.resourceQuotas[cpu]: Forbidden: requested 6 exceeds the parent tenant's remaining \"cpu\" quota of 4 (parent allows 4, 0 already allocated to sibling tenants, 0 currently in use by the parent pool); a child tenant may not be granted more quota than its parent has left | not applied: the manifests after it are judged without it"
        ),
        "{}",
        out.stdout
    );
    assert!(
        out.stderr
            .contains("Release: judged for Cozystack v1.6.2; the cluster's is unknown"),
        "{}",
        out.stderr
    );
    let out = apply(set, "v1.5.3");
    assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
    // An existing child raised over it: admitted by the policy, then refused by cozystack-api.
    let raise = write(
        "quota-raise.yaml",
        "apiVersion: apps.cozystack.io/v1alpha1\nkind: Tenant\nmetadata: {name: ktj, namespace: tenant-root}\nspec: {monitoring: true, etcd: true, resourceQuotas: {cpu: \"4\"}}\n---\napiVersion: apps.cozystack.io/v1alpha1\nkind: Tenant\nmetadata: {name: htdev, namespace: tenant-ktj}\nspec: {resourceQuotas: {cpu: \"5\"}}\n",
    );
    let raise = raise.to_str().unwrap_or_default();
    let out = apply(raise, "main");
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert!(
        out.stdout.lines().nth(1).unwrap_or_default().starts_with(&format!(
            "REJECTED UPDATE Tenant tenant-ktj/htdev ({raise}, document 2): cozystack-api refuses it after admission: Tenant.apps.cozystack.io \"htdev\" is invalid: spec.resourceQuotas[cpu]: Forbidden: requested 5 exceeds the parent tenant's remaining \"cpu\" quota of 4 "
        )),
        "{}",
        out.stdout
    );
}

#[test]
fn kustomizations_are_judged_in_depends_on_order_each_on_what_the_ones_before_left() {
    // The split `check` advises for a new Tenant and its apps: one Kustomization applies the
    // Tenant, a second, naming it in spec.dependsOn, the apps in its namespace.
    let root = scratch("depends-on");
    let _ = std::fs::remove_dir_all(&root);
    for (path, text) in [
        (".git/HEAD", ""),
        (
            "tenants/shop.yaml",
            "apiVersion: apps.cozystack.io/v1alpha1\nkind: Tenant\nmetadata: {name: shop, namespace: tenant-root}\nspec: {}\n",
        ),
        (
            "apps/db.yaml",
            "apiVersion: apps.cozystack.io/v1alpha1\nkind: Postgres\nmetadata: {name: db, namespace: tenant-shop}\nspec: {}\n",
        ),
    ] {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap_or(&root)).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("{e}"));
    }
    let kustomization = |name: &str, fields: &str| {
        write(
            &format!("ks-{name}.yaml"),
            &format!("apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {{name: {name}, namespace: cozy-fluxcd}}\nspec: {{prune: true, path: ./{name}, sourceRef: {{kind: GitRepository, name: platform}}{fields}}}\n"),
        )
        .to_str()
        .unwrap_or_default()
        .to_owned()
    };
    let root_arg = root.to_str().unwrap_or_default();
    let apps = kustomization("apps", ", dependsOn: [{name: tenants}]");
    // The apps' Kustomization, given first, beside the Tenant's.
    let with_apps = |tenants: &str| {
        check(
            &args(&[
                &[
                    root_arg,
                    "--kustomization",
                    &apps,
                    "--kustomization",
                    tenants,
                ],
                DUMP,
                FLUX,
            ]),
            None,
        )
    };
    // Given apps first: dependsOn orders them. With spec.wait on the Tenant's Kustomization,
    // the apps apply once helm-controller has made tenant-shop.
    let waiting = kustomization("tenants", ", wait: true");
    let out = with_apps(&waiting);
    assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
    let tenant = out.stdout.find("ALLOWED  CREATE Tenant tenant-root/shop (");
    let db = out.stdout.find("ALLOWED  CREATE Postgres tenant-shop/db (");
    assert!(
        tenant.is_some() && db.is_some() && tenant < db,
        "{}",
        out.stdout
    );
    // Without it, the Tenant's Kustomization is Ready as soon as it applied: the apps come
    // before helm-controller has made the namespace, and the API server refuses them.
    let hasty = kustomization("tenants", "");
    let out = with_apps(&hasty);
    assert_eq!(out.code, Some(1), "{}", out.stdout);
    assert!(
        out.stdout.contains("REJECTED Postgres tenant-shop/db (")
            && out.stdout.contains("namespaces \"tenant-shop\" not found"),
        "{}",
        out.stdout
    );
    // A dependency whose apply fails is never Ready: what depends on it is not applied.
    std::fs::write(
        root.join("tenants/shop.yaml"),
        "apiVersion: apps.cozystack.io/v1alpha1\nkind: Tenant\nmetadata: {name: my-shop, namespace: tenant-root}\nspec: {}\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let out = with_apps(&waiting);
    assert_eq!(out.code, Some(1), "{}", out.stdout);
    assert!(
        out.stdout.contains("BLOCKED  Postgres tenant-shop/db (") && out.stdout.contains("not applied: it depends on the Kustomization cozy-fluxcd/tenants, whose apply failed, so it is never Ready"),
        "{}",
        out.stdout
    );
    // A cycle: kustomize-controller applies none of them, each waiting for the other to be
    // Ready at this revision; the run fails, both named, and nothing of theirs is judged.
    let cyclic = kustomization("tenants", ", dependsOn: [{name: apps}]");
    let out = with_apps(&cyclic);
    assert_eq!(out.code, Some(1), "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains("BLOCKED  Tenant tenant-root/my-shop (")
            && out.stdout.contains("BLOCKED  Postgres tenant-shop/db (")
            && out.stdout.contains("FAILED: Kustomization cozy-fluxcd/apps never applies: dependency 'cozy-fluxcd/tenants' is not ready")
            && out.stdout.contains("cozy-fluxcd/apps, cozy-fluxcd/tenants depend on each other in a cycle"),
        "{}",
        out.stdout
    );
}

#[test]
fn a_kustomization_is_read_from_the_dump_or_the_cluster_by_its_name() {
    let folder = scratch("named-kustomization");
    let _ = std::fs::remove_dir_all(&folder);
    std::fs::create_dir_all(folder.join(".git")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        folder.join("bucket.yaml"),
        "apiVersion: apps.cozystack.io/v1alpha1\nkind: Bucket\nmetadata: {name: media}\nspec: {}\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let kustomization: Value = serde_yaml::from_str(
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: htdev, namespace: cozy-fluxcd}\nspec: {prune: true, path: ./, targetNamespace: tenant-ktj-htdev, namePrefix: team-, sourceRef: {kind: GitRepository, name: platform}}\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let flux_dump = write(
        "flux-objects.yaml",
        &serde_yaml::to_string(&kustomization).unwrap_or_default(),
    );
    let folder_arg = folder.to_str().unwrap_or_default();
    let expected = format!(
        "ALLOWED  CREATE Bucket tenant-ktj-htdev/team-media ({folder_arg} (built as cozy-fluxcd/htdev builds it), document 1)"
    );
    let with_flux = [GITOPS, &["--dump", flux_dump.to_str().unwrap_or_default()]].concat();
    let out = check(
        &args(&[
            &[folder_arg, "--kustomization", "cozy-fluxcd/htdev"],
            &with_flux,
            FLUX,
        ]),
        None,
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stdout.contains(&expected), "{}", out.stdout);
    let out = check(
        &args(&[
            &[folder_arg, "--kustomization", "cozy-fluxcd/nope"],
            &with_flux,
            FLUX,
        ]),
        None,
    );
    assert_eq!(out.code, Some(2), "{}", out.stdout);
    assert!(
        out.stderr
            .contains("Kustomization cozy-fluxcd/nope: not in the dump"),
        "{}",
        out.stderr
    );
    // Live: a namespaced GET of the Kustomization from the API.
    let mut objects: Vec<Value> = ClusterObjects::read_dump(&[
        workspace().join("e2e/cluster"),
        workspace().join("cli/tests/dumps/gitops.yaml"),
    ])
    .unwrap_or_else(|e| panic!("{e}"))
    .values()
    .collect();
    objects.push(kustomization);
    let api = loopback::serve(objects, None, 500, &scratch("loopback-named"));
    let out = check(
        &args(&[
            &[folder_arg, "--kustomization", "cozy-fluxcd/htdev"],
            &["--settings", "deploy/policy-protect.yaml"],
            FLUX,
        ]),
        Some(&api.kubeconfig),
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stdout.contains(&expected), "{}", out.stdout);
    let seen = api.seen.lock().unwrap_or_else(|e| e.into_inner()).clone();
    assert!(
        seen.iter().any(|url| url.starts_with(
            "/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/cozy-fluxcd/kustomizations/htdev"
        )),
        "{seen:?}"
    );
}

/// The deploy guide's end-to-end check (`kubectl -n tenant-x create -f
/// deploy/second-monitoring.yaml --as=alice --as-group=tenant-x-admin`), applied to the bundled
/// cluster as the API server would send it: refused with the cardinality message it promises.
#[test]
fn the_deploy_guide_s_check_is_refused_as_it_says() {
    let out = check(
        &[
            "deploy/second-monitoring.yaml",
            "-n",
            "tenant-ktj",
            "--dump",
            "e2e/cluster",
            "--as",
            "alice",
            "--as-group",
            "tenant-ktj-admin",
            "--in-order",
        ],
        None,
    );
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert!(
        out.stdout.starts_with("DENIED   CREATE Monitoring tenant-ktj/monitoring-2 (deploy/second-monitoring.yaml, document 1): Monitoring: at most 1 per tenant tenant-ktj; already present: monitoring; use or edit the existing Monitoring instead of creating another (cardinality tenant/1)"),
        "{}",
        out.stdout
    );
}
