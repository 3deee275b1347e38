//! What the rules promise, checked on the state itself, apart from the module: each guarantee
//! read off the releases and Namespaces the cluster holds, with the stock rule set as data
//! (`resolver/stock-rules.yaml`, compiled into the resolver) and the charts' facts (which instances
//! render). A violation the state did not have before an admitted step is the module's.

use std::collections::{BTreeSet, HashMap};

use cozystack_policy_runtime::cluster::ClusterObjects;
use cozystack_resolver::model::builtin::{self, KINDS};
use cozystack_resolver::model::kinds::Scope;
use serde_json::Value;

use crate::writes::RELEASE_API;

const KIND_LABEL: &str = "apps.cozystack.io/application.kind";
const ROOT: &str = "tenant-root";

/// A guarantee that does not hold, naming what breaks it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Broken {
    /// More rendering instances of a kind in a scope than its `cardinality.max`.
    Cardinality {
        kind: String,
        scope: String,
        instances: Vec<String>,
    },
    /// A name a chart renders held by an app of another kind.
    RenderedName { release: String, holder: String },
    /// A consumer that was served loses its provider.
    Stranded { consumer: String, class: String },
    /// The root Tenant's release, which every tenant hangs from, is gone or being deleted
    /// (`packages/system/cozystack-basics/templates/tenant-root.yaml` makes it once; nothing
    /// makes it again).
    RootTenant,
}

