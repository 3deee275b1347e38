//! What the rules promise, checked apart from the module: each guarantee read off the
//! releases and Namespaces the cluster holds, or off the request and the state it was judged on,
//! with the rules as [`statement`] states them (never the resolver's tables). An admitted
//! request the statement refuses, a refused one it admits, and a guarantee the state did not
//! break before an admitted step are the module's.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use cozystack_policy_runtime::cluster::ClusterObjects;
use serde_json::Value;

use super::statement::{self, Per, Statement, Visible};
use super::world::{Ask, Op};
use cozystack_platform::writes::RELEASE_API;

const KIND_LABEL: &str = "apps.cozystack.io/application.kind";
const ROOT: &str = "tenant-root";

/// A rule that refuses a request by who sends it or what it names, whatever the state holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Refuses {
    /// App HelmReleases are written by the platform only.
    Releases,
    /// `module` kinds by tenant administrators only, `hidden` ones by the platform only.
    Visibility,
    /// `adminOnly` kinds are created, changed and deleted by the platform only.
    Edit,
    /// No Tenant binds a group one of its ancestors binds.
    Groups,
    /// No create finds its scope's instances (terminating ones included: they exist until
    /// their finalizers finish, docs/rules.md) already at `cardinality.max`.
    Count,
    /// No app takes a release name Cozystack renders for another kind.
    Names,
    /// The root Tenant is not deleted.
    RootTenant,
    /// No switch is turned on over a name another kind holds (helm-controller would adopt it).
    Adoption,
    /// A protected module its Tenant's switch renders is turned off, not deleted.
    Rendered,
    /// A Namespace's ancestor and provider labels are the platform's to write.
    Labels,
}

impl Refuses {
    /// The invariant a request it should have refused breaks.
    pub fn invariant(self) -> &'static str {
        match self {
            Refuses::Releases => "releases: only the platform writes app HelmReleases",
            Refuses::Visibility => {
                "visibility: module kinds by tenant administrators, hidden ones by the platform"
            }
            Refuses::Edit => "edit: only the platform writes an adminOnly kind",
            Refuses::Groups => "groups: no Tenant binds a group of its ancestors",
            Refuses::Count => {
                "cardinality: no create is admitted where max instances exist, terminating ones too"
            }
            Refuses::Names => "rendered names: no name Cozystack renders is taken by another kind",
            Refuses::RootTenant => "root tenant: tenant-root/tenant-root is never deleted",
            Refuses::Adoption => {
                "adoption: no switch renders its module over another kind's release"
            }
            Refuses::Rendered => {
                "rendered: a module its Tenant's switch renders is not deleted by a user"
            }
            Refuses::Labels => {
                "namespace: a Namespace's ancestor and provider labels are the platform's"
            }
        }
    }

    /// The name the rule's row carries in `RULES`.
    pub fn rule(self) -> &'static str {
        match self {
            Refuses::Releases => "releases",
            Refuses::Visibility => "visibility",
            Refuses::Edit => "edit",
            Refuses::Groups => "groups",
            Refuses::Count => "cardinality",
            Refuses::Names => "names",
            Refuses::RootTenant => "root_tenant",
            Refuses::Adoption => "adoption",
            Refuses::Rendered => "rendered",
            Refuses::Labels => "namespace",
        }
    }
}

/// A guarantee that does not hold, naming what breaks it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Broken {
    /// More rendering instances of a kind in a scope than its `cardinality.max`.
    Cardinality {
        kind: String,
        scope: String,
        instances: Vec<String>,
    },
    /// A name Cozystack renders held by an app of another kind.
    RenderedName { release: String, holder: String },
    /// A consumer that still exists lost the provider it had (gone, or moved off it).
    Stranded {
        consumer: String,
        class: String,
        provider: String,
    },
    /// The root Tenant's release, which every tenant hangs from, is gone or being deleted
    /// (`packages/system/cozystack-basics/templates/tenant-root.yaml` makes it once; nothing
    /// makes it again).
    RootTenant,
    /// An admitted request the rules refuse, whatever the state.
    Admitted { rule: Refuses, what: String },
    /// A refused request the rules admit, with the rule the module cited.
    TooStrict { cited: String, what: String },
    /// A refused request the rules refuse, but by other rows than the one the module cited.
    WrongRow {
        cited: String,
        rows: Vec<&'static str>,
        what: String,
    },
}

