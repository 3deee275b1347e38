//! A fixture cluster: ordinary Kubernetes manifests, as `kubectl get -o yaml` prints them.

use std::collections::{BTreeMap, HashMap};
use std::io::BufRead;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use crate::error::Error;
use crate::selector::Selector;

/// An object's identity: apiVersion, kind, namespace (empty for a cluster-scoped object), name.
pub type ObjectKey = (String, String, String, String);

/// Object positions by [`ObjectKey`] (a dump may hold an object twice).
pub type ObjectIndex = std::collections::HashMap<ObjectKey, Vec<usize>>;

/// Hears how many bytes of a dump were read since it last heard.
pub type Seen<'a> = &'a dyn Fn(u64);

/// A reader that tells [`Seen`] what it read.
struct Counted<'a, R> {
    inner: R,
    seen: Seen<'a>,
}

impl<R: std::io::Read> std::io::Read for Counted<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        (self.seen)(n as u64);
        Ok(n)
    }
}

/// An object's identity from its apiVersion, kind, name and (for a namespaced one) namespace.
pub fn object_key(api_version: &str, kind: &str, name: &str, namespace: Option<&str>) -> ObjectKey {
    (
        api_version.to_owned(),
        kind.to_owned(),
        namespace.unwrap_or_default().to_owned(),
        name.to_owned(),
    )
}

/// An object's key in an [`ObjectIndex`].
pub fn index_key(object: &Value) -> ObjectKey {
    (
        str_at(object, &["apiVersion"]).to_owned(),
        str_at(object, &["kind"]).to_owned(),
        str_at(object, &["metadata", "namespace"]).to_owned(),
        str_at(object, &["metadata", "name"]).to_owned(),
    )
}

/// One object as the snapshot keeps it: its identity, and the object as JSON text. A tree of
/// `serde_json` maps takes about seven times its text (each map a B-tree node of eleven
/// slots), and a 40,000-tenant dump held as trees took 1.5 GiB; every answer is built from
/// the text when it is asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stored {
    key: ObjectKey,
    text: Box<str>,
}

impl Stored {
    fn new(object: &Value) -> Stored {
        Stored {
            key: index_key(object),
            // A `Value` always serialises (its map keys are strings).
            text: serde_json::to_string(object)
                .unwrap_or_default()
                .into_boxed_str(),
        }
    }

    /// An object read from a dump or a live list, kept as a reflector stores it
    /// ([`strip_store_fields`]), with its managed fields when `keep` asks for them.
    fn read(mut object: Value, keep: Keep<'_>) -> (Stored, Option<Box<str>>) {
        let managed = keep
            .filter(|keep| keep(&index_key(&object)))
            .and_then(|_| object.pointer("/metadata/managedFields"))
            .filter(|m| m.as_array().is_some_and(|a| !a.is_empty()))
            .map(|m| m.to_string().into_boxed_str());
        strip_store_fields(&mut object);
        (Stored::new(&object), managed)
    }

    /// The object again: the text is serde_json's own output of a `Value`, which reads back
    /// whole (`float_roundtrip` keeps every float exact).
    fn value(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or(Value::Null)
    }

    fn is(&self, api_version: &str, kind: &str) -> bool {
        self.key.0 == api_version && self.key.1 == kind
    }
}

/// Runs `read` over `items` on all cores, one contiguous run of items per core, keeping their
/// order; `None` if any item gives `None`.
fn on_all_cores<T: Sync>(
    items: &[T],
    read: impl Fn(&T) -> Option<Read> + Sync,
) -> Option<Vec<Read>> {
    if items.is_empty() {
        return Some(Vec::new());
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let runs: Vec<Option<Vec<Read>>> = std::thread::scope(|scope| {
        let read = &read;
        let handles: Vec<_> = items
            .chunks(items.len().div_ceil(cores))
            .map(|run| scope.spawn(move || run.iter().map(read).collect()))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().ok().flatten())
            .collect()
    });
    let mut stored = Vec::with_capacity(items.len());
    for run in runs {
        stored.extend(run?);
    }
    Some(stored)
}

/// Items parsed on all cores at a time while a dump is streamed: a few megabytes of text.
const BATCH: usize = 2048;

/// Which objects' managed fields a read keeps (`None`: none, and a List's are dropped as lines).
pub type Keep<'k> = Option<&'k (dyn Fn(&ObjectKey) -> bool + Sync)>;

/// An object read, with the managed fields kept of it.
type Read = (Stored, Option<Box<str>>);

/// What a read of a dump keeps: the managed fields of the objects `keep` names and, with
/// `kinds`, only the objects of those kinds (the others are passed over unparsed where the
/// layout lets a line tell an item's kind).
#[derive(Clone, Copy, Default)]
struct Reading<'k> {
    keep: Keep<'k>,
    kinds: Option<&'k [&'k str]>,
}

impl Reading<'_> {
    /// Whether an item whose top-level line `kind: <value>` was read is passed over: only a
    /// plain value, which is the kind as written; any other is parsed and filtered after.
    fn passes_over(&self, value: &str) -> bool {
        let value = value.trim_end();
        self.kinds.is_some_and(|kinds| {
            !value.is_empty()
                && value.bytes().all(|b| b.is_ascii_alphanumeric())
                && !kinds.contains(&value)
        })
    }

    /// Whether a JSON item is read: of a kind asked for, or one whose kind cannot be read
    /// without reading it (its error is then the read's).
    fn wants_json(&self, raw: &str) -> bool {
        #[derive(Deserialize)]
        struct Kinded<'t> {
            #[serde(borrow)]
            kind: Option<std::borrow::Cow<'t, str>>,
        }
        let Some(kinds) = self.kinds else {
            return true;
        };
        match serde_json::from_str::<Kinded>(raw) {
            Ok(Kinded { kind: Some(kind) }) => kinds.contains(&&*kind),
            Ok(Kinded { kind: None }) => false,
            Err(_) => true,
        }
    }

    /// The objects read that are of the kinds asked for.
    fn filter(&self, read: &mut Vec<Read>) {
        if let Some(kinds) = self.kinds {
            read.retain(|(stored, _)| kinds.contains(&stored.key.1.as_str()));
        }
    }
}

