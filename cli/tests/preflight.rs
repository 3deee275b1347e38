//! The pre-flight over the fixture dumps in `cli/tests/dumps`, through the embedded policy
//! module: the dump with known problems yields exactly the committed report (text and
//! PolicyReports), the clean dump yields nothing, and the binary gives the same report, byte for
//! byte, read from the dump or live from a loopback API serving the same objects. One test per
//! file, so the module is compiled once in process.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

use cozystack_e2e::loopback;
use cozystack_policy::ops::preflight;
use cozystack_policy::settings;
use cozystack_policy::source::Source;
use cozystack_policy_runtime::cluster::ClusterObjects;

use common::{scratch, workspace};

/// The pre-flight of `cluster` under `settings`, as the verb runs it.
fn replayed(
    policy: &cozystack_policy_runtime::policy::Policy,
    cluster: Arc<ClusterObjects>,
    settings: &serde_json::Value,
) -> preflight::Report {
    preflight::run(
        policy,
        cluster,
        &settings::Settings::new(settings.clone()),
        &|_, _| {},
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

fn dir() -> PathBuf {
    workspace().join("cli/tests/dumps")
}

fn committed(name: &str) -> String {
    std::fs::read_to_string(dir().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn cli(args: &[&str], extra: &[&Path], kubeconfig: Option<&Path>) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_cozystack-policy"));
    command.args(args).args(extra);
    for var in loopback::ELSEWHERE {
        command.env_remove(var);
    }
    match kubeconfig {
        Some(path) => command.env("KUBECONFIG", path),
        None => command.env_remove("KUBECONFIG"),
    };
    command.output().unwrap_or_else(|e| panic!("{e}"))
}

fn utf8(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

const UNKNOWN_RELEASE: &str = "Release: judged for any supported Cozystack release (v1.5.0, v1.5.1, v1.5.2, v1.5.3, v1.5.4, v1.6.0, v1.6.1, v1.6.2, main); the cluster's is unknown (no ConfigMap cozy-system/cozystack-version was read)";

/// The clean dump with the migration stamp `stamp` in ConfigMap cozy-system/cozystack-version.
fn stamped(stamp: &str) -> Arc<ClusterObjects> {
    let mut dump =
        ClusterObjects::read_dump(&[dir().join("clean.yaml")]).unwrap_or_else(|e| panic!("{e}"));
    dump.push(serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "cozystack-version", "namespace": "cozy-system"},
        "data": {"version": stamp}
    }));
    Arc::new(dump)
}

#[test]
fn preflight_says_which_release_it_judged_for_and_warns_when_the_cluster_runs_another() {
    let (policy, _) = Source::Embedded
        .load(None)
        .unwrap_or_else(|e| panic!("{e}"));
    // The clean dump, with the stamp v1.5.0–v1.5.3's migration hook leaves.
    let dump = stamped("45");
    // The deployed settings, naming a release or none.
    let deployed = settings::read(Some(&workspace().join("deploy/policy-protect.yaml")))
        .unwrap_or_else(|e| panic!("{e}"))
        .value()
        .clone();
    let report = |release: Option<&str>| {
        let mut settings = deployed.clone();
        if let Some(release) = release {
            settings["cozystackRelease"] = release.into();
        }
        replayed(&policy, dump.clone(), &settings)
    };
    let named = report(Some("v1.5.3"));
    assert_eq!(named.findings(), 0);
    assert_eq!(
        named.text(false).lines().nth(1),
        Some(
            "Release: judged for Cozystack v1.5.3; the cluster's migration stamp 45 (cozy-system/cozystack-version): v1.5.0, v1.5.1, v1.5.2, v1.5.3"
        )
    );
    let unset = report(None);
    assert_eq!(unset.findings(), 0);
    assert!(unset.text(false).contains("; the cluster's migration stamp 45 (cozy-system/cozystack-version): v1.5.0, v1.5.1, v1.5.2, v1.5.3: set cozystackRelease to it for the strictest judgement\n"), "{}", unset.text(false));
    // Settings naming main on that cluster: a finding, so the pre-flight exits 1.
    let wrong = report(Some("main"));
    assert_eq!(wrong.findings(), 1);
    assert_eq!(
        wrong.text(false).lines().nth(1),
        Some(
            "Release: judged for Cozystack main, but the cluster's migration stamp 45 (cozy-system/cozystack-version): v1.5.0, v1.5.1, v1.5.2, v1.5.3: the policy judges its platform's writes as main renders them; set cozystackRelease to the release the cluster runs"
        )
    );
}

/// Input with nothing to judge is no clean bill of health: a failed `kubectl get … > dump.yaml`,
/// a dump without the namespaces, settings that state no rule: each exit 2 with one line, unless
/// `--allow-empty` says empty is intended.
#[test]
fn empty_input_is_exit_2_naming_what_was_empty() {
    let write = |name: &str, text: &str| {
        let path = scratch(name);
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("{e}"));
        path
    };
    let last_line = |out: &Output| {
        utf8(&out.stderr)
            .lines()
            .last()
            .unwrap_or_default()
            .to_owned()
    };
    let empty = write("empty.yaml", "");
    let out = cli(&["preflight", "--dump"], &[&empty], None);
    assert_eq!(out.status.code(), Some(2), "{}", utf8(&out.stderr));
    assert_eq!(
        last_line(&out),
        format!(
            "error: the dump {} holds no object: an empty file is what a failed `kubectl get … > dump.yaml` leaves; make it again as docs/rollout.md says, or pass --allow-empty",
            empty.display()
        )
    );
    assert!(out.stdout.is_empty());
    let allowed = cli(&["preflight", "--allow-empty", "--dump"], &[&empty], None);
    assert_eq!(allowed.status.code(), Some(0), "{}", utf8(&allowed.stderr));

    let no_tenant = write(
        "no-tenant.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: cozy-system}\n",
    );
    let out = cli(&["preflight", "--dump"], &[&no_tenant], None);
    assert_eq!(out.status.code(), Some(2), "{}", utf8(&out.stderr));
    assert_eq!(
        last_line(&out),
        format!(
            "error: the dump {} holds 1 objects but no tenant Namespace (tenant-root and those below it): the namespaces are missing from it, or it is not a Cozystack cluster's; add them (`kubectl get namespaces -o yaml`), or pass --allow-empty",
            no_tenant.display()
        )
    );

    // The settings are checked before any cluster is read; rule-less ones after.
    let rule_less = write("rule-less.yaml", "definitionSource: settings\n");
    let clean = dir().join("clean.yaml");
    let out = cli(
        &["preflight", "--settings"],
        &[&rule_less, Path::new("--dump"), &clean],
        None,
    );
    assert_eq!(out.status.code(), Some(2), "{}", utf8(&out.stderr));
    assert_eq!(
        last_line(&out),
        "error: the settings state no rule: definitionSource: settings with no definitions judges no count, protection or capability; drop definitionSource to judge with the built-in rule set as deploy/ does, or pass --allow-empty"
    );
    let typo = write(
        "typo.yaml",
        "definitions: {Monitorng: {cardinality: {scope: tenant, max: 1}}}\n",
    );
    let out = cli(
        &["preflight", "--settings"],
        &[&typo, Path::new("--dump"), &clean],
        None,
    );
    assert_eq!(out.status.code(), Some(2), "{}", utf8(&out.stderr));
    assert!(
        last_line(&out).starts_with("error: the settings are invalid: definitions.Monitorng: no such kind in the built-in rule set (BootBox, "),
        "{}",
        utf8(&out.stderr)
    );
    assert!(
        !utf8(&out.stderr).contains("read "),
        "settings are refused before the cluster is read: {}",
        utf8(&out.stderr)
    );
}