impl Broken {
    /// The invariant, as the summary and the counterexample name it.
    pub fn invariant(&self) -> &'static str {
        match self {
            Broken::Cardinality { .. } => "cardinality: instances that render stay within max",
            Broken::RenderedName { .. } => Refuses::Names.invariant(),
            Broken::Stranded { .. } => "protection: no consumer loses the provider it had",
            Broken::RootTenant => Refuses::RootTenant.invariant(),
            Broken::Admitted { rule, .. } => rule.invariant(),
            Broken::TooStrict { .. } => "never too strict: a request the rules admit is admitted",
            Broken::WrongRow { .. } => "which row: a refusal names a row the rules say refuses it",
        }
    }

    /// The last row of `RULES` that keeps it, by its name (a refusal may come from it or a row
    /// before it).
    pub fn rule(&self) -> Option<&'static str> {
        match self {
            // The count, or the slot the count leaves room for.
            Broken::Cardinality { .. } => Some("slots"),
            Broken::RenderedName { .. } => Some("names"),
            Broken::Stranded { .. } => Some("protection"),
            Broken::RootTenant => Some("root_tenant"),
            Broken::Admitted { rule, .. } => Some(rule.rule()),
            Broken::TooStrict { .. } => None,
            Broken::WrongRow { rows, .. } => rows.first().copied(),
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Broken::Cardinality {
                kind,
                scope,
                instances,
            } => {
                format!(
                    "{kind}: {} instances that render in {scope}: {}",
                    instances.len(),
                    instances.join(", ")
                )
            }
            Broken::RenderedName { release, holder } => {
                format!("{release} is rendered by Cozystack but held by {holder}")
            }
            Broken::Stranded {
                consumer,
                class,
                provider,
            } => {
                format!("{consumer} consumed {class} from {provider}, which no longer provides it")
            }
            Broken::RootTenant => {
                "the root Tenant's release tenant-root/tenant-root is gone or terminating"
                    .to_owned()
            }
            Broken::Admitted { rule, what } => {
                format!(
                    "admitted, though the {} rule refuses it: {what}",
                    rule.rule()
                )
            }
            Broken::TooStrict { cited, what } => {
                format!("refused citing {cited}, though the rules admit it: {what}")
            }
            Broken::WrongRow { cited, rows, what } => {
                format!(
                    "refused citing {cited}, though the rules refuse it by {}: {what}",
                    rows.join(" or ")
                )
            }
        }
    }
}

/// An app release of the state.
struct App {
    namespace: String,
    name: String,
    kind: String,
    terminating: bool,
}

impl App {
    fn id(&self) -> String {
        format!("{} {}/{}", self.kind, self.namespace, self.name)
    }
}

/// The facts the guarantees are read from.
pub struct Facts {
    apps: Vec<App>,
    /// Each Namespace's labels.
    namespaces: HashMap<String, serde_json::Map<String, Value>>,
    /// The rules the deployment judges by, and what its release renders.
    stated: Arc<Statement>,
    /// Each tenant namespace's switches that its Tenant's values turn on.
    switches: HashMap<String, Vec<String>>,
    /// The tenant namespaces whose Tenant is being uninstalled: its cleanup Job deletes every
    /// app in them and below them.
    torn: BTreeSet<String>,
}

impl Facts {
    pub fn of(cluster: &ClusterObjects, stated: &Arc<Statement>) -> Facts {
        let mut apps = Vec::new();
        let mut namespaces = HashMap::new();
        let mut switches = HashMap::new();
        let mut torn = BTreeSet::new();
        // Only Namespaces and HelmReleases are read (each stored object is parsed to read it).
        let read = cluster.keys().enumerate().filter(|(_, (api, kind, _, _))| {
            (api == "v1" && kind == "Namespace") || (api == RELEASE_API && kind == "HelmRelease")
        });
        let at: Vec<usize> = read.map(|(at, _)| at).collect();
        for object in at.into_iter().filter_map(|at| cluster.value(at)) {
            let meta = &object["metadata"];
            let name = meta["name"].as_str().unwrap_or_default().to_owned();
            match (object["apiVersion"].as_str(), object["kind"].as_str()) {
                (Some("v1"), Some("Namespace")) => {
                    namespaces.insert(
                        name,
                        meta["labels"].as_object().cloned().unwrap_or_default(),
                    );
                }
                (Some(RELEASE_API), Some("HelmRelease")) => {
                    if let Some(kind) = meta["labels"][KIND_LABEL].as_str() {
                        if kind == "Tenant" {
                            let parent = meta["namespace"].as_str().unwrap_or_default();
                            // The root Tenant's release renders the namespace it lives in.
                            let child = match name.strip_prefix("tenant-") {
                                Some("root") => ROOT.to_owned(),
                                Some(tenant) => statement::child_namespace(parent, tenant),
                                None => String::new(),
                            };
                            // A Tenant being uninstalled renders nothing more: helm-controller
                            // only uninstalls a release with a deletionTimestamp.
                            let values = match meta.get("deletionTimestamp") {
                                Some(_) => {
                                    torn.insert(child.clone());
                                    &Value::Null
                                }
                                None => &object["spec"]["values"],
                            };
                            let on = stated
                                .kinds()
                                .iter()
                                .filter_map(|k| k.slot.map(|(slot, _)| slot))
                                .filter(|key| statement::truthy(values.get(*key)))
                                .map(str::to_owned)
                                .collect();
                            switches.insert(child, on);
                        }
                        apps.push(App {
                            namespace: meta["namespace"].as_str().unwrap_or_default().to_owned(),
                            name,
                            kind: kind.to_owned(),
                            terminating: meta.get("deletionTimestamp").is_some(),
                        });
                    }
                }
                _ => {}
            }
        }
        Facts {
            apps,
            namespaces,
            stated: Arc::clone(stated),
            switches,
            torn,
        }
    }

