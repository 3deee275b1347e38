//! Tenant groups do not collide: a new Tenant's namespace gets the groups `<ns>-view`, `-use`,
//! `-admin` and `-super-admin`, which must not be groups of one of its ancestors.

use crate::change::NewTenant;
use crate::model::chart::GROUP_LEVELS;
use crate::model::evaluation::Evaluation;
use crate::model::tenant::{self, tenant_namespace};
use crate::model::verdict::Violation;
use crate::rules::Outcome;

/// Judges the Tenant the write creates.
pub fn judge(eval: &Evaluation, tenant: &NewTenant) -> Outcome {
    check(eval, &tenant.parent, &tenant.name)?;
    Ok(Vec::new())
}

/// Refuses a new Tenant whose groups would be groups of one of its ancestors: `super` under
/// `tenant-a` gets `tenant-a-super-admin` as its admin group, which is tenant-a's own
/// super-admin group, so whoever is made an administrator of the child would administer
/// tenant-a. Every writer is refused: the collision is a flaw of the name, not of who asks.
fn check(eval: &Evaluation, parent: &str, name: &str) -> Result<(), Violation> {
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
                .map(AsRef::as_ref),
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
