//! What one write sets off, in the order the platform sends it: the client's request, then for
//! an Application what cozystack-api writes (the app's release, a request of its own that the
//! API server sends to admission like any other), the storage's 409 (the client sees
//! cozystack-api's 500, as for a refused release write: docs/rules.md), helm-controller's
//! finalizer and its render of a Tenant's chart, or a deleted release's uninstall. Each request
//! goes to the caller's [`Admit`], which judges it through the module (or admits it as is);
//! `check` and `simulate` choose the writes and read the [`Outcome`], and neither sequences one.

use cozystack_policy_runtime::cluster::{ClusterObjects, ObjectKey, index_key};
use cozystack_policy_runtime::policy::warnings_of;
use serde_json::{Value, json};

use crate::error::Error;
use crate::platform::apiserver::{Admission, HELM_RELEASES, Identity, NAMESPACES, Resource};
use crate::platform::application::{Api, AppWrite};
use crate::platform::writes::{self, Kinds, RELEASE_API, TenantChart};
use crate::state::State;

/// cozystack-api, which writes an Application's release (`pkg/registry/apps/application`).
pub const COZYSTACK_API: &str = "system:serviceaccount:cozy-system:cozystack-api";
/// Every Flux controller, helm-controller rendering a Tenant's chart among them.
pub const FLUX: &str = "system:serviceaccount:cozy-fluxcd:flux";
/// helm-controller's finalizer on every release it has reconciled.
pub const FINALIZER: &str = "finalizers.fluxcd.io";
/// The deletion time a deleted release shows while helm-controller uninstalls it.
pub const DELETION_TIMESTAMP: &str = "2026-01-01T00:00:00Z";

/// Who sends a request of a write's sequence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sender {
    /// The write's own client (a user's kubectl, Flux's kustomize-controller applying a change
    /// set), with the field manager it writes as.
    Client {
        identity: Identity,
        manager: &'static str,
    },
    /// cozystack-api writing an Application's release as its own account.
    CozystackApi,
    /// helm-controller: its finalizer, its render of a Tenant's chart.
    HelmController,
    /// A deleted Tenant's pre-delete cleanup Job for the child namespace it names
    /// (`packages/apps/tenant/templates/cleanup-job.yaml`).
    CleanupJob(String),
}

impl Sender {
    pub fn identity(&self) -> Identity {
        match self {
            Sender::Client { identity, .. } => identity.clone(),
            Sender::CozystackApi => Identity::impersonated(COZYSTACK_API, &[]),
            Sender::HelmController => Identity::impersonated(FLUX, &[]),
            Sender::CleanupJob(child) => Identity::impersonated(
                &format!("system:serviceaccount:cozy-system:{child}-cleanup"),
                &[],
            ),
        }
    }

    /// The field manager its writes carry.
    pub fn manager(&self) -> &'static str {
        match self {
            Sender::Client { manager, .. } => manager,
            Sender::CozystackApi => "cozystack-api",
            Sender::HelmController => "helm-controller",
            Sender::CleanupJob(_) => "kubectl",
        }
    }

    /// Who it is, as a report names it.
    pub fn describe(&self) -> String {
        match self {
            Sender::Client { identity, .. } => identity.describe(),
            Sender::CozystackApi => "cozystack-api".to_owned(),
            Sender::HelmController => "helm-controller".to_owned(),
            Sender::CleanupJob(child) => format!("the cleanup Job of {child}"),
        }
    }
}

/// The caller's side of a sequence: admission's response to each request, on the state as the
/// requests before it left it.
pub trait Admit {
    fn admit(
        &mut self,
        sender: &Sender,
        request: &Value,
        state: &mut State,
    ) -> Result<Value, Error>;
}

/// One request sent, by whom, and what admission answered.
#[derive(Debug, Clone)]
pub struct Sent {
    pub sender: Sender,
    pub request: Value,
    pub response: Value,
}

impl Sent {
    pub fn allowed(&self) -> bool {
        self.response["accepted"] == true
    }

    pub fn warned(&self) -> bool {
        !warnings_of(&self.response).is_empty()
    }

