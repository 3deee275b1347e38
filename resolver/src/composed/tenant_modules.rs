//! What a Tenant write does to the modules its chart renders: a switch turned on or off meets
//! the state rules a create or delete of the module meets (cardinality, slots, protection),
//! while who may author the instance is the chart's business (see [`check_switches`]); and a
//! module the chart renders is removed by its switch, not through the API.

use serde_json::Value;

use crate::model::chart::{TENANT_RELEASE_PREFIX, switched_on, tenant_release};
use crate::model::evaluation::Evaluation;
use crate::model::kinds::{Deletion, KindRules};
use crate::model::tenant::tenant_namespace;
use crate::model::verdict::Violation;
use crate::rules::cardinality::{self, Subject};
use crate::rules::protection;

/// Judges a Tenant write by the modules its values switch: Tenant `name` in `parent`, with
/// `old` values (`None` on CREATE: every switch starts off) and `new` ones.
///
/// A switch turned on makes the chart render the module's instance, named after the key, in
/// the tenant's namespace; turned off, the chart uninstalls it. The chart is the platform: it
/// writes the instance through Flux with values the tenant cannot set (`valuesFrom:
/// cozystack-values` only), and `packages/apps/tenant/values.yaml` documents every switch —
/// `gateway` and `computeplane` included — as a value for whoever owns the Tenant. So the
/// authorship rules of a direct create (visibility, `protection.edit: adminOnly`) do not
/// apply to a switch; the state rules do: a switch on needs the name free for Helm and is one
/// more instance to count (cardinality), a switch off is the removal of a provider
/// (protection), judged together with every module the same write turns off. The same on
/// CREATE and UPDATE, on the Application and the HelmRelease path; nothing here reads the
/// tenant's namespace, which a CREATE has not made yet.
pub fn check_switches(
    eval: &Evaluation,
    parent: &str,
    name: &str,
    old: Option<&Value>,
    new: &Value,
    warnings: &mut Vec<String>,
) -> Result<(), Violation> {
    let Some(child) = tenant_namespace(parent, name) else {
        return Ok(());
    };
    let owner = format!("{TENANT_RELEASE_PREFIX}{name}");
    // The chart names each module's release after its key, in the tenant's namespace.
    fn module<'s>(child: &'s str, key: &'s str) -> Subject<'s> {
        Subject {
            namespace: child,
            app: key,
            release: Some(key.to_owned()),
        }
    }
    // (key, kind, on) of every switch this write flips.
    let flipped: Vec<(&str, &str, bool)> = eval
        .settings
        .tenant_modules
        .iter()
        .filter_map(|(key, kind)| {
            let (was, is) = (switched_on(old, key), switched_on(Some(new), key));
            (was != is).then_some((key.as_str(), kind.as_str(), is))
        })
        .collect();
    // The chart uninstalls every module switched off here in one upgrade.
    let removed: Vec<(&str, Subject)> = flipped
        .iter()
        .filter(|(_, _, on)| !on)
        .map(|(key, kind, _)| (*kind, module(&child, key)))
        .collect();
    for (key, kind, is) in flipped {
        let Some(rules) = eval.rules_of(kind)? else {
            continue;
        };
        let subject = module(&child, key);
        let effect = |message: String| {
            format!(
                "Tenant {parent}/{name}: turning {key} {state} {action} {kind} {child}/{key}: {message}",
                state = if is { "on" } else { "off" },
                action = if is { "creates" } else { "removes" },
            )
        };
        let outcome = if is {
            check_name_free(eval, &rules, &subject, (parent, &owner), key)
                .and_then(|()| cardinality::check(eval, &rules, &subject))
                .and_then(|()| cardinality::check_slot(eval, &rules, &subject))
        } else {
            protection::check_removal(eval, &rules, &subject, &removed)
        };
        let mut admitted = Vec::new();
        if let Err(v) = outcome {
            eval.enforce(v, &mut admitted).map_err(|v| Violation {
                message: effect(v.message),
                ..v
            })?;
        }
        warnings.extend(admitted.into_iter().map(effect));
    }
    Ok(())
}

/// A switch turned on makes Helm create the HelmRelease `key` in the tenant's namespace, and
/// Helm refuses to adopt an object its release does not own (no `meta.helm.sh/release-*`
/// annotations naming it): an instance of the kind created through the API under that name
/// would stall the Tenant's release. One the Tenant's own release still owns (the leftover of
/// an uninstall that failed) is the module itself. Read from the kind's list, which the count
/// needs anyway; the release is looked up only when the name is taken.
///
/// An audit replay of a Tenant whose switch is long on is no switch turned on: Helm upgrades
/// the objects of its own manifest without asking who owns them, so a module edited through the
/// API since (which lost Helm's annotations) is still the chart's, and nothing is reported.
fn check_name_free(
    eval: &Evaluation,
    rules: &KindRules,
    subject: &Subject,
    (parent, owner): (&str, &str),
    key: &str,
) -> Result<(), Violation> {
    if eval.is_audit() {
        return Ok(());
    }
    let instances = eval.instances(rules)?;
    let Some(taken) = instances.iter().find(|i| subject.is(i) && !i.terminating) else {
        return Ok(());
    };
    let owned = match eval.release(subject.namespace, key)?.as_ref() {
        None => return Ok(()),
        Some(meta) => meta.rendered_by(parent, owner),
    };
    if owned {
        return Ok(());
    }
    Err(Violation::waivable(format!(
        "its name is taken by {kind} {namespace}/{app}, which Helm release {parent}/{owner} does not own (it was created through the API), and Helm refuses to adopt an object without its ownership metadata, so the Tenant's release would fail; delete the existing {kind} {namespace}/{app} first, or leave {key} off (tenantModules.{key})",
        kind = rules.kind,
        namespace = subject.namespace,
        app = taken.app,
    )))
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
pub fn check_rendered_removal(
    eval: &Evaluation,
    rules: &KindRules,
    subject: &Subject,
) -> Result<(), Violation> {
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
    let Some((parent, release)) = tenant_release(subject.namespace) else {
        return Ok(());
    };
    let tenant = eval.release(&parent, &release)?;
    let values = tenant.as_ref().as_ref().map(|meta| &meta.values);
    if !switched_on(values, key) {
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
