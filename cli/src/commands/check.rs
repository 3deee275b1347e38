//! `check`: a change set judged as Flux applies it, built from a repository as Flux builds it.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::{Args, ValueEnum};
use cozystack_platform::apiserver::Identity;
use cozystack_platform::flux::sourceignore::GitRepository;
use cozystack_platform::flux::versions::Flux;
use cozystack_platform::flux::{self, kustomizations, manifests};
use cozystack_platform::helm_controller::FLUX;
use cozystack_policy::error::Error;
use cozystack_policy::error::Shared;
use cozystack_policy::live;
use cozystack_policy::ops::check::{self, Presented};
use cozystack_policy::ops::flux_sources::{
    FluxSources, GIT_REPOSITORY, KUSTOMIZATION, find_flux, flux_object, live_kustomization,
    substitution,
};
use cozystack_policy::output::{self, emit, json};
use cozystack_policy_runtime::cluster::ClusterObjects;
use serde_json::Value;

use super::*;

#[derive(Args)]
pub struct CheckArgs {
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
    #[arg(long = "as", value_name = "USER", value_parser = cozystack_platform::apiserver::parse_user)]
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

/// The closing line on stderr, the report in the format asked, and the exit code it comes to.
fn finish(
    args: &CheckArgs,
    report: &check::Report,
    identity: &Identity,
    judged_by: &str,
    started: Instant,
) -> Result<ExitCode, Error> {
    eprintln!(
        "judged {} manifests in {:.1} s{}",
        report.steps.len(),
        started.elapsed().as_secs_f64(),
        output::peak_memory()
    );
    match args.output {
        CheckOutput::Text => emit(&format!("{judged_by}\n{}", report.text()))?,
        CheckOutput::Json => {
            let mut report = report.json(identity);
            report["judgedBy"] = judged_by.into();
            emit(&json(&report)?)?
        }
        CheckOutput::Junit => emit(&report.junit(Some(judged_by)))?,
    }
    Ok(ExitCode::from(report.exit_code(args.warn_exit_code)))
}

/// Who applies the change set. Through a Kustomization, who kustomize-controller applies as:
/// its `spec.serviceAccountName` (a `--as` that says otherwise is set aside, and stderr says
/// so), else `--as`, else the controller's own account. Without one: `--as`, or, live, who the
/// current credentials are.
fn check_identity(args: &CheckArgs, spec: Option<&flux::build::Spec>) -> Result<Identity, Error> {
    let given = (args.as_user.as_ref()).map(|user| Identity::impersonated(user, &args.as_group));
    if let Some(spec) = spec {
        return Ok(match (spec.service_account(), given) {
            (Some(sa), Some(given)) if sa != given => {
                eprintln!(
                    "identity: the Kustomization {} applies as {} (spec.serviceAccountName), not as --as {}",
                    spec.name, sa.username, given.username
                );
                sa
            }
            (Some(sa), _) => sa,
            (None, Some(given)) => given,
            (None, None) => Identity::impersonated(FLUX, &[]),
        });
    }
    let evaluation = &args.evaluation;
    Ok(match given {
        Some(given) => given,
        None if !evaluation.cluster.dump.is_empty() => {
            return Err("--as USER is required with --dump: name who applies the change set (a stock install's Flux applies as system:serviceaccount:cozy-fluxcd:flux; a Kustomization with spec.serviceAccountName applies as that ServiceAccount)".into());
        }
        None => {
            let (user, groups, context) = live::whoami(&target(&evaluation.cluster))?;
            eprintln!("identity: {user} (SelfSubjectReview in context {context})");
            Identity {
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
    parsed: Vec<(Value, flux::build::Spec, String)>,
    repository: &GitRepository,
    sources: &FluxSources,
    started: Instant,
) -> Result<ExitCode, Error> {
    let [root] = args.paths.as_slice() else {
        return Err("with several --kustomization, name the repository's root folder once: each Kustomization builds its spec.path under it".into());
    };
    // spec.path is the artifact's: from the repository's root, whichever folder was named.
    let root = flux::sourceignore::Packed::of(root, repository)?
        .root()
        .to_owned();
    let mut units = Vec::new();
    for (object, spec, origin) in parsed {
        let variables = substitution(&object, &spec, sources)?;
        let path = root.join(object["spec"]["path"].as_str().unwrap_or("./"));
        let applies = flux::build::build(&path, &spec, &variables, repository)?;
        let identity = check_identity(args, Some(&spec))?;
        let live = live_kustomization(&object, &origin, sources)?;
        units.push(kustomizations::Unit {
            object,
            spec,
            origin,
            applies,
            identity,
            live,
        });
    }
    // Who the report names: `--as`, else the controller's account; each Kustomization applies
    // as its own.
    let identity = check_identity(args, Some(&flux::build::Spec::default()))?;
    let all: Vec<manifests::Manifest> = units.iter().flat_map(|u| u.applies.clone()).collect();
    let keep = check::applies_over(&all);
    let (settings, policy, cluster) = prepare_keeping(&args.evaluation, Some(&keep))?;
    for unit in &units {
        eprintln!(
            "judging the Kustomization {} as {}",
            unit.spec.name,
            unit.identity.describe()
        );
    }
    report_release(&settings, &cluster)?;
    report_flux(&settings)?;
    let mut observe = |_: usize, _: &Value, _: &ClusterObjects| Ok(());
    // The dependencies the change set does not hold, as the cluster holds them.
    let mut outside = std::collections::BTreeMap::new();
    for key in units.iter().flat_map(kustomizations::Unit::depends_on) {
        if units.iter().all(|u| u.spec.name != key) && !outside.contains_key(&key) {
            let (namespace, name) = key.split_once('/').unwrap_or_default();
            let found = find_flux(KUSTOMIZATION, namespace, name, sources)?;
            outside.insert(
                key,
                kustomizations::Outside::of(found.as_ref().map(|(o, _)| o)),
            );
        }
    }
    let report = check::run_kustomizations(
        &policy,
        &settings.settings,
        cluster,
        &units,
        &outside,
        &mut observe,
    )?;
    // Kustomizations that build nothing and prune nothing: no clean bill of health.
    if report.steps.is_empty() && report.failures.is_empty() && !args.evaluation.allow_empty {
        return Err(Error::from(format!(
            "{}: its Kustomizations build no manifest and prune nothing ({}): nothing to judge; pass --allow-empty if that is what you meant",
            root.display(),
            report.notes.join("; ")
        )));
    }
    finish(args, &report, &identity, &settings.judged_by()?, started)
}

/// Which Flux the model plays: the one the release the settings name ships.
fn report_flux(settings: &Given) -> Result<(), Error> {
    let judged = settings.resolved()?.judged();
    let flux = Flux::judged(judged).map_err(|e| e.to_string())?;
    eprintln!("flux: {}, as the release ships it", flux.describe());
    Ok(())
}

/// The change set: what Flux applies from the paths (a folder built as the Kustomization builds
/// its spec.path; files and standard input, `flux build kustomization` piped in, as they are)
/// and what `--delete` names. Empty, or holding a post-build variable Flux would substitute
/// first, it is no change set to judge.
fn read_change_set(
    args: &CheckArgs,
    kustomization: Option<&(Value, flux::build::Spec, String)>,
    repository: &GitRepository,
    sources: &FluxSources,
) -> Result<(Vec<manifests::Manifest>, Vec<manifests::Manifest>), Error> {
    let variables = match kustomization {
        Some((object, spec, _)) => substitution(object, spec, sources)?,
        None => Default::default(),
    };
    let files = |paths: &[PathBuf]| paths.iter().all(|p| p.is_file());
    let built = |paths: &[PathBuf]| match (kustomization, paths) {
        (Some((_, spec, _)), [folder]) if folder.is_dir() => {
            flux::build::build(folder, spec, &variables, repository)
        }
        // Files its spec transforms are built with it (standard input is `flux build`'s output).
        (Some((_, spec, _)), files_given) if spec.transforms().is_some() && files(files_given) => {
            flux::build::build_files(files_given, spec, &variables, repository)
        }
        // Flux builds every folder and file it applies with kustomize, which refuses what the
        // API server never sees: two files holding one object, a key given twice. Read as
        // named, so that each verdict names its file.
        _ if !args.in_order => {
            let read = manifests::read(paths, repository)?;
            flux::build::validate(paths, repository)?;
            Ok(read)
        }
        _ => manifests::read(paths, repository),
    };
    let (applies, deletes) = (
        built(&args.paths)?,
        manifests::read(&args.delete, repository)?,
    );
    // A Kustomization without spec.postBuild substitutes nothing: `${NAME}` lands as written; a
    // folder built with one is substituted already.
    let substitutes = match (kustomization, args.paths.as_slice()) {
        (None, _) => true,
        (Some(_), [folder]) if folder.is_dir() => false,
        (Some((_, spec, _)), given) if spec.transforms().is_some() && files(given) => false,
        (Some((_, spec, _)), _) => spec.post_build.is_some(),
    };
    if let Some(error) = check::unsubstituted(&applies).filter(|_| !args.in_order && substitutes) {
        return Err(Error::from(error));
    }
    // Nothing to judge is no clean bill of health: a wrong path or a build that wrote nothing.
    // Through a Kustomization an emptied path is a change: Flux prunes its whole inventory.
    if kustomization.is_none() {
        nothing_to_judge(args, &applies, &deletes, "")?;
    }
    Ok((applies, deletes))
}

/// Exit 2 when there is nothing to apply and nothing to delete (`why` says what was asked).
fn nothing_to_judge(
    args: &CheckArgs,
    applies: &[manifests::Manifest],
    deletes: &[manifests::Manifest],
    why: &str,
) -> Result<(), Error> {
    if !applies.is_empty() || !deletes.is_empty() || args.evaluation.allow_empty {
        return Ok(());
    }
    let shown: Vec<String> = args.paths.iter().map(|p| p.display().to_string()).collect();
    Err(Error::from(format!(
        "{}: the change set holds no manifest{why}: nothing to judge; name the folder or files Flux applies, or pass --allow-empty",
        shown.join(", ")
    )))
}

/// What `check` shows of each judged request: a count on a terminal, and with
/// `--save-requests`, the AdmissionReview and the cluster it was judged on, numbered.
fn observer(
    save: Option<PathBuf>,
    bar: &indicatif::ProgressBar,
) -> impl FnMut(usize, &Value, &ClusterObjects) -> Result<(), Shared> + '_ {
    move |n: usize, request: &Value, cluster: &ClusterObjects| -> Result<(), Shared> {
        bar.inc(1);
        let Some(dir) = &save else {
            return Ok(());
        };
        let review = serde_json::json!({"apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview", "request": request});
        let write = |name: String, text: String| {
            let path = dir.join(name);
            std::fs::write(&path, text).map_err(|e| Shared::write(&path, e))
        };
        let encode = |what: &'static str, e: &dyn std::fmt::Display| Shared::Encode {
            what,
            reason: e.to_string(),
        };
        let review = serde_json::to_string_pretty(&review).map_err(|e| encode("JSON", &e))?;
        write(format!("{n:04}.request.json"), review + "\n")?;
        let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": cluster.values().collect::<Vec<_>>()});
        let text = serde_yaml::to_string(&list).map_err(|e| encode("the cluster", &e))?;
        write(format!("{n:04}.cluster.yaml"), text)
    }
}

/// `check`; with `--output json|junit`, every exit after the arguments are parsed writes a valid
/// report, a failure as an error (naming the settings that judged, where they were read): the
/// CI recipe uploads the file whatever happened.
pub fn exec(args: CheckArgs) -> Result<ExitCode, Error> {
    let error = match judge(&args) {
        Ok(code) => return Ok(code),
        Err(error) => error,
    };
    let judged_by = judged_by().map(str::to_owned).or_else(|| {
        // The change set is read before the settings; a local settings file still names them.
        let given = (args.evaluation.from_policy.is_none())
            .then(|| cozystack_policy::settings::read(args.evaluation.settings.as_deref()).ok())?;
        given?.judged_by().ok()
    });
    match args.output {
        CheckOutput::Text => return Err(error),
        CheckOutput::Junit => {
            emit(&check::unreadable(&error.to_string()).junit(judged_by.as_deref()))?
        }
        CheckOutput::Json => emit(&json(
            &serde_json::json!({"error": error.to_string(), "judgedBy": judged_by}),
        )?)?,
    }
    eprintln!("error: {error}");
    Ok(ExitCode::from(2))
}

/// A Kustomization named on the command line: its object, its build's spec, where it was read.
type Named = (Value, flux::build::Spec, String);

/// The Kustomizations named (`--kustomization`) and the GitRepository their source is packed as.
fn flux_inputs(
    args: &CheckArgs,
    sources: &FluxSources,
) -> Result<(Vec<Named>, GitRepository), Error> {
    let mut kustomizations = Vec::new();
    for reference in &args.kustomization {
        let (object, origin) = flux_object(reference, KUSTOMIZATION, sources)?;
        let spec = flux::build::Spec::of(&object, &origin)?;
        kustomizations.push((object, spec, origin));
    }
    let repository = match &args.git_repository {
        Some(reference) => {
            let (object, origin) = flux_object(reference, GIT_REPOSITORY, sources)?;
            GitRepository::of(&object, &origin)?
        }
        None => GitRepository::default(),
    };
    Ok((kustomizations, repository))
}

/// What `kustomization` prunes as Flux computes it, from its live inventory: added to
/// `deletes` when it prunes (the report's note says what and as whom), else what the change set
/// drops stays and nothing is deleted. The owner its applies carry.
fn prunes(
    (object, spec, origin): &Named,
    sources: &FluxSources,
    applies: &[manifests::Manifest],
    deletes: &mut Vec<manifests::Manifest>,
    identity: &Identity,
    notes: &mut Vec<String>,
) -> Result<flux::Owner, Error> {
    let live = live_kustomization(object, origin, sources)?;
    let live = live.as_ref().map(|(o, from)| (o, from.as_str()));
    let pruned = check::pruned(object, live, applies, origin)?;
    if spec.prune {
        notes.push(kustomizations::prune_note(&pruned, identity));
    }
    let check::Pruned {
        owner,
        deletes: pruned,
        ..
    } = pruned;
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
    Ok(owner)
}

/// On a terminal, a count of the requests judged: a large change set takes seconds.
fn progress() -> indicatif::ProgressBar {
    match std::io::stderr().is_terminal() {
        true => indicatif::ProgressBar::new_spinner().with_style(
            indicatif::ProgressStyle::with_template("{spinner} judged {pos} requests ({elapsed})")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
        ),
        false => indicatif::ProgressBar::hidden(),
    }
}

/// What the arguments name, judged: the Kustomizations a repository holds or several named, in
/// `dependsOn` order; else one change set (built as its Kustomization builds it, when one is
/// named).
fn judge(args: &CheckArgs) -> Result<ExitCode, Error> {
    let started = Instant::now();
    // The input first: a change set that cannot be read or built is refused before any
    // cluster is read.
    let cluster = &args.evaluation.cluster;
    let sources = FluxSources::new(&cluster.dump, target(cluster));
    let (mut kustomizations, repository) = flux_inputs(args, &sources)?;
    if kustomizations.is_empty()
        && let Some(found) = found_in_repository(args, &repository)?
    {
        return check_kustomizations(args, found, &repository, &sources, started);
    }
    if kustomizations.len() > 1 {
        return check_kustomizations(args, kustomizations, &repository, &sources, started);
    }
    check_change_set(args, kustomizations.pop(), &repository, &sources, started)
}

/// The Kustomizations a repository given as the one path holds, to judge as Flux reconciles
/// them; `None` when the arguments name a change set of another shape or it holds none.
fn found_in_repository(
    args: &CheckArgs,
    repository: &GitRepository,
) -> Result<Option<Vec<Named>>, Error> {
    let ([root], false, true) = (args.paths.as_slice(), args.in_order, args.delete.is_empty())
    else {
        return Ok(None);
    };
    if !root.is_dir() {
        return Ok(None);
    }
    let mut kustomizations = Vec::new();
    for found in kustomizations::found(root, repository)? {
        let spec = flux::build::Spec::of(&found.object, &found.origin)?;
        kustomizations.push((found.object, spec, found.origin));
    }
    if kustomizations.is_empty() {
        return Ok(None);
    }
    eprintln!(
        "{}: holds {} Flux Kustomizations of this repository, judged as kustomize-controller reconciles them (--kustomization selects)",
        root.display(),
        kustomizations.len()
    );
    Ok(Some(kustomizations))
}

/// One change set applied as one identity: the paths and `--delete`, or what the one
/// Kustomization named builds and prunes.
fn check_change_set(
    args: &CheckArgs,
    kustomization: Option<Named>,
    repository: &GitRepository,
    sources: &FluxSources,
    started: Instant,
) -> Result<ExitCode, Error> {
    let (mut applies, mut deletes) =
        read_change_set(args, kustomization.as_ref(), repository, sources)?;
    if let Some(ns) = &args.namespace {
        for manifest in applies.iter_mut().chain(deletes.iter_mut()) {
            if manifest.namespace().is_none() && manifest.kind() != "Namespace" {
                manifest.object["metadata"]["namespace"] = ns.as_str().into();
            }
        }
    }
    let evaluation = &args.evaluation;
    let identity = check_identity(args, kustomization.as_ref().map(|(_, spec, _)| spec))?;
    // The managed fields of what the change set may apply over, for server-side apply's merge.
    let keep = check::applies_over(&applies);
    let (settings, policy, cluster) = prepare_keeping(evaluation, Some(&keep))?;
    let mut applier = if args.in_order {
        check::Applier::InOrder
    } else {
        check::Applier::Flux
    };
    let mut notes = Vec::new();
    if let Some(kustomization) = &kustomization {
        let owner = prunes(
            kustomization,
            sources,
            &applies,
            &mut deletes,
            &identity,
            &mut notes,
        )?;
        if !args.in_order {
            applier = check::Applier::Kustomization(owner);
        }
        let why = format!(" and prunes nothing ({})", notes.join("; "));
        nothing_to_judge(args, &applies, &deletes, &why)?;
    }
    eprintln!(
        "judging {} manifests and {} deletions as {}",
        applies.len(),
        deletes.len(),
        identity.describe()
    );
    report_release(&settings, &cluster)?;
    report_flux(&settings)?;
    let judged_by = settings.judged_by()?;
    let changes = check::ChangeSet { applies, deletes };
    let save = args.save_requests.clone();
    if let Some(dir) = &save {
        std::fs::create_dir_all(dir).map_err(|e| Error::write(dir, e))?;
    }
    let bar = progress();
    let mut observe = observer(save, &bar);
    let check::Applied { mut report, .. } = check::run(
        &policy,
        &settings.settings,
        cluster,
        &changes,
        &identity,
        applier,
        &mut observe,
    )?;
    bar.finish_and_clear();
    report.notes = notes;
    finish(args, &report, &identity, &judged_by, started)
}
