//! What a Tenant application does beyond its own object: the namespace it creates, the groups
//! that namespace's tenant is administered by, and the module instances its values switch on
//! and off (the Tenant chart renders `monitoring: true` as the `monitoring` release of kind
//! Monitoring in the tenant's namespace). A Tenant write is judged by those effects: a switch
//! meets the state rules a create or delete of the module meets (cardinality, protection),
//! while who may author the instance is the chart's business (see [`check_switches`]).

use serde_json::Value;

use crate::cardinality::{self, Subject};
use crate::evaluation::Evaluation;
use crate::protection;
use crate::rules::{Deletion, KindRules};
use crate::tenant::{self, tenant_namespace};
use crate::verdict::Violation;

/// The application kind of tenants (hard-wired in cozystack-api as well).
pub const TENANT_KIND: &str = "Tenant";

/// The group levels Cozystack creates for every tenant: `<ns>-view`, `-use`, `-admin`,
/// `-super-admin` (`cozy-lib.rbac`, Keycloak groups).
const GROUP_LEVELS: &[&str] = &["-view", "-use", "-admin", "-super-admin"];

/// Refuses a new Tenant whose groups would be groups of one of its ancestors: `super` under
/// `tenant-a` gets `tenant-a-super-admin` as its admin group, which is tenant-a's own
/// super-admin group, so whoever is made an administrator of the child would administer
/// tenant-a. Every writer is refused: the collision is a flaw of the name, not of who asks.
pub fn check_groups(eval: &Evaluation, parent: &str, name: &str) -> Result<(), Violation> {
    let Some(child) = tenant_namespace(parent, name) else {
        return Ok(());
    };
    let Some(ancestors) = tenant::chain_from_name(parent) else {
        return Ok(());
    };
    let settings = eval.settings;
    let levels: Vec<&str> = GROUP_LEVELS
        .iter()
        .copied()
        .chain(
            settings
                .tenant_admin_group_suffixes
                .iter()
                .map(String::as_str),
        )
        .collect();
    let prefix = &settings.tenant_group_prefix;
    for ancestor in ancestors.iter().filter(|a| **a != child) {
        for own in &levels {
            for theirs in &levels {
                if format!("{child}{own}") == format!("{ancestor}{theirs}") {
                    return Err(Violation::rule(format!(
                        "Tenant {parent}/{name} would get namespace {child}, whose group {prefix}{child}{own} is already {ancestor}'s {level} group: members given one would hold the other; choose a tenant name that is not a group level ({words})",
                        level = theirs.trim_start_matches('-'),
                        words = level_words(&levels),
                    )));
                }
            }
        }
    }
    Ok(())
}

/// `view, use, admin, super` from the level suffixes: the words a child name must avoid.
fn level_words(levels: &[&str]) -> String {
    let mut words: Vec<&str> = Vec::new();
    for word in levels
        .iter()
        .filter_map(|l| l.trim_start_matches('-').split('-').next())
    {
        if !word.is_empty() && !words.contains(&word) {
            words.push(word);
        }
    }
    words.join(", ")
}

/// The Tenant HelmRelease whose chart renders `namespace`'s modules: its namespace and name.
/// `tenant-<word>` in the parent namespace; the root's is `tenant-root` in `tenant-root`
/// (`packages/system/cozystack-basics/templates/tenant-root.yaml`), which is the same rule
/// with the root Tenant's name, `root`.
pub fn tenant_release(namespace: &str) -> Option<(String, String)> {
    let (parent, name) = tenant::tenant_application(namespace)?;
    Some((parent, format!("{TENANT_RELEASE_PREFIX}{name}")))
}

/// Tenant releases are `tenant-<name>` (the Tenant chart's `tenant.name` refuses any other).
pub const TENANT_RELEASE_PREFIX: &str = "tenant-";

/// Whether the Tenant chart renders `key` for these values: Go templates' truth (`{{ if
/// .Values.monitoring }}`), under which `false`, `0`, `""`, `null`, `[]` and `{}` are off and
/// anything else is on. The key absent is off as well (`tenant.gatewayEffective`).
pub fn switched_on(values: Option<&Value>, key: &str) -> bool {
    match values.and_then(|v| v.get(key)) {
        None | Some(Value::Null) => false,
        Some(Value::Bool(on)) => *on,
        Some(Value::Number(n)) => n.as_f64() != Some(0.0),
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Array(items)) => !items.is_empty(),
        Some(Value::Object(map)) => !map.is_empty(),
    }
}

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
        let Some(rules) = crate::decide::rules_of(eval, kind)? else {
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
