//! The cluster state the decisions read, behind a trait: the policy answers it with
//! Kubewarden host calls, tests and the dashboard build with an in-memory [`Snapshot`].

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::model::collect::inserted;
use crate::model::definition::Definition;
use crate::model::error::LookupError;
use crate::model::listing::{Decoded, DefinitionList};
use crate::model::tenant::Labels;

/// A namespace: its name and labels.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Namespace {
    pub name: String,
    #[serde(default)]
    pub labels: Labels,
}

impl Namespace {
    /// This namespace with only the labels in `keep`; `None` when it carries none of them.
    pub fn keeping(&self, keep: &BTreeSet<String>) -> Option<Namespace> {
        let labels: Labels = inserted(
            self.labels
                .iter()
                .filter(|(k, _)| keep.contains(*k))
                .map(|(k, v)| (k.clone(), v.clone())),
        );
        (!labels.is_empty()).then(|| Namespace {
            name: self.name.clone(),
            labels,
        })
    }
}

/// An app instance, i.e. an app HelmRelease.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Instance {
    pub kind: String,
    pub namespace: String,
    /// The HelmRelease name (`<prefix><app>`).
    pub release: String,
    /// The application name (`apps.cozystack.io/application.name`).
    pub app: String,
    #[serde(default)]
    pub terminating: bool,
    /// The Helm release that rendered this HelmRelease, `<namespace>/<name>` as Helm's
    /// ownership annotations state it; `None` for a release cozystack-api wrote.
    #[serde(
        default,
        rename = "renderedBy",
        skip_serializing_if = "Option::is_none"
    )]
    pub rendered_by: Option<String>,
    /// `spec.values`, where the policy reads them: a Tenant's module switches.
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub values: serde_json::Value,
}

/// Helm's ownership annotations on every object a chart renders (Helm's `setMetadataVisitor`;
/// migrations 26 and 31 of Cozystack rewrite exactly these keys). cozystack-api never writes
/// them, and its UPDATE rebuilds a HelmRelease without them.
pub const HELM_RELEASE_NAME: &str = "meta.helm.sh/release-name";
pub const HELM_RELEASE_NAMESPACE: &str = "meta.helm.sh/release-namespace";

/// What the policy reads of one HelmRelease it looks up by name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReleaseMeta {
    pub labels: Labels,
    pub annotations: Labels,
    /// `spec.values`: for a Tenant's release, its module switches.
    pub values: serde_json::Value,
    /// `metadata.deletionTimestamp` is set: helm-controller is uninstalling it.
    pub terminating: bool,
}

impl ReleaseMeta {
    /// Whether Helm release `namespace/name` rendered this object (its ownership annotations).
    pub fn rendered_by(&self, namespace: &str, name: &str) -> bool {
        let annotation = |key: &str| self.annotations.get(key).map(String::as_str);
        annotation(HELM_RELEASE_NAME) == Some(name)
            && annotation(HELM_RELEASE_NAMESPACE) == Some(namespace)
    }
}

/// The instances of one kind, their names in one buffer: a list of thousands costs a few
/// allocations instead of four per instance (in wasm, half the cost of a listed item).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Instances {
    kind: String,
    text: String,
    entries: Vec<Entry>,
}

/// Byte ranges of `Instances::text`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    namespace: (usize, usize),
    release: (usize, usize),
    app: (usize, usize),
    terminating: bool,
}

/// One instance, borrowed from [`Instances`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InstanceRef<'a> {
    pub kind: &'a str,
    pub namespace: &'a str,
    pub release: &'a str,
    pub app: &'a str,
    pub terminating: bool,
}

impl Instances {
    pub fn new(kind: &str) -> Self {
        Instances {
            kind: kind.to_owned(),
            ..Instances::default()
        }
    }

    pub fn push(&mut self, namespace: &str, release: &str, app: &str, terminating: bool) {
        let mut add = |s: &str| {
            let start = self.text.len();
            self.text.push_str(s);
            (start, self.text.len())
        };
        let entry = Entry {
            namespace: add(namespace),
            release: add(release),
            app: add(app),
            terminating,
        };
        self.entries.push(entry);
    }

