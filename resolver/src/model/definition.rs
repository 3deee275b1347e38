//! An ApplicationDefinition as the policy reads it: its kind, its release prefix and its
//! rule fields kept as JSON text until a request needs the kind.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

use serde::de::{Error as _, IgnoredAny, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::model::error::RuleError;
pub use crate::model::kinds::RuleField;
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

/// An ApplicationDefinition as the policy reads it: its kind and its raw rule fields.
/// The fields stay raw JSON so that a malformed definition fails only the requests that need it.
/// Written and read as `{name, kind, <each rule field's key>, release_prefix, plural}`.
#[derive(Debug, Clone, PartialEq)]
pub struct Definition {
    /// `metadata.name`, for messages.
    pub name: String,
    /// `spec.application.kind`.
    pub kind: String,
    /// The rule fields, in [`RuleField::ALL`] order: see [`Definition::field`].
    fields: [Option<RawField>; RuleField::ALL.len()],
    /// `spec.release.prefix`: an app's HelmRelease is named `<prefix><app>`, which lets the
    /// policy read app names from release names instead of from their labels.
    pub release_prefix: Option<String>,
    /// `spec.application.plural`, the resource RBAC is asked about (dashboards; the policy does
    /// not read it).
    pub plural: Option<String>,
}

impl Definition {
    /// A definition of `kind` that states no rule field and no prefix.
    pub fn new(name: impl Into<String>, kind: impl Into<String>) -> Self {
        Definition {
            name: name.into(),
            kind: kind.into(),
            fields: Default::default(),
            release_prefix: None,
            plural: None,
        }
    }

    /// The rule field `field` as written, if the definition states it.
    pub fn field(&self, field: RuleField) -> Option<&RawField> {
        self.fields[field as usize].as_ref()
    }

    /// Sets (or, with `None`, drops) the rule field `field`.
    pub fn set(&mut self, field: RuleField, raw: Option<RawField>) {
        self.fields[field as usize] = raw;
    }

    /// This definition with the rule field `field` set.
    pub fn with(mut self, field: RuleField, raw: RawField) -> Self {
        self.set(field, Some(raw));
        self
    }

    /// Decodes the rule fields with the same types the settings use.
    pub fn rule_fields(&self) -> Result<RuleFields, RuleError> {
        let kept = RuleField::ALL.map(|field| self.kept(field));
        let fields = RuleFields::decode(kept.each_ref().map(Option::as_deref), |field, err| {
            RuleError::Definition {
                definition: self.name.clone(),
                path: join_path(&format!("spec.{}", field.key()), &err.path),
                reason: err.reason,
            }
        })?;
        fields
            .validate("spec.")
            .map_err(|err| RuleError::Definition {
                definition: self.name.clone(),
                path: err.path().to_owned(),
                reason: err.reason().to_owned(),
            })?;
        Ok(fields)
    }

    /// The text of `field` the policy reads: all of it, or only the keys it keeps
    /// ([`RuleField::keeps`]), kept as written so no JSON value is built and written back (of
    /// a key given twice the last counts, as serde_json's maps read it).
    fn kept(&self, field: RuleField) -> Option<Cow<'_, str>> {
        let text = self.field(field)?.get();
        let Some(keys) = field.keeps() else {
            return Some(Cow::Borrowed(text));
        };
        match serde_json::from_str::<BTreeMap<String, &RawValue>>(text) {
            Ok(map) => {
                let mut kept = String::from("{");
                for (key, value) in map.iter() {
                    if keys.contains(&key.as_str()) {
                        if kept.len() > 1 {
                            kept.push(',');
                        }
                        for part in ["\"", key, "\":", value.get()] {
                            kept.push_str(part);
                        }
                    }
                }
                kept.push('}');
                Some(Cow::Owned(kept))
            }
            // Not an object: decoded as it is, to fail with the block's own error.
            Err(_) => Some(Cow::Borrowed(text)),
        }
    }

    /// Whether two definitions state the same rules: every field the policy reads is equal,
    /// so a second definition of a kind that agrees with the first is no ambiguity.
    pub(crate) fn same_rules(&self, other: &Definition) -> bool {
        RuleField::ALL
            .iter()
            .all(|&field| self.kept(field) == other.kept(field))
            && self.release_prefix == other.release_prefix
    }
}

/// The keys a definition is written with besides its rule fields'.
const NAME: &str = "name";
const KIND: &str = "kind";
const RELEASE_PREFIX: &str = "release_prefix";
const PLURAL: &str = "plural";

impl Serialize for Definition {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry(NAME, &self.name)?;
        map.serialize_entry(KIND, &self.kind)?;
        for field in RuleField::ALL {
            map.serialize_entry(field.key(), &self.fields[field as usize])?;
        }
        if let Some(prefix) = &self.release_prefix {
            map.serialize_entry(RELEASE_PREFIX, prefix)?;
        }
        if let Some(plural) = &self.plural {
            map.serialize_entry(PLURAL, plural)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Definition {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> Visitor<'de> for Fields {
            type Value = Definition;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an ApplicationDefinition as the policy reads it")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Definition, A::Error> {
                let (mut name, mut kind) = (None, None);
                let mut definition = Definition::new("", "");
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        NAME => name = Some(map.next_value()?),
                        KIND => kind = Some(map.next_value()?),
                        RELEASE_PREFIX => definition.release_prefix = map.next_value()?,
                        PLURAL => definition.plural = map.next_value()?,
                        key => match RuleField::ALL.into_iter().find(|f| f.key() == key) {
                            Some(field) => definition.set(field, map.next_value()?),
                            None => {
                                map.next_value::<IgnoredAny>()?;
                            }
                        },
                    }
                }
                definition.name = name.ok_or_else(|| A::Error::missing_field(NAME))?;
                definition.kind = kind.ok_or_else(|| A::Error::missing_field(KIND))?;
                Ok(definition)
            }
        }
        deserializer.deserialize_map(Fields)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::kinds::Visibility;

    fn with_dashboard(text: &str) -> Definition {
        Definition::new("redis", "Redis").with(RuleField::Dashboard, RawField::new(text))
    }

    #[test]
    fn the_dashboard_keeps_the_two_keys_the_policy_reads_as_written() {
        // The dashboard's own keys are dropped; of a key given twice the last counts, and an
        // escaped key is the key it spells.
        let definition = with_dashboard(
            r#"{"category": "Storage", "visibility": "hidden", "icon": {"x": [1.5, null]}, "visibilit\u0079" : "module"}"#,
        );
        assert_eq!(
            definition.kept(RuleField::Dashboard).as_deref(),
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