    /// `OPERATION Kind namespace/name`, as a report names the request.
    pub fn describe(&self) -> String {
        let request = &self.request;
        let name = request["name"].as_str().unwrap_or_default();
        let reference = match request["namespace"].as_str() {
            Some(namespace) => format!("{namespace}/{name}"),
            None => name.to_owned(),
        };
        format!(
            "{} {} {reference}",
            request["operation"].as_str().unwrap_or_default(),
            request["kind"]["kind"].as_str().unwrap_or_default(),
        )
    }
}

/// Who stopped a write short.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refuser {
    /// Admission refused one of its requests (the last one [`Outcome::sent`] holds).
    Admission,
    /// cozystack-api, after admission admitted the client's request (a Tenant quota an update
    /// no longer fits).
    CozystackApi,
    /// The API server's storage (409 to cozystack-api: another release holds the name; 500 to
    /// its client).
    ApiServer,
}

/// Why a write stopped short, and who stopped it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub by: Refuser,
    pub message: String,
}

/// What one write came to: every request sent with its answer, and where it stopped.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    pub sent: Vec<Sent>,
    pub refused: Option<Refusal>,
    /// The release cozystack-api wrote, when it created or updated one.
    pub release: Option<Value>,
}

/// When helm-controller uninstalls a deleted release it holds a finalizer on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Uninstall {
    /// Within the write (the simulator's step), its cleanup Job's deletes judged.
    Now,
    /// Later: the release stays terminating (Flux applies the rest of its change set first).
    Later,
}

/// A client's Application request, as cozystack-api's account ([`Api::write`]) shapes it.
#[derive(Debug, Clone, Copy)]
pub struct AppRequest<'a> {
    pub operation: &'static str,
    /// The Application the request applies (`None` for a DELETE).
    pub object: Option<&'a Value>,
    /// The live Application, as cozystack-api reads its release back.
    pub old: Option<&'a Value>,
    pub dry_run: bool,
}

/// The stock writers around the policy, as the release the settings name runs them.
pub struct Platform {
    pub api: Api,
    pub chart: TenantChart,
    pub kinds: Kinds,
    /// Requests and objects numbered as the API server gives uids, so that a seed replays.
    requests: usize,
    objects: usize,
}

impl Platform {
    pub fn of(settings: &cozystack_resolver::Settings, cluster: &ClusterObjects) -> Platform {
        Platform::new(
            Api::of(settings),
            TenantChart::of(settings),
            Kinds::read(cluster),
        )
    }

    pub fn new(api: Api, chart: TenantChart, kinds: Kinds) -> Platform {
        Platform {
            api,
            chart,
            kinds,
            requests: 0,
            objects: 0,
        }
    }

    /// The same writers, numbering anew: to play again a write already played.
    pub fn fresh(&self) -> Platform {
        Platform::new(self.api, self.chart.clone(), self.kinds.clone())
    }

    /// A uid as the API server gives one.
    pub fn next_uid(&mut self) -> String {
        self.objects += 1;
        format!("00000000-0000-4000-8000-{:012}", self.objects)
    }

    /// The AdmissionRequest `sender` makes for `write`.
    pub fn request(&mut self, write: &Admission<'_>, sender: &Sender, dry_run: bool) -> Value {
        self.requests += 1;
        write.request(&sender.identity(), sender.manager(), self.requests, dry_run)
    }

