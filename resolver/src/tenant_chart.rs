//! What a Tenant application does beyond its own object: the namespace it creates, the groups
//! that namespace's tenant is administered by, and the module instances its values switch on
//! and off (the Tenant chart renders `monitoring: true` as the `monitoring` release of kind
//! Monitoring in the tenant's namespace). A Tenant write is judged by those effects, so a
//! module switch meets the same rules as a direct create or delete of the module.

use serde_json::Value;

use crate::cardinality::{self, Subject};
use crate::evaluation::Evaluation;
use crate::protection;
use crate::request::Operation;
use crate::rules::KindRules;
use crate::tenant::{self, tenant_namespace};
use crate::verdict::Violation;
use crate::visibility;

/// The application kind of tenants (hard-wired in cozystack-api as well).
pub const TENANT_KIND: &str = "Tenant";

/// The group levels Cozystack creates for every tenant: `<ns>-view`, `-use`, `-admin`,
/// `-super-admin` (`cozy-lib.rbac`, Keycloak groups).
const GROUP_LEVELS: &[&str] = &["-view", "-use", "-admin", "-super-admin"];

/// Refuses a new Tenant whose groups would be groups of one of its ancestors: `super` under
/// `tenant-a` gets `tenant-a-super-admin` as its admin group, which is tenant-a's own
/// super-admin group, so whoever is made an administrator of the child would administer
/// tenant-a. Every writer is refused: the collision is a flaw of the name, not of who asks.
pub fn check_groups(eval: &Evaluation, parent: &str, name: &str) -> Result<(), Violation> {
    let Some(child) = tenant_namespace(parent, name) else {
        return Ok(());
    };
    let Some(ancestors) = tenant::chain_from_name(parent) else {
        return Ok(());
    };
    let settings = eval.settings;
    let levels: Vec<&str> = GROUP_LEVELS
        .iter()
        .copied()
        .chain(
            settings
                .tenant_admin_group_suffixes
                .iter()
                .map(String::as_str),
        )
        .collect();
    let prefix = &settings.tenant_group_prefix;
    for ancestor in ancestors.iter().filter(|a| **a != child) {
        for own in &levels {
            for theirs in &levels {
                if format!("{child}{own}") == format!("{ancestor}{theirs}") {
                    return Err(Violation::rule(format!(
                        "Tenant {parent}/{name} would get namespace {child}, whose group {prefix}{child}{own} is already {ancestor}'s {level} group: members given one would hold the other; choose a tenant name that is not a group level ({words})",
                        level = theirs.trim_start_matches('-'),
                        words = level_words(&levels),
                    )));
                }
            }
        }
    }
    Ok(())
}

/// `view, use, admin, super` from the level suffixes: the words a child name must avoid.
fn level_words(levels: &[&str]) -> String {
    let mut words: Vec<&str> = Vec::new();
    for word in levels
        .iter()
        .filter_map(|l| l.trim_start_matches('-').split('-').next())
    {
        if !word.is_empty() && !words.contains(&word) {
            words.push(word);
        }
    }
    words.join(", ")
}

fn switched_on(values: &Value, key: &str) -> bool {
    values.get(key) == Some(&Value::Bool(true))
}

/// Judges an UPDATE of Tenant `name` in `parent` by the modules its values switch: off is the
/// removal of the module's instance in the tenant's namespace, on the creation of one.
pub fn check_switches(
    eval: &Evaluation,
    parent: &str,
    name: &str,
    old: &Value,
    new: &Value,
    warnings: &mut Vec<String>,
) -> Result<(), Violation> {
    let Some(child) = tenant_namespace(parent, name) else {
        return Ok(());
    };
    for (key, kind) in &eval.settings.tenant_modules {
        let (was, is) = (switched_on(old, key), switched_on(new, key));
        if was == is {
            continue;
        }
        let Some(rules) = crate::decide::rules_of(eval, kind)? else {
            continue;
        };
        let subject = Subject {
            namespace: &child,
            app: key,
            release: Some(key.clone()),
        };
        let effect = |message: String| {
            format!(
                "Tenant {parent}/{name}: turning {key} {state} {action} {kind} {child}/{key}: {message}",
                state = if is { "on" } else { "off" },
                action = if is { "creates" } else { "removes" },
            )
        };
        let context = |v: Violation| Violation {
            message: effect(v.message),
            ..v
        };
        let operation = if is {
            Operation::Create
        } else {
            Operation::Delete
        };
        let mut admitted = Vec::new();
        switch(eval, &rules, &subject, operation, &mut admitted).map_err(context)?;
        warnings.extend(admitted.into_iter().map(effect));
    }
    Ok(())
}

/// A module switched on (`Operation::Create`) or off (`Operation::Delete`): the rules a
/// direct create or delete of the instance meets, by the same requester.
fn switch(
    eval: &Evaluation,
    rules: &KindRules,
    subject: &Subject,
    operation: Operation,
    warnings: &mut Vec<String>,
) -> Result<(), Violation> {
    let creates = operation == Operation::Create;
    let verb = if creates { "create" } else { "delete" };
    visibility::check(eval, rules, subject.namespace, verb)?;
    protection::check_admin_only(eval, rules, operation, subject.namespace, subject.app)?;
    let outcome = if creates {
        cardinality::check(eval, rules, subject)
    } else {
        protection::check_removal(eval, rules, subject)
    };
    if let Err(v) = outcome {
        eval.enforce(v, warnings)?;
    }
    Ok(())
}
