//! One request evaluated the way the policy-server evaluates it, shown the way an operator
//! reads it when a user reports a denial: the verdict, the message, the warnings and every
//! host call the policy made.

use std::path::Path;
use std::sync::Arc;

use crate::error::Error;
use cozystack_policy_runtime::cluster::ClusterObjects;
use cozystack_policy_runtime::policy::{
    Evaluation, Policy, rule_of, verdict_of, waived_by, warned_by, warnings_of,
};
use serde_json::Value;

/// The AdmissionRequest in a file (`-`: standard input) holding an AdmissionReview (what the
/// API server sends and audit logs show) or a bare AdmissionRequest, as JSON or YAML. (A
/// server-side dry-run is no way to capture one for `apps.cozystack.io`: cozystack-api up to
/// v1.6.2 persists it, cozystack#3982.)
pub fn read_request(path: &Path) -> Result<Value, Error> {
    let text = if path == Path::new("-") {
        std::io::read_to_string(std::io::stdin())
            .map_err(|source| Error::stream("standard input", source))?
    } else {
        std::fs::read_to_string(path).map_err(|e| Error::read(path, e))?
    };
    let value: Value = serde_yaml::from_str(&text).map_err(|e| Error::decode(path.display(), e))?;
    let request = match value.get("request") {
        Some(request) if value["kind"] == "AdmissionReview" => request.clone(),
        _ => value,
    };
    if !request["operation"].is_string() || !request["kind"].is_object() {
        return Err(format!(
            "{}: neither an AdmissionReview nor an AdmissionRequest (no operation and kind)",
            path.display()
        )
        .into());
    }
    Ok(request)
}

/// Evaluates `request` under `settings`, which the caller validated as the policy-server does
/// on start (`run` through its preparation, before the cluster is read).
pub fn evaluate(
    policy: &Policy,
    request: &Value,
    settings: &Value,
    cluster: ClusterObjects,
) -> Result<Evaluation, Error> {
    Ok(policy.validate(request, settings, Arc::new(cluster), Vec::new())?)
}

/// What a person reads: the request, the verdict, the message, the warnings, the host calls.
pub fn text(request: &Value, evaluation: &Evaluation) -> String {
    let response = &evaluation.response;
    let name = request["name"].as_str().unwrap_or_default();
    let target = match request["namespace"].as_str() {
        Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
        _ => name.to_owned(),
    };
    let user = request
        .pointer("/userInfo/username")
        .and_then(Value::as_str)
        .unwrap_or("(no user: an audit-scanner replay)");
    let mut out = format!(
        "request   {} {} {target} as {user}\nverdict   {}\n",
        request["operation"].as_str().unwrap_or_default(),
        request
            .pointer("/kind/kind")
            .and_then(Value::as_str)
            .unwrap_or_default(),
        verdict_of(response)
    );
    if let Some(rule) = rule_of(response) {
        out.push_str(&format!("rule      {rule}\n"));
    }
    if let Some(message) = response["message"].as_str() {
        out.push_str(&format!("message   {message}\n"));
    }
    for warning in warnings_of(response) {
        out.push_str(&format!("warning   {warning}\n"));
    }
    let rows = warned_by(response);
    if !rows.is_empty() {
        out.push_str(&format!("warned by {}\n", rows.join(", ")));
    }
    let waived = waived_by(response);
    if !waived.is_empty() {
        out.push_str(&format!("waived by {}\n", waived.join(", ")));
    }
    let calls = &evaluation.exchanges;
    out.push_str(&format!(
        "host calls {} ({} bytes answered)\n",
        calls.len(),
        evaluation.response_bytes()
    ));
    for (i, exchange) in calls.iter().enumerate() {
        out.push_str(&format!("  {}. {exchange}\n", i + 1));
    }
    out
}
