//! The world the simulator plays: the cluster, the platform that writes to it
//! ([`cozystack_platform::sequence`], as `check` plays it too), the actors who act on it with their
//! identities, and each action turned into the admission requests the API server would send,
//! one after the other, each judged by the module on the state the writes before it left.

use super::statement::Role;
use cozystack_platform::application::Api;
use cozystack_platform::writes::TenantChart;
use cozystack_policy_runtime::cluster::ClusterObjects;
use cozystack_policy_runtime::policy::{Policy, waived_by, warnings_of};
use serde_json::{Value, json};
use std::sync::Arc;

use cozystack_platform::admission::{Settings, on_state as evaluate};
use cozystack_platform::apiserver::{Admission, HELM_RELEASES, Identity};
use cozystack_platform::application::AppRef;
use cozystack_platform::error::Error;
use cozystack_platform::flux::apply::{self, Applier, ChangeSet, Disposition};
use cozystack_platform::helm_controller::{FINALIZER, FLUX, terminating};
use cozystack_platform::sequence::{
    Admit, AppRequest, Outcome, Platform, Refusal, Refuser, Sender, Sent, Uninstall, Write,
};
use cozystack_platform::state::State;
use cozystack_platform::writes::{self, Kinds, RELEASE_API};
use cozystack_resolver::tenant::{ANCESTOR_PREFIX, AncestorLabels, chart_labels};

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
    /// The operator upgrades Cozystack to another release: its ApplicationDefinitions and
    /// cozystack-api are the new release's at once, helm-controller renders each Tenant with the
    /// new chart from its next reconcile on (one by one, users acting meanwhile), and the
    /// deployment's settings name the new release from this step (docs/releases.md: the
    /// policy judges the release the settings name).
    Upgrade(Arc<Upgrade>),
    /// helm-controller finishes uninstalling a release being deleted (its finalizer's work,
    /// which outlives the step that deleted it): a Tenant's cleanup Job deletes its apps, then
    /// its modules, then its namespaces go; any other release is gone.
    Finish { namespace: String, name: String },
    /// A platform component writes what its release never renders, or renders only beside
    /// what it found ([`Stray`]).
    Stray(Stray),
    /// A GitOps Kustomization applies Applications and prunes others, as Flux's
    /// kustomize-controller does ([`apply::run`]: stages dry-run whole, the prune after), as the
    /// Flux ServiceAccount.
    Flux {
        applies: Vec<Value>,
        prunes: Vec<Value>,
    },
}

impl Action {
    /// Who writes which Application, for an action that writes one through cozystack-api.
    fn app_of(&self) -> Option<(&Actor, &str, &str, &str)> {
        match self {
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
            } => Some((by, kind, namespace, name)),
            Action::Switch {
                by,
                namespace,
                name,
                ..
            } => Some((by, "Tenant", namespace, name)),
            Action::Leftover { .. }
            | Action::Reconcile { .. }
            | Action::Finish { .. }
            | Action::Upgrade(_)
            | Action::Stray(_)
            | Action::Flux { .. }
            | Action::Race { .. }
            | Action::Label { .. }
            | Action::Release { .. } => None,
        }
    }

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
            Action::Upgrade(to) => format!("upgrade to {}", to.release),
            Action::Finish { .. } => "finish uninstall".to_owned(),
            Action::Stray(Stray::Namespace { .. }) => "platform relabels Namespace".to_owned(),
            Action::Stray(Stray::Release { .. }) => "Flux writes app HelmRelease".to_owned(),
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
            Action::Finish { namespace, name } => {
                format!("helm-controller finishes uninstalling HelmRelease {namespace}/{name}")
            }
            Action::Upgrade(to) => format!(
                "the operator upgrades Cozystack to {} and names it in the settings",
                to.release
            ),
            Action::Stray(stray) => stray.describe(),
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
                let names = |list: &[Value]| list.iter().map(reference).collect::<Vec<_>>();
                format!(
                    "Flux applies [{}] and prunes [{}]",
                    names(applies).join(", "),
                    names(prunes).join(", ")
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
            Action::Leftover { .. }
            | Action::Reconcile { .. }
            | Action::Finish { .. }
            | Action::Upgrade(_)
            | Action::Stray(_)
            | Action::Flux { .. } => Vec::new(),
        }
    }
}

/// Who sent a judged write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writer {
    /// The actor's own request.
    User,
    /// Flux applying a GitOps change set: what it writes is its author's choice, and what the
    /// rules say of it (a consumed provider pruned: warned, or denied) the author's to heed.
    GitOps,
    /// A stock component writing what an admitted request makes it write.
    Platform,
    /// A platform identity writing what its release never renders ([`Stray`]): judged by
    /// what the rules say of that write, not as a write the platform must be let make.
    Stray,
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

