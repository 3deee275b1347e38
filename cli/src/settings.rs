//! The policy's settings as an operator has them: the ClusterAdmissionPolicy they deployed, a
//! settings object, or none (the stock deployment); and where they came from, which every report
//! names, so a stock judgement is told from a custom one.

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};

use crate::error::Error;
use cozystack_policy_runtime::cluster::ClusterObjects;
use cozystack_resolver::RuleField;
use cozystack_resolver::model::builtin;
use serde_json::{Value, json};

/// Where the settings a verb judges with came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// None given: `{}`, which is what `deploy/` runs.
    Stock,
    /// A settings file, or a ClusterAdmissionPolicy manifest (then its name).
    File {
        path: PathBuf,
        policy: Option<String>,
    },
    /// The `spec.settings` of a ClusterAdmissionPolicy read from the cluster.
    Deployed(String),
    /// A simulator stream's: the settings it starts from (none: the stock deployment), changed
    /// as the stream says.
    Stream {
        name: String,
        from: Box<Origin>,
        changed: bool,
    },
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Stock => f.write_str("no --settings, the stock deployment"),
            Origin::File { path, policy: None } => write!(f, "settings {}", path.display()),
            Origin::File {
                path,
                policy: Some(name),
            } => write!(f, "ClusterAdmissionPolicy {name} in {}", path.display()),
            Origin::Deployed(name) => {
                write!(f, "ClusterAdmissionPolicy {name}, read from the cluster")
            }
            Origin::Stream {
                name,
                from,
                changed,
            } => {
                let how = if *changed {
                    ", changed by the stream"
                } else {
                    ""
                };
                write!(f, "stream {name}: {from}{how}")
            }
        }
    }
}

/// The settings a verb judges with, as the policy-server is handed them (decoded once for the
/// tool's model), and their origin.
#[derive(Debug, Clone)]
pub struct Given {
    pub settings: Settings,
    pub origin: Origin,
}

/// A settings object, or a ClusterAdmissionPolicy (its `spec.settings`); none given is `{}`,
/// the stock deployment.
pub fn read(path: Option<&Path>) -> Result<Given, Error> {
    let Some(path) = path else {
        return Ok(Given::new(json!({}), Origin::Stock));
    };
    let text = std::fs::read_to_string(path).map_err(|e| Error::read(path, e))?;
    // An empty file is what a failed `kubectl get … > settings.yaml` leaves, not `{}`.
    if text.trim().is_empty() {
        return Err(Error::from(format!(
            "{} holds no settings: an empty file is what a failed `kubectl get clusteradmissionpolicy … -o yaml` leaves; write `{{}}` in it, or leave out --settings, to judge as the stock deployment does",
            path.display()
        )));
    }
    let value: Value = serde_yaml::from_str(&text).map_err(|e| Error::decode(path.display(), e))?;
    // A file of comments, or `null`, states nothing either: it is as empty as an empty one.
    if value.is_null() {
        return Err(Error::from(format!(
            "{} holds no settings (only comments, or null): write `{{}}` in it, or leave out --settings, to judge as the stock deployment does",
            path.display()
        )));
    }
    if !value.is_object() {
        return Err(Error::from(format!(
            "{}: the settings are no mapping (a YAML object of the fields docs/settings.md lists)",
            path.display()
        )));
    }
    let policy = (value["kind"] == "ClusterAdmissionPolicy").then(|| {
        value["metadata"]["name"]
            .as_str()
            .unwrap_or("(unnamed)")
            .to_owned()
    });
    let value = match (&policy, value.pointer("/spec/settings")) {
        (Some(_), Some(settings)) => settings.clone(),
        (Some(_), None) => json!({}),
        (None, _) => value,
    };
    Ok(Given::new(
        value,
        Origin::File {
            path: path.to_owned(),
            policy,
        },
    ))
}

impl Given {
    pub fn new(value: Value, origin: Origin) -> Given {
        Given {
            settings: Settings::new(value),
            origin,
        }
    }

    /// The settings of the ClusterAdmissionPolicy `name` deployed in the cluster.
    pub fn deployed(name: &str, value: Value) -> Given {
        Given::new(value, Origin::Deployed(name.to_owned()))
    }

    /// The settings as the policy-server hands them to the module.
    pub fn value(&self) -> &Value {
        self.settings.value()
    }

    /// The settings as the resolver reads them, decoded once.
    pub fn resolved(&self) -> Result<&cozystack_resolver::Settings, Error> {
        Ok(self.settings.resolved()?)
    }

