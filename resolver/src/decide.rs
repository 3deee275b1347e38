//! The top-level decision: route a request to the rules of its surface.

use serde_json::Value;

use crate::composed::tenant_modules;
use crate::model::chart::{TENANT_KIND, TENANT_RELEASE_PREFIX};
use crate::model::evaluation::Evaluation;
use crate::model::facts::Cluster;
use crate::model::kinds::KindRules;
use crate::model::request::{AppIdentity, ObjectState, Operation, Request, Surface};
use crate::model::settings::Settings;
use crate::model::verdict::{BAD_REQUEST, Verdict, Violation};
use crate::rules::capability::awaiting_warnings;
use crate::rules::cardinality::{self, Subject};
use crate::rules::groups;
use crate::rules::namespace;
use crate::rules::protection::{self, After};
use crate::rules::visibility;

/// Decides one admission request. Pure: the only inputs are the request, the settings and
/// what `cluster` answers.
pub fn evaluate(request: &Request, settings: &Settings, cluster: &dyn Cluster) -> Verdict {
    let eval = Evaluation::new(request, settings, cluster);
    let mut warnings = Vec::new();
    let subresource = request.subresource.as_deref().filter(|s| !s.is_empty());
    let labels_of_namespace = |eval: &Evaluation| match request.operation {
        Operation::Create | Operation::Update => namespace::check(eval),
        _ => Ok(()),
    };
    let outcome = match (request.surface, subresource) {
        _ if request.operation == Operation::Connect => Ok(()),
        // The API server's Namespace status and finalize strategies reset only the spec or
        // the status: labels written through them land, so they are judged like any other.
        (Surface::Namespace, Some("status" | "finalize")) => labels_of_namespace(&eval),
        // A custom resource's status subresource ignores every change outside status.
        (_, Some(_)) => Ok(()),
        (Surface::Application, None) => application(&eval, &mut warnings),
        (Surface::HelmRelease, None) => helm_release(&eval, &mut warnings),
        (Surface::Namespace, None) => labels_of_namespace(&eval),
    };
    match outcome {
        Ok(()) => Verdict::allow_with(warnings),
        Err(violation) => Verdict {
            warnings,
            ..Verdict::deny(violation.code, violation.message)
        },
    }
}

/// The slot rule after the count: refused like the count (waivable for platform writers); in a
/// background audit an instance off its slot is a warning, since it was made before the slots
/// and is renamed, not deleted, by the operator moving onto them.
fn slots(
    eval: &Evaluation,
    rules: &KindRules,
    subject: &Subject,
    warnings: &mut Vec<String>,
) -> Result<(), Violation> {
    match cardinality::check_slot(eval, rules, subject) {
        Ok(()) => Ok(()),
        Err(v) if eval.is_audit() => {
            warnings.push(v.message);
            Ok(())
        }
        Err(v) => eval.enforce(v, warnings),
    }
}

fn teardown_delete(eval: &Evaluation) -> bool {
    eval.request.operation == Operation::Delete && eval.user().is_teardown(eval.settings)
}

/// Did the request bring the object it needs? Missing ones are malformed requests.
fn require_object(eval: &Evaluation) -> Result<(), Violation> {
    let request = eval.request;
    let missing = match request.operation {
        Operation::Create => request.object.is_none().then_some("object"),
        Operation::Update if request.object.is_none() => Some("object"),
        Operation::Update => request.old_object.is_none().then_some("oldObject"),
        _ => None,
    };
    match missing {
        Some(field) => Err(Violation::failure(
            BAD_REQUEST,
            format!(
                "{} {} {}/{}: the request has no {field}",
                request.operation_name(),
                request.kind,
                request.namespace,
                request.name
            ),
        )),
        None => Ok(()),
    }
}

/// What a Tenant write does beyond the Tenant object: a new Tenant (`old` is `None`) names a
/// namespace and its groups, and new or changed, its values switch modules on or off.
fn tenant_effects(
    eval: &Evaluation,
    name: &str,
    old: Option<&Value>,
    new: &Value,
    warnings: &mut Vec<String>,
) -> Result<(), Violation> {
    let parent = &eval.request.namespace;
    if old.is_none() {
        groups::check_groups(eval, parent, name)?;
    }
    tenant_modules::check_switches(eval, parent, name, old, new, warnings)
}

