//! `artifacthub-pkg.yml` in the layout `kwctl scaffold artifacthub` emits, derived from the
//! policy metadata so that rules and context-aware resources have one source.

use serde::Serialize;
use serde_json::{Value, json};

use crate::metadata::{MetadataError, SOURCE, VERSION};

fn annotation<'m>(metadata: &'m Value, key: &str) -> Result<&'m str, MetadataError> {
    metadata["annotations"][key].as_str().ok_or_else(|| {
        MetadataError::Invalid(format!("annotation {key} is required for Artifact Hub"))
    })
}

fn yaml_block(value: &Value) -> Result<String, MetadataError> {
    Ok(serde_yaml::to_string(value)?)
}

/// Kubewarden's verificationConfig for the project's signatures.
pub const VERIFICATION_CONFIG: &str = "deploy/verification-config.yaml";

/// The reference pages Artifact Hub links to, at the released version's tag.
pub const DOCS: &[(&str, &str)] = &[
    ("rules", "docs/rules.md"),
    ("stock rule set", "docs/stock-rules.md"),
    ("settings", "docs/settings.md"),
    ("identities", "docs/identities.md"),
    ("host calls", "docs/host-calls.md"),
    ("security model", "docs/security.md"),
    ("operator's tool", "docs/operator-tool.md"),
    ("rolling it out", "docs/rollout.md"),
    ("benchmarks", "docs/benchmarks.md"),
];

#[derive(Serialize)]
struct Link {
    name: &'static str,
    url: String,
}

#[derive(Serialize)]
struct Image {
    name: &'static str,
    image: String,
}

#[derive(Serialize)]
struct Annotations {
    #[serde(rename = "kubewarden/mutation")]
    mutation: String,
    #[serde(rename = "kubewarden/contextAwareResources")]
    context_aware_resources: String,
    #[serde(rename = "kubewarden/rules")]
    rules: String,
    #[serde(rename = "kubewarden/resources")]
    resources: String,
    #[serde(
        rename = "kubewarden/questions-ui",
        skip_serializing_if = "Option::is_none"
    )]
    questions_ui: Option<String>,
    /// What changed in this version, from CHANGELOG.md, as Artifact Hub shows it.
    #[serde(
        rename = "artifacthub.io/changes",
        skip_serializing_if = "Option::is_none"
    )]
    changes: Option<String>,
}

/// One entry of `artifacthub.io/changes`: its kind (Keep a Changelog's section, lowercase) and
/// its description.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct Change {
    pub kind: String,
    pub description: String,
}

/// The changes of `version` in a Keep a Changelog document: every bullet under `### Added`,
/// `Changed`, `Deprecated`, `Removed`, `Fixed` or `Security` of its `## [version]` section, each
/// one line (Markdown emphasis and links kept as written). An error when the section is missing
/// or holds none: a release says what changed.
pub fn changes(changelog: &str, version: &str) -> Result<Vec<Change>, MetadataError> {
    let heading = format!("## [{version}]");
    let mut lines = changelog.lines().skip_while(|l| !l.starts_with(&heading));
    if lines.next().is_none() {
        return Err(MetadataError::Invalid(format!(
            "CHANGELOG.md has no section {heading}"
        )));
    }
    let mut out: Vec<Change> = Vec::new();
    let mut kind: Option<String> = None;
    for line in lines.take_while(|l| !l.starts_with("## ")) {
        if let Some(name) = line.strip_prefix("### ") {
            let name = name.trim().to_lowercase();
            const KINDS: &[&str] = &[
                "added",
                "changed",
                "deprecated",
                "removed",
                "fixed",
                "security",
            ];
            if !KINDS.contains(&name.as_str()) {
                return Err(MetadataError::Invalid(format!(
                    "CHANGELOG.md {heading}: section ### {} is none of Keep a Changelog's ({})",
                    name,
                    KINDS.join(", ")
                )));
            }
            kind = Some(name);
        } else if let (Some(kind), Some(item)) = (&kind, line.strip_prefix("- ")) {
            out.push(Change {
                kind: kind.clone(),
                description: item.trim().to_owned(),
            });
        } else if let (Some(last), true) = (out.last_mut(), line.starts_with("  ")) {
            last.description.push(' ');
            last.description.push_str(line.trim());
        }
    }
    if out.is_empty() {
        return Err(MetadataError::Invalid(format!(
            "CHANGELOG.md {heading} lists no change"
        )));
    }
    Ok(out)
}

/// The fields in the order `kwctl scaffold artifacthub` writes them.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Package {
    version: String,
    name: String,
    display_name: String,
    created_at: String,
    description: String,
    license: String,
    #[serde(rename = "homeURL")]
    home_url: String,
    containers_images: Vec<Image>,
    keywords: Vec<String>,
    links: Vec<Link>,
    install: String,
    maintainers: Vec<Value>,
    provider: Value,
    recommendations: Vec<Value>,
    annotations: Annotations,
}