/// A cluster that follows Cozystack's `main` past the pinned commit writes a stamp no release of
/// the matrix has: a warning that it is judged as `main`, with advice the settings accept.
#[test]
fn a_cluster_newer_than_the_matrix_is_judged_as_main_with_a_warning() {
    let (policy, _) = Source::Embedded
        .load(None)
        .unwrap_or_else(|e| panic!("{e}"));
    let dump = stamped("57");
    let report = |release: Option<&str>| {
        let settings = match release {
            Some(release) => serde_json::json!({"cozystackRelease": release}),
            None => serde_json::json!({}),
        };
        replayed(&policy, dump.clone(), &settings)
    };
    let newer = "the cluster's migration stamp 57 (cozy-system/cozystack-version) is newer than the supported releases: judged as main (pinned commit 3c780acd, stamp 56)";
    // Unset and `main`: a warning; an older release named on it judges the wrong charts: a
    // finding. The advice is always a name the settings take.
    let any = "any supported Cozystack release (v1.5.0, v1.5.1, v1.5.2, v1.5.3, v1.5.4, v1.6.0, v1.6.1, v1.6.2, main)";
    let recheck = "re-check with a policy release that supports it";
    let cases = [
        (
            None,
            0,
            format!(
                "{any}; {newer}; set cozystackRelease: main for the strictest judgement, and {recheck}"
            ),
        ),
        (
            Some("main"),
            0,
            format!("Cozystack main; {newer}; {recheck}"),
        ),
        (
            Some("v1.6.2"),
            1,
            format!(
                "Cozystack v1.6.2; {newer}; set cozystackRelease: main, the newest supported, and {recheck}"
            ),
        ),
    ];
    for (release, findings, judged) in cases {
        let report = report(release);
        assert_eq!(report.findings(), findings, "{release:?}");
        assert_eq!(
            report.text(false).lines().nth(1).map(str::to_owned),
            Some(format!("warning: Release: judged for {judged}")),
        );
    }
    // A stamp older than v1.5.0's (45) is no build between releases: it predates them all.
    let older = replayed(&policy, stamped("44"), &serde_json::json!({}));
    assert_eq!(
        older.text(false).lines().nth(1).map(str::to_owned),
        Some(format!(
            "warning: Release: judged for {any}; the cluster's migration stamp 44 (cozy-system/cozystack-version) is older than every supported release's: upgrade the cluster to a supported release first (docs/releases.md)"
        )),
    );
    // Between two releases' stamps (46 is v1.5.4's, 54 v1.6.0's): a build between releases.
    let between = replayed(&policy, stamped("50"), &serde_json::json!({}));
    assert!(
        between
            .text(false)
            .lines()
            .nth(1)
            .is_some_and(|l| l.contains("stamp 50 (cozy-system/cozystack-version) is no supported release's: a build between releases")),
        "{}",
        between.text(false)
    );
}

