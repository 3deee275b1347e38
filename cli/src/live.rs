//! A live cluster read through kube-rs: every object of the kinds the policy may read
//! (`contextAwareResources`), listed cluster-wide page by page as kubectl lists them, into the
//! snapshot the runtime serves host calls from.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use cozystack_policy_runtime::cluster::{ClusterObjects, Keep, index_key, strip_store_fields};
use cozystack_policy_runtime::host::ContextAwareResource;
use kube::api::{Api, DynamicObject, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::discovery::ApiResource;
use serde_json::{Value, json};
use thiserror::Error;

/// kubectl's page size (`--chunk-size`).
const PAGE: u32 = 500;

/// Which cluster: the current context of `$KUBECONFIG` (or `~/.kube/config`) unless told;
/// without any kubeconfig, inside a Pod, its ServiceAccount. And how long it may take: an API
/// server that accepts the connection and never answers must not hold a CI job to its limit.
#[derive(Debug, Clone)]
pub struct Target {
    pub kubeconfig: Option<PathBuf>,
    pub context: Option<String>,
    /// Each request's connect and read timeout.
    pub timeout: Duration,
    /// When every read of the verb must be done, whatever each request's timeout.
    pub deadline: Instant,
    /// How long the verb was given (for the message when the deadline passes).
    pub budget: Duration,
}

/// Each request's connect and read timeout unless told (`--request-timeout`), in seconds.
pub const REQUEST_TIMEOUT: u64 = 30;
/// All of a verb's reads together unless told (`--deadline`), in seconds.
pub const DEADLINE: u64 = 300;

impl Target {
    /// `kubeconfig`'s `context`, with a request timeout and a deadline `budget` from `started`.
    pub fn new(
        kubeconfig: Option<PathBuf>,
        context: Option<String>,
        timeout: Duration,
        budget: Duration,
        started: Instant,
    ) -> Target {
        Target {
            kubeconfig,
            context,
            timeout,
            deadline: started + budget,
            budget,
        }
    }

    /// The current context of `kubeconfig`, with the default limits from now.
    pub fn of(kubeconfig: PathBuf) -> Target {
        let seconds = Duration::from_secs;
        Target::new(
            Some(kubeconfig),
            None,
            seconds(REQUEST_TIMEOUT),
            seconds(DEADLINE),
            Instant::now(),
        )
    }
}

#[derive(Debug, Error)]
pub enum LiveError {
    #[error("cannot read the kubeconfig: {0}")]
    Kubeconfig(String),
    #[error("cannot reach the cluster of context {context}: {cause}")]
    Client { context: String, cause: String },
    #[error(
        "listing {resource} in all namespaces is forbidden for the current user of context {context} ({message}): grant it `list` on {resource} cluster-wide (deploy/preflight-rbac.yaml; check with `kubectl auth can-i list {resource} --all-namespaces`), or run on a dump (`kubectl get {all} -A -o yaml > dump.yaml`, then --dump dump.yaml)"
    )]
    Forbidden {
        resource: String,
        /// Every resource the policy reads, as kubectl names them together.
        all: String,
        context: String,
        message: String,
    },
    #[error("reading {resource} from context {context} failed: {cause}")]
    List {
        resource: String,
        context: String,
        cause: String,
    },
    #[error(
        "{request} on context {context}: not done within the deadline of {seconds} s (--deadline): the API server, or a proxy before it, accepts the connection and does not answer in time"
    )]
    Deadline {
        request: String,
        context: String,
        seconds: u64,
    },
    #[error(
        "context {context} has no ClusterAdmissionPolicy {name} (`kubectl get clusteradmissionpolicies` lists them); name a deployed one, or pass its settings with --settings"
    )]
    NoPolicy { name: String, context: String },
    #[error(
        "reading ClusterAdmissionPolicy {name} is forbidden for the current user of context {context} ({message}): grant it `get` on clusteradmissionpolicies.policies.kubewarden.io (deploy/preflight-rbac.yaml), or pass the settings with --settings"
    )]
    PolicyForbidden {
        name: String,
        context: String,
        message: String,
    },
    #[error("context {context} listed {resource} the pre-flight cannot read: {message}")]
    Unreadable {
        resource: String,
        context: String,
        message: String,
    },
    #[error(
        "cannot ask context {context} who its credentials are (SelfSubjectReview, `kubectl auth whoami`): {message}{advice}"
    )]
    WhoAmI {
        context: String,
        message: String,
        /// `--as` helps only where the server answered and could not say.
        advice: &'static str,
    },
    #[error("cannot start the client runtime: {0}")]
    Runtime(std::io::Error),
}

