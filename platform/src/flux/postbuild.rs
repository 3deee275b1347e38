//! kustomize-controller's post-build substitution, run only when the Kustomization states
//! `spec.postBuild` (v1.8.0 `kustomization_controller.go` `build`): fluxcd/pkg kustomize v1.27.0
//! `kustomize_varsub.go` `SubstituteVariables` reads the variables of every `substituteFrom`
//! ConfigMap and Secret in the Kustomization's namespace (an `optional` one may be missing), then
//! `substitute` over them, every value with its newlines removed, and, when there is any
//! variable, evaluates each built object's YAML with fluxcd/pkg envsubst v1.5.0 (not strict: an
//! unset variable is empty); an object labelled or annotated
//! `kustomize.toolkit.fluxcd.io/substitute: disabled` is left as it is.
//!
//! Of envsubst's expressions, `${var}`, `${var-default}`, `${var=default}`, `${var:-default}`,
//! `${var:=default}` and the `$$` escape are evaluated; any other (`${#var}`, `${var^^}`, a
//! pattern, an offset) stops the check, naming it: the change set then is not what `check` can
//! say Flux applies, and `flux build kustomization` can be piped in instead.

use std::collections::BTreeMap;

use cozystack_policy_runtime::cluster::ClusterObjects;
use serde_json::Value;

use crate::flux::versions::{Flux, Substitution};

use crate::error::Error;

/// The label or annotation that keeps an object out of the substitution.
const DISABLE: &str = "kustomize.toolkit.fluxcd.io/substitute";

/// What a Kustomization's `spec.postBuild` substitutes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PostBuild {
    substitute: BTreeMap<String, String>,
    from: Vec<Reference>,
}

/// The kinds a `substituteFrom` entry may name (kustomize-controller's `api/v1`
/// `SubstituteReference.Kind`: `+kubebuilder:validation:Enum=Secret;ConfigMap`).
pub const SOURCE_KINDS: [&str; 2] = ["ConfigMap", "Secret"];

/// One `substituteFrom` entry.
#[derive(Debug, Clone, PartialEq)]
struct Reference {
    kind: String,
    name: String,
    optional: bool,
}

impl PostBuild {
    /// The Kustomization's `spec.postBuild`, if it states one.
    pub fn of(kustomization: &Value) -> Option<PostBuild> {
        let post = kustomization["spec"]
            .get("postBuild")
            .filter(|p| !p.is_null())?;
        let substitute = post["substitute"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().replace('\n', "")))
            .collect();
        let from = post["substituteFrom"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| Reference {
                kind: r["kind"].as_str().unwrap_or_default().to_owned(),
                name: r["name"].as_str().unwrap_or_default().to_owned(),
                optional: r["optional"].as_bool().unwrap_or(false),
            })
            .collect();
        Some(PostBuild { substitute, from })
    }

    /// Whether it reads ConfigMaps or Secrets of the cluster.
    pub fn reads_cluster(&self) -> bool {
        !self.from.is_empty()
    }

    /// The `substituteFrom` references: kind and name.
    pub fn references(&self) -> impl Iterator<Item = (&str, &str)> {
        self.from.iter().map(|r| (r.kind.as_str(), r.name.as_str()))
    }

    /// The variables (`LoadVariables`, then `substitute` over them), the referenced objects
    /// read from `cluster` in `namespace`.
    pub fn variables(
        &self,
        namespace: &str,
        cluster: &ClusterObjects,
    ) -> Result<BTreeMap<String, String>, Error> {
        let mut vars = BTreeMap::new();
        for reference in &self.from {
            let object = cluster.get("v1", &reference.kind, &reference.name, Some(namespace));
            let Some(object) = object else {
                if reference.optional {
                    continue;
                }
                return Err(format!(
                    "substitute from '{}/{}' error: not found in namespace {namespace} of the cluster read (a dump must hold it; a live read lists no ConfigMaps or Secrets): kustomize-controller fails the build, so nothing lands",
                    reference.kind, reference.name
                )
                .into());
            };
            let data = object["data"].as_object().cloned().unwrap_or_default();
            for (key, value) in data {
                let text = value.as_str().unwrap_or_default();
                let text = match reference.kind.as_str() {
                    "Secret" => decode_base64(text).ok_or_else(|| {
                        format!("Secret/{}: data.{key} is not base64", reference.name)
                    })?,
                    _ => text.to_owned(),
                };
                vars.insert(key, text.replace('\n', ""));
            }
        }
        vars.extend(self.substitute.clone());
        Ok(vars)
    }
}