/// One item of a kubectl List, its lines taken out of the list's indentation: the object's, and
/// apart those of its `metadata.managedFields`, parsed only when `keep` asks for them.
#[derive(Default)]
struct ItemLines {
    object: String,
    managed: String,
}

fn yaml_item(item: &ItemLines, keep: Keep<'_>) -> Option<Read> {
    let (stored, kept) = Stored::read(serde_yaml::from_str(&item.object).ok()?, keep);
    if kept.is_some() || item.managed.is_empty() || !keep.is_some_and(|keep| keep(&stored.key)) {
        return Some((stored, kept));
    }
    // The lines as they stood under `metadata:`, read alone; lines that do not read alone make
    // the item one that does not, and the text is read whole.
    let fields: Value = serde_yaml::from_str(&format!("metadata:\n{}", item.managed)).ok()?;
    let kept = (fields.pointer("/metadata/managedFields"))
        .filter(|m| m.as_array().is_some_and(|a| !a.is_empty()))
        .map(|m| m.to_string().into_boxed_str());
    Some((stored, kept))
}

/// Where an item's lines stand with respect to `metadata.managedFields`, which the snapshot
/// drops ([`strip_store_fields`]): in kubectl's layout a third of a dump's text, set apart as
/// lines rather than parsed and thrown away (and parsed only for an object whose managed
/// fields a read keeps).
#[derive(Default)]
struct ManagedFields {
    in_metadata: bool,
    skipping: bool,
}

impl ManagedFields {
    /// Whether `line` of an item (out of the list's indentation) belongs to its managed fields:
    /// the key `  managedFields:` under the top-level `metadata:`, then every line indented
    /// deeper, or a sequence entry at the key's own indentation as kubectl writes it.
    fn skips(&mut self, line: &str) -> bool {
        if self.skipping {
            if line.starts_with("   ") || line.starts_with("  - ") || line.trim().is_empty() {
                return true;
            }
            self.skipping = false;
        }
        if !line.starts_with(' ') {
            self.in_metadata = line.trim_end() == "metadata:";
        } else if self.in_metadata && line.trim_end() == "  managedFields:" {
            self.skipping = true;
        }
        self.skipping
    }
}

/// `kubectl get -o yaml`'s one `List` document read item by item as the lines arrive:
/// serde_yaml keeps every event of a document before it builds a value, so a List of thousands
/// of objects would be held twice over (its events, then its values), and a file read whole is
/// held beside its objects. Each batch of items is parsed on all cores while the next is read.
/// kubectl lays a List out with each item starting `- ` at the margin and its lines indented by
/// two; any other layout, or an item that does not read alone (an alias of another item's
/// anchor), gives `None`, and the text is read whole.
fn list_items(mut reader: impl BufRead, reading: Reading<'_>) -> Result<Option<Vec<Read>>, String> {
    let keep = reading.keep;
    std::thread::scope(|scope| {
        let (mut skeleton, mut line) = (String::new(), String::new());
        let (mut stored, mut batch) = (Vec::new(), Vec::<ItemLines>::new());
        let mut parsing: Option<std::thread::ScopedJoinHandle<'_, Option<Vec<Read>>>> = None;
        // The batch being parsed, joined: `None` if an item did not read alone.
        let joined =
            |parsing: &mut Option<std::thread::ScopedJoinHandle<'_, Option<Vec<Read>>>>,
             stored: &mut Vec<Read>|
             -> Option<()> {
                if let Some(parsed) = parsing.take() {
                    stored.extend(parsed.join().ok()??);
                }
                Some(())
            };
        let mut in_items = false;
        let mut managed = ManagedFields::default();
        // The items the list holds, read or passed over; whether the one at hand is passed over.
        let (mut items, mut passing) = (0usize, false);
        loop {
            line.clear();
            if reader.read_line(&mut line).map_err(|e| e.to_string())? == 0 {
                break;
            }
            let bare = line.trim_end_matches(['\n', '\r']);
            let item_line = in_items && (bare.starts_with("  ") || bare.is_empty());
            if in_items && bare.starts_with("- ") {
                if batch.len() == BATCH {
                    if joined(&mut parsing, &mut stored).is_none() {
                        return Ok(None);
                    }
                    let full = std::mem::take(&mut batch);
                    parsing =
                        Some(scope.spawn(move || on_all_cores(&full, |i| yaml_item(i, keep))));
                }
                batch.push(ItemLines::default());
                (items, passing) = (items + 1, false);
            } else if !item_line {
                in_items = bare == "items:";
                skeleton.push_str(if in_items { "items: []\n" } else { &line });
                continue;
            }
            if passing {
                continue;
            }
            let text = line.get(2..).unwrap_or(line.trim_start_matches(' '));
            // A line at the item's margin is one of its top-level keys.
            if text
                .strip_prefix("kind: ")
                .is_some_and(|k| reading.passes_over(k))
            {
                batch.pop();
                passing = true;
                continue;
            }
            let Some(item) = batch.last_mut() else {
                return Ok(None);
            };
            match managed.skips(text) {
                true if keep.is_some() => item.managed.push_str(text),
                true => {}
                false => item.object.push_str(text),
            }
        }
        if joined(&mut parsing, &mut stored).is_none() {
            return Ok(None);
        }
        let Some(last) = on_all_cores(&batch, |i| yaml_item(i, keep)) else {
            return Ok(None);
        };
        stored.extend(last);
        let list: Option<Value> = serde_yaml::from_str(&skeleton).ok();
        let is_list = list.is_some_and(|l| l.get("kind").and_then(Value::as_str) == Some("List"));
        Ok((is_list && items > 0).then_some(stored))
    })
}

