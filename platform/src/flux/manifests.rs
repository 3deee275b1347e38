//! A change set as Flux reads it: files (each read as named), folders (every `*.yaml` and
//! `*.yml` the source artifact would hold, in name order, recursively: [`crate::flux::sourceignore`])
//! or standard input (`-`), each multi-document YAML or JSON, `kind: List` flattened into its
//! items. A folder with a `kustomization.yaml` is
//! a kustomize unit, as Flux's kustomize-controller builds it: its objects are what `kustomize
//! build` (or `kubectl kustomize`) makes of it, never its files read one by one. Every document
//! keeps where it came from, so a verdict or an error names the file and the document.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::Error;
use crate::flux::sourceignore::{GitRepository, Packed, sorted_entries};
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

/// The names kustomize reads a folder's kustomization from.
pub(crate) const KUSTOMIZATION_FILES: [&str; 3] =
    ["kustomization.yaml", "kustomization.yml", "Kustomization"];

/// What a path stands for: a file, or a kustomize unit to build.
#[derive(Debug, PartialEq)]
enum Source {
    File(PathBuf),
    Kustomize(PathBuf),
}

/// The folder's kustomization file, if it is a kustomize unit.
fn kustomization(dir: &Path) -> Option<PathBuf> {
    KUSTOMIZATION_FILES
        .iter()
        .map(|name| dir.join(name))
        .find(|file| file.is_file())
}

/// The sources a path stands for: itself, a kustomize unit (a folder with a kustomization, or
/// that file named), or a folder's manifests in name order, recursively, each folder below that
/// is a kustomize unit built as one, as Flux builds a path without a kustomization of its own.
/// A folder is read as source-controller packs it (`packed`: no ignored path, no symlink) and as
/// kustomize-controller's generator scans it: `.yaml` and `.yml` files only (fluxcd/pkg
/// kustomize v1.27.0, `kustomize_generator.go` `scanManifests`).
fn files(path: &Path, packed: &Packed) -> Result<Vec<Source>, Error> {
    if path.is_dir() && kustomization(path).is_some() {
        return Ok(vec![Source::Kustomize(path.to_owned())]);
    }
    if !path.is_dir() {
        let named = path.file_name().and_then(|n| n.to_str());
        if named.is_some_and(|n| KUSTOMIZATION_FILES.contains(&n)) {
            let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
            return Ok(vec![Source::Kustomize(
                dir.unwrap_or(Path::new(".")).to_owned(),
            )]);
        }
        return Ok(vec![Source::File(path.to_owned())]);
    }
    let canonical = std::fs::canonicalize(path).map_err(|e| Error::read(path, e))?;
    let mut out = Vec::new();
    for entry in sorted_entries(path)? {
        let kept = entry
            .file_name()
            .is_some_and(|name| packed.keeps(&canonical.join(name)));
        if !kept {
            continue;
        }
        if entry.is_dir() {
            out.extend(files(&entry, packed)?);
        } else if entry.extension().is_some_and(|x| x == "yaml" || x == "yml") {
            out.push(Source::File(entry));
        }
    }
    Ok(out)
}

/// The maintained builders of a kustomize unit, in the order they are tried: the program and
/// the arguments before the folder. As Flux builds (fluxcd/pkg kustomize `Build`, which
/// kustomize-controller v1.8.0 calls): `LoadRestrictionsNone`, so a kustomization may name files
/// outside its folder (`../../common/x.yaml`), and no plugin but the built-in ones (the default
/// of both builders). kustomize-controller links kustomize's API as a library; the machine's
/// kustomize (v5.5 in `kubectl`) may differ from it in what it prints, not in what it refuses
/// (docs/operator-tool.md).
pub(crate) const BUILDERS: [(&str, &[&str]); 2] = [
    (
        "kustomize",
        &["build", "--load-restrictor", "LoadRestrictionsNone"],
    ),
    (
        "kubectl",
        &["kustomize", "--load-restrictor", "LoadRestrictionsNone"],
    ),
];

/// What the first builder found on `PATH` makes of `dir`; without one, one line saying how to
/// pipe the build in. A builder that fails is the change set's error, with its own words.
pub(crate) fn build(dir: &Path, builders: &[(&str, &[&str])]) -> Result<String, Error> {
    let shown = dir.display();
    for (program, args) in builders {
        let output = match Command::new(program).args(*args).arg(dir).output() {
            Ok(output) => output,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(format!("{shown}: {program}: {e}").into()),
        };
        if !output.status.success() {
            let said = String::from_utf8_lossy(&output.stderr);
            return Err(format!(
                "{shown}: `{program} {} {shown}` failed: {}",
                args.join(" "),
                builder_error(&said)
            )
            .into());
        }
        return Ok(String::from_utf8(output.stdout)
            .map_err(|e| format!("{shown}: {program} wrote no UTF-8: {e}"))?);
    }
    Err(format!(
        "{shown} is a kustomize unit (it holds a kustomization) and neither kustomize nor kubectl is on PATH to build it: check what it builds, `kustomize build {shown} | cozystack-policy check -` (or `kubectl kustomize {shown}`, or `flux build kustomization NAME --path {shown}`)"
    ).into())
}

