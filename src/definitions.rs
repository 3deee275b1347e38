//! The ApplicationDefinitions list answer, indexed by kind as it arrives and decoded a kind at a
//! time (`cozystack_resolver::listing`): a request needs the rules of a kind or a few, the list
//! holds every kind of the install, and an item of a kind no one asks for is only scanned. One
//! pass of the scanner checks the whole answer and notes where each item's fields lie; a kind's
//! definitions are then made from those spans, without a second parse.

use std::ops::Range;

use cozystack_resolver::collect::sorted_by;
use cozystack_resolver::listing::Runs;
use cozystack_resolver::request::APPS_GROUP;
use cozystack_resolver::{Definition, DefinitionList, RawField, RuleField};

use crate::scan::{self, Reader, ScanError, Str};

pub const DEFINITION_API: &str = "cozystack.io/v1alpha1";
pub const DEFINITION_KIND: &str = "ApplicationDefinition";

/// The paths of each listed ApplicationDefinition the policy reads: its name, kind, group and
/// release prefix, and what [`RuleField::masks`] says of each rule field.
/// The paths of each listed ApplicationDefinition the policy reads: its name, kind, group and
/// release prefix, then what [`RuleField::masks`] says of each rule field (made at compile time).
pub const DEFINITION_MASKS: [&str; IDENTITY.len() + RuleField::MASKS] = {
    let mut paths = [""; IDENTITY.len() + RuleField::MASKS];
    let mut at = 0;
    while at < IDENTITY.len() {
        paths[at] = IDENTITY[at];
        at += 1;
    }
    let mut field = 0;
    while field < RuleField::ALL.len() {
        let masks = RuleField::ALL[field].masks();
        let mut mask = 0;
        while mask < masks.len() {
            paths[at] = masks[mask];
            (at, mask) = (at + 1, mask + 1);
        }
        field += 1;
    }
    paths
};

const IDENTITY: [&str; 4] = [
    "metadata.name",
    "spec.application.kind",
    "spec.application.group",
    "spec.release.prefix",
];

/// One listed item: where its strings and its rule fields' JSON texts lie in the text.
#[derive(Default)]
struct Item {
    /// Its place in the list.
    position: usize,
    kind: Range<usize>,
    /// `spec.application.group`: another than `apps.cozystack.io` makes another kind.
    group: Option<Range<usize>>,
    name: Range<usize>,
    /// `spec.release.prefix`.
    prefix: Option<Range<usize>>,
    /// The rule fields' values, in [`RuleField::ALL`] order; absent or `null`: `None`.
    fields: [Option<Range<usize>>; RuleField::ALL.len()],
}

/// The list answer and its index.
pub struct ListedDefinitions {
    /// The answer as the host sent it, then the strings that were written with escapes.
    text: String,
    /// The items that state a kind, sorted by kind, in list order within a kind.
    items: Vec<Item>,
    /// Each kind's run in `items`.
    runs: Runs,
}

/// A string's span in the text; one written with escapes is unescaped onto `unescaped`, which
/// will follow the document.
struct Spans<'a> {
    document: &'a str,
    unescaped: String,
}

impl<'a> Spans<'a> {
    fn place(&mut self, value: Str<'a>) -> Result<Range<usize>, ScanError> {
        if let Some(span) = value.span(self.document) {
            return Ok(span);
        }
        let start = self.document.len() + self.unescaped.len();
        self.unescaped.push_str(&value.text()?);
        Ok(start..self.document.len() + self.unescaped.len())
    }

    /// The string under `key` of an object that may be null, the other keys skipped; `null`
    /// counts as absent where `nullable`, else as the wrong type.
    fn field(
        &mut self,
        r: &mut Reader<'a>,
        key: &str,
        nullable: bool,
    ) -> Result<Option<Range<usize>>, ScanError> {
        let [found, _] = self.fields(r, [key, key], nullable)?;
        Ok(found)
    }

    /// The strings under two keys of such an object, as [`Spans::field`] reads one.
    fn fields(
        &mut self,
        r: &mut Reader<'a>,
        keys: [&str; 2],
        nullable: bool,
    ) -> Result<[Option<Range<usize>>; 2], ScanError> {
        let mut found = [None, None];
        scan::fields(r, |r, name| {
            let Some(at) = keys.iter().position(|key| name.is(key)) else {
                return Ok(false);
            };
            found[at] = if nullable && r.null()? {
                None
            } else {
                let value = r.string()?;
                Some(self.place(value)?)
            };
            Ok(true)
        })?;
        Ok(found)
    }
}

/// A value's JSON text, checked; `None` for `null`.
fn raw(r: &mut Reader<'_>) -> Result<Option<Range<usize>>, ScanError> {
    let start = r.value_start();
    if r.null()? {
        return Ok(None);
    }
    r.skip()?;
    Ok(Some(start..r.position()))
}

