//! The world the simulator plays: the cluster as the platform writes it
//! ([`crate::platform::writes`], the model `check` applies), the actors who act on it with their
//! identities, and each action turned into the admission requests the API server would send,
//! one after the other, each judged by the module on the state the writes before it left.

use super::statement::Role;
use crate::platform::application::Api;
use crate::platform::writes::TenantChart;
use cozystack_policy_runtime::cluster::{ClusterObjects, ObjectKey, index_key};
use cozystack_policy_runtime::policy::{Policy, warnings_of};
use serde_json::{Value, json};

use crate::error::Error;
use crate::ops::check::evaluate;
use crate::platform::apiserver::{Admission, HELM_RELEASES, Identity, NAMESPACES, Resource};
use crate::platform::writes::{self, Kinds, RELEASE_API};
use crate::state::State;

/// cozystack-api, which writes an Application's release (`pkg/registry/apps/application`).
pub const COZYSTACK_API: &str = "system:serviceaccount:cozy-system:cozystack-api";
/// Every Flux controller, helm-controller rendering a Tenant's chart among them.
pub const FLUX: &str = "system:serviceaccount:cozy-fluxcd:flux";
/// helm-controller's finalizer on every release it has reconciled.
const FINALIZER: &str = "finalizers.fluxcd.io";

/// Who acts: a holder of one of a tenant's roles, or its ServiceAccount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Actor {
    pub role: Role,
    /// The tenant namespace whose role it holds (bound there and in every descendant).
    pub of: String,
}

impl Actor {
    pub fn new(role: Role, of: &str) -> Actor {
        Actor {
            role,
            of: of.to_owned(),
        }
    }

    /// The identity the API server authenticates: an OIDC user in `<ns>-<role>`, or the
    /// tenant's ServiceAccount.
    pub fn identity(&self) -> Identity {
        let ns = &self.of;
        let level = match self.role {
            Role::View => "view",
            Role::Use => "use",
            Role::Admin => "admin",
            Role::SuperAdmin => "super-admin",
            Role::Account => {
                return Identity::impersonated(&format!("system:serviceaccount:{ns}:{ns}"), &[]);
            }
        };
        Identity::impersonated(&format!("{level}@{ns}"), &[format!("{ns}-{level}")])
    }
}

impl std::fmt::Display for Actor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}({})", self.role, self.of)
    }
}

/// One thing an actor does through cozystack-api.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Creates an Application (`spec` as given: a Tenant's switches).
    Create {
        by: Actor,
        kind: String,
        namespace: String,
        name: String,
        spec: Value,
    },
    /// Deletes an Application.
    Delete {
        by: Actor,
        kind: String,
        namespace: String,
        name: String,
    },
    /// Changes one value of an app's spec (an UPDATE through cozystack-api).
    Edit {
        by: Actor,
        kind: String,
        namespace: String,
        name: String,
        key: String,
        value: Value,
    },
    /// Writes an app's HelmRelease directly, past cozystack-api: creates it as cozystack-api
    /// would, or deletes the one there.
    Release {
        by: Actor,
        kind: String,
        namespace: String,
        name: String,
        delete: bool,
    },
    /// Two creates sent at once (a double click, two administrators): both are judged on the
    /// same state, and the API server's storage is the only lock (409 on a name taken).
    Race {
        first: Box<Action>,
        second: Box<Action>,
    },
    /// Turns one switch of a Tenant on or off.
    Switch {
        by: Actor,
        namespace: String,
        name: String,
        key: String,
        on: bool,
    },
    /// An app release from before the policy was deployed, as cozystack-api wrote it then
    /// (an instance off its slot, a second one): put, not judged.
    Leftover {
        kind: String,
        namespace: String,
        name: String,
    },
    /// helm-controller reconciles a Tenant's release on its interval, as Flux: its chart is
    /// rendered again, adopting what holds the names it renders.
    Reconcile { namespace: String, name: String },
    /// Sets (or, with no value, removes) one label of a Namespace, as `kubectl label` does.
    Label {
        by: Actor,
        namespace: String,
        key: String,
        value: Option<String>,
    },
    /// A GitOps Kustomization applies Applications and prunes others, as Flux's
    /// kustomize-controller does (the model `check` applies: stages dry-run whole, the prune
    /// after), as the Flux ServiceAccount.
    Flux {
        applies: Vec<Value>,
        prunes: Vec<Value>,
    },
}

