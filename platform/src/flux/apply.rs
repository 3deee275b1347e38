//! Flux's kustomize-controller applying a change set (`ApplyAllStaged` then `DeleteAll`,
//! kustomize-controller v1.8.0): sorted into stages, each dry-run whole before any of it lands,
//! then applied in order through admission again on the state the objects before it left; the
//! prune after a successful apply, in reverse order. Or one manifest after the other
//! ([`Applier::InOrder`]). Each manifest becomes the request the API server sends admission (a
//! CREATE when the object does not exist, an UPDATE with the live object as `oldObject` when it
//! does, its `object` what a server-side apply leaves, [`flux::applied`]); each admitted write is
//! applied as the platform plays it ([`crate::sequence`]) before the next is judged.

use std::collections::{BTreeSet, HashSet};

use cozystack_policy_runtime::cluster::{ClusterObjects, ObjectKey, index_key};
use cozystack_policy_runtime::policy::{rule_of, warnings_of};
use cozystack_resolver::request::APPS_GROUP;
use serde_json::{Value, json};

use crate::apiserver::{self, Admission, HELM_RELEASES, NAMESPACES, Resource};
use crate::application::{AppRef, AppWrite};
use crate::error::Error;
use crate::flux::manifests::Manifest;
use crate::flux::{self, Managed, Owner, Stage, postbuild};
use crate::sequence::{self, Admit, Outcome, Platform, Refuser, Sender, Sent, Then, Uninstall};
use crate::state::State;
use crate::writes::{self, RELEASE_API, Served};

/// A change set: the manifests applied, then the objects pruned.
#[derive(Debug, Default)]
pub struct ChangeSet {
    pub applies: Vec<Manifest>,
    pub deletes: Vec<Manifest>,
}

/// Who applies the change set, and so in which order and with what merge.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Applier {
    /// Flux's kustomize-controller ([`flux`]): stages, each dry-run whole before any of it is
    /// applied; the prune after a successful apply, in reverse order; its owner labels when the
    /// Kustomization is known (`--kustomization`).
    #[default]
    Flux,
    /// Flux, applying for this Kustomization.
    Kustomization(Owner),
    /// One manifest after the other, in the order given, each applied before the next is sent
    /// (`kubectl apply --server-side`, one object at a time): no dry run, no stage.
    InOrder,
}

impl Applier {
    fn flux(&self) -> bool {
        !matches!(self, Applier::InOrder)
    }

    fn owner(&self) -> Option<&Owner> {
        match self {
            Applier::Kustomization(owner) => Some(owner),
            _ => None,
        }
    }

    /// The field manager its server-side apply writes as.
    pub fn manager(&self) -> &'static str {
        if self.flux() {
            flux::MANAGER
        } else {
            "kubectl"
        }
    }
}

/// What the policy matches: apps.cozystack.io Applications, HelmReleases and Namespaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Guarded {
    Application,
    Release,
    Namespace,
}

fn surface(manifest: &Manifest) -> Option<Guarded> {
    let group = manifest.api_version().rsplit_once('/').map(|(g, _)| g);
    match (manifest.api_version(), manifest.kind()) {
        ("v1", "Namespace") => Some(Guarded::Namespace),
        (RELEASE_API, "HelmRelease") => Some(Guarded::Release),
        _ if group == Some(APPS_GROUP) => Some(Guarded::Application),
        _ => None,
    }
}

/// The verdict on one manifest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Disposition {
    /// Admitted without a warning.
    Allowed,
    /// Admitted with warnings.
    Warn,
    /// Refused: not applied.
    Denied,
    /// No rule of the policy matches it (applied as written).
    NotJudged,
    /// A prune of an object the cluster does not have (the API server answers 404).
    Absent,
    /// The write cannot be made at all (a kind the cluster does not serve).
    Error,
    /// Admitted, but never applied: its stage, an earlier one or the apply failed, so Flux
    /// applies nothing more of the change set and prunes nothing.
    Blocked,
    /// The API server refuses it before admission (`apiserver`: cozystack-api's validation, a
    /// version or kind not served, a namespace that does not exist): the change set fails
    /// there, whatever the policy would say.
    Rejected,
    /// Flux leaves it as it is and sends nothing (`reconcile: disabled`, or `ssa: IfNotPresent`
    /// on an object that exists).
    Unchanged,
}