/// What was read: the objects, the context they came from and one line per kind.
#[derive(Debug, Default)]
pub struct Snapshot {
    pub cluster: ClusterObjects,
    pub context: String,
    pub listed: Vec<String>,
}

/// Runs one read of `target` to completion on a runtime of its own (the CLI is synchronous
/// around it), with its client and context, within the verb's deadline.
fn read_with<T>(
    target: &Target,
    request: impl Into<String>,
    read: impl AsyncFnOnce(kube::Client, String) -> Result<T, LiveError>,
) -> Result<T, LiveError> {
    let request = request.into();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(LiveError::Runtime)?;
    runtime.block_on(async {
        let deadline = tokio::time::Instant::from_std(target.deadline);
        let (client, context) = client(target).await?;
        let read = read(client, context.clone());
        tokio::time::timeout_at(deadline, read)
            .await
            .unwrap_or_else(|_| {
                Err(LiveError::Deadline {
                    request,
                    context,
                    seconds: target.budget.as_secs(),
                })
            })
    })
}

/// What went wrong with a request, in one line: the API server's status and message, or the
/// transport's chain of causes (connection refused, TLS, a timeout), never a bare wrapper.
pub fn cause(error: &kube::Error) -> String {
    if let kube::Error::Api(status) = error {
        let reason = match status.reason.as_str() {
            // kube-rs's stand-in reason when the body is no Status (a proxy's page, or none).
            "Failed to parse error data" | "" => String::new(),
            reason => format!(" {reason}"),
        };
        return match status.message.trim() {
            "" => format!("HTTP {}{reason} with an empty body", status.code),
            message => format!("HTTP {}{reason}: {message}", status.code),
        };
    }
    let mut causes: Vec<String> = Vec::new();
    let mut next: Option<&dyn std::error::Error> = Some(error);
    while let Some(error) = next {
        let text = error.to_string();
        // The wrappers' own words ("ServiceError: client error (Connect)") say nothing the
        // innermost cause does not; each says once what it adds.
        let text = text
            .trim_start_matches("ServiceError: ")
            .trim_start_matches("HyperError: ")
            .to_owned();
        if !causes.iter().any(|c| c.contains(&text)) {
            causes.push(text);
        }
        next = error.source();
    }
    let timed_out = causes.iter().any(|c| {
        c.contains("timed out") || c.contains("deadline has elapsed") || c.contains("Elapsed")
    });
    let mut line = causes.join(": ");
    if timed_out && !line.contains("timed out") {
        line.push_str(" (timed out)");
    }
    line
}

/// The settings of a deployed ClusterAdmissionPolicy (`spec.settings`, `{}` when it has none):
/// what the policy-server evaluates the requests of `target` with.
pub fn policy_settings(target: &Target, name: &str) -> Result<Value, LiveError> {
    let request = format!("get clusteradmissionpolicies.policies.kubewarden.io {name}");
    read_with(target, request, async |client, context| {
        let api = ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk(
                "policies.kubewarden.io",
                "v1",
                "ClusterAdmissionPolicy",
            ),
            "clusteradmissionpolicies",
        );
        let policies: Api<DynamicObject> = Api::all_with(client, &api);
        let resource = resource_name(&api);
        let policy = policies.get(name).await.map_err(|source| match source {
            kube::Error::Api(status) if status.code == 404 => LiveError::NoPolicy {
                name: name.to_owned(),
                context: context.clone(),
            },
            kube::Error::Api(status) if status.code == 403 => LiveError::PolicyForbidden {
                name: name.to_owned(),
                context: context.clone(),
                message: status.message.clone(),
            },
            source => LiveError::List {
                resource: resource.clone(),
                context: context.clone(),
                cause: cause(&source),
            },
        })?;
        Ok(policy
            .data
            .pointer("/spec/settings")
            .cloned()
            .unwrap_or_else(|| json!({})))
    })
}

