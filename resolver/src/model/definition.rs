//! An ApplicationDefinition as the policy reads it: its kind, its release prefix and its four
//! rule fields kept as JSON text until a request needs the kind.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::model::error::{RuleError, decode_json};
use crate::model::kinds::{RuleFields, join_path};

/// One rule field of an ApplicationDefinition as its JSON text. Reading a list keeps the text
/// without parsing it: only the kinds a request asks for are decoded, once, so a definition the
/// request does not need costs it a copy, not a parse. Text that is not JSON fails that decode,
/// with the definition's name.
#[derive(Debug, Clone)]
pub struct RawField(Box<str>);

impl RawField {
    /// A field's JSON text, as a list answer holds it (the policy's scanner has checked it).
    pub fn new(text: impl Into<Box<str>>) -> Self {
        RawField(text.into())
    }

    pub fn from_value(value: &serde_json::Value) -> Self {
        RawField(value.to_string().into())
    }

    /// The JSON text.
    pub fn get(&self) -> &str {
        &self.0
    }
}

/// Written as the JSON it holds, as a snapshot embeds it; text that is not JSON is an error.
impl Serialize for RawField {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let raw: &serde_json::value::RawValue =
            serde_json::from_str(&self.0).map_err(serde::ser::Error::custom)?;
        raw.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for RawField {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = Box::<serde_json::value::RawValue>::deserialize(deserializer)?;
        Ok(RawField(raw.into()))
    }
}

/// Equal when the texts are: definitions come from one API server's serialiser.
impl PartialEq for RawField {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

/// The rule fields of an ApplicationDefinition, by their keys under `spec`: the one list the
/// policy's scanner, its field masks and [`Definition::rule_fields`] follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleField {
    Dashboard,
    Cardinality,
    Protection,
    Capability,
}

/// The keys of `spec.dashboard` the policy reads; `category`, `icon`, ... are not ours to judge.
const DASHBOARD_KEYS: [&str; 2] = ["visibility", "module"];

impl RuleField {
    pub const ALL: [RuleField; 4] = [
        RuleField::Dashboard,
        RuleField::Cardinality,
        RuleField::Protection,
        RuleField::Capability,
    ];

    /// How many paths [`RuleField::masks`] gives over all the fields.
    pub const MASKS: usize = {
        let (mut count, mut at) = (0, 0);
        while at < RuleField::ALL.len() {
            count += RuleField::ALL[at].masks().len();
            at += 1;
        }
        count
    };

    /// Its key under `spec`.
    pub fn key(self) -> &'static str {
        match self {
            RuleField::Dashboard => "dashboard",
            RuleField::Cardinality => "cardinality",
            RuleField::Protection => "protection",
            RuleField::Capability => "capability",
        }
    }

    /// The paths of an ApplicationDefinition a list answer must keep for this field: the
    /// dashboard's keys the policy reads ([`DASHBOARD_KEYS`]), the whole of the others.
    pub const fn masks(self) -> &'static [&'static str] {
        match self {
            RuleField::Dashboard => &["spec.dashboard.visibility", "spec.dashboard.module"],
            RuleField::Cardinality => &["spec.cardinality"],
            RuleField::Protection => &["spec.protection"],
            RuleField::Capability => &["spec.capability"],
        }
    }
}

/// An ApplicationDefinition as the policy reads it: its kind and its raw rule fields.
/// The fields stay raw JSON so that a malformed definition fails only the requests that need it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Definition {
    /// `metadata.name`, for messages.
    pub name: String,
    /// `spec.application.kind`.
    pub kind: String,
    pub dashboard: Option<RawField>,
    pub cardinality: Option<RawField>,
    pub protection: Option<RawField>,
    pub capability: Option<RawField>,
    /// `spec.release.prefix`: an app's HelmRelease is named `<prefix><app>`, which lets the
    /// policy read app names from release names instead of from their labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release_prefix: Option<String>,
    /// `spec.application.plural`, the resource RBAC is asked about (dashboards; the policy does
    /// not read it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plural: Option<String>,
}

impl Definition {
    /// A definition of `kind` that states no rule field and no prefix.
    pub fn new(name: impl Into<String>, kind: impl Into<String>) -> Self {
        Definition {
            name: name.into(),
            kind: kind.into(),
            dashboard: None,
            cardinality: None,
            protection: None,
            capability: None,
            release_prefix: None,
            plural: None,
        }
    }