impl Disposition {
    pub fn label(self) -> &'static str {
        match self {
            Disposition::Allowed => "ALLOWED",
            Disposition::Warn => "WARN",
            Disposition::Denied => "DENIED",
            Disposition::NotJudged => "SKIPPED",
            Disposition::Absent => "ABSENT",
            Disposition::Error => "ERROR",
            Disposition::Rejected => "REJECTED",
            Disposition::Unchanged => "UNCHANGED",
            Disposition::Blocked => "BLOCKED",
        }
    }

    /// The write fails: Flux's dry run of its stage, or its apply, stops there.
    fn fails(self) -> bool {
        matches!(
            self,
            Disposition::Denied | Disposition::Rejected | Disposition::Error
        )
    }
}

/// One manifest's result.
#[derive(Debug, Clone)]
pub struct Step {
    pub origin: String,
    /// `Kind namespace/name`.
    pub reference: String,
    /// CREATE, UPDATE or DELETE (empty when nothing was sent).
    pub operation: &'static str,
    pub outcome: Disposition,
    /// The policy's message (a denial's), or why nothing was judged.
    pub message: Option<String>,
    pub warnings: Vec<String>,
    /// The AdmissionRequest judged, and the policy's response, as the runtime answered it.
    pub request: Option<Value>,
    pub response: Option<Value>,
    /// The stage of Flux's apply it belongs to (none when applied in order).
    pub stage: Option<Stage>,
    /// What became of it beyond the verdict (not applied, and why).
    pub note: Option<String>,
    /// What the platform sent after it was applied, each request with its answer
    /// (cozystack-api's release, helm-controller's finalizer and render).
    pub then: Vec<Sent>,
}

impl Step {
    /// The row of the rule table that refused this write, or the request the platform sent
    /// after it, as the module named it.
    pub fn rule(&self) -> Option<&str> {
        let then = self.then.iter().rev().find(|sent| !sent.allowed());
        self.response
            .as_ref()
            .and_then(rule_of)
            .or_else(|| then.and_then(|sent| rule_of(&sent.response)))
    }

    /// Keeps what the platform sent after the write; a request of it refused makes the write's
    /// outcome that refusal, naming who sent it.
    fn follow(&mut self, outcome: Outcome) {
        if let Some(refusal) = &outcome.refused {
            let (disposition, who) = match (refusal.by, outcome.sent.last()) {
                (Refuser::Admission, Some(sent)) => (
                    Disposition::Denied,
                    format!("{}'s {}", sent.sender.describe(), sent.describe()),
                ),
                (Refuser::CozystackApi, _) => (Disposition::Rejected, "cozystack-api".to_owned()),
                (_, _) => (Disposition::Rejected, "the API server".to_owned()),
            };
            self.outcome = disposition;
            self.message = Some(format!(
                "admitted, but then {who} refuses what follows: {}",
                refusal.message
            ));
        }
        self.then = outcome.sent;
    }

    fn unjudged(manifest: &Manifest, outcome: Disposition, message: String) -> Step {
        Step::unsent(
            manifest.origin.clone(),
            manifest.reference(),
            outcome,
            message,
        )
    }

    /// A step that sent no request: what `reference`, read from `origin`, came to, and why.
    pub fn unsent(
        origin: String,
        reference: String,
        outcome: Disposition,
        message: String,
    ) -> Step {
        Step {
            origin,
            reference,
            operation: "",
            outcome,
            message: Some(message),
            warnings: Vec::new(),
            request: None,
            response: None,
            stage: None,
            note: None,
            then: Vec::new(),
        }
    }

    fn note(&mut self, note: &str) {
        self.note = Some(note.to_owned());
    }

    /// Never judged: an earlier failure stopped Flux before it.
    fn blocked(manifest: &Manifest, stage: Stage, why: String) -> Step {
        let mut step = Step::unjudged(manifest, Disposition::Blocked, String::new());
        step.stage = Some(stage);
        step.block(&why);
        step
    }

    /// Admitted (or not for the policy to judge), never applied.
    fn block(&mut self, why: &str) {
        if self.request.is_none() {
            self.message = None;
        }
        self.outcome = Disposition::Blocked;
        self.note(why);
    }
}

/// The steps of manifests Flux never applies, each blocked for `why`.
pub fn blocked_steps(manifests: &[Manifest], why: &str) -> Vec<Step> {
    manifests
        .iter()
        .map(|manifest| {
            let mut step = Step::unjudged(manifest, Disposition::Blocked, String::new());
            step.block(why);
            step
        })
        .collect()
}

/// Every step, in the order judged; what the run will send before it is judged (the prunes
/// each Kustomization's live inventory sets off); and the Kustomizations Flux never applies
/// although nothing of theirs was refused (a dependency missing, not Ready, or in a cycle).
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub steps: Vec<Step>,
    /// Said before the steps: which DELETEs will be judged, and where their inventory was read.
    pub notes: Vec<String>,
    /// The Kustomizations that never land: the change fails though no write was refused.
    pub failures: Vec<NeverApplies>,
}