/// A write a platform identity sends that its release's charts never make, or make only beside
/// what they found: the checks a namespace or release rule keeps even against the platform.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stray {
    /// helm-controller (`cozy-fluxcd:flux`) writes a tenant Namespace with an ancestor chain
    /// (`None`: the one it holds, untouched) and a provider label set to a namespace.
    Namespace {
        namespace: String,
        chain: Option<Chain>,
        provider: Option<(String, String)>,
    },
    /// kustomize-controller (`cozy-fluxcd:flux`) applies an app's HelmRelease that a GitOps
    /// repository holds, as cozystack-api would have written it.
    Release {
        kind: String,
        namespace: String,
        name: String,
    },
}

impl Stray {
    /// What the platform component writes, as a report says it.
    fn describe(&self) -> String {
        match self {
            Stray::Namespace {
                namespace,
                chain,
                provider,
            } => {
                let mut what = Vec::new();
                if let Some(chain) = chain {
                    what.push(format!("the {chain:?} ancestor chain"));
                }
                if let Some((class, to)) = provider {
                    what.push(format!("namespace.cozystack.io/{class}={to}"));
                }
                format!(
                    "helm-controller writes Namespace {namespace} with {}",
                    what.join(" and ")
                )
            }
            Stray::Release {
                kind,
                namespace,
                name,
            } => format!(
                "Flux applies the HelmRelease of {kind} {namespace}/{name} from a repository"
            ),
        }
    }
}

/// `Kind namespace/name` of a manifest.
fn reference(object: &Value) -> String {
    format!(
        "{} {}/{}",
        object["kind"].as_str().unwrap_or_default(),
        object["metadata"]["namespace"].as_str().unwrap_or_default(),
        object["metadata"]["name"].as_str().unwrap_or_default()
    )
}

/// The Tenant release that renders tenant namespace `namespace`: its parent namespace and the
/// Tenant's name (`tenant-a-b` is Tenant `b` in `tenant-a`).
fn owner(namespace: &str) -> Option<(String, String)> {
    let chain = super::statement::chain(namespace);
    let parent = chain.len().checked_sub(2).map(|at| chain[at].clone())?;
    let name = match parent.as_str() {
        "tenant-root" => namespace.strip_prefix("tenant-")?,
        _ => namespace.strip_prefix(&format!("{parent}-"))?,
    };
    Some((parent, name.to_owned()))
}

/// The ancestor chains the Tenant charts of supported releases write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chain {
    /// v1.5.4, v1.6.x and main: every ancestor.
    Full,
    /// v1.5.0–v1.5.3: the full one less tenant-root, below the root's children.
    Short,
}

/// A release an upgrade moves to: its name and the ApplicationDefinitions it ships (read from
/// a cluster that release renders).
#[derive(Debug, PartialEq, Eq)]
pub struct Upgrade {
    pub release: String,
    pub definitions: Vec<Value>,
}

impl Upgrade {
    /// `release`, with the ApplicationDefinitions `cluster` holds.
    pub fn of(release: &str, cluster: &ClusterObjects) -> Upgrade {
        let definitions = writes::definition_positions(cluster)
            .into_iter()
            .filter_map(|at| cluster.value(at))
            .collect();
        Upgrade {
            release: release.to_owned(),
            definitions,
        }
    }

    /// `settings` naming this release.
    pub fn settings(&self, settings: &Value) -> Value {
        let mut settings = settings.clone();
        if let Some(map) = settings.as_object_mut() {
            map.insert("cozystackRelease".into(), json!(self.release));
        }
        settings
    }
}

/// The cluster, and the platform that writes to it ([`Platform`]).
pub struct World<'p> {
    pub policy: &'p Policy,
    /// The deployment's settings: an upgrade names its release anew.
    pub settings: Arc<Value>,
    pub platform: Platform,
    pub state: State,
}

/// The module as admission: each request judged on the state it is sent on.
pub(super) struct Module<'p> {
    policy: &'p Policy,
    settings: Arc<Value>,
}

impl Admit for Module<'_> {
    fn admit(&mut self, _: &Sender, request: &Value, state: &mut State) -> Result<Value, Error> {
        evaluate(self.policy, &self.settings, state, request)
    }
}

impl From<Sent> for Judged {
    fn from(sent: Sent) -> Judged {
        Judged {
            writer: match sent.sender {
                Sender::Client { .. } => Writer::User,
                _ => Writer::Platform,
            },
            request: sent.request,
            response: sent.response,
        }
    }
}

