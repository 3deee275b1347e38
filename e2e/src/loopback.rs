//! A read-only Kubernetes API on loopback, serving a cluster's objects the way the API server
//! lists them (for the CLI's live-read tests, the benchmark's live pre-flight, and Kubewarden's
//! own host under `make bench-kwctl`): discovery, lists cluster-wide or in a namespace with label
//! selectors, `limit`/`continue` pages (at most `page` items, whatever the limit asked, as the
//! server may return fewer), items without apiVersion and kind, GETs of one object, a 403 Status
//! for one resource, a SelfSubjectReview answered with the credentials' user (`kubectl auth
//! whoami`), and a kubeconfig whose current context points at it. [`serve_watched`] serves a
//! reflector too: its watches held open and quiet, a SubjectAccessReview that allows nothing.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cozystack_policy_runtime::cluster::listed_by;
use cozystack_policy_runtime::selector::Selector;
use serde_json::{Value, json};

/// What would send the tool somewhere other than the loopback API: the in-cluster fallback of the
/// machine the tests run on, and the proxy environment (curl's and kubectl's variables). Tests
/// remove them from the binary's environment.
pub const ELSEWHERE: &[&str] = &[
    "KUBERNETES_SERVICE_HOST",
    "KUBERNETES_SERVICE_PORT",
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "ALL_PROXY",
    "all_proxy",
    "NO_PROXY",
    "no_proxy",
];

pub struct Loopback {
    pub kubeconfig: PathBuf,
    /// The server's URL, as the kubeconfig names it (`http://127.0.0.1:PORT`).
    pub url: String,
    /// Every request's path and query, in order.
    pub seen: Arc<Mutex<Vec<String>>>,
    server: Arc<tiny_http::Server>,
}

impl Drop for Loopback {
    fn drop(&mut self) {
        self.server.unblock();
        let _ = std::fs::remove_file(&self.kubeconfig);
    }
}

fn plural(kind: &str) -> String {
    let kind = kind.to_lowercase();
    match kind.strip_suffix('y') {
        Some(stem) => format!("{stem}ies"),
        None => format!("{kind}s"),
    }
}

/// What a path asks for.
struct Route {
    api_version: String,
    /// The resource's plural; empty for the apiVersion's discovery.
    resource: String,
    /// A list's namespace, or a namespaced object's.
    namespace: Option<String>,
    /// One object's name (a GET), or none (a list).
    name: Option<String>,
}

/// The route of a path: discovery (`/api/v1`, `/apis/g/v`), a list (`…/plural`, or
/// `…/namespaces/ns/plural`) or a GET of one object (`…/plural/name`, or
/// `…/namespaces/ns/plural/name`).
fn route(path: &str) -> Option<Route> {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (api_version, rest) = match parts.as_slice() {
        ["api", version, rest @ ..] => (version.to_string(), rest),
        ["apis", group, version, rest @ ..] => (format!("{group}/{version}"), rest),
        _ => return None,
    };
    let (namespace, resource, name) = match rest {
        [] => (None, "", None),
        [plural] => (None, *plural, None),
        [plural, name] => (None, *plural, Some(*name)),
        ["namespaces", namespace, plural] => (Some(*namespace), *plural, None),
        ["namespaces", namespace, plural, name] => (Some(*namespace), *plural, Some(*name)),
        _ => return None,
    };
    Some(Route {
        api_version,
        resource: resource.to_owned(),
        namespace: namespace.map(str::to_owned),
        name: name.map(str::to_owned),
    })
}