/// A Kustomization kustomize-controller never applies, and why, in its own words.
#[derive(Debug, Clone, serde::Serialize)]
pub struct NeverApplies {
    /// `namespace/name`.
    pub kustomization: String,
    pub reason: String,
}

impl std::fmt::Display for NeverApplies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Kustomization {} never applies: {}",
            self.kustomization, self.reason
        )
    }
}

impl Report {
    pub fn count(&self, outcome: Disposition) -> usize {
        self.steps.iter().filter(|s| s.outcome == outcome).count()
    }

    /// Whether a write failed: refused, or not to be made at all. Flux's apply then fails, and
    /// its Kustomization is not Ready.
    pub fn failed(&self) -> bool {
        self.steps.iter().any(|s| s.outcome.fails())
    }
}

/// What a change set came to: its report, and the cluster it leaves.
pub struct Applied {
    pub report: Report,
    pub state: State,
}

/// What Flux prunes of a Kustomization's inventory, the owner whose labels they carry, and
/// where the inventory was read (a line for the report).
pub struct Pruned {
    pub owner: Owner,
    pub deletes: Vec<Manifest>,
    pub source: String,
}

const ABSENT: &str = "the cluster has no such object: nothing to delete (the API server answers 404 before any admission)";

/// Why a manifest makes no request: its outcome and the reason, and what it still does to the
/// cluster (an object no rule matches is applied; a Namespace is deleted without the policy).
struct Unjudged {
    outcome: Disposition,
    message: String,
    effect: Option<Effect>,
}

impl Unjudged {
    fn new(outcome: Disposition, message: impl Into<String>) -> Unjudged {
        Unjudged {
            outcome,
            message: message.into(),
            effect: None,
        }
    }

    fn absent() -> Unjudged {
        Unjudged::new(Disposition::Absent, ABSENT)
    }
}

/// The object a manifest writes, as the cluster holds it.
struct Target {
    /// Its resource's plural, as the request names it.
    plural: String,
    /// The live object, as the request shows it (an Application as cozystack-api reads its
    /// release back).
    live: Option<Value>,
    /// What deleting it does; `None` when there is nothing to delete.
    removed: Option<Effect>,
    /// cozystack-api's account of the write, for an Application.
    account: Option<Box<AppWrite>>,
}

impl Target {
    /// What an admitted apply of `object` does: an Application's goes through cozystack-api.
    fn put(&self, object: Value) -> Effect {
        match &self.account {
            Some(account) => Effect::Application(account.clone(), Some(object)),
            None => Effect::Put(object),
        }
    }
}

/// One apply: the state, and what it needs to send and apply each write.
struct Session<'a> {
    /// What the cluster offers the change set while Flux applies it.
    landing: apiserver::Landing,
    platform: &'a mut Platform,
    /// Who sends the change set's own writes.
    client: Sender,
    cluster: State,
    admit: &'a mut dyn Admit,
    applier: Applier,
}

/// A write to judge: the request's parts, and what applying it does.
struct Write {
    operation: &'static str,
    /// The resource, as [`Resource`] names it.
    group: String,
    version: String,
    kind: String,
    plural: String,
    namespace: Option<String>,
    name: String,
    object: Option<Value>,
    old: Option<Value>,
    effect: Effect,
    /// The apply changes the object (an object as it is sends its dry run, not its apply).
    changes: bool,
    /// Why the write fails after admission admits it.
    conflict: Option<String>,
}

/// A manifest's step, judged, and what applying it does (`None`: nothing, or not admitted).
struct Judgement {
    step: Step,
    effect: Option<Effect>,
}

enum Effect {
    /// Put this object; helm-controller reconciles a HelmRelease ([`Then::Stored`]).
    Put(Value),
    /// What cozystack-api writes after an admitted write of an Application (its new object,
    /// `None` for a DELETE), played as [`Then::Application`].
    Application(Box<AppWrite>, Option<Value>),
    /// This release is deleted ([`Then::Deleted`]).
    RemoveRelease(Value),
    RemoveNamespace(String),
}

