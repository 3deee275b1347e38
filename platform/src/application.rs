//! What cozystack-api does with one Application write (`pkg/registry/apps/application/rest.go`,
//! Cozystack 3c780acd): the app's release it reads the request's old object from, what it
//! refuses before the admission chain (its validation of a new Application,
//! [`apiserver::application_refusal`], and from v1.6.0 a new Tenant's quota, [`quota`]), and
//! what fails after admission admitted the write: creating a release whose name another holds
//! (the storage's 409, which cozystack-api wraps as text, so its client gets 500 on every
//! supported release: docs/rules.md), and an update whose Tenant quota no longer fits.

use cozystack_resolver::Settings;
use cozystack_resolver::release::{ApiDryRun, Release};
use serde_json::Value;

use crate::apiserver::{self, Resource};
use crate::quota;
use crate::state::State;
use crate::writes::{RELEASE_API, Served};
use cozystack_resolver::request::APPS_GROUP;

/// An Application by namespace and name.
#[derive(Debug, Clone, Copy)]
pub struct AppRef<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
}

/// What cozystack-api (or the API server for it) refuses before the admission chain runs, in
/// its own words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BeforeAdmission(pub String);

/// cozystack-api as the release the settings name runs it.
#[derive(Debug, Clone, Copy)]
pub struct Api {
    /// It checks a Tenant's quota against its parent's ([`quota::checked`]).
    pub quotas: bool,
    /// It writes an Application its dry run was asked for ([`Api::of`]).
    pub dry_run_lands: bool,
}

impl Api {
    /// cozystack-api of the release `settings` name. Whether a dry run lands follows that
    /// release (`apiDryRun` in `resolver/stock-rules.yaml`); with none named, whether any
    /// supported release's does, so that a team is never told nothing landed when something may
    /// have.
    pub fn of(settings: &Settings) -> Api {
        let lands = |r: Release| r.row().api_dry_run == ApiDryRun::Ignored;
        Api {
            quotas: quota::checked(settings),
            dry_run_lands: match settings.judged().0 {
                Some(release) => lands(release),
                None => Release::all().any(lands),
            },
        }
    }

    /// Its account of a write of the Application `namespace/name` of `served`'s kind: `spec` is
    /// what a CREATE or UPDATE applies, `None` for a DELETE; `api_version` the version the
    /// request shows the live Application in. `Err` with its refusal before admission.
    pub fn write(
        &self,
        served: &Served,
        cluster: &State,
        app: AppRef<'_>,
        spec: Option<&Value>,
        api_version: &str,
    ) -> Result<AppWrite, BeforeAdmission> {
        let AppRef { namespace, name } = app;
        let release = served.release(cluster, namespace, name);
        let creates = release.is_none() && spec.is_some();
        let quotas = self.quotas && served.kind == "Tenant";
        if let Some(spec) = spec.filter(|_| creates) {
            // Its validation, then its quota check: both before the admission chain on a create.
            if let Some(refusal) =
                apiserver::application_refusal(&served.kind, &served.prefix, namespace, name, spec)
            {
                return Err(BeforeAdmission(refusal));
            }
            if let Some(refusal) = quotas
                .then(|| quota::refusal(cluster.cluster(), namespace, name, spec))
                .flatten()
            {
                return Err(BeforeAdmission(format!(
                    "cozystack-api refuses it before admission: {refusal}"
                )));
            }
        }
        // It creates the release after its admission chain: a release of another kind (or of
        // no app) under the name makes that create fail.
        let release_name = served.release_name(name);
        let taken = cluster
            .get(RELEASE_API, "HelmRelease", &release_name, Some(namespace))
            .filter(|_| creates)
            .map(|other| {
                let holder = match other["metadata"]["labels"]["apps.cozystack.io/application.kind"]
                    .as_str()
                {
                    Some(kind) => format!("a {kind} release"),
                    None => "a HelmRelease of no app".to_owned(),
                };
                format!(
                    "cozystack-api refuses it after admission: failed to create HelmRelease: helmreleases.helm.toolkit.fluxcd.io \"{release_name}\" already exists ({holder} holds the name in {namespace}); choose another name"
                )
            });
        Ok(AppWrite {
            live: release
                .as_ref()
                .map(|hr| served.application_of(hr, api_version)),
            release,
            release_name,
            taken,
            quotas,
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            version: api_version
                .rsplit_once('/')
                .map_or(api_version, |(_, v)| v)
                .to_owned(),
            served: served.clone(),
        })
    }
}

/// cozystack-api's account of one Application write ([`Api::write`]); a caller takes what it
/// keeps of the objects.
#[derive(Debug, Clone)]
pub struct AppWrite {
    /// The app's release, when there is one: what an UPDATE or DELETE changes.
    pub release: Option<Value>,
    /// That release as the Application the request shows as its old object.
    pub live: Option<Value>,
    /// `<prefix><name>`, the release it writes.
    pub release_name: String,
    /// Why creating the release fails after admission: another release holds the name (the
    /// storage's 409; the client sees cozystack-api's 500).
    pub taken: Option<String>,
    /// It checks this Tenant's quota.
    quotas: bool,
    pub namespace: String,
    pub name: String,
    /// The version the request names the Application in.
    version: String,
    /// How cozystack-api serves the kind.
    pub served: Served,
}

impl AppWrite {
    /// The Application's resource, as the request names it.
    pub fn resource(&self) -> Resource<'_> {
        Resource {
            group: APPS_GROUP,
            version: &self.version,
            kind: &self.served.kind,
            plural: &self.served.plural,
        }
    }

    /// Why an UPDATE to `new` fails after admission: `Update` checks the quota it leaves.
    pub fn update_refusal(&self, cluster: &State, new: &Value) -> Option<String> {
        self.quotas
            .then(|| quota::refusal(cluster.cluster(), &self.namespace, &self.name, &new["spec"]))
            .flatten()
            .map(|refusal| format!("cozystack-api refuses it after admission: {refusal}"))
    }
}