impl<'p> World<'p> {
    pub fn new(
        policy: &'p Policy,
        settings: Arc<Value>,
        (chart, api): (TenantChart, Api),
        cluster: ClusterObjects,
    ) -> World<'p> {
        World {
            policy,
            settings,
            platform: Platform::new(api, chart, Kinds::read(&cluster)),
            state: State::new(cluster),
        }
    }

    pub(super) fn module(&self) -> Module<'p> {
        Module {
            policy: self.policy,
            settings: Arc::clone(&self.settings),
        }
    }

    /// Keeps what `outcome` sent in `played`: a write the API server or cozystack-api stopped
    /// after admission changes nothing.
    fn keep(outcome: Outcome, played: &mut Played) {
        if matches!(
            outcome.refused,
            Some(Refusal {
                by: Refuser::ApiServer | Refuser::CozystackApi,
                ..
            })
        ) {
            played.rejected = true;
        }
        if outcome.release.is_some() {
            played.release = outcome.release;
        }
        played
            .writes
            .extend(outcome.sent.into_iter().map(Judged::from));
    }

    /// Plays `write`, sent by `sender`, through the platform ([`Platform::play`]), the module
    /// judging each request, and keeps what it came to in `played`.
    fn through_platform(
        &mut self,
        sender: Sender,
        write: Write<'_>,
        played: &mut Played,
    ) -> Result<(), Error> {
        let mut module = self.module();
        let outcome = self
            .platform
            .play(&mut self.state, &mut module, sender, write)?;
        Self::keep(outcome, played);
        Ok(())
    }

    /// A user's own request of a release or a Namespace, as kubectl sends it, played to rest
    /// (an admitted release meets helm-controller), judged on the state it leaves in `played`
    /// as the one it was sent on.
    fn user_write(
        &mut self,
        admission: Admission<'_>,
        identity: &Identity,
        played: &mut Played,
    ) -> Result<(), Error> {
        played.before = Some(self.state.cluster().clone());
        let write = Write::Object {
            admission,
            dry_run: false,
            uninstall: Uninstall::Later,
        };
        self.through_platform(kubectl(identity), write, played)
    }

    /// The cluster once helm-controller has reconciled every Tenant (the root's render renders
    /// its sub-tenants), not judged: the state a step's guarantees are read from.
    pub fn settled(&self) -> ClusterObjects {
        self.settle(self.state.cluster())
    }

    /// `cluster` once helm-controller has reconciled every Tenant, not judged.
    pub fn settle(&self, cluster: &ClusterObjects) -> ClusterObjects {
        let mut state = State::new(cluster.clone());
        if let Some(root) = state.get(
            RELEASE_API,
            "HelmRelease",
            "tenant-root",
            Some("tenant-root"),
        ) {
            writes::render_tenant(&mut state, &root, &self.platform.chart);
        }
        state.cluster().clone()
    }

    /// The audit scanner's replay of `object` on the current state (no userInfo).
    pub fn replay(&mut self, object: &Value) -> Result<Value, Error> {
        let request = cozystack_policy_runtime::audit::replay_request(object)?;
        evaluate(self.policy, &self.settings, &mut self.state, &request)
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
        Ok(evaluate(self.policy, &self.settings, &mut state, &request)?["accepted"] != true)
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
            } => {
                let by = by.identity();
                self.release_write(&by, kind, namespace, name, *delete, &mut played)?
            }
            Action::Reconcile { namespace, name } => {
                self.tenant_reconcile(namespace, name, &mut played)?
            }
            Action::Upgrade(to) => self.upgrade(to)?,
            Action::Finish { namespace, name } => self.finish(namespace, name, &mut played)?,
            Action::Stray(stray) => self.stray(stray, &mut played)?,
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
            | Action::Switch { .. } => self.app_write(action, &mut played)?,
        }
        Ok(played)
    }

    /// helm-controller's uninstall of `namespace/name`, being deleted, comes to its end.
    fn finish(&mut self, namespace: &str, name: &str, played: &mut Played) -> Result<(), Error> {
        let Some(release) = self
            .state
            .get(RELEASE_API, "HelmRelease", name, Some(namespace))
            .filter(terminating)
        else {
            played.rejected = true;
            return Ok(());
        };
        played.before = Some(self.state.cluster().clone());
        self.through_platform(Sender::HelmController, Write::Uninstalled(release), played)?;
        Ok(())
    }

    /// The operator's upgrade to `to` (an action of its own: nothing is judged, the policy
    /// does not guard ApplicationDefinitions); Tenants keep what the older chart rendered until
    /// helm-controller reconciles them.
    fn upgrade(&mut self, to: &Upgrade) -> Result<(), Error> {
        let settings = Settings::new(to.settings(&self.settings));
        let resolved = settings.resolved()?;
        self.state.retain(|(api, kind, _, _)| {
            api != writes::DEFINITION_API || kind != writes::DEFINITION_KIND
        });
        for definition in &to.definitions {
            self.state.put(definition.clone());
        }
        self.platform.api = Api::of(resolved);
        self.platform.chart = TenantChart::of(resolved);
        self.platform.kinds = Kinds::read(self.state.cluster());
        self.settings = Arc::new(settings.value().clone());
        Ok(())
    }

    /// helm-controller reconciles Tenant `name` of `namespace` on its interval.
    fn tenant_reconcile(
        &mut self,
        namespace: &str,
        name: &str,
        played: &mut Played,
    ) -> Result<(), Error> {
        match self.state.get(
            RELEASE_API,
            "HelmRelease",
            &format!("tenant-{name}"),
            Some(namespace),
        ) {
            Some(release) if !terminating(&release) => {
                self.through_platform(Sender::HelmController, Write::Reconcile(release), played)?;
                Ok(())
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
        let write = Admission::namespace_update(namespace, &live, &new);
        self.user_write(write, &by.identity(), played)
    }

    /// A platform component's write its release never renders ([`Stray`]), judged as its
    /// identity sends it; the world keeps what admission lets in.
    fn stray(&mut self, stray: &Stray, played: &mut Played) -> Result<(), Error> {
        let mut module = self.module();
        played.before = Some(self.state.cluster().clone());
        let outcome = match stray {
            Stray::Namespace {
                namespace,
                chain,
                provider,
            } => {
                let Some(live) = self.state.get("v1", "Namespace", namespace, None) else {
                    played.rejected = true;
                    return Ok(());
                };
                let mut new = live.clone();
                let mut labels = live["metadata"]["labels"]
                    .as_object()
                    .cloned()
                    .unwrap_or_default();
                if let Some(chain) = chain {
                    let form = match chain {
                        Chain::Full => AncestorLabels::Full,
                        Chain::Short => AncestorLabels::ParentPrefixes,
                    };
                    labels.retain(|key, _| !key.starts_with(ANCESTOR_PREFIX));
                    for ancestor in chart_labels(namespace, form).unwrap_or_default() {
                        labels.insert(format!("{ANCESTOR_PREFIX}{ancestor}"), json!(""));
                    }
                }
                if let Some((class, to)) = provider {
                    labels.insert(format!("namespace.cozystack.io/{class}"), json!(to));
                }
                new["metadata"]["labels"] = Value::Object(labels);
                let write = Write::Object {
                    admission: Admission::namespace_update(namespace, &live, &new),
                    dry_run: false,
                    uninstall: Uninstall::Later,
                };
                self.platform
                    .play(&mut self.state, &mut module, Sender::HelmController, write)?
            }
            Stray::Release {
                kind,
                namespace,
                name,
            } => {
                // As a user's direct write, but by kustomize-controller's account.
                let flux = Identity::impersonated(FLUX, &[]);
                self.release_write(&flux, kind, namespace, name, false, played)?;
                for judged in &mut played.writes {
                    judged.writer = Writer::Stray;
                }
                return Ok(());
            }
        };
        let relabelled = outcome.refused.is_none();
        played
            .writes
            .extend(outcome.sent.into_iter().map(|sent| Judged {
                writer: Writer::Stray,
                ..Judged::from(sent)
            }));
        // The Namespace's own Tenant renders its labels again on its next reconcile (the
        // chart's, as the release writes them): a stray label does not outlive the step.
        if let Stray::Namespace { namespace, .. } = stray
            && relabelled
            && let Some((parent, name)) = owner(namespace)
        {
            self.tenant_reconcile(&parent, &name, played)?;
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
        let Some(served) = self
            .platform
            .kinds
            .get(kind)
            .filter(|_| self.admits_into(namespace))
        else {
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
        release["metadata"]["uid"] = json!(self.platform.next_uid());
        release["metadata"]["finalizers"] = json!([FINALIZER]);
        self.state.put(release);
    }

    /// An Application write through cozystack-api, played by [`Platform::play`]: the
    /// user's request, then what cozystack-api and helm-controller write after it.
    fn app_write(&mut self, action: &Action, played: &mut Played) -> Result<(), Error> {
        let Some((by, kind, namespace, name)) = action.app_of() else {
            return Ok(());
        };
        let Some(served) =
            self.platform.kinds.get(kind).filter(|_| {
                !matches!(action, Action::Create { .. }) || self.admits_into(namespace)
            })
        else {
            played.rejected = true;
            return Ok(());
        };
        let spec = match action {
            Action::Create { spec, .. } => Some(spec),
            _ => None,
        };
        // An edit or switch applies a spec too, but to an app that exists: no create to refuse.
        let Ok(account) = self.platform.api.write(
            &served,
            &self.state,
            AppRef { namespace, name },
            spec,
            APPS_API,
        ) else {
            played.rejected = true;
            return Ok(());
        };
        let (operation, app, old) = match (action, account.live.clone()) {
            (Action::Create { spec, .. }, None) => (
                "CREATE",
                Some(app_object(kind, namespace, name, spec)),
                None,
            ),
            (Action::Delete { .. }, Some(live)) => ("DELETE", None, Some(live)),
            (Action::Switch { key, on, .. }, Some(live)) => {
                ("UPDATE", Some(set(&live, key, json!(on))), Some(live))
            }
            (Action::Edit { key, value, .. }, Some(live)) => {
                ("UPDATE", Some(set(&live, key, value.clone())), Some(live))
            }
            // Nothing to create over, delete or switch: the API server answers 409 or 404.
            _ => {
                played.rejected = true;
                return Ok(());
            }
        };
        played.before = Some(self.state.cluster().clone());
        let write = AppRequest {
            operation,
            object: app.as_ref(),
            old: old.as_ref(),
            dry_run: false,
        };
        let write = Write::Application {
            account: &account,
            request: write,
            uninstall: Uninstall::Later,
        };
        self.through_platform(kubectl(&by.identity()), write, played)?;
        Ok(())
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
        by: &Identity,
        kind: &str,
        namespace: &str,
        name: &str,
        delete: bool,
        played: &mut Played,
    ) -> Result<(), Error> {
        let Some(served) = self.platform.kinds.get(kind) else {
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
        self.user_write(write, by, played)
    }

    /// Flux applies a change set as kustomize-controller does ([`apply::run`]); the cluster
    /// it leaves is the world's. A write it could not make (refused, before or at admission) is
    /// kept as refused; the world keeps what landed.
    fn flux(
        &mut self,
        applies: &[Value],
        prunes: &[Value],
        played: &mut Played,
    ) -> Result<(), Error> {
        let changes = ChangeSet {
            applies: applies.iter().map(manifest).collect(),
            deletes: prunes.iter().map(manifest).collect(),
        };
        let client = Sender::Client {
            identity: Identity::impersonated(FLUX, &[]),
            manager: Applier::Flux.manager(),
        };
        let before = self.state.cluster().clone();
        let mut module = self.module();
        let apply::Applied {
            report,
            state: after,
        } = apply::run(
            &mut self.platform,
            before.clone(),
            &changes,
            client,
            Applier::Flux,
            &mut module,
        )?;
        played.before = Some(before.clone());
        played.refused_on = Some(before);
        for step in report.steps {
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
            // The change set's write, then what the platform wrote after it: carrying out a
            // write admitted only as a platform writer's (a consumed provider pruned), that is
            // the author's choice too.
            let waived = !waived_by(&response).is_empty();
            let then = if waived {
                Writer::GitOps
            } else {
                Writer::Platform
            };
            played.writes.push(Judged {
                writer: Writer::GitOps,
                request: step.request.unwrap_or(Value::Null),
                response,
            });
            played
                .writes
                .extend(step.then.into_iter().map(|sent| Judged {
                    writer: then,
                    request: sent.request,
                    response: sent.response,
                }));
        }
        self.state = after;
        Ok(())
    }
}

/// A user's client: kubectl, as the identity.
fn kubectl(identity: &Identity) -> Sender {
    Sender::Client {
        identity: identity.clone(),
        manager: "kubectl",
    }
}

/// `live` with `spec.<key>` set to `value`: an edit or a switch, as the dashboard sends it.
fn set(live: &Value, key: &str, value: Value) -> Value {
    let mut new = live.clone();
    new["spec"][key] = value;
    new
}

/// An Application of `kind` as its client sends it.
pub(crate) fn app_object(kind: &str, namespace: &str, name: &str, spec: &Value) -> Value {
    json!({"apiVersion": APPS_API, "kind": kind,
        "metadata": {"name": name, "namespace": namespace}, "spec": spec})
}

/// The apps API's group and version.
const APPS_API: &str = "apps.cozystack.io/v1alpha1";

/// An object as a change set holds it.
pub(crate) fn manifest(object: &Value) -> cozystack_platform::flux::manifests::Manifest {
    cozystack_platform::flux::manifests::Manifest {
        origin: "simulate".to_owned(),
        object: object.clone(),
    }
}