/// ConfigMap `namespace/name` of the cluster of `target`, `None` when it does not exist or the
/// credentials may not read it (the caller reports what it could not learn).
pub fn config_map(
    target: &Target,
    namespace: &str,
    name: &str,
) -> Result<Option<Value>, LiveError> {
    use k8s_openapi::api::core::v1::ConfigMap;
    let request = format!("get configmaps {namespace}/{name}");
    read_with(target, request, async |client, context| {
        let maps: Api<ConfigMap> = Api::namespaced(client, namespace);
        match maps.get_opt(name).await {
            Ok(map) => Ok(map.map(|m| {
                json!({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": name, "namespace": namespace}, "data": m.data})
            })),
            Err(kube::Error::Api(status)) if status.code == 403 => Ok(None),
            Err(source) => Err(LiveError::List {
                resource: format!("configmaps {namespace}/{name}"),
                context,
                cause: cause(&source),
            }),
        }
    })
}

/// The `namespace/name` object of a custom resource (`api_version`, `kind`, its `plural`) of the
/// cluster of `target`, `None` when it does not exist.
pub fn object(
    target: &Target,
    (api_version, kind, plural): (&str, &str, &str),
    namespace: &str,
    name: &str,
) -> Result<Option<Value>, LiveError> {
    use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
    let request = format!("get {plural} {namespace}/{name}");
    read_with(target, request, async |client, context| {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let resource =
            ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
        let objects: Api<DynamicObject> = Api::namespaced_with(client, namespace, &resource);
        match objects.get_opt(name).await {
            Ok(object) => Ok(object.and_then(|o| serde_json::to_value(o).ok())),
            Err(source) => Err(LiveError::List {
                resource: format!("{plural} {namespace}/{name}"),
                context,
                cause: cause(&source),
            }),
        }
    })
}

/// Who the credentials of `target` are, as the API server authenticates them: its answer to a
/// SelfSubjectReview (`kubectl auth whoami`), with the context it asked.
pub fn whoami(target: &Target) -> Result<(String, Vec<String>, String), LiveError> {
    use k8s_openapi::api::authentication::v1::SelfSubjectReview;
    read_with(
        target,
        "create selfsubjectreviews",
        async |client, context| {
            let reviews: Api<SelfSubjectReview> = Api::all(client);
            // `--as` helps where the API server answered and could not say who; not where it
            // cannot be reached at all.
            const AS: &str = "; pass --as USER [--as-group GROUP]";
            let failed = |message: String, advice: &'static str| LiveError::WhoAmI {
                context: context.clone(),
                message,
                advice,
            };
            let review = reviews
                .create(
                    &kube::api::PostParams::default(),
                    &SelfSubjectReview::default(),
                )
                .await
                .map_err(|e| match e {
                    kube::Error::Api(_) => failed(cause(&e), AS),
                    e => failed(cause(&e), ""),
                })?;
            let user = review
                .status
                .and_then(|s| s.user_info)
                .ok_or_else(|| failed("the answer names no user".into(), AS))?;
            let username = user
                .username
                .filter(|u| !u.is_empty())
                .ok_or_else(|| failed("the answer names no user".into(), AS))?;
            Ok((username, user.groups.unwrap_or_default(), context.clone()))
        },
    )
}

/// The resource name kubectl uses (`helmreleases.helm.toolkit.fluxcd.io`).
fn resource_name(api: &ApiResource) -> String {
    if api.group.is_empty() {
        api.plural.clone()
    } else {
        format!("{}.{}", api.plural, api.group)
    }
}

fn api_resource(resource: &ContextAwareResource) -> ApiResource {
    let (group, version) = resource
        .api_version
        .rsplit_once('/')
        .unwrap_or(("", &resource.api_version));
    ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
        group,
        version,
        &resource.kind,
    ))
}

/// The client kubectl would use: the kubeconfig's context, or — with no kubeconfig at all, inside
/// a Pod (the pre-flight as a Job) — the Pod's ServiceAccount.
async fn client(target: &Target) -> Result<(kube::Client, String), LiveError> {
    let kubeconfig = match &target.kubeconfig {
        Some(path) => Kubeconfig::read_from(path),
        None => Kubeconfig::read(),
    };
    let (mut config, context) = match kubeconfig {
        Ok(kubeconfig) => {
            let context = target
                .context
                .clone()
                .or_else(|| kubeconfig.current_context.clone())
                .ok_or_else(|| {
                    LiveError::Kubeconfig("no current context: pass --context NAME".to_owned())
                })?;
            let options = KubeConfigOptions {
                context: Some(context.clone()),
                ..KubeConfigOptions::default()
            };
            let stated_proxy = cluster_proxy(&kubeconfig, &context);
            let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
                .await
                .map_err(|e| LiveError::Kubeconfig(e.to_string()))?;
            if !stated_proxy {
                config.proxy_url = hyper_util::client::proxy::matcher::Matcher::from_env()
                    .intercept(&config.cluster_url)
                    .map(|proxy| proxy.uri().clone());
            }
            (config, context)
        }
        Err(err) if target.kubeconfig.is_none() && target.context.is_none() => {
            let config = kube::Config::incluster().map_err(|_| {
                LiveError::Kubeconfig(format!(
                    "{err}, and this is not a Pod with a ServiceAccount; set KUBECONFIG or pass --kubeconfig, or use --dump"
                ))
            })?;
            (config, "in-cluster".to_owned())
        }
        Err(err) => {
            return Err(LiveError::Kubeconfig(format!(
                "{err}; name a readable kubeconfig, or use --dump"
            )));
        }
    };
    // Messages name the server, and the proxy a request went through: its failure is not
    // the API server's.
    let server = config.cluster_url.to_string();
    let server = server.trim_end_matches('/');
    let context = match &config.proxy_url {
        Some(proxy) => format!("{context} at {server} (through proxy {proxy})"),
        None => format!("{context} at {server}"),
    };
    // No request waits for ever: each connect and read is bounded, and the verb's deadline
    // bounds them all (`read_with`).
    config.connect_timeout = Some(target.timeout);
    config.read_timeout = Some(target.timeout);
    config.write_timeout = Some(target.timeout);
    let client = kube::Client::try_from(config).map_err(|source| LiveError::Client {
        context: context.clone(),
        cause: cause(&source),
    })?;
    Ok((client, context))
}

