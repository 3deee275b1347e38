//! The rules, one module each, and the one table that orders them.
//!
//! Every surface is first normalised into a [`Change`] (`crate::change`); the table below then
//! judges it, rule by rule, in the order a person must clear what they refuse: who may write
//! at all first, then the names, the counts, and what a removal strands. The first refusal
//! ends the evaluation (a platform writer's waivable one is a warning instead, see
//! `Evaluation::enforce`). A rule is one module here and one line in [`RULES`].

use crate::change::{Change, Entry, LabelChange, NewTenant, Origin};
use crate::model::evaluation::Evaluation;
use crate::model::kinds::KindRules;
use crate::model::verdict::Violation;

pub mod adoption;
pub mod capability;
pub mod cardinality;
pub mod edit;
pub mod groups;
pub mod names;
pub mod namespace;
pub mod protection;
pub mod releases;
pub mod rendered;
pub mod root_tenant;
pub mod slots;
pub mod visibility;

/// What a rule says: its warnings, or the refusal.
pub type Outcome = Result<Vec<String>, Violation>;

/// The part of the change a row judges, and its check; a row whose part the change lacks is
/// skipped, so when a rule applies reads in the table.
pub enum Judge {
    /// The app whose HelmRelease the request writes directly ([`Change::release`]).
    Release(fn(&Evaluation, &Entry) -> Outcome),
    /// The app a user writes through the apps API, of a kind with rules ([`Change::authored`]).
    Authored(fn(&Evaluation, &Change, &Entry, &KindRules) -> Outcome),
    /// The Tenant the write creates ([`Change::new_tenant`]).
    NewTenant(fn(&Evaluation, &NewTenant) -> Outcome),
    /// Each instance the write makes enter a kind, of those `Whose` takes.
    Entering(Whose, fn(&Evaluation, &Change, &Entry) -> Outcome),
    /// Each instance the write makes leave a kind, of those `Whose` takes.
    Leaving(Whose, fn(&Evaluation, &Change, &Entry) -> Outcome),
    /// The protected Namespace labels the write changes ([`Change::labels`]).
    Labels(fn(&Evaluation, &LabelChange) -> Outcome),
}

/// Which instances entering or leaving a kind a row judges.
#[derive(Clone, Copy)]
pub enum Whose {
    /// Every one: the object the request writes and the modules a Tenant's switch renders.
    Any,
    /// Only the object the request writes (a switch's modules are the chart's own to render).
    Requested,
}

impl Whose {
    /// Whether the row judges `entry`.
    pub fn takes(self, entry: &Entry) -> bool {
        matches!(self, Whose::Any) || matches!(entry.origin, Origin::Request)
    }
}

/// A row of the table: the rule's stable name (its module's, as `docs/rules.md` lists them) and
/// what it judges.
pub struct Rule {
    pub name: &'static str,
    pub judge: Judge,
}

/// The row of [`RULES`] of that name (as a verdict and the module's audit annotations name it).
pub fn row(name: &str) -> Option<&'static Rule> {
    RULES.iter().find(|row| row.name == name)
}

/// The rules, in the order their refusals must be met.
pub const RULES: &[Rule] = &[
    // Who may write: the platform alone writes app releases; the kind's visibility; adminOnly.
    // Refusals no one can clear by another write first, that read nothing: the root Tenant,
    // and a new Tenant's groups colliding with its ancestors' (a flaw of the name).
    Rule {
        name: "releases",
        judge: Judge::Release(releases::judge),
    },
    Rule {
        name: "root_tenant",
        judge: Judge::Leaving(Whose::Requested, root_tenant::judge),
    },
    Rule {
        name: "groups",
        judge: Judge::NewTenant(groups::judge),
    },
    Rule {
        name: "visibility",
        judge: Judge::Authored(visibility::judge),
    },
    Rule {
        name: "edit",
        judge: Judge::Authored(edit::judge),
    },
    // The state: how many (no name helps when the count is full), on which slot (the slot is a
    // name the kind's own module renders), then any other name Cozystack renders, and what a
    // switched-on module is rendered over.
    Rule {
        name: "cardinality",
        judge: Judge::Entering(Whose::Any, cardinality::judge),
    },
    Rule {
        name: "slots",
        judge: Judge::Entering(Whose::Any, slots::judge),
    },
    Rule {
        name: "names",
        judge: Judge::Entering(Whose::Requested, names::judge),
    },
    Rule {
        name: "adoption",
        judge: Judge::Entering(Whose::Any, adoption::judge),
    },
    // What a removal strands, and what the chart would create again.
    Rule {
        name: "protection",
        judge: Judge::Leaving(Whose::Any, protection::judge),
    },
    Rule {
        name: "rendered",
        judge: Judge::Leaving(Whose::Requested, rendered::judge),
    },
    // A consumer made where its class has no provider yet (a warning).
    Rule {
        name: "capability",
        judge: Judge::Entering(Whose::Requested, capability::judge),
    },
    // Namespace labels.
    Rule {
        name: "namespace",
        judge: Judge::Labels(namespace::judge),
    },
];
