//! A module the Tenant chart renders is removed by its switch, not through the API.

use crate::change::{Change, Subject};
use crate::model::chart::{TENANT_RELEASE_PREFIX, switched_on, tenant_release};
use crate::model::evaluation::Evaluation;
use crate::model::kinds::{Deletion, KindRules};
use crate::model::verdict::Violation;
use crate::rules::{Outcome, Ruled};

/// Judges an app the request deletes, unless it is being deleted already. After the
/// consumers' protection: they must go before the module can, whichever way.
pub fn judge(eval: &Evaluation, _: &Change, app: &Ruled) -> Outcome {
    check(eval, app.rules, app.subject)?;
    Ok(Vec::new())
}

/// Denies deleting, through the API, a protected module instance the Tenant chart renders:
/// the chart would create it again at the Tenant's next upgrade, and the Tenant's values are
/// where it is switched off.
///
/// What the chart renders decides, not metadata an edit strips: the release named after a
/// switch key (`monitoring`), in a tenant namespace, whose owning Tenant (by the naming rule:
/// `tenant-ktj` → Tenant `ktj` in `tenant-root`, `tenant-root` → Tenant `root`) has that
/// switch on in its release's values. Helm's ownership annotations do not tell: cozystack-api's
/// UPDATE rebuilds the release without them (`REST.Update`), so a module edited from
/// Administration → Modules loses them while the chart still renders it, and a module whose
/// switch went off in a Tenant upgrade that failed half-way keeps them.
fn check(eval: &Evaluation, rules: &KindRules, subject: &Subject) -> Result<(), Violation> {
    if rules.deletion != Deletion::Protect || eval.is_platform() {
        return Ok(());
    }
    let Some(key) = eval.settings.tenant_module_key(&rules.kind) else {
        return Ok(());
    };
    // Without a release prefix (`definitionSource: settings` with no `releasePrefixes`
    // entry) the release is not known, but the chart's can only be the key's.
    let named_after_key = match &subject.release {
        Some(release) => release == key,
        None => subject.app == key,
    };
    if !named_after_key {
        return Ok(());
    }
    let Some((parent, release)) = tenant_release(&subject.namespace) else {
        return Ok(());
    };
    // A Tenant release that is gone, or being uninstalled, renders nothing again: the module
    // is deleted for good, whoever sends it (helm-controller's `reconcileDelete` only uninstalls).
    let tenant = eval.release(&parent, &release)?;
    let Some(meta) = tenant.as_ref().as_ref().filter(|meta| !meta.terminating) else {
        return Ok(());
    };
    if !switched_on(Some(&meta.values), key) {
        return Ok(());
    }
    let tenant = release
        .strip_prefix(TENANT_RELEASE_PREFIX)
        .unwrap_or(&release);
    Err(Violation::rule(format!(
        "{kind} {namespace}/{app} is rendered by Tenant {parent}/{tenant} (Helm release {parent}/{release}), which would create it again; turn {key} off in Tenant {parent}/{tenant} instead of deleting it (protection.deletion: protect)",
        kind = rules.kind,
        namespace = subject.namespace,
        app = subject.app,
    )))
}
