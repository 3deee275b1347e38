//! `cardinality.slots`: a slotted kind's instances take the names it lists, in the namespace its
//! scope fixes, so that two writers racing for the last place race for one name, which the API
//! server keeps unique.

use crate::change::{Change, Subject, held_name};
use crate::model::builtin::OffSlot;
use crate::model::evaluation::Evaluation;
use crate::model::kinds::{Cardinality, KindRules, Scope, Slots};
use crate::model::verdict::Violation;
use crate::rules::{Outcome, Ruled};

/// Judges an instance the write makes enter its kind. Refused like the count (waivable for
/// platform writers); in a background audit an instance off its slot is a warning, since it
/// was made before the slots and is renamed, not deleted, by the operator moving onto them.
pub fn judge(eval: &Evaluation, _: &Change, app: &Ruled) -> Outcome {
    match check(eval, app.rules, app.subject) {
        Ok(()) => Ok(Vec::new()),
        Err(v) if eval.is_audit() => Ok(vec![v.message]),
        Err(v) => Err(v),
    }
}

/// Where a slotted kind's instances live: the namespace the scope fixes for `namespace`.
/// `namespace`: that namespace; `tenant`: the owning tenant's own namespace (a namespace a
/// tenant owns through labels holds no slot), or the namespace itself when no tenant owns it;
/// `cluster`: `slotNamespace`.
pub fn slot_namespace(
    eval: &Evaluation,
    scope: Scope,
    slots: &Slots,
    namespace: &str,
) -> Result<String, Violation> {
    Ok(match scope {
        Scope::Namespace => namespace.to_owned(),
        Scope::Tenant => eval
            .owner_of(namespace)?
            .unwrap_or_else(|| namespace.to_owned()),
        Scope::Cluster => slots
            .cluster_namespace
            .clone()
            .unwrap_or_else(|| namespace.to_owned()),
    })
}

/// The slots of `rules` not held by an instance in `namespace`, in the order they are listed.
/// An instance being deleted still holds its name until it is gone.
pub fn free_slots(
    eval: &Evaluation,
    rules: &KindRules,
    slots: &Slots,
    namespace: &str,
) -> Result<Vec<String>, Violation> {
    let instances = eval.instances(rules)?;
    Ok(slots
        .names
        .iter()
        .filter(|slot| {
            !instances.iter().any(|i| {
                i.namespace == namespace && held_name(rules, i.release, i.app) == slot.as_str()
            })
        })
        .cloned()
        .collect())
}

/// Whether `subject` is on one of its kind's slots, in the namespace the scope fixes. (Slots
/// are validated to be no more than `max`, so their holders alone never exceed it.)
pub fn holds_slot(
    eval: &Evaluation,
    rules: &KindRules,
    subject: &Subject,
) -> Result<bool, Violation> {
    let Some(Cardinality {
        scope,
        slots: Some(slots),
        ..
    }) = &rules.cardinality
    else {
        return Ok(false);
    };
    Ok(slot_place(eval, rules, subject, *scope, slots)?.2)
}

/// Where `subject` stands against `slots`: the namespace the scope fixes for them, the name its
/// release holds, and whether that is a slot in that namespace.
fn slot_place<'s>(
    eval: &Evaluation,
    rules: &KindRules,
    subject: &'s Subject,
    scope: Scope,
    slots: &Slots,
) -> Result<(String, &'s str, bool), Violation> {
    let home = slot_namespace(eval, scope, slots, &subject.namespace)?;
    let name = subject.held_name(rules);
    let held = subject.namespace == home && slots.names.iter().any(|s| s == name);
    Ok((home, name, held))
}

/// Holds a slotted kind to its names: a CREATE must take a free slot, in the namespace the scope
/// fixes, on both paths (the Application's name; the HelmRelease's name after the prefix). The
/// count runs first (an off-slot instance made before slots existed still counts), so the
/// instances are listed already and this reads nothing new. Once every slot is held the count
/// alone speaks: with `max` beyond the slots, further instances may take any name and race as
/// before.
fn check(eval: &Evaluation, rules: &KindRules, subject: &Subject) -> Result<(), Violation> {
    let Some(Cardinality {
        scope,
        max,
        slots: Some(slots),
    }) = &rules.cardinality
    else {
        return Ok(());
    };
    let (home, name, held) = slot_place(eval, rules, subject, *scope, slots)?;
    if held {
        return Ok(());
    }
    // With every slot held the count decides: it refuses when `max` is the number of slots
    // (the holders are in scope), and lets further instances take any name beyond them.
    let free = free_slots(eval, rules, slots, &home)?;
    if free.is_empty() {
        return Ok(());
    }
    let choice = free
        .iter()
        .map(|slot| format!("{home}/{slot}"))
        .collect::<Vec<_>>();
    let choice = match choice.as_slice() {
        [one] => one.clone(),
        many => format!("one of {}", many.join(", ")),
    };
    let kind = &rules.kind;
    Err(Violation::waivable(if eval.is_audit() {
        format!(
            "{kind} {namespace}/{name} is off its slot: {kind} is held to at most {max} per {scope} by its name ({choice}); {remedy} (cardinality.slots)",
            namespace = subject.namespace,
            remedy = off_slot_remedy(
                eval,
                rules,
                (&subject.namespace, name),
                &home,
                &choice,
                slots
            ),
        )
    } else {
        format!(
            "{kind} {namespace}/{name}: {kind} is held to at most {max} per {scope} by its name: create it as {choice} (cardinality.slots)",
            namespace = subject.namespace,
        )
    }))
}

/// How an instance off its slot moves onto one, in an order the rules admit. The count holds
/// the kind to `max`, so while every allowed instance needs a slot the old one goes first; what
/// that costs is the kind's chart's (`docs/stock-rules.md`, off its slot): one that never
/// rendered loses nothing, one whose chart deletes its volumes on removal loses its data, and
/// leaving the kind without slots keeps it. A module of the Tenant chart comes back through its
/// Tenant's switch.
fn off_slot_remedy(
    eval: &Evaluation,
    rules: &KindRules,
    (namespace, app): (&str, &str),
    home: &str,
    choice: &str,
    slots: &Slots,
) -> String {
    let kind = &rules.kind;
    let tenant = crate::model::tenant::tenant_application(home);
    let recreate = match (eval.settings.tenant_module_key(kind), tenant) {
        (Some(key), Some((parent, tenant))) => {
            format!("turn {key} on in Tenant {parent}/{tenant}, whose chart creates it as {choice}")
        }
        _ => format!("create it anew as {choice} with the same values"),
    };
    let Some(Cardinality { scope, max, .. }) = &rules.cardinality else {
        return recreate;
    };
    let delete_first = (*max as usize) <= slots.names.len();
    match eval.settings.judged().off_slot(kind) {
        Some(OffSlot::NeverRenders) => format!(
            "its chart renders no release of another name, so it never ran and nothing is lost: delete {namespace}/{app}, then {recreate}"
        ),
        Some(OffSlot::DropsVolumes) => format!(
            "it runs, and deleting it drops its data (the chart's cleanup deletes its volumes): to keep it as it is, leave {kind} without slots (definitions.{kind}.cardinality: {{scope: {scope}, max: {max}}} in the policy settings); to move it, copy its data off, delete {namespace}/{app}, then {recreate}"
        ),
        _ if delete_first => format!("delete {namespace}/{app}, then {recreate}"),
        _ => format!("{recreate}, then delete {namespace}/{app}"),
    }
}
