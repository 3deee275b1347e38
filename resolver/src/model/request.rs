//! An admission request reduced to what the decisions read. The policy decodes the
//! Kubernetes wire format into this; nothing here knows about JSON admission reviews.

use serde::{Deserialize, Serialize};

use crate::model::identity::User;
use crate::model::tenant::{ANCESTOR_PREFIX, LABEL_PREFIX, Labels};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Operation {
    Create,
    Update,
    Delete,
    Connect,
}

/// The identity labels every app HelmRelease carries.
pub const KIND_LABEL: &str = "apps.cozystack.io/application.kind";
pub const GROUP_LABEL: &str = "apps.cozystack.io/application.group";
pub const NAME_LABEL: &str = "apps.cozystack.io/application.name";
pub const APPS_GROUP: &str = "apps.cozystack.io";

/// Whether a rule reads label `key` of the object under review: a Namespace's tenant ancestor
/// and provider labels, a HelmRelease's identity labels. An adapter need not decode the rest
/// (most of a Namespace's labels are Kubernetes', Helm's and Flux's).
pub fn is_read_label(key: &str) -> bool {
    key.starts_with(ANCESTOR_PREFIX)
        || key.starts_with(LABEL_PREFIX)
        || [KIND_LABEL, GROUP_LABEL, NAME_LABEL].contains(&key)
}

/// Which application a HelmRelease belongs to, from its identity labels.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppIdentity {
    pub kind: String,
    /// `apps.cozystack.io/application.name`, or the release name when the label is absent.
    pub app: String,
}

impl AppIdentity {
    /// Reads the identity labels; `None` for a HelmRelease that is not an app release.
    pub fn from_labels(labels: &Labels, release: &str) -> Option<AppIdentity> {
        let kind = labels.get(KIND_LABEL)?;
        if labels.get(GROUP_LABEL).map(String::as_str) != Some(APPS_GROUP) || kind.is_empty() {
            return None;
        }
        Some(AppIdentity {
            kind: kind.clone(),
            app: labels
                .get(NAME_LABEL)
                .filter(|n| !n.is_empty())
                .cloned()
                .unwrap_or_else(|| release.to_owned()),
        })
    }
}

/// One version (new or old) of the object under review.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ObjectState {
    pub labels: Labels,
    /// `metadata.deletionTimestamp` is set: the object is already being deleted.
    pub terminating: bool,
    /// The spec (an Application's values, a HelmRelease's spec), compared to detect edits.
    pub spec: serde_json::Value,
}

/// What the request is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Surface {
    /// `apps.cozystack.io/v1alpha1` `<Kind>` through cozystack-api's admission chain.
    Application,
    /// `helm.toolkit.fluxcd.io/v2` `HelmRelease`.
    HelmRelease,
    /// core `v1` `Namespace`.
    Namespace,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Request {
    pub surface: Surface,
    pub operation: Operation,
    /// For an Application, the kind (`request.kind.kind`); otherwise the resource kind.
    pub kind: String,
    /// Empty for a Namespace request (cluster-scoped).
    pub namespace: String,
    pub name: String,
    pub user: User,
    #[serde(default)]
    pub dry_run: bool,
    #[serde(default)]
    pub subresource: Option<String>,
    /// `request.object`: absent on DELETE.
    pub object: Option<ObjectState>,
    /// `request.oldObject`: on UPDATE and DELETE.
    pub old_object: Option<ObjectState>,
}

impl Request {
    /// The app identity of a HelmRelease state.
    pub fn release_identity(&self, state: Option<&ObjectState>) -> Option<AppIdentity> {
        state.and_then(|s| AppIdentity::from_labels(&s.labels, &self.name))
    }
}

impl Request {
    /// `CREATE`, `UPDATE`, … as Kubernetes spells it.
    pub fn operation_name(&self) -> &'static str {
        match self.operation {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
            Operation::Connect => "CONNECT",
        }
    }
}