    /// The classes `kind` consumes that an app of it created in `namespace` finds no live
    /// provider of, because every provider of the class in the namespace it resolves to is
    /// being uninstalled (docs/rules.md, "Consumer without provider": terminating providers are
    /// not live): the create is told it waits. tenant-root resolves every class to itself (its
    /// values say so); any other namespace through its capability label, else its legacy one.
    /// A namespace with no provider of the class at all is not stated here: whether the chart
    /// is about to render one is the Tenant's to say.
    pub fn awaited(&self, kind: &str, namespace: &str) -> Vec<&'static str> {
        let Some(stated) = self.stated.kind(kind) else {
            return Vec::new();
        };
        let labels = self.namespaces.get(namespace);
        let label = |key: String| {
            labels
                .and_then(|l| l.get(&key))
                .and_then(Value::as_str)
                .filter(|v| !v.is_empty())
        };
        stated
            .consumes
            .iter()
            .copied()
            .filter(|class| {
                let provider = match namespace {
                    ROOT => Some(ROOT),
                    _ => label(format!("namespace.cozystack.io/capability.{class}"))
                        .or_else(|| label(format!("namespace.cozystack.io/{class}"))),
                };
                let Some(provider) = provider else {
                    return false;
                };
                // The kinds that serve `namespace` from `provider`: any in its own namespace,
                // only those that share below it. Where none does, nothing serves it.
                let serving = |k: &statement::Kind| {
                    k.provides.contains(class) && (provider == namespace || k.shares)
                };
                if !self.stated.kinds().iter().any(serving) {
                    return true;
                }
                let providers: Vec<&App> = self
                    .apps
                    .iter()
                    .filter(|a| a.namespace == provider)
                    .filter(|a| self.stated.kind(&a.kind).is_some_and(serving))
                    .collect();
                // A module its Tenant's switch renders that is gone comes back at the next
                // reconcile: whether the class waits is then the chart's to say, as with none.
                let rendered_again = self.switches.get(provider).is_some_and(|on| {
                    on.iter().any(|key| {
                        self.stated
                            .module(key)
                            .is_some_and(|m| m.provides.contains(class))
                            && self.app(provider, key).is_none()
                    })
                });
                !providers.is_empty() && providers.iter().all(|a| a.terminating) && !rendered_again
            })
            .collect()
    }

    /// Whether an app renders: a chart that refuses its name ran nothing.
    fn renders(&self, app: &App) -> bool {
        if app.terminating {
            return false;
        }
        match self.stated.kind(&app.kind) {
            Some(kind) => match (kind.slot, kind.runs_off_slot) {
                (Some((slot, home)), false) => {
                    app.name == format!("{}{slot}", self.stated.prefix(kind))
                        && home.is_none_or(|home| home == app.namespace)
                }
                _ => true,
            },
            None => true,
        }
    }

    fn is_tenant(&self, namespace: &str) -> bool {
        namespace == ROOT
            || (namespace.starts_with("tenant-") && self.namespaces.contains_key(namespace))
    }

    /// The value of label `key` of Namespace `namespace`, if it has it.
    fn label(&self, namespace: &str, key: &str) -> Option<&str> {
        self.namespaces.get(namespace)?.get(key)?.as_str()
    }

    /// Every guarantee of the state that does not hold.
    pub fn broken(&self) -> BTreeSet<Broken> {
        let mut out = BTreeSet::new();
        // Counts of rendering instances.
        for row in self.stated.kinds() {
            let Some((per, max)) = row.limit else {
                continue;
            };
            let mut scopes: BTreeMap<String, Vec<String>> = BTreeMap::new();
            for app in self
                .apps
                .iter()
                .filter(|a| a.kind == row.kind && self.renders(a))
            {
                let scope = match per {
                    Per::Cluster => "the cluster".to_owned(),
                    Per::Tenant => app.namespace.clone(),
                };
                scopes
                    .entry(scope)
                    .or_default()
                    .push(format!("{}/{}", app.namespace, app.name));
            }
            for (scope, mut instances) in scopes {
                if instances.len() > max {
                    instances.sort();
                    out.insert(Broken::Cardinality {
                        kind: row.kind.to_owned(),
                        scope,
                        instances,
                    });
                }
            }
        }
        // The root Tenant, whatever its kind label says of it.
        let root = self
            .apps
            .iter()
            .any(|a| a.namespace == ROOT && a.name == ROOT && a.kind == "Tenant" && !a.terminating);
        if !root {
            out.insert(Broken::RootTenant);
        }
        // Names Cozystack renders.
        for app in &self.apps {
            let tenant = self.is_tenant(&app.namespace);
            if let Some(kind) = self.stated.rendered(&app.namespace, &app.name, tenant)
                && kind != Some(app.kind.as_str())
            {
                out.insert(Broken::RenderedName {
                    release: format!("{}/{}", app.namespace, app.name),
                    holder: app.kind.clone(),
                });
            }
        }
        out
    }

    /// The namespace `namespace` resolves `class` to: its legacy provider label, tenant-root
    /// itself (its values say so, and its Namespace carries none).
    fn resolves(&self, namespace: &str, class: &str) -> Option<String> {
        let labels = self.namespaces.get(namespace)?;
        match labels
            .get(&format!("namespace.cozystack.io/{class}"))
            .and_then(Value::as_str)
        {
            Some(ns) => Some(ns.to_owned()),
            None if namespace == ROOT => Some(ROOT.to_owned()),
            None => None,
        }
    }

    /// The live provider of `class` in `namespace`: a rendering instance of a kind that
    /// provides it, the one on its slot first.
    fn provider(&self, namespace: &str, class: &str, serves: &str) -> Option<String> {
        let mut live: Vec<(bool, String)> = self
            .apps
            .iter()
            .filter(|p| p.namespace == namespace && self.renders(p))
            .filter_map(|p| {
                let kind = self.stated.kind(&p.kind)?;
                let on_slot = kind.slot.is_some_and(|(slot, _)| slot == p.name);
                let reaches = namespace == serves || kind.shares;
                (reaches && kind.provides.contains(&class)).then(|| (!on_slot, p.id()))
            })
            .collect();
        live.sort();
        live.into_iter().next().map(|(_, id)| id)
    }

    /// Each consumer, class and the provider instance it is served by.
    /// A consumer being uninstalled is one too: its chart's uninstall still uses what it
    /// consumes (docs/rules.md, "A consumer being uninstalled").
    pub fn served(&self) -> BTreeSet<(String, String, String)> {
        let mut out = BTreeSet::new();
        for app in &self.apps {
            let Some(kind) = self.stated.kind(&app.kind) else {
                continue;
            };
            for class in kind.consumes {
                if let Some(provider) = self
                    .resolves(&app.namespace, class)
                    .and_then(|ns| self.provider(&ns, class, &app.namespace))
                {
                    out.insert((app.id(), (*class).to_owned(), provider));
                }
            }
        }
        out
    }

    /// Whether an app still exists, being uninstalled too, outside a tenant being torn down
    /// (a consumer gone, or going with its tenant's teardown, is not stranded).
    pub fn holds(&self, id: &str) -> bool {
        let torn = |ns: &str| statement::chain(ns).iter().any(|t| self.torn.contains(t));
        self.apps
            .iter()
            .any(|a| a.id() == id && !torn(&a.namespace))
    }

    /// Whether `provider` still renders and provides `class`.
    fn provides(&self, provider: &str, class: &str) -> bool {
        self.apps.iter().any(|p| {
            p.id() == provider
                && self.renders(p)
                && self
                    .stated
                    .kind(&p.kind)
                    .is_some_and(|k| k.provides.contains(&class))
        })
    }

    /// The instances of `kind` in `namespace`'s scope: every one, off its slot or terminating
    /// too (the count reads what exists).
    fn count(&self, kind: &str, per: Per, namespace: &str) -> usize {
        self.apps
            .iter()
            .filter(|a| a.kind == kind && (per == Per::Cluster || a.namespace == namespace))
            .count()
    }

    /// The app releases the audit scanner's replay must refuse, by the statement, each with
    /// the rule that refuses it; the others it must accept. A replay is a CREATE of what exists
    /// (docs/rules.md): a release under a name Cozystack renders for another kind (`names`),
    /// and one that finds `max` others of its kind in its scope, terminating ones too, unless it
    /// holds its slot (the one its scope keeps, `cardinality`). Releases being uninstalled are
    /// not held to it.
    pub fn audited(&self) -> BTreeMap<String, &'static str> {
        let mut out = BTreeMap::new();
        for app in self.apps.iter().filter(|a| !a.terminating) {
            let Some(kind) = self.stated.kind(&app.kind) else {
                continue;
            };
            let tenant = self.is_tenant(&app.namespace);
            if self
                .stated
                .rendered(&app.namespace, &app.name, tenant)
                .is_some_and(|holder| holder != Some(kind.kind))
            {
                out.insert(app.id(), "names");
                continue;
            }
            let Some((per, max)) = kind.limit else {
                continue;
            };
            let on_slot = kind.slot.is_some_and(|(slot, home)| {
                app.name == format!("{}{slot}", self.stated.prefix(kind))
                    && home.is_none_or(|home| home == app.namespace)
            });
            if !on_slot && self.count(kind.kind, per, &app.namespace) > max {
                out.insert(app.id(), "cardinality");
            }
        }
        out
    }

    /// Each live app release, with its id, for the audit scanner to replay.
    pub fn live(&self) -> Vec<(String, String, String)> {
        self.apps
            .iter()
            .filter(|a| !a.terminating)
            .map(|a| (a.id(), a.namespace.clone(), a.name.clone()))
            .collect()
    }

    /// Whether the app `id` is of a kind the settings protect from deletion.
    fn protected(&self, id: &str) -> bool {
        self.apps
            .iter()
            .find(|a| a.id() == id)
            .and_then(|a| self.stated.kind(&a.kind))
            .is_some_and(|k| k.protected)
    }

    /// The app `release` of `namespace`.
    fn app(&self, namespace: &str, release: &str) -> Option<&App> {
        self.apps
            .iter()
            .find(|a| a.namespace == namespace && a.name == release)
    }

    /// Apps that may consume a class `kind` provides from an instance in `namespace`: a
    /// consumer of one of its classes in the namespace or below, whose namespace names it or
    /// is it.
    fn consumers(&self, namespace: &str, kind: &statement::Kind) -> bool {
        self.apps.iter().any(|a| {
            let Some(consumer) = self.stated.kind(&a.kind) else {
                return false;
            };
            let below = a.namespace == namespace
                || statement::chain(&a.namespace)
                    .iter()
                    .any(|t| t == namespace);
            below
                && (a.namespace == namespace || kind.shares)
                && consumer.consumes.iter().any(|class| {
                    kind.provides.contains(class)
                        && (a.namespace == namespace
                            || self.namespaces.get(&a.namespace).is_some_and(|labels| {
                                labels.values().any(|v| v.as_str() == Some(namespace))
                            }))
                })
        })
    }

    /// The rule that refuses `ask` whatever the state, when one does.
    pub fn refuses(&self, ask: &Ask) -> Option<Broken> {
        let rule = *self.refusing(ask).first()?;
        Some(Broken::Admitted {
            rule,
            what: ask.describe(),
        })
    }

    /// The rows the statement says refuse `ask` on this state, any of which the module may
    /// name (it names the first of them in `RULES`; the statement does not model every row, so
    /// none listed says nothing): the rules that refuse it whatever the state, and a create off
    /// its kind's slot (`slots`), a protected kind's delete while consumed (`protection`).
    pub fn rows(&self, ask: &Ask) -> Vec<&'static str> {
        let mut rows: Vec<&'static str> =
            self.refusing(ask).into_iter().map(Refuses::rule).collect();
        if let (Op::Create(_), false) = (ask.op, ask.direct)
            && let Some(kind) = self.stated.kind(ask.kind)
            && let Some((slot, home)) = kind.slot
            && (ask.name != slot || home.is_some_and(|home| home != ask.namespace))
        {
            rows.push("slots");
        }
        // A protected kind's delete while a consumer resolves to it: protection, before the
        // rendered row.
        if let (Op::Delete, false) = (ask.op, ask.direct)
            && let Some(kind) = self.stated.kind(ask.kind)
            && kind.protected
            && self.consumers(ask.namespace, kind)
        {
            rows.push("protection");
        }
        rows
    }

    /// Every rule that refuses `ask` whatever the state, in the statement's order.
    fn refusing(&self, ask: &Ask) -> Vec<Refuses> {
        let mut rules = Vec::new();
        if let Op::Label { key, value } = ask.op {
            let changes = self.label(ask.namespace, key) != value;
            if changes && statement::platform_label(key) {
                rules.push(Refuses::Labels);
            }
            return rules;
        }
        if ask.direct {
            rules.push(Refuses::Releases);
            return rules;
        }
        if ask.kind == "Tenant"
            && matches!(ask.op, Op::Delete)
            && ask.namespace == ROOT
            && ask.name == "root"
        {
            rules.push(Refuses::RootTenant);
        }
        let Some(kind) = self.stated.kind(ask.kind) else {
            return rules;
        };
        let visible = match kind.visible {
            Visible::Catalog => true,
            Visible::Module => ask.by.role.administers(&ask.by.of, ask.namespace),
            Visible::Hidden => false,
        };
        if !visible && !matches!(ask.op, Op::Switch { .. }) {
            rules.push(Refuses::Visibility);
        }
        if kind.admin_only && !matches!(ask.op, Op::Switch { .. }) {
            rules.push(Refuses::Edit);
        }
        if let Op::Switch { key, on: true } = ask.op
            && let Some(module) = self.stated.module(key)
            && (module.kind != "ComputePlane" || self.stated.compute_plane)
        {
            let child = statement::child_namespace(ask.namespace, ask.name);
            // A switch already on renders nothing new, nor does one of a Tenant being torn down.
            let was_on = self
                .switches
                .get(&child)
                .is_some_and(|on| on.iter().any(|k| k == key));
            let over = !was_on
                && !self.torn.contains(&child)
                && self.apps.iter().any(|a| {
                    a.namespace == child
                        && !a.terminating
                        && ((a.name == key && a.kind != module.kind)
                            || statement::beside(key, &a.name))
                });
            if over {
                rules.push(Refuses::Adoption);
            }
        }
        if let (Op::Delete, Some((slot, None))) = (ask.op, kind.slot)
            && kind.protected
            && ask.name == slot
            && self
                .switches
                .get(ask.namespace)
                .is_some_and(|on| on.iter().any(|key| key == slot))
            // One already being uninstalled is not protected again: its first DELETE decided
            // (docs/rules.md, rendered modules).
            && !self.app(ask.namespace, slot).is_some_and(|a| a.terminating)
        {
            rules.push(Refuses::Rendered);
        }
        if let Op::Create(_) = ask.op {
            if kind.kind == "Tenant" && statement::groups_collide(ask.namespace, ask.name) {
                rules.push(Refuses::Groups);
            }
            if let Some((per, max)) = kind.limit
                && self.count(kind.kind, per, ask.namespace) >= max
            {
                rules.push(Refuses::Count);
            }
            let release = format!("{}{}", self.stated.prefix(kind), ask.name);
            let tenant = self.is_tenant(ask.namespace);
            if let Some(renders) = self.stated.rendered(ask.namespace, &release, tenant)
                && renders != Some(kind.kind)
            {
                rules.push(Refuses::Names);
            }
        }
        rules
    }

    /// Whether the rules admit `ask` on this state: stated narrowly, so that every request it
    /// names must be admitted (a warning allowed).
    pub fn admits(&self, ask: &Ask) -> bool {
        if self.refuses(ask).is_some() || !self.is_tenant(ask.namespace) {
            return false;
        }
        // A label the platform does not write, or one left as it is, is anyone's to set.
        if let Op::Label { .. } = ask.op {
            return true;
        }
        let Some(kind) = self.stated.kind(ask.kind) else {
            return false;
        };
        let count = |kind: &str, per: Per, namespace: &str| self.count(kind, per, namespace);
        match &ask.op {
            Op::Create(spec) => {
                let release = format!("{}{}", self.stated.prefix(kind), ask.name);
                let on_slot = kind.slot.is_none_or(|(slot, home)| {
                    ask.name == slot && home.is_none_or(|home| home == ask.namespace)
                });
                let room = kind
                    .limit
                    .is_none_or(|(per, max)| count(kind.kind, per, ask.namespace) < max);
                let tenant = kind.kind != "Tenant"
                    || !self
                        .namespaces
                        .contains_key(&statement::child_namespace(ask.namespace, ask.name));
                // A new Tenant's switches render modules in a Namespace nothing holds yet.
                let _ = spec;
                self.app(ask.namespace, &release).is_none() && on_slot && room && tenant
            }
            Op::Edit => kind.kind != "Tenant",
            // Answered above, before the kind: a Namespace is none.
            Op::Label { .. } => false,
            Op::Delete if kind.kind == "Tenant" => true,
            // What is being uninstalled already was judged at its first DELETE: protection and
            // the rendered rule do not judge it again (docs/rules.md).
            Op::Delete
                if self
                    .app(
                        ask.namespace,
                        &format!("{}{}", self.stated.prefix(kind), ask.name),
                    )
                    .is_some_and(|a| a.terminating) =>
            {
                true
            }
            Op::Delete => match kind.slot {
                Some((slot, _)) if kind.protected => {
                    let unconsumed = !self.consumers(ask.namespace, kind);
                    // A module whose Tenant is being torn down is rendered by nothing more.
                    let torn = self.torn.contains(ask.namespace);
                    match ask.name == slot {
                        true => torn && unconsumed,
                        false => !kind.runs_off_slot || unconsumed,
                    }
                }
                _ => !kind.protected,
            },
            Op::Switch { key, on } => {
                let child = statement::child_namespace(ask.namespace, ask.name);
                let tenant = self.app(ask.namespace, &format!("tenant-{}", ask.name));
                let Some(module) = self.stated.kinds().iter().find(|k| {
                    k.limit == Some((Per::Tenant, 1)) && k.slot.is_some_and(|(s, _)| s == *key)
                }) else {
                    return false;
                };
                // A Tenant being deleted switches nothing: helm-controller never upgrades its
                // release again and its modules go with the teardown (docs/rules.md, "A Tenant's
                // own lifecycle"), so its edit is admitted whatever the switch.
                if tenant.is_some_and(|t| t.terminating) {
                    return true;
                }
                let live = tenant.is_some()
                    && self.namespaces.contains_key(&child)
                    && (module.kind != "ComputePlane" || self.stated.compute_plane);
                let held = self.app(&child, key);
                let beside = self
                    .apps
                    .iter()
                    .any(|a| a.namespace == child && statement::beside(key, &a.name));
                live && match (on, held) {
                    (true, _) => {
                        held.is_none() && !beside && count(module.kind, Per::Tenant, &child) == 0
                    }
                    (false, None) => true,
                    (false, Some(app)) => {
                        app.kind == module.kind
                            && (!module.protected || !self.consumers(&child, module))
                    }
                }
            }
        }
    }
}

