//! One change: what a write does, whatever surface it comes through. Each surface is normalised
//! here, once, into the instances that enter and leave kinds (as whom), the app it authors, the
//! Tenant it creates and the labels it writes; the rules judge that, never the request's shape.
//!
//! The same instance is the same here on every path: an Application is its release
//! (`<prefix><name>`), an app HelmRelease is the app its identity labels name, and a Tenant's
//! values are the modules its chart renders or stops rendering (a switch turned on enters the
//! module's kind in the tenant's namespace, turned off leaves it).

use std::cell::OnceCell;

use serde_json::Value;

use crate::model::chart::{TENANT_KIND, TENANT_RELEASE_PREFIX, switched_on};
use crate::model::collect::StrSet;
use crate::model::evaluation::Evaluation;
use crate::model::facts::InstanceRef;
use crate::model::kinds::KindRules;
use crate::model::request::{AppIdentity, ObjectState, Operation, Surface};
use crate::model::tenant::{ANCESTOR_PREFIX, Labels, tenant_namespace};
use crate::model::verdict::{BAD_REQUEST, Violation};

/// The instance a rule judges. An instance is its HelmRelease: the namespace and the release
/// name, the same on every path. The release name is known on the HelmRelease path and, on the
/// Application path, whenever the kind's definition states its release prefix; only without one
/// is the application name compared.
pub struct Subject {
    pub namespace: String,
    pub app: String,
    pub release: Option<String>,
}

impl Subject {
    /// The application name its release holds (see [`held_name`]).
    pub fn held_name<'s>(&'s self, rules: &KindRules) -> &'s str {
        match &self.release {
            Some(release) => held_name(rules, release, &self.app),
            None => &self.app,
        }
    }

    /// Whether this instance renders at all ([`crate::model::builtin::renders`]).
    pub fn renders(&self, rules: &KindRules) -> bool {
        crate::model::builtin::renders(&rules.kind, &self.namespace, self.held_name(rules))
    }

    /// Whether `instance`, as listed, is this one.
    pub fn is(&self, instance: &InstanceRef) -> bool {
        instance.namespace == self.namespace
            && match &self.release {
                Some(release) => instance.release == release,
                None => instance.app == self.app,
            }
    }
}

/// Whether listed `instance` of `rules.kind` renders anything: an instance whose chart refuses
/// its release name never ran, so it neither provides nor keeps a class served.
pub fn renders(rules: &KindRules, instance: &InstanceRef) -> bool {
    crate::model::builtin::renders(
        &rules.kind,
        instance.namespace,
        held_name(rules, instance.release, instance.app),
    )
}

/// The application name an instance's release holds: the release after the kind's prefix,
/// which is what the API server keeps unique; the name label when the prefix is unknown or the
/// release does not carry it (a wrong `releasePrefixes` entry, which the pre-flight reports).
pub fn held_name<'a>(rules: &KindRules, release: &'a str, app: &'a str) -> &'a str {
    rules
        .release_prefix
        .as_deref()
        .and_then(|prefix| release.strip_prefix(prefix))
        .unwrap_or(app)
}

/// A Tenant switch a write turns: the chart renders (or uninstalls) the module `key`.
pub struct Switch {
    /// The Tenant: its namespace and name.
    pub parent: String,
    pub tenant: String,
    pub key: String,
    pub on: bool,
    /// The write creates the Tenant: its namespace does not exist yet.
    pub tenant_created: bool,
}

/// Who makes an instance enter or leave its kind.
pub enum Origin {
    /// The object the request writes.
    Request,
    /// The Tenant chart, because the write turned a switch.
    Switch(Switch),
}

/// An instance entering or leaving a kind.
pub struct Entry {
    pub kind: String,
    pub namespace: String,
    /// The application name.
    pub app: String,
    /// Its release and its kind's rules (`None` when no source states any, or for a release
    /// being deleted, which only loses its finalizer): an Application's are read from the
    /// definitions when a rule first asks, so a rule that needs neither reads nothing.
    known: OnceCell<(Subject, Option<KindRules>)>,
    /// Being deleted already: it strands no one it did not strand when its DELETE was admitted.
    pub terminating: bool,
    pub origin: Origin,
}

impl Entry {
    /// An instance whose release and rules are known now.
    fn known_now(kind: &str, subject: Subject, rules: Option<KindRules>, origin: Origin) -> Self {
        Entry {
            kind: kind.to_owned(),
            namespace: subject.namespace.clone(),
            app: subject.app.clone(),
            known: OnceCell::from((subject, rules)),
            terminating: false,
            origin,
        }
    }