/// Reads one item's fields into spans, every other value checked and skipped. Of a key given
/// twice the last counts, as serde_json reads it.
fn item<'a>(r: &mut Reader<'a>, spans: &mut Spans<'a>, position: usize) -> Result<Item, ScanError> {
    let mut item = Item {
        position,
        ..Item::default()
    };
    r.object_last_wins(|r, key| {
        if key.is("metadata") {
            item.name = spans.field(r, "name", true)?.unwrap_or_default();
            Ok(())
        } else if key.is("spec") {
            (item.kind, item.group, item.prefix, item.fields) =
                (0..0, None, None, Default::default());
            scan::fields(r, |r, key| {
                if key.is("application") {
                    let [kind, group] = spans.fields(r, ["kind", "group"], false)?;
                    (item.kind, item.group) = (kind.unwrap_or_default(), group);
                } else if key.is("release") {
                    item.prefix = spans.field(r, "prefix", true)?;
                } else if let Some(at) = RuleField::ALL.iter().position(|f| key.is(f.key())) {
                    item.fields[at] = raw(r)?;
                } else {
                    return Ok(false);
                }
                Ok(true)
            })
        } else {
            r.skip()
        }
    })?;
    Ok(item)
}

impl ListedDefinitions {
    /// Checks the whole answer and notes where each item's kind, name, release prefix and rule
    /// fields lie; copies and decodes nothing. An item without a kind defines none and is left
    /// out; a kind, name or prefix that is not a string makes the answer unreadable.
    pub fn index(mut text: String) -> Result<Self, ScanError> {
        let (listed, unescaped) = {
            let mut spans = Spans {
                document: text.as_str(),
                unescaped: String::new(),
            };
            let mut position = 0;
            // Of two `items` keys the last counts, as everywhere.
            let listed = scan::list_items(spans.document, |r| {
                position += 1;
                item(r, &mut spans, position)
            })?;
            (listed, spans.unescaped)
        };
        text.push_str(&unescaped);
        let at = |range: &Range<usize>| text.get(range.clone()).unwrap_or_default();
        // A kind served in another API group (`spec.application.group`, cozystack#3448) is
        // another kind: its apps reach the cluster as `<kind>.<group>` and their releases carry
        // that group, so it is neither the `apps.cozystack.io` kind of its name nor a second
        // definition of it.
        let served_here = |i: &Item| {
            i.group
                .as_ref()
                .is_none_or(|g| matches!(at(g), "" | APPS_GROUP))
        };
        // By kind, in list order within a kind.
        let items = sorted_by(
            listed
                .into_iter()
                .filter(|i| !i.kind.is_empty() && served_here(i))
                .collect(),
            |a: &Item, b: &Item| at(&a.kind).cmp(at(&b.kind)),
        );
        let runs = Runs::new(items.len(), |a, b| at(&items[a].kind) == at(&items[b].kind));
        Ok(ListedDefinitions { text, items, runs })
    }

    fn at(&self, range: &Range<usize>) -> &str {
        self.text.get(range.clone()).unwrap_or_default()
    }

    fn run(&self, index: usize) -> &[Item] {
        self.items.get(self.runs.get(index)).unwrap_or_default()
    }

    /// Makes one item's definition from its spans.
    fn decode(&self, item: &Item) -> Definition {
        let mut definition = Definition::new(self.at(&item.name), self.at(&item.kind));
        for field in RuleField::ALL {
            let span = item.fields[field as usize].as_ref();
            definition.set(field, span.map(|span| RawField::new(self.at(span))));
        }
        definition.release_prefix = item.prefix.as_ref().map(|p| self.at(p).to_owned());
        definition
    }
}

impl DefinitionList for ListedDefinitions {
    fn kinds(&self) -> usize {
        self.runs.len()
    }

    fn kind(&self, index: usize) -> &str {
        self.run(index)
            .first()
            .map_or("", |item| self.at(&item.kind))
    }

    fn definitions(&self, index: usize) -> Vec<Definition> {
        self.run(index)
            .iter()
            .map(|item| self.decode(item))
            .collect()
    }

    fn all(&self) -> Vec<Definition> {
        // Each item back at its place in the list (positions count from 1, kindless items too).
        let last = self
            .items
            .iter()
            .map(|item| item.position)
            .max()
            .unwrap_or(0);
        let mut placed: Vec<Option<&Item>> = vec![None; last];
        for item in &self.items {
            if let Some(slot) = placed.get_mut(item.position.wrapping_sub(1)) {
                *slot = Some(item);
            }
        }
        placed
            .into_iter()
            .flatten()
            .map(|item| self.decode(item))
            .collect()
    }