impl Session<'_> {
    /// Applies an admitted write as the platform writes it: what follows it, each request
    /// judged ([`crate::sequence`]). A deleted release stays terminating while Flux
    /// applies the rest of the change set ([`Uninstall::Later`]).
    fn apply(&mut self, effect: Effect) -> Result<Outcome, Error> {
        let then = match &effect {
            Effect::Put(object) if object["apiVersion"] == RELEASE_API => {
                Then::Stored(object.clone())
            }
            // A definition the change set applies changes no kind cozystack-api serves while
            // Flux applies it (see `apiserver::Landing::defined`).
            Effect::Put(object) => {
                self.cluster.put(object.clone());
                return Ok(Outcome::default());
            }
            Effect::Application(account, app) => Then::Application(account, app.as_ref()),
            Effect::RemoveRelease(release) => Then::Deleted(release),
            Effect::RemoveNamespace(ns) => {
                writes::remove_namespace(&mut self.cluster, ns);
                return Ok(Outcome::default());
            }
        };
        let write = sequence::Write::Admitted {
            then,
            uninstall: Uninstall::Later,
        };
        let client = self.client.clone();
        self.platform
            .play(&mut self.cluster, &mut *self.admit, client, write)
    }

    fn served(&self, manifest: &Manifest) -> Result<Served, Unjudged> {
        self.platform.kinds.get(manifest.kind()).ok_or_else(|| {
            if let Some(refusal) = self.landing.not_served_yet(manifest.kind()) {
                return Unjudged::new(Disposition::Rejected, refusal);
            }
            Unjudged::new(
                Disposition::Error,
                format!(
                    "the cluster serves no {} (no ApplicationDefinition has spec.application.kind {}): the API server would answer 404; apply its ApplicationDefinition first",
                    manifest.kind(),
                    manifest.kind()
                ),
            )
        })
    }

    /// Why the API server sends nothing for `manifest`, or Flux leaves it alone, before the
    /// cluster is read; else what the policy matches of it.
    fn surface(&self, manifest: &Manifest, delete: bool) -> Result<Guarded, Unjudged> {
        if self.applier.flux()
            && !delete
            && let Some(why) = flux::skips_apply(&manifest.object, None)
        {
            return Err(Unjudged::new(Disposition::Unchanged, why));
        }
        if let Some(refusal) = apiserver::unserved_version(manifest) {
            return Err(Unjudged::new(Disposition::Rejected, refusal));
        }
        let Some(surface) = surface(manifest) else {
            return Err(Unjudged {
                effect: (!delete).then(|| Effect::Put(manifest.object.clone())),
                ..Unjudged::new(
                    Disposition::NotJudged,
                    "not judged by this policy (it matches Applications, HelmReleases and Namespaces)",
                )
            });
        };
        if surface != Guarded::Namespace && manifest.namespace().is_none() {
            return Err(Unjudged::new(
                Disposition::Error,
                format!(
                    "{} {} has no metadata.namespace: set it in the manifest (kustomize's `namespace:`) or pass --namespace",
                    manifest.kind(),
                    manifest.name()
                ),
            ));
        }
        Ok(surface)
    }

    /// The write a manifest makes on the current state.
    fn write(&self, manifest: &Manifest, delete: bool) -> Result<Write, Unjudged> {
        let flux = self.applier.flux();
        let surface = self.surface(manifest, delete)?;
        let namespace = manifest.namespace();
        let needs_namespace = surface != Guarded::Namespace;
        let target = self.target(manifest, surface, delete)?;
        if flux {
            let skips = match (delete, target.live.as_ref()) {
                (false, live) => flux::skips_apply(&manifest.object, live),
                (true, Some(live)) => flux::skips_prune(live, self.applier.owner()),
                (true, None) => None,
            };
            if let Some(why) = skips {
                return Err(Unjudged::new(Disposition::Unchanged, why));
            }
        }
        if let Some(namespace) = namespace.filter(|_| needs_namespace && !delete)
            && let Some(refusal) = self.landing.missing(namespace)
        {
            return Err(Unjudged::new(Disposition::Rejected, refusal));
        }
        let (group, version) = manifest
            .api_version()
            .rsplit_once('/')
            .unwrap_or(("", manifest.api_version()));
        let write = |operation, object: Option<Value>, old: Option<Value>, effect| Write {
            operation,
            group: group.to_owned(),
            version: version.to_owned(),
            kind: manifest.kind().to_owned(),
            plural: target.plural.clone(),
            namespace: namespace.filter(|_| needs_namespace).map(str::to_owned),
            name: manifest.name().to_owned(),
            object,
            old,
            effect,
            changes: true,
            conflict: None,
        };
        if delete {
            return match (target.live.clone(), target.removed) {
                (Some(live), Some(effect)) => Ok(write("DELETE", None, Some(live), effect)),
                _ => Err(Unjudged::absent()),
            };
        }
        let mut object = manifest.object.clone();
        if needs_namespace {
            object["metadata"]["namespace"] = json!(namespace);
        }
        if let Some(owner) = self.applier.owner() {
            owner.stamp(&mut object);
        }
        let Some(live) = target.live.clone() else {
            // A release of another kind holds the name: cozystack-api's create fails (the
            // storage's 409, answered to Flux as 500).
            let conflict = target.account.as_ref().and_then(|a| a.taken.clone());
            let effect = target.put(object.clone());
            return Ok(Write {
                conflict,
                ..write("CREATE", Some(object), None, effect)
            });
        };
        let fields = self.cluster.cluster().managed_fields(&index_key(&live));
        let managed = match (surface, fields.as_ref().and_then(Value::as_array)) {
            (Guarded::Application, _) => Managed::Aggregated,
            (_, Some(entries)) => Managed::Fields(entries),
            (_, None) => Managed::Unknown,
        };
        let new = flux::applied(&live, &object, self.applier.manager(), managed);
        // cozystack-api's `Update` checks the quota the update leaves, after admission.
        let conflict =
            (target.account.as_ref()).and_then(|a| a.update_refusal(&self.cluster, &new));
        Ok(Write {
            changes: new != live,
            conflict,
            ..write("UPDATE", Some(new.clone()), Some(live), target.put(new))
        })
    }

    /// The object `manifest` writes, as the cluster holds it now.
    fn target(
        &self,
        manifest: &Manifest,
        surface: Guarded,
        delete: bool,
    ) -> Result<Target, Unjudged> {
        let (namespace, name) = (manifest.namespace(), manifest.name());
        let cluster = &self.cluster;
        Ok(match surface {
            Guarded::Namespace => {
                let live = cluster.get("v1", "Namespace", name, None);
                // The webhook rules send no Namespace DELETE (deploy/policy-protect.yaml).
                if delete {
                    return Err(match live {
                        Some(_) => Unjudged {
                            effect: Some(Effect::RemoveNamespace(name.to_owned())),
                            ..Unjudged::new(
                                Disposition::NotJudged,
                                "not judged by this policy (its webhook rules send no Namespace DELETE); deleted with everything in it and below it",
                            )
                        },
                        None => Unjudged::absent(),
                    });
                }
                Target {
                    plural: NAMESPACES.plural.into(),
                    live,
                    removed: None,
                    account: None,
                }
            }
            Guarded::Release => {
                let live = cluster.get(RELEASE_API, "HelmRelease", name, namespace);
                Target {
                    plural: HELM_RELEASES.plural.into(),
                    removed: live.clone().map(Effect::RemoveRelease),
                    live,
                    account: None,
                }
            }
            Guarded::Application => {
                let served = self.served(manifest)?;
                let spec = (!delete).then(|| &manifest.object["spec"]);
                let ns = namespace.unwrap_or_default();
                let account = self
                    .platform
                    .api
                    .write(
                        &served,
                        cluster,
                        AppRef {
                            namespace: ns,
                            name,
                        },
                        spec,
                        manifest.api_version(),
                    )
                    .map_err(|refusal| Unjudged::new(Disposition::Rejected, refusal.0))?;
                let account = Box::new(account);
                Target {
                    plural: served.plural,
                    live: account.live.clone(),
                    removed: (account.release.is_some())
                        .then(|| Effect::Application(account.clone(), None)),
                    account: Some(account),
                }
            }
        })
    }

    /// Judges `manifest` on the current state and returns the step with what applying it
    /// does, not applied: the caller applies it when the write goes through.
    fn judge(
        &mut self,
        manifest: &Manifest,
        delete: bool,
        dry_run: bool,
    ) -> Result<Judgement, Error> {
        let write = match self.write(manifest, delete) {
            Ok(write) => write,
            Err(Unjudged {
                outcome,
                message,
                effect,
            }) => {
                let step = Step::unjudged(manifest, outcome, message);
                return Ok(Judgement { step, effect });
            }
        };
        let admission = Admission {
            operation: write.operation,
            resource: Resource {
                group: &write.group,
                version: &write.version,
                kind: &write.kind,
                plural: &write.plural,
            },
            namespace: write.namespace.as_deref(),
            name: &write.name,
            object: write.object.as_ref(),
            old: write.old.as_ref(),
        };
        let request = sequence::Write::Request { admission, dry_run };
        let client = self.client.clone();
        let sent = self
            .platform
            .play(&mut self.cluster, &mut *self.admit, client, request)?
            .sent
            .pop()
            .ok_or("the platform sent no request for the write")?;
        let (request, response) = (sent.request, sent.response);
        let accepted = response["accepted"] == true;
        let warnings = warnings_of(&response);
        let outcome = match (accepted, warnings.is_empty(), &write.conflict) {
            (false, _, _) => Disposition::Denied,
            (true, _, Some(_)) => Disposition::Rejected,
            (true, true, None) => Disposition::Allowed,
            (true, false, None) => Disposition::Warn,
        };
        let message = match (accepted, write.conflict) {
            (true, Some(conflict)) => Some(conflict),
            _ => response["message"].as_str().map(str::to_owned),
        };
        let effect =
            (outcome != Disposition::Rejected && accepted && write.changes).then_some(write.effect);
        let step = Step {
            origin: manifest.origin.clone(),
            reference: manifest.reference(),
            operation: write.operation,
            outcome,
            message,
            warnings,
            request: Some(request),
            response: Some(response),
            stage: None,
            note: None,
            then: Vec::new(),
        };
        Ok(Judgement { step, effect })
    }

    /// Judges and applies one manifest after the other, as `kubectl apply` sends them.
    fn in_order(
        &mut self,
        manifests: &[Manifest],
        delete: bool,
        report: &mut Report,
    ) -> Result<(), Error> {
        for manifest in manifests {
            let Judgement { mut step, effect } = self.judge(manifest, delete, false)?;
            if let Some(effect) = effect {
                step.follow(self.apply(effect)?);
            }
            if matches!(step.outcome, Disposition::Denied | Disposition::Rejected) {
                step.note("not applied: the manifests after it are judged without it");
            }
            report.steps.push(step);
        }
        Ok(())
    }

    /// One stage of `ApplyAllStaged` (`ApplyAll`): every object dry-run on the state before the
    /// stage, then, when none failed, each changed one applied in order, through admission again
    /// on the state the objects before it left. Returns why the stage failed, if it did.
    fn stage(
        &mut self,
        stage: Stage,
        manifests: &[&Manifest],
        report: &mut Report,
    ) -> Result<Option<String>, Error> {
        let mut judged = Vec::with_capacity(manifests.len());
        // The Applications cozystack-api wrote during the dry run, by reference.
        let mut landed = BTreeSet::new();
        for manifest in manifests {
            let Judgement {
                mut step,
                mut effect,
            } = self.judge(manifest, false, true)?;
            step.stage = Some(stage);
            // cozystack-api makes the write its dry run asked for: it lands now.
            if self.platform.api.dry_run_lands
                && matches!(surface(manifest), Some(Guarded::Application))
                && let Some(effect) = effect.take()
            {
                step.follow(self.apply(effect)?);
                landed.insert(step.reference.clone());
            }
            judged.push((*manifest, step, effect));
        }
        if let Some((_, refused, _)) = judged.iter().find(|(_, step, _)| step.outcome.fails()) {
            let why = format!(
                "{} failed the dry run of its stage, so kustomize-controller applies nothing of it, no later stage, and prunes nothing",
                refused.reference
            );
            let first = refused.reference.clone();
            for (_, mut step, _) in judged {
                if step.outcome.fails() {
                    if step.reference == first {
                        step.note("the dry run fails here: nothing of this stage is applied, no later stage, and no prune runs");
                    } else {
                        step.note("the dry run fails here too");
                    }
                } else if landed.contains(&step.reference) {
                    step.note(&format!(
                        "{LANDED_IN_DRY_RUN}; {STAYS} {first} failed the dry run of its stage"
                    ));
                } else if !matches!(step.outcome, Disposition::Unchanged | Disposition::Absent) {
                    step.block(&format!(
                        "not applied: {first} failed the dry run of its stage"
                    ));
                }
                report.steps.push(step);
            }
            return Ok(Some(why));
        }
        // What landed during the dry run already changed the state the apply starts from.
        let mut changed = !landed.is_empty();
        let mut failed: Option<String> = None;
        for (manifest, mut step, effect) in judged {
            if let Some(reason) = &failed {
                if effect.is_some() {
                    step.block(reason);
                }
                report.steps.push(step);
                continue;
            }
            let Some(mut effect) = effect else {
                report.steps.push(step);
                continue;
            };
            // The first write of the stage lands on the state its dry run saw.
            if changed && step.request.is_some() {
                let Judgement {
                    step: mut applied,
                    effect: again,
                } = self.judge(manifest, false, false)?;
                applied.stage = Some(stage);
                if applied.outcome.fails() {
                    applied.note("refused when applied, after the objects before it in its stage: the dry run, on the state before the stage, admitted it; the apply stops here, what came before it stays applied, and no prune runs");
                    failed = Some(format!(
                        "not applied: the apply of {} before it in its stage failed",
                        applied.reference
                    ));
                    report.steps.push(applied);
                    continue;
                }
                step = applied;
                match again {
                    Some(again) => effect = again,
                    None => {
                        report.steps.push(step);
                        continue;
                    }
                }
            }
            step.follow(self.apply(effect)?);
            changed = true;
            report.steps.push(step);
        }
        Ok(failed.map(|_| "the apply failed, so kustomize-controller prunes nothing".to_owned()))
    }
}