    /// The instance as its release, and its kind's rules.
    pub fn known(&self, eval: &Evaluation) -> Result<(&Subject, Option<&KindRules>), Violation> {
        let known = match self.known.get() {
            Some(known) => known,
            None => {
                // The instance is its release, `<prefix><name>`, known whether or not the
                // kind has rules.
                let subject = Subject {
                    namespace: self.namespace.clone(),
                    app: self.app.clone(),
                    release: eval.release_of(&self.kind, &self.app)?,
                };
                let rules = eval.rules_of(&self.kind)?;
                self.known.get_or_init(|| (subject, rules))
            }
        };
        Ok((&known.0, known.1.as_ref()))
    }

    /// A rule's message about this instance, told as what the write does: a module's as the
    /// switch that renders or removes it.
    pub fn told(&self, message: String) -> String {
        match &self.origin {
            Origin::Request => message,
            Origin::Switch(s) => format!(
                "Tenant {parent}/{tenant}: turning {key} {state} {action} {kind} {namespace}/{key}: {message}",
                parent = s.parent,
                tenant = s.tenant,
                key = s.key,
                state = if s.on { "on" } else { "off" },
                action = if s.on { "creates" } else { "removes" },
                kind = self.kind,
                namespace = self.namespace,
            ),
        }
    }

    /// The switch that renders or removes it, for a module of a Tenant's values.
    pub fn switch(&self) -> Option<&Switch> {
        match &self.origin {
            Origin::Switch(s) => Some(s),
            Origin::Request => None,
        }
    }
}

/// A Tenant the write creates: its name must make a namespace whose groups are its own.
pub struct NewTenant {
    pub parent: String,
    pub name: String,
}

/// What one write does.
#[derive(Default)]
pub struct Change<'r> {
    /// The write comes through the apps API: who may author its app is judged (visibility,
    /// edit), on [`Change::authored`].
    pub through_api: bool,
    /// The app an UPDATE through the apps API changes in place.
    pub changed: Option<Entry>,
    /// That UPDATE changes the app's spec (its Helm values); one of metadata alone does not.
    pub spec_changed: bool,
    /// The app whose HelmRelease is written directly: only the platform writes app releases.
    pub release: Option<Entry>,
    pub entering: Vec<Entry>,
    pub leaving: Vec<Entry>,
    pub new_tenant: Option<NewTenant>,
    /// The Namespace's labels, when the write changes one the platform alone may write.
    pub labels: Option<LabelChange<'r>>,
}

/// A Namespace write that sets, changes or removes a tenant ancestor or provider label.
pub struct LabelChange<'r> {
    /// The labels the Namespace will carry (those a rule reads).
    pub labels: &'r Labels,
    /// The protected keys whose value the write changes.
    pub changed: StrSet<'r>,
}

impl<'r> LabelChange<'r> {
    /// The protected labels a CREATE or UPDATE of a Namespace changes, if any; `None` when it
    /// changes none. A write with no object is malformed.
    fn of(eval: &Evaluation<'r>) -> Result<Option<LabelChange<'r>>, Violation> {
        let request = eval.request;
        let Some(new) = &request.object else {
            return Err(Violation::failure(
                BAD_REQUEST,
                format!("Namespace {}: the request has no object", request.name),
            ));
        };
        static NONE: Labels = Labels::new();
        let old = request.old_object.as_ref().map_or(&NONE, |o| &o.labels);
        let protected =
            |key: &str| key.starts_with(ANCESTOR_PREFIX) || eval.settings.is_provider_key(key);
        let changed = StrSet::of(
            new.labels
                .keys()
                .chain(old.keys())
                .map(String::as_str)
                .filter(|key| protected(key) && new.labels.get(*key) != old.get(*key)),
        );
        Ok((!changed.is_empty()).then_some(LabelChange {
            labels: &new.labels,
            changed,
        }))
    }
}

impl<'r> Change<'r> {
    /// The app written through the apps API: the one an UPDATE changes in place, else the
    /// instance a CREATE or DELETE makes enter or leave its kind (first in its list, before the
    /// modules a new Tenant switches on). One entry, so its release and rules are read once.
    pub fn authored(&self) -> Option<&Entry> {
        let moved = self.entering.first().or(self.leaving.first());
        self.through_api
            .then(|| self.changed.as_ref().or(moved))
            .flatten()
    }

