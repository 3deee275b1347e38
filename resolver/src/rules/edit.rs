//! `protection.edit: adminOnly`: kinds only the platform writes, whatever their visibility.

use crate::change::Change;
use crate::model::evaluation::Evaluation;
use crate::model::kinds::{Edit, KindRules};
use crate::model::request::Operation;
use crate::model::verdict::Violation;
use crate::rules::Outcome;

/// Judges the app the request authors through the apps API.
pub fn judge(eval: &Evaluation, change: &Change) -> Outcome {
    if let Some(app) = change.authored()
        && let (_, Some(rules)) = app.known(eval)?
    {
        check(eval, rules, change, &app.namespace, &app.app)?;
    }
    Ok(Vec::new())
}

/// Denies every write of an `adminOnly` kind by anyone but the platform: creating, deleting,
/// and changing the spec. Metadata-only updates are no edit. A kind whose instance anyone
/// could delete and create anew with their own spec would not be admin-only at all.
fn check(
    eval: &Evaluation,
    rules: &KindRules,
    change: &Change,
    namespace: &str,
    app: &str,
) -> Result<(), Violation> {
    if rules.edit != Edit::AdminOnly || eval.is_platform() {
        return Ok(());
    }
    let request = eval.request;
    let verb = match request.operation {
        Operation::Create => "create it",
        Operation::Delete => "delete it",
        Operation::Update if change.spec_changed => "change its spec",
        Operation::Update | Operation::Connect => return Ok(()),
    };
    // A create the dashboard's catalog judges has no name yet.
    let instance = if app.is_empty() {
        format!("a {} in {namespace}", rules.kind)
    } else {
        format!("{} {namespace}/{app}", rules.kind)
    };
    Err(Violation::rule(format!(
        "{instance}: only the platform may {verb} (protection.edit: adminOnly), and {user} is not a platform identity; {remedy}",
        user = request.user.username,
        remedy = eval.remedy("ask a platform administrator to make the change"),
    )))
}