/// Whether a dump is JSON (`kubectl get -o json`): its first character that is not white space.
fn is_json(head: &[u8]) -> bool {
    head.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{')
}

/// A dump's objects from its whole text, in any layout: JSON documents, or YAML documents
/// (`List`s flattened).
fn whole(text: &str, reading: Reading<'_>) -> Result<Vec<Read>, String> {
    let keep = reading.keep;
    if is_json(text.as_bytes()) {
        return json_documents(text, reading);
    }
    let mut stored = Vec::new();
    for document in serde_yaml::Deserializer::from_str(text) {
        match Value::deserialize(document).map_err(|e| e.to_string())? {
            Value::Null => {}
            Value::Object(mut list) if list.get("kind").and_then(Value::as_str) == Some("List") => {
                if let Some(Value::Array(items)) = list.remove("items") {
                    stored.extend(items.into_iter().map(|item| Stored::read(item, keep)));
                }
            }
            object => stored.push(Stored::read(object, keep)),
        }
    }
    Ok(stored)
}

/// `kubectl get -o json`'s documents, each `List` read item by item from the text (the items
/// borrowed as raw JSON): only one item at a time is ever a tree.
fn json_documents(text: &str, reading: Reading<'_>) -> Result<Vec<Read>, String> {
    let keep = reading.keep;
    #[derive(serde::Deserialize)]
    struct Document<'t> {
        #[serde(borrow)]
        kind: Option<std::borrow::Cow<'t, str>>,
        #[serde(borrow)]
        items: Option<Vec<&'t serde_json::value::RawValue>>,
    }
    let read = |raw: &str| -> Result<Read, String> {
        serde_json::from_str(raw)
            .map(|object| Stored::read(object, keep))
            .map_err(|e| e.to_string())
    };
    let mut stored = Vec::new();
    for document in
        serde_json::Deserializer::from_str(text).into_iter::<&serde_json::value::RawValue>()
    {
        let document = document.map_err(|e| e.to_string())?;
        let list = serde_json::from_str::<Document>(document.get())
            .ok()
            .filter(|d| d.kind.as_deref() == Some("List"));
        match list {
            Some(Document {
                items: Some(mut items),
                ..
            }) => {
                items.retain(|raw| reading.wants_json(raw.get()));
                match on_all_cores(&items, |raw| read(raw.get()).ok()) {
                    Some(items) => stored.extend(items),
                    // Read one by one for the first item's error.
                    None => {
                        for raw in items {
                            stored.push(read(raw.get())?);
                        }
                    }
                }
            }
            Some(Document { items: None, .. }) => {}
            None if document.get() == "null" => {}
            None => stored.push(read(document.get())?),
        }
    }
    Ok(stored)
}

/// A snapshot of a cluster's objects, in the order they were read or added.
#[derive(Debug, Clone, Default)]
pub struct ClusterObjects {
    stored: Vec<Stored>,
    /// The managed fields kept (JSON text), by object: what the API server's field manager
    /// merges a server-side apply with, never shown to the policy.
    managed: HashMap<ObjectKey, Box<str>>,
}

impl FromIterator<Value> for ClusterObjects {
    fn from_iter<I: IntoIterator<Item = Value>>(objects: I) -> ClusterObjects {
        ClusterObjects {
            stored: objects.into_iter().map(|o| Stored::new(&o)).collect(),
            managed: HashMap::new(),
        }
    }
}

impl Extend<Value> for ClusterObjects {
    fn extend<I: IntoIterator<Item = Value>>(&mut self, objects: I) {
        self.stored
            .extend(objects.into_iter().map(|o| Stored::new(&o)));
    }
}

fn str_at<'v>(object: &'v Value, path: &[&str]) -> &'v str {
    path.iter()
        .try_fold(object, |v, k| v.get(k))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// Whether a list in `namespace` (all namespaces with `None`) and with `selector` holds
/// `object`, of the listed resource: what the API server and a reflector's watch both decide.
pub fn listed_by(object: &Value, namespace: Option<&str>, selector: &Selector) -> bool {
    let labels = object["metadata"]["labels"].as_object();
    namespace.is_none_or(|ns| str_at(object, &["metadata", "namespace"]) == ns)
        && selector.matches_by(|key| {
            labels
                .and_then(|m| m.get(key))
                .map(|v| v.as_str().unwrap_or_default())
        })
}

pub fn labels_of(object: &Value) -> BTreeMap<String, String> {
    object
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                .collect()
        })
        .unwrap_or_default()
}

/// kubectl's client-side apply annotation, which a reflector drops.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// What a reflector drops from every object it stores (what the policy-server's watches keep
/// of a cluster): the managed fields and kubectl's last-applied annotation, which no host call
/// ever answers with.
pub fn strip_store_fields(object: &mut Value) {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
        if let Some(annotations) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
            annotations.remove(LAST_APPLIED);
        }
    }
}

