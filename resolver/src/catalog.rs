//! What a dashboard shows: for every kind, where it appears and whether this user may create
//! one in this namespace now. Each answer is [`crate::evaluate`] on the CREATE the dashboard
//! would send, so the dashboard and admission cannot disagree.

use serde::{Deserialize, Serialize};

use crate::facts::{Instance, Namespace, Snapshot};
use crate::identity::User;
use crate::request::{ObjectState, Operation, Request, Surface};
use crate::rules::{Definition, DefinitionSet, Visibility};
use crate::settings::Settings;

/// Where the dashboard shows a kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Placement {
    /// `catalog`: the Marketplace.
    Marketplace,
    /// `module`: Administration → Modules.
    Modules,
    /// `hidden`: nowhere.
    Hidden,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    pub kind: String,
    pub placement: Placement,
    pub can_create: bool,
    /// Why not, when `can_create` is false: the message admission would return.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// What admission would warn about (a consumed class without a provider).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// One entry per definition, in the definitions' order.
pub fn catalog(
    definitions: &[Definition],
    user: &User,
    namespace: &Namespace,
    instances: &[Instance],
    settings: &Settings,
) -> Vec<Entry> {
    let set = DefinitionSet::build(definitions.to_vec(), &settings.definitions);
    let snapshot = Snapshot {
        definitions: definitions.to_vec(),
        namespaces: vec![namespace.clone()],
        instances: instances.to_vec(),
    };
    definitions
        .iter()
        .map(|definition| {
            let placement = match set.get(&definition.kind) {
                Ok(Some(rules)) => match rules.visibility {
                    Visibility::Catalog => Placement::Marketplace,
                    Visibility::Module => Placement::Modules,
                    Visibility::Hidden => Placement::Hidden,
                },
                _ => Placement::Marketplace,
            };
            // An empty name never matches an existing instance: nothing is excluded from counts.
            let request = Request {
                surface: Surface::Application,
                operation: Operation::Create,
                kind: definition.kind.clone(),
                namespace: namespace.name.clone(),
                name: String::new(),
                user: user.clone(),
                dry_run: true,
                subresource: None,
                object: Some(ObjectState::default()),
                old_object: None,
            };
            let verdict = crate::evaluate(&request, settings, &snapshot);
            Entry {
                kind: definition.kind.clone(),
                placement,
                can_create: verdict.allowed,
                reason: verdict.message,
                warnings: verdict.warnings,
            }
        })
        .collect()
}
