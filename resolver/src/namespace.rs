//! Label integrity on Namespaces: provider labels and tenant ancestor labels are the
//! platform's. Even the platform may only point a provider label up the tenant tree, and the
//! ancestor labels must match the naming rule, because every other rule trusts them.

use std::collections::BTreeSet;

use crate::capability::is_provider_key;
use crate::evaluation::Evaluation;
use crate::tenant::{self, ANCESTOR_PREFIX, Labels};
use crate::verdict::{BAD_REQUEST, Violation, list_some};

pub fn check(eval: &Evaluation) -> Result<(), Violation> {
    let request = eval.request;
    let Some(new) = &request.object else {
        return Err(Violation::failure(
            BAD_REQUEST,
            format!("Namespace {}: the request has no object", request.name),
        ));
    };
    let empty = Labels::new();
    let old = request.old_object.as_ref().map_or(&empty, |o| &o.labels);
    let protected =
        |key: &str| key.starts_with(ANCESTOR_PREFIX) || is_provider_key(key, eval.settings);
    let changed: BTreeSet<&str> = new
        .labels
        .keys()
        .chain(old.keys())
        .map(String::as_str)
        .filter(|key| protected(key) && new.labels.get(*key) != old.get(*key))
        .collect();
    if changed.is_empty() {
        return Ok(());
    }
    let name = &request.name;
    if !eval.is_platform() {
        let keys: Vec<String> = changed.iter().map(|k| k.to_string()).collect();
        return Err(Violation::rule(format!(
            "Namespace {name}: labels {} are managed by the Cozystack platform and {} may not set, change or remove them; ask a platform administrator",
            list_some(&keys, 5),
            request.user.username
        )));
    }
    let placement = tenant::place(name, &new.labels).map_err(|err| {
        Violation::rule(format!(
            "{err}; the platform must write exactly the chain the name implies (tenant-root carries none)"
        ))
    })?;
    for key in changed.iter().filter(|k| !k.starts_with(ANCESTOR_PREFIX)) {
        let Some(value) = new.labels.get(*key) else {
            continue;
        };
        if value.is_empty() || value == name || placement.is_within(value) {
            continue;
        }
        let ancestors = if placement.chain.is_empty() {
            "it has none".to_owned()
        } else {
            placement.chain.join(", ")
        };
        return Err(Violation::rule(format!(
            "Namespace {name}: {key}={value} names neither this namespace nor one of its tenant ancestors ({ancestors}); a provider label may only point up the tenant tree"
        )));
    }
    Ok(())
}