/// What a step says when cozystack-api wrote its dry run (`rest.go` `Update`, which server-side
/// apply calls, creates and updates the release with fresh options, so the dryRun is dropped).
const LANDED_IN_DRY_RUN: &str = "landed during the dry run: cozystack-api drops a server-side apply's dryRun (pkg/registry/apps/application/rest.go Update), so this write is made now, whatever becomes of the stage, and the rest of the dry run sees it";

/// How a step landed during a failed stage's dry run says it stays.
pub const STAYS: &str = "it stays although";

/// Applies `changes` to `cluster` as `client` sends them through `applier`, each request
/// (and each one the platform sends after it) answered by `admit`. The state is what the change
/// set leaves.
pub fn run(
    platform: &mut Platform,
    cluster: ClusterObjects,
    changes: &ChangeSet,
    client: Sender,
    applier: Applier,
    admit: &mut dyn Admit,
) -> Result<Applied, Error> {
    let mut session = Session {
        landing: apiserver::Landing::of(&changes.applies, &cluster),
        platform,
        client,
        cluster: State::new(cluster),
        admit,
        applier,
    };
    let mut report = Report::default();
    if session.applier.flux() {
        session.as_flux(changes, &mut report)?;
    } else {
        session.in_order(&changes.applies, false, &mut report)?;
        session.in_order(&changes.deletes, true, &mut report)?;
    }
    Ok(Applied {
        report,
        state: session.cluster,
    })
}