#[test]
fn preflight_reports_exactly_the_known_problems() {
    let (policy, _) = Source::Embedded
        .load(None)
        .unwrap_or_else(|e| panic!("{e}"));
    let settings_path = workspace().join("deploy/policy-protect.yaml");
    let settings = settings::read(Some(&settings_path))
        .unwrap_or_else(|e| panic!("{e}"))
        .value()
        .clone();
    let replay = |dump: &str| {
        let cluster =
            ClusterObjects::read_dump(&[dir().join(dump)]).unwrap_or_else(|e| panic!("{e}"));
        replayed(&policy, Arc::new(cluster), &settings)
    };

    let report = replay("problems.yaml");
    assert_eq!(report.findings(), 5);
    let text = report.text(false);
    assert_eq!(text, committed("problems.txt"));
    // The clean namespaces are counted; named only on request.
    assert!(
        text.ends_with(
            "5 findings in 4 namespaces; 3 namespaces clean (--list-clean names them)\n"
        ),
        "{text}"
    );
    assert!(report.text(true).ends_with(
        "5 findings in 4 namespaces; 3 clean: cozy-system, tenant-clean, tenant-root\n"
    ));
    // The duplicate off the slot is reported, naming the one on it, which is kept and passes.
    assert!(
        text.contains(
            "tenant-dup: 1 finding\n  HelmRelease tenant-dup/monitoring-2 [fail] Monitoring: at most 1 per tenant tenant-dup; already present: monitoring; keep 1 and delete the others (cardinality tenant/1)\n\n"
        ),
        "{text}"
    );
    // An instance made before the slots, off its slot, is a warning that names its slot and a
    // remedy in the order the count admits.
    assert!(
        text.contains("HelmRelease tenant-side/metrics [warn] Monitoring tenant-side/metrics is off its slot: Monitoring is held to at most 1 per tenant by its name (tenant-side/monitoring); its chart renders no release of another name, so it never ran and nothing is lost: delete tenant-side/metrics, then turn monitoring on in Tenant tenant-root/side"),
        "{text}"
    );
    // As `preflight --settings deploy/policy-protect.yaml` names them, from the workspace.
    let judged_by = settings::Given::new(
        settings.clone(),
        settings::Origin::File {
            path: "deploy/policy-protect.yaml".into(),
            policy: Some("cozystack-capabilities".into()),
        },
    )
    .judged_by()
    .unwrap_or_else(|e| panic!("{e}"));
    let reports =
        preflight::to_yaml_stream(&report.policy_reports("cozystack-capabilities", &judged_by))
            .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(reports, committed("problems.policyreport.yaml"));
    // The same findings as the OpenReports Kubewarden's audit scanner writes by default: valid
    // under the CRDs Kubewarden installs, the scanner's fields, one report per object.
    let open = report.open_reports("cozystack-capabilities", &judged_by, 1_765_000_000);
    let crds = openreports_crds();
    for report in &open {
        let kind = report["kind"].as_str().unwrap_or_default();
        let schema = crds
            .get(kind)
            .unwrap_or_else(|| panic!("no OpenReports CRD for kind {kind}"));
        if let Err(at) = structural(schema, report, "") {
            panic!("{kind} {}: {at}", report["metadata"]["name"]);
        }
    }
    assert_eq!(
        preflight::to_yaml_stream(&open).unwrap_or_else(|e| panic!("{e}")),
        committed("problems.openreports.yaml")
    );
    assert_eq!(open.len(), report.judged.len());
    let failing = open.iter().filter(|r| r["summary"]["fail"] == 1).count();
    assert_eq!(
        failing,
        report
            .judged
            .iter()
            .filter(|j| j.finding.as_ref().is_some_and(|f| f.result == "fail"))
            .count()
    );

    let clean = replay("clean.yaml");
    assert_eq!(clean.findings(), 0);
    assert_eq!(
        clean.text(false),
        format!(
            "Pre-flight: 8 objects replayed as the audit scanner sends them, in 3 namespaces\n{UNKNOWN_RELEASE}\n\nNo findings: every namespace is clean.\n"
        )
    );
    assert!(
        clean
            .policy_reports("cozystack-capabilities", &judged_by)
            .iter()
            .all(|r| r["summary"]["fail"] == 0 && r["summary"]["error"] == 0)
    );

    // Rules in the settings alone: stock definitions agree with them and pass; one that
    // states a different block is reported, since the policy would not read it.
    let mut dump =
        ClusterObjects::read_dump(&[dir().join("clean.yaml")]).unwrap_or_else(|e| panic!("{e}"));
    dump.push(serde_json::json!({
        "apiVersion": "cozystack.io/v1alpha1", "kind": "ApplicationDefinition",
        "metadata": {"name": "redis"},
        "spec": {"application": {"kind": "Redis"}, "cardinality": {"scope": "cluster", "max": 1}}
    }));
    let dump = Arc::new(dump);
    // The deployed settings read the built-in rule set: the Redis definition is not read
    // either, and a definition whose release prefix is not the built-in one is named.
    let report = replayed(&policy, dump.clone(), &settings);
    assert_eq!(report.findings(), 1, "{}", report.text(false));
    assert!(report.text(false).contains(
        "  ApplicationDefinition redis [fail] ApplicationDefinition redis states rules for Redis that differ from the built-in rule set and the settings, and definitionSource is builtin, so the policy does not read them; move them into the settings' definitions.Redis, or set definitionSource: applicationDefinitions\n"
    ), "{}", report.text(false));
    // The report's text with one more ApplicationDefinition, `name` defining `kind` with release
    // prefix `prefix`, in the dump.
    let with_definition = |name: &str, kind: &str, prefix: &str| {
        let mut dump = (*dump).clone();
        dump.push(serde_json::json!({
            "apiVersion": "cozystack.io/v1alpha1", "kind": "ApplicationDefinition",
            "metadata": {"name": name},
            "spec": {"application": {"kind": kind}, "release": {"prefix": prefix}}
        }));
        replayed(&policy, Arc::new(dump), &settings).text(false)
    };
    let text = with_definition("bucket", "Bucket", "bkt-");
    assert!(text.contains(
        "  ApplicationDefinition bucket [fail] the policy assumes release prefix \"bucket-\" for Bucket, but ApplicationDefinition bucket states spec.release.prefix \"bkt-\": the policy would name every Bucket release wrongly; set releasePrefixes.Bucket: \"bkt-\"\n"
    ), "{text}");

    // A kind without rules is named by its stock prefix too (a module's name is checked
    // against its release), so a definition stating another one is reported the same way.
    let text = with_definition("external-dns", "ExternalDNS", "dns-");
    assert!(text.contains(
        "  ApplicationDefinition external-dns [fail] the policy assumes release prefix \"\" for ExternalDNS, but ApplicationDefinition external-dns states spec.release.prefix \"dns-\": the policy would name every ExternalDNS release wrongly; set releasePrefixes.ExternalDNS: \"dns-\"\n"
    ), "{text}");

    // A kind the built-in set never examined (a package added after its commit) gets no rule:
    // a warning names it, whatever the definition states; one the settings give rules is known.
    let text = with_definition("valkey", "Valkey", "valkey-");
    assert!(text.contains(
        "  ApplicationDefinition valkey [warn] ApplicationDefinition valkey defines Valkey, a kind the built-in rule set (cozystack/cozystack 3c780acd) has never examined, so it gets no rule (catalog, no count, no protection, consumes nothing) whatever its charts read; state its rules in the settings' definitions.Valkey, or set definitionSource: applicationDefinitions\n"
    ), "{text}");
    assert!(!text.contains("ApplicationDefinition redis [warn]"));

    // Rules in the settings alone (the bundled settings spell the stock set out).
    let mut settings_only = settings::read(Some(&workspace().join("e2e/cluster/settings.yaml")))
        .unwrap_or_else(|e| panic!("{e}"))
        .value()
        .clone();
    settings_only["definitionSource"] = "settings".into();
    settings_only["releasePrefixes"] = serde_json::json!({"Monitoring": "", "Etcd": ""});
    let report = replayed(&policy, dump.clone(), &settings_only);
    assert_eq!(report.findings(), 1, "{}", report.text(false));
    assert!(report.text(false).contains(
        "(ApplicationDefinitions): 1 finding\n  ApplicationDefinition redis [fail] ApplicationDefinition redis states rules for Redis that differ from the settings, and definitionSource is settings, so the policy does not read them; move them into the settings' definitions.Redis, or set definitionSource: applicationDefinitions\n"
    ), "{}", report.text(false));

    // A releasePrefixes entry overrides the stock prefix, which stands without one: a wrong
    // entry misnames every release of its kind; a kind the stock set knows (Etcd) needs none, and
    // one it does not know cannot be given rules without one (the settings are refused).
    settings_only["releasePrefixes"] = serde_json::json!({"Monitoring": "monitoring-"});
    let report = replayed(&policy, dump.clone(), &settings_only);
    assert_eq!(report.findings(), 2, "{}", report.text(false));
    let text = report.text(false);
    assert!(text.contains(
        "  ApplicationDefinition monitoring [fail] releasePrefixes.Monitoring is \"monitoring-\", but ApplicationDefinition monitoring states spec.release.prefix \"\": the policy would name every Monitoring release wrongly; set releasePrefixes.Monitoring: \"\"\n"
    ), "{text}");
    assert!(!text.contains("ApplicationDefinition etcd ["), "{text}");

    // The binary on the dump: the committed report, exit 1; piped, stderr carries no progress
    // bar: where the policy and the objects came from, then one closing line.
    let settings_arg = settings_path.as_path();
    let dump = |name: &str| dir().join(name);
    let problems_yaml = dump("problems.yaml");
    let from_dump = cli(
        &["preflight", "--settings"],
        &[settings_arg, Path::new("--dump"), &problems_yaml],
        None,
    );
    assert_eq!(
        from_dump.status.code(),
        Some(1),
        "{}",
        utf8(&from_dump.stderr)
    );
    // The report opens with the settings that judged it (named by the absolute path given).
    assert_eq!(
        utf8(&from_dump.stdout),
        format!(
            "judged by: ClusterAdmissionPolicy cozystack-capabilities in {}; rules: the built-in rule set (cozystack/cozystack 3c780acd); release: any supported Cozystack release (v1.5.0, v1.5.1, v1.5.2, v1.5.3, v1.5.4, v1.6.0, v1.6.1, v1.6.2, main)\n{}",
            settings_path.display(),
            committed("problems.txt")
        )
    );
    let stderr = utf8(&from_dump.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert!(
        lines.len() == 4
            && lines[0] == "policy: the embedded policy v0.2.0"
            && lines[1].starts_with("read 23 objects from the dump in ")
            && lines[2].starts_with("policy-server estimate for this cluster: 12 app releases (0.0 MB) and 7 Namespaces (0.0 MB) listed: about 84 MiB resident")
            && lines[2].contains("within the deployed timeoutEvalSeconds (5 s), one listing every app release 0.4 s, within it")
            && lines[3].starts_with("replayed 19 objects, done in "),
        "{stderr}"
    );
    let estimate = lines[2].to_owned();
    let clean_yaml = dump("clean.yaml");
    let clean = cli(
        &["preflight", "--settings"],
        &[settings_arg, Path::new("--dump"), &clean_yaml],
        None,
    );
    assert_eq!(clean.status.code(), Some(0), "{}", utf8(&clean.stderr));
    let missing_yaml = dump("no-such-dump.yaml");
    let missing = cli(&["preflight", "--dump"], &[&missing_yaml], None);
    assert_eq!(missing.status.code(), Some(2));
    assert!(
        utf8(&missing.stderr).contains("no-such-dump.yaml: No such file"),
        "{}",
        utf8(&missing.stderr)
    );

    // On a terminal (a pty from util-linux's `script`) the replay draws indicatif's bar.
    let on_tty = Command::new("script")
        .args([
            "-qec",
            &format!(
                "{} preflight --dump {}",
                env!("CARGO_BIN_EXE_cozystack-policy"),
                problems_yaml.display()
            ),
            "/dev/null",
        ])
        .env_remove("KUBECONFIG")
        .output()
        .unwrap_or_else(|e| panic!("script (util-linux): {e}"));
    let drawn = utf8(&on_tty.stdout);
    assert!(
        drawn.contains("replaying ") && drawn.contains(" 19/19 "),
        "{drawn}"
    );
    assert!(!utf8(&from_dump.stderr).contains("replaying "));

    // Live: the same objects served by a loopback API, read through the kubeconfig's current
    // context in pages of at most 4 (so every kind takes several): the same report, byte for
    // byte, in text and as PolicyReports.
    let objects = ClusterObjects::read_dump(std::slice::from_ref(&problems_yaml))
        .unwrap_or_else(|e| panic!("{e}"))
        .values()
        .collect::<Vec<_>>();
    let scratch = workspace().join("target/tmp/preflight-live");
    let api = loopback::serve(objects.clone(), None, 4, &scratch);
    let live = cli(
        &["preflight", "--settings"],
        &[settings_arg],
        Some(&api.kubeconfig),
    );
    assert_eq!(live.status.code(), Some(1), "{}", utf8(&live.stderr));
    assert_eq!(utf8(&live.stdout), utf8(&from_dump.stdout));
    let stderr = utf8(&live.stderr);
    assert!(
        stderr.contains(
            &format!("read from context loopback at {}: 4 applicationdefinitions.cozystack.io (1 page), 12 helmreleases.helm.toolkit.fluxcd.io (3 pages), 7 namespaces (2 pages) in ", api.url)
        ) && stderr.lines().count() == 4
            // The same objects read live: the same estimate.
            && stderr.contains(&estimate),
        "{stderr}"
    );
    let seen = api.seen.lock().unwrap_or_else(|e| e.into_inner()).clone();
    // Every list in pages; then the one GET of the cluster's migration stamp (none here: the
    // report says the release is unknown, as from the dump).
    let (lists, gets): (Vec<_>, Vec<_>) = seen.iter().partition(|url| url.contains("limit="));
    assert!(
        lists.iter().all(|url| url.contains("limit=500"))
            && lists.iter().any(|url| url.contains("continue=4"))
            && gets == ["/api/v1/namespaces/cozy-system/configmaps/cozystack-version"],
        "{seen:?}"
    );
    let reports = |extra: &[&Path], kubeconfig| {
        let mut args = vec![
            settings_arg,
            Path::new("--output"),
            Path::new("policyreport"),
        ];
        args.extend_from_slice(extra);
        utf8(&cli(&["preflight", "--settings"], &args, kubeconfig).stdout)
    };
    assert_eq!(
        reports(&[], Some(&api.kubeconfig)),
        reports(&[Path::new("--dump"), &problems_yaml], None)
    );
    // --context picks another context of the same kubeconfig (here one nobody listens on).
    let elsewhere = cli(
        &["preflight", "--context", "elsewhere"],
        &[],
        Some(&api.kubeconfig),
    );
    assert_eq!(elsewhere.status.code(), Some(2));
    assert!(
        utf8(&elsewhere.stderr).contains("from context elsewhere at http://127.0.0.1:1 failed: "),
        "{}",
        utf8(&elsewhere.stderr)
    );
    drop(api);
    // No kubeconfig and not in a Pod: said so, with the ways out.
    let nowhere = cli(
        &["preflight"],
        &[],
        Some(Path::new("/nonexistent/kubeconfig")),
    );
    assert_eq!(nowhere.status.code(), Some(2));
    assert_eq!(
        utf8(&nowhere.stderr).lines().last().unwrap_or_default(),
        "error: cannot read the kubeconfig: failed to read kubeconfig from '\"/nonexistent/kubeconfig\"': No such file or directory (os error 2), and this is not a Pod with a ServiceAccount; set KUBECONFIG or pass --kubeconfig, or use --dump"
    );

    // A list the current user may not make: the missing permission, named, and exit 2.
    let api = loopback::serve(objects, Some("helmreleases"), 500, &scratch);
    let forbidden = cli(&["preflight"], &[], Some(&api.kubeconfig));
    assert_eq!(forbidden.status.code(), Some(2));
    assert_eq!(
        utf8(&forbidden.stderr).lines().last().unwrap_or_default(),
        format!(
            "error: listing helmreleases.helm.toolkit.fluxcd.io in all namespaces is forbidden for the current user of context loopback at {} (helmreleases.helm.toolkit.fluxcd.io is forbidden: User \"preflight\" cannot list resource \"helmreleases\" in API group \"helm.toolkit.fluxcd.io\" at the cluster scope): grant it `list` on helmreleases.helm.toolkit.fluxcd.io cluster-wide (deploy/preflight-rbac.yaml; check with `kubectl auth can-i list helmreleases.helm.toolkit.fluxcd.io --all-namespaces`), or run on a dump (`kubectl get applicationdefinitions.cozystack.io,helmreleases.helm.toolkit.fluxcd.io,namespaces -A -o yaml > dump.yaml`, then --dump dump.yaml)",
            api.url
        )
    );

    // The deployed policy's settings, unreadable: the missing `get`, named, and exit 2.
    let api = loopback::serve(Vec::new(), Some("clusteradmissionpolicies"), 500, &scratch);
    let forbidden = cli(
        &["preflight", "--from-policy", "cozystack-capabilities"],
        &[],
        Some(&api.kubeconfig),
    );
    assert_eq!(forbidden.status.code(), Some(2));
    assert_eq!(
        utf8(&forbidden.stderr).trim_end(),
        format!(
            "error: reading ClusterAdmissionPolicy cozystack-capabilities is forbidden for the current user of context loopback at {} (clusteradmissionpolicies.policies.kubewarden.io is forbidden: User \"preflight\" cannot get resource \"clusteradmissionpolicies\" in API group \"policies.kubewarden.io\" at the cluster scope): grant it `get` on clusteradmissionpolicies.policies.kubewarden.io (deploy/preflight-rbac.yaml), or pass the settings with --settings",
            api.url
        )
    );
}

/// Each OpenReports kind's openAPIV3Schema, from the CRDs Kubewarden installs.
fn openreports_crds() -> std::collections::BTreeMap<String, serde_json::Value> {
    use serde::Deserialize;
    let text = committed("openreports-crds.yaml");
    serde_yaml::Deserializer::from_str(&text)
        .filter_map(|document| serde_json::Value::deserialize(document).ok())
        .filter(|crd| crd["kind"] == "CustomResourceDefinition")
        .map(|crd| {
            let kind = crd["spec"]["names"]["kind"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let version = &crd["spec"]["versions"][0];
            assert_eq!(version["name"], "v1alpha1");
            (kind, version["schema"]["openAPIV3Schema"].clone())
        })
        .collect()
}

/// Whether `value` fits a structural schema as the API server reads one: each field a
/// property of its object (the server prunes the rest), of its type, every required field
/// there. An error names the path.
fn structural(
    schema: &serde_json::Value,
    value: &serde_json::Value,
    at: &str,
) -> Result<(), String> {
    use serde_json::Value;
    let kind = schema["type"].as_str().unwrap_or_default();
    let fits = match (kind, value) {
        ("object", Value::Object(_))
        | ("array", Value::Array(_))
        | ("string", Value::String(_))
        | ("boolean", Value::Bool(_)) => true,
        ("integer", Value::Number(n)) => n.is_i64() || n.is_u64(),
        ("", _) => true,
        _ => false,
    };
    if !fits {
        return Err(format!("{at}: {value} is no {kind}"));
    }
    if let Some(allowed) = schema["enum"].as_array()
        && !allowed.contains(value)
    {
        return Err(format!("{at}: {value} is none of {allowed:?}"));
    }
    match value {
        Value::Object(fields) => {
            for required in schema["required"].as_array().into_iter().flatten() {
                let name = required.as_str().unwrap_or_default();
                if !fields.contains_key(name) {
                    return Err(format!("{at}: no {name}, which the schema requires"));
                }
            }
            let properties = schema["properties"].as_object();
            for (name, field) in fields {
                let path = format!("{at}.{name}");
                match (
                    properties.and_then(|p| p.get(name)),
                    &schema["additionalProperties"],
                ) {
                    (Some(property), _) => structural(property, field, &path)?,
                    (None, Value::Object(additional)) => {
                        structural(&Value::Object(additional.clone()), field, &path)?
                    }
                    // metadata and other open objects declare no properties.
                    (None, _) if properties.is_none() => {}
                    (None, _) => {
                        return Err(format!(
                            "{path}: no such field (the API server would prune it)"
                        ));
                    }
                }
            }
            Ok(())
        }
        Value::Array(items) => items
            .iter()
            .enumerate()
            .try_for_each(|(i, item)| structural(&schema["items"], item, &format!("{at}[{i}]"))),
        _ => Ok(()),
    }
}
