//! `check`: a GitOps change set judged against a cluster as its writes land. Each manifest
//! becomes the request the API server would send the policy (a CREATE when the object does not
//! exist, an UPDATE with the live object as `oldObject` when it does, its `object` what a
//! server-side apply leaves, [`flux::applied`]), applied as Flux's kustomize-controller applies
//! it ([`flux`]: sorted into stages, each dry-run whole before any of it lands, the prune after a
//! successful apply) or one after the other ([`Applier::InOrder`]). Each admitted write is
//! applied to the in-memory cluster as the platform writes it ([`crate::platform::writes`])
//! before the next is judged on it; a refused write is not applied.

use std::collections::{BTreeSet, HashSet};

use crate::platform::writes::TenantChart;
use cozystack_policy_runtime::cluster::{ClusterObjects, ObjectKey, index_key};
use cozystack_policy_runtime::policy::{Policy, payload, rule_of, warned_by, warnings_of};
use cozystack_resolver::request::APPS_GROUP;
use serde_json::{Value, json};

use crate::error::Error;
use crate::flux::manifests::Manifest;
use crate::platform::apiserver::{self, Admission, HELM_RELEASES, Identity, NAMESPACES, Resource};
use crate::platform::application::{Api, AppWrite};
use crate::platform::flux::{self, Managed, Owner, Stage};
use crate::platform::writes::{self, Kinds, RELEASE_API, Served};
use crate::state::State;

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
    fn manager(&self) -> &'static str {
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
}

impl Step {
    /// The row of the rule table that refused this write, as the module named it.
    pub fn rule(&self) -> Option<&str> {
        self.response.as_ref().and_then(rule_of)
    }