impl ClusterObjects {
    /// Parses multi-document YAML; `kind: List` documents are flattened into their items.
    /// Objects are kept as a reflector stores them ([`strip_store_fields`]).
    pub fn from_yaml(text: &str) -> Result<ClusterObjects, Error> {
        Self::from_yaml_keeping(text, None)
    }

    /// The same, keeping the managed fields of the objects `keep` names.
    pub fn from_yaml_keeping(text: &str, keep: Keep<'_>) -> Result<ClusterObjects, Error> {
        // `kubectl get -o json` (JSON is YAML) read by the JSON parser: a third of the time,
        // and no event buffer of the whole document in memory.
        let reading = Reading { keep, kinds: None };
        let listed = match is_json(text.as_bytes()) {
            true => None,
            false => list_items(text.as_bytes(), reading).map_err(Error::Objects)?,
        };
        let read = match listed {
            Some(read) => read,
            None => whole(text, reading).map_err(Error::Objects)?,
        };
        Ok(ClusterObjects::of(read))
    }

    fn of(read: Vec<Read>) -> ClusterObjects {
        let mut cluster = ClusterObjects::default();
        cluster.add_read(read);
        cluster
    }

    fn add_read(&mut self, read: Vec<Read>) {
        for (stored, managed) in read {
            if let Some(managed) = managed {
                self.managed.insert(stored.key.clone(), managed);
            }
            self.stored.push(stored);
        }
    }

    fn append(&mut self, other: ClusterObjects) {
        self.stored.extend(other.stored);
        self.managed.extend(other.managed);
    }

    /// Keeps `object`'s managed fields beside the snapshot.
    pub fn keep_managed_fields(&mut self, object: &Value) {
        if let Some(managed) = object
            .pointer("/metadata/managedFields")
            .filter(|m| m.as_array().is_some_and(|a| !a.is_empty()))
        {
            self.managed
                .insert(index_key(object), managed.to_string().into_boxed_str());
        }
    }

    /// The managed fields kept of an object (`metadata.managedFields`).
    pub fn managed_fields(&self, key: &ObjectKey) -> Option<Value> {
        self.managed
            .get(key)
            .and_then(|text| serde_json::from_str(text).ok())
    }

