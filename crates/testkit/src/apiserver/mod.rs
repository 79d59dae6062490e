//! An in-process stand-in for kube-apiserver on loopback, speaking the list/watch protocol the
//! agent uses: `limit`/`continue` paging, watches from a resourceVersion with bookmarks, 410 Gone
//! for a compacted resourceVersion (in the watch stream, as the API server sends it), the
//! plain-text 404 of a resource type not served (a CRD not installed), scripted failures of
//! lists and watches, slow list pages, watch connections the test can sever or stall (open and
//! silent, as a half-open connection is) and periodic bookmarks ([`watches`]); Leases and Events
//! can be written ([`crate::writable`]). Every request is logged for the tests to inspect, and
//! requests and response bytes are counted ([`traffic`]).

mod encoding;
mod lists;
mod selector;
mod traffic;
mod watches;
mod writes;

pub use traffic::TrafficCount;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Router;
use serde_json::{json, Value};
use tokio::sync::{broadcast, watch};

use crate::writable::{route, Writable};
use traffic::Traffic;
use watches::serve_watch;

/// A served kind: its name, apiVersion, collection path, and whether list items carry
/// `apiVersion`/`kind` (custom resources do, built-in kinds do not).
pub type Resource = (&'static str, &'static str, &'static str, bool);

/// Where each kind netpol's readers list is served.
pub const RESOURCES: [Resource; 9] = [
    ("Namespace", "v1", "/api/v1/namespaces", false),
    ("Pod", "v1", "/api/v1/pods", false),
    ("Node", "v1", "/api/v1/nodes", false),
    (
        "NetworkPolicy",
        "networking.k8s.io/v1",
        "/apis/networking.k8s.io/v1/networkpolicies",
        false,
    ),
    (
        "AdminNetworkPolicy",
        "policy.networking.k8s.io/v1alpha1",
        "/apis/policy.networking.k8s.io/v1alpha1/adminnetworkpolicies",
        true,
    ),
    (
        "BaselineAdminNetworkPolicy",
        "policy.networking.k8s.io/v1alpha1",
        "/apis/policy.networking.k8s.io/v1alpha1/baselineadminnetworkpolicies",
        true,
    ),
    (
        "ClusterNetworkPolicy",
        "policy.networking.k8s.io/v1alpha2",
        "/apis/policy.networking.k8s.io/v1alpha2/clusternetworkpolicies",
        true,
    ),
    (
        "CiliumNetworkPolicy",
        "cilium.io/v2",
        "/apis/cilium.io/v2/ciliumnetworkpolicies",
        true,
    ),
    (
        "CiliumClusterwideNetworkPolicy",
        "cilium.io/v2",
        "/apis/cilium.io/v2/ciliumclusterwidenetworkpolicies",
        true,
    ),
];

/// NetpolEndpointSlices, which `netpol controller` writes (create, replace, delete with
/// resourceVersion preconditions: see [`writes`]) and agents in slice mode watch.
pub const ENDPOINT_SLICES: Resource = (
    "NetpolEndpointSlice",
    "netpol.io/v1alpha1",
    "/apis/netpol.io/v1alpha1/netpolendpointslices",
    true,
);

/// Every kind served: [`RESOURCES`] and [`ENDPOINT_SLICES`].
fn served() -> impl Iterator<Item = &'static Resource> {
    RESOURCES.iter().chain(std::iter::once(&ENDPOINT_SLICES))
}

fn resource_of(kind: &str) -> Resource {
    *served()
        .find(|r| r.0 == kind)
        .unwrap_or_else(|| panic!("no resource for kind {kind}"))
}

/// One change, as a watch delivers it.
#[derive(Clone, Debug)]
struct Change {
    version: u64,
    path: &'static str,
    kind: &'static str, // ADDED, MODIFIED, DELETED
    object: Value,
}

