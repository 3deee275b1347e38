//! The built-in rule set: the stock rules of `docs/stock-rules.md`, compiled into the resolver by
//! `build.rs` as a static array. `definitionSource: builtin` reads it instead of the settings'
//! `definitions` or the ApplicationDefinitions; a request turns only the kinds it needs into
//! rule fields, and no JSON is read for them.

use std::collections::BTreeMap;

use crate::model::definition_set::{Defaults, DefinitionSet};
use crate::model::kinds::{
    CapabilitySpec, CardinalitySpec, DashboardSpec, Deletion, Edit, KindBlocks, ProtectionSpec,
    RuleFields, Scope, Share, Visibility,
};
use crate::model::listing::DefinitionList;

/// One kind of the built-in rule set, as the table states it.
#[derive(Debug)]
pub struct BuiltinKind {
    pub kind: &'static str,
    pub visibility: Visibility,
    pub cardinality: Option<BuiltinCardinality>,
    pub deletion: Option<Deletion>,
    pub edit: Option<Edit>,
    pub provides: &'static [&'static str],
    pub consumes: &'static [&'static str],
    pub share: Option<Share>,
    /// The kind's `spec.release.prefix` in a stock install.
    pub release_prefix: &'static str,
}

/// A built-in `cardinality` block.
#[derive(Debug)]
pub struct BuiltinCardinality {
    pub scope: Scope,
    pub max: u32,
    pub slots: &'static [&'static str],
    pub slot_namespace: Option<&'static str>,
}

include!(concat!(env!("OUT_DIR"), "/builtin.rs"));

/// The built-in rule set under the settings' `definitions` (a kind's block overrides that block
/// of that kind) and `releasePrefixes`, and under `read`, ApplicationDefinitions whose blocks
/// win over both (the policy reads none; the pre-flight asks what reading one would change).
pub fn definitions(
    read: Box<dyn DefinitionList>,
    settings: &KindBlocks,
    prefixes: &BTreeMap<String, String>,
) -> DefinitionSet {
    let defaults = KINDS.iter().enumerate().map(|(index, kind)| Defaults {
        kind: kind.kind,
        release_prefix: kind.release_prefix,
        index,
        fields: |index| {
            KINDS
                .get(index)
                .map(BuiltinKind::fields)
                .unwrap_or_default()
        },
    });
    DefinitionSet::with_defaults(read, defaults, settings, prefixes)
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

impl BuiltinKind {
    /// The blocks this kind states, as a settings block stating the same table row would be
    /// decoded: a block is present only when the row fills it.
    pub fn fields(&self) -> RuleFields {
        let capability = (!self.provides.is_empty()
            || !self.consumes.is_empty()
            || self.share.is_some())
        .then(|| CapabilitySpec {
            provides: strings(self.provides),
            consumes: strings(self.consumes),
            share: self.share.unwrap_or_default(),
        });
        let protection = (self.deletion.is_some() || self.edit.is_some()).then(|| ProtectionSpec {
            deletion: self.deletion.unwrap_or_default(),
            edit: self.edit.unwrap_or_default(),
        });
        RuleFields {
            dashboard: (self.visibility != Visibility::Catalog).then_some(DashboardSpec {
                visibility: Some(self.visibility),
                module: None,
            }),
            cardinality: self.cardinality.as_ref().map(|c| CardinalitySpec {
                scope: c.scope,
                max: Some(c.max),
                slots: strings(c.slots),
                slot_namespace: c.slot_namespace.map(str::to_owned),
            }),
            protection,
            capability,
        }
    }
}

/// The built-in rule set as a person reads it: where it comes from, then one line per kind.
pub fn summary() -> String {
    let mut text = format!("built-in rule set ({SOURCE}), {} kinds:", KINDS.len());
    for kind in KINDS {
        text.push_str(&format!("\n  {kind}"));
    }
    text
}

impl std::fmt::Display for BuiltinKind {
    /// `Monitoring: module; tenant/1 held by monitoring; deletion protect; provides monitoring
    /// to children; release prefix ""`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let visibility = match self.visibility {
            Visibility::Catalog => "catalog",
            Visibility::Module => "module",
            Visibility::Hidden => "hidden",
        };
        write!(f, "{}: {visibility}", self.kind)?;
        if let Some(c) = &self.cardinality {
            write!(f, "; {}/{}", c.scope, c.max)?;
            if !c.slots.is_empty() {
                write!(f, " held by {}", c.slots.join(", "))?;
                if let Some(ns) = c.slot_namespace {
                    write!(f, " in {ns}")?;
                }
            }
        }
        if self.deletion == Some(Deletion::Protect) {
            f.write_str("; deletion protect")?;
        }
        if self.edit == Some(Edit::AdminOnly) {
            f.write_str("; edit adminOnly")?;
        }
        if !self.provides.is_empty() {
            let to = match self.share {
                Some(Share::Children) => " to children",
                _ => "",
            };
            write!(f, "; provides {}{to}", self.provides.join(", "))?;
        }
        if !self.consumes.is_empty() {
            write!(f, "; consumes {}", self.consumes.join(", "))?;
        }
        write!(f, "; release prefix {:?}", self.release_prefix)
    }
}
