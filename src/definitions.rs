//! The ApplicationDefinitions list answer, indexed by kind as it arrives and decoded a kind at a
//! time (`cozystack_resolver::listing`): a request needs the rules of a kind or a few, the list
//! holds every kind of the install, and an item of a kind no one asks for is only scanned.

use std::ops::Range;

use cozystack_resolver::error::decode_json;
use cozystack_resolver::listing::runs;
use cozystack_resolver::{Definition, DefinitionList, RawField, RuleError};
use serde::Deserialize;

use crate::objects::Object;
use crate::scan::{self, ScanError, Str};

pub const DEFINITION_API: &str = "cozystack.io/v1alpha1";
pub const DEFINITION_KIND: &str = "ApplicationDefinition";

pub const DEFINITION_MASKS: &[&str] = &[
    "metadata.name",
    "spec.application.kind",
    "spec.dashboard.visibility",
    "spec.dashboard.module",
    "spec.cardinality",
    "spec.protection",
    "spec.capability",
    "spec.release.prefix",
];

/// The spec as far as the policy decodes it; the kind was read by the index.
#[derive(Deserialize, Default)]
struct DefinitionSpec {
    // Kept as text: only the kinds a request needs are decoded (`Definition::rule_fields`).
    #[serde(default)]
    dashboard: Option<RawField>,
    #[serde(default)]
    cardinality: Option<RawField>,
    #[serde(default)]
    protection: Option<RawField>,
    #[serde(default)]
    capability: Option<RawField>,
    #[serde(default)]
    release: Option<ReleasePrefix>,
}

#[derive(Deserialize, Default)]
struct ReleasePrefix {
    #[serde(default)]
    prefix: Option<String>,
}

/// One listed item: where its kind, its name and the whole item lie in the text.
#[derive(Debug)]
struct Item {
    kind: Range<usize>,
    name: Range<usize>,
    span: Range<usize>,
}

/// The list answer and its index.
#[derive(Debug)]
pub struct ListedDefinitions {
    /// The answer as the host sent it, then the kinds and names that were written with escapes.
    text: String,
    /// The items that state a kind, sorted by kind, in list order within a kind.
    items: Vec<Item>,
    /// Where each kind's run starts in `items`, then `items.len()`.
    starts: Vec<usize>,
}

impl ListedDefinitions {
    /// Checks the whole answer and reads each item's kind and name; decodes nothing else. An item
    /// without a kind defines none and is left out.
    pub fn index(mut text: String) -> Result<Self, ScanError> {
        // Kinds and names written with escapes, unescaped, to be appended to the text.
        let mut unescaped = String::new();
        let mut items: Vec<Item> = {
            let document = text.as_str();
            let mut place = |value: Option<Str<'_>>| -> Result<Range<usize>, ScanError> {
                let Some(value) = value else { return Ok(0..0) };
                if let Some(span) = value.span(document) {
                    return Ok(span);
                }
                let start = document.len() + unescaped.len();
                unescaped.push_str(&value.text()?);
                Ok(start..document.len() + unescaped.len())
            };
            // Of two `items` keys the last counts, as everywhere.
            let listed = scan::list_items(document, |r| {
                let start = r.value_start();
                let (mut kind, mut name) = (None, None);
                r.object(|r, key| {
                    if key.is("metadata") {
                        scan::fields(r, |r, key| {
                            let wanted = key.is("name");
                            if wanted {
                                name = if r.null()? { None } else { Some(r.string()?) };
                            }
                            Ok(wanted)
                        })
                    } else if key.is("spec") {
                        scan::fields(r, |r, key| {
                            if !key.is("application") {
                                return Ok(false);
                            }
                            scan::fields(r, |r, key| {
                                let wanted = key.is("kind");
                                if wanted {
                                    kind = Some(r.string()?);
                                }
                                Ok(wanted)
                            })?;
                            Ok(true)
                        })
                    } else {
                        r.skip()
                    }
                })?;
                let kind = place(kind)?;
                if kind.is_empty() {
                    return Ok(None);
                }
                Ok(Some(Item {
                    kind,
                    name: place(name)?,
                    span: start..r.position(),
                }))
            })?;
            listed.into_iter().flatten().collect()
        };
        text.push_str(&unescaped);
        let at = |range: &Range<usize>| text.get(range.clone()).unwrap_or_default();
        items.sort_unstable_by(|a, b| {
            at(&a.kind)
                .cmp(at(&b.kind))
                .then(a.span.start.cmp(&b.span.start))
        });
        let starts = runs(items.len(), |a, b| at(&items[a].kind) == at(&items[b].kind));
        Ok(ListedDefinitions {
            text,
            items,
            starts,
        })
    }

    fn at(&self, range: &Range<usize>) -> &str {
        self.text.get(range.clone()).unwrap_or_default()
    }

    fn run(&self, index: usize) -> &[Item] {
        match (self.starts.get(index), self.starts.get(index + 1)) {
            (Some(&start), Some(&end)) => self.items.get(start..end).unwrap_or_default(),
            _ => &[],
        }
    }

    /// Decodes one item, with the types the whole list was once decoded with.
    fn decode(&self, item: &Item) -> Result<Definition, RuleError> {
        let name = self.at(&item.name);
        let object: Object<DefinitionSpec> =
            decode_json(self.at(&item.span)).map_err(|err| RuleError::Definition {
                definition: name.to_owned(),
                path: err.path,
                reason: err.reason,
            })?;
        let spec = object.spec.unwrap_or_default();
        Ok(Definition {
            name: object.metadata.name,
            kind: self.at(&item.kind).to_owned(),
            dashboard: spec.dashboard,
            cardinality: spec.cardinality,
            protection: spec.protection,
            capability: spec.capability,
            release_prefix: spec.release.and_then(|r| r.prefix),
            plural: None,
        })
    }
}

