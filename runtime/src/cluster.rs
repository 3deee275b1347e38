//! A fixture cluster: ordinary Kubernetes manifests, as `kubectl get -o yaml` prints them.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use crate::selector::Selector;

/// Object positions by (apiVersion, kind, name).
pub type ObjectIndex = std::collections::HashMap<(String, String, String), Vec<usize>>;

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

impl ClusterObjects {
    /// Parses multi-document YAML; `kind: List` documents are flattened into their items.
    pub fn from_yaml(text: &str) -> Result<ClusterObjects, String> {
        let mut objects = Vec::new();
        for document in serde_yaml::Deserializer::from_str(text) {
            let value = Value::deserialize(document).map_err(|e| e.to_string())?;
            match value {
                Value::Null => {}
                v if v.get("kind").and_then(Value::as_str) == Some("List") => {
                    objects.extend(v["items"].as_array().cloned().unwrap_or_default())
                }
                v => objects.push(v),
            }
        }
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

    /// `get` through an index of the objects by apiVersion, kind and name (build it with
    /// [`ClusterObjects::index`]): a dump of thousands of objects is looked up thousands of
    /// times.
    pub fn get_indexed<'c>(
        &'c self,
        index: &ObjectIndex,
        api_version: &str,
        kind: &str,
        name: &str,
        namespace: Option<&str>,
    ) -> Option<&'c Value> {
        let key = (api_version.to_owned(), kind.to_owned(), name.to_owned());
        index
            .get(&key)?
            .iter()
            .map(|&at| &self.objects[at])
            .find(|o| Self::named(o, name, namespace))
    }

    /// The positions of the objects by apiVersion, kind and name.
    pub fn index(&self) -> ObjectIndex {
        let mut index = ObjectIndex::new();
        for (at, o) in self.objects.iter().enumerate() {
            let key = (
                str_at(o, &["apiVersion"]).to_owned(),
                str_at(o, &["kind"]).to_owned(),
                str_at(o, &["metadata", "name"]).to_owned(),
            );
            index.entry(key).or_default().push(at);
        }
        index
    }

    fn named(object: &Value, name: &str, namespace: Option<&str>) -> bool {
        str_at(object, &["metadata", "name"]) == name
            && namespace.is_none_or(|ns| str_at(object, &["metadata", "namespace"]) == ns)
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
            .filter(|o| {
                Self::is(o, api_version, kind)
                    && namespace.is_none_or(|ns| str_at(o, &["metadata", "namespace"]) == ns)
                    && selector.matches(&labels_of(o))
            })
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