    /// One line for every report: which settings, which rules, which release judged it.
    pub fn judged_by(&self) -> Result<String, Error> {
        let settings = self.resolved()?;
        let kinds: Vec<&str> = settings.definitions.kinds().collect();
        let listed = |what: &str| match kinds.as_slice() {
            [] => String::new(),
            kinds => format!(", {what} {}", kinds.join(", ")),
        };
        let source = settings.definition_source;
        let rules = if source.reads_cluster() {
            format!(
                "the cluster's ApplicationDefinitions{}",
                listed("the settings filling what they lack for")
            )
        } else if source.builds_on_stock() {
            format!(
                "the built-in rule set ({}){}",
                builtin::SOURCE,
                listed("blocks overridden for")
            )
        } else {
            format!("the settings' definitions alone ({} kinds)", kinds.len())
        };
        Ok(format!(
            "judged by: {}; rules: {rules}; release: {}",
            self.origin,
            settings.judged().describe()
        ))
    }
}

pub use cozystack_platform::admission::{Settings, check_settings as check};

/// The rule blocks of the design that count, protect and share (every rule field but the
/// dashboard's): a definition that states none of them leaves a kind with no such rule.
fn rule_blocks() -> Vec<&'static str> {
    RuleField::ALL
        .iter()
        .filter(|field| **field != RuleField::Dashboard)
        .map(|field| field.key())
        .collect()
}

