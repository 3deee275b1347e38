//! `cozystack-policy`: evaluate a request, pre-flight a cluster, and kwctl's packaging verbs,
//! for the Cozystack capabilities policy.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use clap::{Args, Parser, Subcommand, ValueEnum};
use cozystack_packaging::{artifacthub, metadata, section};
use cozystack_policy::error::Error;
use cozystack_policy::live::{self, Target};
use cozystack_policy::output::{self, emit, json, read, read_text};
use cozystack_policy::source::Source;
use cozystack_policy::sourceignore::GitRepository;
use cozystack_policy::supply::{
    self, KeygenArgs, PullArgs, PushArgs, SbomArgs, SignArgs, VerificationConfigArgs, VerifyArgs,
    VerifyKeyArgs,
};
use cozystack_policy::{
    check, evaluate, fluxbuild, kustomizations, manifests, preflight, settings, simulate,
};
use cozystack_policy_runtime::cluster::{ClusterObjects, Keep};
use cozystack_policy_runtime::policy::Policy;
use serde_json::Value;

#[derive(Parser)]
#[command(
    name = "cozystack-policy",
    version,
    about = "The Cozystack capabilities policy, run the way Kubewarden runs it",
    long_about = "The Cozystack capabilities policy, run the way Kubewarden runs it: evaluate one \
request or pre-flight a whole cluster (read from a dump or live through the current kubeconfig \
context), and package the module (annotate, inspect, push, pull, Artifact Hub) and sign it \
(keygen, sign, verify, sbom)."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Evaluate one AdmissionRequest or AdmissionReview and print the verdict, the message and
    /// the host calls the policy made. Exit 0 allowed, 1 denied, 2 when it cannot be evaluated.
    Run(RunArgs),
    /// Judge a change set against the cluster as Flux applies it (sorted into stages, each
    /// dry-run whole before any of it is applied, then the prunes), or in order (--in-order).
    /// Exit 0 every write admitted, 1 one refused, 2 when the input, the settings or the cluster
    /// cannot be used.
    Check(CheckArgs),
    /// Replay every Namespace and HelmRelease as the audit scanner would and report what the
    /// policy flags. Exit 0 clean, 1 findings, 2 when the cluster or settings cannot be used.
    Preflight(PreflightArgs),
    /// Play random lifecycles of the install (Tenants, switches, apps created and deleted by
    /// their administrators through cozystack-api, and what cozystack-api and helm-controller
    /// write after them) through the module, checking the rules' guarantees after every step.
    /// Exit 0 none broken, 1 one broken (the shrunk counterexample written as an e2e scenario),
    /// 2 when it cannot run.
    Simulate(SimulateArgs),
    /// Embed policy-metadata.yml in the module (the io.kubewarden.metadata section), as kwctl
    /// annotate does.
    Annotate(AnnotateArgs),
    /// Print the metadata embedded in a module.
    Inspect(InspectArgs),
    /// Write the Artifact Hub package (artifacthub-pkg.yml) from the metadata.
    Artifacthub(ArtifacthubArgs),
    /// Push an annotated module to an OCI registry as a Kubewarden policy artifact.
    Push(PushArgs),
    /// Pull a policy artifact, check its digest and media types, and write the module.
    Pull(PullArgs),
    /// Write a cosign key pair (ECDSA P-256, cosign's default): PREFIX.key sealed with a
    /// password, and PREFIX.pub.
    Keygen(KeygenArgs),
    /// Sign a pushed artifact, and the SBOM attached to it, with a cosign private key, as
    /// `cosign sign --key` does.
    Sign(SignArgs),
    /// Check an artifact's cosign signature against a public key, as `kwctl verify -k` does.
    /// Exit 0 verified, 1 refused, 2 when it cannot be checked.
    Verify(VerifyArgs),
    /// Print the CycloneDX SBOM attached to an artifact.
    Sbom(SbomArgs),
    /// Print a Kubewarden verification config requiring signatures by these keys (for a
    /// PolicyServer's `verificationConfig` ConfigMap, or `verify --verification-config`).
    VerificationConfig(VerificationConfigArgs),
}

/// Which policy module to run.
#[derive(Args)]
struct PolicyArgs {
    /// The module: a file, or registry://REF (by digest: registry://host/repo@sha256:…).
    /// Default: the release embedded in this binary.
    #[arg(long, value_name = "FILE|registry://REF")]
    policy: Option<String>,
    /// Pull over plain HTTP (a registry on loopback or a lab network).
    #[arg(long)]
    insecure: bool,
    #[command(flatten)]
    verify: VerifyKeyArgs,
}

