//! What kustomize-controller v1.8.0 builds from a Kustomization's path, so that `check` judges
//! what Flux applies and not the folder as it lies: the source as source-controller packs it
//! ([`crate::flux::sourceignore`]), copied aside as the controller works on its own copy of the
//! artifact; the kustomization its generator writes there (fluxcd/pkg kustomize v1.27.0,
//! `kustomize_generator.go` `WriteFile`: the folder's own kustomization, or one listing its
//! manifests, with the Kustomization's `targetNamespace`, `namePrefix`, `nameSuffix`, `patches`,
//! `components` and `images` set in it); the real kustomize; then what the controller does to
//! the built objects (`kustomization_controller.go` `build` and `apply`: every object named,
//! kinded and versioned, SOPS documents refused without `spec.decryption`, `commonMetadata`
//! set on every object).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use crate::apiserver::Identity;
use crate::error::Error;
use crate::flux::manifests::{self, KUSTOMIZATION_FILES, Manifest};
use crate::flux::postbuild::{self, PostBuild};
use crate::flux::sourceignore::{GitRepository, Packed, sorted_entries};
use crate::flux::versions::Flux;
use cozystack_resolver::release::Judged;

/// The fields of a Flux Kustomization's spec that decide what it builds and prunes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Spec {
    /// `metadata.namespace/name`, how messages name it.
    pub name: String,
    /// `spec.prune`: without it, nothing the change set drops is ever deleted.
    pub prune: bool,
    /// `spec.serviceAccountName`, in the Kustomization's namespace: who applies its writes.
    pub service_account: Option<String>,
    /// `metadata.namespace`.
    pub namespace: String,
    target_namespace: Option<String>,
    name_prefix: Option<String>,
    name_suffix: Option<String>,
    patches: Vec<Value>,
    components: Vec<String>,
    ignore_missing_components: bool,
    images: Vec<Value>,
    common_labels: Map<String, Value>,
    common_annotations: Map<String, Value>,
    decryption: bool,
    /// `spec.postBuild`: only then does the controller substitute variables
    /// (`kustomization_controller.go` `build`); without it `${NAME}` is applied as written.
    pub post_build: Option<PostBuild>,
}

impl Spec {
    /// Who kustomize-controller applies this Kustomization's writes as (`reconcile` →
    /// `WithServiceAccount`, kustomize-controller v1.8.0): its `spec.serviceAccountName`, in its
    /// own namespace; `None` when it names none, and the controller applies as itself
    /// ([`crate::helm_controller::FLUX`]: Cozystack's Flux sets no `--default-service-account`).
    pub fn service_account(&self) -> Option<Identity> {
        let sa = self.service_account.as_ref()?;
        Some(Identity::impersonated(
            &format!("system:serviceaccount:{}:{sa}", self.namespace),
            &[],
        ))
    }

