//! The names Cozystack renders are not for an app of another kind to take: helm-controller
//! adopts an existing object of a name it renders.

use crate::change::{Change, Entry, Subject};
use crate::model::builtin::{self, When};
use crate::model::chart::{TENANT_RELEASE_PREFIX, tenant_release};
use crate::model::evaluation::Evaluation;
use crate::model::verdict::Violation;
use crate::rules::Outcome;

/// Judges an app the request creates (or a release relabelled into a kind), whether or not its
/// kind has rules.
pub fn judge(eval: &Evaluation, _: &Change, entry: &Entry) -> Outcome {
    check(eval, &entry.kind, entry.known(eval)?.0)?;
    Ok(Vec::new())
}

/// What renders a name an app's release would take ([`check_module_name`]).
enum By<'s> {
    /// The Tenant chart while this switch is on (the module, or what its chart renders).
    Switch(&'s str),
    /// The Tenant chart whatever its values (`info`).
    Always,
    /// An optional package of the platform (BootBox).
    Package,
}

/// A create of another kind whose release takes a name Cozystack renders there: the name under
/// which the owning Tenant's chart renders a module (`tenantModules`), or any other name of the
/// built-in rendered names (`docs/stock-rules.md`): the Tenant chart's `info`, which it always
/// renders, what a module's own chart renders beside it (Monitoring's `monitoring-system`), the
/// BootBox package's `tenant-root/bootbox`. helm-controller adopts an existing object of the
/// name it renders, so rendering that name would rewrite the instance and uninstall what it
/// ran. Refused before the name is taken. The kind a name renders as, under it, is its slot,
/// and a switch then adopts its twin (judged when the switch turns on). No lookup but the
/// kind's release prefix: the name and the naming rule tell, and a kind needs no rules of its
/// own to be refused here (ExternalDNS has none).
fn check(eval: &Evaluation, kind: &str, subject: &Subject) -> Result<(), Violation> {
    // Without the kind's release prefix its release is unknown: no name is claimed.
    let Some(release) = subject.release.as_deref() else {
        return Ok(());
    };
    let (namespace, app) = (subject.namespace.as_str(), subject.app.as_str());
    let owner = tenant_release(namespace);
    let module_of = |key: &str| {
        eval.settings
            .tenant_modules
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, module)| module)
    };
    // The settings' switches first, then the built-in rendered names: a name a switch renders
    // counts while the switch is a module's (`tenantModules`) that the cluster serves; one
    // rendered always, or by a package, while its kind is served.
    let mut found = None;
    if let Some(module) = module_of(release)
        && owner.is_some()
    {
        if module == kind || !eval.serves(module)? {
            return Ok(());
        }
        found = Some((By::Switch(release), Some(module), None));
    } else {
        for r in builtin::rendered_as(release, namespace, owner.is_some()) {
            let renderer = match r.when {
                When::Switch(key) => module_of(key),
                _ => r.kind.or(Some(kind)),
            };
            if r.kind != Some(kind) && renderer.map_or(Ok(false), |k| eval.serves(k))? {
                let by = match r.when {
                    When::Switch(key) => By::Switch(key),
                    When::Always => By::Always,
                    When::Package => By::Package,
                };
                found = Some((by, renderer, Some(r.kind.unwrap_or("HelmRelease"))));
                break;
            }
        }
    }
    // (what renders it; the module kind; the kind of a name rendered beside the module)
    let Some((by_what, renderer, beside)) = found else {
        return Ok(());
    };
    let tenant = match &owner {
        Some((parent, owner)) => {
            let tenant = owner.strip_prefix(TENANT_RELEASE_PREFIX).unwrap_or(owner);
            ["Tenant ", parent, "/", tenant].concat()
        }
        None => String::new(),
    };
    let renderer = renderer.unwrap_or_default();
    let [by, trigger, into] = told(by_what, beside, &tenant, renderer);
    Err(Violation::waivable(format!(
        "{kind} {namespace}/{app}: its release {namespace}/{release} takes the name under which {by}, and helm-controller adopts an existing object of the name it renders, so {trigger} would rewrite this {kind} into {into}; choose another name"
    )))
}

/// What renders the name, the write that would render it, and what this release would become,
/// as the refusal says them.
fn told(by_what: By, beside: Option<&str>, tenant: &str, renderer: &str) -> [String; 3] {
    match (by_what, beside) {
        // A switch key: the module itself.
        (By::Switch(key), None) => [
            [
                tenant,
                " renders its ",
                renderer,
                " module (tenantModules.",
                key,
                ")",
            ]
            .concat(),
            ["turning ", key, " on"].concat(),
            ["the ", renderer, " module"].concat(),
        ],
        (By::Always, what) => {
            let what = what.unwrap_or(renderer);
            [
                [tenant, " always renders its ", what].concat(),
                "the Tenant's next reconcile".to_owned(),
                ["the ", what].concat(),
            ]
        }
        (By::Switch(key), Some(what)) => [
            [
                "the ",
                renderer,
                " module of ",
                tenant,
                " renders a ",
                what,
                " while ",
                key,
                " is on",
            ]
            .concat(),
            ["turning ", key, " on"].concat(),
            ["that ", what, " and uninstall what it runs"].concat(),
        ],
        (By::Package, what) => {
            let what = what.unwrap_or(renderer);
            [
                [
                    "the platform's optional ",
                    what,
                    " package renders its release",
                ]
                .concat(),
                "enabling that package".to_owned(),
                ["the ", what, " and uninstall what it runs"].concat(),
            ]
        }
    }
}