#[derive(Default)]
struct Store {
    version: u64,
    /// Objects by resource path, then by `namespace/name`.
    objects: BTreeMap<&'static str, BTreeMap<String, Value>>,
    /// Every change, oldest first; those at or below `compacted` are forgotten.
    history: Vec<Change>,
    compacted: u64,
    /// Resource paths answered with a plain-text 404 (CRDs not installed).
    not_installed: BTreeSet<&'static str>,
    /// Status codes (and messages) to answer the next list requests of a path with, in order.
    list_failures: BTreeMap<&'static str, VecDeque<(u16, String)>>,
    /// The same for watch requests.
    watch_failures: BTreeMap<&'static str, VecDeque<(u16, String)>>,
    /// The Retry-After a 429 of a path asks for, in seconds.
    retry_after: BTreeMap<&'static str, u32>,
    /// How long each list page of a path takes to be answered.
    page_delays: BTreeMap<&'static str, Duration>,
    /// Request paths with their query, in arrival order, with when they came.
    requests: Vec<(Instant, String)>,
    /// Resource paths whose watches are open and silent (see [`ApiServer::stall_watches`]).
    stalled: BTreeSet<&'static str>,
    /// How often an open watch that asked for bookmarks gets one; None: only at its start.
    bookmark_every: Option<Duration>,
    /// Streaming lists are answered 422 (the WatchList feature off).
    streaming_refused: bool,
}

struct Shared {
    store: Mutex<Store>,
    /// Leases and Events (see [`crate::writable`]).
    writable: Mutex<Writable>,
    changes: broadcast::Sender<Change>,
    /// Bumped to sever every open watch connection.
    sever: watch::Sender<u64>,
    traffic: Traffic,
}

impl Shared {
    /// Keeps `change` in the history and hands it to the open watches.
    fn record(&self, store: &mut Store, change: Change) {
        store.history.push(change.clone());
        let _ = self.changes.send(change);
    }
}