    fn unjudged(manifest: &Manifest, outcome: Disposition, message: String) -> Step {
        Step {
            origin: manifest.origin.clone(),
            reference: manifest.reference(),
            operation: "",
            outcome,
            message: Some(message),
            warnings: Vec::new(),
            request: None,
            response: None,
            stage: None,
            note: None,
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

/// Every step, in the order judged.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub steps: Vec<Step>,
}

/// Called with each judged request and the cluster it was judged on (to keep them).
pub type Observer<'a> = dyn FnMut(usize, &Value, &ClusterObjects) -> Result<(), Error> + 'a;

const ABSENT: &str = "the cluster has no such object: nothing to delete (the API server answers 404 before any admission)";

/// Why a manifest makes no request: its outcome and the reason, and what it still does to the
/// cluster (an object no rule matches is applied; a Namespace is deleted without the policy).
struct Unjudged(Disposition, String, Option<Effect>);

/// How an admitted apply changes the cluster, given the object the API server stores.
type Applies = Box<dyn Fn(Value) -> Effect>;

/// One check session: the state, and what it needs to judge and apply each write.
struct Session<'a> {
    /// What the cluster offers the change set while Flux applies it.
    landing: apiserver::Landing,
    policy: &'a Policy,
    settings: &'a Value,
    chart: TenantChart,
    /// cozystack-api as the release runs it.
    api: Api,
    identity: &'a Identity,
    cluster: State,
    kinds: Kinds,
    observe: &'a mut Observer<'a>,
    judged: usize,
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

enum Effect {
    /// Put this object (and a Tenant release renders its chart).
    Put(Value),
    /// Remove this release (a Tenant's takes its namespace tree).
    RemoveRelease(Value),
    RemoveNamespace(String),
}

impl Session<'_> {
    /// Applies an admitted write as the platform writes it.
    fn apply(&mut self, effect: Effect) {
        match effect {
            // A definition the change set applies changes no kind cozystack-api serves while
            // Flux applies it (see `apiserver::Landing::defined`).
            Effect::Put(object) => {
                if writes::is_tenant_release(&object) {
                    self.cluster.put(object.clone());
                    writes::render_tenant(&mut self.cluster, &object, &self.chart);
                } else {
                    self.cluster.put(object);
                }
            }
            // helm-controller's finalizer keeps a deleted release, terminating, until it has
            // uninstalled it (fluxcd/helm-controller v1.5.0, `reconcileDelete`): after Flux has
            // applied the whole change set. The manifests after it see it terminating (the
            // policy counts terminating consumers), and nothing it rendered goes yet. A release
            // no controller has handled (made by this change set) has no finalizer and goes.
            Effect::RemoveRelease(mut release) if has_finalizers(&release) => {
                if release.pointer("/metadata/deletionTimestamp").is_none() {
                    release["metadata"]["deletionTimestamp"] = json!(DELETION_TIMESTAMP);
                    self.cluster.put(release);
                }
            }
            Effect::RemoveRelease(release) => writes::remove_release(&mut self.cluster, &release),
            Effect::RemoveNamespace(ns) => writes::remove_namespace(&mut self.cluster, &ns),
        }
    }

    fn served(&self, manifest: &Manifest) -> Result<Served, Unjudged> {
        self.kinds.get(manifest.kind()).ok_or_else(|| {
            if let Some(refusal) = self.landing.not_served_yet(manifest.kind()) {
                return Unjudged(Disposition::Rejected, refusal, None);
            }
            Unjudged(
                Disposition::Error,
                format!(
                    "the cluster serves no {} (no ApplicationDefinition has spec.application.kind {}): the API server would answer 404; apply its ApplicationDefinition first",
                    manifest.kind(),
                    manifest.kind()
                ),
                None,
            )
        })
    }

    /// The write a manifest makes on the current state.
    fn write(&self, manifest: &Manifest, delete: bool) -> Result<Write, Unjudged> {
        let flux = self.applier.flux();
        if flux
            && !delete
            && let Some(why) = flux::skips_apply(&manifest.object, None)
        {
            return Err(Unjudged(Disposition::Unchanged, why, None));
        }
        if let Some(refusal) = apiserver::unserved_version(manifest) {
            return Err(Unjudged(Disposition::Rejected, refusal, None));
        }
        let Some(surface) = surface(manifest) else {
            return Err(Unjudged(
                Disposition::NotJudged,
                "not judged by this policy (it matches Applications, HelmReleases and Namespaces)"
                    .into(),
                (!delete).then(|| Effect::Put(manifest.object.clone())),
            ));
        };
        let (namespace, name) = (manifest.namespace(), manifest.name());
        let needs_namespace = surface != Guarded::Namespace;
        if needs_namespace && namespace.is_none() {
            return Err(Unjudged(
                Disposition::Error,
                format!(
                    "{} {name} has no metadata.namespace: set it in the manifest (kustomize's `namespace:`) or pass --namespace",
                    manifest.kind()
                ),
                None,
            ));
        }
        let (group, version) = manifest
            .api_version()
            .rsplit_once('/')
            .unwrap_or(("", manifest.api_version()));
        let cluster = &self.cluster;
        let mut conflict = None;
        // cozystack-api's account of an Application write.
        let mut app = None;
        // The resource, the live object as the request shows it, what deleting it removes, and
        // what applying the manifest puts.
        let (resource, live, removed, effect_of): (String, Option<Value>, Option<Effect>, Applies) =
            match surface {
                Guarded::Namespace => {
                    let live = cluster.get("v1", "Namespace", name, None);
                    // The webhook rules send no Namespace DELETE (deploy/policy-protect.yaml).
                    if delete {
                        return Err(match live {
                            Some(_) => Unjudged(
                                Disposition::NotJudged,
                                "not judged by this policy (its webhook rules send no Namespace DELETE); deleted with everything in it and below it".into(),
                                Some(Effect::RemoveNamespace(name.to_owned())),
                            ),
                            None => Unjudged(Disposition::Absent, ABSENT.into(), None),
                        });
                    }
                    (NAMESPACES.plural.into(), live, None, Box::new(Effect::Put))
                }
                Guarded::Release => {
                    let live = cluster.get(RELEASE_API, "HelmRelease", name, namespace);
                    let removed = live.clone().map(Effect::RemoveRelease);
                    (
                        HELM_RELEASES.plural.into(),
                        live,
                        removed,
                        Box::new(Effect::Put),
                    )
                }
                Guarded::Application => {
                    let served = self.served(manifest)?;
                    let spec = (!delete).then(|| &manifest.object["spec"]);
                    let ns = namespace.unwrap_or_default();
                    let mut account = self
                        .api
                        .write(&served, cluster, (ns, name), spec, manifest.api_version())
                        .map_err(|refusal| Unjudged(Disposition::Rejected, refusal, None))?;
                    let (live, release) = (account.live.take(), account.release.take());
                    let removed = release.clone().map(Effect::RemoveRelease);
                    conflict = account.taken.take();
                    app = Some(account);
                    let plural = served.plural.clone();
                    let put =
                        move |app: Value| Effect::Put(served.release_for(&app, release.as_ref()));
                    (plural, live, removed, Box::new(put))
                }
            };
        if flux {
            let skips = match (delete, live.as_ref()) {
                (false, live) => flux::skips_apply(&manifest.object, live),
                (true, Some(live)) => flux::skips_prune(live, self.applier.owner()),
                (true, None) => None,
            };
            if let Some(why) = skips {
                return Err(Unjudged(Disposition::Unchanged, why, None));
            }
        }
        if let Some(namespace) = namespace.filter(|_| needs_namespace && !delete)
            && let Some(refusal) = self.landing.missing(namespace)
        {
            return Err(Unjudged(Disposition::Rejected, refusal, None));
        }
        let write = |operation, object: Option<Value>, old: Option<Value>, effect| Write {
            operation,
            group: group.to_owned(),
            version: version.to_owned(),
            kind: manifest.kind().to_owned(),
            plural: resource.clone(),
            namespace: namespace.filter(|_| needs_namespace).map(str::to_owned),
            name: name.to_owned(),
            object,
            old,
            effect,
            changes: true,
            conflict: None,
        };
        if delete {
            return match (live, removed) {
                (Some(live), Some(effect)) => Ok(write("DELETE", None, Some(live), effect)),
                _ => Err(Unjudged(Disposition::Absent, ABSENT.into(), None)),
            };
        }
        let mut object = manifest.object.clone();
        if needs_namespace {
            object["metadata"]["namespace"] = json!(namespace);
        }
        if let Some(owner) = self.applier.owner() {
            owner.stamp(&mut object);
        }
        Ok(match live {
            Some(live) => {
                let fields = self.cluster.cluster().managed_fields(&index_key(&live));
                let managed = match (surface, fields.as_ref().and_then(Value::as_array)) {
                    (Guarded::Application, _) => Managed::Aggregated,
                    (_, Some(entries)) => Managed::Fields(entries),
                    (_, None) => Managed::Unknown,
                };
                let new = flux::applied(&live, &object, self.applier.manager(), managed);
                let effect = effect_of(new.clone());
                let changes = new != live;
                // cozystack-api's `Update` checks the quota the update leaves, after admission.
                let conflict = app
                    .as_ref()
                    .and_then(|app: &AppWrite| app.update_refusal(&self.cluster, &new));
                Write {
                    changes,
                    conflict,
                    ..write("UPDATE", Some(new), Some(live), effect)
                }
            }
            None => {
                let effect = effect_of(object.clone());
                Write {
                    conflict,
                    ..write("CREATE", Some(object), None, effect)
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
    ) -> Result<(Step, Option<Effect>), Error> {
        let write = match self.write(manifest, delete) {
            Ok(write) => write,
            Err(Unjudged(outcome, message, effect)) => {
                return Ok((Step::unjudged(manifest, outcome, message), effect));
            }
        };
        self.judged += 1;
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
        let request =
            admission.request(self.identity, self.applier.manager(), self.judged, dry_run);
        (self.observe)(self.judged, &request, self.cluster.cluster())?;
        let response = evaluate(self.policy, self.settings, &mut self.cluster, &request)?;
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
        };
        Ok((step, effect))
    }

    /// Judges and applies one manifest after the other, as `kubectl apply` sends them.
    fn in_order(
        &mut self,
        manifests: &[Manifest],
        delete: bool,
        report: &mut Report,
    ) -> Result<(), Error> {
        for manifest in manifests {
            let (mut step, effect) = self.judge(manifest, delete, false)?;
            if let Some(effect) = effect {
                self.apply(effect);
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
            let (mut step, mut effect) = self.judge(manifest, false, true)?;
            step.stage = Some(stage);
            // cozystack-api makes the write its dry run asked for: it lands now.
            if self.api.dry_run_lands
                && matches!(surface(manifest), Some(Guarded::Application))
                && let Some(effect) = effect.take()
            {
                self.apply(effect);
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
                let (mut applied, again) = self.judge(manifest, false, false)?;
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
            self.apply(effect);
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
const STAYS: &str = "it stays although";

/// The policy's response to `request` on `cluster`: the payload the policy-server sends, its GETs
/// and lists served through the state's index and reflectors.
pub(crate) fn evaluate(
    policy: &Policy,
    settings: &Value,
    cluster: &mut State,
    request: &Value,
) -> Result<Value, Error> {
    let payload = payload(request, settings)?;
    let (objects, cache) = cluster.lend();
    let state = policy.host_state(objects, Vec::new(), Some(cache.clone()));
    let evaluation = policy.validate_with(&payload, state);
    cluster.restore(cache);
    Ok(evaluation?.response)
}

/// The deletion time a release deleted by the change set shows while it is terminating.
const DELETION_TIMESTAMP: &str = "2026-01-01T00:00:00Z";

fn has_finalizers(object: &Value) -> bool {
    object
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|f| !f.is_empty())
}

/// Judges `changes` against `cluster` as `identity` applies them under `settings`; `observe`
/// sees each request and the cluster it is judged on. The state is what the change set leaves
/// (the lifecycle simulator plays on).
pub fn run<'a>(
    policy: &'a Policy,
    settings: &'a Value,
    cluster: ClusterObjects,
    changes: &ChangeSet,
    identity: &'a Identity,
    applier: Applier,
    observe: &'a mut Observer<'a>,
) -> Result<(Report, State), Error> {
    crate::settings::check(policy, settings)?;
    let resolved = crate::settings::resolved(settings)?;
    let kinds = Kinds::read(&cluster);
    let mut judge = Session {
        landing: apiserver::Landing::of(&changes.applies, &cluster),
        policy,
        settings,
        chart: TenantChart::of(&resolved),
        api: Api::of(&resolved),
        identity,
        cluster: State::new(cluster),
        kinds,
        observe,
        judged: 0,
        applier,
    };
    let mut report = Report::default();
    if judge.applier.flux() {
        judge.as_flux(changes, &mut report)?;
    } else {
        judge.in_order(&changes.applies, false, &mut report)?;
        judge.in_order(&changes.deletes, true, &mut report)?;
    }
    Ok((report, judge.cluster))
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
                    let (step, effect) = self.judge(manifest, true, false)?;
                    if let Some(effect) = effect {
                        self.apply(effect);
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
    applies.iter().find_map(|manifest| {
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

/// What Flux prunes: the entries of a Kustomization's `status.inventory` that the change set
/// no longer holds, as manifests naming them (`<namespace>_<name>_<group>_<kind>`, version
/// `v`), with the Kustomization whose owner labels they must carry.
pub fn pruned(
    kustomization: &Value,
    applies: &[Manifest],
    origin: &str,
) -> Result<(Owner, Vec<Manifest>), Error> {
    // A Kustomization read from the repository has no status: it never applied anything.
    let never_applied = Vec::new();
    let entries = match kustomization.get("status") {
        None => &never_applied,
        Some(status) => status
            .pointer("/inventory/entries")
            .and_then(Value::as_array)
            .ok_or_else(|| {
                format!("{origin}: no status.inventory.entries (a Flux Kustomization as `kubectl get kustomization NAME -n NS -o yaml` prints it)")
            })?,
    };
    let owner = Owner {
        name: writes::str_of(kustomization, "/metadata/name").to_owned(),
        namespace: writes::str_of(kustomization, "/metadata/namespace").to_owned(),
    };
    if owner.name.is_empty() || owner.namespace.is_empty() {
        return Err(format!(
            "{origin}: the Kustomization has no metadata.name or metadata.namespace (its owner labels name both)"
        ).into());
    }
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
            continue;
        }
        let version = entry["v"].as_str().unwrap_or("v1");
        let api_version = if group.is_empty() {
            version.to_owned()
        } else {
            format!("{group}/{version}")
        };
        let mut object =
            json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": name}});
        if !namespace.is_empty() {
            object["metadata"]["namespace"] = json!(namespace);
        }
        out.push(Manifest {
            origin: format!("{origin}, inventory entry {}", i + 1),
            object,
        });
    }
    Ok((owner, out))
}

impl Report {
    pub fn count(&self, outcome: Disposition) -> usize {
        self.steps.iter().filter(|s| s.outcome == outcome).count()
    }

    /// 2 when a write cannot be made, 1 when one is refused; else 0, or `warn` when one was
    /// admitted with a warning and the caller asked warnings to fail (under the stock
    /// `platformWriters: warn`, every protection problem Flux would cause is a warning).
    pub fn exit_code(&self, warn: Option<u8>) -> u8 {
        if self.count(Disposition::Error) > 0 {
            2
        } else if self.count(Disposition::Denied) + self.count(Disposition::Rejected) > 0 {
            1
        } else if self.count(Disposition::Warn) > 0 {
            warn.unwrap_or(0)
        } else {
            0
        }
    }

    /// The report of a change set that cannot be read: one error naming where, so a CI system
    /// that reads the JUnit file shows why the check stopped.
    pub fn unreadable(error: &str) -> Report {
        // Errors name their file first (`path, document N: …`, `path: …`).
        let origin = error.split(": ").next().unwrap_or(error);
        Report {
            steps: vec![Step {
                origin: origin
                    .split(", document")
                    .next()
                    .unwrap_or(origin)
                    .to_owned(),
                reference: "the change set".to_owned(),
                operation: "",
                outcome: Disposition::Error,
                message: Some(error.to_owned()),
                warnings: Vec::new(),
                request: None,
                response: None,
                stage: None,
                note: None,
            }],
        }
    }

    /// One line per manifest, under its stage of Flux's apply, then what the change set
    /// comes to.
    pub fn text(&self) -> String {
        let mut out = String::new();
        let mut stage = None;
        for step in &self.steps {
            if step.stage != stage {
                stage = step.stage;
                if let Some(stage) = stage {
                    out.push_str(&format!("{}\n", stage.describe()));
                }
            }
            let operation = if step.operation.is_empty() {
                String::new()
            } else {
                format!("{} ", step.operation)
            };
            let mut line = format!(
                "{:<8} {operation}{} ({})",
                step.outcome.label(),
                step.reference,
                step.origin
            );
            if let Some(message) = &step.message {
                line.push_str(&format!(": {message}"));
            }
            for warning in &step.warnings {
                line.push_str(&format!(" | warning: {warning}"));
            }
            if let Some(note) = &step.note {
                line.push_str(&format!(" | {note}"));
            }
            out.push_str(&line);
            out.push('\n');
        }
        let judged = self.steps.iter().filter(|s| s.request.is_some()).count();
        out.push_str(&format!(
            "\n{} manifests: {judged} writes judged ({} allowed, {} with warnings, {} denied), {} not judged by this policy, {} absent, {} errors\n",
            self.steps.len(),
            self.count(Disposition::Allowed),
            self.count(Disposition::Warn),
            self.count(Disposition::Denied),
            self.count(Disposition::NotJudged),
            self.count(Disposition::Absent),
            self.count(Disposition::Error),
        ));
        for (outcome, what) in [
            (
                Disposition::Rejected,
                "refused by the API server before admission",
            ),
            (Disposition::Unchanged, "left as they are by Flux"),
            (
                Disposition::Blocked,
                "admitted but not applied, as an earlier failure stops Flux",
            ),
        ] {
            let n = self.count(outcome);
            if n > 0 {
                out.push_str(&format!("{n} {what}\n"));
            }
        }
        let landed = self
            .steps
            .iter()
            .filter(|s| s.note.as_deref().is_some_and(|n| n.contains(STAYS)))
            .count();
        if landed > 0 {
            out.push_str(&format!(
                "{landed} written by cozystack-api during the dry run of a stage that failed: they stay in the cluster\n"
            ));
        }
        out
    }

    /// The report as JSON: every step with its request and the policy's response.
    pub fn json(&self, identity: &Identity) -> Value {
        let steps: Vec<Value> = self
            .steps
            .iter()
            .map(|s| {
                json!({"origin": s.origin, "object": s.reference, "operation": s.operation,
                    "stage": s.stage, "outcome": s.outcome, "message": s.message, "rule": s.rule(),
                    "warnings": s.warnings,
                    "warnedBy": s.response.as_ref().map(warned_by).unwrap_or_default(),
                    "note": s.note,
                    "applied": matches!(s.outcome, Disposition::Allowed | Disposition::Warn | Disposition::NotJudged),
                    "request": s.request, "response": s.response})
            })
            .collect();
        json!({"identity": {"username": identity.username, "groups": identity.groups},
            "steps": steps,
            "summary": {"manifests": self.steps.len(), "allowed": self.count(Disposition::Allowed),
                "warn": self.count(Disposition::Warn), "denied": self.count(Disposition::Denied),
                "notJudged": self.count(Disposition::NotJudged), "absent": self.count(Disposition::Absent),
                "errors": self.count(Disposition::Error), "rejected": self.count(Disposition::Rejected),
                "unchanged": self.count(Disposition::Unchanged),
                "blocked": self.count(Disposition::Blocked)}})
    }

    /// JUnit XML: one test case per manifest (a denial a failure, a write that cannot be made
    /// an error, a manifest not judged skipped), as CI systems render test reports.
    /// `judged_by` (which settings, rules and release) is the suite's property of that name;
    /// a change set that could not be read was judged by none.
    pub fn junit(&self, judged_by: Option<&str>) -> String {
        fn escape(text: &str) -> String {
            text.chars()
                .map(|c| match c {
                    '&' => "&amp;".into(),
                    '<' => "&lt;".into(),
                    '>' => "&gt;".into(),
                    '"' => "&quot;".into(),
                    '\'' => "&apos;".into(),
                    c if (c as u32) < 0x20 && !matches!(c, '\n' | '\t' | '\r') => " ".into(),
                    c => c.to_string(),
                })
                .collect()
        }
        let mut out = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"cozystack-policy check\" tests=\"{n}\" failures=\"{f}\" errors=\"{e}\" skipped=\"{s}\">\n  <testsuite name=\"cozystack-capabilities\" tests=\"{n}\" failures=\"{f}\" errors=\"{e}\" skipped=\"{s}\">\n",
            n = self.steps.len(),
            f = self.count(Disposition::Denied) + self.count(Disposition::Rejected),
            e = self.count(Disposition::Error),
            s = self.count(Disposition::NotJudged)
                + self.count(Disposition::Absent)
                + self.count(Disposition::Unchanged)
                + self.count(Disposition::Blocked),
        );
        if let Some(judged_by) = judged_by {
            out.push_str(&format!(
                "    <properties>\n      <property name=\"judgedBy\" value=\"{}\"/>\n    </properties>\n",
                escape(judged_by)
            ));
        }
        for step in &self.steps {
            let name = if step.operation.is_empty() {
                step.reference.clone()
            } else {
                format!("{} {}", step.operation, step.reference)
            };
            out.push_str(&format!(
                "    <testcase classname=\"{}\" name=\"{}\">\n",
                escape(&step.origin),
                escape(&name)
            ));
            let message = escape(step.message.as_deref().unwrap_or_default());
            match step.outcome {
                // The type is the row of the rule table that refused.
                Disposition::Denied => out.push_str(&format!(
                    "      <failure type=\"{}\" message=\"{message}\">{message}</failure>\n",
                    escape(step.rule().unwrap_or("denied"))
                )),
                Disposition::Error => out.push_str(&format!(
                    "      <error type=\"unusable\" message=\"{message}\">{message}</error>\n"
                )),
                Disposition::Rejected => out.push_str(&format!(
                    "      <failure type=\"rejected\" message=\"{message}\">{message}</failure>\n"
                )),
                Disposition::NotJudged | Disposition::Absent | Disposition::Unchanged => {
                    out.push_str(&format!("      <skipped message=\"{message}\"/>\n"))
                }
                Disposition::Blocked => {
                    let note = escape(step.note.as_deref().unwrap_or_default());
                    out.push_str(&format!("      <skipped message=\"{note}\"/>\n"))
                }
                Disposition::Allowed | Disposition::Warn => {}
            }
            if !step.warnings.is_empty() {
                let warnings: Vec<String> = step.warnings.iter().map(|w| escape(w)).collect();
                out.push_str(&format!(
                    "      <system-out>{}</system-out>\n",
                    warnings
                        .iter()
                        .map(|w| format!("warning: {w}"))
                        .collect::<Vec<_>>()
                        .join("\n")
                ));
            }
            out.push_str("    </testcase>\n");
        }
        out.push_str("  </testsuite>\n</testsuites>\n");
        out
    }
}