    /// Normalises the request of `eval`. A malformed request is refused here; a write nothing
    /// judges (CONNECT, a status subresource, a release that is no app, a tenant's teardown)
    /// is the empty change.
    pub fn of(eval: &Evaluation<'r>) -> Result<Change<'r>, Violation> {
        let request = eval.request;
        let subresource = request.subresource.as_deref().filter(|s| !s.is_empty());
        match (request.surface, subresource) {
            _ if request.operation == Operation::Connect => Ok(Change::default()),
            // The API server's Namespace status and finalize strategies reset only the spec or
            // the status: labels written through them land, so they are judged like any other.
            (Surface::Namespace, Some("status" | "finalize") | None) => Ok(Change {
                labels: match request.operation {
                    Operation::Create | Operation::Update => LabelChange::of(eval)?,
                    Operation::Delete | Operation::Connect => None,
                },
                ..Change::default()
            }),
            // A custom resource's status subresource ignores every change outside status.
            (_, Some(_)) => Ok(Change::default()),
            (Surface::Application, None) => application(eval),
            (Surface::HelmRelease, None) => helm_release(eval),
        }
    }
}

/// Did the request bring the object it needs? Missing ones are malformed requests.
fn require_object(eval: &Evaluation) -> Result<(), Violation> {
    let request = eval.request;
    let missing = match request.operation {
        Operation::Create => request.object.is_none().then_some("object"),
        Operation::Update if request.object.is_none() => Some("object"),
        Operation::Update => request.old_object.is_none().then_some("oldObject"),
        _ => None,
    };
    match missing {
        Some(field) => Err(Violation::failure(
            BAD_REQUEST,
            format!(
                "{} {} {}/{}: the request has no {field}",
                request.operation_name(),
                request.kind,
                request.namespace,
                request.name
            ),
        )),
        None => Ok(()),
    }
}

/// A tenant being torn down takes its whole subtree with it: nothing is left to protect.
fn teardown_delete(eval: &Evaluation) -> bool {
    eval.request.operation == Operation::Delete && eval.user().is_teardown(eval.settings)
}

fn is_terminating(state: &Option<ObjectState>) -> bool {
    state.as_ref().is_some_and(|o| o.terminating)
}

/// `apps.cozystack.io` Applications, with the end user's identity.
fn application<'r>(eval: &Evaluation<'r>) -> Result<Change<'r>, Violation> {
    let request = eval.request;
    require_object(eval)?;
    if teardown_delete(eval) {
        return Ok(Change::default());
    }
    let mut change = Change::default();
    // A Tenant being deleted renders nothing again (helm-controller only uninstalls a release
    // that carries a deletionTimestamp, `reconcileDelete`): an edit of its values switches no
    // module, its modules go with the teardown.
    if request.kind == TENANT_KIND
        && !is_terminating(&request.old_object)
        && let Some(new) = &request.object
    {
        // An Application's spec is the Helm values.
        let old = match request.operation {
            Operation::Update => request.old_object.as_ref().map(|o| &o.spec),
            _ => None,
        };
        tenant_values(eval, &mut change, &request.name, old, &new.spec)?;
    }
    let direct = Entry {
        kind: request.kind.clone(),
        namespace: request.namespace.clone(),
        app: request.name.clone(),
        known: OnceCell::new(),
        terminating: is_terminating(&request.old_object),
        origin: Origin::Request,
    };
    match request.operation {
        Operation::Create => change.entering.insert(0, direct),
        Operation::Delete => change.leaving.insert(0, direct),
        Operation::Update | Operation::Connect => change.changed = Some(direct),
    }
    change.spec_changed = match (&request.object, &request.old_object) {
        (Some(new), Some(old)) => new.spec != old.spec,
        _ => false,
    };
    change.through_api = true;
    Ok(change)
}