    fn capabilities(&self, index: usize) -> Vec<Option<&str>> {
        self.run(index)
            .iter()
            .map(|item| {
                item.fields[RuleField::Capability as usize]
                    .as_ref()
                    .map(|span| self.at(span))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(items: &str) -> ListedDefinitions {
        let text = format!(
            r#"{{"apiVersion":"cozystack.io/v1alpha1","kind":"ApplicationDefinitionList","items":[{items}]}}"#
        );
        ListedDefinitions::index(text).expect("a well-formed list")
    }

    #[test]
    fn indexes_by_kind_and_keeps_list_order() {
        let list = listed(
            r#"{"metadata":{"name":"redis"},"spec":{"application":{"kind":"Redis"},"release":{"prefix":"redis-"}}},
               {"metadata":{"name":"no-kind"},"spec":{"application":{}}},
               {"metadata":{"name":"mon\u0069toring"},"spec":{"application":{"kind":"Mon\u0069toring"},"dashboard":{"module":true}}},
               {"metadata":{"name":"redis-2"},"spec":{"application":{"kind":"Redis"},"release":{"prefix":"redis-"}}}"#,
        );
        let list: &dyn DefinitionList = &list;
        assert_eq!(list.kinds(), 2);
        assert_eq!((list.kind(0), list.kind(1)), ("Monitoring", "Redis"));
        assert_eq!(list.find("Monitoring"), Some(0));
        let all = list.all();
        let listed: Vec<(&str, &str)> = all
            .iter()
            .map(|d| (d.name.as_str(), d.kind.as_str()))
            .collect();
        assert_eq!(
            listed,
            [
                ("redis", "Redis"),
                ("monitoring", "Monitoring"),
                ("redis-2", "Redis")
            ]
        );
        assert_eq!(all[0].release_prefix.as_deref(), Some("redis-"));
        assert_eq!(
            all[1].field(RuleField::Dashboard).map(RawField::get),
            Some(r#"{"module":true}"#)
        );
    }

    #[test]
    fn a_kind_served_in_another_group_is_another_kind() {
        // A catalog serving its own Redis in apps.example.com beside Cozystack's: not a second
        // definition of Cozystack's Redis, whose requests would all fail as "defined twice".
        let list = listed(
            r#"{"metadata":{"name":"redis"},"spec":{"application":{"kind":"Redis","group":"apps.cozystack.io"},"release":{"prefix":"redis-"}}},
               {"metadata":{"name":"example-redis"},"spec":{"application":{"group":"apps.example.com","kind":"Redis"},"release":{"prefix":"ex-redis-"}}},
               {"metadata":{"name":"postgres"},"spec":{"application":{"kind":"Postgres","group":""}}}"#,
        );
        let list: &dyn DefinitionList = &list;
        assert_eq!(
            (0..list.kinds()).map(|i| list.kind(i)).collect::<Vec<_>>(),
            ["Postgres", "Redis"]
        );
        let all = list.all();
        let redis: Vec<_> = all.iter().filter(|d| d.kind == "Redis").collect();
        assert_eq!(redis.len(), 1);
        assert_eq!(redis[0].release_prefix.as_deref(), Some("redis-"));
        // A group that is not a string is as unreadable as such a kind (the CRD prunes null).
        for group in ["5", "null"] {
            let text = format!(
                r#"{{"items":[{{"spec":{{"application":{{"kind":"Redis","group":{group}}}}}}}]}}"#
            );
            assert!(ListedDefinitions::index(text).is_err());
        }
    }

    #[test]
    fn of_two_items_keys_the_last_counts() {
        let text = r#"{"items":[{"spec":{"application":{"kind":"Redis"}}}],"items":[{"spec":{"application":{"kind":"Etcd"}}}]}"#;
        let list = ListedDefinitions::index(text.to_owned()).unwrap();
        assert_eq!((list.kinds(), list.kind(0)), (1, "Etcd"));
    }

    #[test]
    fn rule_fields_stay_their_json_text_and_null_is_absent() {
        let list = listed(
            r#"{"metadata":{"name":"redis"},"spec":{"application":{"kind":"Redis"},
                "cardinality": null, "capability" : {"provides": "not a list"}, "protection":[1,2]}}"#,
        );
        let definitions = list.definitions(0);
        let redis = &definitions[0];
        let text = |field: Option<&RawField>| field.map(|f| f.get().to_owned());
        assert_eq!(
            (
                text(redis.field(RuleField::Dashboard)),
                text(redis.field(RuleField::Cardinality)),
                text(redis.field(RuleField::Protection)),
                text(redis.field(RuleField::Capability))
            ),
            (
                None,
                None,
                Some("[1,2]".to_owned()),
                Some(r#"{"provides": "not a list"}"#.to_owned())
            )
        );
        // The same text, borrowed, without making a definition.
        assert_eq!(
            list.capabilities(0),
            [Some(r#"{"provides": "not a list"}"#)]
        );
    }

    #[test]
    fn a_broken_answer_is_an_error_not_a_shorter_list() {
        for (text, error) in [
            (
                r#"{"items":[{"metadata":{"name":"a"}}"#,
                "expected ',' or ']' at byte 35",
            ),
            (
                r#"{"items":[{"spec":{"application":{"kind":5}}}]}"#,
                "expected a string at byte 41",
            ),
            (
                r#"{"items":[{"spec":{"application":{"kind":"Redis"},"release":{"prefix":5}}}]}"#,
                "expected a string at byte 70",
            ),
            (
                r#"{"items":[{"spec":[]}]}"#,
                "expected an object at byte 18",
            ),
        ] {
            let err = ListedDefinitions::index(text.to_owned())
                .err()
                .expect("an error");
            assert_eq!(err.to_string(), error, "{text}");
        }
    }
}
