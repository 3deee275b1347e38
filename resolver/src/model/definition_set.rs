//! Every kind's effective rules: the ApplicationDefinitions read, over the settings' blocks and
//! the built-in defaults, made for a kind the first time a request asks for it.

use std::cell::OnceCell;
use std::collections::BTreeMap;

use crate::model::definition::Definition;
use crate::model::error::RuleError;
use crate::model::kinds::{Class, KindBlock, KindBlocks, KindRules, Role, RuleFields};
use crate::model::listing::{Decoded, DefinitionList, Unread};

/// Every kind's effective rules, from the ApplicationDefinitions and the settings. A kind's
/// definitions and blocks are decoded the first time its rules are asked for: most requests
/// concern one kind, and a definition that fails to decode rejects only the requests that depend
/// on it.
#[derive(Debug)]
pub struct DefinitionSet {
    /// The ApplicationDefinitions read (none for `builtin` and `settings`), by kind.
    listed: Box<dyn DefinitionList>,
    /// The rules of each listed kind that no entry of `kinds` holds, by its number, once made.
    listed_rules: Vec<OnceCell<Result<Option<KindRules>, RuleError>>>,
    /// The kinds the settings or the defaults state.
    kinds: StatedKinds,
    /// The release prefixes of kinds that state no rule anywhere (the built-in set's kinds
    /// examined without one), sorted by kind: read only when a prefix is asked of such a kind,
    /// so no request pays for them in `kinds`.
    prefixes_only: &'static [(&'static str, &'static str)],
}

impl Default for DefinitionSet {
    fn default() -> Self {
        DefinitionSet::listed(Box::new(Unread), &KindBlocks::default())
    }
}

/// The rules a kind has unless the settings say otherwise: its fields, made by `fields(index)`
/// when a request first needs the kind, and its release prefix. Static data, so a set of them
/// costs no allocation until then.
#[derive(Debug, Clone, Copy)]
pub struct Defaults {
    pub kind: &'static str,
    pub release_prefix: &'static str,
    pub index: usize,
    pub fields: fn(usize) -> RuleFields,
    /// The classes `fields(index)` provides or consumes, read without making the fields: which
    /// kinds provide a class is asked of every kind, and most kinds play no part in it.
    pub classes: fn(usize, Role) -> &'static [&'static str],
}

/// What stands under a kind's definition.
#[derive(Debug, Default)]
struct Sources {
    /// The rules the kind has unless the settings say otherwise (`definitionSource: builtin`).
    defaults: Option<Defaults>,
    settings: Option<KindBlock>,
    /// A `releasePrefixes` entry: the prefix when no definition is read, over the built-in one.
    prefix: Option<String>,
    rules: OnceCell<Result<Option<KindRules>, RuleError>>,
}

/// The kinds the settings or the defaults state, sorted by kind: a few dozen, added in the
/// built-in table's order (already sorted) and searched by halves.
#[derive(Debug, Default)]
struct StatedKinds(Vec<(String, Sources)>);

impl StatedKinds {
    fn get(&self, kind: &str) -> Option<&Sources> {
        let at = self
            .0
            .binary_search_by(|(k, _)| k.as_str().cmp(kind))
            .ok()?;
        Some(&self.0[at].1)
    }

    /// The sources of `kind`, added empty when it has none yet.
    fn entry(&mut self, kind: &str) -> &mut Sources {
        let at = match self.0.binary_search_by(|(k, _)| k.as_str().cmp(kind)) {
            Ok(at) => at,
            Err(at) => {
                self.0.insert(at, (kind.to_owned(), Sources::default()));
                at
            }
        };
        &mut self.0[at].1
    }

    /// Every kind, in order.
    fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(kind, _)| kind.as_str())
    }
}