impl Session<'_> {
    /// `ApplyAllStaged`, then `DeleteAll` when every stage applied.
    fn as_flux(&mut self, changes: &ChangeSet, report: &mut Report) -> Result<(), Error> {
        let mut applies: Vec<&Manifest> = changes.applies.iter().collect();
        applies.sort_by(|a, b| flux::order(a, b));
        let mut failed: Option<String> = None;
        for stage in [Stage::Definitions, Stage::Classes, Stage::Resources] {
            let manifests: Vec<&Manifest> = applies
                .iter()
                .copied()
                .filter(|m| Stage::of(m) == stage)
                .collect();
            if manifests.is_empty() {
                continue;
            }
            match &failed {
                None => failed = self.stage(stage, &manifests, report)?,
                Some(why) => {
                    for manifest in manifests {
                        let why = format!("not applied: {why}");
                        report.steps.push(Step::blocked(manifest, stage, why));
                    }
                }
            }
        }
        // `DeleteAll`: the reverse of the apply order, each deleted whatever became of the others.
        let mut deletes: Vec<&Manifest> = changes.deletes.iter().collect();
        deletes.sort_by(|a, b| flux::order(b, a));
        for manifest in deletes {
            let mut step = match &failed {
                None => {
                    let Judgement { mut step, effect } = self.judge(manifest, true, false)?;
                    if let Some(effect) = effect {
                        step.follow(self.apply(effect)?);
                    }
                    step
                }
                Some(why) => Step::blocked(manifest, Stage::Prune, format!("not pruned: {why}")),
            };
            step.stage = Some(Stage::Prune);
            report.steps.push(step);
        }
        Ok(())
    }
}