/// The package document; `created_at` is kept from the previous one so that regenerating is
/// reproducible, `questions_ui` is the Rancher UI form if any, `changelog` CHANGELOG.md, whose
/// section for the version becomes `artifacthub.io/changes`.
pub fn package(
    metadata: &Value,
    created_at: &str,
    questions_ui: Option<&str>,
    changelog: Option<&str>,
) -> Result<String, MetadataError> {
    let get = |key: &str| annotation(metadata, key).map(str::to_owned);
    let version = get(VERSION)?;
    let changes = changelog
        .map(|text| changes(text, &version))
        .transpose()?
        .map(|changes| serde_yaml::to_string(&changes))
        .transpose()?;
    let oci = get("io.kubewarden.policy.ociUrl")?;
    let source = get(SOURCE)?;
    let author = get("io.kubewarden.policy.author")?;
    let maintainer = match author.split_once('<') {
        Some((name, rest)) => {
            json!({"name": name.trim(), "email": rest.trim_end_matches('>').trim()})
        }
        None => json!({"name": author.trim()}),
    };
    let package = Package {
        name: get("io.kubewarden.policy.title")?,
        display_name: get("io.artifacthub.displayName")?,
        created_at: created_at.to_owned(),
        description: get("io.kubewarden.policy.description")?,
        license: get("io.kubewarden.policy.license")?,
        home_url: get("io.kubewarden.policy.url")?,
        containers_images: vec![Image {
            name: "policy",
            image: format!("{oci}:v{version}"),
        }],
        keywords: get("io.artifacthub.keywords")?
            .split(',')
            .map(|k| k.trim().to_owned())
            .collect(),
        links: vec![
            Link {
                name: "policy",
                url: format!("{source}/releases/download/v{version}/policy.wasm"),
            },
            Link {
                name: "SBOM (CycloneDX)",
                url: format!("{source}/releases/download/v{version}/policy.cdx.json"),
            },
            Link {
                name: "signature verification config",
                url: format!("{source}/blob/v{version}/{VERIFICATION_CONFIG}"),
            },
            Link {
                name: "source",
                url: source.clone(),
            },
        ]
        .into_iter()
        .chain(DOCS.iter().map(|(name, path)| Link {
            name,
            url: format!("{source}/blob/v{version}/{path}"),
        }))
        .collect(),
        install: format!(
            "The policy can be obtained using [`kwctl`](https://github.com/kubewarden/kwctl):\n```console\nkwctl pull {oci}:v{version}\n```\nThen, generate the policy manifest and tune it to your liking. For example:\n```console\nkwctl scaffold manifest -t ClusterAdmissionPolicy --allow-context-aware registry://{oci}:v{version}\n```\nIt needs Kubewarden 1.33 or later (field masks in host calls); 1.38 or later is recommended, since before it the policy-server's lookup caches kept every key they saw (kubewarden/adm-controller#1950). The policy-server needs get/list/watch on namespaces, helmreleases and applicationdefinitions: add them to `policyServer.permissions` of the `admission-controller` chart (Kubewarden 1.37 and later; `kubewarden-defaults` before it), or see deploy/ in the source.\n\nThe artifact is signed with cosign, keyless, by the release workflow of {source} (no key to fetch: the signer is that workflow's identity), and carries a signed CycloneDX SBOM (cosign's `.sbom` attachment). Verify it before it runs:\n```console\nkwctl verify --verification-config-path verification-config.yaml registry://{oci}:v{version}\n```\nwith {VERIFICATION_CONFIG} from the source, which is also what the PolicyServer's `verificationConfig` ConfigMap holds.\n"
        ),
        maintainers: vec![maintainer],
        provider: json!({"name": "kubewarden"}),
        recommendations: vec![
            // Kubewarden 1.37 and later: one chart in place of kubewarden-crds,
            // kubewarden-controller and kubewarden-defaults.
            json!({"url": "https://artifacthub.io/packages/helm/kubewarden/admission-controller"}),
        ],
        annotations: Annotations {
            mutation: metadata["mutating"].as_bool().unwrap_or(false).to_string(),
            context_aware_resources: yaml_block(&metadata["contextAwareResources"])?,
            rules: yaml_block(&metadata["rules"])?,
            resources: get("io.artifacthub.resources")?,
            questions_ui: questions_ui.map(str::to_owned),
            changes,
        },
        version,
    };
    let header = "# Kubewarden Artifacthub Package config\n#\n# Use this config to submit the policy to https://artifacthub.io.\n#\n# Generated from policy-metadata.yml by `make artifacthub-pkg.yml` (the layout of\n# `kwctl scaffold artifacthub`); a test fails when it is out of date.\n";
    Ok(format!("{header}{}", serde_yaml::to_string(&package)?))
}

/// `createdAt` of an existing package document, if any.
pub fn created_at(existing: &str) -> Option<String> {
    let doc: Value = serde_yaml::from_str(existing).ok()?;
    doc["createdAt"].as_str().map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "# Changelog\n\n## [0.2.0] - 2026-12-07\n\n### Changed\n\n- **Breaking:** the default\n  is builtin.\n\n### Added\n\n- A chart.\n\n## [0.1.0] - 2026-12-05\n\n### Added\n\n- The policy.\n";

    #[test]
    fn a_version_s_changes_are_its_section_s_bullets() {
        assert_eq!(
            changes(LOG, "0.2.0").unwrap(),
            [
                Change {
                    kind: "changed".into(),
                    description: "**Breaking:** the default is builtin.".into()
                },
                Change {
                    kind: "added".into(),
                    description: "A chart.".into()
                },
            ]
        );
        assert_eq!(changes(LOG, "0.1.0").unwrap().len(), 1);
        assert_eq!(
            changes(LOG, "0.3.0").unwrap_err().to_string(),
            "policy metadata: CHANGELOG.md has no section ## [0.3.0]"
        );
        let odd = LOG.replace("### Added\n\n- A chart.", "### Improved\n\n- A chart.");
        assert!(
            changes(&odd, "0.2.0")
                .unwrap_err()
                .to_string()
                .contains("### improved is none of")
        );
    }
}