/// A kind's one definition out of those listed for it: the first, unless one does not decode or
/// two disagree, when no one can tell which rules apply.
fn one_definition(listed: Vec<Definition>) -> Option<Result<Definition, RuleError>> {
    let mut first: Option<Definition> = None;
    for definition in listed {
        match &first {
            None => first = Some(definition),
            Some(first) if first.same_rules(&definition) => {}
            Some(first) => {
                return Some(Err(RuleError::Definition {
                    path: "spec.application.kind".into(),
                    reason: format!(
                        "ApplicationDefinition {} also defines kind {}",
                        first.name, definition.kind
                    ),
                    definition: definition.name,
                }));
            }
        }
    }
    first.map(Ok)
}

/// A kind's release prefix, the one statement of its sources' order: the definition's, else a
/// `releasePrefixes` entry, else the built-in row's (with rules), else the built-in prefix of a
/// kind examined without rules. A block the settings give a kind changes none of these: the
/// prefix names its releases whatever rules it has.
fn prefix_of(
    definition: Option<String>,
    sources: Option<&Sources>,
    builtin: Option<&'static str>,
) -> Option<String> {
    definition
        .or_else(|| sources.and_then(|s| s.prefix.clone()))
        .or_else(|| {
            sources
                .and_then(|s| s.defaults)
                .map(|d| d.release_prefix.to_owned())
        })
        .or_else(|| builtin.map(str::to_owned))
}

/// The rules of `kind` from its definition over what `sources` (if any) hold.
fn make_rules(
    kind: &str,
    definition: Option<Result<Definition, RuleError>>,
    sources: Option<&Sources>,
    builtin_prefix: Option<&'static str>,
) -> Result<Option<KindRules>, RuleError> {
    let (fields, prefix) = match definition.transpose()? {
        Some(definition) => (Some(definition.rule_fields()?), definition.release_prefix),
        None => (None, None),
    };
    let defaults = sources.and_then(|s| s.defaults);
    let settings = sources
        .and_then(|s| s.settings.as_ref())
        .map(KindBlock::fields)
        .transpose()?;
    // A block the settings state overrides the default one of this kind.
    let default_fields = defaults.map(|d| (d.fields)(d.index));
    let lower = match (settings, default_fields) {
        (Some(settings), Some(defaults)) => Some(settings.over(&defaults)),
        (settings, defaults) => defaults.or_else(|| settings.cloned()),
    };
    let prefix = prefix_of(prefix, sources, builtin_prefix);
    Ok(
        KindRules::merge(kind, fields.as_ref(), lower.as_ref()).map(|mut rules| {
            rules.release_prefix = prefix;
            rules
        }),
    )
}

impl DefinitionSet {
    /// Decoded `definitions` under the settings' blocks.
    pub fn build(definitions: Vec<Definition>, settings: &KindBlocks) -> Self {
        DefinitionSet::listed(Box::new(Decoded::new(definitions)), settings)
    }

    /// The definitions a cluster listed, decoded a kind at a time, under the settings' blocks.
    pub fn listed(listed: Box<dyn DefinitionList>, settings: &KindBlocks) -> Self {
        let mut kinds = StatedKinds::default();
        for (kind, block) in settings.iter() {
            kinds.entry(kind).settings = Some(block.clone());
        }
        DefinitionSet {
            listed_rules: (0..listed.kinds()).map(|_| OnceCell::new()).collect(),
            listed,
            kinds,
            prefixes_only: &[],
        }
    }

    /// `defaults` (the built-in rule set; none for `definitionSource: settings`), each kind's block
    /// overridden by the settings' block of that kind (a kind they lack is added by its block),
    /// and `releasePrefixes` over their prefixes. Nothing is made or decoded until a request asks
    /// for a kind.
    ///
    /// `listed` definitions stand over both, as with [`DefinitionSet::listed`]: the policy passes
    /// [`Unread`] (it reads no definition then); the pre-flight passes one to learn what reading
    /// it would change.
    pub fn with_defaults(
        listed: Box<dyn DefinitionList>,
        defaults: impl IntoIterator<Item = Defaults>,
        settings: &KindBlocks,
        prefixes: &BTreeMap<String, String>,
    ) -> Self {
        let mut set = DefinitionSet::listed(listed, settings);
        // Room for every default at once: a kind's sources are a few hundred bytes, and growing
        // the list one doubling at a time was most of what making the set cost.
        let defaults = defaults.into_iter();
        set.kinds.0.reserve(defaults.size_hint().0);
        for entry in defaults {
            set.kinds.entry(entry.kind).defaults = Some(entry);
        }
        // A kind's prefix names its releases whether or not it has rules (a module's name is
        // checked against every kind's release).
        for (kind, prefix) in prefixes {
            set.kinds.entry(kind).prefix = Some(prefix.clone());
        }
        set
    }

