//! The module as the platform's admission: a request judged on the state it is sent on
//! ([`on_state`]), the settings as the policy-server checks and the resolver reads them, and a
//! change set or Kustomizations played through the platform with every request judged.

use std::cell::OnceCell;

use cozystack_policy_runtime::cluster::ClusterObjects;
use cozystack_policy_runtime::policy::Policy;
use serde_json::Value;

use crate::apiserver::Identity;
use crate::error::Error;
use crate::flux::apply::{Applied, Applier, ChangeSet, Report};
use crate::flux::{apply, kustomizations};
use crate::sequence::{Admit, Platform, Sender};
use crate::state::State;

/// The policy's response to `request` on `cluster`: the payload the policy-server sends, its GETs
/// and lists served through the state's index and reflectors.
pub fn on_state(
    policy: &Policy,
    settings: &Value,
    cluster: &mut State,
    request: &Value,
) -> Result<Value, Error> {
    let payload = cozystack_policy_runtime::policy::payload(request, settings)?;
    let (objects, cache) = cluster.lend();
    let state = policy.host_state(objects, Vec::new(), Some(cache.clone()));
    let evaluation = policy.validate_with(&payload, state);
    cluster.restore(cache);
    Ok(evaluation?.response)
}

/// The settings of a run: the object the policy-server hands the module, and what the resolver
/// reads of it for the tool's model of the cluster (the Tenant chart's switches, the release),
/// decoded once, when first asked: settings the module refuses are refused in its words first
/// ([`check_settings`]).
#[derive(Debug, Clone)]
pub struct Settings {
    value: Value,
    resolved: OnceCell<cozystack_resolver::Settings>,
}

impl Settings {
    pub fn new(value: Value) -> Settings {
        Settings {
            value,
            resolved: OnceCell::new(),
        }
    }

    /// The settings as the policy-server hands them to the module.
    pub fn value(&self) -> &Value {
        &self.value
    }

    /// The settings as the resolver reads them.
    pub fn resolved(&self) -> Result<&cozystack_resolver::Settings, Error> {
        if let Some(resolved) = self.resolved.get() {
            return Ok(resolved);
        }
        let resolved = cozystack_resolver::Settings::for_request(&self.value.to_string())
            .map_err(|e| format!("settings: {e}"))?;
        Ok(self.resolved.get_or_init(|| resolved))
    }
}

/// What the policy-server does before it serves a request: `validate_settings`, and refuse to
/// go on when the policy answers that the settings are invalid.
pub fn check_settings(policy: &Policy, settings: &Value) -> Result<(), Error> {
    let valid = policy.validate_settings(settings)?;
    if valid["valid"] == true {
        return Ok(());
    }
    Err(format!(
        "the settings are invalid: {}",
        valid["message"].as_str().unwrap_or("no reason given")
    )
    .into())
}

/// Called with each judged request and the cluster it was judged on (to keep them).
pub type Observer<'a> = dyn FnMut(usize, &Value, &ClusterObjects) -> Result<(), Error> + 'a;

/// The module as admission: each request shown to the observer, then judged on the state it
/// is sent on.
struct Judge<'a> {
    policy: &'a Policy,
    settings: &'a Value,
    observe: &'a mut Observer<'a>,
    judged: usize,
}

impl Admit for Judge<'_> {
    fn admit(&mut self, _: &Sender, request: &Value, state: &mut State) -> Result<Value, Error> {
        self.judged += 1;
        (self.observe)(self.judged, request, state.cluster())?;
        on_state(self.policy, self.settings, state, request)
    }
}

/// The platform as the settings name it, with the module as its admission.
fn platform<'a>(
    policy: &'a Policy,
    settings: &'a Settings,
    cluster: &ClusterObjects,
    observe: &'a mut Observer<'a>,
) -> Result<(Platform, Judge<'a>), Error> {
    check_settings(policy, settings.value())?;
    let platform = Platform::of(settings.resolved()?, cluster);
    let judge = Judge {
        policy,
        settings: settings.value(),
        observe,
        judged: 0,
    };
    Ok((platform, judge))
}

/// Judges `changes` against `cluster` as `identity` applies them under `settings`; `observe`
/// sees each request and the cluster it is judged on.
pub fn run<'a>(
    policy: &'a Policy,
    settings: &'a Settings,
    cluster: ClusterObjects,
    changes: &ChangeSet,
    identity: &'a Identity,
    applier: Applier,
    observe: &'a mut Observer<'a>,
) -> Result<Applied, Error> {
    let (mut platform, mut judge) = self::platform(policy, settings, &cluster, observe)?;
    let client = Sender::Client {
        identity: identity.clone(),
        manager: applier.manager(),
    };
    apply::run(&mut platform, cluster, changes, client, applier, &mut judge)
}

/// Judges Kustomizations in `dependsOn` order ([`kustomizations::run`]), each applied as its
/// unit's identity.
pub fn run_kustomizations<'a>(
    policy: &'a Policy,
    settings: &'a Settings,
    cluster: ClusterObjects,
    units: &[kustomizations::Unit],
    outside: &std::collections::BTreeMap<String, kustomizations::Outside>,
    observe: &'a mut Observer<'a>,
) -> Result<Report, Error> {
    let (mut platform, mut judge) = self::platform(policy, settings, &cluster, observe)?;
    kustomizations::run(&mut platform, cluster, units, outside, &mut judge)
}
