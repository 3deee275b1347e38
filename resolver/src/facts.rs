//! The cluster state the decisions read, behind a trait: the policy answers it with
//! Kubewarden host calls, tests and the dashboard build with an in-memory [`Snapshot`].

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::error::LookupError;
use crate::rules::Definition;
use crate::tenant::Labels;

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
        let labels: Labels = self
            .labels
            .iter()
            .filter(|(k, _)| keep.contains(*k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
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
}

impl Instance {
    /// `name`, or `namespace/name` when seen from another namespace, marked when terminating.
    pub fn label_from(&self, namespace: &str) -> String {
        let mut label = if self.namespace == namespace {
            self.app.clone()
        } else {
            format!("{}/{}", self.namespace, self.app)
        };
        if self.terminating {
            label.push_str(" (terminating)");
        }
        label
    }
}

/// Lookups the decisions may make. Each method is one kind of lookup, so a caller can count
/// and bound them; implementations should memoise within one evaluation.
pub trait Cluster {
    /// Every ApplicationDefinition's kind and rule fields.
    fn definitions(&self) -> Result<Vec<Definition>, LookupError>;
    /// One namespace by name.
    fn namespace(&self, name: &str) -> Result<Namespace, LookupError>;
    /// Every namespace that carries at least one of the label keys `keep`, with only those
    /// labels: protection reads a handful of keys of thousands of namespaces.
    fn namespaces(&self, keep: &BTreeSet<String>) -> Result<Vec<Namespace>, LookupError>;
    /// Every instance of `kind`, in all namespaces. `release_prefix` is the kind's
    /// `spec.release.prefix` when its ApplicationDefinition states one.
    fn instances(
        &self,
        kind: &str,
        release_prefix: Option<&str>,
    ) -> Result<Vec<Instance>, LookupError>;
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
    fn definitions(&self) -> Result<Vec<Definition>, LookupError> {
        Ok(self.definitions.clone())
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

    fn instances(&self, kind: &str, _: Option<&str>) -> Result<Vec<Instance>, LookupError> {
        Ok(self
            .instances
            .iter()
            .filter(|i| i.kind == kind)
            .cloned()
            .collect())
    }
}