/// The running stand-in.
pub struct ApiServer {
    pub address: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ApiServer {
    /// Serves on an ephemeral loopback port from a thread of its own.
    pub fn start() -> ApiServer {
        let (changes, _) = broadcast::channel(4096);
        let (sever, _) = watch::channel(0);
        let shared = Arc::new(Shared {
            store: Mutex::new(Store {
                version: 100,
                ..Store::default()
            }),
            writable: Mutex::new(Writable::default()),
            changes,
            sever,
            traffic: Traffic::default(),
        });
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let address = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let app = Router::new().fallback(serve).with_state(shared.clone());
        let thread = std::thread::spawn(move || {
            runtime.block_on(async {
                axum::serve(listener, app)
                    .with_graceful_shutdown(async {
                        let _ = stopped.await;
                    })
                    .await
                    .unwrap();
            });
            runtime.shutdown_background();
        });
        ApiServer {
            address,
            shared,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    fn store(&self) -> MutexGuard<'_, Store> {
        self.shared.store.lock().unwrap()
    }

    /// Loads every object of the YAML files under `dir` (no events: as if there from the start).
    /// A stand-in serving the bundled example cluster.
    pub fn with_example_cluster() -> ApiServer {
        let server = ApiServer::start();
        server.load_dir(&crate::files::example_cluster());
        server
    }

    pub fn load_dir(&self, dir: &Path) {
        let mut files = Vec::new();
        collect_yaml(dir, &mut files);
        files.sort();
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            let documents: Vec<Value> =
                serde_saphyr::from_multiple_with_options(&text, serde_saphyr::Options::default())
                    .unwrap();
            for mut document in documents.into_iter().filter(|d| !d.is_null()) {
                // A `kind: List` (what `netpol-dev synth` writes) holds the objects.
                match document.get_mut("items").map(Value::take) {
                    Some(Value::Array(items)) if document["kind"] == "List" => {
                        items.into_iter().for_each(|item| self.put_quietly(item));
                    }
                    _ => self.put_quietly(document),
                }
            }
        }
    }

    /// Stores an object as if it had been there from the start: no watch sees it, and it
    /// leaves no history (a cluster of 150,000 pods is loaded without a copy of each).
    pub fn preload(&self, object: Value) {
        self.put_quietly(object);
    }

    fn put_quietly(&self, object: Value) {
        let mut store = self.store();
        store.version += 1;
        let version = store.version;
        let (path, mut object) = stamp(object, version);
        let objects = store.objects.entry(path).or_default();
        let key = key_of(&object);
        identify(&mut object, objects.get(&key), version);
        objects.insert(key, object);
    }

    /// Creates or replaces an object, as `kubectl apply` would; open watches see it.
    pub fn apply(&self, object: Value) {
        let mut store = self.store();
        store.version += 1;
        let version = store.version;
        let (path, mut object) = stamp(object, version);
        let key = key_of(&object);
        let objects = store.objects.entry(path).or_default();
        identify(&mut object, objects.get(&key), version);
        let existed = objects.insert(key, object.clone()).is_some();
        let kind = if existed { "MODIFIED" } else { "ADDED" };
        self.record(
            &mut store,
            Change {
                version,
                path,
                kind,
                object,
            },
        );
    }

    /// Deletes the object `kind` `namespace/name` (`name` alone when cluster-scoped).
    pub fn delete(&self, kind: &str, key: &str) {
        self.remove(kind, key, true);
    }

    /// Deletes an object while no watch sees it (as if during a disconnection whose history
    /// is then compacted): only a new list can tell.
    pub fn delete_unseen(&self, kind: &str, key: &str) {
        self.remove(kind, key, false);
    }

    fn remove(&self, kind: &str, key: &str, seen: bool) {
        let mut store = self.store();
        let path = resource_of(kind).2;
        let Some(mut object) = store.objects.get_mut(path).and_then(|o| o.remove(key)) else {
            panic!("no {kind} {key} to delete");
        };
        store.version += 1;
        let version = store.version;
        object["metadata"]["resourceVersion"] = json!(version.to_string());
        if seen {
            self.record(
                &mut store,
                Change {
                    version,
                    path,
                    kind: "DELETED",
                    object,
                },
            );
        }
    }

    fn record(&self, store: &mut Store, change: Change) {
        self.shared.record(store, change);
    }

    /// Forgets the history up to now: watches from an older resourceVersion get 410 Gone.
    pub fn compact(&self) {
        let mut store = self.store();
        store.compacted = store.version;
        store.history.clear();
    }

    /// Severs every open watch connection (a dropped connection, as a load balancer does).
    pub fn sever_watches(&self) {
        self.shared.sever.send_modify(|generation| *generation += 1);
    }

    /// Stalls every watch of `kind`, open or to come, or ends the stall: a stalled watch stays
    /// open and delivers nothing (no event, no bookmark), as a half-open connection does; what
    /// it would have delivered is lost with it, so that only a new watch from the last
    /// resourceVersion seen brings it.
    pub fn stall_watches(&self, kind: &str, stalled: bool) {
        let path = resource_of(kind).2;
        let mut store = self.store();
        if stalled {
            store.stalled.insert(path);
        } else {
            store.stalled.remove(path);
        }
    }

    /// Sends every open watch that asked for bookmarks one every `every` (the API server sends
    /// one about once a minute); by default only a watch's start has one.
    pub fn bookmark_every(&self, every: Duration) {
        self.store().bookmark_every = Some(every);
    }

    /// Answers streaming lists with 422 Invalid, as an API server with the WatchList feature
    /// off does.
    pub fn refuse_streaming_lists(&self) {
        self.store().streaming_refused = true;
    }

    /// The requests and response bytes served so far.
    pub fn traffic(&self) -> TrafficCount {
        self.shared.traffic.snapshot()
    }

    /// Makes `kind` unserved (its CRD not installed) or served again.
    pub fn set_installed(&self, kind: &str, installed: bool) {
        let path = resource_of(kind).2;
        let mut store = self.store();
        if installed {
            store.not_installed.remove(path);
        } else {
            store.not_installed.insert(path);
        }
    }

    /// Forgets every scripted failure and delay.
    pub fn clear_failures(&self) {
        let mut store = self.store();
        store.list_failures.clear();
        store.watch_failures.clear();
        store.page_delays.clear();
    }

    /// Answers the next `codes.len()` list requests of `kind` with these status codes; a code
    /// of 0 hangs the request (an API server that never answers), a code of 200 serves it, a
    /// code of 1 serves it but breaks the connection half-way through the body (a server or
    /// proxy that dies mid-response).
    pub fn fail_lists(&self, kind: &str, codes: &[u16]) {
        self.fail_lists_saying(kind, codes, "scripted failure");
    }

    /// [`ApiServer::fail_lists`] with `message` in each failure's Status.
    pub fn fail_lists_saying(&self, kind: &str, codes: &[u16], message: &str) {
        let path = resource_of(kind).2;
        self.store()
            .list_failures
            .entry(path)
            .or_default()
            .extend(codes.iter().map(|c| (*c, message.to_owned())));
    }

    /// Answers the next `times` list requests of `kind` with 429 Too Many Requests asking to
    /// retry after `retry_after_s` seconds (the `Retry-After` header and the Status's
    /// `details.retryAfterSeconds`, as the API server's priority and fairness does).
    pub fn throttle_lists(&self, kind: &str, times: usize, retry_after_s: u32) {
        let path = resource_of(kind).2;
        self.store().retry_after.insert(path, retry_after_s);
        self.fail_lists_saying(
            kind,
            &vec![429; times],
            "too many requests, please try again later",
        );
    }

    /// Answers the next `codes.len()` watch requests of `kind` with these status codes (a code
    /// of 0 hangs the request). A streaming list (`sendInitialEvents`) is a watch request: the
    /// first of these answers a client that lists by streaming.
    pub fn fail_watches(&self, kind: &str, codes: &[u16]) {
        self.fail_watches_saying(kind, codes, "scripted failure");
    }

    /// [`ApiServer::fail_watches`] with `message` in each failure's Status.
    pub fn fail_watches_saying(&self, kind: &str, codes: &[u16], message: &str) {
        let path = resource_of(kind).2;
        self.store()
            .watch_failures
            .entry(path)
            .or_default()
            .extend(codes.iter().map(|c| (*c, message.to_owned())));
    }

    /// Answers each list page of `kind` after `delay` (a busy API server).
    pub fn slow_list_pages(&self, kind: &str, delay: Duration) {
        let path = resource_of(kind).2;
        self.store().page_delays.insert(path, delay);
    }

    /// A kubeconfig for this server, written to `path`.
    pub fn write_kubeconfig(&self, path: &Path) {
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: stand-in\n  cluster: {{server: \"http://{}\"}}\nusers:\n- name: anyone\n  user: {{}}\ncontexts:\n- name: stand-in\n  context: {{cluster: stand-in, user: anyone}}\ncurrent-context: stand-in\n",
            self.address
        );
        std::fs::write(path, text).unwrap();
    }

    /// The requests so far (path and query), in order.
    pub fn requests(&self) -> Vec<String> {
        self.store()
            .requests
            .iter()
            .map(|(_, r)| r.clone())
            .collect()
    }

    /// Forgets the requests logged so far (a long run keeps its log small).
    pub fn forget_requests(&self) {
        self.store().requests = Vec::new();
    }

    /// When each list request of `kind` arrived.
    pub fn list_times(&self, kind: &str) -> Vec<Instant> {
        self.request_times(kind, false)
    }

    /// When each watch request of `kind` arrived.
    pub fn watch_times(&self, kind: &str) -> Vec<Instant> {
        self.request_times(kind, true)
    }

    fn request_times(&self, kind: &str, watches: bool) -> Vec<Instant> {
        let path = resource_of(kind).2;
        self.store()
            .requests
            .iter()
            .filter(|(_, r)| {
                r.split('?').next() == Some(path) && r.contains("watch=true") == watches
            })
            .map(|(at, _)| *at)
            .collect()
    }

    /// The requests of `kind`'s path that are lists (not watches).
    pub fn lists_of(&self, kind: &str) -> Vec<String> {
        let path = resource_of(kind).2;
        self.requests()
            .into_iter()
            .filter(|r| r.split('?').next() == Some(path) && !r.contains("watch=true"))
            .collect()
    }

    /// The requests of `kind`'s path that are watches.
    pub fn watches_of(&self, kind: &str) -> Vec<String> {
        let path = resource_of(kind).2;
        self.requests()
            .into_iter()
            .filter(|r| r.split('?').next() == Some(path) && r.contains("watch=true"))
            .collect()
    }

    /// Writes the current objects, one JSON file each, under `dir` (emptied first): what a
    /// fresh engine should compute from.
    pub fn write_objects(&self, dir: &Path) {
        let _ = std::fs::remove_dir_all(dir);
        std::fs::create_dir_all(dir).unwrap();
        let store = self.store();
        let mut n = 0;
        // Slices are netpol's own record of the pods, not an object policies are read from.
        let read = store
            .objects
            .iter()
            .filter(|(path, _)| **path != ENDPOINT_SLICES.2);
        for (_, objects) in read {
            for object in objects.values() {
                n += 1;
                std::fs::write(dir.join(format!("{n:05}.json")), object.to_string()).unwrap();
            }
        }
    }

    /// The stored objects of `kind`, by key.
    pub fn objects(&self, kind: &str) -> Vec<Value> {
        let path = resource_of(kind).2;
        let store = self.store();
        store
            .objects
            .get(path)
            .map(|o| o.values().cloned().collect())
            .unwrap_or_default()
    }

    /// The Events posted so far (every namespace).
    pub fn events(&self) -> Vec<Value> {
        self.shared.writable.lock().unwrap().all("Event")
    }

    /// The Leases held (every namespace).
    pub fn leases(&self) -> Vec<Value> {
        self.shared.writable.lock().unwrap().all("Lease")
    }

    /// A kube client for this server.
    pub fn client(&self) -> kube::Client {
        let url = format!("http://{}", self.address).parse().unwrap();
        kube::Client::try_from(kube::Config::new(url)).unwrap()
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        self.sever_watches();
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn collect_yaml(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            collect_yaml(&path, out);
        } else if path.extension().is_some_and(|e| e == "yaml") {
            out.push(path);
        }
    }
}

/// The object's resource path, with its resourceVersion set.
fn stamp(mut object: Value, version: u64) -> (&'static str, Value) {
    let kind = object["kind"]
        .as_str()
        .expect("an object with a kind")
        .to_owned();
    let path = resource_of(&kind).2;
    object["metadata"]["resourceVersion"] = json!(version.to_string());
    (path, object)
}

/// Gives the object the API server's identity fields: the `uid` it was created with (a new one
/// when it is new), and a `generation` of 1 at creation, raised by each change of anything but
/// its metadata and status (a label change keeps it), as the API server does.
fn identify(object: &mut Value, previous: Option<&Value>, version: u64) {
    let content = |o: &Value| -> Value {
        let mut o = o.clone();
        if let Some(map) = o.as_object_mut() {
            map.remove("metadata");
            map.remove("status");
        }
        o
    };
    let (uid, generation) = match previous {
        Some(previous) => {
            let generation = previous["metadata"]["generation"].as_i64().unwrap_or(1);
            let changed = content(previous) != content(object);
            (
                previous["metadata"]["uid"].clone(),
                generation + i64::from(changed),
            )
        }
        None => (json!(format!("uid-{version}")), 1),
    };
    object["metadata"]["uid"] = uid;
    object["metadata"]["generation"] = json!(generation);
}

fn key_of(object: &Value) -> String {
    let metadata = &object["metadata"];
    let name = metadata["name"].as_str().unwrap_or_default();
    match metadata["namespace"].as_str() {
        Some(namespace) => format!("{namespace}/{name}"),
        None => name.to_owned(),
    }
}

/// How an object goes out: built-in kinds' list items without `apiVersion`/`kind`.
fn as_served(object: &Value, in_list: bool) -> Value {
    let kind = object["kind"].as_str().unwrap_or_default();
    let mut object = object.clone();
    if in_list && !resource_of(kind).3 {
        if let Some(map) = object.as_object_mut() {
            map.remove("apiVersion");
            map.remove("kind");
        }
    }
    object
}

fn status(code: u16, reason: &str, message: &str) -> Value {
    json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code,
    })
}

