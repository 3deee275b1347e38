//! A change set as `kubectl apply -f` and Flux read it: files, folders (every `*.yaml`, `*.yml`
//! and `*.json`, in name order, recursively) or standard input (`-`), each multi-document
//! YAML or JSON, `kind: List` flattened into its items. Every document keeps where it came
//! from, so a verdict or an error names the file and the document.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

/// One object of the change set and where it was read.
#[derive(Debug, Clone)]
pub struct Manifest {
    /// `path, document N` (1-based, as editors count `---` blocks), `-` for standard input.
    pub origin: String,
    pub object: Value,
}

impl Manifest {
    pub fn api_version(&self) -> &str {
        self.object["apiVersion"].as_str().unwrap_or_default()
    }

    pub fn kind(&self) -> &str {
        self.object["kind"].as_str().unwrap_or_default()
    }

    pub fn name(&self) -> &str {
        self.object["metadata"]["name"].as_str().unwrap_or_default()
    }

    pub fn namespace(&self) -> Option<&str> {
        self.object["metadata"]["namespace"]
            .as_str()
            .filter(|ns| !ns.is_empty())
    }

    /// `Kind namespace/name` (`Kind name` for a cluster-scoped object), as reports name it.
    pub fn reference(&self) -> String {
        match self.namespace() {
            Some(ns) => format!("{} {ns}/{}", self.kind(), self.name()),
            None => format!("{} {}", self.kind(), self.name()),
        }
    }
}

/// The files a path stands for: itself, or a folder's manifests in name order, recursively.
fn files(path: &Path) -> Result<Vec<PathBuf>, String> {
    if !path.is_dir() {
        return Ok(vec![path.to_owned()]);
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
        .map_err(|e| format!("{}: {e}", path.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    let mut out = Vec::new();
    for entry in entries {
        if entry.is_dir() {
            out.extend(files(&entry)?);
        } else if entry
            .extension()
            .is_some_and(|x| x == "yaml" || x == "yml" || x == "json")
        {
            out.push(entry);
        }
    }
    Ok(out)
}

/// Every manifest of `paths`, in order. A document that is not an object with apiVersion, kind
/// and metadata.name is an error naming it: a change set is judged whole or not at all.
pub fn read(paths: &[PathBuf]) -> Result<Vec<Manifest>, String> {
    let mut manifests = Vec::new();
    for path in paths {
        for file in files(path)? {
            let (name, text) = if file == Path::new("-") {
                let text = std::io::read_to_string(std::io::stdin())
                    .map_err(|e| format!("standard input: {e}"))?;
                ("-".to_owned(), text)
            } else {
                let text = std::fs::read_to_string(&file)
                    .map_err(|e| format!("{}: {e}", file.display()))?;
                (file.display().to_string(), text)
            };
            manifests.extend(parse(&name, &text)?);
        }
    }
    Ok(manifests)
}

/// The manifests of one file's text; `name` is how errors and origins name the file.
pub fn parse(name: &str, text: &str) -> Result<Vec<Manifest>, String> {
    let mut manifests = Vec::new();
    for (i, document) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let origin = format!("{name}, document {}", i + 1);
        let value = Value::deserialize(document).map_err(|e| format!("{origin}: {e}"))?;
        match value {
            Value::Null => {}
            v if v["kind"] == "List" && v["items"].is_array() => {
                let items = v["items"].as_array().cloned().unwrap_or_default();
                for (j, object) in items.into_iter().enumerate() {
                    let origin = format!("{origin}, item {}", j + 1);
                    manifests.push(checked(Manifest { origin, object })?);
                }
            }
            object => manifests.push(checked(Manifest { origin, object })?),
        }
    }
    Ok(manifests)
}

/// The manifest, if it has what the API server needs to take it.
fn checked(manifest: Manifest) -> Result<Manifest, String> {
    let at = |what: &str| format!("{}: {what}", manifest.origin);
    if !manifest.object.is_object() {
        return Err(at(
            "not an object (a manifest is a mapping with apiVersion, kind and metadata)",
        ));
    }
    if manifest.api_version().is_empty() || manifest.kind().is_empty() {
        return Err(at("no apiVersion or kind"));
    }
    if manifest.name().is_empty() {
        let generated = manifest.object["metadata"]["generateName"].is_string();
        return Err(at(&format!(
            "{} has no metadata.name{}: every object of a change set needs the name it is applied under",
            manifest.kind(),
            if generated {
                " (generateName is for `kubectl create`; Flux and `kubectl apply` need the name)"
            } else {
                ""
            }
        )));
    }
    Ok(manifest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_are_named_by_file_and_position() {
        let text = "---\napiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\n---\napiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Namespace, metadata: {name: b}}\n";
        let manifests = parse("set.yaml", text).unwrap_or_else(|e| panic!("{e}"));
        let names: Vec<_> = manifests
            .iter()
            .map(|m| (m.origin.as_str(), m.reference()))
            .collect();
        assert_eq!(
            names,
            [
                ("set.yaml, document 1", "Namespace a".to_owned()),
                ("set.yaml, document 3, item 1", "Namespace b".to_owned())
            ]
        );
        let err = parse(
            "set.yaml",
            "apiVersion: v1\nkind: Namespace\nmetadata: {}\n---\n",
        )
        .err()
        .unwrap_or_default();
        assert_eq!(
            err,
            "set.yaml, document 1: Namespace has no metadata.name: every object of a change set needs the name it is applied under"
        );
        let err = parse("set.yaml", "---\na: 1\n---\nkind: [\n")
            .err()
            .unwrap_or_default();
        assert!(
            err.starts_with("set.yaml, document 1: no apiVersion or kind"),
            "{err}"
        );
        let err = parse(
            "set.yaml",
            "apiVersion: v1\nkind: X\nmetadata: {name: x}\n---\nkind: [\n",
        )
        .err()
        .unwrap_or_default();
        assert!(err.starts_with("set.yaml, document 2: "), "{err}");
    }
}
