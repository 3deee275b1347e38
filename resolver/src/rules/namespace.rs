//! Label integrity on Namespaces: provider labels and tenant ancestor labels are the
//! platform's. Even the platform may only point a provider label up the tenant tree (or, on a
//! namespace outside the tree, attach it to a tenant's provider of an attachable class), must
//! write ancestor labels that match the naming rule, and must point a capability label at the
//! provider nearest-ancestor resolution gives, because every other rule trusts them.

use crate::change::LabelChange;
use crate::model::evaluation::Evaluation;
use crate::model::providers::provider_class;
use crate::model::tenant::{self, ANCESTOR_PREFIX, AncestorLabels};
use crate::model::verdict::{Violation, list_some};
use crate::rules::Outcome;
use crate::rules::capability;

/// Judges the protected labels a Namespace write changes.
pub fn judge(eval: &Evaluation, labels: &LabelChange) -> Outcome {
    check(eval, labels)?;
    Ok(Vec::new())
}

fn check(eval: &Evaluation, write: &LabelChange) -> Result<(), Violation> {
    let request = eval.request;
    let changed = &write.changed;
    let name = &request.name;
    if !eval.is_platform() {
        let keys: Vec<String> = changed.iter().map(str::to_owned).collect();
        return Err(Violation::rule(format!(
            "Namespace {name}: labels {} are managed by the Cozystack platform and {} may not set, change or remove them; {}",
            list_some(&keys, 5),
            request.user.username,
            eval.remedy("ask a platform administrator")
        )));
    }
    // The chain the release's Tenant chart writes; a write that leaves the ancestor labels as
    // they were may also keep the shorter chain an older release left (v1.5.4 has no backfill,
    // and migration 49's is best-effort), since it did not write it.
    let release_chains = eval.settings.judged().ancestor_labels();
    let untouched = !changed.iter().any(|k| k.starts_with(ANCESTOR_PREFIX));
    let accepted = match untouched {
        true => AncestorLabels::ANY,
        false => release_chains,
    };
    let placement = tenant::place(name, write.labels, accepted).map_err(|err| {
        Violation::rule(format!(
            "{err}; the platform must write exactly the chain the name implies (tenant-root carries none)"
        ))
    })?;
    for key in changed.iter().filter(|k| !k.starts_with(ANCESTOR_PREFIX)) {
        let Some(value) = write.labels.get(key).filter(|v| !v.is_empty()) else {
            continue;
        };
        // `Settings::is_provider_key` accepted the key, so it names a class.
        let Some((class, is_capability)) = provider_class(key) else {
            continue;
        };
        if placement.chain.is_empty() {
            attach(eval, name, key, class, value)?;
        } else if value == name || placement.is_within(value) {
            if is_capability {
                capability::check_resolution(eval, name, &placement.chain, key, class, value)?;
            }
        } else {
            return Err(Violation::rule(format!(
                "Namespace {name}: {key}={value} names neither this namespace nor one of its tenant ancestors ({}); a provider label may only point up the tenant tree",
                placement.chain.join(", ")
            )));
        }
    }
    Ok(())
}

/// A namespace outside the tenant tree has no ancestors to point at; the platform may attach
/// it to a tenant's provider of an attachable class (the tenant gateway attaches `cozy-*` and
/// `default`), and nothing else.
fn attach(
    eval: &Evaluation,
    name: &str,
    key: &str,
    class: &str,
    value: &str,
) -> Result<(), Violation> {
    let attachable = &eval.settings.attachable_classes;
    if !attachable.iter().any(|c| c == class) {
        return Err(Violation::rule(format!(
            "Namespace {name}: {key}={value} on a namespace outside the tenant tree; only the classes in attachableClasses ({}) may attach such a namespace to a tenant's provider — add {class} there if a platform component attaches it",
            if attachable.is_empty() {
                "none".to_owned()
            } else {
                attachable.join(", ")
            }
        )));
    }
    if !tenant::is_tenant_name(value) {
        return Err(Violation::rule(format!(
            "Namespace {name}: {key}={value} does not name a tenant namespace; a namespace outside the tenant tree may only be attached to a tenant's {class} provider"
        )));
    }
    Ok(())
}