/// `varsubRegex`: a variable's name.
fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Whether `object` is marked `kustomize.toolkit.fluxcd.io/substitute: disabled` (a label or an
/// annotation): kustomize-controller never substitutes it.
pub fn disabled(object: &Value) -> bool {
    let marked = |key: &str| object["metadata"][key][DISABLE] == "disabled";
    marked("labels") || marked("annotations")
}

/// Why envsubst (non-strict, as kustomize-controller v1.8.0 runs it) refuses a document, or
/// `check` cannot evaluate it as it would: each fails the build.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubstitutionError {
    #[error("'{0}' var name is invalid, must match '^[_[:alpha:]][_[:alpha:][:digit:]]*$'")]
    InvalidName(String),
    #[error("unterminated expression ${{{0}")]
    Unterminated(String),
    #[error("${{{0}}} is no variable envsubst can read")]
    NoVariable(String),
    #[error("${{{0}}}: a default that is itself an expression is not evaluated here")]
    NestedDefault(String),
    #[error("${{{0}}} uses an envsubst function check does not evaluate")]
    Function(String),
    /// A document of kustomize's output that is no YAML.
    #[error("{0}")]
    Document(String),
}

/// Substitutes `vars` in one built document's YAML (`SubstituteVariables` on `res.AsYAML()`),
/// unless the object disables it or there is no variable; `object` is the document parsed.
pub fn substitute(
    document: &str,
    object: &Value,
    vars: &BTreeMap<String, String>,
    flux: Flux,
) -> Result<Option<String>, SubstitutionError> {
    if vars.is_empty() || disabled(object) {
        return Ok(None);
    }
    if let Some(bad) = vars.keys().find(|name| !valid_name(name)) {
        return Err(SubstitutionError::InvalidName(bad.clone()));
    }
    eval(document, vars, flux.substitution).map(Some)
}