    /// The spec of `kustomization` (a `kustomize.toolkit.fluxcd.io` Kustomization, as a file or
    /// `kubectl get -o yaml` gives it); `origin` names it in errors.
    pub fn of(kustomization: &Value, origin: &str) -> Result<Spec, Error> {
        if kustomization["kind"] != "Kustomization"
            || !kustomization["apiVersion"]
                .as_str()
                .is_some_and(|v| v.starts_with("kustomize.toolkit.fluxcd.io/"))
        {
            return Err(format!(
                "{origin}: not a Flux Kustomization (kustomize.toolkit.fluxcd.io, kind Kustomization)"
            )
            .into());
        }
        let spec = &kustomization["spec"];
        let text = |key: &str| spec[key].as_str().map(str::to_owned);
        let list = |key: &str| spec[key].as_array().cloned().unwrap_or_default();
        let map = |key: &str| {
            spec["commonMetadata"][key]
                .as_object()
                .cloned()
                .unwrap_or_default()
        };
        Ok(Spec {
            name: format!(
                "{}/{}",
                kustomization["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or_default(),
                kustomization["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
            ),
            prune: spec["prune"].as_bool().ok_or_else(|| {
                format!("{origin}: no spec.prune (the CRD requires it: true or false)")
            })?,
            service_account: text("serviceAccountName").filter(|sa| !sa.is_empty()),
            namespace: kustomization["metadata"]["namespace"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            target_namespace: text("targetNamespace"),
            name_prefix: text("namePrefix"),
            name_suffix: text("nameSuffix"),
            patches: list("patches"),
            components: list("components")
                .iter()
                .filter_map(|c| c.as_str().map(str::to_owned))
                .collect(),
            ignore_missing_components: spec["ignoreMissingComponents"].as_bool().unwrap_or(false),
            images: list("images"),
            common_labels: map("labels"),
            common_annotations: map("annotations"),
            decryption: spec.get("decryption").is_some_and(|d| !d.is_null()),
            post_build: PostBuild::of(kustomization),
        })
    }
}

/// The manifests Flux applies for `spec` from the folder `path`, in kustomize's output order,
/// each built document's YAML substituted with `variables` ([`postbuild`]). A build Flux would
/// fail is an error naming the folder and Flux's reason.
pub fn build(
    path: &Path,
    spec: &Spec,
    variables: &BTreeMap<String, String>,
    repository: &GitRepository,
) -> Result<Vec<Manifest>, Error> {
    let text = kustomized(path, spec, repository)?;
    let shown = path.display().to_string();
    let origin = format!("{shown} (built as {} builds it)", spec.name);
    // `SubstituteVariables` evaluates only when there is a variable.
    let text = match spec.post_build {
        // The Flux every supported release ships (`versions`): the build comes before the
        // settings are read.
        Some(_) if !variables.is_empty() => substituted(&text, variables, Flux::judged(Judged(None)).map_err(|e| e.to_string())?).map_err(|e| {
            format!("{origin}: post build failed: {e}: kustomize-controller fails the build, so nothing lands")
        })?,
        _ => text,
    };
    let mut built = manifests::parse(&origin, &text)?;
    for manifest in &mut built {
        if is_sops(&manifest.object) && !spec.decryption {
            return Err(format!(
                "{}: {} is encrypted with SOPS and the Kustomization {} has no spec.decryption: kustomize-controller applies it as it is and the API server refuses the stage, so nothing of it lands",
                manifest.origin,
                manifest.reference(),
                spec.name
            )
            .into());
        }
        set_common_metadata(&mut manifest.object, spec);
    }
    Ok(built)
}

/// What kustomize makes of `path` as kustomize-controller builds it for `spec`: on a copy of
/// what source-controller packs, with the generator's kustomization, through the real
/// kustomize with Flux's options. The errors name the folder as given.
fn kustomized(path: &Path, spec: &Spec, repository: &GitRepository) -> Result<String, Error> {
    let packed = Packed::of(path, repository)?;
    let work = WorkDir::new()?;
    for file in packed.files()? {
        let to = work.0.join(&file);
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent).map_err(|e| Error::write(parent, e))?;
        }
        let from = packed.root().join(&file);
        std::fs::copy(&from, &to).map_err(|e| Error::read(&from, e))?;
    }
    let canonical = std::fs::canonicalize(path).map_err(|e| Error::read(path, e))?;
    let relative = canonical
        .strip_prefix(packed.root())
        .unwrap_or(Path::new(""));
    let dir = work.0.join(relative);
    let shown = path.display().to_string();
    if !dir.is_dir() {
        return Err(format!(
            "{shown}: the artifact source-controller packs holds no such folder (a .sourceignore or the default excludes leave it out): kustomize-controller fails with \"kustomization path not found\""
        )
        .into());
    }
    write_kustomization(&dir, spec).map_err(|e| format!("{shown}: {e}"))?;
    Ok(manifests::build(&dir, &manifests::BUILDERS).map_err(|e| {
        // The builder names the copy; the user knows the folder.
        e.to_string().replace(&dir.display().to_string(), &shown)
    })?)
}

/// What Flux applies of the files `files`, given with a Kustomization whose `spec` transforms
/// its build (`targetNamespace`, `namePrefix`, `patches`, `commonMetadata`, …): the files as the
/// folder of its `spec.path`, built with that spec. Origins name each file's copy by its number
/// and name, in the order given.
pub fn build_files(
    files: &[PathBuf],
    spec: &Spec,
    variables: &BTreeMap<String, String>,
    repository: &GitRepository,
) -> Result<Vec<Manifest>, Error> {
    let work = WorkDir::with_files(files.iter().map(|f| f.as_path()))?;
    let shown: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    let mut built = build(&work.0, spec, variables, repository).map_err(|e| {
        e.to_string()
            .replace(&work.0.display().to_string(), &shown.join(", "))
    })?;
    for manifest in &mut built {
        manifest.origin = manifest
            .origin
            .replace(&work.0.display().to_string(), &shown.join(", "));
    }
    Ok(built)
}

impl Spec {
    /// The first field of the spec that changes what kustomize builds from the path's files,
    /// if any: a file given with it is built with it, not taken as built.
    pub fn transforms(&self) -> Option<&'static str> {
        [
            ("targetNamespace", self.target_namespace.is_some()),
            ("namePrefix", self.name_prefix.is_some()),
            ("nameSuffix", self.name_suffix.is_some()),
            ("patches", !self.patches.is_empty()),
            ("components", !self.components.is_empty()),
            ("images", !self.images.is_empty()),
            (
                "commonMetadata",
                !self.common_labels.is_empty() || !self.common_annotations.is_empty(),
            ),
        ]
        .into_iter()
        .find_map(|(field, set)| set.then_some(field))
    }
}