/// Which cluster the policy's host calls read.
#[derive(Args)]
struct ClusterArgs {
    /// A `kubectl get -o yaml` dump (a List or several documents), a file or a folder of such
    /// files; repeatable. Without it the cluster is read live through the kubeconfig.
    #[arg(long, value_name = "PATH")]
    dump: Vec<PathBuf>,
    /// The kubeconfig to read (default: $KUBECONFIG, else ~/.kube/config).
    #[arg(long, value_name = "FILE", conflicts_with = "dump")]
    kubeconfig: Option<PathBuf>,
    /// The kubeconfig context (default: the current context).
    #[arg(long, value_name = "NAME", conflicts_with = "dump")]
    context: Option<String>,
}

/// What an evaluation needs: the settings, the cluster and the module.
#[derive(Args)]
struct EvaluationArgs {
    /// The policy's settings, or a ClusterAdmissionPolicy (`kubectl get clusteradmissionpolicy
    /// NAME -o yaml`: its spec.settings). Default: none (`{}`).
    #[arg(long, value_name = "FILE")]
    settings: Option<PathBuf>,
    /// Read the settings of this deployed ClusterAdmissionPolicy from the cluster instead
    /// (needs `get` on clusteradmissionpolicies.policies.kubewarden.io).
    #[arg(long, value_name = "NAME", conflicts_with_all = ["settings", "dump"])]
    from_policy: Option<String>,
    #[command(flatten)]
    cluster: ClusterArgs,
    #[command(flatten)]
    policy: PolicyArgs,
}

#[derive(Args)]
struct SimulateArgs {
    #[command(flatten)]
    evaluation: EvaluationArgs,
    /// The first seed; each run takes the next. The same seed plays the same run.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Steps per run.
    #[arg(long, default_value_t = 200)]
    steps: usize,
    /// At most this many runs, one seed each (at least one runs).
    #[arg(long)]
    runs: Option<u64>,
    /// Stop starting runs after this many seconds; with --runs, whichever comes first; with
    /// neither, 60.
    #[arg(long)]
    seconds: Option<f64>,
    /// Where the counterexample goes (counterexample.yaml).
    #[arg(long, value_name = "DIR", default_value = "target/simulate")]
    out: PathBuf,
}

#[derive(Args)]
struct RunArgs {
    /// The request: an AdmissionReview or AdmissionRequest, JSON or YAML; `-` for stdin.
    request: PathBuf,
    #[command(flatten)]
    evaluation: EvaluationArgs,
    /// `text` for a person, `json` for the ValidationResponse and the host calls.
    #[arg(long, value_enum, default_value_t = RunOutput::Text)]
    output: RunOutput,
}

#[derive(Clone, Copy, ValueEnum)]
enum RunOutput {
    Text,
    Json,
}

#[derive(Args)]
struct CheckArgs {
    /// The manifests: files, folders (every *.yaml and *.yml the source artifact holds,
    /// recursively) or `-` for standard input; multi-document YAML or JSON (`kustomize build
    /// overlay | … check -`). With --kustomization, the one folder its spec.path names.
    #[arg(required = true, value_name = "PATH")]
    paths: Vec<PathBuf>,
    /// Manifests of objects the change removes, deleted after every apply (as Flux prunes);
    /// repeatable.
    #[arg(long, value_name = "PATH")]
    delete: Vec<PathBuf>,
    /// The Flux Kustomization that applies the change set: a file of the repository, `kubectl
    /// get kustomization NAME -n NS -o yaml` with its status.inventory, or NAMESPACE/NAME read
    /// from the dump or the cluster. One folder
    /// given is built as kustomize-controller builds its spec.path (targetNamespace,
    /// namePrefix, nameSuffix, patches, components, images, commonMetadata); files are taken as
    /// built already (`flux build kustomization … | check -`); with spec.prune,
    /// what its inventory lists and the change set no longer holds is pruned, if it carries
    /// this Kustomization's owner labels, which every object applied gets.
    /// Repeated, the Kustomizations of one repository: PATH is its root, each builds its
    /// spec.path, and they are judged in spec.dependsOn order, each on the cluster the ones
    /// before it leave.
    #[arg(long, visible_alias = "inventory", value_name = "FILE|NS/NAME")]
    kustomization: Vec<PathBuf>,
    /// The Flux GitRepository the folders come from, a file or NAMESPACE/NAME read from the dump
    /// or the cluster: its spec.ignore patterns leave paths out of what source-controller packs.
    #[arg(long, value_name = "FILE|NS/NAME")]
    git_repository: Option<PathBuf>,
    /// Apply one manifest after the other in the order given, each before the next is sent
    /// (`kubectl apply --server-side`), instead of as Flux's kustomize-controller does (sorted
    /// into stages, each dry-run whole before any of it is applied, the prune in reverse).
    #[arg(long)]
    in_order: bool,
    /// Judge the writes as this user (as `kubectl --as`); live, the default is who the current
    /// credentials are (SelfSubjectReview); with --dump it is required.
    #[arg(long = "as", value_name = "USER")]
    as_user: Option<String>,
    /// A group of that user (as `kubectl --as-group`); repeatable.
    #[arg(long = "as-group", value_name = "GROUP", requires = "as_user")]
    as_group: Vec<String>,
    /// The namespace of namespaced manifests that state none (as `kubectl apply -n`).
    #[arg(short, long, value_name = "NAMESPACE")]
    namespace: Option<String>,
    #[command(flatten)]
    evaluation: EvaluationArgs,
    /// `text` for a person, `json` with every request and response, `junit` for CI reports
    /// (written even when the change set cannot be read: one error naming the file).
    #[arg(long, value_enum, default_value_t = CheckOutput::Text)]
    output: CheckOutput,
    /// Exit with this code when nothing is refused but a write was admitted with a warning
    /// (as kyverno's --warn-exit-code): under the stock `platformWriters: warn`, what Flux
    /// would break is a warning, and a gate should fail on it.
    #[arg(long, value_name = "CODE")]
    warn_exit_code: Option<u8>,
    /// Write each judged request (NNNN.request.json, an AdmissionReview) and the cluster it was
    /// judged on (NNNN.cluster.yaml) here: `run NNNN.request.json --dump NNNN.cluster.yaml`
    /// gives that verdict again. For small change sets: each cluster is written whole.
    #[arg(long, value_name = "DIR")]
    save_requests: Option<PathBuf>,
}