/// What a tree serves under an apiVersion: each kind's resource, and whether it is namespaced.
fn discovery(objects: &[Value], api_version: &str) -> (u16, Value) {
    let mut resources: Vec<Value> = Vec::new();
    for object in objects.iter().filter(|o| o["apiVersion"] == api_version) {
        let kind = object["kind"].as_str().unwrap_or_default();
        if !resources.iter().any(|r| r["kind"] == kind) {
            resources.push(
                json!({"name": plural(kind), "singularName": kind.to_lowercase(),
                "namespaced": object["metadata"]["namespace"].is_string(), "kind": kind,
                "verbs": ["get", "list", "watch"]}),
            );
        }
    }
    let list = json!({"kind": "APIResourceList", "apiVersion": "v1",
        "groupVersion": api_version, "resources": resources});
    (200, list)
}

/// A query parameter, its value percent-decoded as far as label selectors need.
fn param(query: &str, name: &str) -> Option<String> {
    query.split('&').find_map(|kv| {
        kv.strip_prefix(&format!("{name}=")).map(|v| {
            [
                ("%3D", "="),
                ("%2C", ","),
                ("%2F", "/"),
                ("%28", "("),
                ("%29", ")"),
                ("%21", "!"),
                ("%20", " "),
                ("+", " "),
            ]
            .iter()
            .fold(v.to_owned(), |v, (from, to)| v.replace(from, to))
        })
    })
}

fn status(code: u16, reason: &str, message: &str) -> (u16, Value) {
    let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": message, "reason": reason, "code": code});
    (code, status)
}

fn answer(objects: &[Value], forbidden: Option<&str>, page: usize, url: &str) -> (u16, Value) {
    let (path, query) = url.split_once('?').unwrap_or((url, ""));
    let Some(Route {
        api_version,
        resource,
        namespace,
        name,
    }) = route(path)
    else {
        return status(
            404,
            "NotFound",
            "the server could not find the requested resource",
        );
    };
    if resource.is_empty() {
        return discovery(objects, &api_version);
    }
    if forbidden == Some(resource.as_str()) {
        let verb = if name.is_some() { "get" } else { "list" };
        let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
        return status(
            403,
            "Forbidden",
            &format!(
                "{resource}.{group} is forbidden: User \"preflight\" cannot {verb} resource \"{resource}\" in API group \"{group}\" at the cluster scope"
            ),
        );
    }
    let of_resource = |o: &&Value| {
        o["apiVersion"] == api_version.as_str()
            && plural(o["kind"].as_str().unwrap_or_default()) == resource
    };
    if let Some(name) = name {
        return match objects.iter().filter(of_resource).find(|o| {
            o["metadata"]["name"] == name.as_str()
                && namespace
                    .as_deref()
                    .is_none_or(|ns| o["metadata"]["namespace"] == ns)
        }) {
            Some(object) => (200, object.clone()),
            None => status(404, "NotFound", &format!("{resource} \"{name}\" not found")),
        };
    }
    let selector = match Selector::parse(&param(query, "labelSelector").unwrap_or_default()) {
        Ok(selector) => selector,
        Err(e) => return status(400, "BadRequest", &e.to_string()),
    };
    let limit = param(query, "limit")
        .and_then(|l| l.parse::<usize>().ok())
        .unwrap_or(usize::MAX);
    let start = param(query, "continue")
        .and_then(|c| c.parse::<usize>().ok())
        .unwrap_or(0);
    let matching: Vec<&Value> = objects
        .iter()
        .filter(of_resource)
        .filter(|o| listed_by(o, namespace.as_deref(), &selector))
        .collect();
    let kind = objects
        .iter()
        .find(of_resource)
        .and_then(|o| o["kind"].as_str())
        .unwrap_or_default();
    let end = (start + limit.min(page)).min(matching.len());
    // Items as the API server lists them: without apiVersion and kind.
    let items: Vec<Value> = matching[start.min(end)..end]
        .iter()
        .map(|o| {
            let mut item = (*o).clone();
            if let Some(item) = item.as_object_mut() {
                item.remove("apiVersion");
                item.remove("kind");
            }
            item
        })
        .collect();
    let mut metadata = json!({"resourceVersion": "42"});
    if end < matching.len() {
        metadata["continue"] = json!(end.to_string());
    }
    let list = json!({"apiVersion": api_version, "kind": format!("{kind}List"),
        "metadata": metadata, "items": items});
    (200, list)
}

