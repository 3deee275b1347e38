//! Several Flux Kustomizations of one repository, judged as kustomize-controller v1.8.0 runs
//! them (`kustomization_controller.go` `checkDependencies`): in `spec.dependsOn` order, each
//! once every dependency is Ready, on the cluster the ones before it left. A dependency whose
//! apply fails is never Ready, so what depends on it is not applied. A dependency without
//! `spec.wait` or `spec.healthChecks` is Ready as soon as it has applied, before
//! helm-controller has reconciled the Tenants it applied: the namespaces their charts make do
//! not exist yet for what depends on it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use cozystack_policy_runtime::cluster::{ClusterObjects, index_key};
use serde_json::Value;

use crate::error::Error;
use crate::platform::apiserver::Identity;
use crate::platform::flux::apply::{self, Applied, Applier, ChangeSet, Pruned, Report};
use crate::platform::flux::build::Spec;
use crate::platform::flux::manifests::{self, Manifest};
use crate::platform::flux::sourceignore::{GitRepository, Packed};
use crate::platform::sequence::{Admit, Platform, Sender};
use crate::platform::writes;
use crate::state::State;

/// One Kustomization: the object, its spec, where it was read, what it builds, and who
/// applies it ([`Spec::service_account`], else the controller's account or the caller's).
pub struct Unit {
    pub object: Value,
    pub spec: Spec,
    pub origin: String,
    pub applies: Vec<Manifest>,
    pub identity: Identity,
}

impl Unit {
    /// `namespace/name`, as `dependsOn` names it.
    fn key(&self) -> String {
        self.spec.name.clone()
    }

    /// Its dependencies, `namespace/name` (a dependency without a namespace is in its own:
    /// `checkDependencies`).
    pub fn depends_on(&self) -> Vec<String> {
        let own = self.object["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default();
        self.object["spec"]["dependsOn"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|d| {
                let name = d["name"].as_str().unwrap_or_default();
                let namespace = d["namespace"].as_str().unwrap_or(own);
                format!("{namespace}/{name}")
            })
            .collect()
    }

    /// Whether it is Ready only once what it applied is healthy (`spec.wait`, `healthChecks`).
    fn waits(&self) -> bool {
        let spec = &self.object["spec"];
        spec["wait"] == true
            || spec["healthChecks"]
                .as_array()
                .is_some_and(|h| !h.is_empty())
    }
}

/// The Flux Kustomizations the repository holding `path` keeps at or under it whose source is
/// that repository, each with where it was read: those whose `sourceRef` names `repository`
/// when it was given, else those naming the one GitRepository they all name (several:
/// `--git-repository` must say which is this one). Only files that mention Flux's
/// Kustomization API are read: a chart's templates beside them are no YAML.
pub fn found(path: &Path, repository: &GitRepository) -> Result<Vec<Manifest>, Error> {
    let packed = Packed::of(path, repository)?;
    let under = std::fs::canonicalize(path).map_err(|e| Error::read(path, e))?;
    let mut found = Vec::new();
    for file in packed.files()? {
        let file = packed.root().join(file);
        let yaml = file.extension().is_some_and(|x| x == "yaml" || x == "yml");
        if !yaml || !file.starts_with(&under) {
            continue;
        }
        let text = std::fs::read_to_string(&file).map_err(|e| Error::read(&file, e))?;
        if !text.contains(API) {
            continue;
        }
        for manifest in manifests::parse(&file.display().to_string(), &text)? {
            let flux =
                manifest.kind() == "Kustomization" && manifest.api_version().starts_with(API);
            if flux && manifest.object["spec"]["sourceRef"]["kind"] == "GitRepository" {
                found.push(manifest);
            }
        }
    }
    let source = |ks: &Value| {
        let from = &ks["spec"]["sourceRef"];
        let namespace = (from["namespace"].as_str()).or(ks["metadata"]["namespace"].as_str());
        format!(
            "{}/{}",
            namespace.unwrap_or_default(),
            from["name"].as_str().unwrap_or_default()
        )
    };
    let named: BTreeSet<String> = found.iter().map(|ks| source(&ks.object)).collect();
    let this = match (&repository.name, named.len()) {
        (Some(name), _) => name.clone(),
        (None, 0 | 1) => return Ok(found),
        (None, _) => {
            return Err(format!(
                "{}: its Kustomizations name several GitRepositories ({}): name this repository's with --git-repository",
                path.display(),
                named.into_iter().collect::<Vec<_>>().join(", ")
            )
            .into());
        }
    };
    Ok(found
        .into_iter()
        .filter(|ks| source(&ks.object) == this)
        .collect())
}

/// Flux's Kustomization API group, as `apiVersion` begins.
const API: &str = "kustomize.toolkit.fluxcd.io/";

/// A Kustomization a unit depends on that is not among the units, as the cluster holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outside {
    /// Its Ready condition is True: what depends on it applies.
    Ready,
    /// It exists, not Ready: kustomize-controller retries what depends on it, and applies nothing.
    NotReady,
    /// No such Kustomization: `dependency … not found`, and nothing is applied.
    Missing,
}

impl Outside {
    /// As the cluster holds `kustomization` (`None`: not there).
    pub fn of(kustomization: Option<&Value>) -> Outside {
        let Some(object) = kustomization else {
            return Outside::Missing;
        };
        let ready = object["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Ready" && c["status"] == "True");
        if ready {
            Outside::Ready
        } else {
            Outside::NotReady
        }
    }
}