    /// Sends `write` as `sender` through `admit`, keeping it in `outcome`; whether it was
    /// admitted (a refusal is kept as the outcome's).
    pub fn send(
        &mut self,
        write: &Admission<'_>,
        sender: Sender,
        dry_run: bool,
        state: &mut State,
        admit: &mut dyn Admit,
        outcome: &mut Outcome,
    ) -> Result<bool, Error> {
        let request = self.request(write, &sender, dry_run);
        let response = admit.admit(&sender, &request, state)?;
        let sent = Sent {
            sender,
            request,
            response,
        };
        let allowed = sent.allowed();
        if !allowed {
            outcome.refused = Some(Refusal {
                by: Refuser::Admission,
                message: sent.response["message"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            });
        }
        outcome.sent.push(sent);
        Ok(allowed)
    }

    /// A client's Application write through cozystack-api: its request, then, admitted, what
    /// cozystack-api and helm-controller write after it ([`Platform::after_application`]).
    pub fn application(
        &mut self,
        state: &mut State,
        client: Sender,
        account: &AppWrite,
        write: AppRequest<'_>,
        admit: &mut dyn Admit,
        uninstall: Uninstall,
    ) -> Result<Outcome, Error> {
        let mut outcome = Outcome::default();
        let request = Admission {
            operation: write.operation,
            resource: account.resource(),
            namespace: Some(&account.namespace),
            name: &account.name,
            object: write.object,
            old: write.old,
        };
        if self.send(&request, client, write.dry_run, state, admit, &mut outcome)?
            && (!write.dry_run || self.api.dry_run_lands)
        {
            self.after_application(state, account, write.object, admit, uninstall, &mut outcome)?;
        }
        Ok(outcome)
    }

    /// What follows an admitted write of an Application (`app`, `None` for a DELETE): the
    /// release cozystack-api writes for it, judged as its own request; the quota an update
    /// leaves (`REST.Update`) and the 409 of a name another release holds, after that admission;
    /// helm-controller's finalizer on a new release and its reconcile; a deleted release's
    /// uninstall.
    pub fn after_application(
        &mut self,
        state: &mut State,
        account: &AppWrite,
        app: Option<&Value>,
        admit: &mut dyn Admit,
        uninstall: Uninstall,
        outcome: &mut Outcome,
    ) -> Result<(), Error> {
        let old = account.release.as_ref();
        let update = app.filter(|_| old.is_some());
        if let Some(refusal) = update.and_then(|app| account.update_refusal(state, app)) {
            outcome.refused = Some(Refusal {
                by: Refuser::CozystackApi,
                message: refusal,
            });
            return Ok(());
        }
        let new = app.map(|app| account.served.release_for(app, old));
        let operation = match (&new, old) {
            (Some(_), None) => "CREATE",
            (Some(_), Some(_)) => "UPDATE",
            (None, _) => "DELETE",
        };
        let write = Admission {
            operation,
            resource: HELM_RELEASES,
            namespace: Some(&account.namespace),
            name: &account.release_name,
            object: new.as_ref(),
            old,
        };
        if !self.send(&write, Sender::CozystackApi, false, state, admit, outcome)? {
            return Ok(());
        }
        // Admission ran first; then the API server's storage answers cozystack-api 409, which it
        // returns to its client as 500 (`failed to create HelmRelease: … already exists`).
        if let Some(taken) = &account.taken {
            outcome.refused = Some(Refusal {
                by: Refuser::ApiServer,
                message: taken.clone(),
            });
            return Ok(());
        }
        outcome.release = new.clone();
        let Some(mut stored) = new else {
            if let Some(old) = old {
                self.deleted(state, old, admit, uninstall, outcome)?;
            }
            return Ok(());
        };
        if old.is_none() {
            stored["metadata"]["uid"] = json!(self.next_uid());
        }
        // An update keeps a release's deletionTimestamp: it stays being uninstalled, and
        // helm-controller does not upgrade it. (cozystack-api's whole-object `Update` may drop
        // the finalizer that holds it, which would end the deletion at once and leave what it
        // runs behind; the model keeps it terminating, as the chart would find it.)
        if let Some(old) = old.filter(|o| terminating(o)) {
            let meta = &old["metadata"];
            stored["metadata"]["deletionTimestamp"] = meta["deletionTimestamp"].clone();
            stored["metadata"]["finalizers"] = meta["finalizers"].clone();
            state.put(stored);
            return Ok(());
        }
        self.stored(state, stored, admit, outcome)
    }

    /// A HelmRelease the API server stored, as helm-controller meets it: one that carries no
    /// finalizer (a new one; one cozystack-api's `Update` replaced whole) gets it first, in
    /// its own metadata update as Flux (fluxcd/helm-controller v1.5.0), then it is reconciled.
    pub fn stored(
        &mut self,
        state: &mut State,
        release: Value,
        admit: &mut dyn Admit,
        outcome: &mut Outcome,
    ) -> Result<(), Error> {
        state.put(release.clone());
        let finalized = release
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| f.iter().any(|f| f == FINALIZER));
        if finalized || terminating(&release) {
            return self.reconcile(state, release, admit, outcome);
        }
        let mut with = release.clone();
        let finalizers = with["metadata"]["finalizers"].as_array().cloned();
        let mut finalizers = finalizers.unwrap_or_default();
        finalizers.push(json!(FINALIZER));
        with["metadata"]["finalizers"] = json!(finalizers);
        let write = Admission {
            operation: "UPDATE",
            resource: HELM_RELEASES,
            namespace: release["metadata"]["namespace"].as_str(),
            name: release["metadata"]["name"].as_str().unwrap_or_default(),
            object: Some(&with),
            old: Some(&release),
        };
        if self.send(&write, Sender::HelmController, false, state, admit, outcome)? {
            self.reconcile(state, with, admit, outcome)?;
        }
        Ok(())
    }

