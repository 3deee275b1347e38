//! What a dashboard shows: for every kind, where it appears and whether this user may create
//! one in this namespace now. The policy's half is [`crate::decide::evaluate`] on the CREATE the
//! dashboard would send, so the dashboard and admission cannot disagree; RBAC's half is what
//! the dashboard learned from the API server ([`Access`]), which checks it before admission.

use serde::{Deserialize, Serialize};

use crate::dashboard::access::{Access, Rbac};
use crate::model::definition::Definition;
use crate::model::definition_set::DefinitionSet;
use crate::model::evaluation::Evaluation;
use crate::model::facts::{Instance, Namespace, Snapshot};
use crate::model::identity::User;
use crate::model::kinds::{KindRules, Visibility};
use crate::model::request::{ObjectState, Operation, Request, Surface};
use crate::model::settings::Settings;
use crate::rules::slots;

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
    /// Why not, when `can_create` is false: RBAC's refusal first (the API server checks it
    /// before admission), then the message admission would return.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Which half refused, when `can_create` is false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused_by: Option<RefusedBy>,
    /// What admission would warn about (a consumed class without a provider).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// For a kind held by its names (`cardinality.slots`): the name the create will use, the
    /// first free slot, for which the verdict is computed. `None` when every slot is held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot: Option<String>,
}

/// Which half of the answer refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum RefusedBy {
    Rbac,
    Policy,
    Both,
}

/// One entry per definition, in the definitions' order. Without `access` only the policy's
/// half is answered.
pub fn catalog(
    definitions: &[Definition],
    user: &User,
    namespace: &Namespace,
    instances: &[Instance],
    settings: &Settings,
    access: Option<&Access>,
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
            let rules = set.get(&definition.kind).ok().flatten();
            let placement = match rules.map(|rules| rules.visibility) {
                Some(Visibility::Module) => Placement::Modules,
                Some(Visibility::Hidden) => Placement::Hidden,
                Some(Visibility::Catalog) | None => Placement::Marketplace,
            };
            // An empty name never matches an existing instance: nothing is excluded from counts.
            let mut request = Request {
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
            let slot = rules.and_then(|rules| slot(&request, settings, &snapshot, rules));
            if let Some(slot) = &slot {
                request.name = slot.clone();
            }
            let verdict = crate::decide::evaluate(&request, settings, &snapshot);
            let plural = definition.plural.as_deref().unwrap_or(&definition.kind);
            let rbac = access.map_or(Rbac::Allowed, |access| {
                access.create(&user.username, &definition.kind, plural, &namespace.name)
            });
            let (refused_by, reason) = match (rbac, verdict.message) {
                (Rbac::Allowed, None) => (None, None),
                (Rbac::Allowed, Some(policy)) => (Some(RefusedBy::Policy), Some(policy)),
                (Rbac::Refused(rbac), None) => (Some(RefusedBy::Rbac), Some(rbac)),
                (Rbac::Refused(rbac), Some(policy)) => (
                    Some(RefusedBy::Both),
                    Some(format!("{rbac}; the policy would refuse it too: {policy}")),
                ),
            };
            Entry {
                kind: definition.kind.clone(),
                placement,
                can_create: verdict.allowed && refused_by.is_none(),
                reason,
                refused_by,
                warnings: verdict.warnings,
                slot,
            }
        })
        .collect()
}

/// The name a create of a slotted kind from `request`'s namespace will use: the first slot no
/// instance holds where the slots live. `None` for a kind without slots, when every slot is held
/// (a create under a held name would only meet AlreadyExists: the nameless one meets the count),
/// or when what decides cannot be read.
fn slot(
    request: &Request,
    settings: &Settings,
    snapshot: &Snapshot,
    rules: &KindRules,
) -> Option<String> {
    let cardinality = rules.cardinality.as_ref()?;
    let slots = cardinality.slots.as_ref()?;
    let eval = Evaluation::new(request, settings, snapshot);
    let home = slots::slot_namespace(&eval, cardinality.scope, slots, &request.namespace).ok()?;
    let free = slots::free_slots(&eval, rules, slots, &home).ok()?;
    free.into_iter().next()
}