/// What a builder's stderr says, in one line: kustomize's `Error: …` lines without the log's
/// prefixes (`Error: `, `error: `, a timestamp), several joined with `; `.
fn builder_error(stderr: &str) -> String {
    let lines: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let errors: Vec<&str> = lines
        .iter()
        .filter_map(|line| {
            line.strip_prefix("Error: ")
                .or_else(|| line.strip_prefix("error: "))
        })
        .collect();
    let said = match errors.is_empty() {
        true => lines,
        false => errors,
    };
    said.join("; ")
}

/// Every manifest of `paths`, in order. A document that is not an object with apiVersion, kind
/// and metadata.name is an error naming it: a change set is judged whole or not at all.
/// A folder is read as `repository`'s artifact holds it ([`Packed`]).
pub fn read(paths: &[PathBuf], repository: &GitRepository) -> Result<Vec<Manifest>, Error> {
    let mut manifests = Vec::new();
    for path in paths {
        let sources = match path == Path::new("-") {
            true => vec![Source::File(path.to_owned())],
            false => files(path, &Packed::of(path, repository)?)?,
        };
        for source in sources {
            let (name, text) = match source {
                Source::File(file) if file == Path::new("-") => {
                    let text = std::io::read_to_string(std::io::stdin()).map_err(|source| {
                        Error::Stream {
                            what: "standard input",
                            source,
                        }
                    })?;
                    ("-".to_owned(), text)
                }
                Source::File(file) => {
                    let text = std::fs::read_to_string(&file).map_err(|e| Error::read(&file, e))?;
                    (file.display().to_string(), text)
                }
                Source::Kustomize(dir) => (
                    format!("{} (built)", dir.display()),
                    build(&dir, &BUILDERS)?,
                ),
            };
            manifests.extend(parse(&name, &text)?);
        }
    }
    Ok(manifests)
}

/// A kustomize configuration document (`kustomize.config.k8s.io`: Kustomization, Component):
/// what a builder reads, never an object the API server is sent.
fn is_kustomize_config(object: &Value) -> bool {
    object["apiVersion"]
        .as_str()
        .is_some_and(|v| v.starts_with("kustomize.config.k8s.io/"))
}