impl Action {
    /// What it is, for the summary.
    pub fn label(&self) -> String {
        match self {
            Action::Create { kind, .. } => format!("create {kind}"),
            Action::Delete { kind, .. } => format!("delete {kind}"),
            Action::Edit { kind, .. } => format!("edit {kind}"),
            Action::Release { delete, .. } => {
                format!(
                    "{} app HelmRelease",
                    if *delete { "delete" } else { "create" }
                )
            }
            Action::Race { first, .. } => format!("race {}", first.label()),
            Action::Switch { on, key, .. } => {
                format!("switch {key} {}", if *on { "on" } else { "off" })
            }
            Action::Leftover { kind, .. } => format!("leftover {kind}"),
            Action::Reconcile { .. } => "reconcile Tenant".to_owned(),
            Action::Flux { .. } => "Flux change set".to_owned(),
            Action::Label { .. } => "label Namespace".to_owned(),
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Action::Create {
                by,
                kind,
                namespace,
                name,
                spec,
            } => {
                format!("{by} creates {kind} {namespace}/{name} with spec {spec}")
            }
            Action::Delete {
                by,
                kind,
                namespace,
                name,
            } => {
                format!("{by} deletes {kind} {namespace}/{name}")
            }
            Action::Edit {
                by,
                kind,
                namespace,
                name,
                key,
                value,
            } => format!("{by} sets {key}={value} on {kind} {namespace}/{name}"),
            Action::Release {
                by,
                kind,
                namespace,
                name,
                delete,
            } => format!(
                "{by} {} the HelmRelease of {kind} {namespace}/{name} directly",
                if *delete { "deletes" } else { "creates" }
            ),
            Action::Race { first, second } => {
                format!("at once: {} and {}", first.describe(), second.describe())
            }
            Action::Switch {
                by,
                namespace,
                name,
                key,
                on,
            } => {
                format!(
                    "{by} turns {key} {} on Tenant {namespace}/{name}",
                    if *on { "on" } else { "off" }
                )
            }
            Action::Leftover {
                kind,
                namespace,
                name,
            } => {
                format!("{kind} {namespace}/{name} is left from before the policy")
            }
            Action::Reconcile { namespace, name } => {
                format!("helm-controller reconciles Tenant {namespace}/{name}")
            }
            Action::Label {
                by,
                namespace,
                key,
                value,
            } => match value {
                Some(value) => format!("{by} labels Namespace {namespace} {key}={value}"),
                None => format!("{by} removes label {key} from Namespace {namespace}"),
            },
            Action::Flux { applies, prunes } => {
                let name = |o: &Value| {
                    format!(
                        "{} {}/{}",
                        o["kind"].as_str().unwrap_or_default(),
                        o["metadata"]["namespace"].as_str().unwrap_or_default(),
                        o["metadata"]["name"].as_str().unwrap_or_default()
                    )
                };
                format!(
                    "Flux applies [{}] and prunes [{}]",
                    applies.iter().map(name).collect::<Vec<_>>().join(", "),
                    prunes.iter().map(name).collect::<Vec<_>>().join(", ")
                )
            }
        }
    }
}

/// What a user asks for, as the rules' statement reads it.
#[derive(Debug, Clone, Copy)]
pub enum Op<'a> {
    /// A create, with the spec (a Tenant's switches).
    Create(&'a Value),
    Delete,
    /// A change of the spec.
    Edit,
    /// A Tenant's switch turned on or off.
    Switch {
        key: &'a str,
        on: bool,
    },
    /// A Namespace's label set to a value, or removed.
    Label {
        key: &'a str,
        value: Option<&'a str>,
    },
}

/// One user request of an action: who, what, on which app.
#[derive(Debug, Clone, Copy)]
pub struct Ask<'a> {
    pub by: &'a Actor,
    pub op: Op<'a>,
    pub kind: &'a str,
    pub namespace: &'a str,
    pub name: &'a str,
    /// Sent as the app's HelmRelease, past cozystack-api.
    pub direct: bool,
}

