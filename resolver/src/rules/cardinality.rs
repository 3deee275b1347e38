//! At most `max` instances of a kind per scope.
//!
//! Scopes: `cluster` counts everywhere; `namespace` counts in the request's namespace;
//! `tenant` counts in every namespace owned by the same tenant as the request's namespace
//! (a tenant namespace owns itself; another namespace is owned by the deepest tenant of its
//! ancestor labels). In today's Cozystack every tenant is one namespace, so the two agree
//! there; they differ for namespaces a tenant owns through labels, and a namespace owned by no
//! tenant is counted on its own.
//!
//! The object under review never counts against itself (UPDATE, background audit, or a
//! CREATE that will fail with AlreadyExists anyway). Terminating instances count: they exist
//! until their finalizers finish, and not counting them would let a replacement overlap.

use crate::change::{Change, Subject};
use crate::model::collect::sorted_by;
use crate::model::evaluation::Evaluation;
use crate::model::kinds::{Cardinality, KindRules, Scope};
use crate::model::verdict::{Violation, list_some};
use crate::rules::slots::holds_slot;
use crate::rules::{Outcome, Ruled};

/// How many existing instances a message names before "and N more".
const SHOWN: usize = 5;

/// Judges an instance the write makes enter its kind.
pub fn judge(eval: &Evaluation, _: &Change, app: &Ruled) -> Outcome {
    check(eval, app.rules, app.subject)?;
    Ok(Vec::new())
}

fn check(eval: &Evaluation, rules: &KindRules, subject: &Subject) -> Result<(), Violation> {
    let Some(Cardinality { scope, max, .. }) = rules.cardinality.clone() else {
        return Ok(());
    };
    // A background audit replays an instance that exists. One on its slot is the one the kind
    // keeps: a scope's slot holders are one per name and never more than `max`, so a surplus
    // is off its slots and reported on those. Not listing for the keepers keeps an audit run
    // linear in the tenants (each replay would read every tenant's instance).
    if eval.is_audit() && holds_slot(eval, rules, subject)? {
        return Ok(());
    }
    let namespace = subject.namespace.as_str();
    let instances = eval.instances(rules)?;
    let (scope_name, owner) = match scope {
        Scope::Cluster => ("cluster".to_owned(), None),
        Scope::Namespace => (format!("namespace {namespace}"), None),
        Scope::Tenant => match eval.owner_of(namespace)? {
            Some(owner) => (format!("tenant {owner}"), Some(owner)),
            None => (
                format!("namespace {namespace} (it belongs to no tenant)"),
                None,
            ),
        },
    };
    let mut present = Vec::new();
    for instance in instances.iter().filter(|i| !subject.is(i)) {
        let in_scope = match (scope, &owner) {
            (Scope::Cluster, _) => true,
            (Scope::Tenant, Some(owner)) => {
                instance.namespace == namespace || eval.is_owned_by(instance.namespace, owner)?
            }
            (Scope::Namespace | Scope::Tenant, _) => instance.namespace == namespace,
        };
        if in_scope {
            present.push(instance.label_from(namespace));
        }
    }
    if (present.len() as u64) < u64::from(max) {
        return Ok(());
    }
    let present = sorted_by(present, Ord::cmp);
    // A background audit replays an instance that exists already: it is one of the surplus.
    let remedy = if eval.is_audit() {
        format!("keep {max} and delete the others")
    } else {
        format!(
            "use or edit the existing {} instead of creating another",
            rules.kind
        )
    };
    Err(Violation::waivable(format!(
        "{kind}: at most {max} per {scope_name}; already present: {list}; {remedy} (cardinality {scope}/{max})",
        kind = rules.kind,
        list = list_some(&present, SHOWN),
    )))
}
