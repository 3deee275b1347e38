//! A read-only Kubernetes API on loopback, serving a cluster's objects the way the API server
//! lists them (for the CLI's live-read tests and the benchmark's live pre-flight), and GETs of
//! cluster-scoped objects by name: `limit`/`continue` pages (at most `page` items, whatever the limit asked, as the
//! server may return fewer), items without apiVersion and kind, a 403 Status for one resource,
//! a SelfSubjectReview answered with the credentials' user (`kubectl auth whoami`), and a
//! kubeconfig whose current context points at it.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

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

/// (apiVersion, plural, name) of a cluster-wide path: a list (`/api/v1/namespaces`,
/// `/apis/g/v/plural`) or a GET of one object (`…/plural/name`, or
/// `…/namespaces/ns/plural/name`, the name then `ns/name`).
fn route(path: &str) -> Option<(String, String, Option<String>)> {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (api_version, rest) = match parts.as_slice() {
        ["api", version, rest @ ..] => (version.to_string(), rest),
        ["apis", group, version, rest @ ..] => (format!("{group}/{version}"), rest),
        _ => return None,
    };
    match rest {
        [plural] => Some((api_version, plural.to_string(), None)),
        [plural, name] => Some((api_version, plural.to_string(), Some(name.to_string()))),
        ["namespaces", namespace, plural, name] => Some((
            api_version,
            plural.to_string(),
            Some(format!("{namespace}/{name}")),
        )),
        _ => None,
    }
}

fn status(code: u16, reason: &str, message: &str) -> (u16, Value) {
    let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": message, "reason": reason, "code": code});
    (code, status)
}

fn answer(objects: &[Value], forbidden: Option<&str>, page: usize, url: &str) -> (u16, Value) {
    let (path, query) = url.split_once('?').unwrap_or((url, ""));
    let Some((api_version, resource, name)) = route(path) else {
        return status(
            404,
            "NotFound",
            "the server could not find the requested resource",
        );
    };
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
        let (namespace, name) = match name.split_once('/') {
            Some((namespace, name)) => (Some(namespace), name),
            None => (None, name.as_str()),
        };
        return match objects.iter().filter(of_resource).find(|o| {
            o["metadata"]["name"] == name
                && namespace.is_none_or(|ns| o["metadata"]["namespace"] == ns)
        }) {
            Some(object) => (200, object.clone()),
            None => status(404, "NotFound", &format!("{resource} \"{name}\" not found")),
        };
    }
    let param = |name: &str| {
        query
            .split('&')
            .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
            .map(str::to_owned)
    };
    let limit = param("limit")
        .and_then(|l| l.parse::<usize>().ok())
        .unwrap_or(usize::MAX);
    let start = param("continue")
        .and_then(|c| c.parse::<usize>().ok())
        .unwrap_or(0);
    let matching: Vec<&Value> = objects.iter().filter(of_resource).collect();
    let kind = matching
        .first()
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
            let url = request.url().to_owned();
            seen_loop
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(url.clone());
            let method = request.method().clone();
            let (code, body) = if method == tiny_http::Method::Get {
                answer(&objects, forbidden, page, &url)
            } else if method == tiny_http::Method::Post
                && url.split('?').next()
                    == Some("/apis/authentication.k8s.io/v1/selfsubjectreviews")
            {
                (201, review.clone())
            } else {
                status(405, "MethodNotAllowed", "this API is read-only")
            };
            let header = tiny_http::Header::from_bytes("Content-Type", "application/json")
                .unwrap_or_else(|()| panic!("a static header"));
            let response = tiny_http::Response::from_string(body.to_string())
                .with_status_code(code)
                .with_header(header);
            let _ = request.respond(response);
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
