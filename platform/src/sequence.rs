//! What one write sets off, in the order the platform sends it: the client's request, then for
//! an Application what cozystack-api writes (the app's release, a request of its own that the
//! API server sends to admission like any other), the storage's 409 (the client sees
//! cozystack-api's 500, as for a refused release write: docs/rules.md), helm-controller's
//! finalizer and its render of a Tenant's chart, or a deleted release's uninstall. Each request
//! goes to the caller's [`Admit`], which judges it through the module (or admits it as is);
//! `check` and `simulate` choose the writes, hand each to [`Platform::play`] and read the
//! [`Outcome`]; neither sequences one.

use cozystack_policy_runtime::cluster::{ClusterObjects, ObjectKey, index_key};
use cozystack_policy_runtime::policy::warnings_of;
use serde_json::{Value, json};

use crate::apiserver::{Admission, HELM_RELEASES, Identity, NAMESPACES, Resource};
use crate::application::{Api, AppWrite};
use crate::error::Error;
use crate::helm_controller::{DELETION_TIMESTAMP, FINALIZER, FLUX, Held, terminating};
use crate::state::{Draft, Objects, State};
use crate::writes::{self, Kinds, RELEASE_API, TenantChart};

/// cozystack-api, which writes an Application's release (`pkg/registry/apps/application`).
pub const COZYSTACK_API: &str = "system:serviceaccount:cozy-system:cozystack-api";

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

/// A write, as its client hands it to the platform ([`Platform::play`]).
pub enum Write<'a> {
    /// An Application request through cozystack-api, and what it sets off.
    Application {
        account: &'a AppWrite,
        request: AppRequest<'a>,
        uninstall: Uninstall,
    },
    /// A request of a HelmRelease or a Namespace, sent straight to the API server: admitted
    /// (and not a dry run), a release is stored (helm-controller's finalizer, its reconcile)
    /// or deleted, a Namespace put or removed.
    Object {
        admission: Admission<'a>,
        dry_run: bool,
        uninstall: Uninstall,
    },
    /// A request alone, what it does the caller's to apply ([`Write::Admitted`]): Flux's dry
    /// run of a whole change set comes before any of its applies.
    Request {
        admission: Admission<'a>,
        dry_run: bool,
    },
    /// What follows a request admitted earlier ([`Write::Request`]).
    Admitted {
        then: Then<'a>,
        uninstall: Uninstall,
    },
    /// helm-controller reconciles a release on its interval.
    Reconcile(Value),
    /// helm-controller's uninstall of a deleted release it holds comes to its end.
    Uninstalled(Value),
}