fn json_response(code: StatusCode, body: Value) -> Response {
    (
        code,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn query_param<'a>(query: &'a str, name: &str) -> Option<&'a str> {
    query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value)
}

async fn serve(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let path = request.uri().path().to_owned();
    let query = request.uri().query().unwrap_or_default().to_owned();
    let gzip = encoding::accepts_gzip(request.headers());
    if let Some(target) = route(&path) {
        Traffic::count(&shared.traffic.writable, 1);
        let method = request.method().clone();
        shared
            .store
            .lock()
            .unwrap()
            .requests
            .push((Instant::now(), format!("{method} {path}?{query}")));
        let Ok(body) = axum::body::to_bytes(request.into_body(), 1 << 20).await else {
            return (StatusCode::BAD_REQUEST, "unreadable body").into_response();
        };
        return shared
            .writable
            .lock()
            .unwrap()
            .handle(&method, target, &body);
    }
    if request.method() != axum::http::Method::GET {
        if let Some(target) = writes::route(&path) {
            let method = request.method().clone();
            let Ok(body) = axum::body::to_bytes(request.into_body(), 4 << 20).await else {
                return (StatusCode::BAD_REQUEST, "unreadable body").into_response();
            };
            return writes::handle(&shared, &method, target, &path, &body);
        }
    }
    let Some(resource) = served().find(|r| r.2 == path) else {
        return serve_get(&shared, &path, gzip);
    };
    let watch = query_param(&query, "watch").is_some_and(|w| w == "true" || w == "1");
    let traffic = &shared.traffic;
    Traffic::count(
        if watch {
            &traffic.watches
        } else {
            &traffic.lists
        },
        1,
    );
    let (failure, delay, retry_after) = {
        let mut store = shared.store.lock().unwrap();
        store
            .requests
            .push((Instant::now(), format!("{path}?{query}")));
        if store.not_installed.contains(resource.2) {
            return (StatusCode::NOT_FOUND, "404 page not found\n").into_response();
        }
        let scripted = if watch {
            store.watch_failures.get_mut(resource.2)
        } else {
            store.list_failures.get_mut(resource.2)
        };
        // A scripted 200 lets one request through (to fail a later page of a list).
        let failure = scripted
            .and_then(VecDeque::pop_front)
            .filter(|(code, _)| *code != 200);
        let delay = store
            .page_delays
            .get(resource.2)
            .filter(|_| !watch)
            .copied();
        (failure, delay, store.retry_after.get(resource.2).copied())
    };
    if let Some(delay) = delay {
        tokio::time::sleep(delay).await;
    }
    match failure {
        Some((0, _)) => {
            // Hangs until the client gives up (or the test ends).
            tokio::time::sleep(Duration::from_secs(3600)).await;
            (StatusCode::GATEWAY_TIMEOUT, "never").into_response()
        }
        Some((1, _)) => lists::cut_off(lists::serve_list(&shared, resource, &query, false)).await,
        Some((429, message)) => {
            let seconds = retry_after.unwrap_or(1);
            let mut body = status(429, "TooManyRequests", &message);
            body["details"] = json!({"retryAfterSeconds": seconds});
            let mut response = json_response(StatusCode::TOO_MANY_REQUESTS, body);
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, seconds.into());
            response
        }
        Some((code, message)) => {
            let code = StatusCode::from_u16(code).unwrap();
            let reason = code.canonical_reason().unwrap_or("Failure");
            json_response(code, status(code.as_u16(), reason, &message))
        }
        None if watch => serve_watch(&shared, resource.2, &query),
        None => lists::serve_list(&shared, resource, &query, gzip),
    }
}