#[derive(Clone, Copy, ValueEnum)]
enum CheckOutput {
    Text,
    Json,
    Junit,
}

#[derive(Args)]
struct PreflightArgs {
    #[command(flatten)]
    evaluation: EvaluationArgs,
    /// `text` for a person, `policyreport` for wgpolicyk8s.io/v1alpha2 reports.
    #[arg(long, value_enum, default_value_t = ReportOutput::Text)]
    output: ReportOutput,
    /// Name the clean namespaces too (by default they are counted).
    #[arg(long)]
    list_clean: bool,
}

#[derive(Clone, Copy, ValueEnum)]
enum ReportOutput {
    Text,
    Policyreport,
}

#[derive(Args)]
struct AnnotateArgs {
    /// The module to annotate.
    input: PathBuf,
    /// policy-metadata.yml.
    #[arg(long, value_name = "FILE")]
    metadata: PathBuf,
    /// The usage text (the README).
    #[arg(long, value_name = "FILE")]
    usage: PathBuf,
    /// The waPC protocol version; default: asked of the module, as kwctl does.
    #[arg(long, value_name = "VERSION")]
    protocol_version: Option<String>,
    /// Where to write the annotated module.
    #[arg(short, value_name = "OUT")]
    output: PathBuf,
}

#[derive(Args)]
struct InspectArgs {
    /// The module: a file or registry://REF; default: the embedded release.
    policy: Option<String>,
    /// Pull over plain HTTP.
    #[arg(long)]
    insecure: bool,
    #[command(flatten)]
    verify: VerifyKeyArgs,
    /// Print the built-in rule set the module carries (`definitionSource: builtin`), as the
    /// module itself reports it from validate_settings, instead of its metadata.
    #[arg(long)]
    rules: bool,
}

#[derive(Args)]
struct ArtifacthubArgs {
    /// policy-metadata.yml.
    #[arg(long, value_name = "FILE")]
    metadata: PathBuf,
    /// questions-ui.yml, the settings form Artifact Hub shows.
    #[arg(long, value_name = "FILE")]
    questions: Option<PathBuf>,
    /// createdAt of a new package (RFC 3339); an existing OUT keeps its own.
    #[arg(long, value_name = "RFC3339")]
    created_at: Option<String>,
    /// Where to write the package.
    #[arg(short, value_name = "OUT")]
    output: PathBuf,
}