    /// `object` as the API server serves it: with the managed fields kept beside the snapshot,
    /// unless it still carries its own.
    pub fn with_managed_fields(&self, mut object: Value) -> Value {
        if object.pointer("/metadata/managedFields").is_none()
            && let Some(managed) = self.managed_fields(&index_key(&object))
            && let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut)
        {
            meta.insert("managedFields".into(), managed);
        }
        object
    }

    /// Reads one dump file: a kubectl List streamed line by line, anything else read whole.
    fn read_file(
        path: &Path,
        reading: Reading<'_>,
        seen: Seen<'_>,
    ) -> Result<ClusterObjects, Error> {
        let unread = |source| Error::Read {
            path: path.to_owned(),
            source,
        };
        let unparsed = |reason| Error::Dump {
            path: path.to_owned(),
            reason,
        };
        // What `seen` heard already (the first buffer, or a List read that gave up), which a
        // whole read reads again: the bar counts each byte of the file once.
        let told = std::cell::Cell::new(0u64);
        let tell = |n: u64| {
            told.set(told.get() + n);
            seen(n)
        };
        let file = std::fs::File::open(path).map_err(unread)?;
        let file = Counted {
            inner: file,
            seen: &tell,
        };
        let mut reader = std::io::BufReader::with_capacity(1 << 20, file);
        let json = is_json(reader.fill_buf().map_err(unread)?);
        let listed = match json {
            true => None,
            false => list_items(reader, reading).map_err(unparsed)?,
        };
        let mut read = match listed {
            Some(read) => read,
            None => {
                let text = std::fs::read_to_string(path).map_err(unread)?;
                seen((text.len() as u64).saturating_sub(told.get()));
                whole(&text, reading).map_err(unparsed)?
            }
        };
        reading.filter(&mut read);
        Ok(ClusterObjects::of(read))
    }

    /// Loads every dump file of a directory ([`crate::dump_files`]), in name order.
    pub fn load_dir(dir: &Path) -> Result<ClusterObjects, Error> {
        Self::load_dir_reading(dir, Reading::default(), &|_| {})
    }

    fn load_dir_reading(
        dir: &Path,
        reading: Reading<'_>,
        seen: Seen<'_>,
    ) -> Result<ClusterObjects, Error> {
        let mut cluster = ClusterObjects::default();
        let paths = crate::dump_files(dir)?;
        // settings.yaml beside the manifests is the bundle's settings, not a manifest.
        for path in paths
            .iter()
            .filter(|p| p.file_name().is_some_and(|n| n != "settings.yaml"))
        {
            cluster.append(Self::read_file(path, reading, seen)?);
        }
        Ok(cluster)
    }

    /// A dump: `kubectl get … -o yaml` output (a `List`, or several documents), a file or a
    /// folder of such files.
    pub fn read_dump(paths: &[std::path::PathBuf]) -> Result<ClusterObjects, Error> {
        Self::read_dump_keeping(paths, None)
    }

    /// The same, keeping the managed fields of the objects `keep` names.
    pub fn read_dump_keeping(
        paths: &[std::path::PathBuf],
        keep: Keep<'_>,
    ) -> Result<ClusterObjects, Error> {
        Self::read_dump_seen(paths, keep, &|_| {})
    }

    /// The same, telling `seen` how many bytes of the files each read took (for a progress
    /// bar over a dump of hundreds of megabytes).
    pub fn read_dump_seen(
        paths: &[std::path::PathBuf],
        keep: Keep<'_>,
        seen: Seen<'_>,
    ) -> Result<ClusterObjects, Error> {
        Self::read_paths(paths, Reading { keep, kinds: None }, seen)
    }

    /// The objects of `kinds` a dump holds, the others passed over unparsed where the layout
    /// tells their kind by a line (a kubectl List): what a few Flux objects are looked up in.
    pub fn read_dump_of_kinds(
        paths: &[std::path::PathBuf],
        kinds: &[&str],
    ) -> Result<ClusterObjects, Error> {
        let reading = Reading {
            keep: None,
            kinds: Some(kinds),
        };
        Self::read_paths(paths, reading, &|_| {})
    }

    fn read_paths(
        paths: &[std::path::PathBuf],
        reading: Reading<'_>,
        seen: Seen<'_>,
    ) -> Result<ClusterObjects, Error> {
        let mut cluster = ClusterObjects::default();
        for path in paths {
            let part = match path.is_dir() {
                true => Self::load_dir_reading(path, reading, seen)?,
                false => Self::read_file(path, reading, seen)?,
            };
            cluster.append(part);
        }
        Ok(cluster)
    }

    pub fn len(&self) -> usize {
        self.stored.len()
    }

    pub fn is_empty(&self) -> bool {
        self.stored.is_empty()
    }

    /// Adds an object as it is (not stripped).
    pub fn push(&mut self, object: Value) {
        self.stored.push(Stored::new(&object));
    }

    /// Every object, read from its text one at a time.
    pub fn values(&self) -> impl Iterator<Item = Value> + '_ {
        self.stored.iter().map(Stored::value)
    }

    /// The object at a position (of [`ClusterObjects::index`]).
    pub fn value(&self, at: usize) -> Option<Value> {
        self.stored.get(at).map(Stored::value)
    }

    /// The identity and JSON text of the object at a position, unread: what a replay hands
    /// over as it is ([`crate::audit::Replay::of_text`]).
    pub fn entry(&self, at: usize) -> Option<(&ObjectKey, &str)> {
        self.stored.get(at).map(|s| (&s.key, &*s.text))
    }

    /// The objects of one kind, read from their text; the others are not read (a dump of
    /// 120,000 objects holds a dozen ApplicationDefinitions).
    pub fn of_kind<'c>(&'c self, kind: &'c str) -> impl Iterator<Item = Value> + 'c {
        (self.stored.iter())
            .filter(move |s| s.key.1 == kind)
            .map(Stored::value)
    }

    /// Every object's identity, in order: what filtering by kind or namespace needs, without
    /// reading an object.
    pub fn keys(&self) -> impl Iterator<Item = &ObjectKey> + '_ {
        self.stored.iter().map(|s| &s.key)
    }

    /// Replaces the object at a position.
    pub fn set(&mut self, at: usize, object: &Value) {
        if let Some(stored) = self.stored.get_mut(at) {
            *stored = Stored::new(object);
        }
    }

    /// Removes the object at a position, the last one taking its place.
    pub fn swap_remove(&mut self, at: usize) {
        if at < self.stored.len() {
            self.stored.swap_remove(at);
        }
    }

    /// The identity of the object at a position.
    pub fn key(&self, at: usize) -> Option<&ObjectKey> {
        self.stored.get(at).map(|s| &s.key)
    }

    /// Keeps the objects whose identity `keep` accepts.
    pub fn retain(&mut self, mut keep: impl FnMut(&ObjectKey) -> bool) {
        self.stored.retain(|s| keep(&s.key));
    }

    pub fn get(
        &self,
        api_version: &str,
        kind: &str,
        name: &str,
        namespace: Option<&str>,
    ) -> Option<Value> {
        let key = (api_version, kind, namespace.unwrap_or_default(), name);
        self.stored
            .iter()
            .find(|s| {
                let k = &s.key;
                (k.0.as_str(), k.1.as_str(), k.2.as_str(), k.3.as_str()) == key
            })
            .map(Stored::value)
    }

    /// `get` through an index of the objects by identity (build it with
    /// [`ClusterObjects::index`]): a dump of thousands of objects is looked up thousands of
    /// times, and thousands of tenants hold a release of the same name. Without a namespace,
    /// only a cluster-scoped object is found, as the API server answers.
    pub fn get_indexed(
        &self,
        index: &ObjectIndex,
        api_version: &str,
        kind: &str,
        name: &str,
        namespace: Option<&str>,
    ) -> Option<Value> {
        self.get_keyed(index, &object_key(api_version, kind, name, namespace))
    }

    /// [`ClusterObjects::get_indexed`] by identity.
    pub fn get_keyed(&self, index: &ObjectIndex, key: &ObjectKey) -> Option<Value> {
        index.get(key)?.first().and_then(|&at| self.value(at))
    }

    /// The positions of the objects by identity.
    pub fn index(&self) -> ObjectIndex {
        let mut index = ObjectIndex::new();
        for (at, s) in self.stored.iter().enumerate() {
            index.entry(s.key.clone()).or_default().push(at);
        }
        index
    }

    /// The objects a list answers, read one at a time: a caller that keeps part of each (a
    /// list's field masks) never holds every whole object of a kind at once.
    pub fn list<'c>(
        &'c self,
        api_version: &'c str,
        kind: &'c str,
        namespace: Option<&'c str>,
        selector: &'c Selector,
    ) -> impl Iterator<Item = Value> + 'c {
        self.stored
            .iter()
            .filter(move |s| s.is(api_version, kind) && namespace.is_none_or(|ns| s.key.2 == ns))
            .map(Stored::value)
            .filter(move |o| listed_by(o, namespace, selector))
    }

    /// The labels and the size as a reflector keeps it (its text, less the managed fields a
    /// reflector drops) of each object of one kind that `selector` lists, the rest of the
    /// object not read: what sizing a reflector needs.
    pub fn sized<'c>(
        &'c self,
        api_version: &'c str,
        kind: &'c str,
        selector: &'c Selector,
    ) -> impl Iterator<Item = (BTreeMap<String, String>, usize)> + 'c {
        #[derive(Deserialize, Default)]
        struct Labelled<'t> {
            #[serde(default, borrow)]
            metadata: Labels<'t>,
        }
        #[derive(Deserialize, Default)]
        struct Labels<'t> {
            #[serde(default)]
            labels: BTreeMap<String, String>,
            #[serde(default, borrow, rename = "managedFields")]
            managed_fields: Option<&'t serde_json::value::RawValue>,
        }
        (self.stored.iter())
            .filter(move |s| s.is(api_version, kind))
            .map(|s| {
                let labelled: Labelled = serde_json::from_str(&s.text).unwrap_or_default();
                let Labels {
                    labels,
                    managed_fields,
                } = labelled.metadata;
                // The compact text's `,"managedFields":<value>` goes with them.
                let dropped =
                    managed_fields.map_or(0, |m| m.get().len() + r#","managedFields":"#.len());
                (labels, s.text.len().saturating_sub(dropped))
            })
            .filter(move |(labels, _)| selector.matches(labels))
    }

    /// Replaces an object with the same apiVersion, kind, namespace and name, or adds it.
    pub fn apply(&mut self, object: Value) {
        let stored = Stored::new(&object);
        self.stored.retain(|s| s.key != stored.key);
        self.stored.push(stored);
    }

    /// Does an object's identity answer to `Kind/name` or `Kind/namespace/name`?
    fn matcher(reference: &str) -> Result<impl Fn(&ObjectKey) -> bool + '_, Error> {
        let parts: Vec<&str> = reference.split('/').collect();
        let (kind, namespace, name) = match parts.as_slice() {
            [kind, name] => (*kind, None, *name),
            [kind, namespace, name] => (*kind, Some(*namespace), *name),
            _ => {
                return Err(Error::Reference(reference.to_owned()));
            }
        };
        Ok(move |key: &ObjectKey| {
            key.1 == kind && key.3 == name && namespace.is_none_or(|ns| key.2 == ns)
        })
    }

    /// The object named `Kind/name` or `Kind/namespace/name`.
    pub fn find(&self, reference: &str) -> Result<Value, Error> {
        let is = Self::matcher(reference)?;
        self.stored
            .iter()
            .find(|s| is(&s.key))
            .map(Stored::value)
            .ok_or_else(|| Error::NoObject(reference.to_owned()))
    }

    /// Removes objects by `Kind/name` or `Kind/namespace/name`.
    pub fn remove(&mut self, reference: &str) -> Result<(), Error> {
        let is = Self::matcher(reference).map_err(|e| Error::Remove(Box::new(e)))?;
        let before = self.stored.len();
        self.stored.retain(|s| !is(&s.key));
        if self.stored.len() == before {
            return Err(Error::Remove(Box::new(Error::NoObject(
                reference.to_owned(),
            ))));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bar over a dump counts each byte of each file once, however it is read: a List item
    /// by item, a JSON file or several documents read whole after the first buffer, or a List
    /// read that gave up and read the file again.
    #[test]
    fn what_seen_hears_adds_up_to_the_files() {
        let dir = std::env::temp_dir().join(format!("cozystack-seen-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let files = [
            ("list.yaml", LIST.to_owned()),
            // Over the reader's 1 MiB buffer: read as a List first, then whole.
            (
                "documents.yaml",
                (0..24_000)
                    .map(|i| format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: ns-{i}}}\n"))
                    .collect::<Vec<_>>()
                    .join("---\n"),
            ),
            ("dump.json", r#"{"apiVersion": "v1", "kind": "List", "items": [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "c"}}]}"#.to_owned()),
        ];
        for (name, text) in &files {
            let path = dir.join(name);
            std::fs::write(&path, text).unwrap();
            let heard = std::cell::Cell::new(0u64);
            let seen = |n: u64| heard.set(heard.get() + n);
            let read = ClusterObjects::read_dump_seen(&[path], None, &seen).unwrap();
            assert!(!read.is_empty(), "{name}");
            assert_eq!(heard.get(), text.len() as u64, "{name}");
        }
        // A folder of them: `*.json` and `*.yml` are dump files too.
        std::fs::rename(dir.join("documents.yaml"), dir.join("documents.yml")).unwrap();
        let all = ClusterObjects::read_dump(std::slice::from_ref(&dir)).unwrap();
        assert_eq!(all.len(), 2 + 24_000 + 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// What serde_yaml reads from the whole text: the reference the item-by-item read must equal.
    fn reference(text: &str) -> Vec<Value> {
        let mut list: Value = serde_yaml::from_str(text).expect("one document");
        let mut items = list["items"].take().as_array().cloned().unwrap_or_default();
        items.iter_mut().for_each(strip_store_fields);
        items
    }

    const LIST: &str = "apiVersion: v1
items:
- apiVersion: v1
  kind: Namespace
  metadata:
    annotations:
      kubectl.kubernetes.io/last-applied-configuration: '{\"kind\":\"Namespace\"}'
    labels:
      namespace.cozystack.io/host: \"1.0\"
    name: tenant-a
    managedFields:
    - manager: kubectl
- apiVersion: helm.toolkit.fluxcd.io/v2
  kind: HelmRelease
  metadata:
    managedFields:
    - apiVersion: helm.toolkit.fluxcd.io/v2
      fieldsV1:
        f:spec:
          f:values: {}

      manager: helm-controller
    - manager: kubectl
    name: postgres-db
    namespace: tenant-a
  spec:
    managedFields:
      kept: true
    values:
      replicas: 2
      enabled: true
      script: |
        line one

        line three
      list:
      - a
      - b
kind: List
metadata:
  resourceVersion: \"\"
";

    #[test]
    fn a_kubectl_list_is_read_item_by_item_as_it_reads_whole() {
        let items: Vec<Value> = list_items(LIST.as_bytes(), Reading::default())
            .expect("read")
            .expect("kubectl's layout")
            .iter()
            .map(|(stored, managed)| {
                assert!(managed.is_none());
                stored.value()
            })
            .collect();
        assert_eq!(items, reference(LIST));
        assert_eq!(items.len(), 2);
        assert_eq!(
            items[1]["spec"]["values"]["script"],
            "line one\n\nline three\n"
        );
        assert!(items[0]["metadata"].get("managedFields").is_none());
        // Only metadata's managed fields are dropped; a key of that name elsewhere is data.
        assert_eq!(items[1]["metadata"]["name"], "postgres-db");
        assert_eq!(items[1]["spec"]["managedFields"]["kept"], true);
        assert_eq!(
            ClusterObjects::from_yaml(LIST)
                .expect("read")
                .values()
                .collect::<Vec<_>>(),
            items
        );
    }

    /// A dump of every layout `read_dump_of_kinds` reads: kubectl's List, its JSON, and
    /// documents; with a kind written quoted, which no line tells, and one with no kind.
    #[test]
    fn a_read_of_some_kinds_holds_those_objects_of_every_layout() {
        let quoted = "- apiVersion: v1\n  kind: \"ConfigMap\"\n  metadata:\n    name: quoted\n    namespace: a\n";
        let no_kind = "- apiVersion: v1\n  metadata:\n    name: nothing\n";
        let list = LIST
            .replacen("kind: List", &format!("{quoted}{no_kind}kind: List"), 1)
            .replacen("items:\n", &format!("items:\n{}", LIST_CONFIGMAP), 1);
        let dir = std::env::temp_dir().join(format!("kinds-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let all = ClusterObjects::from_yaml(&list).expect("read");
        let json = serde_json::json!({"apiVersion": "v1", "kind": "List",
            "items": all.values().collect::<Vec<_>>()});
        let documents: String = all
            .values()
            .map(|o| format!("---\n{}", serde_yaml::to_string(&o).expect("yaml")))
            .collect();
        for (name, text) in [
            ("list.yaml", list.clone()),
            ("list.json", json.to_string()),
            ("documents.yaml", documents),
        ] {
            let path = dir.join(name);
            std::fs::write(&path, text).expect("write");
            let names = |kinds: &[&str]| -> Vec<String> {
                let read = ClusterObjects::read_dump_of_kinds(std::slice::from_ref(&path), kinds);
                read.expect("read").keys().map(|k| k.3.clone()).collect()
            };
            assert_eq!(names(&["ConfigMap"]), ["vars", "quoted"], "{name}");
            assert_eq!(
                names(&["HelmRelease", "Namespace"]),
                ["tenant-a", "postgres-db"],
                "{name}"
            );
            // None asked for is found: an empty snapshot, not the whole dump.
            assert!(names(&["Kustomization"]).is_empty(), "{name}");
            assert_eq!(
                ClusterObjects::read_dump_of_kinds(std::slice::from_ref(&path), &["ConfigMap"])
                    .expect("read")
                    .values()
                    .collect::<Vec<_>>(),
                all.values()
                    .filter(|o| o["kind"] == "ConfigMap")
                    .collect::<Vec<_>>(),
                "{name}"
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    const LIST_CONFIGMAP: &str = "- apiVersion: v1
  data:
    kind: not the object's
  kind: ConfigMap
  metadata:
    name: vars
    namespace: a
";

    #[test]
    fn another_layout_is_read_whole() {
        // The items indented under `items:`, as other YAML writers lay a sequence out.
        let (head, rest) = LIST.split_once("items:\n").expect("items");
        let (block, tail) = rest.split_once("kind: List").expect("kind");
        let block: String = block.lines().map(|l| format!("  {l}\n")).collect();
        let indented = format!("{head}items:\n{block}kind: List{tail}");
        let aliased = "apiVersion: v1\nitems:\n- &a\n  kind: Namespace\n  metadata:\n    name: a\n- *a\nkind: List\n";
        let two_documents =
            format!("{LIST}---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: b\n");
        for text in [
            indented.as_str(),
            aliased,
            two_documents.as_str(),
            "items: []\nkind: List\n",
        ] {
            assert!(
                list_items(text.as_bytes(), Reading::default()) == Ok(None),
                "{text}"
            );
        }
        // Read whole, the same objects come out.
        assert_eq!(
            ClusterObjects::from_yaml(&indented)
                .expect("read")
                .values()
                .collect::<Vec<_>>(),
            reference(LIST)
        );
        assert_eq!(ClusterObjects::from_yaml(aliased).expect("read").len(), 2);
        assert_eq!(
            ClusterObjects::from_yaml(&two_documents)
                .expect("read")
                .len(),
            3
        );
    }

    #[test]
    fn managed_fields_are_kept_beside_the_snapshot_of_the_objects_asked_for() {
        let dir = std::env::temp_dir().join(format!("managed-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let keep = |key: &ObjectKey| key.3 == "postgres-db";
        for (name, text) in [
            ("list.yaml", LIST.to_owned()),
            (
                "list.json",
                serde_json::to_string(&serde_yaml::from_str::<Value>(LIST).expect("yaml"))
                    .expect("json"),
            ),
        ] {
            let path = dir.join(name);
            std::fs::write(&path, text).expect("write");
            let cluster =
                ClusterObjects::read_dump_keeping(std::slice::from_ref(&path), Some(&keep))
                    .expect("read");
            let postgres = cluster
                .find("HelmRelease/tenant-a/postgres-db")
                .expect("postgres");
            assert!(
                postgres["metadata"].get("managedFields").is_none(),
                "{name}"
            );
            let key = index_key(&postgres);
            let managed = cluster.managed_fields(&key).expect("kept");
            assert_eq!(managed[0]["manager"], "helm-controller", "{name}");
            assert_eq!(managed[1]["manager"], "kubectl", "{name}");
            let namespace = cluster.find("Namespace/tenant-a").expect("namespace");
            assert_eq!(
                cluster.managed_fields(&index_key(&namespace)),
                None,
                "{name}"
            );
            // Not asked: none kept.
            let plain = ClusterObjects::read_dump(&[path]).expect("read");
            assert_eq!(plain.managed_fields(&key), None, "{name}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_list_longer_than_a_batch_keeps_its_order() {
        let count = 2 * BATCH + 1;
        let mut text = String::from("apiVersion: v1\nitems:\n");
        for i in 0..count {
            text.push_str(&format!(
                "- apiVersion: v1\n  kind: Namespace\n  metadata:\n    name: tenant-t{i}\n"
            ));
        }
        text.push_str("kind: List\nmetadata:\n  resourceVersion: \"\"\n");
        let stored = list_items(text.as_bytes(), Reading::default())
            .expect("read")
            .expect("layout");
        let names: Vec<&str> = stored.iter().map(|(s, _)| s.key.3.as_str()).collect();
        let expected: Vec<String> = (0..count).map(|i| format!("tenant-t{i}")).collect();
        assert_eq!(names, expected);
    }

    #[test]
    fn a_json_dump_reads_as_the_yaml_one_item_by_item() {
        let list = reference(LIST);
        let json = serde_json::to_string(&serde_json::json!({
            "apiVersion": "v1", "kind": "List", "metadata": {}, "items": serde_yaml::from_str::<Value>(LIST).expect("yaml")["items"]
        }))
        .expect("json");
        let read = |text: &str| -> Vec<Value> {
            ClusterObjects::from_yaml(text)
                .expect("read")
                .values()
                .collect()
        };
        assert_eq!(read(&json), list);
        // Several documents: a List, a lone object, `null`; an empty List adds nothing.
        let lone =
            r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"b","managedFields":[]}}"#;
        let empty = r#"{"apiVersion":"v1","kind":"List","items":[]}"#;
        let stream = format!("{json}\n{lone}\nnull\n{empty}\n");
        let objects = read(&stream);
        assert_eq!(objects.len(), 3);
        assert_eq!(
            objects[2],
            serde_json::json!({"apiVersion":"v1","kind":"Namespace","metadata":{"name":"b"}})
        );
        let broken = format!("{json}\n{{\"kind\": ");
        assert!(ClusterObjects::from_yaml(&broken).is_err());
    }

    #[test]
    fn an_object_reads_back_as_it_was_stored() {
        // Floats that serde_json without `float_roundtrip` reads one unit off.
        let object = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "namespace": "tenant-a", "labels": {"x": "1"}},
            "data": {"f": [1.33, 1.0715660391465826e-75, -1.81996730402717e-179, 9007199254740993u64],
                "s": "line\n\"quoted\" \u{e9}"}});
        let mut cluster: ClusterObjects = [object.clone()].into_iter().collect();
        assert_eq!(cluster.value(0), Some(object.clone()));
        assert_eq!(
            cluster.get("v1", "ConfigMap", "a", Some("tenant-a")),
            Some(object.clone())
        );
        assert_eq!(cluster.get("v1", "ConfigMap", "a", None), None);
        let selector = Selector::parse("x=1").expect("selector");
        assert_eq!(
            cluster
                .list("v1", "ConfigMap", Some("tenant-a"), &selector)
                .collect::<Vec<_>>(),
            vec![object.clone()]
        );
        assert!(
            cluster
                .list("v1", "ConfigMap", Some("tenant-b"), &selector)
                .next()
                .is_none()
        );
        let index = cluster.index();
        assert_eq!(
            cluster.get_indexed(&index, "v1", "ConfigMap", "a", Some("tenant-a")),
            Some(object.clone())
        );
        let mut changed = object;
        changed["data"]["s"] = "other".into();
        cluster.apply(changed.clone());
        assert_eq!(
            (cluster.len(), cluster.find("ConfigMap/tenant-a/a").ok()),
            (1, Some(changed))
        );
        cluster.remove("ConfigMap/a").expect("removed");
        assert!(cluster.is_empty());
    }
}
