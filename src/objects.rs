//! A Kubernetes object as the host serialises it, as far as the policy reads one.

use std::collections::BTreeMap;

use serde::Deserialize;

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Meta {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub labels: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub annotations: Option<BTreeMap<String, String>>,
}

/// An object with the spec `S` (`IgnoredAny` when only the metadata matters).
#[derive(Deserialize)]
pub struct Object<S> {
    #[serde(default)]
    pub metadata: Meta,
    #[serde(default)]
    pub spec: Option<S>,
}