/// Whether kustomize-controller's build of `paths` succeeds, as it builds a path it applies
/// (the generator's kustomization over what source-controller packs): each folder as it is,
/// the files given beside each other in one folder of their own. Standard input is taken as
/// `flux build` printed it. The error is the build's, naming what was given.
pub fn validate(paths: &[PathBuf], repository: &GitRepository) -> Result<(), Error> {
    let (folders, files): (Vec<&PathBuf>, Vec<&PathBuf>) = paths
        .iter()
        .filter(|p| p.as_path() != Path::new("-"))
        .partition(|p| p.is_dir());
    for folder in folders {
        kustomized(folder, &Spec::default(), repository)?;
    }
    if files.is_empty() {
        return Ok(());
    }
    let work = WorkDir::with_files(files.iter().map(|f| f.as_path()))?;
    write_kustomization(&work.0, &Spec::default())?;
    let shown: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    let built = manifests::build(&work.0, &manifests::BUILDERS);
    built.map(|_| ()).map_err(|e| {
        let said = e
            .to_string()
            .replace(&format!("{}: ", work.0.display()), "");
        let said = said.replace(&work.0.display().to_string(), "the files");
        format!(
            "{}: kustomize-controller's build of these fails, so nothing of them lands: {said}",
            shown.join(", ")
        )
        .into()
    })
}

/// kustomize's output with each document substituted as `SubstituteVariables` does it.
fn substituted(
    text: &str,
    variables: &BTreeMap<String, String>,
    flux: Flux,
) -> Result<String, postbuild::SubstitutionError> {
    let mut documents = Vec::new();
    for document in text.split("\n---\n") {
        let object: Value = serde_yaml::from_str(document)
            .map_err(|e| postbuild::SubstitutionError::Document(e.to_string()))?;
        documents.push(
            postbuild::substitute(document, &object, variables, flux)?
                .unwrap_or_else(|| document.to_owned()),
        );
    }
    Ok(documents.join("\n---\n"))
}

/// A document SOPS encrypted: its top-level `sops` block with the key groups and the MAC.
fn is_sops(object: &Value) -> bool {
    object["sops"]["mac"].is_string()
}

