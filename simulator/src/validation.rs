//! Validation is a promise too: settings broken in one place, drawn from the settings' own
//! grammar (docs/settings.md), are refused by `validate_settings` with the path named, and a
//! request judged under them anyway is refused (400), never judged by a reading the validation
//! did not make; every supported release name is accepted and judged. Every class of break of
//! every field is tried once per stream, on its settings, before its runs.

use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;
use serde_json::{Value, json};

use super::statement;
use cozystack_platform::admission::on_state as evaluate;
use cozystack_platform::error::Error;
use cozystack_platform::state::State;
use cozystack_platform::writes::Kinds;
use cozystack_policy_runtime::cluster::ClusterObjects;
use cozystack_policy_runtime::policy::Policy;

/// The promise, as the report names it.
pub const INVARIANT: &str =
    "validation: settings broken in one place are refused naming the path, and judged as validated";

/// Mixed into a stream's seed for the broken settings it draws ("valid").
const VALIDATION_STREAM: u64 = 0x76_616c_6964;

/// The release names the settings accept (docs/releases.md).
const RELEASES: &[&str] = &[
    "v1.5.0", "v1.5.1", "v1.5.2", "v1.5.3", "v1.5.4", "v1.6.0", "v1.6.1", "v1.6.2", "main",
];

/// A setting broken in one place: the path validation must name, the settings, and which
/// requests a module asked to judge under them anyway must refuse.
#[derive(Debug, Clone)]
pub struct Broken {
    pub path: String,
    pub settings: Value,
    pub refused: Refused,
}

/// The requests settings broken at a path make the module refuse (400): every one for a shared
/// field, those of the kind whose block it is (the module decodes a block when a request of its
/// kind needs it), none it must for a key that names no kind (validation alone refuses it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    Every,
    Kind(String),
    Validation,
}

/// What the promise found wrong: the settings, the path broken in them, what was answered,
/// and a request the module must refuse (400) under them.
#[derive(Debug)]
pub struct Finding {
    pub settings: Value,
    pub path: String,
    pub what: String,
    pub request: Option<Value>,
}

/// The settings' grammar broken one place at a time (`e2e/settings-breaks.yaml`, the table the
/// resolver's own test walks too).
#[derive(serde::Deserialize)]
struct Breaks {
    shared: std::collections::BTreeMap<String, Vec<Value>>,
    prefix: Vec<Value>,
    blocks: std::collections::BTreeMap<String, Vec<Value>>,
}

/// Every class of break of every field of the settings' grammar (docs/settings.md), each at one
/// path of `base`, as an operator mistypes it (`e2e/settings-breaks.yaml`): a wrong type, an
/// unknown or miscased enum value, an empty identity, a class no label key can hold, a count
/// that is not one, a prefix no ApplicationDefinition can have (by its case too), an unknown key
/// at each level, a kind the rule source does not know. A kind's breaks fall on a kind drawn
/// from `rng` (the seed chooses which kind, never whether a class is tried).
fn breaks(rng: &mut Pcg64, base: &Value) -> Result<Vec<Broken>, Error> {
    let table: Breaks = serde_yaml::from_str(include_str!("../../e2e/settings-breaks.yaml"))
        .map_err(|e| Error::decode("e2e/settings-breaks.yaml", e))?;
    let kinds: Vec<&str> = statement::KINDS.iter().map(|k| k.kind).collect();
    let mut kind = || kinds[rng.random_range(0..kinds.len())].to_owned();
    let mut out = Vec::new();
    for (field, values) in table.shared {
        for value in values {
            out.push(broken(base, &[&field], value, Refused::Every));
        }
    }
    for value in table.prefix {
        out.push(broken(
            base,
            &["releasePrefixes", &kind()],
            value,
            Refused::Every,
        ));
    }
    for (block, values) in table.blocks {
        for value in values {
            let kind = kind();
            let refused = Refused::Kind(kind.clone());
            out.push(broken(
                base,
                &["definitions", &kind, &block],
                value,
                refused,
            ));
        }
    }
    // A kind the rule source does not know (a typo); under `applicationDefinitions` the cluster
    // says which kinds exist, and the operator's tool holds the keys against it.
    if base["definitionSource"] != "applicationDefinitions" {
        let typo = format!("{}s", kind());
        let block = json!({"dashboard": {"visibility": "module"}});
        out.push(broken(
            base,
            &["definitions", &typo],
            block,
            Refused::Validation,
        ));
    }
    Ok(out)
}

