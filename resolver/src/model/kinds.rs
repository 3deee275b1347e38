//! Per-kind rules: the four `ApplicationDefinition` fields of the "fold extra into apps" design.
//!
//! The same serde types parse the fields from an ApplicationDefinition and from the policy
//! settings' `definitions` map, so both sources are validated by one piece of code.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, OnceLock};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::model::error::{JsonError, RuleError, decode_json};

/// Where the dashboard shows a kind, and therefore who may write it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub enum Visibility {
    /// Marketplace: anyone with RBAC on the kind.
    #[default]
    Catalog,
    /// Administration → Modules: tenant administrators and the platform.
    Module,
    /// No dashboard surface: the platform only.
    Hidden,
}

/// Where instances of a kind are counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Scope {
    /// The request's namespace.
    Namespace,
    /// The tenant that owns the request's namespace (see `tenant.rs`).
    Tenant,
    /// The whole cluster.
    Cluster,
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Scope::Namespace => "namespace",
            Scope::Tenant => "tenant",
            Scope::Cluster => "cluster",
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub enum Deletion {
    #[default]
    Allow,
    /// Deny a DELETE while consumers depend on the instance.
    Protect,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub enum Edit {
    #[default]
    Allow,
    /// Spec changes only from platform identities.
    AdminOnly,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub enum Share {
    /// The provider serves its own tenant only.
    #[default]
    None,
    /// The provider serves its tenant and every descendant tenant without a nearer provider.
    Children,
}

/// `spec.dashboard` as far as the policy reads it. An ApplicationDefinition carries many more
/// dashboard keys; [`Definition::rule_fields`] drops them before decoding.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DashboardSpec {
    pub visibility: Option<Visibility>,
    /// Today's marker: `module: true` means `visibility: module` when `visibility` is absent.
    pub module: Option<bool>,
}

/// `spec.cardinality`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CardinalitySpec {
    pub scope: Scope,
    /// 0: unlimited. Omitted: the number of `slots`, else unlimited.
    #[serde(default)]
    pub max: Option<u32>,
    /// The names the instances must take, one per allowed instance: the API server refuses a
    /// second object of one name in one namespace, so no two racing CREATEs can both hold a
    /// slot, whatever the policy-server's caches saw.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slots: Vec<String>,
    /// With `scope: cluster` and `slots`: the one namespace the slots live in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot_namespace: Option<String>,
}

impl CardinalitySpec {
    /// `max` as the rule applies it: the number of slots when omitted.
    fn effective_max(&self) -> u32 {
        self.max
            .unwrap_or_else(|| u32::try_from(self.slots.len()).unwrap_or(u32::MAX))
    }
}

impl Block for CardinalitySpec {
    /// Checks what serde cannot: slot names, their number against `max`, and the namespace a
    /// cluster scope holds its slots in. `path` prefixes the field names in errors.
    fn validate(&self, path: &str) -> Result<(), RuleError> {
        let invalid = |field: &str, reason: String| RuleError::Invalid {
            path: format!("{path}cardinality.{field}"),
            reason,
        };
        for (index, slot) in self.slots.iter().enumerate() {
            if !crate::model::tenant::is_dns_label(slot) {
                return Err(invalid(
                    &format!("slots[{index}]"),
                    format!(
                        "{slot:?} is not a DNS-1123 label (lower-case letters, digits and inner dashes, at most 63)"
                    ),
                ));
            }
            if self.slots[..index].contains(slot) {
                return Err(invalid(
                    &format!("slots[{index}]"),
                    format!("{slot:?} is listed twice; each slot holds one instance"),
                ));
            }
        }
        if self.slots.is_empty() {
            if self.slot_namespace.is_some() {
                return Err(invalid(
                    "slotNamespace",
                    "names where the slots live, and there are no slots".into(),
                ));
            }
            return Ok(());
        }
        let slots = self.slots.len();
        if self.max == Some(0) {
            return Err(invalid(
                "max",
                format!(
                    "0 means unlimited, and slots hold the kind to one instance per name ({slots} here): unlimited and slots do not mix; drop max to allow {slots}, or drop slots"
                ),
            ));
        }
        if let Some(max) = self.max
            && (max as usize) < slots
        {
            return Err(invalid(
                "max",
                format!(
                    "{max} is below the {slots} slots (one name per allowed instance); raise max or drop slots"
                ),
            ));
        }
        match (self.scope, &self.slot_namespace) {
            (Scope::Cluster, None) => Err(invalid(
                "slotNamespace",
                "scope cluster with slots needs the one namespace its slots live in".into(),
            )),
            (Scope::Cluster, Some(ns)) if !crate::model::tenant::is_dns_label(ns) => Err(invalid(
                "slotNamespace",
                format!("{ns:?} is not a namespace name"),
            )),
            (Scope::Cluster, Some(_)) => Ok(()),
            (scope, Some(_)) => Err(invalid(
                "slotNamespace",
                format!(
                    "applies to scope cluster only; with scope {scope} the slots live in the {where_}",
                    where_ = match scope {
                        Scope::Tenant => "tenant's own namespace",
                        _ => "request's namespace",
                    }
                ),
            )),
            (_, None) => Ok(()),
        }
    }
}

