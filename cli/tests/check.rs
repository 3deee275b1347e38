//! `check` end to end on the bundled example cluster (`e2e/cluster`, object by object as
//! Cozystack renders it) with the stock deployment's settings: a change set judged in order,
//! each admitted write applied before the next, from a dump and live through a loopback API
//! that answers SelfSubjectReview; its verdicts the module's own, byte for byte.

mod checking;
mod common;

use std::process::Command;
use std::sync::Arc;

use cozystack_e2e::loopback;
use cozystack_policy::source::Source;
use cozystack_policy_runtime::cluster::ClusterObjects;
use serde_json::{Value, json};

use checking::*;
use common::{scratch, workspace};

#[test]
fn a_change_set_applied_in_order_is_judged_as_admission_would() {
    let commit = write("tenant-commit.yaml", TENANT_COMMIT);
    let commit = commit.to_str().unwrap_or_default();

    // The second Monitoring is refused, naming the first of the same change set; the edit is an
    // UPDATE; the ConfigMap is counted, not dropped.
    let out = check(&args(&[&[commit], DUMP, ALICE, IN_ORDER]), None);
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert_eq!(out.judged_by.as_deref(), Some(PROTECT_JUDGED_BY));
    let origin = |n: usize| format!("{commit}, document {n}");
    assert_eq!(
        out.stdout,
        format!(
            "ALLOWED  CREATE Monitoring tenant-acme/monitoring ({})\n\
             DENIED   CREATE Monitoring tenant-acme/metrics ({}): {SECOND_MONITORING} | not applied: the manifests after it are judged without it\n\
             ALLOWED  UPDATE Postgres tenant-acme/shop ({})\n\
             SKIPPED  ConfigMap tenant-acme/shop-config ({}): not judged by this policy (it matches Applications, HelmReleases and Namespaces)\n\
             \n4 manifests: 3 writes judged (2 allowed, 0 with warnings, 1 denied), 1 not judged by this policy, 0 absent, 0 errors\n",
            origin(1),
            origin(2),
            origin(3),
            origin(4)
        )
    );
    assert!(
        out.stderr
            .contains("judging 4 manifests and 0 deletions as alice (groups tenant-acme-admin, system:authenticated)"),
        "{}",
        out.stderr
    );

    // JSON: every request and response; the UPDATE's old object is the Application
    // cozystack-api reads the release as, its new one the apply over it.
    let saved = scratch("saved");
    let _ = std::fs::remove_dir_all(&saved);
    let saved_arg = saved.to_str().unwrap_or_default();
    let out = check(
        &args(&[
            &[commit, "--output", "json", "--save-requests", saved_arg],
            DUMP,
            ALICE,
            IN_ORDER,
        ]),
        None,
    );
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    let report: Value = serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(report["judgedBy"], PROTECT_JUDGED_BY);
    let steps = report["steps"].as_array().cloned().unwrap_or_default();
    assert_eq!(steps.len(), 4);
    // The refusal names the row of the rule table that made it.
    assert_eq!(
        (&steps[1]["outcome"], &steps[1]["rule"]),
        (&json!("denied"), &json!("cardinality"))
    );
    assert_eq!(steps[0]["rule"], Value::Null);
    let update = &steps[2]["request"];
    assert_eq!(update["operation"], "UPDATE");
    assert_eq!(
        update["resource"],
        json!({"group": "apps.cozystack.io", "version": "v1alpha1", "resource": "postgreses"})
    );
    assert_eq!(
        update["oldObject"],
        json!({"apiVersion": "apps.cozystack.io/v1alpha1", "kind": "Postgres",
            "metadata": {"name": "shop", "namespace": "tenant-acme",
                // The release's own, as cozystack-api reads them into the Application.
                "uid": "6f1c0d2e-0000-4000-8000-00000000007d", "resourceVersion": "989875",
                "creationTimestamp": "2026-11-02T09:14:07Z"},
            "spec": {"replicas": 2}})
    );
    assert_eq!(update["object"]["spec"], json!({"replicas": 3}));
    assert_eq!(steps[1]["outcome"], "denied");
    assert_eq!(steps[1]["applied"], false);
    assert_eq!(steps[3]["outcome"], "notJudged");
    assert_eq!(
        report["summary"],
        json!({"manifests": 4, "allowed": 2, "warn": 0, "denied": 1, "notJudged": 1, "absent": 0, "errors": 0, "rejected": 0, "unchanged": 0, "blocked": 0})
    );

    // Byte for byte the module's answer: each saved request, on the cluster it was judged on,
    // through the runtime as the policy-server runs it.
    let (policy, _) = Source::Embedded
        .load(None)
        .unwrap_or_else(|e| panic!("{e}"));
    let settings =
        cozystack_policy::settings::read(Some(&workspace().join("deploy/policy-protect.yaml")))
            .unwrap_or_else(|e| panic!("{e}"))
            .value()
            .clone();
    let judged: Vec<&Value> = steps.iter().filter(|s| !s["request"].is_null()).collect();
    assert_eq!(judged.len(), 3);
    for step in &judged {
        // Saved by the request's number, the platform's own requests between them.
        let uid = step["request"]["uid"].as_str().unwrap_or_default();
        let n: usize = uid.trim_start_matches("check-").parse().unwrap_or_default();
        let review: Value = serde_json::from_str(
            &std::fs::read_to_string(saved.join(format!("{n:04}.request.json")))
                .unwrap_or_else(|e| panic!("{e}")),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(review["request"], step["request"]);
        let cluster = ClusterObjects::read_dump(&[saved.join(format!("{n:04}.cluster.yaml"))])
            .unwrap_or_else(|e| panic!("{e}"));
        let answer = policy
            .validate(&review["request"], &settings, Arc::new(cluster), Vec::new())
            .unwrap_or_else(|e| panic!("{e}"))
            .response;
        assert_eq!(answer, step["response"], "request {n}");
        assert_eq!(answer["message"], step["message"], "request {n}");
    }
    // The second manifest was judged on the cluster with the first Monitoring's release, which
    // cozystack-api wrote and helm-controller finalized before it (their requests are saved too).
    let uid = judged[1]["request"]["uid"].as_str().unwrap_or_default();
    assert_eq!(
        uid, "check-0004",
        "the client's, cozystack-api's, helm-controller's, then it"
    );
    let second = ClusterObjects::read_dump(&[saved.join("0004.cluster.yaml")])
        .unwrap_or_else(|e| panic!("{e}"));
    let first = second
        .find("HelmRelease/tenant-acme/monitoring")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        first["metadata"]["labels"]["apps.cozystack.io/application.kind"],
        "Monitoring"
    );

    // JUnit, read by a real XML parser: one test case per manifest.
    let out = check(
        &args(&[&[commit, "--output", "junit"], DUMP, ALICE, IN_ORDER]),
        None,
    );
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    let xml = roxmltree::Document::parse(&out.stdout).unwrap_or_else(|e| panic!("{e}"));
    let suite = xml
        .descendants()
        .find(|n| n.has_tag_name("testsuite"))
        .unwrap_or_else(|| panic!("no testsuite: {}", out.stdout));
    assert_eq!(
        (
            suite.attribute("tests"),
            suite.attribute("failures"),
            suite.attribute("skipped")
        ),
        (Some("4"), Some("1"), Some("1"))
    );
    let cases: Vec<_> = suite
        .children()
        .filter(|n| n.has_tag_name("testcase"))
        .collect();
    assert_eq!(cases.len(), 4);
    assert_eq!(
        cases[1].attribute("name"),
        Some("CREATE Monitoring tenant-acme/metrics")
    );
    let failure = cases[1]
        .children()
        .find(|n| n.has_tag_name("failure"))
        .unwrap_or_else(|| panic!("no failure: {}", out.stdout));
    assert_eq!(failure.attribute("message"), Some(SECOND_MONITORING));
    assert_eq!(failure.attribute("type"), Some("cardinality"));
    assert_eq!(failure.text(), Some(SECOND_MONITORING));
    assert!(cases[3].children().any(|n| n.has_tag_name("skipped")));
    // The suite names the settings that judged it.
    let judged_by = suite
        .descendants()
        .find(|n| n.has_tag_name("property") && n.attribute("name") == Some("judgedBy"))
        .and_then(|n| n.attribute("value"));
    assert_eq!(judged_by, Some(PROTECT_JUDGED_BY));

    // Live: the same verdicts, and who applies is asked of the API server.
    let objects = ClusterObjects::read_dump(&[workspace().join("e2e/cluster")])
        .unwrap_or_else(|e| panic!("{e}"))
        .values()
        .collect();
    let api = loopback::serve_as(
        objects,
        None,
        500,
        &scratch("loopback"),
        ("alice", &["tenant-acme-admin", "system:authenticated"]),
    );
    let live = check(
        &[
            commit,
            "--settings",
            "deploy/policy-protect.yaml",
            "--in-order",
        ],
        Some(&api.kubeconfig),
    );
    assert_eq!(live.code, Some(1), "{}", live.stderr);
    let from_dump = check(&args(&[&[commit], DUMP, ALICE, IN_ORDER]), None);
    assert_eq!(live.stdout, from_dump.stdout);
    assert!(
        live.stderr.contains(&format!(
            "identity: alice (SelfSubjectReview in context loopback at {})",
            api.url
        )),
        "{}",
        live.stderr
    );
    let seen = api.seen.lock().map(|s| s.clone()).unwrap_or_default();
    assert!(
        seen.iter().any(|url| url.split('?').next()
            == Some("/apis/authentication.k8s.io/v1/selfsubjectreviews")),
        "{seen:?}"
    );
}

