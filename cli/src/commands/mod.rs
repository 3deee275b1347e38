//! What the verbs share: which module, which cluster, which settings, and reading them; the
//! signature an artifact must carry and where a private key's password comes from.

pub mod annotate;
pub mod artifacthub;
pub mod check;
pub mod inspect;
pub mod keygen;
pub mod preflight;
pub mod pull;
pub mod push;
pub mod run;
pub mod sbom;
pub mod sign;
pub mod simulate;
pub mod verification_config;
pub mod verify;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Args;
use cozystack_packaging::signing::{self, Trust};
use cozystack_policy::error::Error;
use cozystack_policy::live::{self, Target};
use cozystack_policy::settings::{self, Given};
use cozystack_policy::source::Source;
use cozystack_policy::trust::{self, parse_annotation};
use cozystack_policy_runtime::cluster::{ClusterObjects, Keep};
use cozystack_policy_runtime::policy::Policy;

/// Which policy module to run.
#[derive(Args)]
pub struct PolicyArgs {
    /// The module: a file, or registry://REF (by digest: registry://host/repo@sha256:…).
    /// Default: the release embedded in this binary.
    #[arg(long, value_name = "FILE|registry://REF")]
    pub policy: Option<String>,
    /// Pull over plain HTTP (a registry on loopback or a lab network).
    #[arg(long)]
    pub insecure: bool,
    #[command(flatten)]
    pub verify: VerifyKeyArgs,
}

/// Which cluster the policy's host calls read.
#[derive(Args, Clone)]
pub struct ClusterArgs {
    /// A `kubectl get -o yaml` dump (a List or several documents), a file or a folder of such
    /// files; repeatable. Without it the cluster is read live through the kubeconfig.
    #[arg(long, value_name = "PATH")]
    pub dump: Vec<PathBuf>,
    /// The kubeconfig to read (default: $KUBECONFIG, else ~/.kube/config).
    #[arg(long, value_name = "FILE", conflicts_with = "dump")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context (default: the current context).
    #[arg(long, value_name = "NAME", conflicts_with = "dump")]
    pub context: Option<String>,
    /// Live: how long one request to the API server may take to connect, and then to answer
    /// (as `kubectl --request-timeout`).
    #[arg(long, value_name = "SECONDS", default_value_t = live::REQUEST_TIMEOUT, value_parser = clap::value_parser!(u64).range(1..))]
    pub request_timeout: u64,
    /// Live: how long all the verb's reads of the cluster may take together, from its start;
    /// past it the verb stops with exit 2, naming the server and the request.
    #[arg(long, value_name = "SECONDS", default_value_t = live::DEADLINE, value_parser = clap::value_parser!(u64).range(1..))]
    pub deadline: u64,
}

/// What an evaluation needs: the settings, the cluster and the module.
#[derive(Args)]
pub struct EvaluationArgs {
    /// The policy's settings, or a ClusterAdmissionPolicy (`kubectl get clusteradmissionpolicy
    /// NAME -o yaml`: its spec.settings). Default: none (`{}`), the stock deployment that
    /// `deploy/` runs: the built-in rule set, for any supported release.
    #[arg(long, value_name = "FILE")]
    pub settings: Option<PathBuf>,
    /// Read the settings of this deployed ClusterAdmissionPolicy from the cluster instead
    /// (needs `get` on clusteradmissionpolicies.policies.kubewarden.io).
    #[arg(long, value_name = "NAME", conflicts_with_all = ["settings", "dump"])]
    pub from_policy: Option<String>,
    #[command(flatten)]
    pub cluster: ClusterArgs,
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// Go on with input that holds nothing to judge (a dump with no object or no tenant
    /// Namespace, an empty change set, settings that state no rule), which is otherwise exit 2.
    #[arg(long)]
    pub allow_empty: bool,
}

/// The settings, the module and the objects its host calls read: the dump, or the kinds the
/// policy may read (its `contextAwareResources`) listed live. Says on stderr what it read.
pub fn prepare(args: &EvaluationArgs) -> Result<(Given, Policy, ClusterObjects), Error> {
    prepare_keeping(args, None)
}

/// The same, keeping the managed fields of the objects `keep` names. The settings are judged
/// by the module first, as the policy-server does before it serves, and before any cluster is
/// read; then what the cluster holds must give the rules something to judge.
pub fn prepare_keeping(
    args: &EvaluationArgs,
    keep: Keep<'_>,
) -> Result<(Given, Policy, ClusterObjects), Error> {
    prepare_from(args, keep, Source::load)
}

/// The same for a module that may come without metadata (`simulate --policy plain.wasm`).
pub fn prepare_plain_too(args: &EvaluationArgs) -> Result<(Given, Policy, ClusterObjects), Error> {
    prepare_from(args, None, Source::load_plain_too)
}