/// Exit 2: what the verb was given cannot be used (clap's code for a bad command line too).
const UNUSABLE: u8 = 2;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(args) => run(args),
        Command::Check(args) => run_check(args),
        Command::Preflight(args) => run_preflight(args),
        Command::Simulate(args) => run_simulate(args),
        Command::Annotate(args) => annotate(args).map(|()| ExitCode::SUCCESS),
        Command::Inspect(args) => inspect(args).map(|()| ExitCode::SUCCESS),
        Command::Artifacthub(args) => package(args).map(|()| ExitCode::SUCCESS),
        Command::Push(args) => supply::push(args).map(|()| ExitCode::SUCCESS),
        Command::Pull(args) => supply::pull(args).map(|()| ExitCode::SUCCESS),
        Command::Keygen(args) => supply::keygen(args).map(|()| ExitCode::SUCCESS),
        Command::Sign(args) => supply::sign(args).map(|()| ExitCode::SUCCESS),
        Command::Verify(args) => supply::verify(args),
        Command::Sbom(args) => supply::print_sbom(args).map(|()| ExitCode::SUCCESS),
        Command::VerificationConfig(args) => {
            supply::verification_config(args).map(|()| ExitCode::SUCCESS)
        }
    };
    result.unwrap_or_else(|err| {
        eprintln!("error: {err}");
        ExitCode::from(UNUSABLE)
    })
}

/// The settings, the module and the objects its host calls read: the dump, or the kinds the
/// policy may read (its `contextAwareResources`) listed live. Says on stderr what it read.
fn prepare(args: &EvaluationArgs) -> Result<(Value, Policy, ClusterObjects), Error> {
    prepare_keeping(args, None)
}

/// The same, keeping the managed fields of the objects `keep` names.
fn prepare_keeping(
    args: &EvaluationArgs,
    keep: Keep<'_>,
) -> Result<(Value, Policy, ClusterObjects), Error> {
    let settings = match &args.from_policy {
        Some(name) => {
            let settings = live::policy_settings(&target(&args.cluster), name)?;
            eprintln!("settings: ClusterAdmissionPolicy {name}");
            settings
        }
        None => settings::read(args.settings.as_deref())?,
    };
    let source = Source::parse(args.policy.policy.as_deref(), args.policy.insecure);
    let (policy, origin) = source.load(args.policy.verify.trust()?.as_ref())?;
    eprintln!("policy: {origin}");
    let cluster = cluster(&args.cluster, &policy, keep)?;
    Ok((settings, policy, cluster))
}

fn target(args: &ClusterArgs) -> Target {
    Target {
        kubeconfig: args.kubeconfig.clone(),
        context: args.context.clone(),
    }
}

fn cluster(args: &ClusterArgs, policy: &Policy, keep: Keep<'_>) -> Result<ClusterObjects, Error> {
    let started = Instant::now();
    if !args.dump.is_empty() {
        let cluster = ClusterObjects::read_dump_keeping(&args.dump, keep)?;
        eprintln!(
            "read {} objects from the dump in {:.1} s",
            cluster.len(),
            started.elapsed().as_secs_f64()
        );
        return Ok(cluster);
    }
    let mut snapshot = live::read(
        &target(args),
        &policy.metadata.context_aware_resources,
        keep,
    )?;
    // The release the cluster runs, for the report to hold against the settings'.
    let (namespace, name) = preflight::VERSION_CONFIGMAP;
    if let Some(map) = live::config_map(&target(args), namespace, name)? {
        snapshot.cluster.push(map);
    }
    eprintln!(
        "read from context {}: {} in {:.1} s",
        snapshot.context,
        snapshot.listed.join(", "),
        started.elapsed().as_secs_f64()
    );
    Ok(snapshot.cluster)
}