/// The root Tenant's ingress switched off in the commit that adds a consumer of it.
const INGRESS_OFF: &str = "\
apiVersion: apps.cozystack.io/v1alpha1
kind: Tenant
metadata: {name: root, namespace: tenant-root}
spec: {host: example.org, ingress: false, monitoring: true, etcd: true, isolated: true, seaweedfs: true}
";
const BUCKET: &str = "\
apiVersion: apps.cozystack.io/v1alpha1
kind: Bucket
metadata: {name: assets, namespace: tenant-acme}
spec: {}
";

#[test]
fn a_switch_turned_off_and_a_prune_meet_what_the_change_set_adds() {
    let off_first = write(
        "ingress-off-first.yaml",
        &format!("{INGRESS_OFF}---\n{BUCKET}"),
    );
    let off_first = off_first.to_str().unwrap_or_default();
    let bucket_first = write("bucket-first.yaml", &format!("{BUCKET}---\n{INGRESS_OFF}"));
    let bucket_first = bucket_first.to_str().unwrap_or_default();
    let removal = |consumers: &str, admitted: &str| {
        format!(
            "Tenant tenant-root/root: turning ingress off removes Ingress tenant-root/ingress: Ingress tenant-root/ingress is protected while it provides ingress to consumers: {consumers}; delete or move those consumers first, or give their tenants another ingress provider (protection.deletion: protect){admitted}"
        )
    };
    let awaiting = "Bucket consumes ingress, and namespace tenant-acme resolves it to tenant-root (namespace.cozystack.io/ingress), but tenant-root runs no live ingress provider that serves tenant-acme: the app gets no ingress until tenant-root provides ingress or this tenant gets its own";
    let flux_admits = " (admitted because system:serviceaccount:cozy-fluxcd:flux is a platform writer and platformWriters is warn)";

    // Switched off first (a platform writer: admitted with the warning): the Tenant chart
    // uninstalls tenant-root's Ingress, so the Bucket after it awaits one.
    let out = check(&args(&[&[off_first], DUMP, FLUX, IN_ORDER]), None);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(
        lines[0],
        format!(
            "WARN     UPDATE Tenant tenant-root/root ({off_first}, document 1) | warning: {}",
            removal(
                "tenant-acme/media (Bucket), tenant-acme/storefront (Kubernetes), tenant-ktj-htdev/dev (Kubernetes), tenant-ktj/monitoring (Monitoring), tenant-root/cozy-backups (Bucket) and 2 more",
                flux_admits
            )
        )
    );
    assert_eq!(
        lines[1],
        format!(
            "WARN     CREATE Bucket tenant-acme/assets ({off_first}, document 2) | warning: {awaiting}"
        )
    );

    // A gate that fails on warnings: the same change set, nothing refused, exits with the code
    // asked for, as kyverno's --warn-exit-code.
    let gate = check(
        &args(&[
            &[off_first],
            DUMP,
            FLUX,
            IN_ORDER,
            &["--warn-exit-code", "3"],
        ]),
        None,
    );
    assert_eq!(gate.code, Some(3), "{}", gate.stderr);
    assert_eq!(gate.stdout, out.stdout);

    // The consumer first: the switch-off names it among the consumers.
    let out = check(&args(&[&[bucket_first], DUMP, FLUX, IN_ORDER]), None);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(
        lines[0],
        format!("ALLOWED  CREATE Bucket tenant-acme/assets ({bucket_first}, document 1)")
    );
    assert!(
        lines[1].contains("consumers: tenant-acme/assets (Bucket), tenant-acme/media (Bucket),"),
        "{}",
        lines[1]
    );

    // Platform writers denied: the switch-off is refused and not applied, so the Bucket after it
    // finds the ingress still there.
    let mut settings =
        cozystack_policy::settings::read(Some(&workspace().join("deploy/policy-protect.yaml")))
            .unwrap_or_else(|e| panic!("{e}"))
            .value()
            .clone();
    settings["platformWriters"] = json!("deny");
    let deny = write("deny.json", &settings.to_string());
    let deny = deny.to_str().unwrap_or_default();
    let out = check(
        &args(&[
            &[off_first, "--dump", "e2e/cluster", "--settings", deny],
            FLUX,
            IN_ORDER,
        ]),
        None,
    );
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert!(
        lines[0].starts_with(&format!(
            "DENIED   UPDATE Tenant tenant-root/root ({off_first}, document 1): Tenant tenant-root/root: turning ingress off"
        )) && lines[0].ends_with(" | not applied: the manifests after it are judged without it"),
        "{}",
        lines[0]
    );
    assert_eq!(
        lines[1],
        format!("ALLOWED  CREATE Bucket tenant-acme/assets ({off_first}, document 2)")
    );

    // A prune of a consumed provider, by its tenant's administrator: refused, naming the
    // consumer; a prune of what is not there is no request at all.
    let empty = write("empty.yaml", "");
    let empty = empty.to_str().unwrap_or_default();
    let pruned = write(
        "pruned.yaml",
        "apiVersion: apps.cozystack.io/v1alpha1\nkind: Monitoring\nmetadata: {name: monitoring, namespace: tenant-ktj}\n---\napiVersion: apps.cozystack.io/v1alpha1\nkind: Postgres\nmetadata: {name: gone, namespace: tenant-ktj}\n",
    );
    let pruned = pruned.to_str().unwrap_or_default();
    let consumed = "Monitoring tenant-ktj/monitoring is protected while it provides monitoring to consumers: tenant-ktj-htdev/dev (Kubernetes); delete or move those consumers first, or give their tenants another monitoring provider (protection.deletion: protect)";
    let ktj_admin = &["--as", "bob", "--as-group", "tenant-ktj-admin"];
    let out = check(
        &args(&[&[empty, "--delete", pruned], DUMP, ktj_admin, IN_ORDER]),
        None,
    );
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert_eq!(
        out.stdout,
        format!(
            "DENIED   DELETE Monitoring tenant-ktj/monitoring ({pruned}, document 1): {consumed} | not applied: the manifests after it are judged without it\n\
             ABSENT   Postgres tenant-ktj/gone ({pruned}, document 2): the cluster has no such object: nothing to delete (the API server answers 404 before any admission)\n\
             \n2 manifests: 1 writes judged (0 allowed, 0 with warnings, 1 denied), 0 not judged by this policy, 1 absent, 0 errors\n"
        )
    );

    // A Namespace prune makes no request (the webhook rules send no Namespace DELETE), and
    // takes what is in it: the Postgres pruned after it is absent.
    let namespace = write(
        "namespace.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: tenant-acme}\n---\napiVersion: apps.cozystack.io/v1alpha1\nkind: Postgres\nmetadata: {name: shop, namespace: tenant-acme}\n",
    );
    let namespace = namespace.to_str().unwrap_or_default();
    let out = check(
        &args(&[&[empty, "--delete", namespace], DUMP, ALICE, IN_ORDER]),
        None,
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(
        out.stdout.lines().take(2).collect::<Vec<_>>(),
        [
            format!(
                "SKIPPED  Namespace tenant-acme ({namespace}, document 1): not judged by this policy (its webhook rules send no Namespace DELETE); deleted with everything in it and below it"
            ),
            format!(
                "ABSENT   Postgres tenant-acme/shop ({namespace}, document 2): the cluster has no such object: nothing to delete (the API server answers 404 before any admission)"
            ),
        ]
    );

    // Flux sorts what it applies: whichever file comes first, the Bucket (kind Bucket) lands
    // before the switch-off (kind Tenant) is applied, and the switch-off names it. Both are
    // dry-run first, on the cluster before either.
    let flux_off_first = check(&args(&[&[off_first], DUMP, FLUX]), None);
    let flux_bucket_first = check(&args(&[&[bucket_first], DUMP, FLUX]), None);
    assert_eq!(flux_off_first.code, Some(0), "{}", flux_off_first.stderr);
    let lines: Vec<&str> = flux_off_first.stdout.lines().collect();
    assert_eq!(
        lines[..2],
        [
            "stage 3, resources: every other object, all dry-run before any is applied",
            format!("ALLOWED  CREATE Bucket tenant-acme/assets ({off_first}, document 2)").as_str(),
        ]
    );
    assert!(
        lines[2].starts_with(&format!(
            "WARN     UPDATE Tenant tenant-root/root ({off_first}, document 1) | warning: "
        )) && lines[2]
            .contains("consumers: tenant-acme/assets (Bucket), tenant-acme/media (Bucket),"),
        "{}",
        lines[2]
    );
    assert_eq!(
        flux_off_first.stdout.replace("ingress-off-first", "X"),
        flux_bucket_first
            .stdout
            .replace("bucket-first", "X")
            .replace("document 2", "document 0")
            .replace("document 1", "document 2")
            .replace("document 0", "document 1")
    );
}

#[test]
fn what_flux_leaves_as_it_is_sends_nothing() {
    // kustomize-controller skips an object marked reconcile: disabled, and one marked
    // ssa: IfNotPresent that exists (fluxcd/pkg ssa, shouldSkipApply): no request, nothing applied.
    let (set, out) = flux_applies(
        "left-alone.yaml",
        "apiVersion: apps.cozystack.io/v1alpha1\nkind: Postgres\nmetadata: {name: shop, namespace: tenant-acme, annotations: {kustomize.toolkit.fluxcd.io/ssa: IfNotPresent}}\nspec: {replicas: 9}\n---\napiVersion: apps.cozystack.io/v1alpha1\nkind: Monitoring\nmetadata: {name: metrics, namespace: tenant-acme, labels: {kustomize.toolkit.fluxcd.io/reconcile: disabled}}\nspec: {}\n---\napiVersion: apps.cozystack.io/v1alpha1\nkind: Postgres\nmetadata: {name: orders, namespace: tenant-acme, annotations: {kustomize.toolkit.fluxcd.io/ssa: IfNotPresent}}\nspec: {}\n",
        0,
    );
    // In Flux's order: kind, then namespace and name.
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(
        lines[1..4],
        [
            format!(
                "UNCHANGED Monitoring tenant-acme/metrics ({set}, document 2): left as it is: the manifest carries kustomize.toolkit.fluxcd.io/reconcile: disabled, so Flux applies nothing and sends no request"
            ),
            // A new object is created once, IfNotPresent or not: judged as any.
            format!("ALLOWED  CREATE Postgres tenant-acme/orders ({set}, document 3)"),
            format!(
                "UNCHANGED Postgres tenant-acme/shop ({set}, document 1): left as it is: the manifest carries kustomize.toolkit.fluxcd.io/ssa: IfNotPresent and the object exists, so Flux applies nothing and sends no request"
            ),
        ]
    );
    assert!(
        out.stdout.ends_with("2 left as they are by Flux\n"),
        "{}",
        out.stdout
    );
}

fn flux_applies(name: &str, text: &str, code: i32) -> (String, Ran) {
    let set = write(name, text).to_str().unwrap_or_default().to_owned();
    let out = check(&args(&[&[set.as_str()], DUMP, FLUX]), None);
    assert_eq!(out.code, Some(code), "{}", out.stderr);
    (set, out)
}

#[test]
fn a_new_tenant_s_apps_wait_for_its_namespace() {
    // One Kustomization with a new Tenant and an app inside it: the Tenant chart makes
    // tenant-shop only once tenant-root/tenant-shop reconciles, so the API server refuses the
    // Postgres before any admission (NamespaceLifecycle), and the change set fails there.
    let (set, out) = flux_applies(
        "new-tenant.yaml",
        "apiVersion: apps.cozystack.io/v1alpha1\nkind: Tenant\nmetadata: {name: shop, namespace: tenant-root}\nspec: {}\n---\napiVersion: apps.cozystack.io/v1alpha1\nkind: Postgres\nmetadata: {name: db, namespace: tenant-shop}\nspec: {}\n",
        1,
    );
    // Flux's dry run of the stage fails on the Postgres; the Tenant's dry run, which
    // cozystack-api does not keep one, has made it already: it stays.
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(
        lines[1],
        format!(
            "REJECTED Postgres tenant-shop/db ({set}, document 2): namespace tenant-shop does not exist when Flux applies this, so the API server refuses it before admission (namespaces \"tenant-shop\" not found): Tenant tenant-root/shop ({set}, document 1) makes it only once its release reconciles; apply this from a second Flux Kustomization with spec.dependsOn naming the one that applies the Tenant (and spec.wait: true there), or after the Tenant is Ready | {DRY_RUN_FAILS}"
        )
    );
    assert_eq!(
        lines[2],
        format!(
            "ALLOWED  CREATE Tenant tenant-root/shop ({set}, document 1) | {LANDED}; it stays although Postgres tenant-shop/db failed the dry run of its stage"
        )
    );
    assert!(
        out.stdout.ends_with(
            "1 refused by the API server before admission\n1 written by cozystack-api during the dry run of a stage that failed: they stay in the cluster\n"
        ),
        "{}",
        out.stdout
    );
    // cozystack-api validates a new Application's name before its admission chain: the policy
    // never sees a Tenant whose name its chart cannot split.
    let (set, out) = flux_applies(
        "dashed-tenant.yaml",
        "apiVersion: apps.cozystack.io/v1alpha1\nkind: Tenant\nmetadata: {name: my-shop, namespace: tenant-root}\nspec: {}\n",
        1,
    );
    assert_eq!(
        out.stdout.lines().nth(1).unwrap_or_default(),
        format!(
            "REJECTED Tenant tenant-root/my-shop ({set}, document 1): cozystack-api refuses it before admission: Tenant.apps.cozystack.io \"my-shop\" is invalid: metadata.name: Invalid value: \"my-shop\": tenant names must start with a lowercase letter and contain only lowercase letters and digits; dashes are not allowed | {DRY_RUN_FAILS}"
        )
    );
    // A version the cluster does not serve: Flux's dry-run fails with "no matches for kind".
    let (set, out) = flux_applies(
        "old-version.yaml",
        "apiVersion: helm.toolkit.fluxcd.io/v2beta2\nkind: HelmRelease\nmetadata: {name: redis-cache, namespace: tenant-acme}\nspec: {}\n",
        1,
    );
    assert!(
        out.stdout.lines().nth(1).unwrap_or_default().starts_with(&format!(
            "REJECTED HelmRelease tenant-acme/redis-cache ({set}, document 1): the API server refuses it before admission: no matches for kind \"HelmRelease\" in version \"helm.toolkit.fluxcd.io/v2beta2\""
        )),
        "{}",
        out.stdout
    );
    // A kind whose definition arrives in the same change set: cozystack-api serves it only
    // once cozystack-controller has restarted it.
    let (set, out) = flux_applies(
        "new-kind.yaml",
        "apiVersion: cozystack.io/v1alpha1\nkind: ApplicationDefinition\nmetadata: {name: valkey}\nspec:\n  application: {kind: Valkey, plural: valkeys, singular: valkey, openAPISchema: '{}'}\n  release: {prefix: valkey-}\n---\napiVersion: apps.cozystack.io/v1alpha1\nkind: Valkey\nmetadata: {name: cache, namespace: tenant-acme}\nspec: {}\n",
        1,
    );
    assert_eq!(
        out.stdout.lines().nth(1).unwrap_or_default(),
        format!(
            "REJECTED Valkey tenant-acme/cache ({set}, document 2): the API server refuses it before admission: cozystack-api does not serve Valkey yet when Flux applies this (no matches for kind \"Valkey\"); its ApplicationDefinition ({set}, document 1) is in this change set, and cozystack-api serves a new kind only once cozystack-controller has restarted it; apply the definition from a Flux Kustomization this one names in spec.dependsOn | {DRY_RUN_FAILS}"
        )
    );
    assert_eq!(
        out.stdout.lines().nth(2).unwrap_or_default(),
        format!(
            "BLOCKED  ApplicationDefinition valkey ({set}, document 1) | not applied: Valkey tenant-acme/cache failed the dry run of its stage"
        )
    );
    // The Namespace in the change set itself is applied first (Flux's first stage), wherever
    // it stands in the files.
    let set = write(
        "namespace-after.yaml",
        "apiVersion: apps.cozystack.io/v1alpha1\nkind: Postgres\nmetadata: {name: db, namespace: lab}\nspec: {}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: lab}\n",
    );
    let out = check(
        &args(&[&[set.to_str().unwrap_or_default()], DUMP, FLUX]),
        None,
    );
    assert!(!out.stdout.contains("REJECTED"), "{}", out.stdout);
}

#[test]
fn a_deleted_release_stays_terminating_while_the_change_set_is_applied() {
    // Flux prunes the consumer's release, then the provider's (the reverse of its apply order:
    // tenant-ktj-htdev after tenant-ktj), whichever way they are listed: helm-controller's
    // finalizer keeps the Kubernetes release, terminating, until it has uninstalled it, after
    // the whole change set, so the policy still counts it when the Etcd release is deleted.
    let provider = write(
        "prune-provider.yaml",
        "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: etcd, namespace: tenant-ktj}\n",
    );
    let consumer = write(
        "prune-consumer.yaml",
        "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: kubernetes-dev, namespace: tenant-ktj-htdev}\n",
    );
    // What the change set still applies: nothing the policy judges.
    let kept = write(
        "prune-kept.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: notes, namespace: tenant-ktj}\n",
    );
    let (provider, consumer, kept) = (
        provider.to_str().unwrap_or_default(),
        consumer.to_str().unwrap_or_default(),
        kept.to_str().unwrap_or_default(),
    );
    let out = check(
        &args(&[
            &["--delete", provider, "--delete", consumer],
            &[kept],
            DUMP,
            FLUX,
        ]),
        None,
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(
        lines[2..5],
        [
            "prune: what the change set no longer holds, in reverse apply order, once every stage has applied",
            format!("ALLOWED  DELETE HelmRelease tenant-ktj-htdev/kubernetes-dev ({consumer}, document 1)").as_str(),
            format!(
                "WARN     DELETE HelmRelease tenant-ktj/etcd ({provider}, document 1) | warning: Etcd tenant-ktj/etcd is protected while it provides etcd to consumers: tenant-ktj-htdev/dev (Kubernetes) terminating; delete or move those consumers first, or give their tenants another etcd provider (protection.deletion: protect) (admitted because system:serviceaccount:cozy-fluxcd:flux is a platform writer and platformWriters is warn)"
            ).as_str(),
        ],
        "{}",
        out.stdout
    );
}

/// A change set with nothing in it is no pass: a wrong path, or a build that wrote nothing.
#[test]
fn an_empty_change_set_is_exit_2_saying_so() {
    let empty = write("empty.yaml", "# nothing yet\n");
    let empty = empty.to_str().unwrap_or_default();
    let out = check(&args(&[&[empty], DUMP, ALICE]), None);
    assert_eq!(out.code, Some(2), "{}", out.stdout);
    assert_eq!(
        out.stderr,
        format!(
            "error: {empty}: the change set holds no manifest: nothing to judge; name the folder or files Flux applies, or pass --allow-empty\n"
        )
    );
    assert!(out.stdout.is_empty() && out.judged_by.is_none());
    let allowed = check(&args(&[&[empty, "--allow-empty"], DUMP, ALICE]), None);
    assert_eq!(allowed.code, Some(0), "{}", allowed.stderr);
    assert_eq!(allowed.judged_by.as_deref(), Some(PROTECT_JUDGED_BY));
}

/// No `--settings` is the stock deployment: the same verdicts as `deploy/policy-protect.yaml`,
/// named as such.
#[test]
fn without_settings_the_verdicts_are_the_deployed_ones() {
    let commit = write("stock-commit.yaml", TENANT_COMMIT);
    let commit = commit.to_str().unwrap_or_default();
    let deployed = check(&args(&[&[commit], DUMP, ALICE]), None);
    let stock = check(&args(&[&[commit, "--dump", "e2e/cluster"], ALICE]), None);
    assert_eq!(deployed.code, Some(1), "{}", deployed.stderr);
    assert_eq!(
        (stock.code, &stock.stdout),
        (deployed.code, &deployed.stdout)
    );
    assert_eq!(
        stock.judged_by.as_deref(),
        Some(
            "judged by: no --settings, the stock deployment; rules: the built-in rule set (cozystack/cozystack 3c780acd); release: any supported Cozystack release (v1.5.0, v1.5.1, v1.5.2, v1.5.3, v1.5.4, v1.6.0, v1.6.1, v1.6.2, main)"
        )
    );
}

#[test]
fn an_unusable_input_is_exit_2_naming_it() {
    let bad = write(
        "bad.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: fine}\n---\nkind: [unclosed\n",
    );
    let bad = bad.to_str().unwrap_or_default();
    let out = check(&args(&[&[bad], DUMP, ALICE]), None);
    assert_eq!(out.code, Some(2));
    assert!(
        out.stderr
            .starts_with(&format!("error: {bad}, document 2: ")),
        "{}",
        out.stderr
    );
    assert!(out.stdout.is_empty());
    // A CI system reading JUnit gets one error naming the file and what is wrong there.
    let junit = check(&args(&[&[bad], DUMP, ALICE, &["--output", "junit"]]), None);
    assert_eq!(junit.code, Some(2));
    let error = junit
        .stderr
        .strip_prefix("error: ")
        .unwrap_or_default()
        .trim_end();
    assert!(
        error.starts_with(&format!("{bad}, document 2: ")),
        "{error}"
    );
    assert!(
        junit.stdout.contains(
            "<testsuite name=\"cozystack-capabilities\" tests=\"1\" failures=\"0\" errors=\"1\" skipped=\"0\">"
        ) && junit.stdout.contains(&format!(
            "<testcase classname=\"{bad}\" name=\"the change set\">\n      <error type=\"unusable\" message=\""
        )) && junit.stdout.contains("document 2: "),
        "{}",
        junit.stdout
    );

    let nameless = write(
        "nameless.yaml",
        "apiVersion: apps.cozystack.io/v1alpha1\nkind: Postgres\nmetadata: {generateName: db-, namespace: tenant-acme}\n",
    );
    let nameless = nameless.to_str().unwrap_or_default();
    let out = check(&args(&[&[nameless], DUMP, ALICE]), None);
    assert_eq!(out.code, Some(2));
    assert_eq!(
        out.stderr,
        format!(
            "error: {nameless}, document 1: Postgres has no metadata.name (generateName is for `kubectl create`; Flux and `kubectl apply` need the name): every object of a change set needs the name it is applied under\n"
        )
    );

    // A Flux overlay is built, never read file by file ("Kustomization has no metadata.name");
    // with no builder on PATH, one line says how to pipe its build in.
    let overlay = scratch("overlay");
    std::fs::create_dir_all(&overlay).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        overlay.join("kustomization.yaml"),
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [tenant.yaml]\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(overlay.join("tenant.yaml"), TENANT_COMMIT).unwrap_or_else(|e| panic!("{e}"));
    let shown = overlay.to_str().unwrap_or_default();
    let mut command = Command::new(env!("CARGO_BIN_EXE_cozystack-policy"));
    command
        .current_dir(workspace())
        .env("PATH", scratch("no-builders"))
        .arg("check")
        .args(args(&[&[shown], DUMP, ALICE]));
    let out = command.output().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "error: {shown} is a kustomize unit (it holds a kustomization) and neither kustomize nor kubectl is on PATH to build it: check what it builds, `kustomize build {shown} | cozystack-policy check -` (or `kubectl kustomize {shown}`, or `flux build kustomization NAME --path {shown}`)\n"
        )
    );

    // A post-build variable left where the policy reads it: not what Flux applies. One in the
    // data of a ConfigMap, or escaped (`$${`), is no matter.
    let variables = write(
        "variables.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: script, namespace: tenant-acme}\ndata: {run.sh: \"echo ${HOME}\"}\n---\napiVersion: apps.cozystack.io/v1alpha1\nkind: Postgres\nmetadata: {name: db, namespace: tenant-acme}\nspec: {size: \"${db_size:=10Gi}\", note: \"$${kept}\"}\n",
    );
    let variables = variables.to_str().unwrap_or_default();
    let out = check(&args(&[&[variables], DUMP, FLUX]), None);
    assert_eq!(out.code, Some(2), "{}", out.stdout);
    assert!(
        out.stderr.ends_with(&format!(
            "error: {variables}, document 2: Postgres tenant-acme/db holds ${{db_size}}, a post-build variable kustomize-controller substitutes (spec.postBuild) before it applies: check the change set with its values, as `flux build kustomization NAME --path DIR` prints it (or pass --in-order to apply it as written)\n"
        )),
        "{}",
        out.stderr
    );
    let escaped = write(
        "escaped.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: script, namespace: tenant-acme}\ndata: {run.sh: \"echo ${HOME}\"}\n---\napiVersion: apps.cozystack.io/v1alpha1\nkind: Postgres\nmetadata: {name: db, namespace: tenant-acme}\nspec: {note: \"$${kept}\"}\n",
    );
    let out = check(
        &args(&[&[escaped.to_str().unwrap_or_default()], DUMP, FLUX]),
        None,
    );
    assert_eq!(out.code, Some(0), "{}{}", out.stdout, out.stderr);

    // Offline, who applies must be said.
    let commit = write("who.yaml", TENANT_COMMIT);
    let out = check(&args(&[&[commit.to_str().unwrap_or_default()], DUMP]), None);
    assert_eq!(out.code, Some(2));
    assert!(
        out.stderr.starts_with("error: --as USER is required with --dump: name who applies the change set (a stock install's Flux applies as system:serviceaccount:cozy-fluxcd:flux"),
        "{}",
        out.stderr
    );

    // A kind no definition serves cannot be written at all.
    let unknown = write(
        "unknown.yaml",
        "apiVersion: apps.cozystack.io/v1alpha1\nkind: Valkey\nmetadata: {name: cache, namespace: tenant-acme}\nspec: {}\n",
    );
    let unknown = unknown.to_str().unwrap_or_default();
    let out = check(&args(&[&[unknown], DUMP, ALICE]), None);
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(
        out.stdout.contains(&format!("\nERROR    Valkey tenant-acme/cache ({unknown}, document 1): the cluster serves no Valkey (no ApplicationDefinition has spec.application.kind Valkey): the API server would answer 404; apply its ApplicationDefinition first | {DRY_RUN_FAILS}\n")),
        "{}",
        out.stdout
    );
}
