//! The binary's verbs end to end, as an operator runs them: `--help` on each, `run` on a dump
//! and on a live (loopback) API, `inspect`, `annotate` and `artifacthub` reproducing what the
//! build ships.

mod common;

use std::path::{Path, PathBuf};

use cozystack_e2e::loopback;
use cozystack_policy_runtime::cluster::ClusterObjects;
use serde_json::Value;

use common::{cli, ran, scratch, workspace};

/// An AdmissionReview as the API server sends it for a user's app CREATE (through cozystack-api).
/// A Monitoring CREATE named `name` in `namespace`.
fn review(namespace: &str, name: &str, user: &str, group: &str) -> PathBuf {
    let text = format!(
        "apiVersion: admission.k8s.io/v1
kind: AdmissionReview
request:
  uid: 0b9d3f1e-cli
  kind: {{group: apps.cozystack.io, version: v1alpha1, kind: Monitoring}}
  resource: {{group: apps.cozystack.io, version: v1alpha1, resource: monitorings}}
  requestKind: {{group: apps.cozystack.io, version: v1alpha1, kind: Monitoring}}
  name: {name}
  namespace: {namespace}
  operation: CREATE
  userInfo: {{username: {user}, groups: [{group}, 'system:authenticated']}}
  object:
    apiVersion: apps.cozystack.io/v1alpha1
    kind: Monitoring
    metadata: {{name: {name}, namespace: {namespace}}}
  oldObject: null
"
    );
    let path = scratch(&format!("review-{namespace}-{name}.yaml"));
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("{e}"));
    path
}

#[test]
fn every_verb_has_help() {
    for verb in [
        "run",
        "check",
        "preflight",
        "annotate",
        "inspect",
        "artifacthub",
        "push",
        "pull",
    ] {
        let out = ran(cli().args([verb, "--help"]));
        assert_eq!(out.code, Some(0), "{verb}: {}", out.stderr);
        assert!(
            out.stdout
                .contains(&format!("Usage: cozystack-policy {verb} ")),
            "{verb}: {}",
            out.stdout
        );
    }
    // A dump and a live context at once is a contradiction, refused before anything runs.
    let out = ran(cli().args(["preflight", "--dump", "e2e/cluster", "--context", "prod"]));
    assert_eq!(out.code, Some(2));
    assert!(
        out.stderr
            .contains("error: the argument '--dump <PATH>' cannot be used with '--context <NAME>'"),
        "{}",
        out.stderr
    );
    let out = ran(cli().arg("evaluate"));
    assert_eq!(out.code, Some(2));
    assert!(
        out.stderr
            .contains("error: unrecognized subcommand 'evaluate'"),
        "{}",
        out.stderr
    );
}