/// How a verb's module is loaded from its source, with the signature it must carry.
pub type Load = fn(&Source, Option<&Trust>) -> Result<(Policy, String), Error>;

fn prepare_from(
    args: &EvaluationArgs,
    keep: Keep<'_>,
    load: Load,
) -> Result<(Given, Policy, ClusterObjects), Error> {
    let settings = match &args.from_policy {
        Some(name) => Given::deployed(name, live::policy_settings(&target(&args.cluster), name)?),
        None => settings::read(args.settings.as_deref())?,
    };
    // Settings the module will refuse name nothing yet; the module says why below.
    if let Ok(judged_by) = settings.judged_by() {
        let _ = JUDGED_BY.set(judged_by);
    }
    let policy = load_policy(&args.policy, load)?;
    let cluster = judged_cluster(&args.cluster, args.allow_empty, &settings, &policy, keep)?;
    Ok((settings, policy, cluster))
}

/// Which settings, rules and release judge this run, once the settings were read: what a
/// report written after a later failure still names.
static JUDGED_BY: std::sync::OnceLock<String> = std::sync::OnceLock::new();

pub fn judged_by() -> Option<&'static str> {
    JUDGED_BY.get().map(String::as_str)
}

/// The module, loaded as `load` loads it; says on stderr which.
pub fn load_policy(args: &PolicyArgs, load: Load) -> Result<Policy, Error> {
    let source = Source::parse(args.policy.as_deref(), args.insecure);
    let (policy, origin) = load(&source, args.verify.trust()?.as_ref())?;
    eprintln!("policy: {origin}");
    Ok(policy)
}

/// The cluster `settings` judge: the settings validated by the module first, as the
/// policy-server does, then the cluster read, then the rules it gives them to judge.
pub fn judged_cluster(
    args: &ClusterArgs,
    allow_empty: bool,
    settings: &Given,
    policy: &Policy,
    keep: Keep<'_>,
) -> Result<ClusterObjects, Error> {
    settings::check(policy, settings.value())?;
    let cluster = cluster(args, policy, keep, allow_empty)?;
    settings::check_rules_stated(settings, &cluster, allow_empty)?;
    Ok(cluster)
}

/// The live cluster `args` name, with its request timeout and the verb's deadline (counted from
/// the process's start, so every read of one verb shares it).
pub fn target(args: &ClusterArgs) -> Target {
    let seconds = std::time::Duration::from_secs;
    Target::new(
        args.kubeconfig.clone(),
        args.context.clone(),
        seconds(args.request_timeout),
        seconds(args.deadline),
        started(),
    )
}

/// When the verb started (`main` asks first).
pub fn started() -> Instant {
    static STARTED: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *STARTED.get_or_init(Instant::now)
}

/// The cluster: the dump (a bar over its bytes on a terminal) or the live cluster. Without
/// `allow_empty`, one that holds no object, or no tenant Namespace, is refused: a failed `kubectl
/// get … > dump.yaml` would otherwise read as a clean cluster.
fn cluster(
    args: &ClusterArgs,
    policy: &Policy,
    keep: Keep<'_>,
    allow_empty: bool,
) -> Result<ClusterObjects, Error> {
    let started = Instant::now();
    let (cluster, read_from) = if !args.dump.is_empty() {
        let bar = bytes_bar(&args.dump);
        let seen = |n: u64| bar.inc(n);
        let cluster = ClusterObjects::read_dump_seen(&args.dump, keep, &seen)?;
        bar.finish_and_clear();
        eprintln!(
            "read {} objects from the dump in {:.1} s",
            cluster.len(),
            started.elapsed().as_secs_f64()
        );
        let shown: Vec<String> = args.dump.iter().map(|p| p.display().to_string()).collect();
        (cluster, format!("the dump {}", shown.join(", ")))
    } else {
        let mut snapshot = live::read(
            &target(args),
            &policy.metadata.context_aware_resources,
            keep,
        )?;
        // The release the cluster runs, for the report to hold against the settings'.
        let (namespace, name) = cozystack_policy::ops::preflight::VERSION_CONFIGMAP;
        if let Some(map) = live::config_map(&target(args), namespace, name)? {
            snapshot.cluster.push(map);
        }
        eprintln!(
            "read from context {}: {} in {:.1} s",
            snapshot.context,
            snapshot.listed.join(", "),
            started.elapsed().as_secs_f64()
        );
        let context = format!("the cluster of context {}", snapshot.context);
        (snapshot.cluster, context)
    };
    if !allow_empty {
        check_not_empty(&cluster, &read_from)?;
        if !args.dump.is_empty() {
            check_every_kind(&cluster, &read_from, policy)?;
        }
    }
    Ok(cluster)
}