/// `helm.toolkit.fluxcd.io/v2` HelmReleases that carry the app identity labels. Leaving a kind
/// (DELETE, or an UPDATE that changes or drops the identity labels) is a removal of that
/// instance; entering one (CREATE, or an UPDATE that adds or changes them) is a new instance.
fn helm_release<'r>(eval: &Evaluation<'r>) -> Result<Change<'r>, Violation> {
    let request = eval.request;
    require_object(eval)?;
    if request.operation == Operation::Delete && request.old_object.is_none() {
        return Err(Violation::failure(
            BAD_REQUEST,
            format!(
                "DELETE HelmRelease {}/{}: the request has no oldObject, so the policy cannot tell whether it is an app release",
                request.namespace, request.name
            ),
        ));
    }
    let new = request.release_identity(request.object.as_ref());
    let old = request.release_identity(request.old_object.as_ref());
    let Some(identity) = new.as_ref().or(old.as_ref()) else {
        return Ok(Change::default());
    };
    if teardown_delete(eval) {
        return Ok(Change::default());
    }
    // The instance is the release, whatever its name label says.
    let subject = |app: &str| Subject {
        namespace: request.namespace.clone(),
        app: app.to_owned(),
        release: Some(request.name.clone()),
    };
    let mut change = Change {
        release: Some(Entry::known_now(
            &identity.kind,
            subject(&identity.app),
            None,
            Origin::Request,
        )),
        ..Change::default()
    };
    // Only the platform writes app releases: for anyone else nothing more is read, since the
    // release rule refuses the write whatever it does.
    if !eval.is_platform() {
        return Ok(change);
    }
    let same_kind = |a: &Option<AppIdentity>, b: &Option<AppIdentity>| {
        a.as_ref().map(|i| &i.kind) == b.as_ref().map(|i| &i.kind)
    };
    let relabelled = request.operation == Operation::Update && !same_kind(&old, &new);
    let leaving = match request.operation {
        Operation::Delete => old.as_ref(),
        _ if relabelled => old.as_ref(),
        _ => None,
    };
    let entering = match request.operation {
        Operation::Create => new.as_ref(),
        _ if relabelled => new.as_ref(),
        _ => None,
    };
    if let Some(left) = leaving {
        let terminating = is_terminating(&request.old_object);
        // A release being deleted only loses its finalizer: its kind's rules are not read.
        let rules = match terminating {
            true => None,
            false => eval.rules_of(&left.kind)?,
        };
        change.leaving.push(Entry {
            terminating,
            ..Entry::known_now(&left.kind, subject(&left.app), rules, Origin::Request)
        });
    }
    if let Some(entered) = entering {
        let rules = eval.rules_of(&entered.kind)?;
        let entry = Entry::known_now(&entered.kind, subject(&entered.app), rules, Origin::Request);
        change.entering.push(entry);
    }
    // A Tenant release, new (or relabelled into the kind) or staying one: a new one makes a
    // namespace, and its values switch modules either way.
    let stays_tenant = request.operation == Operation::Update
        && identity.kind == TENANT_KIND
        && same_kind(&old, &new)
        && !is_terminating(&request.old_object);
    let new_tenant = entering.is_some_and(|i| i.kind == TENANT_KIND);
    if (new_tenant || stays_tenant)
        && let Some(name) = request.name.strip_prefix(TENANT_RELEASE_PREFIX)
    {
        fn values(state: &Option<ObjectState>) -> &Value {
            static NONE: Value = Value::Null;
            state
                .as_ref()
                .and_then(|s| s.spec.get("values"))
                .unwrap_or(&NONE)
        }
        let old = (!new_tenant).then(|| values(&request.old_object));
        tenant_values(eval, &mut change, name, old, values(&request.object))?;
    }
    Ok(change)
}

/// What a Tenant's values do, as the chart renders them: Tenant `name` in the request's
/// namespace, with `old` values (`None` when the write creates it: every switch starts off)
/// and `new` ones. A new Tenant names a namespace; a switch turned on enters the module's
/// kind under the key's name in the tenant's namespace, turned off leaves it (the chart
/// uninstalls every module switched off in one upgrade). A switch of a kind the cluster does
/// not serve renders nothing. Nothing here reads the tenant's namespace, which a CREATE has
/// not made yet.
fn tenant_values(
    eval: &Evaluation,
    change: &mut Change,
    name: &str,
    old: Option<&Value>,
    new: &Value,
) -> Result<(), Violation> {
    let parent = &eval.request.namespace;
    if old.is_none() {
        change.new_tenant = Some(NewTenant {
            parent: parent.clone(),
            name: name.to_owned(),
        });
    }
    let Some(child) = tenant_namespace(parent, name) else {
        return Ok(());
    };
    for (key, kind) in eval.settings.tenant_modules.iter() {
        let on = switched_on(Some(new), key);
        if switched_on(old, key) == on || !eval.serves(kind)? {
            continue;
        }
        // The chart names each module's release after its key, in the tenant's namespace.
        let subject = Subject {
            namespace: child.clone(),
            app: key.to_owned(),
            release: Some(key.to_owned()),
        };
        let switch = Switch {
            parent: parent.clone(),
            tenant: name.to_owned(),
            key: key.to_owned(),
            on,
            tenant_created: old.is_none(),
        };
        let rules = eval.rules_of(kind)?;
        let module = Entry::known_now(kind, subject, rules, Origin::Switch(switch));
        match on {
            true => change.entering.push(module),
            false => change.leaving.push(module),
        }
    }
    Ok(())
}