fn run(args: RunArgs) -> Result<ExitCode, Error> {
    let request = evaluate::read_request(&args.request)?;
    let (settings, policy, cluster) = prepare(&args.evaluation)?;
    let evaluation = evaluate::evaluate(&policy, &request, &settings, cluster)?;
    match args.output {
        RunOutput::Text => emit(&evaluate::text(&request, &evaluation))?,
        RunOutput::Json => {
            let calls: Vec<String> = evaluation
                .exchanges
                .iter()
                .map(ToString::to_string)
                .collect();
            emit(&json(
                &serde_json::json!({"response": evaluation.response, "hostCalls": calls}),
            )?)?;
        }
    }
    Ok(if evaluation.response["accepted"] == true {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The variables a Kustomization's `spec.postBuild` substitutes, its `substituteFrom` objects
/// read from the dump, or live (ConfigMaps only: the check reads no Secret of a live cluster).
fn substitution(
    kustomization: &Value,
    spec: &fluxbuild::Spec,
    cluster: &ClusterArgs,
) -> Result<std::collections::BTreeMap<String, String>, Error> {
    let Some(post) = &spec.post_build else {
        return Ok(Default::default());
    };
    let namespace = kustomization["metadata"]["namespace"]
        .as_str()
        .unwrap_or_default();
    let source = match (post.reads_cluster(), cluster.dump.is_empty()) {
        (false, _) => ClusterObjects::default(),
        (true, false) => ClusterObjects::read_dump(&cluster.dump)?,
        (true, true) => {
            let mut objects = Vec::new();
            for (kind, name) in post.references() {
                if kind != "ConfigMap" {
                    return Err(format!(
                        "the Kustomization {} substitutes from {kind}/{name}: the check reads no Secret of a live cluster; pass --dump with it, or pipe `flux build kustomization` in",
                        spec.name
                    )
                    .into());
                }
                objects.extend(live::config_map(&target(cluster), namespace, name)?);
            }
            objects.into_iter().collect()
        }
    };
    post.variables(namespace, &source)
}

/// Flux's Kustomization and GitRepository: apiVersion, kind, plural.
const KUSTOMIZATION: (&str, &str, &str) = (
    "kustomize.toolkit.fluxcd.io/v1",
    "Kustomization",
    "kustomizations",
);
const GIT_REPOSITORY: (&str, &str, &str) = (
    "source.toolkit.fluxcd.io/v1",
    "GitRepository",
    "gitrepositories",
);

/// A Flux object named by `reference`: a file holding it, or `namespace/name` read from the dump,
/// or else from the live cluster; and how to name where it came from.
fn flux_object(
    reference: &Path,
    (api_version, kind, plural): (&str, &str, &str),
    cluster: &ClusterArgs,
) -> Result<(Value, String), Error> {
    let shown = reference.display().to_string();
    if reference.is_file() || shown == "-" {
        let text = read_text(reference)?;
        let object = serde_yaml::from_str(&text).map_err(|e| Error::decode(&shown, e))?;
        return Ok((object, shown));
    }
    let Some((namespace, name)) = shown
        .split_once('/')
        .filter(|(ns, n)| !ns.is_empty() && !n.is_empty() && !n.contains('/'))
    else {
        return Err(format!("{shown}: no such file, nor a {kind} named namespace/name").into());
    };
    let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
    let found = match cluster.dump.is_empty() {
        false => ClusterObjects::read_dump(&cluster.dump)?
            .values()
            .find(|o| {
                o["kind"] == kind
                    && o["apiVersion"]
                        .as_str()
                        .is_some_and(|v| v.starts_with(&format!("{group}/")))
                    && o["metadata"]["namespace"] == namespace
                    && o["metadata"]["name"] == name
            }),
        true => live::object(
            &target(cluster),
            (api_version, kind, plural),
            namespace,
            name,
        )?,
    };
    let from = if cluster.dump.is_empty() {
        "the cluster"
    } else {
        "the dump"
    };
    let object = found.ok_or_else(|| format!("{kind} {namespace}/{name}: not in {from}"))?;
    Ok((object, format!("{kind} {namespace}/{name} (from {from})")))
}

/// Who applies the change set: `--as`, or, live, who the current credentials are.
fn check_identity(args: &CheckArgs) -> Result<check::Identity, Error> {
    let evaluation = &args.evaluation;
    Ok(match &args.as_user {
        Some(user) => check::Identity::impersonated(user, &args.as_group),
        None if !evaluation.cluster.dump.is_empty() => {
            return Err("--as USER is required with --dump: name who applies the change set (a stock install's Flux applies as system:serviceaccount:cozy-fluxcd:flux; a Kustomization with spec.serviceAccountName applies as that ServiceAccount)".into());
        }
        None => {
            let (user, groups, context) = live::whoami(&target(&evaluation.cluster))?;
            eprintln!("identity: {user} (SelfSubjectReview in context {context})");
            check::Identity {
                username: user,
                groups,
            }
        }
    })
}

/// `check ROOT --kustomization A --kustomization B …`: each Kustomization builds ROOT/spec.path,
/// and they are judged in spec.dependsOn order ([`kustomizations`]).
fn check_kustomizations(
    args: &CheckArgs,
    parsed: Vec<(Value, fluxbuild::Spec, String)>,
    repository: &GitRepository,
    started: Instant,
) -> Result<ExitCode, Error> {
    let [root] = args.paths.as_slice() else {
        return Err("with several --kustomization, name the repository's root folder once: each Kustomization builds its spec.path under it".into());
    };
    let mut units = Vec::new();
    for (object, spec, origin) in parsed {
        let variables = substitution(&object, &spec, &args.evaluation.cluster)?;
        let path = root.join(object["spec"]["path"].as_str().unwrap_or("./"));
        let applies = fluxbuild::build(&path, &spec, &variables, repository)?;
        units.push(kustomizations::Unit {
            object,
            spec,
            origin,
            applies,
        });
    }
    let identity = check_identity(args)?;
    let all: Vec<manifests::Manifest> = units.iter().flat_map(|u| u.applies.clone()).collect();
    let keep = check::applies_over(&all);
    let (settings, policy, cluster) = prepare_keeping(&args.evaluation, Some(&keep))?;
    eprintln!(
        "judging {} Kustomizations in dependsOn order as {}",
        units.len(),
        identity.describe()
    );
    report_release(&settings, &cluster)?;
    let report = kustomizations::run(&policy, &settings, cluster, &units, &identity)?;
    eprintln!(
        "judged {} manifests in {:.1} s{}",
        report.steps.len(),
        started.elapsed().as_secs_f64(),
        output::peak_memory()
    );
    match args.output {
        CheckOutput::Text => emit(&report.text())?,
        CheckOutput::Json => emit(&json(&report.json(&identity))?)?,
        CheckOutput::Junit => emit(&report.junit())?,
    }
    Ok(ExitCode::from(report.exit_code(args.warn_exit_code)))
}

fn run_check(args: CheckArgs) -> Result<ExitCode, Error> {
    let started = Instant::now();
    // The input first: a change set that cannot be read or built is refused before any
    // cluster is read.
    let cluster_args = &args.evaluation.cluster;
    let mut kustomizations = Vec::new();
    for reference in &args.kustomization {
        let (object, origin) = flux_object(reference, KUSTOMIZATION, cluster_args)?;
        let spec = fluxbuild::Spec::of(&object, &origin)?;
        kustomizations.push((object, spec, origin));
    }
    let repository = match &args.git_repository {
        Some(reference) => {
            let (object, origin) = flux_object(reference, GIT_REPOSITORY, cluster_args)?;
            GitRepository::of(&object, &origin)?
        }
        None => GitRepository::default(),
    };
    if kustomizations.len() > 1 {
        return check_kustomizations(&args, kustomizations, &repository, started);
    }
    let kustomization = kustomizations.pop();
    // A folder is built as the Kustomization builds its spec.path; files and standard input
    // (`flux build kustomization` piped in) are what it applies already.
    let variables = match &kustomization {
        Some((object, spec, _)) => substitution(object, spec, &args.evaluation.cluster)?,
        None => Default::default(),
    };
    let built = |paths: &[PathBuf]| match (&kustomization, paths) {
        (Some((_, spec, _)), [folder]) if folder.is_dir() => {
            fluxbuild::build(folder, spec, &variables, &repository)
        }
        _ => manifests::read(paths, &repository),
    };
    let read = built(&args.paths).and_then(|applies| {
        manifests::read(&args.delete, &repository).map(|deletes| (applies, deletes))
    });
    // Flux substitutes its post-build variables before it applies: a change set holding one is
    // not yet what it applies.
    // A Kustomization without spec.postBuild substitutes nothing: `${NAME}` lands as written; a
    // folder built with one is substituted already.
    let substitutes = match (&kustomization, args.paths.as_slice()) {
        (None, _) => true,
        (Some(_), [folder]) if folder.is_dir() => false,
        (Some((_, spec, _)), _) => spec.post_build.is_some(),
    };
    let read = read.and_then(|(applies, deletes)| match check::unsubstituted(&applies) {
        Some(error) if !args.in_order && substitutes => Err(Error::Invalid(error)),
        _ => Ok((applies, deletes)),
    });
    let (mut applies, mut deletes) = match read {
        Ok(read) => read,
        Err(error) if matches!(args.output, CheckOutput::Junit) => {
            emit(&check::Report::unreadable(&error.to_string()).junit())?;
            eprintln!("error: {error}");
            return Ok(ExitCode::from(2));
        }
        Err(error) => return Err(error),
    };
    if let Some(ns) = &args.namespace {
        for manifest in applies.iter_mut().chain(deletes.iter_mut()) {
            if manifest.namespace().is_none() && manifest.kind() != "Namespace" {
                manifest.object["metadata"]["namespace"] = ns.as_str().into();
            }
        }
    }
    let evaluation = &args.evaluation;
    let identity = check_identity(&args)?;
    // The managed fields of what the change set may apply over, for server-side apply's merge.
    let keep = check::applies_over(&applies);
    let (settings, policy, cluster) = prepare_keeping(evaluation, Some(&keep))?;
    let mut applier = if args.in_order {
        check::Applier::InOrder
    } else {
        check::Applier::Flux
    };
    if let Some((object, spec, origin)) = &kustomization {
        let (owner, pruned) = check::pruned(object, &applies, origin)?;
        if spec.prune {
            deletes.extend(pruned);
        } else if !deletes.is_empty() || !pruned.is_empty() {
            // kustomize-controller prunes only with spec.prune: what the change set drops stays.
            eprintln!(
                "the Kustomization {} has spec.prune false: nothing the change set drops is deleted, so {} deletion(s) are not judged",
                spec.name,
                deletes.len() + pruned.len()
            );
            deletes.clear();
        }
        if !args.in_order {
            applier = check::Applier::Kustomization(owner);
        }
    }
    eprintln!(
        "judging {} manifests and {} deletions as {}",
        applies.len(),
        deletes.len(),
        identity.describe()
    );
    report_release(&settings, &cluster)?;
    let changes = check::ChangeSet { applies, deletes };
    let save = args.save_requests.clone();
    if let Some(dir) = &save {
        std::fs::create_dir_all(dir).map_err(|e| Error::write(dir, e))?;
    }
    let mut observe = |n: usize, request: &Value, cluster: &ClusterObjects| -> Result<(), Error> {
        let Some(dir) = &save else {
            return Ok(());
        };
        let review = serde_json::json!({"apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview", "request": request});
        let write = |name: String, text: String| {
            let path = dir.join(name);
            std::fs::write(&path, text).map_err(|e| Error::write(&path, e))
        };
        write(format!("{n:04}.request.json"), json(&review)?)?;
        let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": cluster.values().collect::<Vec<_>>()});
        let text = serde_yaml::to_string(&list).map_err(|e| Error::Encode {
            what: "the cluster",
            reason: e.to_string(),
        })?;
        write(format!("{n:04}.cluster.yaml"), text)
    };
    let (report, _) = check::run(
        &policy,
        &settings,
        cluster,
        &changes,
        &identity,
        applier,
        &mut observe,
    )?;
    eprintln!(
        "judged {} manifests in {:.1} s{}",
        report.steps.len(),
        started.elapsed().as_secs_f64(),
        output::peak_memory()
    );
    match args.output {
        CheckOutput::Text => emit(&report.text())?,
        CheckOutput::Json => emit(&json(&report.json(&identity))?)?,
        CheckOutput::Junit => emit(&report.junit())?,
    }
    Ok(ExitCode::from(report.exit_code(args.warn_exit_code)))
}

fn run_simulate(args: SimulateArgs) -> Result<ExitCode, Error> {
    let started = Instant::now();
    let evaluation = &args.evaluation;
    let settings = settings::read(evaluation.settings.as_deref())?;
    let source = Source::parse(
        evaluation.policy.policy.as_deref(),
        evaluation.policy.insecure,
    );
    let (policy, origin) = source.load_plain_too(evaluation.policy.verify.trust()?.as_ref())?;
    eprintln!("policy: {origin}");
    let cluster = cluster(&evaluation.cluster, &policy, None)?;
    cozystack_policy::settings::check(&policy, &settings)?;
    let run = simulate::Run {
        policy: &policy,
        settings: &settings,
        chart: cozystack_policy::writes::TenantChart::of(&cozystack_policy::settings::resolved(
            &settings,
        )?),
        cluster,
    };
    let bar = indicatif::ProgressBar::new(args.steps as u64).with_style(
        indicatif::ProgressStyle::with_template("{msg} {bar:30} {pos}/{len} steps")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    if !std::io::stderr().is_terminal() {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let mut tally = simulate::Tally::default();
    // Each limit given holds; neither given, a minute.
    let seconds = match (args.runs, args.seconds) {
        (Some(_), None) => None,
        (_, seconds) => Some(seconds.unwrap_or(60.0)),
    };
    let budget = seconds.map(simulate::budget);
    let mut seed = args.seed;
    let mut runs = 0u64;
    loop {
        bar.set_message(format!("seed {seed}"));
        bar.set_position(0);
        let (actions, violation) = run.random(seed, args.steps, &mut tally, &mut || bar.inc(1))?;
        runs += 1;
        if let Some(violation) = violation {
            bar.finish_and_clear();
            let found = actions.len();
            let (actions, violation) = run.shrink(actions, violation)?;
            std::fs::create_dir_all(&args.out).map_err(|e| Error::write(&args.out, e))?;
            let path = args.out.join("counterexample.yaml");
            let text = simulate::scenario(&run, &actions, &violation, seed)?;
            std::fs::write(&path, text).map_err(|e| Error::write(&path, e))?;
            println!(
                "BROKEN {}\n  seed {seed}, step {found}, shrunk to {} steps: {}\n  {}\n  counterexample: {} (an e2e scenario: add it to e2e/scenarios/ once fixed)",
                violation.invariant,
                actions.len(),
                actions
                    .iter()
                    .map(simulate::world::Action::describe)
                    .collect::<Vec<_>>()
                    .join("; then "),
                violation.what,
                path.display()
            );
            return Ok(ExitCode::FAILURE);
        }
        seed += 1;
        let done = args.runs.is_some_and(|n| runs >= n)
            || budget.is_some_and(|budget| started.elapsed() >= budget);
        if done {
            break;
        }
    }
    bar.finish_and_clear();
    let list = |map: &std::collections::BTreeMap<String, usize>| {
        map.iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!(
        "{} runs (seeds {}..={}), {} steps, {:.0} steps/s: no guarantee broken",
        runs,
        args.seed,
        seed - 1,
        tally.steps,
        simulate::rate(tally.steps, started)
    );
    println!("actions: {}", list(&tally.actions));
    println!(
        "writes judged: {}; refused by the API server before admission: {}",
        tally
            .verdicts
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect::<Vec<_>>()
            .join(", "),
        tally.rejected
    );
    println!("rules in messages: {}", list(&tally.rules));
    println!("largest state: {} objects", tally.largest);
    Ok(ExitCode::SUCCESS)
}

/// Which release the verb judges for, against the one the cluster says it runs (a warning
/// when they differ).
fn report_release(settings: &Value, cluster: &ClusterObjects) -> Result<(), Error> {
    let release = preflight::ReleaseCheck::of(settings, cluster)?;
    let warning = if release.mismatch { "warning: " } else { "" };
    eprintln!("{warning}{}", release.line);
    Ok(())
}

fn run_preflight(args: PreflightArgs) -> Result<ExitCode, Error> {
    let started = Instant::now();
    let (settings, policy, cluster) = prepare(&args.evaluation)?;
    // A bar on a terminal; piped or redirected, nothing but the closing line below.
    let bar = std::io::stderr().is_terminal().then(|| {
        indicatif::ProgressBar::new(0).with_style(
            indicatif::ProgressStyle::with_template("replaying {bar:40} {pos}/{len} ({eta})")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        )
    });
    let progress = |done: usize, total: usize| {
        if let Some(bar) = &bar {
            bar.set_length(total as u64);
            bar.set_position(done as u64);
        }
    };
    let footprint = cozystack_policy::footprint::Footprint::of(&cluster);
    let report = preflight::run(&policy, Arc::new(cluster), &settings, &progress)?;
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    eprintln!("{}", footprint.line());
    eprintln!(
        "replayed {} objects, done in {:.1} s{}",
        report.judged.len(),
        started.elapsed().as_secs_f64(),
        output::peak_memory()
    );
    match args.output {
        ReportOutput::Policyreport => emit(&preflight::to_yaml_stream(
            &report.policy_reports("cozystack-capabilities"),
        )?)?,
        ReportOutput::Text => emit(&report.text(args.list_clean))?,
    }
    Ok(if report.findings() == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn annotate(args: AnnotateArgs) -> Result<(), Error> {
    let wasm = read(&args.input)?;
    let protocol = match args.protocol_version {
        Some(version) => version,
        // An unannotated module answers protocol_version without any metadata.
        None => Policy::load(&wasm, Default::default())?.protocol_version()?,
    };
    let meta = metadata::annotated(
        metadata::from_yaml(&read_text(&args.metadata)?)?,
        &protocol,
        &read_text(&args.usage)?,
    );
    let out = section::write_metadata(&wasm, &meta)?;
    std::fs::write(&args.output, out).map_err(|e| Error::write(&args.output, e))
}

fn inspect(args: InspectArgs) -> Result<(), Error> {
    let source = Source::parse(args.policy.as_deref(), args.insecure);
    let trust = args.verify.trust()?;
    if args.rules {
        let (policy, origin) = source.load(trust.as_ref())?;
        let answer =
            policy.validate_settings(&serde_json::json!({"definitionSource": "builtin"}))?;
        let rules = answer["message"]
            .as_str()
            .filter(|_| answer["valid"] == true);
        let rules = rules.ok_or_else(|| {
            format!("{origin}: the module does not report a built-in rule set (validate_settings answered {answer})")
        })?;
        return emit(&format!("{rules}\n"));
    }
    let (wasm, origin) = source.read(trust.as_ref())?;
    let meta = section::read_metadata(&wasm)?;
    let meta =
        meta.ok_or_else(|| format!("{origin}: the module has no io.kubewarden.metadata section"))?;
    emit(&json(&meta)?)
}

fn package(args: ArtifacthubArgs) -> Result<(), Error> {
    let meta = metadata::from_yaml(&read_text(&args.metadata)?)?;
    let questions = args.questions.as_deref().map(read_text).transpose()?;
    // Keep the previous createdAt unless one is given: regenerating must be reproducible.
    let created = args
        .created_at
        .or_else(|| {
            std::fs::read_to_string(&args.output)
                .ok()
                .and_then(|t| artifacthub::created_at(&t))
        })
        .ok_or("--created-at is required for a new package")?;
    let doc = artifacthub::package(&meta, &created, questions.as_deref())?;
    std::fs::write(&args.output, doc).map_err(|e| Error::write(&args.output, e))
}
