//! `check` on a change set shaped like a Cozystack platform repository, as Flux reconciles it:
//! a tenant's GitOps Kustomization applies as the tenant's ServiceAccount, builds with files
//! from a shared `common/` folder, and names its dependency without a namespace; the
//! Kustomizations themselves live in the repository.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{scratch, workspace};

/// The bundled cluster under the deployed settings, as Flux's own account (which a
/// Kustomization's `serviceAccountName` overrides).
const DUMP: &[&str] = &[
    "--dump",
    "e2e/cluster",
    "--settings",
    "deploy/policy-protect.yaml",
];

/// A tenant's Postgres, kept with the platform's shared manifests.
const SHARED_DB: &str = "apiVersion: apps.cozystack.io/v1alpha1\nkind: Postgres\nmetadata: {name: db, namespace: tenant-acme}\nspec: {}\n";

/// An app HelmRelease written directly, as cozystack-api would: only a platform identity may.
const RELEASE: &str = "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: postgres-cache\n  namespace: tenant-acme\n  labels: {apps.cozystack.io/application.kind: Postgres, apps.cozystack.io/application.group: apps.cozystack.io, apps.cozystack.io/application.name: cache}\nspec: {chartRef: {kind: ExternalArtifact, name: cozystack-postgres-application-default-postgres, namespace: cozy-system}, values: {}}\n";

/// A Flux Kustomization of the repository's GitRepository `cozy-fluxcd/platform`.
fn kustomization(namespace: &str, name: &str, path: &str, fields: &str) -> String {
    format!(
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {{name: {name}, namespace: {namespace}}}\nspec: {{prune: true, path: {path}, sourceRef: {{kind: GitRepository, name: platform, namespace: cozy-fluxcd}}{fields}}}\n"
    )
}

/// A platform repository under `name`: `files` as (path, text), with `.git` at its root.
fn repository(name: &str, files: &[(&str, &str)]) -> PathBuf {
    let root = scratch(name);
    let _ = std::fs::remove_dir_all(&root);
    for (path, text) in [(".git/HEAD", "")].iter().chain(files) {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap_or(&root)).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("{e}"));
    }
    root
}

struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn check(args: &[&str]) -> Ran {
    let output = Command::new(env!("CARGO_BIN_EXE_cozystack-policy"))
        .current_dir(workspace())
        .arg("check")
        .args(args)
        .env_remove("KUBECONFIG")
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    Ran {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

fn path(path: &Path) -> &str {
    path.to_str().unwrap_or_default()
}

#[test]
fn a_tenant_kustomization_applies_as_its_service_account() {
    let root = repository(
        "service-account",
        &[
            ("tenants/acme/release.yaml", RELEASE),
            (
                "clusters/acme.yaml",
                &kustomization(
                    "tenant-acme",
                    "acme",
                    "./tenants/acme",
                    ", serviceAccountName: tenant-acme",
                ),
            ),
            (
                "clusters/acme-as-flux.yaml",
                &kustomization("tenant-acme", "acme", "./tenants/acme", ""),
            ),
        ],
    );
    let folder = root.join("tenants/acme");
    let flux = ["--as", "system:serviceaccount:cozy-fluxcd:flux"];
    let run = |ks: &str, as_flux: bool| {
        let ks = root.join(ks);
        let mut args = vec![path(&folder), "--kustomization", path(&ks)];
        args.extend(DUMP);
        if as_flux {
            args.extend(flux);
        }
        check(&args)
    };
    // The Kustomization names the tenant's account: Flux applies as it, whatever --as says.
    let out = run("clusters/acme.yaml", true);
    assert_eq!(out.code, Some(1), "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains("DENIED   CREATE HelmRelease tenant-acme/postgres-cache (")
            && out.stdout.contains("app HelmReleases are written only by the Cozystack platform, and system:serviceaccount:tenant-acme:tenant-acme is not a platform identity"),
        "{}",
        out.stdout
    );
    assert!(
        out.stderr.contains("identity: the Kustomization tenant-acme/acme applies as system:serviceaccount:tenant-acme:tenant-acme (spec.serviceAccountName), not as --as system:serviceaccount:cozy-fluxcd:flux"),
        "{}",
        out.stderr
    );
    // Naming none, it applies as --as; without --as, as the controller's own account.
    for as_flux in [true, false] {
        let out = run("clusters/acme-as-flux.yaml", as_flux);
        assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
        assert!(
            out.stdout
                .contains("ALLOWED  CREATE HelmRelease tenant-acme/postgres-cache ("),
            "{}",
            out.stdout
        );
    }
}

#[test]
fn a_kustomization_builds_with_files_outside_its_folder() {
    let root = repository(
        "load-restrictions",
        &[
            ("common/acme-db.yaml", SHARED_DB),
            (
                "tenants/acme/kustomization.yaml",
                "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [../../common/acme-db.yaml]\n",
            ),
            (
                "clusters/acme.yaml",
                &kustomization(
                    "tenant-acme",
                    "acme",
                    "./tenants/acme",
                    ", serviceAccountName: tenant-acme",
                ),
            ),
        ],
    );
    let (folder, ks) = (root.join("tenants/acme"), root.join("clusters/acme.yaml"));
    let mut args = vec![path(&folder), "--kustomization", path(&ks)];
    args.extend(DUMP);
    let out = check(&args);
    // kustomize-controller builds with LoadRestrictionsNone: the shared file is part of it.
    assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .contains("ALLOWED  CREATE Postgres tenant-acme/db ("),
        "{}",
        out.stdout
    );
    // Without --kustomization the folder is built as Flux builds it too.
    let mut args = vec![path(&folder)];
    args.extend(DUMP);
    args.extend(["--as", "system:serviceaccount:cozy-fluxcd:flux"]);
    let out = check(&args);
    assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
}

#[test]
fn a_dependency_without_a_namespace_is_in_the_kustomization_s_own() {
    let root = repository(
        "depends-on-namespace",
        &[
            (
                "tenants/base/ns-note.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: note, namespace: tenant-acme}\ndata: {}\n",
            ),
            ("tenants/acme/db.yaml", SHARED_DB),
            (
                "clusters/base.yaml",
                &kustomization("cozy-fluxcd", "acme-base", "./tenants/base", ""),
            ),
            (
                "clusters/acme.yaml",
                &kustomization(
                    "tenant-acme",
                    "acme",
                    "./tenants/acme",
                    ", serviceAccountName: tenant-acme, dependsOn: [{name: acme-base}]",
                ),
            ),
        ],
    );
    let (base, acme) = (
        root.join("clusters/base.yaml"),
        root.join("clusters/acme.yaml"),
    );
    let mut args = vec![
        path(&root),
        "--kustomization",
        path(&base),
        "--kustomization",
        path(&acme),
    ];
    args.extend(DUMP);
    let out = check(&args);
    // dependsOn [{name: acme-base}] of tenant-acme/acme is tenant-acme/acme-base: not the one
    // in cozy-fluxcd, and not in the cluster: kustomize-controller never applies acme, and
    // the change never lands: a failure.
    assert_eq!(out.code, Some(1), "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains("BLOCKED  Postgres tenant-acme/db (")
            && out.stdout.contains("not applied: it depends on the Kustomization tenant-acme/acme-base, which does not exist (a dependsOn without a namespace names one in the Kustomization's own)"),
        "{}",
        out.stdout
    );
}

#[test]
fn a_repository_holding_its_kustomizations_is_judged_as_flux_reconciles_them() {
    let root = repository(
        "found-kustomizations",
        &[
            (
                "tenants/shop.yaml",
                "apiVersion: apps.cozystack.io/v1alpha1\nkind: Tenant\nmetadata: {name: shop, namespace: tenant-root}\nspec: {}\n",
            ),
            (
                "apps/shop/db.yaml",
                "apiVersion: apps.cozystack.io/v1alpha1\nkind: Postgres\nmetadata: {name: db, namespace: tenant-shop}\nspec: {}\n",
            ),
            ("legacy/db.yaml", SHARED_DB),
            // The apps first in name order: dependsOn, not the files, orders them.
            (
                "clusters/apps.yaml",
                &kustomization(
                    "cozy-fluxcd",
                    "shop-apps",
                    "./apps/shop",
                    ", dependsOn: [{name: tenants}]",
                ),
            ),
            (
                "clusters/legacy.yaml",
                &kustomization("cozy-fluxcd", "legacy", "./legacy", ", suspend: true"),
            ),
            (
                "clusters/tenants.yaml",
                &kustomization("cozy-fluxcd", "tenants", "./tenants", ", wait: true"),
            ),
            // A chart's template beside them is no YAML, and no Kustomization of Flux.
            (
                "charts/x/templates/cm.yaml",
                "{{- if .Values.x }}\nkind: ConfigMap\n{{- end }}\n",
            ),
        ],
    );
    let mut args = vec![path(&root)];
    args.extend(DUMP);
    let out = check(&args);
    assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains("holds 3 Flux Kustomizations of this repository, judged as kustomize-controller reconciles them"),
        "{}",
        out.stderr
    );
    let tenant = out.stdout.find("ALLOWED  CREATE Tenant tenant-root/shop (");
    let db = out.stdout.find("ALLOWED  CREATE Postgres tenant-shop/db (");
    assert!(
        tenant.is_some() && db.is_some() && tenant < db,
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("BLOCKED  Postgres tenant-acme/db (")
            && out.stdout.contains("the Kustomization cozy-fluxcd/legacy is suspended (spec.suspend), so kustomize-controller applies nothing of it"),
        "{}",
        out.stdout
    );
    // --kustomization still selects: the Tenant's alone, its spec.path named.
    let (tenants, folder) = (root.join("clusters/tenants.yaml"), root.join("tenants"));
    let mut args = vec![path(&folder), "--kustomization", path(&tenants)];
    args.extend(DUMP);
    args.extend(["--as", "system:serviceaccount:cozy-fluxcd:flux"]);
    let out = check(&args);
    assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
    assert!(!out.stdout.contains("Postgres"), "{}", out.stdout);
}

#[test]
fn what_flux_cannot_build_is_exit_2_and_a_marked_object_is_applied_as_written() {
    let flux = ["--as", "system:serviceaccount:cozy-fluxcd:flux"];
    let run = |target: &Path| {
        let mut args = vec![path(target)];
        args.extend(DUMP);
        args.extend(flux);
        check(&args)
    };
    // Two files of one folder holding the same object: kustomize refuses the duplicate id.
    let twice = repository(
        "duplicate-id",
        &[("acme/a.yaml", SHARED_DB), ("acme/b.yaml", SHARED_DB)],
    );
    let out = run(&twice.join("acme"));
    assert_eq!(out.code, Some(2), "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains("already registered id"),
        "{}",
        out.stderr
    );
    // A key given twice in one file: no YAML Flux reads.
    let keys = repository(
        "duplicate-key",
        &[(
            "acme/db.yaml",
            "apiVersion: apps.cozystack.io/v1alpha1\nkind: Postgres\nmetadata: {name: db, namespace: tenant-acme}\nspec: {}\nspec: {replicas: 2}\n",
        )],
    );
    let out = run(&keys.join("acme/db.yaml"));
    assert_eq!(out.code, Some(2), "{}\n{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("acme/db.yaml"), "{}", out.stderr);
    // An object marked substitute: disabled is applied with `${…}` as written.
    let marked = repository(
        "substitute-disabled",
        &[(
            "acme/db.yaml",
            "apiVersion: apps.cozystack.io/v1alpha1\nkind: Postgres\nmetadata:\n  name: db\n  namespace: tenant-acme\n  annotations: {kustomize.toolkit.fluxcd.io/substitute: disabled}\nspec: {note: \"${HOME}\"}\n",
        )],
    );
    let out = run(&marked.join("acme"));
    assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .contains("ALLOWED  CREATE Postgres tenant-acme/db ("),
        "{}",
        out.stdout
    );
}

#[test]
fn a_file_given_with_a_kustomization_that_transforms_it_is_built_with_it() {
    let root = repository(
        "file-with-spec",
        &[
            (
                "apps/db.yaml",
                "apiVersion: apps.cozystack.io/v1alpha1\nkind: Postgres\nmetadata: {name: db}\nspec: {}\n",
            ),
            (
                "clusters/acme.yaml",
                &kustomization(
                    "tenant-acme",
                    "acme",
                    "./apps",
                    ", serviceAccountName: tenant-acme, targetNamespace: tenant-acme, namePrefix: team-",
                ),
            ),
        ],
    );
    let (file, ks) = (root.join("apps/db.yaml"), root.join("clusters/acme.yaml"));
    let mut args = vec![path(&file), "--kustomization", path(&ks)];
    args.extend(DUMP);
    let out = check(&args);
    // Flux applies it in the target namespace, under the prefix: so is it judged.
    assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .contains("ALLOWED  CREATE Postgres tenant-acme/team-db ("),
        "{}",
        out.stdout
    );
}

/// The bundled install after a platform team's Kustomization `tenant-root/root-values`, which
/// applies as tenant-root's ServiceAccount, server-side applied the root Tenant from git (to
/// keep its switches there): cozystack-api carries Flux's owner labels onto the release,
/// prefixed (`rest.go` `convertApplicationToHelmRelease`, `addPrefixedMap`), and the live
/// Kustomization's `status.inventory` lists the Tenant. Written into `dir` as a dump folder.
fn root_tenant_in_git(dir: &str, with_kustomization: bool) -> PathBuf {
    let dump = scratch(dir);
    let _ = std::fs::remove_dir_all(&dump);
    std::fs::create_dir_all(&dump).unwrap_or_else(|e| panic!("{e}"));
    for file in ["definitions.yaml", "namespaces.yaml", "releases.yaml"] {
        let text = std::fs::read_to_string(workspace().join("e2e/cluster").join(file))
            .unwrap_or_else(|e| panic!("{e}"));
        let owned = text.replace(
            "    apps.cozystack.io/application.name: root\n  managedFields:",
            "    apps.cozystack.io/application.name: root\n    apps.cozystack.io-kustomize.toolkit.fluxcd.io/name: root-values\n    apps.cozystack.io-kustomize.toolkit.fluxcd.io/namespace: tenant-root\n  managedFields:",
        );
        assert!(
            file != "releases.yaml" || owned != text,
            "the root release moved"
        );
        std::fs::write(dump.join(file), owned).unwrap_or_else(|e| panic!("{e}"));
    }
    if with_kustomization {
        std::fs::write(
            dump.join("flux.yaml"),
            "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: root-values, namespace: tenant-root}\nspec: {prune: true, path: ./tenant-root, serviceAccountName: tenant-root, interval: 10m, sourceRef: {kind: GitRepository, name: platform, namespace: cozy-fluxcd}}\nstatus:\n  conditions:\n  - {type: Ready, status: 'True', reason: ReconciliationSucceeded}\n  inventory:\n    entries:\n    - {id: tenant-root_root_apps.cozystack.io_Tenant, v: v1alpha1}\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
    }
    dump
}

#[test]
fn a_repository_prunes_what_its_live_kustomization_applied() {
    // The commit removes the root Tenant's file: its folder holds a kustomization naming
    // nothing (git keeps no empty folder). The repository's Kustomization carries no status;
    // Flux prunes from the live one's inventory, so the DELETE of the root Tenant is sent, as
    // tenant-root's ServiceAccount, and refused.
    let root = repository(
        "prune-live",
        &[
            (
                "tenant-root/kustomization.yaml",
                "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: []\n",
            ),
            (
                "clusters/root.yaml",
                &kustomization(
                    "tenant-root",
                    "root-values",
                    "./tenant-root",
                    ", serviceAccountName: tenant-root",
                ),
            ),
        ],
    );
    let dump = root_tenant_in_git("prune-live-dump", true);
    let settings = ["--settings", "deploy/policy-protect.yaml"];
    let refused = "Tenant tenant-root/root is the root tenant: deleting it uninstalls every tenant of the platform";
    let from = "(Kustomization tenant-root/root-values (from the dump), inventory entry 1)";
    let note = "Kustomization tenant-root/root-values prunes 1 of the 1 objects its live status.inventory (Kustomization tenant-root/root-values (from the dump)) lists; these DELETEs will be judged, as system:serviceaccount:tenant-root:tenant-root (groups system:serviceaccounts, system:serviceaccounts:tenant-root, system:authenticated) (Flux sends one for each that carries its owner labels): Tenant tenant-root/root\n";
    let mut args = vec![path(&root), "--dump", path(&dump)];
    args.extend(settings);
    let out = check(&args);
    assert_eq!(out.code, Some(1), "{}\n{}", out.stdout, out.stderr);
    let report = out
        .stdout
        .split_once('\n')
        .map(|(_, r)| r)
        .unwrap_or_default();
    assert!(report.starts_with(note), "{}", out.stdout);
    assert!(
        out.stdout.contains(&format!(
            "DENIED   DELETE Tenant tenant-root/root {from}: {refused}"
        )),
        "{}",
        out.stdout
    );
    // The same Kustomization named, read from the dump: the same prune, the same verdict.
    let folder = root.join("tenant-root");
    let mut args = vec![
        path(&folder),
        "--kustomization",
        "tenant-root/root-values",
        "--dump",
        path(&dump),
    ];
    args.extend(settings);
    let named = check(&args);
    assert_eq!(named.code, Some(1), "{}\n{}", named.stdout, named.stderr);
    assert!(
        named.stdout.contains(&format!(
            "DENIED   DELETE Tenant tenant-root/root {from}: {refused}"
        )),
        "{}",
        named.stdout
    );
    // The repository's file given: its live twin's inventory still decides.
    let file = root.join("clusters/root.yaml");
    let mut args = vec![
        path(&folder),
        "--kustomization",
        path(&file),
        "--dump",
        path(&dump),
    ];
    args.extend(settings);
    let given = check(&args);
    assert_eq!(given.code, Some(1), "{}\n{}", given.stdout, given.stderr);
    assert!(given.stdout.contains(note), "{}", given.stdout);
    // A Kustomization the cluster does not hold yet has applied nothing: nothing to prune,
    // said; with nothing else in the change set there is nothing to judge.
    let fresh = root_tenant_in_git("prune-fresh-dump", false);
    let mut args = vec![path(&root), "--dump", path(&fresh)];
    args.extend(settings);
    let out = check(&args);
    assert_eq!(out.code, Some(2), "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains("the cluster holds no Kustomization tenant-root/root-values yet: it has applied nothing, so Flux prunes nothing")
            && out.stderr.contains("nothing to judge"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_kustomization_that_never_lands_fails_the_run_and_the_rest_is_judged() {
    // acme waits on a Kustomization that does not exist; a and b wait on each other; shop
    // depends on none and is judged.
    let root = repository(
        "never-lands",
        &[
            ("tenants/acme/db.yaml", SHARED_DB),
            (
                "tenants/a/db.yaml",
                &SHARED_DB.replace("name: db", "name: a"),
            ),
            (
                "tenants/b/db.yaml",
                &SHARED_DB.replace("name: db", "name: b"),
            ),
            (
                "tenants/shop/db.yaml",
                &SHARED_DB.replace("name: db", "name: store"),
            ),
            (
                "clusters/acme.yaml",
                &kustomization(
                    "cozy-fluxcd",
                    "acme",
                    "./tenants/acme",
                    ", dependsOn: [{name: gone}]",
                ),
            ),
            (
                "clusters/a.yaml",
                &kustomization(
                    "cozy-fluxcd",
                    "a",
                    "./tenants/a",
                    ", dependsOn: [{name: b}]",
                ),
            ),
            (
                "clusters/b.yaml",
                &kustomization(
                    "cozy-fluxcd",
                    "b",
                    "./tenants/b",
                    ", dependsOn: [{name: a}]",
                ),
            ),
            (
                "clusters/shop.yaml",
                &kustomization("cozy-fluxcd", "shop", "./tenants/shop", ""),
            ),
        ],
    );
    let mut args = vec![path(&root)];
    args.extend(DUMP);
    let out = check(&args);
    assert_eq!(out.code, Some(1), "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .contains("ALLOWED  CREATE Postgres tenant-acme/store ("),
        "{}",
        out.stdout
    );
    for (name, failure) in [
        (
            "db",
            "FAILED: Kustomization cozy-fluxcd/acme never applies: dependency 'cozy-fluxcd/gone' not found (kustomize-controller retries it, and the change never lands); it depends on the Kustomization cozy-fluxcd/gone, which does not exist",
        ),
        (
            "a",
            "FAILED: Kustomization cozy-fluxcd/a never applies: dependency 'cozy-fluxcd/b' is not ready (kustomize-controller retries it, and the change never lands); it depends on the Kustomization cozy-fluxcd/b, and cozy-fluxcd/a, cozy-fluxcd/b depend on each other in a cycle",
        ),
        (
            "b",
            "FAILED: Kustomization cozy-fluxcd/b never applies: dependency 'cozy-fluxcd/a' is not ready",
        ),
    ] {
        assert!(
            out.stdout
                .contains(&format!("BLOCKED  Postgres tenant-acme/{name} (")),
            "{name}: {}",
            out.stdout
        );
        assert!(out.stdout.contains(failure), "{failure}: {}", out.stdout);
    }
    assert!(
        !out.stdout.contains("earlier failure"),
        "nothing failed before them: {}",
        out.stdout
    );
    // Only what applies prunes: the report speaks of shop's inventory, not of theirs.
    assert!(
        out.stdout
            .contains("the cluster holds no Kustomization cozy-fluxcd/shop yet")
            && !out.stdout.contains("Kustomization cozy-fluxcd/acme yet")
            && !out.stdout.contains("Kustomization cozy-fluxcd/a yet"),
        "{}",
        out.stdout
    );
    // JUnit: each Kustomization that never lands is a failing test case.
    let mut args = vec![path(&root), "--output", "junit"];
    args.extend(DUMP);
    let junit = check(&args);
    assert_eq!(junit.code, Some(1), "{}", junit.stderr);
    assert!(
        junit.stdout.contains("<testcase classname=\"flux\" name=\"Kustomization cozy-fluxcd/acme\">\n      <failure type=\"never-applies\" message=\"Kustomization cozy-fluxcd/acme never applies: dependency &apos;cozy-fluxcd/gone&apos; not found"),
        "{}",
        junit.stdout
    );
}