/// What follows an admitted request of [`Write::Admitted`].
pub enum Then<'a> {
    /// A HelmRelease the API server stored.
    Stored(Value),
    /// cozystack-api's writes after an Application request (its new object, `None` for a
    /// DELETE).
    Application(&'a AppWrite, Option<&'a Value>),
    /// A release the API server deleted.
    Deleted(&'a Value),
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

    /// Plays `write`, sent by `client`, from its request to rest: each request it sets off
    /// judged through `admit` on the state the ones before it left, up to the first refusal.
    /// (helm-controller's own writes, [`Write::Reconcile`] and [`Write::Uninstalled`], are
    /// sent as itself whoever the client.)
    pub fn play(
        &mut self,
        state: &mut State,
        admit: &mut dyn Admit,
        client: Sender,
        write: Write<'_>,
    ) -> Result<Outcome, Error> {
        let mut outcome = Outcome::default();
        match write {
            Write::Application {
                account,
                request,
                uninstall,
            } => {
                // The client's request, then, admitted, what cozystack-api and helm-controller
                // write after it.
                let write = Admission {
                    operation: request.operation,
                    resource: account.resource(),
                    namespace: Some(&account.namespace),
                    name: &account.name,
                    object: request.object,
                    old: request.old,
                };
                if self.send(&write, client, request.dry_run, state, admit, &mut outcome)?
                    && (!request.dry_run || self.api.dry_run_lands)
                {
                    let app = request.object;
                    self.after_application(state, account, app, admit, uninstall, &mut outcome)?;
                }
            }
            Write::Object {
                admission,
                dry_run,
                uninstall,
            } => {
                if self.send(&admission, client, dry_run, state, admit, &mut outcome)? && !dry_run {
                    self.object(state, &admission, admit, uninstall, &mut outcome)?;
                }
            }
            Write::Request { admission, dry_run } => {
                self.send(&admission, client, dry_run, state, admit, &mut outcome)?;
            }
            Write::Admitted { then, uninstall } => match then {
                Then::Stored(release) => self.stored(state, release, admit, &mut outcome)?,
                Then::Application(account, app) => {
                    self.after_application(state, account, app, admit, uninstall, &mut outcome)?
                }
                Then::Deleted(release) => {
                    self.deleted(state, release, admit, uninstall, &mut outcome)?
                }
            },
            Write::Reconcile(release) => self.reconcile(state, release, admit, &mut outcome)?,
            Write::Uninstalled(release) if writes::is_tenant_release(&release) => {
                self.teardown(state, &release, admit, &mut outcome)?
            }
            Write::Uninstalled(release) => state.remove(&release),
        }
        Ok(outcome)
    }

    /// What an admitted request of an object does: a release stored or deleted as
    /// helm-controller meets it, a Namespace put or removed.
    fn object(
        &mut self,
        state: &mut State,
        admission: &Admission<'_>,
        admit: &mut dyn Admit,
        uninstall: Uninstall,
        outcome: &mut Outcome,
    ) -> Result<(), Error> {
        let release = admission.resource == HELM_RELEASES;
        match (admission.object, admission.old) {
            (Some(new), _) if release => self.stored(state, new.clone(), admit, outcome),
            (None, Some(old)) if release => self.deleted(state, old, admit, uninstall, outcome),
            (Some(new), _) => {
                state.put(new.clone());
                Ok(())
            }
            (None, Some(_)) => {
                writes::remove_namespace(state, admission.name);
                Ok(())
            }
            (None, None) => Ok(()),
        }
    }

    /// The AdmissionRequest `sender` makes for `write`.
    fn request(&mut self, write: &Admission<'_>, sender: &Sender, dry_run: bool) -> Value {
        self.requests += 1;
        write.request(&sender.identity(), sender.manager(), self.requests, dry_run)
    }

    /// Sends `write` as `sender` through `admit`, keeping it in `outcome`; whether it was
    /// admitted (a refusal is kept as the outcome's).
    fn send(
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

    /// What follows an admitted write of an Application (`app`, `None` for a DELETE): the
    /// release cozystack-api writes for it, judged as its own request; the quota an update
    /// leaves (`REST.Update`) and the 409 of a name another release holds, after that admission;
    /// helm-controller's finalizer on a new release and its reconcile; a deleted release's
    /// uninstall.
    fn after_application(
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
    /// A release created has the uid the API server gives it.
    fn stored(
        &mut self,
        state: &mut State,
        mut release: Value,
        admit: &mut dyn Admit,
        outcome: &mut Outcome,
    ) -> Result<(), Error> {
        if release["metadata"]["uid"].is_null() {
            release["metadata"]["uid"] = json!(self.next_uid());
        }
        state.put(release.clone());
        if Held::of(&release) == Held::ByFlux || terminating(&release) {
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
    fn reconcile(
        &mut self,
        state: &mut State,
        release: Value,
        admit: &mut dyn Admit,
        outcome: &mut Outcome,
    ) -> Result<(), Error> {
        // Only a Tenant renders. It is drafted over the state, which it leaves as it is (the
        // host caches stay warm), and only what it wrote is compared: a copy of the whole
        // cluster per render, diffed object by object, made `check` of 1,000 Tenants take 62 s.
        if !writes::is_tenant_release(&release) {
            state.put(release);
            return Ok(());
        }
        let mut render = Draft::over(state);
        render.put(release.clone());
        writes::render_tenant(&mut render, &release, &self.chart);
        let changes = rendered(render, &release);
        state.put(release.clone());
        for Rendered { old, new } in changes {
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
    fn deleted(
        &mut self,
        state: &mut State,
        release: &Value,
        admit: &mut dyn Admit,
        uninstall: Uninstall,
        outcome: &mut Outcome,
    ) -> Result<(), Error> {
        let finalized = Held::of(release) != Held::Free;
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
    fn teardown(
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
fn rendered(render: Draft<'_>, release: &Value) -> Vec<Rendered> {
    let skip = index_key(release);
    // Sorted by rank (Namespaces first, removals last), then by object.
    let mut changes: Vec<(u8, ObjectKey, Rendered)> = (render.changes().into_iter())
        .filter(|(key, ..)| *key != skip)
        .map(|(key, old, new)| {
            let rank = match (&new, key.1 == "Namespace") {
                (None, _) => 2,
                (Some(_), true) => 0,
                (Some(_), false) => 1,
            };
            (rank, key, Rendered { old, new })
        })
        .collect();
    changes.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
    changes.into_iter().map(|(.., change)| change).collect()
}