    /// Decodes the four fields with the same types the settings use.
    pub fn rule_fields(&self) -> Result<RuleFields, RuleError> {
        fn field<T: serde::de::DeserializeOwned>(
            definition: &str,
            name: &str,
            text: Option<&str>,
        ) -> Result<Option<T>, RuleError> {
            match text.map(str::trim) {
                None | Some("null") => Ok(None),
                // From text, so the settings and the definitions share one decoder.
                Some(text) => decode_json(text)
                    .map(Some)
                    .map_err(|err| RuleError::Definition {
                        definition: definition.to_owned(),
                        path: join_path(name, &err.path),
                        reason: err.reason,
                    }),
            }
        }
        fn text(field: &Option<RawField>) -> Option<&str> {
            field.as_ref().map(RawField::get)
        }
        let dashboard = self.dashboard_fields();
        let fields = RuleFields {
            dashboard: field(&self.name, "spec.dashboard", dashboard.as_deref())?,
            cardinality: field(&self.name, "spec.cardinality", text(&self.cardinality))?,
            protection: field(&self.name, "spec.protection", text(&self.protection))?,
            capability: field(&self.name, "spec.capability", text(&self.capability))?,
        };
        fields
            .validate("spec.")
            .map_err(|err| RuleError::Definition {
                definition: self.name.clone(),
                path: err.path().to_owned(),
                reason: err.reason().to_owned(),
            })?;
        Ok(fields)
    }
}

impl Definition {
    /// `spec.dashboard` with only the keys the policy reads ([`DASHBOARD_KEYS`]).
    /// The two values are kept as written, so no JSON value is built and written back: of a key
    /// given twice the last counts, as serde_json's maps read it.
    fn dashboard_fields(&self) -> Option<String> {
        let text = self.dashboard.as_ref()?.get();
        match serde_json::from_str::<BTreeMap<String, &RawValue>>(text) {
            Ok(map) => {
                let mut kept = String::from("{");
                for (key, value) in map.iter() {
                    if DASHBOARD_KEYS.contains(&key.as_str()) {
                        if kept.len() > 1 {
                            kept.push(',');
                        }
                        for part in ["\"", key, "\":", value.get()] {
                            kept.push_str(part);
                        }
                    }
                }
                kept.push('}');
                Some(kept)
            }
            // Not an object: decoded as it is, to fail with the block's own error.
            Err(_) => Some(text.to_owned()),
        }
    }

    /// Whether two definitions state the same rules: every field the policy reads is equal,
    /// so a second definition of a kind that agrees with the first is no ambiguity.
    pub(crate) fn same_rules(&self, other: &Definition) -> bool {
        self.dashboard_fields() == other.dashboard_fields()
            && self.cardinality == other.cardinality
            && self.protection == other.protection
            && self.capability == other.capability
            && self.release_prefix == other.release_prefix
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::kinds::Visibility;

    fn with_dashboard(text: &str) -> Definition {
        let mut definition = Definition::new("redis", "Redis");
        definition.dashboard = Some(RawField::new(text));
        definition
    }

    #[test]
    fn the_dashboard_keeps_the_two_keys_the_policy_reads_as_written() {
        // The dashboard's own keys are dropped; of a key given twice the last counts, and an
        // escaped key is the key it spells.
        let definition = with_dashboard(
            r#"{"category": "Storage", "visibility": "hidden", "icon": {"x": [1.5, null]}, "visibilit\u0079" : "module"}"#,
        );
        assert_eq!(
            definition.dashboard_fields().as_deref(),
            Some(r#"{"visibility":"module"}"#)
        );
        let fields = definition.rule_fields().unwrap();
        assert_eq!(
            fields.dashboard.and_then(|d| d.visibility),
            Some(Visibility::Module)
        );
        // Agreeing on the kept keys is agreeing on the rules.
        assert!(definition.same_rules(&with_dashboard(
            r#"{"visibility":"module","category":"Other"}"#
        )));
    }

    #[test]
    fn a_dashboard_value_that_does_not_decode_names_its_path() {
        let err = with_dashboard(r#"{"icon": "x", "module": 1.5}"#)
            .rule_fields()
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "ApplicationDefinition redis: spec.dashboard.module: invalid type: floating point `1.5`, expected a boolean"
        );
        // Not an object: decoded as written, with the block's own error.
        let err = with_dashboard(r#""hidden""#).rule_fields().unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"ApplicationDefinition redis: spec.dashboard: invalid type: string "hidden", expected struct DashboardSpec"#
        );
    }
}