/// envsubst's evaluation of `text`, as `substitution` treats an unset variable.
fn eval(
    text: &str,
    vars: &BTreeMap<String, String>,
    substitution: Substitution,
) -> Result<String, SubstitutionError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(next) = after.strip_prefix('$') {
            // `$$` is a literal `$`.
            out.push('$');
            rest = next;
        } else if let Some(body) = after.strip_prefix('{') {
            let end = body
                .find('}')
                .ok_or_else(|| SubstitutionError::Unterminated(body.to_owned()))?;
            out.push_str(&expression(&body[..end], vars, substitution)?);
            rest = &body[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// One `${…}`'s value.
fn expression(
    inner: &str,
    vars: &BTreeMap<String, String>,
    substitution: Substitution,
) -> Result<String, SubstitutionError> {
    let name_end = inner
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(inner.len());
    let (name, op) = inner.split_at(name_end);
    let value = vars.get(name);
    if !valid_name(name) {
        return Err(SubstitutionError::NoVariable(inner.to_owned()));
    }
    let or = |default: &str, unset_only: bool| match value {
        Some(v) if !v.is_empty() || unset_only => v.clone(),
        _ => default.to_owned(),
    };
    if op.is_empty() {
        return Ok(match (value, substitution) {
            (Some(value), _) => value.clone(),
            (None, Substitution::Lenient) => String::new(),
        });
    }
    for (prefix, unset_only) in [(":-", false), (":=", false), ("-", true), ("=", true)] {
        if let Some(default) = op.strip_prefix(prefix) {
            if default.contains('$') {
                return Err(SubstitutionError::NestedDefault(inner.to_owned()));
            }
            return Ok(or(default, unset_only));
        }
    }
    Err(SubstitutionError::Function(inner.to_owned()))
}

/// A Secret's data value, standard base64.
fn decode_base64(text: &str) -> Option<String> {
    use base64::Engine;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .ok()?;
    String::from_utf8(bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flux::versions::FLUX_2_8;
    use serde_json::json;

    fn vars(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn envsubst_s_expressions_evaluate_as_flux_evaluates_them() {
        let v = vars(&[("host", "shop.example.org"), ("empty", "")]);
        let cases = [
            ("host: ${host}", "host: shop.example.org"),
            // Not strict: an unset variable is empty.
            ("a: ${missing}", "a: "),
            (
                "a: ${missing:-x} ${empty:-y} ${empty-z} ${missing=w} ${empty:=v}",
                "a: x y  w v",
            ),
            // `$$` is a literal dollar, so `$${host}` stays as written, less one dollar.
            ("a: $${host} $5", "a: ${host} $5"),
        ];
        for (text, expected) in cases {
            assert_eq!(
                eval(text, &v, Substitution::Lenient).as_deref(),
                Ok(expected),
                "{text}"
            );
        }
        let refused = eval("a: ${host^^}", &v, Substitution::Lenient).map_err(|e| e.to_string());
        assert_eq!(
            refused,
            Err("${host^^} uses an envsubst function check does not evaluate".into())
        );
    }

    #[test]
    fn a_disabled_object_or_no_variable_is_left_as_it_is() {
        let v = vars(&[("x", "1")]);
        let disabled = json!({"metadata": {"annotations": {DISABLE: "disabled"}}});
        assert_eq!(substitute("a: ${x}", &disabled, &v, FLUX_2_8), Ok(None));
        assert_eq!(
            substitute("a: ${x}", &json!({}), &BTreeMap::new(), FLUX_2_8),
            Ok(None)
        );
        assert_eq!(
            substitute("a: ${x}", &json!({}), &v, FLUX_2_8),
            Ok(Some("a: 1".into()))
        );
        assert_eq!(
            substitute("a", &json!({}), &vars(&[("1x", "")]), FLUX_2_8),
            Err(SubstitutionError::InvalidName("1x".into()))
        );
        assert_eq!(
            SubstitutionError::InvalidName("1x".into()).to_string(),
            "'1x' var name is invalid, must match '^[_[:alpha:]][_[:alpha:][:digit:]]*$'"
        );
    }

    #[test]
    fn the_variables_come_from_the_referenced_objects_then_substitute() {
        let kustomization = json!({"spec": {"postBuild": {
            "substitute": {"region": "eu\n"},
            "substituteFrom": [{"kind": "ConfigMap", "name": "vars"},
                {"kind": "Secret", "name": "creds"},
                {"kind": "ConfigMap", "name": "absent", "optional": true}]}}});
        let post = PostBuild::of(&kustomization).unwrap();
        assert!(post.reads_cluster());
        let cluster: ClusterObjects = [
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "vars", "namespace": "cozy-fluxcd"},
                "data": {"region": "us", "tier": "gold"}}),
            json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "creds", "namespace": "cozy-fluxcd"},
                "data": {"token": "czNjcjN0"}}),
        ]
        .into_iter()
        .collect();
        assert_eq!(
            post.variables("cozy-fluxcd", &cluster).unwrap(),
            vars(&[("region", "eu"), ("tier", "gold"), ("token", "s3cr3t")])
        );
        let required = PostBuild::of(&json!({"spec": {"postBuild": {
            "substituteFrom": [{"kind": "ConfigMap", "name": "absent"}]}}}))
        .unwrap();
        assert!(
            required
                .variables("cozy-fluxcd", &cluster)
                .unwrap_err()
                .to_string()
                .starts_with("substitute from 'ConfigMap/absent' error: not found")
        );
        assert_eq!(PostBuild::of(&json!({"spec": {}})), None);
    }
}