impl<'a> Ask<'a> {
    pub fn new(
        by: &'a Actor,
        op: Op<'a>,
        kind: &'a str,
        namespace: &'a str,
        name: &'a str,
        direct: bool,
    ) -> Ask<'a> {
        Ask {
            by,
            op,
            kind,
            namespace,
            name,
            direct,
        }
    }

    pub fn describe(&self) -> String {
        let what = match self.op {
            Op::Create(_) => "creates".to_owned(),
            Op::Delete => "deletes".to_owned(),
            Op::Edit => "changes".to_owned(),
            Op::Switch { key, on } => format!("turns {key} {} on", if on { "on" } else { "off" }),
            Op::Label {
                key,
                value: Some(value),
            } => format!("sets label {key}={value} on"),
            Op::Label { key, value: None } => format!("removes label {key} from"),
        };
        if let Op::Label { .. } = self.op {
            return format!("{} {what} Namespace {}", self.by, self.name);
        }
        let direct = if self.direct {
            " as its HelmRelease"
        } else {
            ""
        };
        format!(
            "{} {what} {} {}/{}{direct}",
            self.by, self.kind, self.namespace, self.name
        )
    }

    /// Whether `request` is this ask's own (its user, namespace and app).
    pub fn sent(&self, request: &Value) -> bool {
        let identity = self.by.identity();
        let kind = request["kind"]["kind"].as_str();
        let user = request["userInfo"]["username"].as_str() == Some(identity.username.as_str());
        if let Op::Label { .. } = self.op {
            // A Namespace is cluster-scoped: the request names it, in no namespace.
            return user
                && kind == Some("Namespace")
                && request["name"].as_str() == Some(self.name);
        }
        user && request["namespace"].as_str() == Some(self.namespace)
            && match self.direct {
                true => kind == Some("HelmRelease"),
                false => kind == Some(self.kind) && request["name"].as_str() == Some(self.name),
            }
    }
}

impl Action {
    /// The user requests it makes, in the order it sends them.
    pub fn asks(&self) -> Vec<Ask<'_>> {
        let ask = Ask::new;
        match self {
            Action::Create {
                by,
                kind,
                namespace,
                name,
                spec,
            } => vec![ask(by, Op::Create(spec), kind, namespace, name, false)],
            Action::Delete {
                by,
                kind,
                namespace,
                name,
            } => vec![ask(by, Op::Delete, kind, namespace, name, false)],
            Action::Edit {
                by,
                kind,
                namespace,
                name,
                ..
            } => vec![ask(by, Op::Edit, kind, namespace, name, false)],
            Action::Switch {
                by,
                namespace,
                name,
                key,
                on,
            } => vec![ask(
                by,
                Op::Switch { key, on: *on },
                "Tenant",
                namespace,
                name,
                false,
            )],
            Action::Release {
                by,
                kind,
                namespace,
                name,
                delete,
            } => {
                let op = if *delete {
                    Op::Delete
                } else {
                    Op::Create(&Value::Null)
                };
                vec![ask(by, op, kind, namespace, name, true)]
            }
            Action::Race { first, second } => {
                let mut asks = first.asks();
                asks.extend(second.asks());
                asks
            }
            Action::Label {
                by,
                namespace,
                key,
                value,
            } => {
                let op = Op::Label {
                    key,
                    value: value.as_deref(),
                };
                vec![ask(by, op, "Namespace", namespace, namespace, false)]
            }
            Action::Leftover { .. } | Action::Reconcile { .. } | Action::Flux { .. } => Vec::new(),
        }
    }
}

/// Who sent a judged write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writer {
    /// The actor's own request.
    User,
    /// A stock component writing what the admitted user request makes it write.
    Platform,
}

/// One judged write: the request, who sent it, and the policy's response.
#[derive(Debug, Clone)]
pub struct Judged {
    pub writer: Writer,
    pub request: Value,
    pub response: Value,
}

impl Judged {
    pub fn allowed(&self) -> bool {
        self.response["accepted"] == true
    }

    pub fn warned(&self) -> bool {
        !warnings_of(&self.response).is_empty()
    }
}

/// What an action came to.
#[derive(Debug, Clone, Default)]
pub struct Played {
    /// Every request judged, in order.
    pub writes: Vec<Judged>,
    /// The API server refused it before admission (the action changes nothing).
    pub rejected: bool,
    /// The release cozystack-api wrote, when it created or updated one.
    pub release: Option<Value>,
    /// The cluster the action's first request was judged on. A refused write is the last one
    /// judged, on the cluster the world still holds, unless `refused_on` says otherwise.
    pub before: Option<ClusterObjects>,
    /// The cluster a refused write was judged on, when the world no longer holds it (Flux's
    /// dry run of a stage, judged before what else landed).
    pub refused_on: Option<ClusterObjects>,
}

/// The cluster, and how cozystack-api and the Tenant chart write to it.
pub struct World<'p> {
    pub policy: &'p Policy,
    pub settings: &'p Value,
    pub chart: TenantChart,
    pub api: Api,
    pub kinds: Kinds,
    pub state: State,
    uid: usize,
}

