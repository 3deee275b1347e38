//! Where `check` reads the Flux objects it is named (a Kustomization, its GitRepository, the
//! objects its post-build substitutes from): a file, the dump (read once however many ask), or
//! the live cluster; below the verb, which only chooses them.

use std::path::{Path, PathBuf};

use cozystack_platform::flux;
use cozystack_policy_runtime::cluster::ClusterObjects;
use serde_json::Value;

use crate::error::Error;
use crate::live::{self, Target};
use crate::output::read_text;

/// The kinds a check looks up in a dump: the Flux objects it is named, and what a post-build
/// substitutes from. The rest of the dump (the cluster the change set is judged on) is read
/// apart, and is not parsed twice.
const FLUX_SOURCE_KINDS: &[&str] = &[
    KUSTOMIZATION.1,
    GIT_REPOSITORY.1,
    flux::postbuild::SOURCE_KINDS[0],
    flux::postbuild::SOURCE_KINDS[1],
];

/// Where the Flux objects a check names are read: the dump, read at most once however many
/// Kustomizations, GitRepositories and `substituteFrom` references ask, or the live cluster.
pub struct FluxSources<'a> {
    /// The dump's files and folders; none: the cluster is read live through `target`.
    paths: &'a [PathBuf],
    target: Target,
    dump: std::cell::OnceCell<ClusterObjects>,
}

impl<'a> FluxSources<'a> {
    pub fn new(paths: &'a [PathBuf], target: Target) -> FluxSources<'a> {
        FluxSources {
            paths,
            target,
            dump: std::cell::OnceCell::new(),
        }
    }

    /// The dump's objects, `None` when the cluster is read live.
    fn dump(&self) -> Result<Option<&ClusterObjects>, Error> {
        if self.paths.is_empty() {
            return Ok(None);
        }
        if let Some(dump) = self.dump.get() {
            return Ok(Some(dump));
        }
        let read = ClusterObjects::read_dump_of_kinds(self.paths, FLUX_SOURCE_KINDS)?;
        Ok(Some(self.dump.get_or_init(|| read)))
    }
}

/// The variables a Kustomization's `spec.postBuild` substitutes, its `substituteFrom` objects
/// read from the dump, or live (ConfigMaps only: the check reads no Secret of a live cluster).
pub fn substitution(
    kustomization: &Value,
    spec: &flux::build::Spec,
    sources: &FluxSources,
) -> Result<std::collections::BTreeMap<String, String>, Error> {
    let Some(post) = &spec.post_build else {
        return Ok(Default::default());
    };
    let namespace = kustomization["metadata"]["namespace"]
        .as_str()
        .unwrap_or_default();
    if !post.reads_cluster() {
        return Ok(post.variables(namespace, &ClusterObjects::default())?);
    }
    if let Some(dump) = sources.dump()? {
        return Ok(post.variables(namespace, dump)?);
    }
    // Live: the ConfigMaps, each a GET; no Secret is read.
    let mut objects = Vec::new();
    for (kind, name) in post.references() {
        if kind != "ConfigMap" {
            return Err(format!(
                "the Kustomization {} substitutes from {kind}/{name}: the check reads no Secret of a live cluster; pass --dump with it, or pipe `flux build kustomization` in",
                spec.name
            )
            .into());
        }
        objects.extend(live::config_map(&sources.target, namespace, name)?);
    }
    let source: ClusterObjects = objects.into_iter().collect();
    Ok(post.variables(namespace, &source)?)
}

/// Flux's Kustomization and GitRepository: apiVersion, kind, plural.
pub const KUSTOMIZATION: (&str, &str, &str) = (
    "kustomize.toolkit.fluxcd.io/v1",
    "Kustomization",
    "kustomizations",
);

pub const GIT_REPOSITORY: (&str, &str, &str) = (
    "source.toolkit.fluxcd.io/v1",
    "GitRepository",
    "gitrepositories",
);

/// A Flux object named by `reference`: a file holding it, or `namespace/name` read from the dump,
/// or else from the live cluster; and how to name where it came from.
pub fn flux_object(
    reference: &Path,
    flux_kind: (&str, &str, &str),
    sources: &FluxSources,
) -> Result<(Value, String), Error> {
    let kind = flux_kind.1;
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
    find_flux(flux_kind, namespace, name, sources)?.ok_or_else(|| {
        let from = match sources.paths.is_empty() {
            true => "the cluster",
            false => "the dump",
        };
        format!("{kind} {namespace}/{name}: not in {from}").into()
    })
}

/// The Flux object `namespace/name` as the dump holds it or, without one, the live cluster;
/// `None` when there is none. Named with where it was read.
pub fn find_flux(
    (api_version, kind, plural): (&str, &str, &str),
    namespace: &str,
    name: &str,
    sources: &FluxSources,
) -> Result<Option<(Value, String)>, Error> {
    let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
    let dump = sources.dump()?;
    let found = match dump {
        Some(dump) => dump.of_kind(kind).find(|o| {
            o["apiVersion"]
                .as_str()
                .is_some_and(|v| v.starts_with(&format!("{group}/")))
                && o["metadata"]["namespace"] == namespace
                && o["metadata"]["name"] == name
        }),
        None => live::object(
            &sources.target,
            (api_version, kind, plural),
            namespace,
            name,
        )?,
    };
    let from = match dump {
        Some(_) => "the dump",
        None => "the cluster",
    };
    Ok(found.map(|object| (object, format!("{kind} {namespace}/{name} (from {from})"))))
}

/// The live Kustomization whose `status.inventory` Flux prunes from: the one given when it
/// carries a status (`kubectl get … -o yaml`, or read by name), else the one of its name the
/// dump or the cluster holds (a repository's file carries none); `None` when there is none.
pub fn live_kustomization(
    object: &Value,
    origin: &str,
    sources: &FluxSources,
) -> Result<Option<(Value, String)>, Error> {
    if object.get("status").is_some() {
        return Ok(Some((object.clone(), origin.to_owned())));
    }
    let namespace = object["metadata"]["namespace"].as_str().unwrap_or_default();
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    if namespace.is_empty() || name.is_empty() {
        return Ok(None);
    }
    find_flux(KUSTOMIZATION, namespace, name, sources)
}