/// Whether the context's cluster names its own `proxy-url`. Otherwise the proxy comes from the
/// environment, read as kubectl reads it: kube-rs takes `$HTTPS_PROXY` for every URL and ignores
/// `$NO_PROXY`, which would send an internal API server to an outside proxy.
fn cluster_proxy(kubeconfig: &Kubeconfig, context: &str) -> bool {
    let cluster = kubeconfig
        .contexts
        .iter()
        .find(|named| named.name == context)
        .and_then(|named| named.context.as_ref())
        .map(|context| context.cluster.as_str());
    kubeconfig
        .clusters
        .iter()
        .find(|named| Some(named.name.as_str()) == cluster)
        .and_then(|named| named.cluster.as_ref())
        .is_some_and(|cluster| {
            cluster
                .proxy_url
                .as_ref()
                .is_some_and(|url| !url.is_empty())
        })
}

/// Every object of one kind, page by page; list items come without apiVersion and kind, which
/// the snapshot needs, so they are set from the list.
async fn list_all(
    client: &kube::Client,
    context: &str,
    api: &ApiResource,
    all: &str,
    keep: Keep<'_>,
    into: &mut ClusterObjects,
) -> Result<(usize, usize), LiveError> {
    let objects: Api<DynamicObject> = Api::all_with(client.clone(), api);
    let (mut items, mut pages, mut token) = (0, 0, None::<String>);
    loop {
        let mut params = ListParams::default().limit(PAGE);
        if let Some(token) = &token {
            params = params.continue_token(token);
        }
        let page = objects.list(&params).await.map_err(|source| match source {
            kube::Error::Api(status) if status.code == 403 => LiveError::Forbidden {
                resource: resource_name(api),
                all: all.to_owned(),
                context: context.to_owned(),
                message: status.message.clone(),
            },
            source => LiveError::List {
                resource: resource_name(api),
                context: context.to_owned(),
                cause: cause(&source),
            },
        })?;
        pages += 1;
        for item in page.items {
            // An object the snapshot cannot hold is an error, not one fewer object to judge.
            let mut value = serde_json::to_value(&item).map_err(|e| LiveError::Unreadable {
                resource: resource_name(api),
                context: context.to_owned(),
                message: e.to_string(),
            })?;
            let Some(object) = value.as_object_mut() else {
                return Err(LiveError::Unreadable {
                    resource: resource_name(api),
                    context: context.to_owned(),
                    message: "an item that is not an object".to_owned(),
                });
            };
            object.insert("apiVersion".into(), json!(api.api_version));
            object.insert("kind".into(), json!(api.kind));
            // Kept as a dump's objects are: stripped, and as text, so that a page is dropped
            // once it is read.
            if keep.is_some_and(|keep| keep(&index_key(&value))) {
                into.keep_managed_fields(&value);
            }
            strip_store_fields(&mut value);
            into.push(value);
            items += 1;
        }
        token = page.metadata.continue_.filter(|t| !t.is_empty());
        if token.is_none() {
            return Ok((items, pages));
        }
    }
}

/// Reads every object of `resources` from the cluster of `target`.
pub fn read(
    target: &Target,
    resources: &BTreeSet<ContextAwareResource>,
    keep: Keep<'_>,
) -> Result<Snapshot, LiveError> {
    let apis: Vec<ApiResource> = resources.iter().map(api_resource).collect();
    let all = apis.iter().map(resource_name).collect::<Vec<_>>().join(",");
    read_with(target, format!("list {all}"), async |client, context| {
        let mut snapshot = Snapshot {
            context: context.clone(),
            ..Snapshot::default()
        };
        for api in &apis {
            let (items, pages) =
                list_all(&client, &context, api, &all, keep, &mut snapshot.cluster).await?;
            snapshot.listed.push(format!(
                "{items} {} ({pages} page{})",
                resource_name(api),
                if pages == 1 { "" } else { "s" }
            ));
        }
        Ok(snapshot)
    })
}