    /// helm-controller reconciles `release`, which is put: a Tenant's renders its chart (and
    /// its sub-tenants theirs), each object it changes written as helm-controller, judged, up
    /// to the first refusal.
    pub fn reconcile(
        &mut self,
        state: &mut State,
        release: Value,
        admit: &mut dyn Admit,
        outcome: &mut Outcome,
    ) -> Result<(), Error> {
        // Only a Tenant's render is diffed against the cluster before it, and on a copy: the
        // state the writes land in keeps its host caches (a fresh state per render made every
        // later evaluation list the cluster again: `check` of 1,000 Tenants took 80 s).
        if !writes::is_tenant_release(&release) {
            state.put(release);
            return Ok(());
        }
        let before = state.cluster().clone();
        let mut render = State::new(before.clone());
        render.put(release.clone());
        writes::render_tenant(&mut render, &release, &self.chart);
        let after = render.cluster().clone();
        state.put(release.clone());
        for Rendered { old, new } in rendered(&before, &after, &release) {
            let object = new.as_ref().or(old.as_ref()).cloned().unwrap_or_default();
            let Some(resource) = resource_of(&object) else {
                continue;
            };
            let namespace = object["metadata"]["namespace"].as_str();
            let name = object["metadata"]["name"].as_str().unwrap_or_default();
            let write = Admission {
                operation: match (&old, &new) {
                    (None, _) => "CREATE",
                    (Some(_), Some(_)) => "UPDATE",
                    (Some(_), None) => "DELETE",
                },
                resource,
                namespace,
                name,
                object: new.as_ref(),
                old: old.as_ref(),
            };
            if !self.send(&write, Sender::HelmController, false, state, admit, outcome)? {
                return Ok(());
            }
            match (new, old) {
                (Some(new), _) => state.put(new),
                (None, Some(old)) => state.remove(&old),
                (None, None) => {}
            }
        }
        Ok(())
    }