/// What a step broke: guarantees that held before and not after, and consumers that lost the
/// provider they had.
pub fn newly_broken(before: &Facts, after: &Facts) -> Vec<Broken> {
    let was = before.broken();
    // A count over its max is broken anew only where it grew.
    let counted = |b: &Broken| match b {
        Broken::Cardinality {
            kind,
            scope,
            instances,
        } => Some(((kind.clone(), scope.clone()), instances.len())),
        _ => None,
    };
    let counts: HashMap<(String, String), usize> = was.iter().filter_map(counted).collect();
    let mut out: Vec<Broken> = after
        .broken()
        .into_iter()
        .filter(|b| match counted(b) {
            Some((scope, n)) => counts.get(&scope).is_none_or(|&m| n > m),
            None => !was.contains(b),
        })
        .collect();
    // Only a kind with `protection.deletion: protect` promises its consumers to stay.
    for (consumer, class, provider) in before.served() {
        if before.protected(&provider)
            && after.holds(&consumer)
            && !after.provides(&provider, &class)
        {
            out.push(Broken::Stranded {
                consumer,
                class,
                provider,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::statement::Role;
    use crate::world::Actor;
    use serde_json::json;

    fn namespace(name: &str, labels: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}})
    }

    fn app(namespace: &str, name: &str, kind: &str) -> Value {
        json!({"apiVersion": RELEASE_API, "kind": "HelmRelease",
            "metadata": {"name": name, "namespace": namespace, "labels": {KIND_LABEL: kind}}})
    }

    /// The stock statement, on `main`.
    fn stock() -> Arc<Statement> {
        Arc::new(Statement::under(&json!({}), statement::Against::Settings).unwrap())
    }

    /// The facts of `objects` beside the root Tenant's release, which every install has.
    fn facts(objects: Vec<Value>) -> Facts {
        let root = app(ROOT, ROOT, "Tenant");
        Facts::of(&objects.into_iter().chain([root]).collect(), &stock())
    }

    #[test]
    fn the_root_tenant_gone_or_terminating_is_broken() {
        assert!(!facts(vec![]).broken().contains(&Broken::RootTenant));
        let without: Facts = Facts::of(
            &[app("tenant-a", "tenant-root", "Tenant")]
                .into_iter()
                .collect(),
            &stock(),
        );
        assert!(without.broken().contains(&Broken::RootTenant));
        let mut terminating = app(ROOT, ROOT, "Tenant");
        terminating["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        let terminating = Facts::of(&[terminating].into_iter().collect(), &stock());
        assert_eq!(
            newly_broken(&facts(vec![]), &terminating),
            [Broken::RootTenant]
        );
    }

    #[test]
    fn only_instances_that_render_count_against_max() {
        let tenant = namespace("tenant-a", json!({}));
        // Monitoring off its slot never renders (its chart refuses the name): one counts.
        let monitoring = facts(vec![
            tenant.clone(),
            app("tenant-a", "monitoring", "Monitoring"),
            app("tenant-a", "metrics", "Monitoring"),
        ]);
        assert!(monitoring.broken().is_empty());
        // Info off its slot runs: two count.
        let info = facts(vec![
            tenant,
            app("tenant-a", "info", "Info"),
            app("tenant-a", "x", "Info"),
        ]);
        assert_eq!(
            info.broken().into_iter().collect::<Vec<_>>(),
            [Broken::Cardinality {
                kind: "Info".into(),
                scope: "tenant-a".into(),
                instances: vec!["tenant-a/info".into(), "tenant-a/x".into()],
            }]
        );
        // Deleting one of three leaves it broken, not broken anew.
        let three = facts(vec![
            namespace("tenant-a", json!({})),
            app("tenant-a", "info", "Info"),
            app("tenant-a", "x", "Info"),
            app("tenant-a", "y", "Info"),
        ]);
        assert!(newly_broken(&three, &info).is_empty());
        assert_eq!(newly_broken(&info, &three).len(), 1);
    }

    #[test]
    fn a_name_a_chart_renders_is_held_by_its_kind_only() {
        let held = facts(vec![
            namespace("tenant-a", json!({})),
            app("tenant-a", "info", "ExternalDNS"),
        ]);
        assert_eq!(
            held.broken().into_iter().collect::<Vec<_>>(),
            [Broken::RenderedName {
                release: "tenant-a/info".into(),
                holder: "ExternalDNS".into()
            }]
        );
        let own = facts(vec![
            namespace("tenant-a", json!({})),
            app("tenant-a", "info", "Info"),
        ]);
        assert!(own.broken().is_empty());
    }

    #[test]
    fn a_consumer_that_loses_the_provider_it_had_is_stranded_unless_it_is_gone() {
        let labels = json!({"namespace.cozystack.io/ingress": "tenant-root"});
        let before = facts(vec![
            namespace("tenant-root", json!({})),
            namespace("tenant-a", labels.clone()),
            app("tenant-root", "ingress", "Ingress"),
            app("tenant-a", "bucket-media", "Bucket"),
        ]);
        assert!(before.served().contains(&(
            "Bucket tenant-a/bucket-media".to_owned(),
            "ingress".to_owned(),
            "Ingress tenant-root/ingress".to_owned()
        )));
        let stranded = [Broken::Stranded {
            consumer: "Bucket tenant-a/bucket-media".into(),
            class: "ingress".into(),
            provider: "Ingress tenant-root/ingress".into(),
        }];
        // The provider gone, or only one off its slot (never renders): stranded.
        for provider in [None, Some(app("tenant-root", "dev", "Ingress"))] {
            let mut objects = vec![
                namespace("tenant-root", json!({})),
                namespace("tenant-a", labels.clone()),
                app("tenant-a", "bucket-media", "Bucket"),
            ];
            objects.extend(provider);
            assert_eq!(newly_broken(&before, &facts(objects)), stranded);
        }
        // Moved onto another live provider as its own goes: still the one it had, lost.
        let moved = facts(vec![
            namespace("tenant-root", json!({})),
            namespace(
                "tenant-a",
                json!({"namespace.cozystack.io/ingress": "tenant-a"}),
            ),
            app("tenant-a", "ingress", "Ingress"),
            app("tenant-a", "bucket-media", "Bucket"),
        ]);
        assert_eq!(newly_broken(&before, &moved), stranded);
        // Moved onto a nearer provider while its own stays: nothing lost.
        let nearer = facts(vec![
            namespace("tenant-root", json!({})),
            namespace(
                "tenant-a",
                json!({"namespace.cozystack.io/ingress": "tenant-a"}),
            ),
            app("tenant-root", "ingress", "Ingress"),
            app("tenant-a", "ingress", "Ingress"),
            app("tenant-a", "bucket-media", "Bucket"),
        ]);
        assert!(newly_broken(&before, &nearer).is_empty());
        // The consumer deleted with it: nothing stranded.
        let gone = facts(vec![
            namespace("tenant-root", json!({})),
            namespace("tenant-a", labels),
        ]);
        assert!(newly_broken(&before, &gone).is_empty());
    }

    fn actor(role: Role, of: &str) -> Actor {
        Actor::new(role, of)
    }

    fn ask<'a>(
        by: &'a Actor,
        op: Op<'a>,
        kind: &'a str,
        namespace: &'a str,
        name: &'a str,
    ) -> Ask<'a> {
        Ask::new(by, op, kind, namespace, name, false)
    }

    #[test]
    fn who_may_write_what_whatever_the_state() {
        let state = facts(vec![
            namespace("tenant-a", json!({})),
            namespace("tenant-a-b", json!({})),
        ]);
        let spec = json!({});
        let refused = |ask: &Ask| state.refuses(ask).map(|b| b.invariant());
        let (admin, user, viewer) = (
            actor(Role::Admin, "tenant-a"),
            actor(Role::Use, "tenant-a"),
            actor(Role::View, "tenant-a"),
        );
        // A module by a use-group member; an administrator of an ancestor may.
        assert_eq!(
            refused(&ask(
                &user,
                Op::Create(&spec),
                "Monitoring",
                "tenant-a",
                "monitoring"
            )),
            Some("visibility: module kinds by tenant administrators, hidden ones by the platform")
        );
        assert_eq!(
            refused(&ask(
                &admin,
                Op::Create(&spec),
                "Monitoring",
                "tenant-a-b",
                "monitoring"
            )),
            None
        );
        // Hidden and adminOnly kinds by anyone; a catalog kind by a viewer.
        assert!(refused(&ask(&admin, Op::Delete, "Gateway", "tenant-a", "gateway")).is_some());
        assert_eq!(
            refused(&ask(
                &admin,
                Op::Edit,
                "ComputePlane",
                "tenant-a",
                "computeplane"
            )),
            Some("edit: only the platform writes an adminOnly kind")
        );
        assert_eq!(
            refused(&ask(&viewer, Op::Delete, "Postgres", "tenant-a", "db")),
            None
        );
        // The root Tenant, a colliding Tenant, a name another kind renders, a release.
        assert!(refused(&ask(&admin, Op::Delete, "Tenant", "tenant-root", "root")).is_some());
        assert_eq!(
            refused(&ask(
                &admin,
                Op::Create(&spec),
                "Tenant",
                "tenant-a",
                "super"
            )),
            Some("groups: no Tenant binds a group of its ancestors")
        );
        assert_eq!(
            refused(&ask(
                &admin,
                Op::Create(&spec),
                "ExternalDNS",
                "tenant-a",
                "seaweedfs-db"
            )),
            Some("rendered names: no name Cozystack renders is taken by another kind")
        );
        let direct = Ask::new(
            &admin,
            Op::Create(&spec),
            "Postgres",
            "tenant-a",
            "db",
            true,
        );
        assert_eq!(
            refused(&direct),
            Some("releases: only the platform writes app HelmReleases")
        );
    }

    #[test]
    fn what_the_rules_must_admit_on_the_state() {
        let labels = json!({"namespace.cozystack.io/monitoring": "tenant-a"});
        let state = facts(vec![
            namespace("tenant-a", json!({})),
            namespace("tenant-a-b", labels),
            app("tenant-root", "tenant-a", "Tenant"),
            app("tenant-a", "tenant-b", "Tenant"),
            app("tenant-a", "monitoring", "Monitoring"),
            app("tenant-a-b", "kubernetes-dev", "Kubernetes"),
        ]);
        let spec = json!({});
        let admin = actor(Role::Admin, "tenant-a");
        let user = actor(Role::Use, "tenant-a-b");
        // A catalog app by a use-group member; a free slot by an administrator.
        assert!(state.admits(&ask(
            &user,
            Op::Create(&spec),
            "Postgres",
            "tenant-a-b",
            "db"
        )));
        assert!(state.admits(&ask(
            &admin,
            Op::Create(&spec),
            "Info",
            "tenant-a-b",
            "info"
        )));
        // Off its slot, over the count, or a name taken: not promised.
        assert!(!state.admits(&ask(&admin, Op::Create(&spec), "Info", "tenant-a-b", "x")));
        assert!(!state.admits(&ask(
            &admin,
            Op::Create(&spec),
            "Monitoring",
            "tenant-a",
            "monitoring"
        )));
        assert!(!state.admits(&ask(
            &user,
            Op::Create(&spec),
            "Kubernetes",
            "tenant-a-b",
            "dev"
        )));
        // Turning off a module a child's Kubernetes consumes: not promised; the child's own
        // switch on, with nothing on its names: promised.
        let off = Op::Switch {
            key: "monitoring",
            on: false,
        };
        assert!(!state.admits(&ask(&admin, off, "Tenant", "tenant-root", "a")));
        let on = Op::Switch {
            key: "etcd",
            on: true,
        };
        assert!(state.admits(&ask(&admin, on, "Tenant", "tenant-a", "b")));
        // Deleting a catalog app, or a Tenant other than the root: promised.
        assert!(state.admits(&ask(&user, Op::Delete, "Kubernetes", "tenant-a-b", "dev")));
        assert!(state.admits(&ask(&admin, Op::Delete, "Tenant", "tenant-a", "b")));
        assert!(!state.admits(&ask(&admin, Op::Delete, "Tenant", "tenant-root", "root")));
    }

    #[test]
    fn a_namespace_label_the_platform_writes_is_the_platform_s() {
        let labels = json!({"namespace.cozystack.io/monitoring": "tenant-a",
            "tenant.cozystack.io/tenant-root": ""});
        let state = facts(vec![namespace("tenant-a-b", labels)]);
        let admin = actor(Role::Admin, "tenant-a-b");
        let label = |key, value| {
            ask(
                &admin,
                Op::Label { key, value },
                "Namespace",
                "tenant-a-b",
                "tenant-a-b",
            )
        };
        let refused = |ask: &Ask| state.refuses(ask).map(|b| b.invariant());
        let labels_are =
            Some("namespace: a Namespace's ancestor and provider labels are the platform's");
        // A provider label moved or removed, an ancestor label, a capability label set.
        for (key, value) in [
            ("namespace.cozystack.io/monitoring", Some("tenant-a-b")),
            ("namespace.cozystack.io/monitoring", None),
            ("tenant.cozystack.io/tenant-root", None),
            ("namespace.cozystack.io/capability.backup", Some("tenant-a")),
        ] {
            assert_eq!(refused(&label(key, value)), labels_are, "{key}={value:?}");
            assert!(!state.admits(&label(key, value)), "{key}={value:?}");
        }
        // Left as it is, or a label the platform does not write: anyone's.
        for (key, value) in [
            ("namespace.cozystack.io/monitoring", Some("tenant-a")),
            ("namespace.cozystack.io/capability.backup", None),
            ("namespace.cozystack.io/host", Some("b.example.org")),
            ("team", Some("db")),
        ] {
            assert_eq!(refused(&label(key, value)), None, "{key}={value:?}");
            assert!(state.admits(&label(key, value)), "{key}={value:?}");
        }
    }
}