/// `apps.cozystack.io` Applications, with the end user's identity.
fn application(eval: &Evaluation, warnings: &mut Vec<String>) -> Result<(), Violation> {
    let request = eval.request;
    require_object(eval)?;
    // A tenant being torn down takes its whole subtree with it: nothing is left to protect.
    if teardown_delete(eval) {
        return Ok(());
    }
    if request.kind == TENANT_KIND && request.operation == Operation::Delete {
        protection::check_root_tenant_removal(eval, &request.namespace, &request.name)?;
    }
    if request.kind == TENANT_KIND
        && let Some(new) = &request.object
    {
        // An Application's spec is the Helm values.
        let old = match request.operation {
            Operation::Update => request.old_object.as_ref().map(|o| &o.spec),
            _ => None,
        };
        tenant_effects(eval, &request.name, old, &new.spec, warnings)?;
    }
    // The instance is its release, `<prefix><name>`, known whether or not the kind has rules
    // (and only compared by the Application's name without a prefix).
    let subject = Subject {
        namespace: &request.namespace,
        app: &request.name,
        release: eval.release_of(&request.kind, &request.name)?,
    };
    if request.operation == Operation::Create
        && let Err(v) = tenant_modules::check_module_name(eval, &request.kind, &subject)
    {
        eval.enforce(v, warnings)?;
    }
    let Some(rules) = eval.rules_of(&request.kind)? else {
        return Ok(());
    };
    visibility::check(eval, &rules, &request.namespace, eval.verb())?;
    protection::check_admin_only(
        eval,
        &rules,
        request.operation,
        &request.namespace,
        &request.name,
    )?;
    match request.operation {
        Operation::Create => {
            if let Err(v) = cardinality::check(eval, &rules, &subject) {
                eval.enforce(v, warnings)?;
            }
            slots(eval, &rules, &subject, warnings)?;
            warnings.extend(awaiting_warnings(eval, &rules)?);
        }
        Operation::Delete => {
            let terminating = request.old_object.as_ref().is_some_and(|o| o.terminating);
            if !terminating {
                // The consumers first: they must go before the module can, whichever way.
                if let Err(v) =
                    protection::check_removal(eval, &rules, &subject, &[], After::LabelsStay)
                {
                    eval.enforce(v, warnings)?;
                }
                tenant_modules::check_rendered_removal(eval, &rules, &subject)?;
            }
        }
        Operation::Update | Operation::Connect => {}
    }
    Ok(())
}

/// `helm.toolkit.fluxcd.io/v2` HelmReleases that carry the app identity labels.
fn helm_release(eval: &Evaluation, warnings: &mut Vec<String>) -> Result<(), Violation> {
    let request = eval.request;
    require_object(eval)?;
    if request.operation == Operation::Delete && request.old_object.is_none() {
        return Err(Violation::failure(
            BAD_REQUEST,
            format!(
                "DELETE HelmRelease {}/{}: the request has no oldObject, so the policy cannot tell whether it is an app release",
                request.namespace, request.name
            ),
        ));
    }
    let new = request.release_identity(request.object.as_ref());
    let old = request.release_identity(request.old_object.as_ref());
    let Some(identity) = new.as_ref().or(old.as_ref()) else {
        return Ok(());
    };
    if teardown_delete(eval) {
        return Ok(());
    }
    if !eval.is_platform() {
        return Err(Violation::rule(format!(
            "HelmRelease {ns}/{name} is the release of {kind} {ns}/{app}; app HelmReleases are written only by the Cozystack platform, and {user} is not a platform identity; {remedy}",
            ns = request.namespace,
            name = request.name,
            kind = identity.kind,
            app = identity.app,
            user = request.user.username,
            remedy = eval.remedy(&format!(
                "{} the {} through the apps.cozystack.io API instead",
                eval.verb(),
                identity.kind
            )),
        )));
    }
    let old_terminating = request.old_object.as_ref().is_some_and(|o| o.terminating);
    // Leaving a kind (DELETE, or an UPDATE that changes or drops the identity labels) is a
    // removal of that instance; entering one (CREATE, or an UPDATE that adds or changes them)
    // is a new instance to count.
    let same_kind = |a: &Option<AppIdentity>, b: &Option<AppIdentity>| {
        a.as_ref().map(|i| &i.kind) == b.as_ref().map(|i| &i.kind)
    };
    let leaving = match request.operation {
        Operation::Delete => old.as_ref(),
        Operation::Update if !same_kind(&old, &new) => old.as_ref(),
        _ => None,
    };
    let entering = match request.operation {
        Operation::Create => new.as_ref(),
        Operation::Update if !same_kind(&old, &new) => new.as_ref(),
        _ => None,
    };
    // The instance is the release, whatever its name label says.
    let subject = |app| Subject {
        namespace: &request.namespace,
        app,
        release: Some(request.name.clone()),
    };
    if let Some(left) = leaving.filter(|_| !old_terminating)
        && let Some(rules) = eval.rules_of(&left.kind)?
        && let Err(v) =
            protection::check_removal(eval, &rules, &subject(&left.app), &[], After::LabelsStay)
    {
        eval.enforce(v, warnings)?;
    }
    if let Some(entered) = entering {
        // Another kind under a module's name, on this path too (a platform writer applying it).
        if let Err(v) =
            tenant_modules::check_module_name(eval, &entered.kind, &subject(&entered.app))
        {
            eval.enforce(v, warnings)?;
        }
        if let Some(rules) = eval.rules_of(&entered.kind)? {
            if let Err(v) = cardinality::check(eval, &rules, &subject(&entered.app)) {
                eval.enforce(v, warnings)?;
            }
            slots(eval, &rules, &subject(&entered.app), warnings)?;
            if request.operation == Operation::Create {
                warnings.extend(awaiting_warnings(eval, &rules)?);
            }
        }
    }
    // A Tenant release, new (or relabelled into the kind) or staying one: a new one makes a
    // namespace, and its values switch modules either way.
    let stays_tenant = request.operation == Operation::Update
        && identity.kind == TENANT_KIND
        && same_kind(&old, &new);
    let new_tenant = entering.is_some_and(|i| i.kind == TENANT_KIND);
    if (new_tenant || stays_tenant)
        && let Some(name) = request.name.strip_prefix(TENANT_RELEASE_PREFIX)
    {
        fn values(state: &Option<ObjectState>) -> &Value {
            static NONE: Value = Value::Null;
            state
                .as_ref()
                .and_then(|s| s.spec.get("values"))
                .unwrap_or(&NONE)
        }
        let old = (!new_tenant).then(|| values(&request.old_object));
        tenant_effects(eval, name, old, values(&request.object), warnings)?;
    }
    Ok(())
}