/// Refuses settings that, on this cluster, state no count, protection or capability rule at
/// all (the ApplicationDefinitions of every supported release state none of the design's
/// blocks), and, under `applicationDefinitions`, a kind under `definitions` the cluster does not
/// define: either would judge nothing and say nothing of it.
/// `allow_empty` waives the first (nothing to judge), never the second (a typo).
pub fn check_rules_stated(
    given: &Given,
    cluster: &ClusterObjects,
    allow_empty: bool,
) -> Result<(), Error> {
    let settings = given.resolved()?;
    let source = settings.definition_source;
    if source.builds_on_stock() {
        return Ok(());
    }
    if !source.reads_cluster() {
        if settings.definitions.is_empty() && !allow_empty {
            return Err(
                "the settings state no rule: definitionSource: settings with no definitions judges no count, protection or capability; drop definitionSource to judge with the built-in rule set as deploy/ does, or pass --allow-empty"
                    .into(),
            );
        }
        return Ok(());
    }
    let definitions: Vec<Value> = cluster.of_kind("ApplicationDefinition").collect();
    let kinds: BTreeSet<&str> = definitions
        .iter()
        .filter_map(|d| d.pointer("/spec/application/kind").and_then(Value::as_str))
        .collect();
    // A stock kind the cluster's release does not serve (ComputePlane on v1.6) is no typo.
    for kind in settings.definitions.kinds() {
        let known = kinds.contains(kind)
            || builtin::examined(kind)
            || settings.release_prefixes.contains_key(kind);
        if !known {
            return Err(format!(
                "the settings are invalid: definitions.{kind}: neither the cluster's ApplicationDefinitions nor the built-in rule set has kind {kind} (the cluster's kinds: {})",
                kinds.iter().copied().collect::<Vec<_>>().join(", ")
            )
            .into());
        }
    }
    let blocks = rule_blocks();
    let states_rule = definitions.iter().any(|d| {
        blocks
            .iter()
            .any(|block| d["spec"].get(*block).is_some_and(|b| !b.is_null()))
    });
    if states_rule || !settings.definitions.is_empty() || allow_empty {
        return Ok(());
    }
    Err(format!(
        "the settings state no rule on this cluster: definitionSource: applicationDefinitions, and none of its {} ApplicationDefinitions states {} (no supported Cozystack release's do) nor do the settings' definitions; drop definitionSource to judge with the built-in rule set as deploy/ does, or pass --allow-empty",
        definitions.len(),
        blocks.join(", ")
    )
    .into())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`check_rules_stated`] of settings given as a value.
    fn rules_stated(
        settings: &Value,
        cluster: &ClusterObjects,
        allow_empty: bool,
    ) -> Result<(), Error> {
        check_rules_stated(
            &Given::new(settings.clone(), Origin::Stock),
            cluster,
            allow_empty,
        )
    }

    fn cluster(yaml: &str) -> ClusterObjects {
        ClusterObjects::from_yaml(yaml).unwrap()
    }

    const BARE: &str = "apiVersion: cozystack.io/v1alpha1\nkind: ApplicationDefinition\nmetadata: {name: monitoring}\nspec:\n  application: {kind: Monitoring}\n  dashboard: {module: true}\n";

    /// An empty settings file is refused, never read as the stock deployment's `{}`.
    #[test]
    fn an_empty_settings_file_is_refused() {
        let path = std::env::temp_dir().join("cozystack-policy-empty-settings.yaml");
        std::fs::write(&path, "  \n").unwrap();
        let err = read(Some(&path)).unwrap_err().to_string();
        assert_eq!(
            err,
            format!(
                "{} holds no settings: an empty file is what a failed `kubectl get clusteradmissionpolicy … -o yaml` leaves; write `{{}}` in it, or leave out --settings, to judge as the stock deployment does",
                path.display()
            )
        );
    }

    /// A file of comments or `null` states nothing, and a list is no settings.
    #[test]
    fn settings_that_are_no_mapping_are_refused() {
        for (name, text, said) in [
            (
                "comment",
                "# cozystackRelease: v1.6.2\n",
                "holds no settings (only comments, or null)",
            ),
            (
                "null",
                "null\n",
                "holds no settings (only comments, or null)",
            ),
            (
                "list",
                "- definitionSource\n",
                "the settings are no mapping",
            ),
        ] {
            let path = std::env::temp_dir().join(format!("cozystack-policy-{name}-settings.yaml"));
            std::fs::write(&path, text).unwrap();
            let err = read(Some(&path)).unwrap_err().to_string();
            assert!(
                err.starts_with(&path.display().to_string()) && err.contains(said),
                "{err}"
            );
        }
    }

    #[test]
    fn the_stock_deployment_is_named_with_its_rules_and_release() {
        let given = read(None).unwrap();
        assert_eq!(
            given.judged_by().unwrap(),
            format!(
                "judged by: no --settings, the stock deployment; rules: the built-in rule set ({}); release: {}",
                builtin::SOURCE,
                cozystack_resolver::Settings::default().judged().describe()
            )
        );
        let custom = Given::deployed(
            "cozystack-capabilities",
            json!({"definitionSource": "applicationDefinitions", "cozystackRelease": "v1.5.3",
                "definitions": {"Monitoring": {}}}),
        );
        assert_eq!(
            custom.judged_by().unwrap(),
            "judged by: ClusterAdmissionPolicy cozystack-capabilities, read from the cluster; rules: the cluster's ApplicationDefinitions, the settings filling what they lack for Monitoring; release: Cozystack v1.5.3"
        );
    }

    #[test]
    fn settings_that_state_no_rule_are_refused() {
        let bare = cluster(BARE);
        let listed = json!({"definitionSource": "applicationDefinitions"});
        assert_eq!(
            rules_stated(&listed, &bare, false).unwrap_err().to_string(),
            "the settings state no rule on this cluster: definitionSource: applicationDefinitions, and none of its 1 ApplicationDefinitions states cardinality, protection, capability (no supported Cozystack release's do) nor do the settings' definitions; drop definitionSource to judge with the built-in rule set as deploy/ does, or pass --allow-empty"
        );
        assert_eq!(
            rules_stated(&json!({"definitionSource": "settings"}), &bare, false)
                .unwrap_err()
                .to_string(),
            "the settings state no rule: definitionSource: settings with no definitions judges no count, protection or capability; drop definitionSource to judge with the built-in rule set as deploy/ does, or pass --allow-empty"
        );
        // The built-in set, a definition stating a block, or settings giving one, are rules.
        rules_stated(&json!({}), &bare, false).unwrap();
        let stated = cluster(&BARE.replace(
            "dashboard: {module: true}",
            "cardinality: {scope: tenant, max: 1}",
        ));
        rules_stated(&listed, &stated, false).unwrap();
        let given = json!({"definitionSource": "applicationDefinitions",
            "definitions": {"Monitoring": {"cardinality": {"scope": "tenant", "max": 1}}}});
        rules_stated(&given, &bare, false).unwrap();
    }

    #[test]
    fn a_kind_the_cluster_does_not_define_is_refused() {
        let given = json!({"definitionSource": "applicationDefinitions",
            "definitions": {"Monitorng": {"cardinality": {"scope": "tenant", "max": 1}}}});
        assert_eq!(
            rules_stated(&given, &cluster(BARE), false)
                .unwrap_err()
                .to_string(),
            "the settings are invalid: definitions.Monitorng: neither the cluster's ApplicationDefinitions nor the built-in rule set has kind Monitorng (the cluster's kinds: Monitoring)"
        );
        // --allow-empty waives emptiness, never a typo.
        assert!(
            rules_stated(&given, &cluster(BARE), true)
                .unwrap_err()
                .to_string()
                .contains("definitions.Monitorng")
        );
        let listed = json!({"definitionSource": "applicationDefinitions"});
        rules_stated(&listed, &cluster(BARE), true).unwrap();
        // Gateway is rendered with no definition of its own; ComputePlane is a stock kind a
        // v1.6 cluster does not serve; a kind of one's own is named by its release prefix.
        for kind in ["Gateway", "ComputePlane"] {
            let given = json!({"definitionSource": "applicationDefinitions",
                "definitions": {kind: {"cardinality": {"scope": "tenant", "max": 1}}}});
            rules_stated(&given, &cluster(BARE), false).unwrap();
        }
        let own = json!({"definitionSource": "applicationDefinitions",
            "definitions": {"MyApp": {"cardinality": {"scope": "tenant", "max": 1}}},
            "releasePrefixes": {"MyApp": "myapp-"}});
        rules_stated(&own, &cluster(BARE), false).unwrap();
    }
}