/// `base` with `value` at `path`, the objects on the way made where missing.
fn broken(base: &Value, path: &[&str], value: Value, refused: Refused) -> Broken {
    let mut settings = base.clone();
    let mut at = &mut settings;
    for key in &path[..path.len() - 1] {
        if !at[*key].is_object() {
            at[*key] = json!({});
        }
        at = &mut at[*key];
    }
    at[path[path.len() - 1]] = value;
    Broken {
        path: path.join("."),
        settings,
        refused,
    }
}

/// A request a rule of `kind` judges, among the kinds the cluster serves: the audit scanner's
/// replay of an instance of it in tenant-root, as cozystack-api writes its release (the module decodes a kind's block when a
/// request of that kind needs it).
fn probe(kinds: &Kinds, kind: &str) -> Result<Option<Value>, Error> {
    let Some(served) = kinds.get(kind) else {
        return Ok(None);
    };
    let app = super::world::app_object(kind, "tenant-root", "probe", &json!({}));
    let release = served.release_for(&app, None);
    Ok(Some(cozystack_policy_runtime::audit::replay_request(
        &release,
    )?))
}

/// The finding as an e2e scenario: the request judged under the broken settings is refused
/// with 400 (what the landed module answers, and what a module that judges them otherwise
/// does not).
pub fn scenario(found: &Finding, seed: u64) -> Result<Option<String>, Error> {
    let Some(request) = &found.request else {
        return Ok(None);
    };
    let scenario = json!([{
        "name": format!("simulate-validation-seed-{seed}"),
        "description": format!("Found by the lifecycle simulator's validation promise (seed {seed}): {}", found.what),
        "settings": found.settings,
        "admissionRequest": request,
        // validate_settings refuses them; a request judged under them anyway is refused with
        // the path in its message.
        "expect": {
            "settingsValid": false,
            "allowed": false,
            "code": 400,
            "messageMatches": regex::escape(&found.path),
        },
    }]);
    serde_yaml::to_string(&scenario)
        .map(Some)
        .map_err(|e| Error::Encode {
            what: "the counterexample",
            reason: e.to_string(),
        })
}

/// Checks every break of the stream's settings (a block's on a kind drawn from `seed`), then
/// every release name.
pub fn check(
    policy: &Policy,
    base: &Value,
    cluster: &ClusterObjects,
    seed: u64,
) -> Result<Option<Finding>, Error> {
    let mut rng = Pcg64::seed_from_u64(seed ^ VALIDATION_STREAM);
    let mut state = State::new(cluster.clone());
    let kinds = Kinds::read(cluster);
    for broken in breaks(&mut rng, base)? {
        let answer = policy.validate_settings(&broken.settings)?;
        let message = answer["message"].as_str().unwrap_or_default();
        // The unknown key is named where the path's last key is the mistake.
        let named = message.contains(&broken.path)
            || broken
                .path
                .rsplit('.')
                .next()
                .is_some_and(|key| message.contains(&format!("`{key}`")));
        let kind = match &broken.refused {
            Refused::Every => Some("Postgres"),
            Refused::Kind(kind) => Some(kind.as_str()),
            Refused::Validation => None,
        };
        let request = match kind {
            Some(kind) => probe(&kinds, kind)?,
            None => None,
        };
        if answer["valid"] == true || !named {
            return Ok(Some(Finding {
                path: broken.path.clone(),
                request,
                what: format!(
                    "{} at {}: validate_settings answered {answer}",
                    if answer["valid"] == true {
                        "accepted a malformed value"
                    } else {
                        "refused without naming the path"
                    },
                    broken.path
                ),
                settings: broken.settings,
            }));
        }
        // The policy-server never serves them; a request judged under them anyway is refused.
        let Some(request) = request else {
            continue;
        };
        let answer = evaluate(policy, &broken.settings, &mut state, &request)?;
        if answer["accepted"] == true {
            return Ok(Some(Finding {
                what: format!(
                    "a {} request was judged under settings validation refuses at {}: {answer}",
                    kind.unwrap_or_default(),
                    broken.path
                ),
                path: broken.path.clone(),
                settings: broken.settings,
                request: Some(request),
            }));
        }
    }
    let request = probe(&kinds, "Postgres")?;
    for release in RELEASES {
        let mut settings = base.clone();
        settings["cozystackRelease"] = json!(release);
        let answer = policy.validate_settings(&settings)?;
        let judged = match &request {
            Some(request) => evaluate(policy, &settings, &mut state, request)?,
            None => Value::Null,
        };
        if answer["valid"] != true || judged["code"] == 400 {
            return Ok(Some(Finding {
                what: format!(
                    "the supported release {release} is not accepted and judged: validate_settings {answer}, a Postgres request {judged}"
                ),
                path: "cozystackRelease".into(),
                settings,
                request: None,
            }));
        }
    }
    Ok(None)
}