    /// Whether the listed definitions name `kind` (none are listed but under
    /// `definitionSource: applicationDefinitions`).
    pub fn is_listed(&self, kind: &str) -> bool {
        self.listed.find(kind).is_some()
    }

    /// The rules of `kind`; `Ok(None)` when no source states any.
    pub fn get(&self, kind: &str) -> Result<Option<&KindRules>, RuleError> {
        let listed = self.listed.find(kind);
        let definition = || listed.and_then(|index| one_definition(self.listed.definitions(index)));
        let builtin = self.builtin_prefix(kind);
        let rules = match (
            self.kinds.get(kind),
            listed.and_then(|i| self.listed_rules.get(i)),
        ) {
            (Some(sources), _) => sources
                .rules
                .get_or_init(|| make_rules(kind, definition(), Some(sources), builtin)),
            (None, Some(cell)) => {
                cell.get_or_init(|| make_rules(kind, definition(), None, builtin))
            }
            (None, None) => return Ok(None),
        };
        match rules {
            Ok(rules) => Ok(rules.as_ref()),
            Err(err) => Err(err.clone()),
        }
    }

    /// The release prefix of `kind`, whether or not it has rules: a kind without any still
    /// names its releases `<prefix><app>`. A kind with rules has it resolved with them (and
    /// cached); only a kind without any reads its definition for it.
    pub fn release_prefix(&self, kind: &str) -> Result<Option<String>, RuleError> {
        if let Some(rules) = self.get(kind)? {
            return Ok(rules.release_prefix.clone());
        }
        let definition = match self.listed.find(kind) {
            Some(index) => one_definition(self.listed.definitions(index)).transpose()?,
            None => None,
        };
        Ok(prefix_of(
            definition.and_then(|d| d.release_prefix),
            self.kinds.get(kind),
            self.builtin_prefix(kind),
        ))
    }

