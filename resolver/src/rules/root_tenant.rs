//! The root Tenant is not deleted through the API.

use crate::change::{Change, Entry};
use crate::model::chart::TENANT_KIND;
use crate::model::evaluation::Evaluation;
use crate::model::tenant;
use crate::model::verdict::Violation;
use crate::rules::Outcome;

/// Judges a Tenant the request removes.
pub fn judge(eval: &Evaluation, _: &Change, entry: &Entry) -> Outcome {
    if entry.kind == TENANT_KIND {
        check(eval, &entry.namespace, &entry.app)?;
    }
    Ok(Vec::new())
}

/// Denies deleting the root Tenant (`tenants/root` in tenant-root) by anyone but the platform:
/// its release, `tenant-root/tenant-root`, renders every tenant namespace, so the DELETE
/// uninstalls every tenant of the platform. Cozystack guards the release with the
/// `platform.cozystack.io/no-delete` label and a ValidatingAdmissionPolicy
/// (`packages/core/platform/templates/deletion-protection.yaml`), but cozystack-api's UPDATE
/// rebuilds the release's labels without it (`REST.Update`): after one edit of the root Tenant
/// through the API, a tenant-root super-admin's DELETE meets no guard but this one.
fn check(eval: &Evaluation, namespace: &str, app: &str) -> Result<(), Violation> {
    if namespace != tenant::ROOT || app != tenant::ROOT_TENANT || eval.is_platform() {
        return Ok(());
    }
    let (release_ns, release) =
        crate::model::chart::tenant_release(tenant::ROOT).unwrap_or_default();
    Err(Violation::rule(format!(
        "Tenant {namespace}/{app} is the root tenant: deleting it uninstalls every tenant of the platform (its Helm release {release_ns}/{release} renders them all), and {user} is not a platform identity; {remedy}",
        user = eval.request.user.username,
        remedy = eval.remedy(
            "delete the tenants you mean to remove one by one, or have a platform administrator uninstall Cozystack"
        ),
    )))
}