/// `spec.protection`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProtectionSpec {
    #[serde(default)]
    pub deletion: Deletion,
    #[serde(default)]
    pub edit: Edit,
}

/// `spec.capability`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CapabilitySpec {
    #[serde(default)]
    pub provides: Vec<String>,
    #[serde(default)]
    pub consumes: Vec<String>,
    #[serde(default)]
    pub share: Share,
}

/// Declares the rule fields once: each row's variant of [`RuleField`], its field of
/// [`RuleFields`] and type, its key under `spec`, and the keys of it the policy reads when not
/// all (the rest is another component's). Everything that walks the fields (the policy's
/// scanner and field masks, the decoders, merging, checking) follows the rows.
macro_rules! rule_fields {
    ($($(#[doc = $doc:literal])* $variant:ident $field:ident: $spec:ty = $key:literal
        $(keeping [$($kept:literal),+])?,)+) => {
        /// The rule fields of an ApplicationDefinition, by their keys under `spec`.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
        pub enum RuleField {
            $($(#[doc = $doc])* $variant,)+
        }

        impl RuleField {
            pub const ALL: [RuleField; [$($key),+].len()] = [$(RuleField::$variant),+];

            /// How many paths [`RuleField::masks`] gives over all the fields.
            pub const MASKS: usize = 0 $(+ RuleField::$variant.masks().len())+;

            /// Its key under `spec`.
            pub const fn key(self) -> &'static str {
                match self {
                    $(RuleField::$variant => $key,)+
                }
            }

            /// The keys of the field the policy reads, when it reads only some.
            pub const fn keeps(self) -> Option<&'static [&'static str]> {
                match self {
                    $(RuleField::$variant => rule_fields!(@keeps $($($kept),+)?),)+
                }
            }

            /// The paths of an ApplicationDefinition a list answer must keep for this field.
            pub const fn masks(self) -> &'static [&'static str] {
                match self {
                    $(RuleField::$variant => rule_fields!(@masks $key $(; $($kept),+)?),)+
                }
            }
        }

        /// The rule fields, as written in an ApplicationDefinition spec or in the settings.
        #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
        #[serde(deny_unknown_fields)]
        pub struct RuleFields {
            $(#[serde(rename = $key)] pub $field: Option<$spec>,)+
        }

        impl RuleFields {
            /// These blocks over `lower`'s, block by block: a block stated here wins, `lower`
            /// fills the rest.
            pub fn over(&self, lower: &RuleFields) -> RuleFields {
                RuleFields {
                    $($field: self.$field.clone().filter(Block::stated).or_else(|| lower.$field.clone()),)+
                }
            }

            fn is_empty(&self) -> bool {
                true $(&& !self.$field.as_ref().is_some_and(Block::stated))+
            }

            /// Checks what serde cannot (class names, slots). `path` prefixes the field names
            /// in errors.
            pub fn validate(&self, path: &str) -> Result<(), RuleError> {
                $(if let Some(block) = &self.$field {
                    block.validate(path)?;
                })+
                Ok(())
            }

            /// Decodes each field from its JSON text, in [`RuleField::ALL`] order (absent or
            /// `null`: not stated); `error` places a field's problem.
            pub(crate) fn decode(
                texts: [Option<&str>; RuleField::ALL.len()],
                error: impl Fn(RuleField, JsonError) -> RuleError,
            ) -> Result<RuleFields, RuleError> {
                let [$($field),+] = texts;
                Ok(RuleFields {
                    $($field: decode_block($field).map_err(|err| error(RuleField::$variant, err))?,)+
                })
            }
        }
    };
    (@keeps) => { None };
    (@keeps $($kept:literal),+) => { Some(&[$($kept),+]) };
    (@masks $key:literal) => { &[concat!("spec.", $key)] };
    (@masks $key:literal; $($kept:literal),+) => { &[$(concat!("spec.", $key, ".", $kept)),+] };
}

rule_fields! {
    /// `spec.dashboard`: where the dashboard shows the kind; its `category`, `icon`, ... are
    /// the dashboard's.
    Dashboard dashboard: DashboardSpec = "dashboard" keeping ["visibility", "module"],
    /// `spec.cardinality`: how many instances, where counted, under which names.
    Cardinality cardinality: CardinalitySpec = "cardinality",
    /// `spec.protection`: deletion while consumed, and who edits.
    Protection protection: ProtectionSpec = "protection",
    /// `spec.capability`: the classes provided and consumed, and how far they are shared.
    Capability capability: CapabilitySpec = "capability",
}

/// What every rule field's block answers, so the rows of [`rule_fields!`] merge and check
/// them alike.
trait Block: Clone {
    /// Whether the block states a rule, and so wins over a lower source's.
    fn stated(&self) -> bool {
        true
    }

    /// Checks what serde cannot. `path` prefixes the field names in errors.
    fn validate(&self, _path: &str) -> Result<(), RuleError> {
        Ok(())
    }
}

/// One field's block from its JSON text: absent or `null` states nothing.
fn decode_block<T: serde::de::DeserializeOwned>(
    text: Option<&str>,
) -> Result<Option<T>, JsonError> {
    match text.map(str::trim) {
        None | Some("null") => Ok(None),
        Some(text) => decode_json(text).map(Some),
    }
}

impl RuleFields {
    /// The visibility these fields state, if any: `visibility` first, then `module: true`.
    fn visibility(&self) -> Option<Visibility> {
        self.dashboard.as_ref()?.visibility()
    }
}

/// A definition's dashboard always carries a category and the like: it states a rule only
/// when it states a visibility.
impl Block for DashboardSpec {
    fn stated(&self) -> bool {
        self.visibility().is_some()
    }
}

impl DashboardSpec {
    /// `visibility` first, then `module: true`.
    fn visibility(&self) -> Option<Visibility> {
        self.visibility
            .or_else(|| (self.module == Some(true)).then_some(Visibility::Module))
    }
}

impl Block for ProtectionSpec {}

impl Block for CapabilitySpec {
    /// Class names, and a share that has something to share.
    fn validate(&self, path: &str) -> Result<(), RuleError> {
        for (field, classes) in [("provides", &self.provides), ("consumes", &self.consumes)] {
            for (index, class) in classes.iter().enumerate() {
                Class::parse(class).map_err(|reason| RuleError::Invalid {
                    path: format!("{path}capability.{field}[{index}]"),
                    reason,
                })?;
            }
        }
        if self.share == Share::Children && self.provides.is_empty() {
            return Err(RuleError::Invalid {
                path: format!("{path}capability.share"),
                reason: "share: children needs at least one class in provides".into(),
            });
        }
        Ok(())
    }
}

/// A capability class such as `monitoring`. It becomes part of the label key
/// `namespace.cozystack.io/capability.<class>`, so it must be a valid label-name segment.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Class(String);

/// Longest class that still fits the 63-character label name `capability.<class>`.
const MAX_CLASS_LEN: usize = 63 - "capability.".len();

impl Class {
    pub fn parse(raw: &str) -> Result<Class, String> {
        if raw.is_empty() {
            return Err("class name is empty".into());
        }
        if raw.len() > MAX_CLASS_LEN {
            return Err(format!(
                "class name {raw:?} is longer than {MAX_CLASS_LEN} characters"
            ));
        }
        let valid_chars = raw
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        let valid_ends = !raw.starts_with('-') && !raw.ends_with('-');
        if !valid_chars || !valid_ends {
            return Err(format!(
                "class name {raw:?} must be lower-case letters, digits and inner dashes"
            ));
        }
        Ok(Class(raw.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Counting rule with a real limit (`max` ≥ 1); `max: 0` never becomes one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Cardinality {
    pub scope: Scope,
    pub max: u32,
    /// The names that hold the first instances, when the kind states any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slots: Option<Slots>,
}

/// Validated slots: at least one name, no more than `max`, and for a cluster scope the
/// namespace they live in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Slots {
    pub names: Vec<String>,
    /// `slotNamespace`, for `scope: cluster`; the other scopes derive it from the request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_namespace: Option<String>,
}

/// What a kind does with a capability class: the two lists of `capability`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Provides,
    Consumes,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Capability {
    pub provides: Vec<Class>,
    pub consumes: Vec<Class>,
    pub share: Share,
}

/// The effective, validated rules of one kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KindRules {
    pub kind: String,
    /// From the kind's ApplicationDefinition; `None` when it has none (see [`Definition`]).
    #[serde(skip)]
    pub release_prefix: Option<String>,
    pub visibility: Visibility,
    pub cardinality: Option<Cardinality>,
    pub deletion: Deletion,
    pub edit: Edit,
    pub capability: Capability,
}

impl KindRules {
    /// Merges the two sources block by block: a block the ApplicationDefinition states wins,
    /// the settings fill the blocks it lacks (today's CRD prunes the new fields). `None` when
    /// neither source states any rule: such a kind is admitted untouched.
    pub fn merge(
        kind: &str,
        definition: Option<&RuleFields>,
        settings: Option<&RuleFields>,
    ) -> Option<KindRules> {
        let empty = RuleFields::default();
        let fields = definition
            .unwrap_or(&empty)
            .over(settings.unwrap_or(&empty));
        if fields.is_empty() {
            return None;
        }
        let visibility = fields.visibility().unwrap_or_default();
        let cardinality = fields
            .cardinality
            .as_ref()
            .filter(|c| c.effective_max() > 0)
            .map(|c| Cardinality {
                scope: c.scope,
                max: c.effective_max(),
                // Both sources were validated before merging: slots fit `max` and their scope.
                slots: (!c.slots.is_empty()).then(|| Slots {
                    names: c.slots.clone(),
                    cluster_namespace: c.slot_namespace.clone(),
                }),
            });
        let protection = fields.protection.clone().unwrap_or_default();
        let capability = fields
            .capability
            .as_ref()
            .map(|c| Capability {
                // Both sources were validated before merging; invalid names cannot reach here.
                provides: c
                    .provides
                    .iter()
                    .filter_map(|s| Class::parse(s).ok())
                    .collect(),
                consumes: c
                    .consumes
                    .iter()
                    .filter_map(|s| Class::parse(s).ok())
                    .collect(),
                share: c.share,
            })
            .unwrap_or_default();
        Some(KindRules {
            kind: kind.to_owned(),
            release_prefix: None,
            visibility,
            cardinality,
            deletion: protection.deletion,
            edit: protection.edit,
            capability,
        })
    }

    /// Whether this kind provides (or consumes) `class`.
    pub fn plays(&self, role: Role, class: &Class) -> bool {
        match role {
            Role::Provides => self.capability.provides.contains(class),
            Role::Consumes => self.capability.consumes.contains(class),
        }
    }
}

pub(crate) fn join_path(base: &str, rest: &str) -> String {
    if rest.is_empty() || rest == "." {
        base.to_owned()
    } else if rest.starts_with('[') {
        format!("{base}{rest}")
    } else {
        format!("{base}.{rest}")
    }
}

/// The settings' `definitions`: kept as written, split by kind when a kind's rules are first
/// asked for, and each kind's block decoded then. Every request carries the settings, and most
/// need one kind's block of a dozen, or none; [`Settings::from_json`] still decodes and checks
/// every block.
#[derive(Debug, Clone, Default)]
pub struct KindBlocks {
    raw: Option<Arc<str>>,
    /// Sorted by kind (the order the map of raw blocks comes in), searched by halves.
    split: OnceLock<Vec<KindBlock>>,
}

/// One kind's block: its JSON text, decoded and checked once.
#[derive(Debug, Clone)]
pub struct KindBlock {
    kind: String,
    raw: Arc<str>,
    decoded: OnceLock<Result<RuleFields, RuleError>>,
}

impl KindBlock {
    /// Whether the block's text could name the class `quoted` names (`"<class>"`): it holds
    /// that string, or an escape that could spell it. Read without decoding the block.
    pub fn may_name(&self, quoted: &str) -> bool {
        self.raw.contains('\\') || self.raw.contains(quoted)
    }

    /// The block's fields, or the first problem with its path (`definitions.<Kind>.…`).
    pub fn fields(&self) -> Result<&RuleFields, RuleError> {
        self.decoded
            .get_or_init(|| {
                let path = format!("definitions.{}", self.kind);
                let fields: RuleFields =
                    decode_json(&self.raw).map_err(|err| RuleError::Invalid {
                        path: join_path(&path, &err.path),
                        reason: err.reason,
                    })?;
                fields.validate(&format!("{path}."))?;
                Ok(fields)
            })
            .as_ref()
            .map_err(Clone::clone)
    }
}

impl KindBlocks {
    fn blocks(&self) -> &[KindBlock] {
        self.split.get_or_init(|| {
            let Some(raw) = &self.raw else {
                return Vec::new();
            };
            // An object already (checked when the settings were read); of a kind given twice
            // the last counts.
            let blocks: BTreeMap<String, &serde_json::value::RawValue> =
                serde_json::from_str(raw).unwrap_or_default();
            blocks
                .into_iter()
                .map(|(kind, raw)| KindBlock {
                    kind,
                    raw: Arc::from(raw.get()),
                    decoded: OnceLock::new(),
                })
                .collect()
        })
    }

    /// The block of `kind`, if the settings have one.
    pub fn get(&self, kind: &str) -> Option<&KindBlock> {
        let blocks = self.blocks();
        let at = blocks
            .binary_search_by(|block| block.kind.as_str().cmp(kind))
            .ok()?;
        Some(&blocks[at])
    }

    pub fn kinds(&self) -> impl Iterator<Item = &str> {
        self.blocks().iter().map(|block| block.kind.as_str())
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &KindBlock)> {
        self.blocks()
            .iter()
            .map(|block| (block.kind.as_str(), block))
    }

    pub fn is_empty(&self) -> bool {
        self.blocks().is_empty()
    }
}

impl PartialEq for KindBlocks {
    /// The same kinds with the same decoded fields (or the same problem), however written.
    fn eq(&self, other: &Self) -> bool {
        self.blocks().len() == other.blocks().len()
            && self
                .iter()
                .zip(other.iter())
                .all(|((k1, b1), (k2, b2))| k1 == k2 && b1.fields() == b2.fields())
    }
}

impl Eq for KindBlocks {}

impl Serialize for KindBlocks {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::Error;
        let raw = self.raw.as_deref().unwrap_or("{}");
        serde_json::value::RawValue::from_string(raw.to_owned())
            .map_err(S::Error::custom)?
            .serialize(serializer)
    }
}

/// What `definitions` must be, as a refusal of anything else says it. The value is read whole
/// before it is looked at, so serde's position is past it: the settings' decoder names the
/// path from this.
pub const NOT_KIND_BLOCKS: &str = "expected a map of kinds to their rule fields";

impl<'de> Deserialize<'de> for KindBlocks {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let raw = Box::<serde_json::value::RawValue>::deserialize(deserializer)?;
        // Valid JSON already; an object is checked now, so that splitting it cannot fail.
        let text = raw.get().trim();
        if !text.starts_with('{') {
            return Err(D::Error::custom(format!(
                "invalid type: {text}, {NOT_KIND_BLOCKS}"
            )));
        }
        let empty = text[1..].trim_start().starts_with('}');
        Ok(KindBlocks {
            raw: (!empty).then(|| Arc::from(text)),
            split: OnceLock::new(),
        })
    }
}