    /// The instances `keep` holds to.
    pub fn filtered(&self, keep: impl Fn(&InstanceRef) -> bool) -> Instances {
        let mut list = Instances::new(&self.kind);
        for i in self.iter().filter(|i| keep(i)) {
            list.push(i.namespace, i.release, i.app, i.terminating);
        }
        list
    }

    pub fn iter(&self) -> impl Iterator<Item = InstanceRef<'_>> {
        let text = |(start, end): (usize, usize)| &self.text[start..end];
        self.entries.iter().map(move |e| InstanceRef {
            kind: &self.kind,
            namespace: text(e.namespace),
            release: text(e.release),
            app: text(e.app),
            terminating: e.terminating,
        })
    }
}

impl InstanceRef<'_> {
    /// `name`, or `namespace/name` when seen from another namespace, marked when terminating.
    pub fn label_from(&self, namespace: &str) -> String {
        let mut label = if self.namespace == namespace {
            self.app.to_owned()
        } else {
            format!("{}/{}", self.namespace, self.app)
        };
        if self.terminating {
            label.push_str(" (terminating)");
        }
        label
    }
}

impl From<InstanceRef<'_>> for Instance {
    fn from(i: InstanceRef<'_>) -> Self {
        Instance {
            kind: i.kind.to_owned(),
            namespace: i.namespace.to_owned(),
            release: i.release.to_owned(),
            app: i.app.to_owned(),
            terminating: i.terminating,
            rendered_by: None,
            values: serde_json::Value::Null,
        }
    }
}

/// Lookups the decisions may make. Each method is one kind of lookup, so a caller can count
/// and bound them; implementations should memoise within one evaluation.
pub trait Cluster {
    /// The ApplicationDefinitions, to be decoded a kind at a time.
    fn definitions(&self) -> Result<Box<dyn DefinitionList>, LookupError>;
    /// One namespace by name.
    fn namespace(&self, name: &str) -> Result<Namespace, LookupError>;
    /// Every namespace that carries at least one of the label keys `keep`, with only those
    /// labels: protection reads a handful of keys of thousands of namespaces.
    fn namespaces(&self, keep: &BTreeSet<String>) -> Result<Vec<Namespace>, LookupError>;
    /// Every instance of `kind`, in all namespaces. `release_prefix` is the kind's
    /// `spec.release.prefix` when its ApplicationDefinition states one.
    fn instances(&self, kind: &str, release_prefix: Option<&str>)
    -> Result<Instances, LookupError>;
    /// The labels and annotations of one HelmRelease; `None` when it does not exist.
    fn release(&self, namespace: &str, release: &str) -> Result<Option<ReleaseMeta>, LookupError>;
    /// The instances of several kinds from one list, each release's kind told by its name
    /// (`<prefix><app>`); `kinds` pairs each kind with a prefix that no other one starts with.
    /// `None` when a release fits none of the prefixes: the caller then lists kind by kind.
    fn instances_of_kinds(
        &self,
        kinds: &[(&str, &str)],
    ) -> Result<Option<Vec<Instances>>, LookupError>;
}

/// Sorts releases listed for several kinds into one [`Instances`] per kind by their names.
pub struct ByPrefix<'k> {
    kinds: &'k [(&'k str, &'k str)],
    lists: Vec<Instances>,
}

impl<'k> ByPrefix<'k> {
    pub fn new(kinds: &'k [(&'k str, &'k str)]) -> Self {
        ByPrefix {
            kinds,
            lists: kinds.iter().map(|(kind, _)| Instances::new(kind)).collect(),
        }
    }

    /// Files a release under the kind whose prefix it starts with; false when none fits.
    pub fn push(&mut self, namespace: &str, release: &str, terminating: bool) -> bool {
        let Some(at) = self
            .kinds
            .iter()
            .position(|(_, prefix)| release.starts_with(prefix))
        else {
            return false;
        };
        let app = &release[self.kinds[at].1.len()..];
        self.lists[at].push(namespace, release, app, terminating);
        true
    }