/// The order kustomize-controller reaches them: each after its dependencies among them; the
/// given order breaks ties. A cycle is an error naming it.
pub fn order(units: &[Unit]) -> Result<Vec<usize>, Error> {
    let index: BTreeMap<String, usize> = units
        .iter()
        .enumerate()
        .map(|(i, u)| (u.key(), i))
        .collect();
    let mut done: Vec<usize> = Vec::new();
    let mut placed = BTreeSet::new();
    while done.len() < units.len() {
        let next = (0..units.len()).find(|i| {
            !placed.contains(i)
                && units[*i]
                    .depends_on()
                    .iter()
                    .filter_map(|d| index.get(d))
                    .all(|d| placed.contains(d))
        });
        let Some(next) = next else {
            let stuck: Vec<String> = (0..units.len())
                .filter(|i| !placed.contains(i))
                .map(|i| units[i].key())
                .collect();
            return Err(format!(
                "the Kustomizations {} depend on each other in a cycle: kustomize-controller applies none of them",
                stuck.join(", ")
            )
            .into());
        };
        placed.insert(next);
        done.push(next);
    }
    Ok(done)
}

/// Judges every unit's build in dependency order, each as its identity; one report of them all,
/// each Kustomization's steps after the ones before it. A dependency outside the units counts
/// as the cluster holds it (`outside`).
pub fn run(
    platform: &mut Platform,
    mut cluster: ClusterObjects,
    units: &[Unit],
    outside: &BTreeMap<String, Outside>,
    admit: &mut dyn Admit,
) -> Result<Report, Error> {
    let mut report = Report::default();
    // Per Kustomization: why it never becomes Ready, and the namespaces its Tenants' charts made.
    let mut unready: BTreeMap<String, &str> = BTreeMap::new();
    let mut rendered: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for i in order(units)? {
        let unit = &units[i];
        let applies = unit.applies.clone();
        let dependencies = unit.depends_on();
        let among = |d: &String| units.iter().any(|u| u.key() == *d);
        let blocked = dependencies.iter().find_map(|d| match outside.get(d) {
            _ if unready.contains_key(d) => Some(format!("{d}, {}", unready[d])),
            _ if among(d) => None,
            Some(Outside::Ready) => None,
            Some(Outside::NotReady) => Some(format!("{d}, which is not Ready")),
            Some(Outside::Missing) | None => Some(format!(
                "{d}, which does not exist (a dependsOn without a namespace names one in the Kustomization's own)"
            )),
        });
        if let Some(blocker) = blocked {
            unready.insert(unit.key(), "which is blocked itself");
            let why = format!("not applied: it depends on the Kustomization {blocker}");
            report.steps.extend(apply::blocked_steps(&applies, &why));
            continue;
        }
        // kustomize-controller skips a suspended Kustomization, and it never becomes Ready.
        if unit.object["spec"]["suspend"] == true {
            unready.insert(unit.key(), "which is suspended");
            let why = format!(
                "not applied: the Kustomization {} is suspended (spec.suspend), so kustomize-controller applies nothing of it",
                unit.key()
            );
            report.steps.extend(apply::blocked_steps(&applies, &why));
            continue;
        }
        // A dependency that does not wait is Ready before helm-controller has made what its
        // Tenants render.
        let mut start = State::new(cluster.clone());
        let hidden: BTreeSet<&String> = dependencies
            .iter()
            .filter(|d| !units.iter().any(|u| u.key() == **d && u.waits()))
            .filter_map(|d| rendered.get(d))
            .flatten()
            .collect();
        for namespace in &hidden {
            writes::remove_namespace(&mut start, namespace);
        }
        // What helm-controller makes meanwhile, to put back once this one is judged.
        let kept: BTreeSet<_> = start.cluster().keys().cloned().collect();
        let pending: Vec<Value> = cluster
            .values()
            .filter(|o| !kept.contains(&index_key(o)))
            .collect();
        let before = namespaces(start.cluster());
        let Pruned { owner, deletes } = apply::pruned(&unit.object, &applies, &unit.origin)?;
        let applied: BTreeSet<String> = applies
            .iter()
            .filter(|m| m.kind() == "Namespace")
            .map(|m| m.name().to_owned())
            .collect();
        let changes = ChangeSet {
            applies,
            deletes: if unit.spec.prune { deletes } else { Vec::new() },
        };
        let client = Sender::Client {
            identity: unit.identity.clone(),
            manager: crate::platform::flux::MANAGER,
        };
        let Applied {
            report: judged,
            state,
        } = apply::run(
            platform,
            start.cluster().clone(),
            &changes,
            client,
            Applier::Kustomization(owner),
            admit,
        )?;
        if judged.failed() {
            unready.insert(unit.key(), "whose apply failed, so it is never Ready");
        }
        let made: BTreeSet<String> = namespaces(state.cluster())
            .difference(&before)
            .filter(|ns| !applied.contains(*ns))
            .cloned()
            .collect();
        rendered.insert(unit.key(), made);
        report.steps.extend(judged.steps);
        let mut state = state;
        for object in pending {
            state.put(object);
        }
        cluster = state.cluster().clone();
    }
    Ok(report)
}

/// The cluster's Namespaces.
fn namespaces(cluster: &ClusterObjects) -> BTreeSet<String> {
    cluster
        .keys()
        .filter(|(api, kind, ..)| api == "v1" && kind == "Namespace")
        .map(|(.., name)| name.clone())
        .collect()
}