    /// The built-in prefix of a kind examined without rules, when this set names such kinds.
    fn builtin_prefix(&self, kind: &str) -> Option<&'static str> {
        let index = self.prefixes_only.binary_search_by(|(k, _)| (*k).cmp(kind));
        index.ok().map(|i| self.prefixes_only[i].1)
    }

    /// The same set, naming the releases of rule-less kinds no other source states a prefix
    /// for with `prefixes` (sorted by kind).
    pub fn with_prefixes_only(self, prefixes: &'static [(&'static str, &'static str)]) -> Self {
        DefinitionSet {
            prefixes_only: prefixes,
            ..self
        }
    }

    /// Every kind that provides (or consumes) `class`, and the kinds whose rules cannot be read
    /// (an invalid or ambiguous definition) with their errors: those might have matched, and the
    /// caller decides whether any of their instances is at stake. A kind whose only source is
    /// its default plays the part its default's classes say: its rules are made only if it does.
    pub fn kinds_where(&self, role: Role, class: &Class) -> Matching<'_> {
        // The listed kinds and those of the settings and defaults, both sorted: merged in order,
        // each once.
        let mut listed = (0..self.listed.kinds())
            .map(|index| self.listed.kind(index))
            .peekable();
        let mut stated = self.kinds.keys().peekable();
        let kinds = std::iter::from_fn(|| match (listed.peek(), stated.peek()) {
            (Some(a), Some(b)) if a == b => {
                stated.next();
                listed.next()
            }
            (Some(a), Some(b)) if a > b => stated.next(),
            (Some(_), _) => listed.next(),
            (None, _) => stated.next(),
        });
        let quoted = format!("\"{}\"", class.as_str());
        let mut matching = Matching::default();
        for kind in kinds {
            let sources = self.kinds.get(kind);
            if self.cannot_name(self.listed.find(kind), sources, role, class, &quoted) {
                continue;
            }
            match self.get(kind) {
                Ok(Some(rules)) if rules.plays(role, class) => matching.kinds.push(rules),
                Ok(_) => {}
                Err(err) => matching.unreadable.push((kind, err)),
            }
        }
        matching
    }

    /// Whether no source of a kind can give it `role` for `class` (`quoted`: `"<class>"`), so
    /// that it plays no part and its rules need not be made: a deletion, and an awaiting
    /// warning, ask this of every kind. Its capability comes from the first source that states
    /// one: its listed definitions (`listed`: their kind's number; each one's `spec.capability`
    /// text, which the scanner has checked), then its settings block, then its default. A text
    /// that holds neither `quoted` nor an escape names no class of that name, a default says
    /// which classes it plays, and a source that states no capability passes the question on.
    fn cannot_name(
        &self,
        listed: Option<usize>,
        sources: Option<&Sources>,
        role: Role,
        class: &Class,
        quoted: &str,
    ) -> bool {
        // With no definition listed, the question passes to the settings and the default.
        let mut passed_on = listed.is_none();
        if let Some(index) = listed {
            let texts = self.listed.capabilities(index);
            if texts.is_empty() {
                return false;
            }
            for text in texts {
                match text.map(str::trim) {
                    None | Some("null") => passed_on = true,
                    Some(text)
                        if text.starts_with('{')
                            && !text.contains('\\')
                            && !text.contains(quoted) => {}
                    Some(_) => return false,
                }
            }
        }
        if !passed_on {
            return true;
        }
        let Some(sources) = sources else {
            return true;
        };
        !sources
            .settings
            .as_ref()
            .is_some_and(|b| b.may_name(quoted))
            && !sources
                .defaults
                .is_some_and(|d| (d.classes)(d.index, role).contains(&class.as_str()))
    }
}

