//! `protection.edit: adminOnly`: kinds only the platform writes, whatever their visibility.

use crate::change::Change;
use crate::model::evaluation::Evaluation;
use crate::model::kinds::Edit;
use crate::model::request::Operation;
use crate::model::verdict::Violation;
use crate::rules::{Outcome, Ruled};

/// Denies every write of an `adminOnly` kind by anyone but the platform: creating, deleting,
/// and changing the spec. Metadata-only updates are no edit. A kind whose instance anyone
/// could delete and create anew with their own spec would not be admin-only at all.
pub fn judge(eval: &Evaluation, change: &Change, app: &Ruled) -> Outcome {
    let (rules, app) = (app.rules, app.entry);
    if rules.edit != Edit::AdminOnly || eval.is_platform() {
        return Ok(Vec::new());
    }
    let request = eval.request;
    let verb = match request.operation {
        Operation::Create => "create it",
        Operation::Delete => "delete it",
        Operation::Update if change.spec_changed => "change its spec",
        Operation::Update | Operation::Connect => return Ok(Vec::new()),
    };
    let (namespace, name) = (&app.namespace, &app.app);
    // A create the dashboard's catalog judges has no name yet.
    let instance = if name.is_empty() {
        format!("a {} in {namespace}", rules.kind)
    } else {
        format!("{} {namespace}/{name}", rules.kind)
    };
    Err(Violation::rule(format!(
        "{instance}: only the platform may {verb} (protection.edit: adminOnly), and {user} is not a platform identity; {remedy}",
        user = request.user.username,
        remedy = eval.remedy("ask a platform administrator to make the change"),
    )))
}
