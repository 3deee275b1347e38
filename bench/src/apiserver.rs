//! A Kubernetes API on loopback that serves a bench tree to Kubewarden's own host (`kwctl
//! bench`), as far as its callback handler asks (kubewarden-controller v1.36.0-beta.1,
//! `policy-evaluator/src/callback_handler/kubernetes/`): the discovery lists its client reads to
//! name a kind's resource, lists (cluster-wide or in a namespace, with label selectors) with a
//! resourceVersion for the reflector's watch, the watch itself held open and quiet (the tree
//! does not change while it is measured), GETs of one object, and a SubjectAccessReview that
//! allows nothing (the peer policy's `can_i`).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cozystack_policy_runtime::cluster::listed_by;
use cozystack_policy_runtime::selector::Selector;
use serde_json::{Value, json};

/// How long a watch stays open at most when the client names no `timeoutSeconds`.
const WATCH: Duration = Duration::from_secs(300);

pub struct ApiServer {
    pub kubeconfig: PathBuf,
    server: Arc<tiny_http::Server>,
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        self.server.unblock();
        let _ = std::fs::remove_file(&self.kubeconfig);
    }
}

/// The resource name the API server gives a kind (the kinds a bench tree holds).
fn plural(kind: &str) -> String {
    let kind = kind.to_lowercase();
    match kind.strip_suffix('y') {
        Some(stem) => format!("{stem}ies"),
        None if kind.ends_with('s') => format!("{kind}es"),
        None => format!("{kind}s"),
    }
}

/// A request's path, split: the apiVersion, and what follows it.
fn split(path: &str) -> Option<(String, Vec<&str>)> {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    match parts.as_slice() {
        ["api", version, rest @ ..] => Some((version.to_string(), rest.to_vec())),
        ["apis", group, version, rest @ ..] => Some((format!("{group}/{version}"), rest.to_vec())),
        _ => None,
    }
}

fn status(code: u16, reason: &str, message: &str) -> (u16, Value) {
    let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": message, "reason": reason, "code": code});
    (code, status)
}

/// A query parameter, percent-decoded as far as selectors need.
fn param(query: &str, name: &str) -> Option<String> {
    query.split('&').find_map(|kv| {
        kv.strip_prefix(&format!("{name}=")).map(|v| {
            v.replace("%3D", "=")
                .replace("%2C", ",")
                .replace("%2F", "/")
                .replace("%28", "(")
                .replace("%29", ")")
                .replace("%21", "!")
                .replace("%20", " ")
                .replace('+', " ")
        })
    })
}

/// What a tree serves, by apiVersion: each kind's resource, and whether it is namespaced.
fn discovery(objects: &[Value], api_version: &str) -> (u16, Value) {
    let mut resources: Vec<Value> = Vec::new();
    for object in objects.iter().filter(|o| o["apiVersion"] == api_version) {
        let kind = object["kind"].as_str().unwrap_or_default();
        if resources.iter().any(|r| r["kind"] == kind) {
            continue;
        }
        let namespaced = object["metadata"]["namespace"].is_string();
        resources.push(
            json!({"name": plural(kind), "singularName": kind.to_lowercase(),
            "namespaced": namespaced, "kind": kind,
            "verbs": ["get", "list", "watch"]}),
        );
    }
    // The peer's can_i and the core kinds every client may ask about.
    if api_version == "v1" && !resources.iter().any(|r| r["kind"] == "Namespace") {
        resources.push(json!({"name": "namespaces", "singularName": "namespace",
            "namespaced": false, "kind": "Namespace", "verbs": ["get", "list", "watch"]}));
    }
    (
        200,
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": api_version,
            "resources": resources}),
    )
}