/// The answer of [`DefinitionSet::kinds_where`].
#[derive(Debug, Default)]
pub struct Matching<'a> {
    pub kinds: Vec<&'a KindRules>,
    pub unreadable: Vec<(&'a str, RuleError)>,
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::rc::Rc;

    use super::*;
    use crate::model::definition::{RawField, RuleField};

    /// A list that records the kinds it is asked to decode.
    struct Recording {
        inner: Decoded,
        decoded: Rc<RefCell<Vec<String>>>,
    }

    impl DefinitionList for Recording {
        fn kinds(&self) -> usize {
            self.inner.kinds()
        }
        fn kind(&self, index: usize) -> &str {
            self.inner.kind(index)
        }
        fn definitions(&self, index: usize) -> Vec<Definition> {
            let kind = self.inner.kind(index).to_owned();
            self.decoded.borrow_mut().push(kind);
            self.inner.definitions(index)
        }
        fn all(&self) -> Vec<Definition> {
            self.inner.all()
        }
        fn capabilities(&self, index: usize) -> Vec<Option<&str>> {
            self.inner.capabilities(index)
        }
    }

    fn definition(name: &str, kind: &str, capability: &str) -> Definition {
        Definition::new(name, kind).with(RuleField::Capability, RawField::new(capability))
    }

    fn listed() -> (DefinitionSet, Rc<RefCell<Vec<String>>>) {
        let decoded = Rc::default();
        let list = Recording {
            inner: Decoded::new(vec![
                definition("monitoring", "Monitoring", r#"{"provides":["monitoring"]}"#),
                definition("redis", "Redis", r#"{"consumes":["monitoring"]}"#),
                definition("redis-again", "Redis", r#"{"consumes":["other"]}"#),
                definition("etcd", "Etcd", r#"{"provides":"not a list"}"#),
                definition("ingress", "Ingress", r#"{"provides":"monitoring"}"#),
                definition(
                    "seaweedfs",
                    "SeaweedFS",
                    r#"{"provides":["m\u006fnitoring"]}"#,
                ),
                definition("bucket", "Bucket", r#"{"consumes":["ingress"]}"#),
                definition("kafka", "Kafka", "null"),
            ]),
            decoded: Rc::clone(&decoded),
        };
        (
            DefinitionSet::listed(Box::new(list), &KindBlocks::default()),
            decoded,
        )
    }

    #[test]
    fn a_kind_is_decoded_when_first_asked_for_and_only_then() {
        let (set, decoded) = listed();
        assert!(decoded.borrow().is_empty());
        let rules = set.get("Monitoring").unwrap().unwrap();
        assert_eq!(rules.capability.provides[0].as_str(), "monitoring");
        assert!(set.get("Monitoring").is_ok());
        assert_eq!(set.get("Postgres"), Ok(None));
        assert_eq!(*decoded.borrow(), ["Monitoring"]);
    }

    #[test]
    fn ambiguous_and_invalid_kinds_fail_alone() {
        let (set, _) = listed();
        assert_eq!(
            set.get("Redis").unwrap_err().to_string(),
            "ApplicationDefinition redis-again: spec.application.kind: ApplicationDefinition redis also defines kind Redis"
        );
        assert_eq!(
            set.get("Etcd").unwrap_err().to_string(),
            "ApplicationDefinition etcd: spec.capability.provides: invalid type: string \"not a list\", expected a sequence"
        );
    }

    #[test]
    fn the_kinds_of_a_class_are_those_whose_capability_may_name_it() {
        let (set, decoded) = listed();
        let class = Class::parse("monitoring").unwrap();
        let matching = set.kinds_where(Role::Provides, &class);
        let kinds: Vec<&str> = matching.kinds.iter().map(|r| r.kind.as_str()).collect();
        let unreadable: Vec<&str> = matching.unreadable.iter().map(|(k, _)| *k).collect();
        // Etcd's broken block and Bucket's name no "monitoring", Kafka states none and has no
        // other source: none plays a part, and none is made. Ingress's names it in a block
        // that does not decode, Redis's in one of two disagreeing definitions: either might
        // have provided it. SeaweedFS's escape is decoded to tell.
        assert_eq!(
            (kinds, unreadable),
            (vec!["Monitoring", "SeaweedFS"], vec!["Ingress", "Redis"])
        );
        assert_eq!(
            *decoded.borrow(),
            ["Ingress", "Monitoring", "Redis", "SeaweedFS"]
        );
    }

    #[test]
    fn a_settings_block_that_cannot_name_the_class_is_not_decoded() {
        // Two blocks that do not decode (`max` is no number): the one naming the class might
        // have provided it; the other plays no part, read as text only.
        let blocks: KindBlocks = serde_json::from_str(
            r#"{"Monitoring": {"capability": {"provides": ["monitoring"]}},
                "Kubernetes": {"capability": {"consumes": ["monitoring"]}},
                "Broken": {"cardinality": {"scope": "tenant", "max": "one"},
                           "capability": {"provides": ["monitoring"]}},
                "Elsewhere": {"cardinality": {"scope": "tenant", "max": "one"}}}"#,
        )
        .unwrap();
        let set = DefinitionSet::listed(Box::new(Unread), &blocks);
        let class = Class::parse("monitoring").unwrap();
        let matching = set.kinds_where(Role::Provides, &class);
        let kinds: Vec<&str> = matching.kinds.iter().map(|r| r.kind.as_str()).collect();
        let unreadable: Vec<&str> = matching.unreadable.iter().map(|(k, _)| *k).collect();
        assert_eq!((kinds, unreadable), (vec!["Monitoring"], vec!["Broken"]));
    }
}
