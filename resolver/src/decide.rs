//! The top-level decision: route a request to the rules of its surface.

use crate::capability::awaiting_warnings;
use crate::cardinality::{self, Subject};
use crate::evaluation::Evaluation;
use crate::facts::Cluster;
use crate::namespace;
use crate::protection;
use crate::request::{AppIdentity, Operation, Request, Surface};
use crate::rules::KindRules;
use crate::settings::Settings;
use crate::verdict::{BAD_REQUEST, Verdict, Violation};
use crate::visibility;

/// Decides one admission request. Pure: the only inputs are the request, the settings and
/// what `cluster` answers.
pub fn evaluate(request: &Request, settings: &Settings, cluster: &dyn Cluster) -> Verdict {
    let eval = Evaluation::new(request, settings, cluster);
    let mut warnings = Vec::new();
    let outcome = if request
        .subresource
        .as_deref()
        .is_some_and(|s| !s.is_empty())
        || request.operation == Operation::Connect
    {
        // Status and other subresources cannot change spec or labels.
        Ok(())
    } else {
        match request.surface {
            Surface::Application => application(&eval, &mut warnings),
            Surface::HelmRelease => helm_release(&eval, &mut warnings),
            Surface::Namespace => match request.operation {
                Operation::Create | Operation::Update => namespace::check(&eval),
                _ => Ok(()),
            },
        }
    };
    match outcome {
        Ok(()) => Verdict::allow_with(warnings),
        Err(violation) => Verdict {
            warnings,
            ..Verdict::deny(violation.code, violation.message)
        },
    }
}

fn rules_of(eval: &Evaluation, kind: &str) -> Result<Option<KindRules>, Violation> {
    eval.definitions()?
        .get(kind)
        .map(|rules| rules.cloned())
        .map_err(|err| {
            Violation::rule(format!(
                "{err}; the rules of kind {kind} cannot be read, so the request is rejected — fix the ApplicationDefinition or the policy settings"
            ))
        })
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

/// `apps.cozystack.io` Applications, with the end user's identity.
fn application(eval: &Evaluation, warnings: &mut Vec<String>) -> Result<(), Violation> {
    let request = eval.request;
    require_object(eval)?;
    let Some(rules) = rules_of(eval, &request.kind)? else {
        return Ok(());
    };
    // A tenant being torn down takes its whole subtree with it: nothing is left to protect.
    if teardown_delete(eval) {
        return Ok(());
    }
    visibility::check(eval, &rules)?;
    let subject = Subject {
        namespace: &request.namespace,
        app: &request.name,
        release: None,
    };
    match request.operation {
        Operation::Create => {
            if let Err(v) = cardinality::check(eval, &rules, &subject) {
                eval.enforce(v, warnings)?;
            }
            warnings.extend(awaiting_warnings(eval, &rules)?);
        }
        Operation::Update => protection::check_edit(eval, &rules)?,
        Operation::Delete => {
            let terminating = request.old_object.as_ref().is_some_and(|o| o.terminating);
            if !terminating
                && let Err(v) =
                    protection::check_removal(eval, &rules, &request.namespace, &request.name)
            {
                eval.enforce(v, warnings)?;
            }
        }
        Operation::Connect => {}
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
            "HelmRelease {ns}/{name} is the release of {kind} {ns}/{app}; app HelmReleases are written only by the Cozystack platform, and {user} is not a platform identity; {verb} the {kind} through the apps.cozystack.io API instead",
            ns = request.namespace,
            name = request.name,
            kind = identity.kind,
            app = identity.app,
            user = request.user.username,
            verb = eval.verb(),
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
    if let Some(left) = leaving.filter(|_| !old_terminating)
        && let Some(rules) = rules_of(eval, &left.kind)?
        && let Err(v) = protection::check_removal(eval, &rules, &request.namespace, &left.app)
    {
        eval.enforce(v, warnings)?;
    }
    if let Some(entered) = entering
        && let Some(rules) = rules_of(eval, &entered.kind)?
    {
        let subject = Subject {
            namespace: &request.namespace,
            app: &entered.app,
            release: Some(&request.name),
        };
        if let Err(v) = cardinality::check(eval, &rules, &subject) {
            eval.enforce(v, warnings)?;
        }
        if request.operation == Operation::Create {
            warnings.extend(awaiting_warnings(eval, &rules)?);
        }
    }
    Ok(())
}