/// A `GET` of one object: `PREFIX/namespaces/NS/PLURAL/NAME`, or `PREFIX/PLURAL/NAME` for a
/// cluster-scoped kind; 404 `NotFound` when there is no such object.
fn serve_get(shared: &Shared, path: &str, gzip: bool) -> Response {
    let found = served().find_map(|resource| {
        let (prefix, plural) = resource.2.rsplit_once('/')?;
        let rest = path.strip_prefix(prefix)?.strip_prefix('/')?;
        let key = match rest.split('/').collect::<Vec<_>>().as_slice() {
            ["namespaces", namespace, p, name] if *p == plural => format!("{namespace}/{name}"),
            [p, name] if *p == plural => (*name).to_owned(),
            _ => return None,
        };
        Some((resource, key))
    });
    let Some((resource, key)) = found else {
        return (StatusCode::NOT_FOUND, "404 page not found\n").into_response();
    };
    let mut store = shared.store.lock().unwrap();
    store.requests.push((Instant::now(), format!("GET {path}")));
    Traffic::count(&shared.traffic.gets, 1);
    match store.objects.get(resource.2).and_then(|o| o.get(&key)) {
        Some(object) => {
            let body = as_served(object, false).to_string();
            let (response, sent) = encoding::json_body(StatusCode::OK, body, gzip);
            Traffic::count(&shared.traffic.other_bytes, sent);
            response
        }
        None => json_response(
            StatusCode::NOT_FOUND,
            status(
                404,
                "NotFound",
                &format!("{} \"{key}\" not found", resource.0),
            ),
        ),
    }
}