impl<'p> World<'p> {
    pub fn new(
        policy: &'p Policy,
        settings: &'p Value,
        (chart, api): (TenantChart, Api),
        cluster: ClusterObjects,
    ) -> World<'p> {
        World {
            policy,
            settings,
            chart,
            api,
            kinds: Kinds::read(&cluster),
            state: State::new(cluster),
            uid: 0,
        }
    }

    /// Judges `request` on the current state, keeps it in `played`, and says whether it was
    /// admitted.
    fn send(&mut self, writer: Writer, request: Value, played: &mut Played) -> Result<bool, Error> {
        let response = evaluate(self.policy, self.settings, &mut self.state, &request)?;
        let judged = Judged {
            writer,
            request,
            response,
        };
        let admitted = judged.allowed();
        played.writes.push(judged);
        Ok(admitted)
    }

    /// The request `identity` sends for `write`, with the field manager its client writes as.
    fn request(&mut self, write: Admission<'_>, identity: &Identity, manager: &str) -> Value {
        self.uid += 1;
        write.request(identity, manager, self.uid, false)
    }

    /// A user's own request, as kubectl sends it, judged on the state it leaves in `played` as
    /// the one it was sent on; whether it was admitted.
    fn user_write(
        &mut self,
        write: Admission<'_>,
        identity: &Identity,
        played: &mut Played,
    ) -> Result<bool, Error> {
        played.before = Some(self.state.cluster().clone());
        let request = self.request(write, identity, "kubectl");
        self.send(Writer::User, request, played)
    }

    /// The cluster once helm-controller has reconciled every Tenant (the root's render renders
    /// its sub-tenants), not judged: the state a step's guarantees are read from.
    pub fn settled(&self) -> ClusterObjects {
        let mut state = State::new(self.state.cluster().clone());
        if let Some(root) = state.get(
            RELEASE_API,
            "HelmRelease",
            "tenant-root",
            Some("tenant-root"),
        ) {
            writes::render_tenant(&mut state, &root, &self.chart);
        }
        state.cluster().clone()
    }

    /// A uid as the API server gives one, counted so that a seed plays the same run.
    fn next_uid(&mut self) -> String {
        self.uid += 1;
        format!("00000000-0000-4000-8000-{:012}", self.uid)
    }

    /// The audit scanner's replay of `object` on the current state (no userInfo).
    pub fn replay(&mut self, object: &Value) -> Result<Value, Error> {
        let request = cozystack_policy_runtime::audit::replay_request(object)?;
        evaluate(self.policy, self.settings, &mut self.state, &request)
    }

    /// Whether the audit scanner refused `object`'s live release on `cluster` already (one
    /// left from before the policy, reported as it was, not anew).
    pub fn refused_before(&self, cluster: &ClusterObjects, object: &Value) -> Result<bool, Error> {
        let meta = &object["metadata"];
        let Some(old) = cluster.get(
            RELEASE_API,
            "HelmRelease",
            meta["name"].as_str().unwrap_or_default(),
            meta["namespace"].as_str(),
        ) else {
            return Ok(false);
        };
        let request = cozystack_policy_runtime::audit::replay_request(&old)?;
        let mut state = State::new(cluster.clone());
        Ok(evaluate(self.policy, self.settings, &mut state, &request)?["accepted"] != true)
    }

    /// Plays `action`: its request, and when admitted, what cozystack-api and helm-controller
    /// write after it, each judged. Stops at the first refusal.
    pub fn play(&mut self, action: &Action) -> Result<Played, Error> {
        let mut played = Played::default();
        match action {
            Action::Flux { applies, prunes } => self.flux(applies, prunes, &mut played)?,
            Action::Race { first, second } => return self.race(first, second),
            Action::Release {
                by,
                kind,
                namespace,
                name,
                delete,
            } => self.release_write(by, kind, namespace, name, *delete, &mut played)?,
            Action::Reconcile { namespace, name } => {
                self.reconcile(namespace, name, &mut played)?
            }
            Action::Leftover {
                kind,
                namespace,
                name,
            } => self.leftover(kind, namespace, name, &mut played),
            Action::Label {
                by,
                namespace,
                key,
                value,
            } => self.label(by, namespace, (key, value.as_deref()), &mut played)?,
            Action::Create { .. }
            | Action::Delete { .. }
            | Action::Edit { .. }
            | Action::Switch { .. } => self.application(action, &mut played)?,
        }
        Ok(played)
    }

    /// helm-controller reconciles Tenant `name` of `namespace` on its interval.
    fn reconcile(&mut self, namespace: &str, name: &str, played: &mut Played) -> Result<(), Error> {
        match self.state.get(
            RELEASE_API,
            "HelmRelease",
            &format!("tenant-{name}"),
            Some(namespace),
        ) {
            Some(release) if release["metadata"].get("deletionTimestamp").is_none() => {
                self.render(release, played)
            }
            _ => {
                played.rejected = true;
                Ok(())
            }
        }
    }

    /// A user's `kubectl label` of Namespace `namespace`: an UPDATE with the label set to
    /// `value`, or removed; put when admitted. A Namespace that is not there answers 404.
    fn label(
        &mut self,
        by: &Actor,
        namespace: &str,
        (key, value): (&str, Option<&str>),
        played: &mut Played,
    ) -> Result<(), Error> {
        let Some(live) = self.state.get("v1", "Namespace", namespace, None) else {
            played.rejected = true;
            return Ok(());
        };
        let mut new = live.clone();
        let labels = &mut new["metadata"]["labels"];
        if !labels.is_object() {
            *labels = json!({});
        }
        if let Some(labels) = labels.as_object_mut() {
            match value {
                Some(value) => labels.insert(key.to_owned(), json!(value)),
                None => labels.remove(key),
            };
        }
        let write = Admission {
            operation: "UPDATE",
            resource: NAMESPACES,
            namespace: None,
            name: namespace,
            object: Some(&new),
            old: Some(&live),
        };
        if self.user_write(write, &by.identity(), played)? {
            self.state.put(new);
        }
        Ok(())
    }

    /// Whether NamespaceLifecycle lets an object into `namespace`: nothing is written into a
    /// namespace that is not there (a shrunk sequence can leave out the Tenant that made it).
    fn admits_into(&self, namespace: &str) -> bool {
        self.state.get("v1", "Namespace", namespace, None).is_some()
    }

    /// A release from before the policy, as cozystack-api wrote it then, put unjudged.
    fn leftover(&mut self, kind: &str, namespace: &str, name: &str, played: &mut Played) {
        let Some(served) = self.kinds.get(kind).filter(|_| self.admits_into(namespace)) else {
            played.rejected = true;
            return;
        };
        let release = served.release_name(name);
        if self
            .state
            .get(RELEASE_API, "HelmRelease", &release, Some(namespace))
            .is_some()
        {
            played.rejected = true;
            return;
        }
        let app = app_object(kind, namespace, name, &json!({}));
        let mut release = served.release_for(&app, None);
        release["metadata"]["uid"] = json!(self.next_uid());
        release["metadata"]["finalizers"] = json!([FINALIZER]);
        self.state.put(release);
    }

    /// An Application write through cozystack-api: the user's request, then the release
    /// cozystack-api writes, helm-controller's finalizer and render, or a Tenant's teardown.
    fn application(&mut self, action: &Action, played: &mut Played) -> Result<(), Error> {
        if let Action::Create { namespace, .. } = action
            && !self.admits_into(namespace)
        {
            played.rejected = true;
            return Ok(());
        }
        let (by, kind, namespace, name) = match action {
            Action::Create {
                by,
                kind,
                namespace,
                name,
                ..
            }
            | Action::Delete {
                by,
                kind,
                namespace,
                name,
            }
            | Action::Edit {
                by,
                kind,
                namespace,
                name,
                ..
            } => (by, kind.as_str(), namespace, name),
            Action::Switch {
                by,
                namespace,
                name,
                ..
            } => (by, "Tenant", namespace, name),
            Action::Leftover { .. }
            | Action::Reconcile { .. }
            | Action::Flux { .. }
            | Action::Race { .. }
            | Action::Label { .. }
            | Action::Release { .. } => {
                return Ok(());
            }
        };
        let Some(served) = self.kinds.get(kind) else {
            played.rejected = true;
            return Ok(());
        };
        let identity = by.identity();
        let spec = match action {
            Action::Create { spec, .. } => Some(spec),
            _ => None,
        };
        let api_version = APPS_API;
        // An edit or switch applies a spec too, but to an app that exists: no create to refuse.
        let mut account =
            match self
                .api
                .write(&served, &self.state, (namespace, name), spec, api_version)
            {
                Ok(account) => account,
                Err(_) => {
                    played.rejected = true;
                    return Ok(());
                }
            };
        let release = account.release.take();
        let resource = Resource {
            group: "apps.cozystack.io",
            version: "v1alpha1",
            kind,
            plural: served.plural.as_str(),
        };
        let (operation, app, old) = match (action, account.live.take()) {
            (Action::Create { spec, .. }, None) => (
                "CREATE",
                Some(app_object(kind, namespace, name, spec)),
                None,
            ),
            (Action::Delete { .. }, Some(live)) => ("DELETE", None, Some(live)),
            (Action::Switch { .. } | Action::Edit { .. }, Some(live)) => {
                let (key, value) = match action {
                    Action::Switch { key, on, .. } => (key, json!(on)),
                    Action::Edit { key, value, .. } => (key, value.clone()),
                    _ => return Ok(()),
                };
                let mut new = live.clone();
                new["spec"][key.as_str()] = value;
                ("UPDATE", Some(new), Some(live))
            }
            // Nothing to create over, delete or switch: the API server answers 409 or 404.
            _ => {
                played.rejected = true;
                return Ok(());
            }
        };
        let user = Admission {
            operation,
            resource,
            namespace: Some(namespace),
            name,
            object: app.as_ref(),
            old: old.as_ref(),
        };
        if !self.user_write(user, &identity, played)? {
            return Ok(());
        }
        // cozystack-api writes the release as itself.
        let api = Identity::impersonated(COZYSTACK_API, &[]);
        let release_name = &account.release_name;
        let new_release = app
            .as_ref()
            .map(|app| served.release_for(app, release.as_ref()));
        let write = Admission {
            operation,
            resource: HELM_RELEASES,
            namespace: Some(namespace),
            name: release_name,
            object: new_release.as_ref(),
            old: release.as_ref(),
        };
        let write = self.request(write, &api, "cozystack-api");
        if !self.send(Writer::Platform, write, played)? {
            return Ok(());
        }
        // A release of another kind holds the name: admission ran first, and the API server's
        // storage answers 409 (`failed to create HelmRelease: … already exists`).
        if account.taken.is_some() {
            played.rejected = true;
            return Ok(());
        }
        played.release = new_release.clone();
        let new = match (&new_release, &release) {
            // The API server gives a new release its uid; helm-controller's first reconcile
            // adds its finalizer (fluxcd/helm-controller v1.5.0, a metadata update as Flux).
            (Some(new), None) => {
                let mut stored = new.clone();
                stored["metadata"]["uid"] = json!(self.next_uid());
                self.state.put(stored.clone());
                let mut finalized = stored.clone();
                finalized["metadata"]["finalizers"] = json!([FINALIZER]);
                let flux = Identity::impersonated(FLUX, &[]);
                let write = Admission {
                    operation: "UPDATE",
                    resource: HELM_RELEASES,
                    namespace: Some(namespace),
                    name: release_name,
                    object: Some(&finalized),
                    old: Some(&stored),
                };
                let write = self.request(write, &flux, "helm-controller");
                if !self.send(Writer::Platform, write, played)? {
                    return Ok(());
                }
                finalized
            }
            (Some(new), _) => new.clone(),
            // helm-controller uninstalls it once its finalizer's work is done; a Tenant's first
            // runs the chart's pre-delete cleanup.
            (None, Some(old)) if writes::is_tenant_release(old) => {
                self.teardown(old, played)?;
                return Ok(());
            }
            (None, Some(old)) => {
                self.state.remove(old);
                return Ok(());
            }
            (None, None) => return Ok(()),
        };
        self.render(new, played)
    }

    /// Two creates at once: each is judged, with what cozystack-api writes for it, on the state
    /// both were sent on (the policy-server's lists lag); the first lands, then the second
    /// unless the API server's storage already holds its release's name (409).
    fn race(&mut self, first: &Action, second: &Action) -> Result<Played, Error> {
        let snapshot = self.state.cluster().clone();
        let mut played = self.play(first)?;
        let landed = std::mem::replace(&mut self.state, State::new(snapshot.clone()));
        let other = self.play(second)?;
        let second_state = std::mem::replace(&mut self.state, landed);
        played.writes.extend(other.writes);
        played.before = Some(snapshot);
        played.rejected &= other.rejected;
        if let Some(release) = other.release {
            let (namespace, name) = (
                release["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or_default(),
                release["metadata"]["name"].as_str().unwrap_or_default(),
            );
            let stored = second_state.get(RELEASE_API, "HelmRelease", name, Some(namespace));
            let taken = self
                .state
                .get(RELEASE_API, "HelmRelease", name, Some(namespace))
                .is_some();
            match stored {
                Some(stored) if !taken => {
                    self.state.put(stored);
                    played.release = Some(release);
                }
                _ => played.rejected = true,
            }
        }
        Ok(played)
    }

    /// A user's own write of an app HelmRelease (no tenant role grants one, but an operator's
    /// role may): created as cozystack-api would write it, or the one there deleted.
    fn release_write(
        &mut self,
        by: &Actor,
        kind: &str,
        namespace: &str,
        name: &str,
        delete: bool,
        played: &mut Played,
    ) -> Result<(), Error> {
        let Some(served) = self.kinds.get(kind) else {
            played.rejected = true;
            return Ok(());
        };
        let release_name = served.release_name(name);
        let live = self
            .state
            .get(RELEASE_API, "HelmRelease", &release_name, Some(namespace));
        let exists = self.admits_into(namespace);
        let (operation, new) = match (delete, &live) {
            (true, Some(_)) => ("DELETE", None),
            (false, None) if exists => {
                let app = app_object(kind, namespace, name, &json!({}));
                ("CREATE", Some(served.release_for(&app, None)))
            }
            _ => {
                played.rejected = true;
                return Ok(());
            }
        };
        let write = Admission {
            operation,
            resource: HELM_RELEASES,
            namespace: Some(namespace),
            name: &release_name,
            object: new.as_ref(),
            old: live.as_ref(),
        };
        if self.user_write(write, &by.identity(), played)? {
            match (new, live) {
                (Some(new), _) => self.state.put(new),
                (None, Some(old)) => self.state.remove(&old),
                (None, None) => {}
            }
        }
        Ok(())
    }

    /// helm-controller reconciles `release` (a Tenant's renders its chart, and its sub-tenants
    /// theirs): what changes is judged as it writes it, as Flux, and stops at a refusal.
    fn render(&mut self, release: Value, played: &mut Played) -> Result<(), Error> {
        let before = self.state.cluster().clone();
        self.state.put(release.clone());
        if writes::is_tenant_release(&release) {
            writes::render_tenant(&mut self.state, &release, &self.chart);
        }
        let after = self.state.cluster().clone();
        self.state = State::new(before.clone());
        self.state.put(release.clone());
        let flux = Identity::impersonated(FLUX, &[]);
        for (old, new) in rendered(&before, &after, &release) {
            let object = new.as_ref().or(old.as_ref()).cloned().unwrap_or_default();
            let operation = match (&old, &new) {
                (None, _) => "CREATE",
                (Some(_), Some(_)) => "UPDATE",
                (Some(_), None) => "DELETE",
            };
            let Some(resource) = resource_of(&object) else {
                continue;
            };
            let namespace = object["metadata"]["namespace"].as_str().map(str::to_owned);
            let name = object["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let write = Admission {
                operation,
                resource,
                namespace: namespace.as_deref(),
                name: &name,
                object: new.as_ref(),
                old: old.as_ref(),
            };
            let write = self.request(write, &flux, "helm-controller");
            if !self.send(Writer::Platform, write, played)? {
                return Ok(());
            }
            match (new, old) {
                (Some(new), _) => self.state.put(new),
                (None, Some(old)) => self.state.remove(&old),
                (None, None) => {}
            }
        }
        Ok(())
    }

    /// Flux applies a change set through `check`'s model of kustomize-controller; the cluster
    /// it leaves is the world's. A write it could not make (refused, before or at admission) is
    /// kept as refused; the world keeps what landed.
    fn flux(
        &mut self,
        applies: &[Value],
        prunes: &[Value],
        played: &mut Played,
    ) -> Result<(), Error> {
        let changes = crate::ops::check::ChangeSet {
            applies: applies.iter().map(manifest).collect(),
            deletes: prunes.iter().map(manifest).collect(),
        };
        let flux = Identity::impersonated(FLUX, &[]);
        let before = self.state.cluster().clone();
        let mut observe = |_: usize, _: &Value, _: &ClusterObjects| Ok(());
        let (report, after) = crate::ops::check::run(
            self.policy,
            self.settings,
            before.clone(),
            &changes,
            &flux,
            crate::ops::check::Applier::Flux,
            &mut observe,
        )?;
        played.before = Some(before.clone());
        played.refused_on = Some(before);
        for step in report.steps {
            use crate::ops::check::Disposition;
            let refused = matches!(
                step.outcome,
                Disposition::Denied | Disposition::Rejected | Disposition::Error
            );
            // The module's answers only: a write the API server refuses before admission (a
            // namespace gone, a name taken) is no refusal of the policy's, and holds no request.
            let response = match (step.response, refused) {
                (Some(response), _) => response,
                (None, true) => {
                    played.rejected = true;
                    continue;
                }
                (None, false) => continue,
            };
            played.writes.push(Judged {
                writer: Writer::Platform,
                request: step.request.unwrap_or(Value::Null),
                response,
            });
        }
        self.state = after;
        Ok(())
    }

    /// A deleted Tenant's uninstall (`packages/apps/tenant/templates/cleanup-job.yaml`): its
    /// release stays, terminating, while the pre-delete Job, as
    /// `cozy-system:<child-ns>-cleanup`, deletes the child namespace's app releases (nested
    /// Tenants, each uninstalled the same way), then its module releases; then Helm deletes the
    /// child Namespace and the garbage collector the namespaces below it. Returns whether every
    /// write was admitted.
    fn teardown(&mut self, release: &Value, played: &mut Played) -> Result<bool, Error> {
        let mut terminating = release.clone();
        terminating["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        self.state.put(terminating);
        let Some(child) = writes::tenant_namespace_of(release) else {
            return Ok(true);
        };
        let job = Identity::impersonated(
            &format!("system:serviceaccount:cozy-system:{child}-cleanup"),
            &[],
        );
        for modules in [false, true] {
            let wave: Vec<Value> = self
                .state
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
                let name = hr["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                let write = Admission {
                    operation: "DELETE",
                    resource: HELM_RELEASES,
                    namespace: Some(&child),
                    name: &name,
                    object: None,
                    old: Some(&hr),
                };
                let write = self.request(write, &job, "kubectl");
                if !self.send(Writer::Platform, write, played)? {
                    return Ok(false);
                }
                if writes::is_tenant_release(&hr) {
                    if !self.teardown(&hr, played)? {
                        return Ok(false);
                    }
                } else {
                    self.state.remove(&hr);
                }
            }
        }
        writes::remove_release(&mut self.state, release);
        Ok(true)
    }
}

