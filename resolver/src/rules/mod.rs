//! The rules, one module each, and the one table that orders them.
//!
//! Every surface is first normalised into a [`Change`] (`crate::change`); the table below then
//! judges it, rule by rule, in the order a person must clear what they refuse: who may write
//! at all first, then the names, the counts, and what a removal strands. The first refusal
//! ends the evaluation (a platform writer's waivable one is a warning instead, see
//! `Evaluation::enforce`). A rule is one module here and one line in [`RULES`].

use crate::change::{Change, Entry, LabelChange, NewTenant, Origin, Subject};
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

/// What a row judges, and its check; the loop (`crate::decide`) picks what the change holds of
/// that part and resolves what the check needs, so when a row applies reads in the table.
pub enum Judge {
    /// Each app of the change's `When` takes.
    Each(When, Check),
    /// The Tenant the write creates ([`Change::new_tenant`]).
    NewTenant(fn(&Evaluation, &NewTenant) -> Outcome),
    /// The protected Namespace labels the write changes ([`Change::labels`]).
    Labels(fn(&Evaluation, &LabelChange) -> Outcome),
}

/// Which apps of a change a row judges, and which of them it skips.
#[derive(Clone, Copy)]
pub struct When {
    pub of: Of,
    /// Only when the request creates (a warning about what a new app will find).
    pub create_only: bool,
    /// Not an app that is already terminating: its first DELETE decided.
    pub live_only: bool,
}

impl When {
    /// Every app `of` takes.
    pub const fn each(of: Of) -> When {
        When {
            of,
            create_only: false,
            live_only: false,
        }
    }

    /// Whether the row judges `entry`, of a request that is a CREATE when `creates`.
    pub fn takes(&self, entry: &Entry, creates: bool) -> bool {
        let whose = match self.of {
            Of::Entering(whose) | Of::Leaving(whose) => whose,
            Of::Release | Of::Authored => Whose::Any,
        };
        whose.takes(entry)
            && (creates || !self.create_only)
            && !(self.live_only && entry.terminating)
    }
}

/// The part of a change a per-app row reads.
#[derive(Clone, Copy)]
pub enum Of {
    /// The app whose HelmRelease the request writes directly ([`Change::release`]).
    Release,
    /// The app a user writes through the apps API ([`Change::authored`]).
    Authored,
    /// Each app the write makes enter a kind, of those `Whose` takes.
    Entering(Whose),
    /// Each app the write makes leave a kind, of those `Whose` takes.
    Leaving(Whose),
}

/// A row's check of one app.
pub enum Check {
    /// Any app, its kind's rules or none (who may write it, the name it takes).
    Any(fn(&Evaluation, &Change, &Entry) -> Outcome),
    /// An app of a kind with rules, with them and its release resolved; a kind without rules
    /// has nothing to say, so the row skips it.
    Ruled(fn(&Evaluation, &Change, &Ruled) -> Outcome),
}

/// An app of a kind with rules: the entry, its release, and the rules.
pub struct Ruled<'a> {
    pub entry: &'a Entry,
    pub subject: &'a Subject,
    pub rules: &'a KindRules,
}

/// Which apps entering or leaving a kind a row judges.
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

/// What a refusal made before any row runs is named: the write cannot be described (the rules
/// of a kind it touches cannot be read, or its definitions disagree; its object is malformed;
/// a lookup it needs failed), so no row can judge it and it is refused, fail closed. It heads
/// the table in docs/rules.md, as if it were its first row.
pub const DESCRIBE: &str = "describe";

/// The name a refusal carries: a row of [`RULES`], or [`DESCRIBE`].
pub fn refusal(name: &str) -> Option<&'static str> {
    match name {
        DESCRIBE => Some(DESCRIBE),
        name => row(name).map(|row| row.name),
    }
}

/// The rules, in the order their refusals must be met.
pub const RULES: &[Rule] = &[
    // Who may write: the platform alone writes app releases; the kind's visibility; adminOnly.
    // Refusals no one can clear by another write first, that read nothing: the root Tenant,
    // and a new Tenant's groups colliding with its ancestors' (a flaw of the name).
    Rule {
        name: "releases",
        judge: Judge::Each(When::each(Of::Release), Check::Any(releases::judge)),
    },
    Rule {
        name: "root_tenant",
        judge: Judge::Each(
            When::each(Of::Leaving(Whose::Requested)),
            Check::Any(root_tenant::judge),
        ),
    },
    Rule {
        name: "groups",
        judge: Judge::NewTenant(groups::judge),
    },
    Rule {
        name: "visibility",
        judge: Judge::Each(When::each(Of::Authored), Check::Ruled(visibility::judge)),
    },
    Rule {
        name: "edit",
        judge: Judge::Each(When::each(Of::Authored), Check::Ruled(edit::judge)),
    },
    // The state: how many (no name helps when the count is full), on which slot (the slot is a
    // name the kind's own module renders), then any other name Cozystack renders, and what a
    // switched-on module is rendered over.
    Rule {
        name: "cardinality",
        judge: Judge::Each(
            When::each(Of::Entering(Whose::Any)),
            Check::Ruled(cardinality::judge),
        ),
    },
    Rule {
        name: "slots",
        judge: Judge::Each(
            When::each(Of::Entering(Whose::Any)),
            Check::Ruled(slots::judge),
        ),
    },
    Rule {
        name: "names",
        judge: Judge::Each(
            When::each(Of::Entering(Whose::Requested)),
            Check::Any(names::judge),
        ),
    },
    Rule {
        name: "adoption",
        judge: Judge::Each(
            When::each(Of::Entering(Whose::Any)),
            Check::Ruled(adoption::judge),
        ),
    },
    // What a removal strands, and what the chart would create again: decided at an app's first
    // DELETE, not again while it terminates.
    Rule {
        name: "protection",
        judge: Judge::Each(
            When {
                live_only: true,
                ..When::each(Of::Leaving(Whose::Any))
            },
            Check::Ruled(protection::judge),
        ),
    },
    Rule {
        name: "rendered",
        judge: Judge::Each(
            When {
                live_only: true,
                ..When::each(Of::Leaving(Whose::Requested))
            },
            Check::Ruled(rendered::judge),
        ),
    },
    // A consumer made where its class has no provider yet (a warning, on its CREATE).
    Rule {
        name: "capability",
        judge: Judge::Each(
            When {
                create_only: true,
                ..When::each(Of::Entering(Whose::Requested))
            },
            Check::Ruled(capability::judge),
        ),
    },
    // Namespace labels.
    Rule {
        name: "namespace",
        judge: Judge::Labels(namespace::judge),
    },
];