/// A GET: discovery, a list, or one object.
fn answer(objects: &[Value], path: &str, query: &str) -> (u16, Value) {
    let Some((api_version, rest)) = split(path) else {
        return status(
            404,
            "NotFound",
            "the server could not find the requested resource",
        );
    };
    let (namespace, plural_name, name) = match rest.as_slice() {
        [] => return discovery(objects, &api_version),
        [resource] => (None, *resource, None),
        [resource, name] => (None, *resource, Some(*name)),
        ["namespaces", ns, resource] => (Some(*ns), *resource, None),
        ["namespaces", ns, resource, name] => (Some(*ns), *resource, Some(*name)),
        _ => {
            return status(
                404,
                "NotFound",
                "the server could not find the requested resource",
            );
        }
    };
    let of_resource = |o: &&Value| {
        o["apiVersion"] == api_version.as_str()
            && plural(o["kind"].as_str().unwrap_or_default()) == plural_name
    };
    if let Some(name) = name {
        return match objects.iter().filter(of_resource).find(|o| {
            o["metadata"]["name"] == name
                && namespace.is_none_or(|ns| o["metadata"]["namespace"] == ns)
        }) {
            Some(object) => (200, object.clone()),
            None => status(
                404,
                "NotFound",
                &format!("{plural_name} \"{name}\" not found"),
            ),
        };
    }
    let selector = match Selector::parse(&param(query, "labelSelector").unwrap_or_default()) {
        Ok(selector) => selector,
        Err(e) => return status(400, "BadRequest", &e.to_string()),
    };
    let matching: Vec<&Value> = objects
        .iter()
        .filter(of_resource)
        .filter(|o| listed_by(o, namespace, &selector))
        .collect();
    let kind = objects
        .iter()
        .find(of_resource)
        .and_then(|o| o["kind"].as_str())
        .unwrap_or_default();
    // Items as the API server lists them: without apiVersion and kind.
    let items: Vec<Value> = matching
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
    let list = json!({"apiVersion": api_version, "kind": format!("{kind}List"),
        "metadata": {"resourceVersion": "42"}, "items": items});
    (200, list)
}

/// A watch's body: nothing until the watch's time is up (the tree does not change), then its
/// end, after which the client watches again.
struct Quiet {
    until: Instant,
}

impl Read for Quiet {
    fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
        let left = self.until.saturating_duration_since(Instant::now());
        std::thread::sleep(left);
        Ok(0)
    }
}

fn respond(request: tiny_http::Request, (code, body): (u16, Value)) {
    let header = tiny_http::Header::from_bytes("Content-Type", "application/json")
        .unwrap_or_else(|()| panic!("a static header"));
    let response = tiny_http::Response::from_string(body.to_string())
        .with_status_code(code)
        .with_header(header);
    let _ = request.respond(response);
}

/// Serves `objects` until dropped, each request on a thread of its own (watches stay open).
pub fn serve(objects: Vec<Value>, dir: &Path) -> ApiServer {
    let server = Arc::new(
        tiny_http::Server::http("127.0.0.1:0").unwrap_or_else(|e| panic!("loopback API: {e}")),
    );
    let port = server
        .server_addr()
        .to_ip()
        .map(|a| a.port())
        .unwrap_or_default();
    let objects = Arc::new(objects);
    let incoming = server.clone();
    std::thread::spawn(move || {
        for request in incoming.incoming_requests() {
            let objects = objects.clone();
            std::thread::spawn(move || {
                let url = request.url().to_owned();
                let (path, query) = url.split_once('?').unwrap_or((&url, ""));
                let watch = param(query, "watch").is_some_and(|w| w == "true" || w == "1");
                match (request.method(), watch) {
                    (tiny_http::Method::Get, true) => {
                        let seconds = param(query, "timeoutSeconds")
                            .and_then(|s| s.parse().ok())
                            .map_or(WATCH, Duration::from_secs);
                        let header =
                            tiny_http::Header::from_bytes("Content-Type", "application/json")
                                .unwrap_or_else(|()| panic!("a static header"));
                        let body = Quiet {
                            until: Instant::now() + seconds.min(WATCH),
                        };
                        let response =
                            tiny_http::Response::new(200.into(), vec![header], body, None, None);
                        let _ = request.respond(response);
                    }
                    (tiny_http::Method::Get, false) => {
                        respond(request, answer(&objects, path, query));
                    }
                    (tiny_http::Method::Post, _)
                        if path == "/apis/authorization.k8s.io/v1/subjectaccessreviews" =>
                    {
                        let review = json!({"apiVersion": "authorization.k8s.io/v1",
                            "kind": "SubjectAccessReview", "metadata": {},
                            "spec": {}, "status": {"allowed": false}});
                        respond(request, (201, review));
                    }
                    _ => respond(
                        request,
                        status(405, "MethodNotAllowed", "this API is read-only"),
                    ),
                }
            });
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
users:
- name: bench
  user: {{token: read-only}}
contexts:
- name: loopback
  context: {{cluster: loopback, user: bench}}
current-context: loopback
"
    );
    std::fs::write(&kubeconfig, text).unwrap_or_else(|e| panic!("loopback API: {e}"));
    ApiServer { kubeconfig, server }
}