/// An Application of `kind` as its client sends it.
pub(crate) fn app_object(kind: &str, namespace: &str, name: &str, spec: &Value) -> Value {
    json!({"apiVersion": APPS_API, "kind": kind,
        "metadata": {"name": name, "namespace": namespace}, "spec": spec})
}

/// The apps API's group and version.
const APPS_API: &str = "apps.cozystack.io/v1alpha1";

/// An object as a change set `check` applies holds it.
pub(crate) fn manifest(object: &Value) -> crate::flux::manifests::Manifest {
    crate::flux::manifests::Manifest {
        origin: "simulate".to_owned(),
        object: object.clone(),
    }
}

/// The resource of a write helm-controller makes, for the kinds the policy matches.
fn resource_of(object: &Value) -> Option<Resource<'static>> {
    match (object["apiVersion"].as_str(), object["kind"].as_str()) {
        (Some("v1"), Some("Namespace")) => Some(NAMESPACES),
        (Some(RELEASE_API), Some("HelmRelease")) => Some(HELM_RELEASES),
        _ => None,
    }
}

/// What a render changed, as helm-controller writes it: Namespaces, then releases created or
/// updated, then releases removed; `release` itself (cozystack-api's write) left out.
fn rendered(
    before: &ClusterObjects,
    after: &ClusterObjects,
    release: &Value,
) -> Vec<(Option<Value>, Option<Value>)> {
    let skip = index_key(release);
    let old: std::collections::HashMap<_, Value> =
        before.values().map(|o| (index_key(&o), o)).collect();
    let new: std::collections::HashMap<_, Value> =
        after.values().map(|o| (index_key(&o), o)).collect();
    let mut changes: Vec<(u8, ObjectKey, Option<Value>, Option<Value>)> = Vec::new();
    for (key, object) in &new {
        if *key != skip && old.get(key) != Some(object) {
            let rank = if key.1 == "Namespace" { 0 } else { 1 };
            changes.push((
                rank,
                key.clone(),
                old.get(key).cloned(),
                Some(object.clone()),
            ));
        }
    }
    for (key, object) in &old {
        if *key != skip && !new.contains_key(key) {
            changes.push((2, key.clone(), Some(object.clone()), None));
        }
    }
    changes.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
    changes
        .into_iter()
        .map(|(_, _, old, new)| (old, new))
        .collect()
}
