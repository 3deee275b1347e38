//! The built-in rule set: the stock rules of `resolver/stock-rules.yaml`, compiled into the resolver by
//! `build.rs` as a static array. `definitionSource: builtin` reads it instead of the settings'
//! `definitions` or the ApplicationDefinitions; a request turns only the kinds it needs into
//! rule fields, and no JSON is read for them.

use std::collections::BTreeMap;

use crate::model::definition_set::{Defaults, DefinitionSet};
use crate::model::kinds::{
    CapabilitySpec, CardinalitySpec, DashboardSpec, Deletion, Edit, KindBlocks, ProtectionSpec,
    Role, RuleFields, Scope, Share, Visibility,
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
    /// What an instance released under a name other than its slots does (`None`: no slots).
    pub off_slot: Option<OffSlot>,
    /// The kind's `spec.release.prefix` in a stock install.
    pub release_prefix: &'static str,
}

/// What an instance of a slotted kind does when its release takes another name than a slot,
/// from the kind's chart (`hack/chart-reads.py`): what moving it onto a slot costs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffSlot {
    /// The chart fails on any release name but its own: it never ran, nothing is lost.
    NeverRenders,
    /// It runs and keeps nothing a new instance would miss.
    Runs,
    /// It runs, and its chart's post-delete hook deletes its volumes: deleting it drops its data.
    DropsVolumes,
}

/// The stock release prefix of `kind`, with rules or without, when the derivation examined it.
pub fn release_prefix(kind: &str) -> Option<&'static str> {
    match KINDS.iter().find(|k| k.kind == kind) {
        Some(row) => Some(row.release_prefix),
        None => UNRULED
            .binary_search_by(|(k, _)| (*k).cmp(kind))
            .ok()
            .map(|i| UNRULED[i].1),
    }
}

/// Whether the built-in set has `kind` rendered with no ApplicationDefinition of its own (the
/// Tenant chart's Gateway: `hidden`), so a cluster serving it lists none.
pub fn renders_without_definition(kind: &str) -> bool {
    KINDS
        .iter()
        .any(|k| k.kind == kind && k.visibility == Visibility::Hidden)
}

/// What an instance of `kind` off its slot does, when the built-in set knows the kind.
pub fn off_slot(kind: &str) -> Option<OffSlot> {
    KINDS.iter().find(|k| k.kind == kind)?.off_slot
}

/// Whether an instance of `kind` whose release holds `name` (after the prefix) in `namespace`
/// renders anything. A chart that fails on any release name but its own (`off its slot: never
/// renders`, `packages/extra/<pkg>/templates/check-release-name.yaml`) ran nothing under another
/// name, and BootBox's nothing outside `tenant-root`: such an instance provides nothing, whatever
/// its kind's definition says. The chart's fact, so the built-in slots decide, not the settings'.
pub fn renders(kind: &str, namespace: &str, name: &str) -> bool {
    let Some(row) = KINDS.iter().find(|k| k.kind == kind) else {
        return true;
    };
    match (&row.off_slot, &row.cardinality) {
        (Some(OffSlot::NeverRenders), Some(c)) => {
            c.slots.contains(&name) && c.slot_namespace.is_none_or(|home| home == namespace)
        }
        _ => true,
    }
}

/// A HelmRelease a stock install renders under a fixed name (`docs/stock-rules.md`, Rendered
/// names): helm-controller adopts an existing object of that name, so no app of another kind
/// may hold it.
#[derive(Debug)]
pub struct RenderedName {
    pub release: &'static str,
    /// The fixed namespace; `None`: every tenant's namespace.
    pub namespace: Option<&'static str>,
    /// The kind its app labels name; `None`: it is no app release.
    pub kind: Option<&'static str>,
    pub when: When,
}

/// When a rendered name is rendered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    /// By every Tenant, whatever its values (`info`).
    Always,
    /// While the Tenant's switch of this key is on.
    Switch(&'static str),
    /// While the platform enables the optional package that renders it (BootBox).
    Package,
}

/// The rendered names `release` takes in `namespace`: those of a fixed namespace that is it,
/// and when `tenant` (it is a tenant's namespace), the tenant's.
pub fn rendered_as(
    release: &str,
    namespace: &str,
    tenant: bool,
) -> impl Iterator<Item = &'static RenderedName> {
    RENDERED.iter().filter(move |r| {
        r.release == release && r.namespace.map_or(tenant, |fixed| fixed == namespace)
    })
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
    let fields = |index| {
        KINDS
            .get(index)
            .map(BuiltinKind::fields)
            .unwrap_or_default()
    };
    DefinitionSet::with_defaults(read, defaults(fields, classes), settings, prefixes)
        .with_prefixes_only(UNRULED)
}

