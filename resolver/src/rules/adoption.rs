//! A Tenant switch turned on renders its module under the key's name, and helm-controller
//! adopts whatever already holds a name it renders.

use crate::change::{Change, Subject};
use crate::model::builtin::{self, When};
use crate::model::chart::TENANT_RELEASE_PREFIX;
use crate::model::evaluation::Evaluation;
use crate::model::kinds::KindRules;
use crate::model::request::AppIdentity;
use crate::model::verdict::Violation;
use crate::rules::{Outcome, Ruled};

/// Judges a module a switch turns on in a Tenant that exists: on a Tenant's CREATE the chart
/// makes the tenant's namespace, which does not exist, or is terminating with everything in it
/// (nothing keeps it), so no object can hold the name.
pub fn judge(eval: &Evaluation, _: &Change, app: &Ruled) -> Outcome {
    let Some(switch) = app.entry.switch().filter(|s| !s.tenant_created) else {
        return Ok(Vec::new());
    };
    let owner = format!("{TENANT_RELEASE_PREFIX}{}", switch.tenant);
    let adopted = check(
        eval,
        app.rules,
        app.subject,
        (&switch.parent, &owner),
        &switch.key,
    )?;
    Ok(adopted.into_iter().collect())
}

/// A switch turned on makes the Tenant's chart render the HelmRelease `key` in the tenant's
/// namespace, and the module's chart the names it renders beside it (Monitoring's
/// `monitoring-system`: [`builtin::RENDERED`]). helm-controller v1.5.0, the version Cozystack
/// pins, installs and upgrades with Helm's `TakeOwnership` on (`internal/action/install.go`,
/// `upgrade.go`), so an object of such a name that exists already is adopted, not refused: Helm
/// applies the chart's fields over it. Over an instance of the module's kind under `key` that is
/// the module taking over its twin (a warning: its settings come from the Tenant); over any
/// other release under `key`, or an app of another kind under a name beside it, it rewrites that
/// release and uninstalls what it ran (refused). One cached GET per name tells which; a release
/// being deleted frees the name, one the Tenant's release owns already under `key` is the module
/// itself (the leftover of an uninstall that failed), and one beside it that is no app is the
/// module's own.
///
/// An audit replay of a Tenant whose switch is long on is no switch turned on: Helm upgrades
/// the objects of its own manifest without asking who owns them, so a module edited through the
/// API since (which lost Helm's annotations) is still the chart's, and nothing is reported.
fn check(
    eval: &Evaluation,
    rules: &KindRules,
    subject: &Subject,
    (parent, owner): (&str, &str),
    key: &str,
) -> Result<Option<String>, Violation> {
    if eval.is_audit() {
        return Ok(None);
    }
    let (namespace, kind) = (subject.namespace.as_str(), &rules.kind);
    let beside = builtin::RENDERED
        .iter()
        .filter(|r| {
            matches!(r.when, When::Switch(k) if k == key)
                && r.release != key
                && r.namespace.is_none()
        })
        .map(|r| (r.release, r.kind));
    let names = std::iter::once((key, Some(kind.as_str()))).chain(beside);
    let mut adopted = None;
    for (name, renders_as) in names {
        let existing = eval.release(namespace, name)?;
        let Some(meta) = existing.as_ref().as_ref().filter(|m| !m.terminating) else {
            continue;
        };
        let module = name == key;
        if module && meta.rendered_by(parent, owner) {
            continue;
        }
        let taken = AppIdentity::from_labels(&meta.labels, name);
        let (what, way_out) = match &taken {
            Some(twin) if module && twin.kind == *kind => {
                adopted = Some(format!(
                    "{kind} {namespace}/{app} exists already and Helm release {parent}/{owner} does not own it (it was created through the API): helm-controller will adopt it into the Tenant's release and apply the module's chart over it, so from then on its settings come from the Tenant and it is removed by turning {key} off",
                    app = twin.app,
                ));
                continue;
            }
            Some(other) if module || renders_as != Some(other.kind.as_str()) => (
                format!(
                    "{} {namespace}/{} (HelmRelease {namespace}/{name})",
                    other.kind, other.app
                ),
                format!(
                    "delete {} {namespace}/{} (or create it anew under another name) first",
                    other.kind, other.app
                ),
            ),
            None if module => (
                format!("HelmRelease {namespace}/{name}, which is not an app release"),
                format!("remove HelmRelease {namespace}/{name} first"),
            ),
            _ => continue,
        };
        let whose = if module {
            "its name".to_owned()
        } else {
            format!("the name {namespace}/{name} its chart renders beside it")
        };
        return Err(Violation::waivable(format!(
            "{whose} is taken by {what}, and helm-controller adopts an existing object of the name it renders: it would rewrite that release into the {kind} module and uninstall what it runs; {way_out}, or leave {key} off (tenantModules.{key})"
        )));
    }
    Ok(adopted)
}
