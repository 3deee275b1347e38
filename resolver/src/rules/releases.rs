//! App HelmReleases are the platform's: cozystack-api writes them for the Applications it
//! serves, and Flux and helm-controller apply and reconcile them. Anyone else writing one
//! directly would bypass every rule the Application path applies.

use crate::change::{Change, Entry};
use crate::model::evaluation::Evaluation;
use crate::model::verdict::Violation;
use crate::rules::Outcome;

/// Refuses a write of an app release by anyone but the platform.
pub fn judge(eval: &Evaluation, _: &Change, app: &Entry) -> Outcome {
    if eval.is_platform() {
        return Ok(Vec::new());
    }
    let request = eval.request;
    Err(Violation::rule(format!(
        "HelmRelease {ns}/{name} is the release of {kind} {ns}/{app}; app HelmReleases are written only by the Cozystack platform, and {user} is not a platform identity; {remedy}",
        ns = request.namespace,
        name = request.name,
        kind = app.kind,
        app = app.app,
        user = request.user.username,
        remedy = eval.remedy(&format!(
            "{} the {} through the apps.cozystack.io API instead",
            eval.verb(),
            app.kind
        )),
    )))
}