/// The change set is not what Flux applies while it still holds a post-build variable
/// ([`flux::unsubstituted`]) where it counts: anywhere in an object the policy judges, in the
/// metadata of any other. The error names the first, with its file and document.
pub fn unsubstituted(applies: &[Manifest]) -> Option<String> {
    // An object marked `substitute: disabled` is applied as written, `${…}` and all.
    let mut substituted = applies.iter().filter(|m| !postbuild::disabled(&m.object));
    substituted.find_map(|manifest| {
        let read = match surface(manifest) {
            Some(_) => &manifest.object,
            None => &manifest.object["metadata"],
        };
        flux::unsubstituted(read).map(|variable| {
            format!(
                "{}: {} holds {variable}, a post-build variable kustomize-controller substitutes (spec.postBuild) before it applies: check the change set with its values, as `flux build kustomization NAME --path DIR` prints it (or pass --in-order to apply it as written)",
                manifest.origin,
                manifest.reference()
            )
        })
    })
}

/// Which objects a change set may apply over, whose managed fields a server-side apply merges
/// with: each manifest's own, and the release an Application is stored as (in its namespace,
/// named `<prefix><name>`).
pub fn applies_over(applies: &[Manifest]) -> impl Fn(&ObjectKey) -> bool + Sync + use<> {
    let names: HashSet<(String, String)> = applies
        .iter()
        .map(|m| {
            (
                m.namespace().unwrap_or_default().to_owned(),
                m.name().to_owned(),
            )
        })
        .collect();
    move |(_, kind, namespace, name): &ObjectKey| {
        let named = |name: &str| names.contains(&(namespace.clone(), name.to_owned()));
        named(name)
            || (kind == "HelmRelease"
                && name
                    .match_indices('-')
                    .any(|(at, _)| named(&name[at + 1..])))
    }
}