/// `ssautil.SetCommonMetadata`: the Kustomization's labels and annotations over every object's.
fn set_common_metadata(object: &mut Value, spec: &Spec) {
    for (key, values) in [
        ("labels", &spec.common_labels),
        ("annotations", &spec.common_annotations),
    ] {
        if values.is_empty() {
            continue;
        }
        let meta = &mut object["metadata"];
        if !meta[key].is_object() {
            meta[key] = json!({});
        }
        if let Some(map) = meta[key].as_object_mut() {
            map.extend(values.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
    }
}

/// The kustomization `WriteFile` leaves in `dir`: the folder's own, or one listing its manifests
/// (`generateKustomization`), with the Kustomization's fields set in it.
fn write_kustomization(dir: &Path, spec: &Spec) -> Result<(), Error> {
    let own = KUSTOMIZATION_FILES
        .iter()
        .map(|name| dir.join(name))
        .find(|file| file.is_file());
    let (file, mut kustomization) = match own {
        Some(file) => {
            let text = std::fs::read_to_string(&file).map_err(|e| Error::read(&file, e))?;
            let value: Value =
                serde_yaml::from_str(&text).map_err(|e| format!("{}: {e}", file.display()))?;
            let value = if value.is_null() { json!({}) } else { value };
            // An own kustomization without resources gets build metadata, so kustomize does not
            // call it empty.
            let mut value = value;
            if value["resources"].as_array().is_none_or(Vec::is_empty) {
                value["buildMetadata"] = json!(["originAnnotations"]);
            }
            (file, value)
        }
        None => {
            let mut resources = Vec::new();
            scan(dir, dir, &mut resources)?;
            let mut generated = json!({"apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization"});
            match resources.is_empty() {
                // A placeholder namespace, so kustomize does not call it empty.
                true => generated["namespace"] = json!("_placeholder"),
                false => generated["resources"] = json!(resources),
            }
            (dir.join("kustomization.yaml"), generated)
        }
    };
    for (key, value) in [
        ("namespace", &spec.target_namespace),
        ("namePrefix", &spec.name_prefix),
        ("nameSuffix", &spec.name_suffix),
    ] {
        if let Some(value) = value {
            kustomization[key] = json!(value);
        }
    }
    append(&mut kustomization, "patches", spec.patches.iter().cloned());
    let mut components = Vec::new();
    for component in &spec.components {
        if Path::new(component).is_absolute() || component.contains("://") {
            return Err(format!("component path '{component}' must be local and relative").into());
        }
        if spec.ignore_missing_components && !dir.join(component).exists() {
            continue;
        }
        components.push(json!(component));
    }
    append(&mut kustomization, "components", components.into_iter());
    for image in &spec.images {
        let images = kustomization["images"].as_array_mut();
        let same = |i: &Value| i["name"] == image["name"];
        match images.and_then(|list| list.iter_mut().find(|i| same(i))) {
            Some(existing) => *existing = image.clone(),
            None => append(&mut kustomization, "images", std::iter::once(image.clone())),
        }
    }
    let text = serde_yaml::to_string(&kustomization).map_err(|e| e.to_string())?;
    std::fs::write(&file, text).map_err(|e| Error::write(&file, e))
}

/// Appends `items` to the list at `key`, creating it.
fn append(kustomization: &mut Value, key: &str, items: impl Iterator<Item = Value>) {
    let items: Vec<Value> = items.collect();
    if items.is_empty() {
        return;
    }
    if !kustomization[key].is_array() {
        kustomization[key] = json!([]);
    }
    if let Some(list) = kustomization[key].as_array_mut() {
        list.extend(items);
    }
}

/// `scanManifests`: every `.yaml` and `.yml` under `dir` in name order, and each folder that
/// holds a kustomization as one resource, not descended into; paths relative to `base`.
fn scan(base: &Path, dir: &Path, out: &mut Vec<String>) -> Result<(), Error> {
    for entry in sorted_entries(dir)? {
        let relative = || format!("./{}", entry.strip_prefix(base).unwrap_or(&entry).display());
        if entry.is_dir() {
            match KUSTOMIZATION_FILES.iter().any(|k| entry.join(k).is_file()) {
                true => out.push(relative()),
                false => scan(base, &entry, out)?,
            }
        } else if entry.extension().is_some_and(|x| x == "yaml" || x == "yml") {
            out.push(relative());
        }
    }
    Ok(())
}

/// A scratch folder, removed when dropped.
struct WorkDir(PathBuf);

impl WorkDir {
    fn new() -> Result<WorkDir, Error> {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("cozystack-fluxbuild-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| Error::write(&dir, e))?;
        Ok(WorkDir(dir))
    }
}

impl WorkDir {
    /// A work folder holding copies of `files`, side by side, each as `<position>-<name>` so
    /// that two of one name do not collide.
    fn with_files<'p>(files: impl IntoIterator<Item = &'p Path>) -> Result<WorkDir, Error> {
        let work = WorkDir::new()?;
        for (i, file) in files.into_iter().enumerate() {
            let name = file.file_name().unwrap_or_default().to_string_lossy();
            let to = work.0.join(format!("{i}-{name}"));
            std::fs::copy(file, &to).map_err(|e| Error::read(file, e))?;
        }
        Ok(work)
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo(name: &str, files: &[(&str, &str)]) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("cozystack-built-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join(".git")).unwrap();
        for (path, text) in files {
            let path = dir.join(path);
            std::fs::create_dir_all(path.parent().unwrap_or(&dir)).unwrap();
            std::fs::write(&path, text).unwrap();
        }
        dir
    }

    /// What `path` builds for `spec`, with no variable and no GitRepository.
    fn built(path: &Path, spec: &Spec) -> Result<Vec<Manifest>, Error> {
        build(path, spec, &BTreeMap::new(), &GitRepository::default())
    }

    fn spec(fields: &str) -> Spec {
        let text = format!(
            "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {{name: apps, namespace: cozy-fluxcd}}\nspec: {{prune: true, path: ./apps{fields}}}\n"
        );
        Spec::of(&serde_yaml::from_str(&text).unwrap(), "ks.yaml").unwrap_or_else(|e| panic!("{e}"))
    }

    const POSTGRES: &str = "apiVersion: apps.cozystack.io/v1alpha1\nkind: Postgres\nmetadata: {name: db, namespace: tenant-acme}\nspec: {}\n";
    const REDIS: &str =
        "apiVersion: apps.cozystack.io/v1alpha1\nkind: Redis\nmetadata: {name: cache}\nspec: {}\n";

    fn names(built: &[Manifest]) -> Vec<String> {
        built
            .iter()
            .map(|m| format!("{} {}", m.reference(), m.object["metadata"]["labels"]))
            .collect()
    }

    #[test]
    fn a_folder_without_a_kustomization_is_built_with_the_spec_s_names_and_metadata() {
        // generateKustomization lists the manifests; WriteFile sets targetNamespace, namePrefix
        // and nameSuffix in it; apply sets commonMetadata on every object.
        let root = repo(
            "generated",
            &[
                ("apps/db.yaml", POSTGRES),
                ("apps/nested/cache.yml", REDIS),
                ("apps/notes.txt", "x"),
            ],
        );
        let spec = spec(
            ", targetNamespace: tenant-shop, namePrefix: p-, nameSuffix: -s, commonMetadata: {labels: {team: shop}}",
        );
        let built = built(&root.join("apps"), &spec).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            names(&built),
            [
                r#"Postgres tenant-shop/p-db-s {"team":"shop"}"#,
                r#"Redis tenant-shop/p-cache-s {"team":"shop"}"#
            ]
        );
        assert!(
            built[0]
                .origin
                .contains("(built as cozy-fluxcd/apps builds it), document 1"),
            "{}",
            built[0].origin
        );
        // The folder itself is left as it lies: the build runs on a copy.
        assert!(!root.join("apps/kustomization.yaml").exists());
    }

    #[test]
    fn the_spec_overrides_the_folder_s_own_kustomization_and_adds_its_patches() {
        let root = repo(
            "own",
            &[
                (
                    "apps/kustomization.yaml",
                    "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: tenant-acme\nresources: [db.yaml]\n",
                ),
                ("apps/db.yaml", POSTGRES),
            ],
        );
        let spec = spec(
            ", targetNamespace: tenant-prod, patches: [{patch: '[{\"op\": \"add\", \"path\": \"/spec/replicas\", \"value\": 3}]', target: {kind: Postgres}}]",
        );
        let built = built(&root.join("apps"), &spec).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(built.len(), 1);
        assert_eq!(built[0].reference(), "Postgres tenant-prod/db");
        assert_eq!(built[0].object["spec"], json!({"replicas": 3}));
    }

    #[test]
    fn a_build_flux_would_fail_is_an_error_naming_the_folder() {
        // Two files holding one object: kustomize refuses the duplicate id, so nothing lands.
        let root = repo(
            "duplicate",
            &[("apps/a.yaml", POSTGRES), ("apps/b.yaml", POSTGRES)],
        );
        let folder = root.join("apps");
        let err = built(&folder, &spec("")).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("{}: `", folder.display())),
            "{err}"
        );
        assert!(err.contains("already registered id"), "{err}");
        assert!(
            !err.contains("cozystack-fluxbuild-"),
            "the copy is not named: {err}"
        );
        // A SOPS document without spec.decryption: applied as it is, refused at the stage.
        let sops = "apiVersion: v1\nkind: Secret\nmetadata: {name: creds, namespace: tenant-acme}\ndata:\n  password: 'ENC[AES256_GCM,data:x]'\nsops:\n  mac: 'ENC[AES256_GCM,data:y]'\n  version: 3.8.1\n";
        let root = repo(
            "sops",
            &[("apps/db.yaml", POSTGRES), ("apps/creds.yaml", sops)],
        );
        let err = built(&root.join("apps"), &spec(""))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("Secret tenant-acme/creds is encrypted with SOPS and the Kustomization cozy-fluxcd/apps has no spec.decryption"),
            "{err}"
        );
        let decrypted = spec(", decryption: {provider: sops}");
        assert_eq!(built(&root.join("apps"), &decrypted).unwrap().len(), 2);
        // A folder the artifact leaves out.
        let root = repo(
            "ignored",
            &[(".sourceignore", "apps/\n"), ("apps/db.yaml", POSTGRES)],
        );
        let err = built(&root.join("apps"), &spec(""))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("the artifact source-controller packs holds no such folder"),
            "{err}"
        );
    }

    #[test]
    fn a_kustomization_states_prune_and_post_build() {
        let parse = |text: &str| Spec::of(&serde_yaml::from_str(text).unwrap(), "ks.yaml");
        let head = "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: a, namespace: b}\n";
        let kept = parse(&format!("{head}spec: {{prune: false, path: ./a}}\n")).unwrap();
        assert!(!kept.prune && kept.post_build.is_none());
        let substituted = parse(&format!(
            "{head}spec: {{prune: true, postBuild: {{substitute: {{x: y}}}}}}\n"
        ))
        .unwrap();
        assert!(substituted.prune && substituted.post_build.is_some());
        assert_eq!(
            parse(&format!("{head}spec: {{path: ./a}}\n"))
                .unwrap_err()
                .to_string(),
            "ks.yaml: no spec.prune (the CRD requires it: true or false)"
        );
        assert!(
            parse("apiVersion: v1\nkind: ConfigMap\n")
                .unwrap_err()
                .to_string()
                .contains("not a Flux Kustomization")
        );
    }
}