#[test]
fn run_prints_the_verdict_the_message_and_the_host_calls() {
    let settings = "e2e/cluster/settings.yaml";
    let denied = review("tenant-root", "second", "rita", "tenant-root-admin");
    let out = ran(cli()
        .args(["run", "--settings", settings, "--dump", "e2e/cluster"])
        .arg(&denied));
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    // Which settings judged it comes first, as every verb says it.
    let (judged_by, rest) = out.stdout.split_once('\n').unwrap_or_default();
    assert!(
        judged_by.starts_with("judged by: settings e2e/cluster/settings.yaml; rules: "),
        "{}",
        out.stdout
    );
    let lines: Vec<&str> = rest.lines().collect();
    assert_eq!(
        lines[..4],
        [
            "request   CREATE Monitoring tenant-root/second as rita",
            "verdict   DENIED (403)",
            "rule      cardinality",
            "message   Monitoring: at most 1 per tenant tenant-root; already present: monitoring; use or edit the existing Monitoring instead of creating another (cardinality tenant/1)",
        ],
        "{}",
        out.stdout
    );
    assert!(lines[4].starts_with("host calls 2 ("), "{}", out.stdout);
    assert!(
        lines[5].starts_with("  1. list cozystack.io/v1alpha1 ApplicationDefinition in all namespaces [masks metadata.name,")
            && lines[5].ends_with(" -> 14 items, 8557 bytes"),
        "{}",
        out.stdout
    );
    assert!(
        lines[6].starts_with("  2. list helm.toolkit.fluxcd.io/v2 HelmRelease in all namespaces [labels apps.cozystack.io/application.kind=Monitoring,apps.cozystack.io/application.group=apps.cozystack.io;")
            && lines[6].ends_with(" -> 2 items, 1780 bytes"),
        "{}",
        out.stdout
    );
    assert_eq!(
        out.stderr.lines().collect::<Vec<_>>()[0],
        "policy: the embedded policy v0.2.0"
    );

    // The same review on standard input.
    let review_text = std::fs::read_to_string(&denied).unwrap_or_else(|e| panic!("{e}"));
    let piped = ran(cli()
        .args(["run", "--settings", settings, "--dump", "e2e/cluster", "-"])
        .write_stdin(review_text));
    assert_eq!(piped.code, Some(1), "{}", piped.stderr);
    assert_eq!(piped.stdout, out.stdout);

    // The same request as JSON: the ValidationResponse and the calls.
    let out = ran(cli()
        .args([
            "run",
            "--output",
            "json",
            "--settings",
            settings,
            "--dump",
            "e2e/cluster",
        ])
        .arg(&denied));
    let json: Value =
        serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", out.stdout));
    assert_eq!(json["response"]["accepted"], false);
    assert_eq!(json["response"]["code"], 403);
    // The row of the rule table that refused, as the module names it for the audit log.
    assert_eq!(
        json["response"]["audit_annotations"],
        serde_json::json!({"rule": "cardinality"})
    );
    assert_eq!(json["hostCalls"].as_array().map(Vec::len), Some(2));

    // Allowed, read live from a loopback API serving the bundled cluster: exit 0, same calls.
    // Under its slot: the stock Monitoring is held by the name the Tenant chart gives it.
    let allowed = review("tenant-acme", "monitoring", "carol", "tenant-acme-admin");
    let from_dump = ran(cli()
        .args(["run", "--settings", settings, "--dump", "e2e/cluster"])
        .arg(&allowed));
    assert_eq!(from_dump.code, Some(0), "{}", from_dump.stderr);
    assert!(
        from_dump.stdout.contains("\nverdict   ALLOWED\n"),
        "{}",
        from_dump.stdout
    );
    let mut objects: Vec<_> = ClusterObjects::load_dir(&workspace().join("e2e/cluster"))
        .unwrap_or_else(|e| panic!("{e}"))
        .values()
        .collect();
    // The deployed ClusterAdmissionPolicy, for --from-policy.
    objects.extend(
        ClusterObjects::read_dump(&[workspace().join("deploy/policy-protect.yaml")])
            .unwrap_or_else(|e| panic!("{e}"))
            .values(),
    );
    let api = loopback::serve(objects, None, 500, &scratch("live"));
    let live = ran(cli()
        .args(["run", "--settings", settings])
        .arg(&allowed)
        .env("KUBECONFIG", &api.kubeconfig));
    assert_eq!(live.code, Some(0), "{}", live.stderr);
    assert_eq!(live.stdout, from_dump.stdout);
    assert!(
        live.stderr
            .contains(&format!("read from context loopback at {}: ", api.url)),
        "{}",
        live.stderr
    );

    // The proxy environment is read as kubectl reads it: NO_PROXY exempts the API server, and
    // without it the request goes to the proxy (here a closed port, so it fails).
    let proxied = |no_proxy: &str| {
        ran(cli()
            .args(["run", "--settings", settings])
            .arg(&allowed)
            .env("KUBECONFIG", &api.kubeconfig)
            .env("HTTP_PROXY", "http://127.0.0.1:1")
            .env("NO_PROXY", no_proxy))
    };
    let exempt = proxied("localhost,127.0.0.1");
    assert_eq!(exempt.code, Some(0), "{}", exempt.stderr);
    assert_eq!(exempt.stdout, from_dump.stdout);
    let through_proxy = proxied("example.com");
    assert_eq!(through_proxy.code, Some(2), "{}", through_proxy.stdout);
    assert!(
        through_proxy.stderr.contains(&format!(
            "from context loopback at {} (through proxy http://127.0.0.1:1/) failed: ",
            api.url
        )),
        "{}",
        through_proxy.stderr
    );

    // The settings the cluster's policy-server uses: the deployed ClusterAdmissionPolicy's,
    // read from the cluster, give what its manifest gives.
    let deployed = ran(cli()
        .args(["run", "--from-policy", "cozystack-capabilities"])
        .arg(&denied)
        .env("KUBECONFIG", &api.kubeconfig));
    let manifest = ran(cli()
        .args([
            "run",
            "--settings",
            "deploy/policy-protect.yaml",
            "--dump",
            "e2e/cluster",
        ])
        .arg(&denied));
    assert_eq!(deployed.code, Some(1), "{}", deployed.stderr);
    // The same verdict, each naming where its settings came from on its first line.
    let (named, verdict) = deployed.stdout.split_once('\n').unwrap_or_default();
    assert_eq!(
        manifest.stdout,
        format!(
            "{}\n{verdict}",
            named.replace(
                "ClusterAdmissionPolicy cozystack-capabilities, read from the cluster",
                "ClusterAdmissionPolicy cozystack-capabilities in deploy/policy-protect.yaml"
            )
        )
    );
    assert!(
        named.starts_with("judged by: ClusterAdmissionPolicy cozystack-capabilities, read from the cluster; rules: the built-in rule set"),
        "{named}"
    );
    let missing = ran(cli()
        .args(["run", "--from-policy", "capabilities"])
        .arg(&denied)
        .env("KUBECONFIG", &api.kubeconfig));
    assert_eq!(missing.code, Some(2));
    assert_eq!(
        missing.stderr.trim_end(),
        format!(
            "error: context loopback at {} has no ClusterAdmissionPolicy capabilities (`kubectl get clusteradmissionpolicies` lists them); name a deployed one, or pass its settings with --settings",
            api.url
        )
    );

    // What cannot be evaluated says why, with exit 2.
    let empty = scratch("empty.json");
    std::fs::write(&empty, "{}").unwrap_or_else(|e| panic!("{e}"));
    let out = ran(cli().args(["run", "--dump", "e2e/cluster"]).arg(&empty));
    assert_eq!(out.code, Some(2));
    assert_eq!(
        out.stderr.trim_end(),
        format!(
            "error: {}: neither an AdmissionReview nor an AdmissionRequest (no operation and kind)",
            empty.display()
        )
    );
    let bad_settings = scratch("bad-settings.yaml");
    std::fs::write(&bad_settings, "platformWriters: sometimes\n").unwrap_or_else(|e| panic!("{e}"));
    let out = ran(cli()
        .args(["run", "--dump", "e2e/cluster", "--settings"])
        .arg(&bad_settings)
        .arg(&denied));
    assert_eq!(out.code, Some(2));
    assert!(
        out.stderr.contains("error: the settings are invalid: "),
        "{}",
        out.stderr
    );
}

