//! The ApplicationDefinitions a cluster lists, read a kind at a time.
//!
//! A request needs the rules of one kind, or of the few that provide or consume a class, while
//! the list holds every kind of the install: an implementation indexes its answer by kind and
//! decodes an item only when its kind is asked for, so a definition the request does not need
//! costs it a look at its kind, not a parse.

use std::fmt;

use crate::model::collect::sorted_positions;
use crate::model::definition::{Definition, RawField, RuleField};

/// The listed definitions, grouped by kind: kinds are numbered `0..kinds()` in sorted order.
pub trait DefinitionList {
    /// How many distinct kinds are listed.
    fn kinds(&self) -> usize;
    /// The kind numbered `index` (`""` past the end).
    fn kind(&self, index: usize) -> &str;
    /// The definitions of the kind numbered `index`, in list order, made now (their rule fields
    /// stay text until [`Definition::rule_fields`]).
    fn definitions(&self, index: usize) -> Vec<Definition>;
    /// Every definition in list order: what a snapshot holds.
    fn all(&self) -> Vec<Definition>;
    /// The `spec.capability` text of each definition of the kind numbered `index`, in list
    /// order (`None` where one states none), borrowed: enough to tell that the kind plays no
    /// part for a class without making a definition.
    fn capabilities(&self, index: usize) -> Vec<Option<&str>>;
}

/// The kinds listed: a `Debug` of each implementation would be kept alive by the vtable in the
/// module, where nothing prints it.
impl fmt::Debug for dyn DefinitionList + '_ {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries((0..self.kinds()).map(|index| self.kind(index)))
            .finish()
    }
}

impl dyn DefinitionList + '_ {
    /// The number of `kind`, when it is listed.
    pub fn find(&self, kind: &str) -> Option<usize> {
        let (mut low, mut high) = (0, self.kinds());
        while low < high {
            let middle = low + (high - low) / 2;
            match self.kind(middle).cmp(kind) {
                std::cmp::Ordering::Less => low = middle + 1,
                std::cmp::Ordering::Greater => high = middle,
                std::cmp::Ordering::Equal => return Some(middle),
            }
        }
        None
    }
}

/// The runs of one kind in a sequence sorted by kind: the kinds' numbering of a list.
#[derive(Debug, Default)]
pub struct Runs {
    /// Where each run starts, then the sequence's length.
    starts: Vec<usize>,
}

impl Runs {
    /// The runs of `len` sorted items, `same(a, b)` telling whether items `a` and `b` share a
    /// kind.
    pub fn new(len: usize, same: impl Fn(usize, usize) -> bool) -> Self {
        let mut starts: Vec<usize> = (0..len).filter(|&i| i == 0 || !same(i - 1, i)).collect();
        starts.push(len);
        Runs { starts }
    }

    /// How many runs (kinds) there are.
    pub fn len(&self) -> usize {
        self.starts.len().saturating_sub(1)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The items of run `index`; empty past the end.
    pub fn get(&self, index: usize) -> std::ops::Range<usize> {
        match (self.starts.get(index), self.starts.get(index + 1)) {
            (Some(&start), Some(&end)) => start..end,
            _ => 0..0,
        }
    }
}

/// No definition read: `definitionSource: builtin` and `settings`. Not a [`Decoded`] with none,
/// so that the module the policy ships carries no code to copy definitions it never reads.
pub struct Unread;

impl DefinitionList for Unread {
    fn kinds(&self) -> usize {
        0
    }

    fn kind(&self, _: usize) -> &str {
        ""
    }

    fn definitions(&self, _: usize) -> Vec<Definition> {
        Vec::new()
    }

    fn all(&self) -> Vec<Definition> {
        Vec::new()
    }

    fn capabilities(&self, _: usize) -> Vec<Option<&str>> {
        Vec::new()
    }
}

/// Definitions already decoded, as a snapshot, a pre-flight or a test holds them.
#[derive(Debug, Default)]
pub struct Decoded {
    definitions: Vec<Definition>,
    /// Positions in `definitions`, sorted by kind (list order within a kind).
    order: Vec<usize>,
    /// Each kind's run in `order`.
    runs: Runs,
}

impl Decoded {
    pub fn new(definitions: Vec<Definition>) -> Self {
        // By kind, in list order within a kind.
        let order = sorted_positions(definitions.len(), &|a, b| {
            definitions[a].kind.cmp(&definitions[b].kind)
        });
        let runs = Runs::new(order.len(), |a, b| {
            definitions[order[a]].kind == definitions[order[b]].kind
        });
        Decoded {
            definitions,
            order,
            runs,
        }
    }

    fn run(&self, index: usize) -> impl Iterator<Item = &Definition> {
        self.order
            .get(self.runs.get(index))
            .unwrap_or_default()
            .iter()
            .filter_map(|&at| self.definitions.get(at))
    }
}

impl DefinitionList for Decoded {
    fn kinds(&self) -> usize {
        self.runs.len()
    }

    fn kind(&self, index: usize) -> &str {
        self.run(index).next().map_or("", |d| d.kind.as_str())
    }

    fn definitions(&self, index: usize) -> Vec<Definition> {
        self.run(index).cloned().collect()
    }

    fn all(&self) -> Vec<Definition> {
        self.definitions.clone()
    }

    fn capabilities(&self, index: usize) -> Vec<Option<&str>> {
        self.run(index)
            .map(|d| d.field(RuleField::Capability).map(RawField::get))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_by_kind_in_sorted_order_and_list_order_within() {
        let list = Decoded::new(vec![
            Definition::new("b1", "Redis"),
            Definition::new("a", "Monitoring"),
            Definition::new("b2", "Redis"),
        ]);
        let list: &dyn DefinitionList = &list;
        assert_eq!(list.kinds(), 2);
        assert_eq!(
            (list.kind(0), list.kind(1), list.kind(2)),
            ("Monitoring", "Redis", "")
        );
        assert_eq!(list.find("Redis"), Some(1));
        assert_eq!(list.find("Postgres"), None);
        let names: Vec<String> = list.definitions(1).into_iter().map(|d| d.name).collect();
        assert_eq!(names, ["b1", "b2"]);
        assert!(list.definitions(5).is_empty());
        let all: Vec<String> = list.all().into_iter().map(|d| d.name).collect();
        assert_eq!(all, ["b1", "a", "b2"]);
    }

    #[test]
    fn an_empty_list_has_no_kinds() {
        let list: &dyn DefinitionList = &Decoded::new(Vec::new());
        assert_eq!((list.kinds(), list.find("Redis")), (0, None));
    }
}
