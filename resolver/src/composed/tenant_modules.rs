//! What a Tenant write does to the modules its chart renders: a switch turned on or off meets
//! the state rules a create or delete of the module meets (cardinality, slots, protection),
//! while who may author the instance is the chart's business (see [`check_switches`]); and a
//! module the chart renders is removed by its switch, not through the API.

use serde_json::Value;

use crate::model::builtin::{self, When};
use crate::model::chart::{TENANT_RELEASE_PREFIX, switched_on, tenant_release};
use crate::model::evaluation::Evaluation;
use crate::model::kinds::{Deletion, KindRules};
use crate::model::request::AppIdentity;
use crate::model::tenant::tenant_namespace;
use crate::model::verdict::Violation;
use crate::rules::cardinality::{self, Subject};
use crate::rules::protection::{self, After};

/// Judges a Tenant write by the modules its values switch: Tenant `name` in `parent`, with
/// `old` values (`None` on CREATE: every switch starts off) and `new` ones.
///
/// A switch turned on makes the chart render the module's instance, named after the key, in
/// the tenant's namespace; turned off, the chart uninstalls it. The chart is the platform: it
/// writes the instance through Flux with values the tenant cannot set (`valuesFrom:
/// cozystack-values` only), and `packages/apps/tenant/values.yaml` documents every switch —
/// `gateway` and `computeplane` included — as a value for whoever owns the Tenant. So the
/// authorship rules of a direct create (visibility, `protection.edit: adminOnly`) do not
/// apply to a switch; the state rules do: a switch on is one more instance to count
/// (cardinality) and takes over whatever holds its name (helm-controller adopts it), a switch
/// off is the removal of a provider
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
            (was != is).then_some((key, kind, is))
        })
        .collect();
    // The chart uninstalls every module switched off here in one upgrade.
    let removed: Vec<(&str, Subject)> = flipped
        .iter()
        .filter(|(_, _, on)| !on)
        .map(|(key, kind, _)| (*kind, module(&child, key)))
        .collect();
    for (key, kind, is) in flipped {
        // A switch of a kind the cluster does not serve renders nothing.
        if !eval.serves(kind)? {
            continue;
        }
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
        let mut admitted = Vec::new();
        let outcome = if is {
            // The count and the slot first: they read the kind's list, which the write needs
            // anyway; the name's one GET comes only when they pass.
            cardinality::check(eval, &rules, &subject)
                .and_then(|()| cardinality::check_slot(eval, &rules, &subject))
                .and_then(|()| match old {
                    // The chart makes the tenant's namespace: on a Tenant CREATE it does not
                    // exist, or is terminating with everything in it (nothing keeps it), so no
                    // object can hold the name.
                    None => Ok(None),
                    Some(_) => check_adoption(eval, &rules, &subject, (parent, &owner), key),
                })
                .map(|adopted| admitted.extend(adopted))
        } else {
            protection::check_removal(eval, &rules, &subject, &removed, After::LabelsMoveUp)
        };
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

/// What renders a name an app's release would take ([`check_module_name`]).
enum By<'s> {
    /// The Tenant chart while this switch is on (the module, or what its chart renders).
    Switch(&'s str),
    /// The Tenant chart whatever its values (`info`).
    Always,
    /// An optional package of the platform (BootBox).
    Package,
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
fn check_adoption(
    eval: &Evaluation,
    rules: &KindRules,
    subject: &Subject,
    (parent, owner): (&str, &str),
    key: &str,
) -> Result<Option<String>, Violation> {
    if eval.is_audit() {
        return Ok(None);
    }
    let (namespace, kind) = (subject.namespace, &rules.kind);
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
pub fn check_module_name(
    eval: &Evaluation,
    kind: &str,
    subject: &Subject,
) -> Result<(), Violation> {
    // Without the kind's release prefix its release is unknown: no name is claimed.
    let Some(release) = subject.release.as_deref() else {
        return Ok(());
    };
    let (namespace, app) = (subject.namespace, subject.app);
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
    // (what renders the name, the write that would render it, what this release would become)
    let [by, trigger, into] = match (by_what, beside) {
        // A switch key: the module itself.
        (By::Switch(key), None) => [
            [
                &tenant,
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
                [&tenant, " always renders its ", what].concat(),
                "the Tenant's next reconcile".to_owned(),
                ["the ", what].concat(),
            ]
        }
        (By::Switch(key), Some(what)) => [
            [
                "the ",
                renderer,
                " module of ",
                &tenant,
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
    };
    Err(Violation::waivable(format!(
        "{kind} {namespace}/{app}: its release {namespace}/{release} takes the name under which {by}, and helm-controller adopts an existing object of the name it renders, so {trigger} would rewrite this {kind} into {into}; choose another name"
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