impl Broken {
    /// The invariant, as the summary and the counterexample name it.
    pub fn invariant(&self) -> &'static str {
        match self {
            Broken::Cardinality { .. } => "cardinality: instances that render stay within max",
            Broken::RenderedName { .. } => {
                "rendered names: no name a chart renders is held by another kind"
            }
            Broken::Stranded { .. } => {
                "protection: no consumer left without the provider it resolved to"
            }
            Broken::RootTenant => "root tenant: tenant-root/tenant-root is never deleted",
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
                format!("{release} is rendered by a chart but held by {holder}")
            }
            Broken::Stranded { consumer, class } => {
                format!("{consumer} consumed {class} from a live provider and no longer does")
            }
            Broken::RootTenant => {
                "the root Tenant's release tenant-root/tenant-root is gone or terminating"
                    .to_owned()
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

/// The facts the guarantees are read from.
pub struct Facts {
    apps: Vec<App>,
    /// Each Namespace's labels.
    namespaces: HashMap<String, serde_json::Map<String, Value>>,
}

impl Facts {
    pub fn of(cluster: &ClusterObjects) -> Facts {
        let mut apps = Vec::new();
        let mut namespaces = HashMap::new();
        for object in cluster.values() {
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
        Facts { apps, namespaces }
    }

    /// Whether an app renders: a chart that refuses its name ran nothing.
    fn renders(app: &App) -> bool {
        let prefix = builtin::release_prefix(&app.kind).unwrap_or_default();
        let name = app.name.strip_prefix(prefix).unwrap_or(&app.name);
        !app.terminating && builtin::renders(&app.kind, &app.namespace, name)
    }

    fn is_tenant(&self, namespace: &str) -> bool {
        namespace == ROOT
            || (namespace.starts_with("tenant-") && self.namespaces.contains_key(namespace))
    }

    /// Every guarantee that does not hold.
    pub fn broken(&self) -> BTreeSet<Broken> {
        let mut out = BTreeSet::new();
        // Counts of rendering instances.
        for row in KINDS {
            let Some(cardinality) = &row.cardinality else {
                continue;
            };
            let mut scopes: HashMap<String, Vec<String>> = HashMap::new();
            for app in self
                .apps
                .iter()
                .filter(|a| a.kind == row.kind && Self::renders(a))
            {
                let scope = match cardinality.scope {
                    Scope::Cluster => "the cluster".to_owned(),
                    _ => app.namespace.clone(),
                };
                scopes
                    .entry(scope)
                    .or_default()
                    .push(format!("{}/{}", app.namespace, app.name));
            }
            for (scope, mut instances) in scopes {
                if instances.len() > cardinality.max as usize {
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
        // Names the charts render.
        for app in &self.apps {
            let tenant = self.is_tenant(&app.namespace);
            for rendered in builtin::rendered_as(&app.name, &app.namespace, tenant) {
                if let Some(kind) = rendered.kind
                    && kind != app.kind
                {
                    out.insert(Broken::RenderedName {
                        release: format!("{}/{}", app.namespace, app.name),
                        holder: app.kind.clone(),
                    });
                }
            }
        }
        out
    }

    /// Each consumer and class it is served, from the provider its namespace resolves it to.
    pub fn served(&self) -> BTreeSet<(String, String)> {
        let mut out = BTreeSet::new();
        for app in self.apps.iter().filter(|a| !a.terminating) {
            let Some(row) = KINDS.iter().find(|k| k.kind == app.kind) else {
                continue;
            };
            for class in row.consumes {
                let label = format!("namespace.cozystack.io/{class}");
                let provider = match self.namespaces.get(&app.namespace) {
                    Some(labels) => match labels.get(&label).and_then(Value::as_str) {
                        Some(ns) => ns.to_owned(),
                        None if app.namespace == ROOT => ROOT.to_owned(),
                        None => continue,
                    },
                    None => continue,
                };
                let live = self.apps.iter().any(|p| {
                    p.namespace == provider
                        && Self::renders(p)
                        && KINDS
                            .iter()
                            .any(|k| k.kind == p.kind && k.provides.contains(class))
                });
                if live {
                    out.insert((
                        format!("{} {}/{}", app.kind, app.namespace, app.name),
                        (*class).to_owned(),
                    ));
                }
            }
        }
        out
    }

    /// Whether an app still exists (a consumer deleted is not stranded).
    pub fn holds(&self, consumer: &str) -> bool {
        self.apps
            .iter()
            .any(|a| !a.terminating && format!("{} {}/{}", a.kind, a.namespace, a.name) == consumer)
    }
}

/// What a step broke: guarantees that held before and not after, and consumers it stranded.
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
    let served_after = after.served();
    for (consumer, class) in before.served() {
        if after.holds(&consumer) && !served_after.contains(&(consumer.clone(), class.clone())) {
            out.push(Broken::Stranded { consumer, class });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn namespace(name: &str, labels: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}})
    }

    fn app(namespace: &str, name: &str, kind: &str) -> Value {
        json!({"apiVersion": RELEASE_API, "kind": "HelmRelease",
            "metadata": {"name": name, "namespace": namespace, "labels": {KIND_LABEL: kind}}})
    }

    /// The facts of `objects` beside the root Tenant's release, which every install has.
    fn facts(objects: Vec<Value>) -> Facts {
        let root = app(ROOT, ROOT, "Tenant");
        Facts::of(&objects.into_iter().chain([root]).collect())
    }

    #[test]
    fn the_root_tenant_gone_or_terminating_is_broken() {
        assert!(!facts(vec![]).broken().contains(&Broken::RootTenant));
        let without: Facts = Facts::of(
            &[app("tenant-a", "tenant-root", "Tenant")]
                .into_iter()
                .collect(),
        );
        assert!(without.broken().contains(&Broken::RootTenant));
        let mut terminating = app(ROOT, ROOT, "Tenant");
        terminating["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        let terminating = Facts::of(&[terminating].into_iter().collect());
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
    fn a_consumer_that_loses_its_provider_is_stranded_unless_it_is_gone() {
        let labels = json!({"namespace.cozystack.io/ingress": "tenant-root"});
        let before = facts(vec![
            namespace("tenant-root", json!({})),
            namespace("tenant-a", labels.clone()),
            app("tenant-root", "ingress", "Ingress"),
            app("tenant-a", "bucket-media", "Bucket"),
        ]);
        assert!(before.served().contains(&(
            "Bucket tenant-a/bucket-media".to_owned(),
            "ingress".to_owned()
        )));
        // The provider gone, or only one off its slot (never renders): stranded.
        for provider in [None, Some(app("tenant-root", "dev", "Ingress"))] {
            let mut objects = vec![
                namespace("tenant-root", json!({})),
                namespace("tenant-a", labels.clone()),
                app("tenant-a", "bucket-media", "Bucket"),
            ];
            objects.extend(provider);
            assert_eq!(
                newly_broken(&before, &facts(objects)),
                [Broken::Stranded {
                    consumer: "Bucket tenant-a/bucket-media".into(),
                    class: "ingress".into()
                }]
            );
        }
        // The consumer deleted with it: nothing stranded.
        let gone = facts(vec![
            namespace("tenant-root", json!({})),
            namespace("tenant-a", labels),
        ]);
        assert!(newly_broken(&before, &gone).is_empty());
    }
}
