//! The deployments the simulator plays, as data (`e2e/simulate/streams.yaml`): each stream a
//! cluster, the settings an operator deploys on it (a file, changed by a JSON merge patch), the
//! seeds it plays, and the releases it upgrades through. `make simulate-ci` plays them all, so
//! a configuration an operator may deploy is a line of data, not a Makefile target.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{Value, json};

use cozystack_platform::error::Error;
use cozystack_platform::writes;
use cozystack_policy_runtime::cluster::ClusterObjects;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Streams {
    pub streams: Vec<Stream>,
}

/// One deployment played.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Stream {
    /// What the summary calls it.
    pub name: String,
    /// The cluster it starts from (a dump file or folder, from the workspace root).
    pub dump: PathBuf,
    /// The settings (or ClusterAdmissionPolicy) it starts from; none: the stock deployment.
    #[serde(default)]
    pub settings: Option<PathBuf>,
    /// A JSON merge patch (RFC 7386) over those settings: what this deployment changes.
    #[serde(default)]
    pub set: Option<Value>,
    pub seed: u64,
    pub runs: u64,
    #[serde(default = "steps")]
    pub steps: usize,
    /// The releases it upgrades through, in order, each with a cluster that release renders
    /// (its ApplicationDefinitions are what the upgrade ships).
    #[serde(default)]
    pub upgrades: Vec<UpgradeTo>,
    /// Kinds whose ApplicationDefinitions this install gives another `spec.release.prefix`,
    /// which its settings' `releasePrefixes` then state (docs/settings.md): both are set.
    #[serde(default)]
    pub prefixes: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpgradeTo {
    pub release: String,
    pub dump: PathBuf,
}

fn steps() -> usize {
    200
}

impl Streams {
    pub fn read(path: &Path) -> Result<Streams, Error> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::read(path, e))?;
        let streams: Streams =
            serde_yaml::from_str(&text).map_err(|e| Error::decode(path.display(), e))?;
        if streams.streams.is_empty() {
            return Err(Error::decode(path.display(), "no stream to play"));
        }
        Ok(streams)
    }
}

impl Stream {
    /// `settings` with the stream's changes.
    pub fn settings(&self, mut settings: Value) -> Value {
        if let Some(patch) = &self.set {
            json_patch::merge(&mut settings, patch);
        }
        if !self.prefixes.is_empty() {
            json_patch::merge(&mut settings, &json!({"releasePrefixes": self.prefixes}));
        }
        settings
    }

    /// `cluster` with the stream's release prefixes in its ApplicationDefinitions.
    pub fn cluster(&self, mut cluster: ClusterObjects) -> ClusterObjects {
        for at in writes::definition_positions(&cluster) {
            let Some(mut definition) = cluster.value(at) else {
                continue;
            };
            let kind = definition["spec"]["application"]["kind"].as_str();
            if let Some(prefix) = kind.and_then(|kind| self.prefixes.get(kind)) {
                definition["spec"]["release"]["prefix"] = json!(prefix);
                cluster.set(at, &definition);
            }
        }
        cluster
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_changes_the_settings_it_starts_from_as_a_merge_patch() {
        let stream: Stream = serde_yaml::from_str(
            "name: x\ndump: d\nseed: 1\nruns: 1\nset: {platformWriters: deny, definitions: {Etcd: null}}",
        )
        .unwrap();
        let settings = json!({"platformWriters": "warn", "definitions": {"Etcd": {}, "Info": {}}});
        assert_eq!(
            stream.settings(settings),
            json!({"platformWriters": "deny", "definitions": {"Info": {}}})
        );
        assert_eq!(stream.steps, 200);
        let unknown =
            serde_yaml::from_str::<Stream>("name: x\ndump: d\nseed: 1\nruns: 1\nseeds: 2");
        assert!(
            unknown
                .unwrap_err()
                .to_string()
                .contains("unknown field `seeds`")
        );
    }
}
