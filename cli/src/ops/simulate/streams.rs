//! The deployments the simulator plays, as data (`e2e/simulate/streams.yaml`): each stream a
//! cluster, the settings an operator deploys on it (a file, changed by a JSON merge patch), the
//! seeds it plays, and the releases it upgrades through. `make simulate-ci` plays them all, so
//! a configuration an operator may deploy is a line of data, not a Makefile target.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use crate::error::Error;

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
        settings
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