/// A dump missing a kind the policy reads is a `kubectl get` that failed on it (a live list
/// says so itself): a Cozystack cluster always holds Namespaces, ApplicationDefinitions and
/// HelmReleases (every Tenant is one), and judging without them would find nothing wrong.
fn check_every_kind(
    cluster: &ClusterObjects,
    read_from: &str,
    policy: &Policy,
) -> Result<(), Error> {
    let missing: Vec<String> = policy
        .metadata
        .context_aware_resources
        .iter()
        .filter(|resource| {
            !cluster.keys().any(|(api_version, kind, ..)| {
                *api_version == resource.api_version && *kind == resource.kind
            })
        })
        .map(|resource| format!("{} {}", resource.api_version, resource.kind))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(format!(
        "{read_from} holds no {}: a Cozystack cluster always has them, so the `kubectl get` that made it failed on them; add them (`kubectl get namespaces,applicationdefinitions.cozystack.io,helmreleases.helm.toolkit.fluxcd.io -A -o yaml`), or pass --allow-empty",
        missing.join(", no ")
    )
    .into())
}

/// A cluster with no object, or no tenant Namespace, is no Cozystack cluster to judge.
fn check_not_empty(cluster: &ClusterObjects, read_from: &str) -> Result<(), Error> {
    if cluster.is_empty() {
        return Err(format!(
            "{read_from} holds no object: an empty file is what a failed `kubectl get … > dump.yaml` leaves; make it again as docs/rollout.md says, or pass --allow-empty"
        )
        .into());
    }
    let tenant = cluster.keys().any(|(api_version, kind, _, name)| {
        api_version == "v1"
            && kind == "Namespace"
            && cozystack_resolver::tenant::is_tenant_name(name)
    });
    if !tenant {
        return Err(format!(
            "{read_from} holds {} objects but no tenant Namespace (tenant-root and those below it): the namespaces are missing from it, or it is not a Cozystack cluster's; add them (`kubectl get namespaces -o yaml`), or pass --allow-empty",
            cluster.len()
        )
        .into());
    }
    Ok(())
}

/// A bar over the bytes of the dump's files, drawn on a terminal only.
fn bytes_bar(paths: &[PathBuf]) -> indicatif::ProgressBar {
    if !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let total: u64 = paths.iter().map(|p| dump_bytes(p)).sum();
    indicatif::ProgressBar::new(total).with_style(
        indicatif::ProgressStyle::with_template(
            "reading the dump {bar:40} {bytes}/{total_bytes} ({eta})",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    )
}

/// The bytes of a dump file, or of the files of a dump folder the reader takes.
fn dump_bytes(path: &Path) -> u64 {
    let size = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
    match path.is_dir() {
        true => cozystack_policy_runtime::dump_files(path)
            .map_or(0, |files| files.iter().map(|f| size(f)).sum()),
        false => size(path),
    }
}

/// Which release the verb judges for, against the one the cluster says it runs (a warning
/// when they differ).
pub fn report_release(settings: &Given, cluster: &ClusterObjects) -> Result<(), Error> {
    let release =
        cozystack_policy::ops::preflight::ReleaseCheck::of(settings.resolved()?, cluster)?;
    let warning = if release.mismatch || release.warning {
        "warning: "
    } else {
        ""
    };
    eprintln!("{warning}{}", release.line);
    Ok(())
}

/// The signature a registry artifact must carry before it is used.
#[derive(Args)]
pub struct VerifyKeyArgs {
    /// Use the artifact only when a cosign signature by this public key (PEM) covers its
    /// digest; it is then pulled by that digest.
    #[arg(long, value_name = "PUB")]
    pub verify_key: Option<PathBuf>,
    /// An annotation that signature must carry; repeatable.
    #[arg(long = "annotation", value_name = "KEY=VALUE", value_parser = parse_annotation, requires = "verify_key")]
    pub annotations: Vec<(String, String)>,
}

impl VerifyKeyArgs {
    pub fn trust(&self) -> Result<Option<Trust>, Error> {
        self.verify_key
            .as_deref()
            .map(|key| trust::read(key, &self.annotations))
            .transpose()
    }
}

/// Where the private key's password comes from: never the command line.
#[derive(Args)]
pub struct PasswordArgs {
    /// Read the private key's password from this environment variable (without it, it is
    /// asked on the terminal).
    #[arg(long, value_name = "VAR")]
    pub key_password_env: Option<String>,
}

/// Says on stderr which signatures a new one replaced: cosign would have kept them.
fn warn_replaced(signatures: &[signing::Signature]) {
    for signature in signatures {
        if let Some(count) = signature.replaced {
            eprintln!(
                "warning: {}: replaced {count} earlier signature(s) there; sign again with each key whose signature must stay",
                signature.signature_ref
            );
        }
    }
}