/// The user a SelfSubjectReview names unless told: the kubeconfig's user, authenticated.
pub const USER: (&str, &[&str]) = ("preflight", &["system:authenticated"]);

/// Serves `objects` until dropped; `forbidden` names a resource (plural) every list of which
/// gets a 403.
pub fn serve(
    objects: Vec<Value>,
    forbidden: Option<&'static str>,
    page: usize,
    dir: &Path,
) -> Loopback {
    serve_as(objects, forbidden, page, dir, USER)
}

/// [`serve`], with `user` (name, groups) as who the credentials are.
pub fn serve_as(
    objects: Vec<Value>,
    forbidden: Option<&'static str>,
    page: usize,
    dir: &Path,
    user: (&str, &[&str]),
) -> Loopback {
    let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview",
        "metadata": {"creationTimestamp": null},
        "status": {"userInfo": {"username": user.0, "groups": user.1}}});
    listen(dir, move |request, seen| {
        let url = request.url().to_owned();
        seen.lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(url.clone());
        let answer = match request.method() {
            tiny_http::Method::Get => answer(&objects, forbidden, page, &url),
            tiny_http::Method::Post
                if url.split('?').next()
                    == Some("/apis/authentication.k8s.io/v1/selfsubjectreviews") =>
            {
                (201, review.clone())
            }
            _ => status(405, "MethodNotAllowed", "this API is read-only"),
        };
        respond(request, answer);
    })
}

/// How long a watch stays open at most when the client names no `timeoutSeconds`.
const WATCH: Duration = Duration::from_secs(300);

/// A watch's body: nothing until the watch's time is up (the served objects do not change),
/// then its end, after which the client watches again.
struct Quiet {
    until: Instant,
}

impl Read for Quiet {
    fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
        std::thread::sleep(self.until.saturating_duration_since(Instant::now()));
        Ok(0)
    }
}

/// Serves `objects` to a reflector's host until dropped (Kubewarden's callback handler,
/// kubewarden-controller v1.36.0-beta.1 `policy-evaluator/src/callback_handler/kubernetes/`),
/// each request on a thread of its own: what [`serve`] answers, unpaged, its watches held open
/// and quiet, and a SubjectAccessReview that allows nothing (a `can_i` lookup).
pub fn serve_watched(objects: Vec<Value>, dir: &Path) -> Loopback {
    let objects = Arc::new(objects);
    listen(dir, move |request, _| {
        let objects = objects.clone();
        std::thread::spawn(move || {
            let url = request.url().to_owned();
            let (path, query) = url.split_once('?').unwrap_or((&url, ""));
            let watch = param(query, "watch").is_some_and(|w| w == "true" || w == "1");
            match request.method() {
                tiny_http::Method::Get if watch => {
                    let seconds = param(query, "timeoutSeconds")
                        .and_then(|s| s.parse().ok())
                        .map_or(WATCH, Duration::from_secs);
                    let body = Quiet {
                        until: Instant::now() + seconds.min(WATCH),
                    };
                    let response =
                        tiny_http::Response::new(200.into(), vec![json_header()], body, None, None);
                    let _ = request.respond(response);
                }
                tiny_http::Method::Get => {
                    respond(request, answer(&objects, None, usize::MAX, &url))
                }
                tiny_http::Method::Post
                    if path == "/apis/authorization.k8s.io/v1/subjectaccessreviews" =>
                {
                    let review = json!({"apiVersion": "authorization.k8s.io/v1",
                        "kind": "SubjectAccessReview", "metadata": {}, "spec": {},
                        "status": {"allowed": false}});
                    respond(request, (201, review));
                }
                _ => respond(
                    request,
                    status(405, "MethodNotAllowed", "this API is read-only"),
                ),
            }
        });
    })
}

