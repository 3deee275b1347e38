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

use crate::model::builtin::OffSlot;
use crate::model::collect::sorted_by;
use crate::model::evaluation::Evaluation;
use crate::model::facts::InstanceRef;
use crate::model::kinds::{Cardinality, KindRules, Scope, Slots};
use crate::model::verdict::{Violation, list_some};

/// How many existing instances a message names before "and N more".
const SHOWN: usize = 5;

/// The instance a request is about. An instance is its HelmRelease: the namespace and the
/// release name, the same on every path. The release name is known on the HelmRelease path
/// and, on the Application path, whenever the kind's definition states its release prefix;
/// only without one is the application name compared.
pub struct Subject<'s> {
    pub namespace: &'s str,
    pub app: &'s str,
    pub release: Option<String>,
}

impl Subject<'_> {
    /// The application name its release holds (see [`held_name`]).
    fn held_name(&self, rules: &KindRules) -> &str {
        match &self.release {
            Some(release) => held_name(rules, release, self.app),
            None => self.app,
        }
    }

    /// Whether this instance renders at all (see [`renders`]).
    pub fn renders(&self, rules: &KindRules) -> bool {
        crate::model::builtin::renders(&rules.kind, self.namespace, self.held_name(rules))
    }

    pub fn is(&self, instance: &InstanceRef) -> bool {
        instance.namespace == self.namespace
            && match &self.release {
                Some(release) => instance.release == release,
                None => instance.app == self.app,
            }
    }
}

pub fn check(eval: &Evaluation, rules: &KindRules, subject: &Subject) -> Result<(), Violation> {
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
    let namespace = subject.namespace;
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

/// Whether `instance` of `rules.kind` renders anything: an instance whose chart refuses its
/// release name never ran, so it neither provides nor keeps a class served
/// ([`crate::model::builtin::renders`]).
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
fn held_name<'a>(rules: &KindRules, release: &'a str, app: &'a str) -> &'a str {
    rules
        .release_prefix
        .as_deref()
        .and_then(|prefix| release.strip_prefix(prefix))
        .unwrap_or(app)
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
fn holds_slot(eval: &Evaluation, rules: &KindRules, subject: &Subject) -> Result<bool, Violation> {
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
    let home = slot_namespace(eval, scope, slots, subject.namespace)?;
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
pub fn check_slot(
    eval: &Evaluation,
    rules: &KindRules,
    subject: &Subject,
) -> Result<(), Violation> {
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
                (subject.namespace, name),
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
    match crate::model::builtin::off_slot(kind) {
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
