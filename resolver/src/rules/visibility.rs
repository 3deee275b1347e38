//! Who may write a kind: `catalog` anyone RBAC allows, `module` tenant administrators and
//! the platform, `hidden` the platform only.

use crate::change::Change;
use crate::model::evaluation::Evaluation;
use crate::model::identity::admin_groups;
use crate::model::kinds::{KindRules, Visibility};
use crate::model::verdict::{Violation, list_some};
use crate::rules::{Outcome, Ruled};

/// Judges the app the request authors through the apps API.
pub fn judge(eval: &Evaluation, _: &Change, app: &Ruled) -> Outcome {
    check(eval, app.rules, &app.entry.namespace, eval.verb())?;
    Ok(Vec::new())
}

/// Whether the requester may `verb` (create, change, delete) an instance of `rules.kind` in
/// `namespace`.
fn check(
    eval: &Evaluation,
    rules: &KindRules,
    namespace: &str,
    verb: &str,
) -> Result<(), Violation> {
    if rules.visibility == Visibility::Catalog || eval.is_platform() {
        return Ok(());
    }
    let kind = &rules.kind;
    let user = &eval.user().username;
    match rules.visibility {
        Visibility::Catalog => Ok(()),
        Visibility::Hidden => Err(Violation::rule(format!(
            "{kind} is a hidden kind: only the Cozystack platform may {verb} it, and {user} is not a platform identity; {}",
            eval.remedy("it is managed by the platform, so ask a platform administrator")
        ))),
        Visibility::Module => {
            let placement = eval.placement(namespace)?;
            if eval.user().administers(&placement.chain, eval.settings) {
                return Ok(());
            }
            let own: Vec<String> = admin_groups(
                &placement.chain[placement.chain.len().saturating_sub(1)..],
                eval.settings,
            )
            .collect();
            let admins = if own.is_empty() {
                "no tenant owns this namespace".to_owned()
            } else {
                format!(
                    "members of {} or of an ancestor tenant's admin groups",
                    list_some(&own, 4)
                )
            };
            Err(Violation::rule(format!(
                "{kind} is a tenant module: only tenant administrators ({admins}) and the platform may {verb} it in {namespace}, and {user} is neither; {}",
                eval.remedy(&format!(
                    "ask a tenant administrator to {verb} it from Administration → Modules"
                ))
            )))
        }
    }
}