impl DefinitionList for ListedDefinitions {
    fn kinds(&self) -> usize {
        self.starts.len().saturating_sub(1)
    }

    fn kind(&self, index: usize) -> &str {
        self.run(index)
            .first()
            .map_or("", |item| self.at(&item.kind))
    }

    fn definitions(&self, index: usize) -> Vec<Result<Definition, RuleError>> {
        self.run(index)
            .iter()
            .map(|item| self.decode(item))
            .collect()
    }

    fn all(&self) -> Result<Vec<Definition>, RuleError> {
        let mut items: Vec<&Item> = self.items.iter().collect();
        items.sort_unstable_by_key(|item| item.span.start);
        items.into_iter().map(|item| self.decode(item)).collect()
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

    fn names(list: &ListedDefinitions, index: usize) -> Vec<String> {
        list.definitions(index)
            .into_iter()
            .map(|d| d.map_or_else(|err| err.to_string(), |d| d.name))
            .collect()
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
        let all = list.all().unwrap();
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
            all[1].dashboard.as_ref().map(RawField::get),
            Some(r#"{"module":true}"#)
        );
    }

    #[test]
    fn of_two_items_keys_the_last_counts() {
        let text = r#"{"items":[{"spec":{"application":{"kind":"Redis"}}}],"items":[{"spec":{"application":{"kind":"Etcd"}}}]}"#;
        let list = ListedDefinitions::index(text.to_owned()).unwrap();
        assert_eq!((list.kinds(), list.kind(0)), (1, "Etcd"));
    }

    #[test]
    fn an_item_that_does_not_decode_fails_only_its_kind() {
        let list = listed(
            r#"{"metadata":{"name":"redis"},"spec":{"application":{"kind":"Redis"},"release":{"prefix":5}}},
               {"metadata":{"name":"etcd"},"spec":{"application":{"kind":"Etcd"}}}"#,
        );
        assert_eq!(names(&list, 0), ["etcd"]);
        assert_eq!(
            names(&list, 1),
            [
                "ApplicationDefinition redis: spec.release.prefix: invalid type: integer `5`, expected a string"
            ]
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
                r#"{"items":[{"spec":[]}]}"#,
                "expected an object at byte 18",
            ),
        ] {
            let err = ListedDefinitions::index(text.to_owned()).unwrap_err();
            assert_eq!(err.to_string(), error, "{text}");
        }
    }
}
