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

use crate::apiserver::Identity;
use crate::error::Error;
use crate::flux::apply::{self, Applied, Applier, ChangeSet, NeverApplies, Pruned, Report};
use crate::flux::build::Spec;
use crate::flux::manifests::{self, Manifest};
use crate::flux::sourceignore::{GitRepository, Packed};
use crate::sequence::{Admit, Platform, Sender};
use crate::state::State;
use crate::writes;

/// One Kustomization: the object, its spec, where it was read, what it builds, who applies it
/// ([`Spec::service_account`], else the controller's account or the caller's), and the live
/// object whose `status.inventory` Flux prunes from, with where it was read (`None`: the cluster
/// does not hold it yet).
pub struct Unit {
    pub object: Value,
    pub spec: Spec,
    pub origin: String,
    pub applies: Vec<Manifest>,
    pub identity: Identity,
    pub live: Option<(Value, String)>,
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
/// given order breaks ties. Those it never reaches (in a cycle, or depending on one) come last,
/// each with the dependency among them it waits for, and the members of the cycles.
pub struct Order {
    pub reached: Vec<usize>,
    /// (unit, the dependency it waits for), in the given order.
    pub stuck: Vec<(usize, String)>,
    /// `namespace/name` of every unit in a cycle.
    pub cycle: Vec<String>,
}

pub fn order(units: &[Unit]) -> Order {
    let index: BTreeMap<String, usize> = units
        .iter()
        .enumerate()
        .map(|(i, u)| (u.key(), i))
        .collect();
    let among = |i: usize| -> Vec<usize> {
        units[i]
            .depends_on()
            .iter()
            .filter_map(|d| index.get(d).copied())
            .collect()
    };
    let mut reached: Vec<usize> = Vec::new();
    let mut placed = BTreeSet::new();
    while let Some(next) = (0..units.len())
        .find(|i| !placed.contains(i) && among(*i).iter().all(|d| placed.contains(d)))
    {
        placed.insert(next);
        reached.push(next);
    }
    // Every unit left waits, directly or not, on a cycle: kustomize-controller checks no cycle,
    // each member waits for the next to be Ready at this revision, and none ever is.
    let left: Vec<usize> = (0..units.len()).filter(|i| !placed.contains(i)).collect();
    let reaches = |from: usize, to: usize| {
        let (mut seen, mut todo) = (BTreeSet::new(), among(from));
        while let Some(i) = todo.pop() {
            if i == to {
                return true;
            }
            if seen.insert(i) {
                todo.extend(among(i));
            }
        }
        false
    };
    let cycle: Vec<String> = left
        .iter()
        .filter(|i| reaches(**i, **i))
        .map(|i| units[*i].key())
        .collect();
    let stuck = left
        .iter()
        .map(|i| {
            let waits = among(*i)
                .into_iter()
                .find(|d| !placed.contains(d))
                .map(|d| units[d].key())
                .unwrap_or_default();
            (*i, waits)
        })
        .collect();
    Order {
        reached,
        stuck,
        cycle,
    }
}

/// Why a unit never applies: the dependency, what it says of it, and kustomize-controller's
/// own message (`checkDependencies`), which it repeats every retry.
fn never_applies(report: &mut Report, applies: &[Manifest], unit: &str, blocker: &str, flux: &str) {
    let why = format!("not applied: it depends on the Kustomization {blocker}");
    report.steps.extend(apply::blocked_steps(applies, &why));
    report.failures.push(NeverApplies {
        kustomization: unit.to_owned(),
        reason: format!(
            "{flux} (kustomize-controller retries it, and the change never lands); it depends on the Kustomization {blocker}"
        ),
    });
}

/// Judges every unit's build in dependency order, each as its identity; one report of them all,
/// each Kustomization's steps after the ones before it. A dependency outside the units counts
/// as the cluster holds it (`outside`). A unit that waits forever (a dependency missing, not
/// Ready, blocked, or in a cycle) is a failure of the run, named in Flux's words; the others
/// are judged all the same.
pub fn run(
    platform: &mut Platform,
    mut cluster: ClusterObjects,
    units: &[Unit],
    outside: &BTreeMap<String, Outside>,
    admit: &mut dyn Admit,
) -> Result<Report, Error> {
    let mut report = Report::default();
    // Per Kustomization: why it never becomes Ready, and the namespaces its Tenants' charts made.
    // (what it is, what kustomize-controller says of it as a dependency)
    let mut unready: BTreeMap<String, (&str, &str)> = BTreeMap::new();
    let mut rendered: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let Order {
        reached,
        stuck,
        cycle,
    } = order(units);
    // What each unit's live inventory has Flux delete, read before anything is judged; the
    // report says it first, for the units that apply (one that never applies prunes nothing).
    let mut prunes = units
        .iter()
        .map(|unit| {
            let live = unit.live.as_ref().map(|(o, from)| (o, from.as_str()));
            apply::pruned(&unit.object, live, &unit.applies, &unit.origin).map(Some)
        })
        .collect::<Result<Vec<_>, Error>>()?;
    for i in reached {
        let unit = &units[i];
        let applies = unit.applies.clone();
        let dependencies = unit.depends_on();
        if let Some((blocker, flux)) = blocked(&dependencies, units, &unready, outside) {
            unready.insert(unit.key(), ("which is blocked itself", "is not ready"));
            never_applies(&mut report, &applies, &unit.key(), &blocker, &flux);
            continue;
        }
        if suspended(unit, &mut unready, &mut report) {
            continue;
        }
        let (start, pending) = start(&cluster, &dependencies, units, &rendered);
        let before = namespaces(start.cluster());
        let Some(pruned) = prunes[i].take() else {
            continue;
        };
        if unit.spec.prune {
            report.notes.push(prune_note(&pruned, &unit.identity));
        }
        let Pruned { owner, deletes, .. } = pruned;
        let applied: BTreeSet<String> = (applies.iter())
            .filter(|m| m.kind() == "Namespace")
            .map(|m| m.name().to_owned())
            .collect();
        let deletes = if unit.spec.prune { deletes } else { Vec::new() };
        let changes = ChangeSet { applies, deletes };
        let client = Sender::Client {
            identity: unit.identity.clone(),
            manager: crate::flux::MANAGER,
        };
        let Applied {
            report: judged,
            mut state,
        } = apply::run(
            platform,
            start.cluster().clone(),
            &changes,
            client,
            Applier::Kustomization(owner),
            admit,
        )?;
        if judged.failed() {
            unready.insert(
                unit.key(),
                ("whose apply failed, so it is never Ready", "is not ready"),
            );
        }
        // The namespaces helm-controller made for its Tenants (not those it applied itself).
        let mut made = namespaces(state.cluster());
        made.retain(|ns| !before.contains(ns) && !applied.contains(ns));
        rendered.insert(unit.key(), made);
        report.steps.extend(judged.steps);
        pending.into_iter().for_each(|object| state.put(object));
        cluster = state.cluster().clone();
    }
    for (i, waits) in stuck {
        let blocker = format!(
            "{waits}, and {} depend on each other in a cycle",
            cycle.join(", ")
        );
        let flux = format!("dependency '{waits}' is not ready");
        let unit = &units[i];
        never_applies(&mut report, &unit.applies, &unit.key(), &blocker, &flux);
    }
    Ok(report)
}

/// kustomize-controller skips a suspended Kustomization, and it never becomes Ready: its
/// objects are not applied, and what depends on it waits.
fn suspended(
    unit: &Unit,
    unready: &mut BTreeMap<String, (&str, &str)>,
    report: &mut Report,
) -> bool {
    if unit.object["spec"]["suspend"] != true {
        return false;
    }
    unready.insert(
        unit.key(),
        ("which is suspended", "revision is not up to date"),
    );
    let why = format!(
        "not applied: the Kustomization {} is suspended (spec.suspend), so kustomize-controller applies nothing of it",
        unit.key()
    );
    report
        .steps
        .extend(apply::blocked_steps(&unit.applies, &why));
    true
}

/// The first dependency of `dependencies` that keeps a unit from applying, as the report and
/// as kustomize-controller say it (`checkDependencies`): one never Ready among the units, or
/// outside them not Ready or missing.
fn blocked(
    dependencies: &[String],
    units: &[Unit],
    unready: &BTreeMap<String, (&str, &str)>,
    outside: &BTreeMap<String, Outside>,
) -> Option<(String, String)> {
    let among = |d: &String| units.iter().any(|u| u.key() == *d);
    dependencies.iter().find_map(|d| match (unready.get(d), outside.get(d)) {
        (Some((what, says)), _) => Some((format!("{d}, {what}"), format!("dependency '{d}' {says}"))),
        _ if among(d) => None,
        (_, Some(Outside::Ready)) => None,
        (_, Some(Outside::NotReady)) => Some((
            format!("{d}, which is not Ready"),
            format!("dependency '{d}' is not ready"),
        )),
        (_, Some(Outside::Missing) | None) => Some((
            format!(
                "{d}, which does not exist (a dependsOn without a namespace names one in the Kustomization's own)"
            ),
            format!("dependency '{d}' not found"),
        )),
    })
}

/// The cluster a unit applies to: a dependency that does not wait is Ready before
/// helm-controller has made what its Tenants render, so those namespaces are not there yet;
/// and what helm-controller makes meanwhile, to put back once the unit is judged.
fn start(
    cluster: &ClusterObjects,
    dependencies: &[String],
    units: &[Unit],
    rendered: &BTreeMap<String, BTreeSet<String>>,
) -> (State, Vec<Value>) {
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
    let kept: BTreeSet<_> = start.cluster().keys().cloned().collect();
    let pending: Vec<Value> = cluster
        .values()
        .filter(|o| !kept.contains(&index_key(o)))
        .collect();
    (start, pending)
}

/// The report's line on what a Kustomization's prune will send, and as whom.
pub fn prune_note(pruned: &Pruned, identity: &Identity) -> String {
    if pruned.deletes.is_empty() {
        return pruned.source.clone();
    }
    let objects: Vec<String> = pruned.deletes.iter().map(Manifest::reference).collect();
    format!(
        "{}; these DELETEs will be judged, as {} (Flux sends one for each that carries its owner labels): {}",
        pruned.source,
        identity.describe(),
        objects.join(", ")
    )
}

/// The cluster's Namespaces.
fn namespaces(cluster: &ClusterObjects) -> BTreeSet<String> {
    cluster
        .keys()
        .filter(|(api, kind, ..)| api == "v1" && kind == "Namespace")
        .map(|(.., name)| name.clone())
        .collect()
}