fn json_header() -> tiny_http::Header {
    tiny_http::Header::from_bytes("Content-Type", "application/json")
        .unwrap_or_else(|()| panic!("a static header"))
}

fn respond(request: tiny_http::Request, (code, body): (u16, Value)) {
    let response = tiny_http::Response::from_string(body.to_string())
        .with_status_code(code)
        .with_header(json_header());
    let _ = request.respond(response);
}

/// A server on a free loopback port, each request handed to `handle` with the log of what was
/// asked, and a kubeconfig in `dir` whose current context points at it.
fn listen(
    dir: &Path,
    handle: impl Fn(tiny_http::Request, &Mutex<Vec<String>>) + Send + 'static,
) -> Loopback {
    let server = Arc::new(
        tiny_http::Server::http("127.0.0.1:0").unwrap_or_else(|e| panic!("loopback API: {e}")),
    );
    let port = server
        .server_addr()
        .to_ip()
        .map(|a| a.port())
        .unwrap_or_default();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (server_loop, seen_loop) = (server.clone(), seen.clone());
    std::thread::spawn(move || {
        for request in server_loop.incoming_requests() {
            handle(request, &seen_loop);
        }
    });
    std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("loopback API: {e}"));
    let kubeconfig = dir.join(format!("kubeconfig-{port}.yaml"));
    let text = format!(
        "apiVersion: v1
kind: Config
clusters:
- name: loopback
  cluster: {{server: 'http://127.0.0.1:{port}'}}
- name: elsewhere
  cluster: {{server: 'http://127.0.0.1:1'}}
users:
- name: preflight
  user: {{token: read-only}}
contexts:
- name: loopback
  context: {{cluster: loopback, user: preflight}}
- name: elsewhere
  context: {{cluster: elsewhere, user: preflight}}
current-context: loopback
"
    );
    std::fs::write(&kubeconfig, text).unwrap_or_else(|e| panic!("loopback API: {e}"));
    Loopback {
        kubeconfig,
        url: format!("http://127.0.0.1:{port}"),
        seen,
        server,
    }
}

/// An API server that accepts every connection and never answers (a stuck load balancer, a
/// dead `kubectl proxy` backend), with a kubeconfig pointing at it; it stops when dropped.
pub struct Silent {
    pub kubeconfig: PathBuf,
    pub url: String,
    _listener: std::net::TcpListener,
    held: Arc<Mutex<Vec<std::net::TcpStream>>>,
}

impl Drop for Silent {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.kubeconfig);
        self.held.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }
}

pub fn silent(dir: &Path) -> Silent {
    let listener =
        std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("silent API: {e}"));
    let port = listener
        .local_addr()
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("silent API: {e}"));
    let held = Arc::new(Mutex::new(Vec::new()));
    let (accepting, kept) = (
        listener
            .try_clone()
            .unwrap_or_else(|e| panic!("silent API: {e}")),
        held.clone(),
    );
    // Accept and hold each connection, reading nothing and writing nothing.
    std::thread::spawn(move || {
        for stream in accepting.incoming().flatten() {
            kept.lock().unwrap_or_else(|e| e.into_inner()).push(stream);
        }
    });
    std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("silent API: {e}"));
    let kubeconfig = dir.join(format!("kubeconfig-silent-{port}.yaml"));
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: silent\n  cluster: {{server: 'http://127.0.0.1:{port}'}}\nusers:\n- name: preflight\n  user: {{token: read-only}}\ncontexts:\n- name: silent\n  context: {{cluster: silent, user: preflight}}\ncurrent-context: silent\n"
    );
    std::fs::write(&kubeconfig, text).unwrap_or_else(|e| panic!("silent API: {e}"));
    Silent {
        kubeconfig,
        url: format!("http://127.0.0.1:{port}"),
        _listener: listener,
        held,
    }
}