#[test]
fn packaging_verbs_reproduce_what_the_build_ships() {
    // annotate asks the module for its protocol version, as kwctl does: the same bytes as
    // `make annotated-policy.wasm`.
    let out_path = scratch("annotated.wasm");
    let out = ran(cli()
        .args([
            "annotate",
            "--metadata",
            "policy-metadata.yml",
            "--usage",
            "README.md",
            "-o",
        ])
        .arg(&out_path)
        .arg("policy.wasm"));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let read = |p: &Path| std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    assert!(
        read(&out_path) == read(&workspace().join("annotated-policy.wasm")),
        "annotate differs from the shipped annotated-policy.wasm (stale? `make annotated-policy.wasm` rebuilds it after README.md or policy-metadata.yml change)"
    );

    // inspect: the embedded release by default, a file when named.
    let embedded = ran(cli().arg("inspect"));
    assert_eq!(embedded.code, Some(0), "{}", embedded.stderr);
    let meta: Value = serde_json::from_str(&embedded.stdout).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(meta["protocolVersion"], "v1");
    assert_eq!(
        meta["annotations"]["io.kubewarden.policy.title"],
        "cozystack-capabilities"
    );
    let unannotated = ran(cli().args(["inspect", "policy.wasm"]));
    assert_eq!(unannotated.code, Some(2));
    assert_eq!(
        unannotated.stderr.trim_end(),
        "error: policy.wasm: the module has no io.kubewarden.metadata section"
    );

    // inspect --rules: the built-in rule set, as the module's validate_settings reports it.
    let rules = ran(cli().args(["inspect", "--rules"]));
    assert_eq!(rules.code, Some(0), "{}", rules.stderr);
    let lines: Vec<&str> = rules.stdout.lines().collect();
    assert_eq!(
        lines.first().copied(),
        Some("built-in rule set (cozystack/cozystack 3c780acd), 11 kinds:")
    );
    for line in [
        "  Monitoring: module; tenant/1 held by monitoring; deletion protect; provides monitoring to children; consumes ingress; release prefix \"\"",
        "  Bucket: catalog; consumes ingress, seaweedfs; release prefix \"bucket-\"",
        "examined, no rule (21): ClickHouse, ExternalDNS, FoundationDB, HTTPCache, Kafka, KubernetesNodes, MariaDB, MongoDB, NATS, OpenBAO, OpenSearch, Postgres, Qdrant, RabbitMQ, Redis, TCPBalancer, Tenant, VMDisk, VMInstance, VPN, VirtualPrivateCloud",
        "  BootBox: module; cluster/1 held by bootbox in tenant-root; consumes ingress; release prefix \"\"",
        "  Kubernetes: catalog; consumes etcd, ingress, monitoring; release prefix \"kubernetes-\"",
    ] {
        assert!(lines.contains(&line), "{}", rules.stdout);
    }

    // artifacthub keeps the committed createdAt: regenerating gives the committed file.
    let package = scratch("artifacthub-pkg.yml");
    std::fs::copy(workspace().join("artifacthub-pkg.yml"), &package)
        .unwrap_or_else(|e| panic!("{e}"));
    let out = ran(cli()
        .args([
            "artifacthub",
            "--metadata",
            "policy-metadata.yml",
            "--questions",
            "questions-ui.yml",
            "--changelog",
            "CHANGELOG.md",
            "-o",
        ])
        .arg(&package));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(
        std::fs::read_to_string(&package).unwrap_or_default(),
        std::fs::read_to_string(workspace().join("artifacthub-pkg.yml")).unwrap_or_default()
    );
}