/// The ApplicationDefinitions a cluster lists (none under `definitionSource: settings`), and no
/// built-in rule: a kind without a definition (Gateway, which only the Tenant chart renders; any
/// kind under `settings`) still names its releases as a stock install does, so its instances
/// and rendered names are judged by their release names under every definition source. A
/// listed definition states its own prefix, or none.
pub fn listed_definitions(
    read: Box<dyn DefinitionList>,
    settings: &KindBlocks,
    prefixes: &BTreeMap<String, String>,
) -> DefinitionSet {
    let unlisted: Vec<Defaults> = defaults(|_| RuleFields::default(), |_, _| &[])
        .filter(|d| read.find(d.kind).is_none())
        .collect();
    DefinitionSet::with_defaults(read, unlisted, settings, prefixes).with_prefixes_only(UNRULED)
}

/// The table's kinds as defaults, each index its row (the kinds examined without a rule are
/// [`UNRULED`], named by their prefixes alone).
fn defaults(
    fields: fn(usize) -> RuleFields,
    classes: fn(usize, Role) -> &'static [&'static str],
) -> impl Iterator<Item = Defaults> {
    KINDS.iter().enumerate().map(move |(index, kind)| Defaults {
        kind: kind.kind,
        release_prefix: kind.release_prefix,
        index,
        fields,
        classes,
    })
}

/// The classes a table row provides or consumes, as [`BuiltinKind::fields`] states them.
fn classes(index: usize, role: Role) -> &'static [&'static str] {
    KINDS.get(index).map_or(&[], |kind| match role {
        Role::Provides => kind.provides,
        Role::Consumes => kind.consumes,
    })
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

impl BuiltinKind {
    /// The blocks this kind states, as a settings block stating the same table row would be
    /// decoded: a block is present only when the row fills it.
    // `..RuleFields::default()`: a rule field the stock set has no column for stays unstated.
    #[allow(clippy::needless_update)]
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
            ..RuleFields::default()
        }
    }
}

/// Whether the derivation examined `kind`: a kind outside [`EXAMINED`] gets no rule from the
/// built-in set because it was never judged, not because its charts were read and found empty.
pub fn examined(kind: &str) -> bool {
    EXAMINED.binary_search(&kind).is_ok()
}

/// The built-in rule set as a person reads it: where it comes from, one line per kind with
/// rules, then the kinds examined that take none.
pub fn summary() -> String {
    let mut text = format!("built-in rule set ({SOURCE}), {} kinds:", KINDS.len());
    for kind in KINDS {
        text.push_str(&format!("\n  {kind}"));
    }
    let ruled = |k: &&&str| KINDS.iter().any(|r| r.kind == **k);
    let rest: Vec<&str> = EXAMINED.iter().filter(|k| !ruled(k)).copied().collect();
    text.push_str(&format!(
        "\nexamined, no rule ({}): {}",
        rest.len(),
        rest.join(", ")
    ));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::kinds::Class;
    use crate::model::listing::Unread;
    use std::collections::BTreeSet;
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    /// The kinds whose made rules provide (or consume) `class`: what `kinds_where` must answer
    /// without making the rules of a kind its default says plays no part.
    fn by_rules(set: &DefinitionSet, kinds: &[&str], role: Role, class: &Class) -> Vec<String> {
        let mut named: Vec<String> = kinds
            .iter()
            .filter(|kind| set.get(kind).unwrap().is_some_and(|r| r.plays(role, class)))
            .map(|kind| kind.to_string())
            .collect();
        named.sort();
        named
    }

    #[test]
    fn the_defaults_classes_name_the_kinds_their_rules_would() {
        // Postgres is given a class by its settings block, Monitoring has its own taken away.
        let blocks: KindBlocks = serde_json::from_str(
            r#"{"Postgres": {"capability": {"provides": ["monitoring"]}},
                "Monitoring": {"capability": {"provides": [], "consumes": ["ingress"]}}}"#,
        )
        .unwrap();
        let mut kinds: Vec<&str> = KINDS.iter().map(|k| k.kind).collect();
        kinds.push("Postgres");
        let classes: BTreeSet<&str> = KINDS
            .iter()
            .flat_map(|k| k.provides.iter().chain(k.consumes))
            .copied()
            .collect();
        assert!(classes.len() >= 3, "{classes:?}");
        for blocks in [KindBlocks::default(), blocks] {
            let set = definitions(Box::new(Unread), &blocks, &BTreeMap::new());
            for class in &classes {
                let class = Class::parse(class).unwrap();
                for role in [Role::Provides, Role::Consumes] {
                    let matching = set.kinds_where(role, &class);
                    let named: Vec<String> =
                        matching.kinds.iter().map(|r| r.kind.clone()).collect();
                    assert_eq!(
                        named,
                        by_rules(&set, &kinds, role, &class),
                        "{role:?} {class}"
                    );
                    assert!(matching.unreadable.is_empty());
                }
            }
        }
        let set = definitions(Box::new(Unread), &KindBlocks::default(), &BTreeMap::new());
        let monitoring = Class::parse("monitoring").unwrap();
        let providers = set.kinds_where(Role::Provides, &monitoring);
        assert_eq!(providers.kinds.len(), 1);
        assert_eq!(providers.kinds[0].kind, "Monitoring");
    }
}