/// What Flux prunes: the entries of the **live** Kustomization's `status.inventory` (the cluster's,
/// the dump's, or a file `kubectl get kustomization -o yaml` wrote) that the change set no longer
/// holds, as manifests naming them (`<namespace>_<name>_<group>_<kind>`, version `v`), with the
/// Kustomization whose owner labels they must carry. kustomize-controller v1.8.0 diffs the new
/// inventory against `obj.Status.Inventory`, never against the repository's file, which carries
/// no status; a Kustomization the cluster does not hold yet (`live` `None`) has applied nothing,
/// and one whose status has no inventory has applied nothing Flux tracks: nothing is pruned.
pub fn pruned(
    kustomization: &Value,
    live: Option<(&Value, &str)>,
    applies: &[Manifest],
    origin: &str,
) -> Result<Pruned, Error> {
    let owner = Owner {
        name: writes::str_of(kustomization, "/metadata/name").to_owned(),
        namespace: writes::str_of(kustomization, "/metadata/namespace").to_owned(),
    };
    if owner.name.is_empty() || owner.namespace.is_empty() {
        return Err(format!(
            "{origin}: the Kustomization has no metadata.name or metadata.namespace (its owner labels name both)"
        ).into());
    }
    let reference = format!("{}/{}", owner.namespace, owner.name);
    let Some((live, origin)) = live else {
        return Ok(Pruned {
            source: format!(
                "the cluster holds no Kustomization {reference} yet: it has applied nothing, so Flux prunes nothing"
            ),
            owner,
            deletes: Vec::new(),
        });
    };
    let entries = match live.pointer("/status/inventory") {
        None | Some(Value::Null) => {
            return Ok(Pruned {
                source: format!(
                    "the live Kustomization {reference} has no status.inventory (it has applied nothing Flux tracks): Flux prunes nothing"
                ),
                owner,
                deletes: Vec::new(),
            });
        }
        Some(inventory) => match inventory.get("entries") {
            None | Some(Value::Null) => &Vec::new(),
            Some(entries) => entries.as_array().ok_or_else(|| {
                format!("{origin}: status.inventory.entries is not a list (a Flux Kustomization as `kubectl get kustomization NAME -n NS -o yaml` prints it)")
            })?,
        },
    };
    let kept: BTreeSet<(String, String, String, String)> = applies
        .iter()
        .map(|m| {
            let group = m.api_version().rsplit_once('/').map_or("", |(g, _)| g);
            (
                m.namespace().unwrap_or_default().to_owned(),
                m.name().to_owned(),
                group.to_owned(),
                m.kind().to_owned(),
            )
        })
        .collect();
    let mut out = Vec::new();
    for (i, entry) in entries.iter().enumerate() {
        if let Some(object) = inventory_object(entry, i, origin, &kept)? {
            out.push(Manifest {
                origin: format!("{origin}, inventory entry {}", i + 1),
                object,
            });
        }
    }
    let source = format!(
        "Kustomization {reference} prunes {} of the {} objects its live status.inventory ({origin}) lists",
        out.len(),
        entries.len()
    );
    Ok(Pruned {
        owner,
        deletes: out,
        source,
    })
}

/// The object inventory entry `i` names (`<namespace>_<name>_<group>_<kind>`, its version in
/// `v`), as Flux's prune deletes it; `None` when the change set still applies it.
fn inventory_object(
    entry: &Value,
    i: usize,
    origin: &str,
    kept: &BTreeSet<(String, String, String, String)>,
) -> Result<Option<Value>, Error> {
    let id = entry["id"].as_str().unwrap_or_default();
    let parts: Vec<&str> = id.split('_').collect();
    let [namespace, name, group, kind] = parts.as_slice() else {
        return Err(format!(
            "{origin}: inventory entry {} has id {id:?}, not <namespace>_<name>_<group>_<kind>",
            i + 1
        )
        .into());
    };
    let key = (
        namespace.to_string(),
        name.to_string(),
        group.to_string(),
        kind.to_string(),
    );
    if kept.contains(&key) {
        return Ok(None);
    }
    let version = entry["v"].as_str().unwrap_or("v1");
    let api_version = if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    };
    let mut object = json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": name}});
    if !namespace.is_empty() {
        object["metadata"]["namespace"] = json!(namespace);
    }
    Ok(Some(object))
}