/// The manifests of one file's text; `name` is how errors and origins name the file.
pub fn parse(name: &str, text: &str) -> Result<Vec<Manifest>, Error> {
    let mut manifests = Vec::new();
    for (i, document) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let origin = format!("{name}, document {}", i + 1);
        // Read as YAML first: a key given twice is an error there, as in kustomize's and the
        // API server's readers (files `cat`-ed together without `---` repeat `kind:` and
        // `metadata:`); a JSON map would keep the last silently.
        let yaml = serde_yaml::Value::deserialize(document).map_err(|e| {
            format!("{origin}: {e}: kustomize-controller's build refuses it, so nothing of it lands (separate documents with `---`)")
        })?;
        let value = serde_json::to_value(yaml).map_err(|e| format!("{origin}: {e}"))?;
        match value {
            Value::Null => {}
            v if is_kustomize_config(&v) => {}
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
fn checked(manifest: Manifest) -> Result<Manifest, Error> {
    let at = |what: &str| Error::Invalid(format!("{}: {what}", manifest.origin));
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
    fn a_builder_error_is_one_line_without_its_log_prefix() {
        let stderr = "# Warning: 'bases' is deprecated.\nError: accumulating resources: accumulation err='x'\n  must build at directory\nerror: second\n";
        assert_eq!(
            builder_error(stderr),
            "accumulating resources: accumulation err='x'; second"
        );
        assert_eq!(builder_error("plain\n\nwords\n"), "plain; words");
    }

    /// A fresh folder under the target directory's temporary space.
    fn folder(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("cozystack-manifests-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        dir
    }

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap_or(Path::new("."))).unwrap();
        std::fs::write(path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }

    const KUSTOMIZATION: &str = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [tenant.yaml]\n";

    #[test]
    fn a_folder_is_read_as_flux_packs_and_scans_it() {
        // source-controller leaves out what .sourceignore excludes (and, with a pattern of the
        // repository's own, no longer the defaults); kustomize-controller takes .yaml and .yml.
        let repo = folder("packed");
        let namespace =
            |name: &str| format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: {name}}}\n");
        write(&repo.join(".git/HEAD"), "");
        write(&repo.join("apps/a.yaml"), &namespace("a"));
        write(&repo.join("apps/b.yml"), &namespace("b"));
        write(
            &repo.join("apps/c.json"),
            r#"{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "c"}}"#,
        );
        write(&repo.join("apps/drafts/d.yaml"), &namespace("d"));
        write(&repo.join("apps/.sops.yaml"), "creation_rules: []\n");
        let names = |paths: &[PathBuf]| -> Vec<String> {
            read(paths, &GitRepository::default())
                .unwrap_or_else(|e| panic!("{e}"))
                .iter()
                .map(|m| m.name().to_owned())
                .collect()
        };
        // The defaults keep .sops.yaml out (it is no manifest: read, it would be an error).
        assert_eq!(names(&[repo.join("apps")]), ["a", "b", "d"]);
        write(&repo.join(".sourceignore"), "drafts/\n.sops.yaml\n");
        assert_eq!(names(&[repo.join("apps")]), ["a", "b"]);
        // A file named is read as named.
        assert_eq!(names(&[repo.join("apps/c.json")]), ["c"]);
    }

    #[test]
    fn a_folder_with_a_kustomization_is_one_unit_to_build() {
        // A Flux repository: plain manifests beside an overlay, as Flux builds a path.
        let repo = folder("repo");
        write(
            &repo.join("a.yaml"),
            "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n",
        );
        write(&repo.join("tenants/acme/kustomization.yaml"), KUSTOMIZATION);
        write(&repo.join("tenants/acme/tenant.yaml"), "kind: Tenant\n");
        let overlay = repo.join("tenants/acme");
        assert_eq!(
            files(
                &repo,
                &Packed::of(&repo, &GitRepository::default()).unwrap()
            )
            .unwrap(),
            [
                Source::File(repo.join("a.yaml")),
                Source::Kustomize(overlay.clone())
            ]
        );
        assert_eq!(
            files(
                &overlay,
                &Packed::of(&overlay, &GitRepository::default()).unwrap()
            )
            .unwrap(),
            [Source::Kustomize(overlay.clone())]
        );
        // Naming the kustomization itself names its folder.
        assert_eq!(
            files(
                &overlay.join("kustomization.yaml"),
                &Packed::of(&overlay, &GitRepository::default()).unwrap()
            )
            .unwrap(),
            [Source::Kustomize(overlay.clone())]
        );
        // Without a builder: one line saying how to pipe the build in, never "has no name".
        let err = build(&overlay, &[("no-such-kustomize-builder", &["build"])])
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            format!(
                "{o} is a kustomize unit (it holds a kustomization) and neither kustomize nor kubectl is on PATH to build it: check what it builds, `kustomize build {o} | cozystack-policy check -` (or `kubectl kustomize {o}`, or `flux build kustomization NAME --path {o}`)",
                o = overlay.display()
            )
        );
        std::fs::remove_dir_all(&repo).ok();
    }

    #[test]
    fn a_builder_s_output_is_the_change_set_and_its_failure_the_error() {
        let dir = folder("builder");
        let builder = dir.join("builder.sh");
        // Stands in for `kustomize build DIR`: prints DIR's built.yaml, fails without one.
        write(
            &builder,
            "#!/bin/sh\ncat \"$2/built.yaml\" || { echo \"no built.yaml in $2\" >&2; exit 1; }\n",
        );
        // Run by `sh`, not executed itself: a script just written can be busy (ETXTBSY) while
        // another test's child still holds its descriptor.
        let script = builder.display().to_string();
        let args: &[&str] = &[&script, "build"];
        let overlay = dir.join("overlay");
        write(&overlay.join("kustomization.yaml"), KUSTOMIZATION);
        let err = build(&overlay, &[("sh", args)]).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!(
                "{o}: `sh {script} build {o}` failed: ",
                o = overlay.display()
            )) && err.ends_with(&format!("no built.yaml in {}", overlay.display())),
            "{err}"
        );
        write(
            &overlay.join("built.yaml"),
            "apiVersion: v1\nkind: Namespace\nmetadata: {name: built}\n",
        );
        let text = build(&overlay, &[("sh", args)]).unwrap();
        let manifests = parse(&format!("{} (built)", overlay.display()), &text).unwrap();
        assert_eq!(manifests.len(), 1);
        assert_eq!(manifests[0].reference(), "Namespace built");
        assert_eq!(
            manifests[0].origin,
            format!("{} (built), document 1", overlay.display())
        );
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn kustomize_configuration_is_no_object() {
        let text = format!(
            "{KUSTOMIZATION}---\napiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\n---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: a}}\n"
        );
        let manifests = parse("kustomization.yaml", &text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(manifests.len(), 1);
        assert_eq!(manifests[0].origin, "kustomization.yaml, document 3");
    }

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
        .map(|e| e.to_string())
        .unwrap_or_default();
        assert_eq!(
            err,
            "set.yaml, document 1: Namespace has no metadata.name: every object of a change set needs the name it is applied under"
        );
        let err = parse("set.yaml", "---\na: 1\n---\nkind: [\n")
            .err()
            .map(|e| e.to_string())
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
        .map(|e| e.to_string())
        .unwrap_or_default();
        assert!(err.starts_with("set.yaml, document 2: "), "{err}");
    }
}
