//! A fixture cluster: ordinary Kubernetes manifests, as `kubectl get -o yaml` prints them.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use crate::selector::Selector;

/// An object's identity: apiVersion, kind, namespace (empty for a cluster-scoped object), name.
pub type ObjectKey = (String, String, String, String);

/// Object positions by [`ObjectKey`] (a dump may hold an object twice).
pub type ObjectIndex = std::collections::HashMap<ObjectKey, Vec<usize>>;

/// An object's key in an [`ObjectIndex`].
pub fn index_key(object: &Value) -> ObjectKey {
    (
        str_at(object, &["apiVersion"]).to_owned(),
        str_at(object, &["kind"]).to_owned(),
        str_at(object, &["metadata", "namespace"]).to_owned(),
        str_at(object, &["metadata", "name"]).to_owned(),
    )
}

/// `kubectl get -o yaml`'s one `List` document read item by item: serde_yaml keeps every event
/// of a document before it builds a value, so a List of thousands of objects would be held
/// twice over (its events, then its values). kubectl lays a List out with each item starting
/// `- ` at the margin and its lines indented by two; any other layout, or an item that does not
/// read alone (an alias of another item's anchor), gives `None`, and the text is read whole.
fn list_items(text: &str) -> Option<Vec<Value>> {
    let mut skeleton = String::new();
    let mut items: Vec<(usize, usize)> = Vec::new();
    let (mut in_items, mut offset) = (false, 0);
    for line in text.split_inclusive('\n') {
        let start = offset;
        offset += line.len();
        let bare = line.trim_end_matches(['\n', '\r']);
        if in_items && bare.starts_with("- ") {
            items.push((start, offset));
        } else if in_items && (bare.starts_with("  ") || bare.is_empty()) {
            items.last_mut()?.1 = offset;
        } else {
            in_items = bare == "items:";
            skeleton.push_str(if in_items { "items: []\n" } else { line });
        }
    }
    let list: Value = serde_yaml::from_str(&skeleton).ok()?;
    if list.get("kind").and_then(Value::as_str) != Some("List") || items.is_empty() {
        return None;
    }
    // Items read alone, so the cores share them: one contiguous run of items per core.
    let read = |items: &[(usize, usize)]| -> Option<Vec<Value>> {
        let mut objects = Vec::with_capacity(items.len());
        let mut item = String::new();
        for &(start, end) in items {
            item.clear();
            for line in text[start..end].split_inclusive('\n') {
                item.push_str(line.get(2..).unwrap_or(line.trim_start_matches(' ')));
            }
            let mut object: Value = serde_yaml::from_str(&item).ok()?;
            strip_store_fields(&mut object);
            objects.push(object);
        }
        Some(objects)
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let runs: Vec<Option<Vec<Value>>> = std::thread::scope(|scope| {
        let read = &read;
        let handles: Vec<_> = items
            .chunks(items.len().div_ceil(cores))
            .map(|run| scope.spawn(move || read(run)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().ok().flatten())
            .collect()
    });
    let mut objects = Vec::with_capacity(items.len());
    for run in runs {
        objects.extend(run?);
    }
    Some(objects)
}

#[derive(Debug, Clone, Default)]
pub struct ClusterObjects {
    pub objects: Vec<Value>,
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

/// What a reflector drops from every object it stores (what the policy-server's watches keep
/// of a cluster): the managed fields and kubectl's last-applied annotation, which no host call
/// ever answers with.
pub fn strip_store_fields(object: &mut Value) {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
        if let Some(annotations) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
            annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
        }
    }
}

impl ClusterObjects {
    /// Parses multi-document YAML; `kind: List` documents are flattened into their items.
    /// Objects are kept as a reflector stores them ([`strip_store_fields`]).
    pub fn from_yaml(text: &str) -> Result<ClusterObjects, String> {
        // `kubectl get -o json` (JSON is YAML) read by the JSON parser: a third of the time,
        // and no event buffer of the whole document in memory.
        let json = text.trim_start().starts_with('{');
        if let Some(objects) = (!json).then(|| list_items(text)).flatten() {
            return Ok(ClusterObjects { objects });
        }
        let mut objects = Vec::new();
        let documents: Box<dyn Iterator<Item = Result<Value, String>>> = if json {
            Box::new(
                serde_json::Deserializer::from_str(text)
                    .into_iter::<Value>()
                    .map(|v| v.map_err(|e| e.to_string())),
            )
        } else {
            Box::new(
                serde_yaml::Deserializer::from_str(text)
                    .map(|d| Value::deserialize(d).map_err(|e| e.to_string())),
            )
        };
        for value in documents {
            let value = value?;
            match value {
                Value::Null => {}
                Value::Object(mut list)
                    if list.get("kind").and_then(Value::as_str) == Some("List") =>
                {
                    if let Some(Value::Array(items)) = list.remove("items") {
                        objects.extend(items);
                    }
                }
                v => objects.push(v),
            }
        }
        objects.iter_mut().for_each(strip_store_fields);
        Ok(ClusterObjects { objects })
    }

    /// Loads every `*.yaml` of a directory, in name order.
    pub fn load_dir(dir: &Path) -> Result<ClusterObjects, String> {
        let mut cluster = ClusterObjects::default();
        let paths = crate::yaml_files(dir)?;
        // settings.yaml beside the manifests is the bundle's settings, not a manifest.
        for path in paths
            .iter()
            .filter(|p| p.file_name().is_some_and(|n| n != "settings.yaml"))
        {
            let text =
                std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
            let part =
                ClusterObjects::from_yaml(&text).map_err(|e| format!("{}: {e}", path.display()))?;
            cluster.objects.extend(part.objects);
        }
        Ok(cluster)
    }

    /// A dump: `kubectl get … -o yaml` output (a `List`, or several documents), a file or a
    /// folder of such files.
    pub fn read_dump(paths: &[std::path::PathBuf]) -> Result<ClusterObjects, String> {
        let mut cluster = ClusterObjects::default();
        for path in paths {
            let part = if path.is_dir() {
                Self::load_dir(path)?
            } else {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| format!("{}: {e}", path.display()))?;
                Self::from_yaml(&text).map_err(|e| format!("{}: {e}", path.display()))?
            };
            cluster.objects.extend(part.objects);
        }
        Ok(cluster)
    }

    fn is(object: &Value, api_version: &str, kind: &str) -> bool {
        str_at(object, &["apiVersion"]) == api_version && str_at(object, &["kind"]) == kind
    }

    pub fn get(
        &self,
        api_version: &str,
        kind: &str,
        name: &str,
        namespace: Option<&str>,
    ) -> Option<&Value> {
        self.objects
            .iter()
            .find(|o| Self::is(o, api_version, kind) && Self::named(o, name, namespace))
    }

    /// `get` through an index of the objects by identity (build it with
    /// [`ClusterObjects::index`]): a dump of thousands of objects is looked up thousands of
    /// times, and thousands of tenants hold a release of the same name. Without a namespace,
    /// only a cluster-scoped object is found, as the API server answers.
    pub fn get_indexed<'c>(
        &'c self,
        index: &ObjectIndex,
        api_version: &str,
        kind: &str,
        name: &str,
        namespace: Option<&str>,
    ) -> Option<&'c Value> {
        let key = (
            api_version.to_owned(),
            kind.to_owned(),
            namespace.unwrap_or_default().to_owned(),
            name.to_owned(),
        );
        index.get(&key)?.first().map(|&at| &self.objects[at])
    }

    /// The positions of the objects by identity.
    pub fn index(&self) -> ObjectIndex {
        let mut index = ObjectIndex::new();
        for (at, o) in self.objects.iter().enumerate() {
            index.entry(index_key(o)).or_default().push(at);
        }
        index
    }

    /// Without a namespace, only a cluster-scoped object.
    fn named(object: &Value, name: &str, namespace: Option<&str>) -> bool {
        str_at(object, &["metadata", "name"]) == name
            && str_at(object, &["metadata", "namespace"]) == namespace.unwrap_or_default()
    }

    pub fn list(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        selector: &Selector,
    ) -> Vec<&Value> {
        self.objects
            .iter()
            .filter(|o| Self::is(o, api_version, kind) && listed_by(o, namespace, selector))
            .collect()
    }

    /// Replaces an object with the same apiVersion, kind, namespace and name, or adds it.
    pub fn apply(&mut self, object: Value) {
        let same = |o: &Value| {
            Self::is(
                o,
                str_at(&object, &["apiVersion"]),
                str_at(&object, &["kind"]),
            ) && str_at(o, &["metadata", "name"]) == str_at(&object, &["metadata", "name"])
                && str_at(o, &["metadata", "namespace"])
                    == str_at(&object, &["metadata", "namespace"])
        };
        self.objects.retain(|o| !same(o));
        self.objects.push(object);
    }

    /// Does `object` answer to `Kind/name` or `Kind/namespace/name`?
    fn matcher(reference: &str) -> Result<impl Fn(&Value) -> bool + '_, String> {
        let parts: Vec<&str> = reference.split('/').collect();
        let (kind, namespace, name) = match parts.as_slice() {
            [kind, name] => (*kind, None, *name),
            [kind, namespace, name] => (*kind, Some(*namespace), *name),
            _ => {
                return Err(format!(
                    "{reference:?} is not Kind/name or Kind/namespace/name"
                ));
            }
        };
        Ok(move |o: &Value| {
            str_at(o, &["kind"]) == kind
                && str_at(o, &["metadata", "name"]) == name
                && namespace.is_none_or(|ns| str_at(o, &["metadata", "namespace"]) == ns)
        })
    }

    /// The object named `Kind/name` or `Kind/namespace/name`.
    pub fn find(&self, reference: &str) -> Result<&Value, String> {
        let is = Self::matcher(reference)?;
        self.objects
            .iter()
            .find(|o| is(o))
            .ok_or_else(|| format!("no object {reference}"))
    }

    /// Removes objects by `Kind/name` or `Kind/namespace/name`.
    pub fn remove(&mut self, reference: &str) -> Result<(), String> {
        let is = Self::matcher(reference).map_err(|e| format!("remove: {e}"))?;
        let before = self.objects.len();
        self.objects.retain(|o| !is(o));
        if self.objects.len() == before {
            return Err(format!("remove: no object {reference}"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What serde_yaml reads from the whole text: the reference the item-by-item read must equal.
    fn whole(text: &str) -> Vec<Value> {
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
    name: postgres-db
    namespace: tenant-a
  spec:
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
        let items = list_items(LIST).expect("kubectl's layout");
        assert_eq!(items, whole(LIST));
        assert_eq!(items.len(), 2);
        assert_eq!(
            items[1]["spec"]["values"]["script"],
            "line one\n\nline three\n"
        );
        assert!(items[0]["metadata"].get("managedFields").is_none());
        assert_eq!(
            ClusterObjects::from_yaml(LIST).expect("read").objects,
            items
        );
    }

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
            assert_eq!(list_items(text), None, "{text}");
        }
        // Read whole, the same objects come out.
        assert_eq!(
            ClusterObjects::from_yaml(&indented).expect("read").objects,
            whole(LIST)
        );
        assert_eq!(
            ClusterObjects::from_yaml(aliased)
                .expect("read")
                .objects
                .len(),
            2
        );
        assert_eq!(
            ClusterObjects::from_yaml(&two_documents)
                .expect("read")
                .objects
                .len(),
            3
        );
    }
}