    /// A release the API server deleted: helm-controller's finalizer keeps it, terminating,
    /// until it has uninstalled it (fluxcd/helm-controller v1.5.0, `reconcileDelete`); one no
    /// controller has handled (no finalizer) goes at once. [`Uninstall::Now`] plays the
    /// uninstall: a Tenant's runs its cleanup Job first ([`Platform::teardown`]).
    pub fn deleted(
        &mut self,
        state: &mut State,
        release: &Value,
        admit: &mut dyn Admit,
        uninstall: Uninstall,
        outcome: &mut Outcome,
    ) -> Result<(), Error> {
        let finalized = release
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| !f.is_empty());
        // A DELETE of what is being uninstalled already changes nothing: helm-controller's
        // uninstall, under way, removes it in its own time.
        if finalized && terminating(release) {
            return Ok(());
        }
        match (finalized, uninstall) {
            (false, _) => writes::remove_release(state, release),
            (true, Uninstall::Later) => mark_terminating(state, release),
            (true, Uninstall::Now) if writes::is_tenant_release(release) => {
                self.teardown(state, release, admit, outcome)?;
            }
            (true, Uninstall::Now) => state.remove(release),
        }
        Ok(())
    }

    /// A deleted Tenant's uninstall (`packages/apps/tenant/templates/cleanup-job.yaml`): its
    /// release stays, terminating, while the pre-delete Job deletes the child namespace's app
    /// releases (nested Tenants, each uninstalled the same way), then its module releases; then
    /// Helm deletes the child Namespace and the garbage collector the namespaces below it.
    /// Stops at the first refusal, the release left terminating.
    pub fn teardown(
        &mut self,
        state: &mut State,
        release: &Value,
        admit: &mut dyn Admit,
        outcome: &mut Outcome,
    ) -> Result<(), Error> {
        mark_terminating(state, release);
        let Some(child) = writes::tenant_namespace_of(release) else {
            return Ok(());
        };
        for modules in [false, true] {
            let wave: Vec<Value> = state
                .in_namespace(&child)
                .into_iter()
                .filter(|o| o["apiVersion"] == RELEASE_API && o["kind"] == "HelmRelease")
                .filter(|o| {
                    o["metadata"]["labels"]
                        .get("apps.cozystack.io/application.kind")
                        .is_some()
                })
                .filter(|o| {
                    (o["metadata"]["labels"]["internal.cozystack.io/tenantmodule"] == "true")
                        == modules
                })
                // The root Tenant's release lives in the namespace it renders: not itself again.
                .filter(|o| o["metadata"]["name"] != release["metadata"]["name"])
                .collect();
            for hr in wave {
                let write = Admission {
                    operation: "DELETE",
                    resource: HELM_RELEASES,
                    namespace: Some(&child),
                    name: hr["metadata"]["name"].as_str().unwrap_or_default(),
                    object: None,
                    old: Some(&hr),
                };
                let job = Sender::CleanupJob(child.clone());
                if !self.send(&write, job, false, state, admit, outcome)? {
                    return Ok(());
                }
                if writes::is_tenant_release(&hr) {
                    self.teardown(state, &hr, admit, outcome)?;
                    if outcome.refused.is_some() {
                        return Ok(());
                    }
                } else {
                    state.remove(&hr);
                }
            }
        }
        writes::remove_release(state, release);
        Ok(())
    }
}

pub use super::writes::terminating;

/// Puts `release` as the API server keeps it once deleted while a finalizer holds it.
fn mark_terminating(state: &mut State, release: &Value) {
    let mut terminating = release.clone();
    terminating["metadata"]["deletionTimestamp"] = json!(DELETION_TIMESTAMP);
    state.put(terminating);
}

/// The resource of a write helm-controller makes, for the kinds the policy matches.
fn resource_of(object: &Value) -> Option<Resource<'static>> {
    match (object["apiVersion"].as_str(), object["kind"].as_str()) {
        (Some("v1"), Some("Namespace")) => Some(NAMESPACES),
        (Some(RELEASE_API), Some("HelmRelease")) => Some(HELM_RELEASES),
        _ => None,
    }
}

/// One object a render changed: what it was and what it becomes (`None`: absent).
struct Rendered {
    old: Option<Value>,
    new: Option<Value>,
}

/// What a render changed, as helm-controller writes it: Namespaces, then releases created or
/// updated, then releases removed; `release` itself left out.
fn rendered(before: &ClusterObjects, after: &ClusterObjects, release: &Value) -> Vec<Rendered> {
    let skip = index_key(release);
    let old: std::collections::HashMap<_, Value> =
        before.values().map(|o| (index_key(&o), o)).collect();
    let new: std::collections::HashMap<_, Value> =
        after.values().map(|o| (index_key(&o), o)).collect();
    // Sorted by rank (Namespaces first, removals last), then by object.
    let mut changes: Vec<(u8, ObjectKey, Rendered)> = Vec::new();
    for (key, object) in &new {
        if *key != skip && old.get(key) != Some(object) {
            let rank = if key.1 == "Namespace" { 0 } else { 1 };
            let change = Rendered {
                old: old.get(key).cloned(),
                new: Some(object.clone()),
            };
            changes.push((rank, key.clone(), change));
        }
    }
    for (key, object) in &old {
        if *key != skip && !new.contains_key(key) {
            let change = Rendered {
                old: Some(object.clone()),
                new: None,
            };
            changes.push((2, key.clone(), change));
        }
    }
    changes.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
    changes.into_iter().map(|(.., change)| change).collect()
}