    pub fn into_lists(self) -> Vec<Instances> {
        self.lists
    }
}

/// An in-memory cluster: the facts as plain data.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    #[serde(default)]
    pub definitions: Vec<Definition>,
    #[serde(default)]
    pub namespaces: Vec<Namespace>,
    #[serde(default)]
    pub instances: Vec<Instance>,
}

impl Cluster for Snapshot {
    fn definitions(&self) -> Result<Box<dyn DefinitionList>, LookupError> {
        Ok(Box::new(Decoded::new(self.definitions.clone())))
    }

    fn namespace(&self, name: &str) -> Result<Namespace, LookupError> {
        self.namespaces
            .iter()
            .find(|ns| ns.name == name)
            .cloned()
            .ok_or_else(|| LookupError::new(format!("get Namespace {name}"), "not found"))
    }

    fn namespaces(&self, keep: &BTreeSet<String>) -> Result<Vec<Namespace>, LookupError> {
        Ok(self
            .namespaces
            .iter()
            .filter_map(|ns| ns.keeping(keep))
            .collect())
    }

    fn instances(&self, kind: &str, _: Option<&str>) -> Result<Instances, LookupError> {
        let mut list = Instances::new(kind);
        for i in self.instances.iter().filter(|i| i.kind == kind) {
            list.push(&i.namespace, &i.release, &i.app, i.terminating);
        }
        Ok(list)
    }

    fn instances_of_kinds(
        &self,
        kinds: &[(&str, &str)],
    ) -> Result<Option<Vec<Instances>>, LookupError> {
        let mut sorted = ByPrefix::new(kinds);
        for i in &self.instances {
            if kinds.iter().any(|(kind, _)| *kind == i.kind)
                && !sorted.push(&i.namespace, &i.release, i.terminating)
            {
                return Ok(None);
            }
        }
        Ok(Some(sorted.into_lists()))
    }

    fn release(&self, namespace: &str, release: &str) -> Result<Option<ReleaseMeta>, LookupError> {
        let Some(i) = self
            .instances
            .iter()
            .find(|i| i.namespace == namespace && i.release == release)
        else {
            return Ok(None);
        };
        let labels = [
            (crate::model::request::KIND_LABEL, i.kind.as_str()),
            (
                crate::model::request::GROUP_LABEL,
                crate::model::request::APPS_GROUP,
            ),
            (crate::model::request::NAME_LABEL, i.app.as_str()),
        ];
        let owner = i.rendered_by.as_deref().and_then(|r| r.split_once('/'));
        let annotations = owner
            .into_iter()
            .flat_map(|(ns, name)| [(HELM_RELEASE_NAMESPACE, ns), (HELM_RELEASE_NAME, name)]);
        let owned = |(k, v): (&str, &str)| (k.to_owned(), v.to_owned());
        Ok(Some(ReleaseMeta {
            labels: inserted(labels.into_iter().map(owned)),
            annotations: inserted(annotations.map(owned)),
            values: i.values.clone(),
            terminating: i.terminating,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn instances_keep_each_name_apart() {
        let mut list = Instances::new("Postgres");
        list.push("tenant-a", "postgres-db", "db", false);
        list.push("tenant-b", "", "", true);
        list.push("tenant-é", "postgres-x", "x", false);
        let seen: Vec<Instance> = list.iter().map(Instance::from).collect();
        let expected = [
            ("tenant-a", "postgres-db", "db", false),
            ("tenant-b", "", "", true),
            ("tenant-é", "postgres-x", "x", false),
        ]
        .map(|(namespace, release, app, terminating)| Instance {
            kind: "Postgres".into(),
            namespace: namespace.into(),
            release: release.into(),
            app: app.into(),
            terminating,
            rendered_by: None,
            values: serde_json::Value::Null,
        });
        assert_eq!(seen, expected);
        assert_eq!(
            list.iter().nth(1).unwrap().label_from("tenant-a"),
            "tenant-b/ (terminating)"
        );
    }
}
