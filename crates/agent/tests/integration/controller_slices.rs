//! `netpol controller` against the API server stand-in, and agents reading what it publishes:
//!
//! - an agent in slice mode (NetpolEndpointSlices for other nodes' pods, its own node's Pods by
//!   field selector) programs exactly what an agent in direct mode (every Pod) programs: the
//!   same MapState for every local endpoint, on the example cluster and a synthetic one, and
//!   after a pod change has flowed controller → slice → agent;
//! - the controller's writes: coalesced, preconditioned (a slice changed behind its back is
//!   read again, not overwritten), adopted after a restart with nothing rewritten, one writer
//!   among two replicas, a takeover once the leader's Lease expires.
//!
//! Tests wait for conditions (with a generous bound), never for a fixed time.

use crate::agent_support;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use agent_support::cluster::*;
use agent_support::*;
use netpol_agent::controller::{self, ControllerConfig};
use netpol_agent::sources::cluster::{PodSource, WatchConfig};
use netpol_api::crd::NetpolEndpointSlice;
use netpol_api::slices::endpoint_of;
use netpol_api::Object;
use netpol_engine::MapState;
use netpol_testkit::apiserver::ApiServer;
use serde_json::{json, Value};

/// One controller replica running on a thread.
pub(crate) struct Controller {
    listen: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<anyhow::Result<()>>>,
}

impl Controller {
    fn start(server: &ApiServer, identity: &str) -> Controller {
        Controller::start_with(server, identity, |_| {})
    }

    /// A replica whose configuration `configure` changes from the tests' own.
    pub(crate) fn start_with(
        server: &ApiServer,
        identity: &str,
        configure: impl FnOnce(&mut ControllerConfig),
    ) -> Controller {
        // One folder per server and replica: tests run in parallel.
        let dir = scratch_dir(&format!("controller-{}-{identity}", server.address.port()));
        let kubeconfig = dir.join("kubeconfig");
        server.write_kubeconfig(&kubeconfig);
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let listen = probe.local_addr().unwrap();
        drop(probe);
        let mut config = ControllerConfig::new(Some(kubeconfig), listen, "netpol-system", identity);
        config.lease.duration = Duration::from_secs(2);
        config.capacity = 40;
        config.watch = WatchConfig {
            backoff: netpol_datapath::Backoff {
                initial: Duration::from_millis(20),
                max: Duration::from_millis(200),
            },
            ..WatchConfig::default()
        };
        configure(&mut config);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            controller::run_with(&config, async {
                let _ = stopped.await;
            })
        });
        Controller {
            listen,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    fn metric(&self, name: &str) -> Option<f64> {
        // Not serving yet: no figure.
        std::net::TcpStream::connect(self.listen).ok()?;
        let (code, text) = http_get(self.listen, "/metrics");
        if code != 200 {
            return None;
        }
        text.lines()
            .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
            .and_then(|l| l.rsplit(' ').next()?.parse().ok())
    }

    pub(crate) fn is_leader(&self) -> bool {
        self.metric("netpol_controller_leader") == Some(1.0)
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            thread.join().unwrap().unwrap();
        }
    }
}

pub(crate) fn wait_for(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !done() {
        assert!(
            Instant::now() < deadline,
            "{what}: not reached in {PATIENCE:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// What should be published for the server's pods: endpoint by key.
fn wanted(server: &ApiServer) -> BTreeMap<String, netpol_api::slices::Endpoint> {
    server
        .objects("Pod")
        .into_iter()
        .filter_map(|value| match Object::from_value(value) {
            Ok(Object::Pod(pod)) => endpoint_of(&pod),
            _ => None,
        })
        .map(|e| (e.endpoint.key(), e))
        .collect()
}

fn slices(server: &ApiServer) -> Vec<NetpolEndpointSlice> {
    server
        .objects("NetpolEndpointSlice")
        .into_iter()
        .map(|v| NetpolEndpointSlice::from_value(v).unwrap())
        .collect()
}

/// The endpoints the slices list, with their label sets; panics on an endpoint listed twice.
fn published(server: &ApiServer) -> BTreeMap<String, netpol_api::slices::Endpoint> {
    let mut published = BTreeMap::new();
    for slice in slices(server) {
        for endpoint in &slice.spec.endpoints {
            let labels = slice.spec.label_sets[endpoint.labels as usize].clone();
            let entry = netpol_api::slices::Endpoint {
                endpoint: netpol_api::crd::SliceEndpoint {
                    labels: 0,
                    ..endpoint.clone()
                },
                labels,
            };
            let twice = published.insert(endpoint.key(), entry).is_some();
            assert!(!twice, "{} is listed twice", endpoint.key());
        }
    }
    published
}

/// The slices publish exactly the server's pods.
fn in_step(server: &ApiServer) -> bool {
    published(server) == wanted(server)
}

/// The slice writes (creates, replaces, deletes) seen so far.
fn slice_writes(server: &ApiServer) -> Vec<String> {
    server
        .requests()
        .into_iter()
        .filter(|r| r.contains("netpolendpointslices/") || r.starts_with("POST /apis/netpol.io"))
        .filter(|r| !r.starts_with("GET"))
        .collect()
}

fn map_states(agent: &ClusterAgent) -> BTreeMap<String, MapState> {
    agent
        .pipeline
        .engine()
        .endpoints()
        .map(|(key, map)| (key.to_owned(), map.clone()))
        .collect()
}

fn agents(server: &ApiServer) -> (ClusterAgent, ClusterAgent) {
    let watch = WatchConfig {
        page_size: 50,
        ..config()
    };
    let mut direct = ClusterAgent::start_reading(server, watch, new_sim(), &PodSource::Pods);
    let slices = PodSource::Slices { node: NODE.into() };
    let mut sliced = ClusterAgent::start_reading(server, watch, new_sim(), &slices);
    direct.run_until("direct mode's first sync", |a| a.pipeline.synced());
    sliced.run_until("slice mode's first sync", |a| a.pipeline.synced());
    (direct, sliced)
}

/// Whether the agent's engine holds the moved pod's new address.
fn knows_moved_pod(agent: &ClusterAgent) -> bool {
    let moved: std::net::IpAddr = "10.250.0.9".parse().unwrap();
    agent
        .pipeline
        .engine()
        .per_address_store()
        .representative_addresses()
        .values()
        .any(|a| *a == moved)
}

fn pod(name: &str, namespace: &str, node: &str, ip: &str, app: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": app}},
        "spec": {"nodeName": node, "containers": [{"name": "c", "ports": [{"name": "http", "containerPort": 8080}]}]},
        "status": {"phase": "Running", "podIP": ip},
    })
}

/// Both modes on one world: equal MapStates, both programming what a fresh engine computes.
fn assert_modes_agree(server: &ApiServer, test: &str) {
    let _controller = Controller::start(server, "a");
    wait_for("the slices published", || in_step(server));
    let (mut direct, mut sliced) = agents(server);
    assert!(
        !map_states(&direct).is_empty(),
        "no local endpoint on {NODE}"
    );
    assert_eq!(map_states(&direct), map_states(&sliced));
    sliced.assert_programs(server, test);
    // The slice agent read its own node's pods alone, by field selector.
    let pods = server.lists_of("Pod");
    assert!(
        pods.iter()
            .any(|l| l.contains("fieldSelector=spec.nodeName%3Dnode-1")),
        "{pods:#?}"
    );

    // A remote pod changes: controller → slice → agent.
    let remote = server
        .objects("Pod")
        .into_iter()
        .find(|p| p["spec"]["nodeName"] != NODE && p["status"]["podIP"].is_string())
        .expect("a remote pod");
    let mut moved = remote.clone();
    moved["metadata"]["labels"] = json!({"netpol-test": "relabelled"});
    moved["status"]["podIP"] = json!("10.250.0.9");
    moved["status"]["podIPs"] = json!([{"ip": "10.250.0.9"}]);
    server.apply(moved);
    wait_for("the change published", || in_step(server));
    direct.run_until("direct mode sees the change", knows_moved_pod);
    sliced.run_until("slice mode sees the change", knows_moved_pod);
    assert_eq!(map_states(&direct), map_states(&sliced));
    sliced.assert_programs(server, &format!("{test}-changed"));
}

#[test]
fn slice_mode_programs_what_direct_mode_programs_on_the_example_cluster() {
    let server = example_server();
    assert_modes_agree(&server, "slices-example");
}

#[test]
fn slice_mode_programs_what_direct_mode_programs_on_a_synthetic_cluster() {
    let dir = scratch_dir("slices-synth");
    synth_cluster(&dir, 300);
    let server = ApiServer::start();
    server.load_dir(&dir);
    assert_modes_agree(&server, "slices-synth");
}

/// A server with `replicas` `shop` pods named `PREFIX{i}` on node-2, published by a controller.
fn published_shop(prefix: &str, replicas: u32) -> (ApiServer, Controller) {
    let server = ApiServer::start();
    for i in 0..replicas {
        let name = format!("{prefix}{i}");
        let ip = format!("10.1.0.{}", i + 1);
        server.preload(pod(&name, "shop", "node-2", &ip, "web"));
    }
    let controller = Controller::start(&server, "a");
    wait_for("the first publication", || in_step(&server));
    (server, controller)
}

#[test]
fn a_rolling_update_is_a_handful_of_writes() {
    let (server, _controller) = published_shop("web-old-", 100);
    let first = slice_writes(&server).len();
    assert_eq!(
        first,
        3,
        "100 endpoints, 40 a slice: {:#?}",
        slice_writes(&server)
    );
    for i in 0..100 {
        server.delete("Pod", &format!("shop/web-old-{i}"));
        server.apply(pod(
            &format!("web-new-{i}"),
            "shop",
            "node-2",
            &format!("10.1.1.{}", i + 1),
            "web",
        ));
    }
    wait_for("the update published", || in_step(&server));
    let writes = slice_writes(&server).split_off(first);
    // 200 pod changes; the 3 slices rewritten about once each (the changes of one moment go
    // in one write), and the new pods take the room the old ones left: no new slice.
    assert!(writes.len() <= 9, "{writes:#?}");
    assert!(writes.iter().all(|w| w.starts_with("PUT")), "{writes:#?}");
    assert_eq!(slices(&server).len(), 3);
}

#[test]
fn a_slice_changed_behind_the_controllers_back_is_read_again_not_overwritten() {
    let (server, controller) = published_shop("web-", 10);
    // Someone else writes the slice (a previous leader's late write): a stray endpoint.
    let mut slice = server.objects("NetpolEndpointSlice").remove(0);
    let mut stray = slice["spec"]["endpoints"][0].clone();
    stray["name"] = json!("stray");
    slice["spec"]["endpoints"]
        .as_array_mut()
        .unwrap()
        .push(stray);
    server.apply(slice);
    assert!(!in_step(&server));
    // The controller's next write to it carries the resourceVersion it read: 409, read again,
    // planned again; the stray endpoint goes, the change lands.
    server.apply(pod("web-0", "shop", "node-2", "10.1.0.1", "api"));
    wait_for("the change published", || in_step(&server));
    wait_for("the stale write counted", || {
        controller.metric("netpol_controller_slice_writes_total{write=\"stale\"}") >= Some(1.0)
    });
}

#[test]
fn a_restarted_controller_adopts_the_slices_and_rewrites_nothing() {
    let server = ApiServer::start();
    for i in 0..90 {
        let namespace = format!("ns-{}", i % 3);
        server.preload(pod(
            &format!("p-{i}"),
            &namespace,
            "node-2",
            &format!("10.2.0.{}", i + 1),
            "db",
        ));
    }
    let first = Controller::start(&server, "a");
    wait_for("the first publication", || in_step(&server));
    let before: Vec<(String, String)> = server
        .objects("NetpolEndpointSlice")
        .iter()
        .map(|s| {
            (
                s["metadata"]["name"].to_string(),
                s["metadata"]["resourceVersion"].to_string(),
            )
        })
        .collect();
    drop(first);
    let writes = slice_writes(&server).len();
    // The same identity takes its own Lease back at once; it lists, adopts, writes nothing.
    let second = Controller::start(&server, "a");
    wait_for("the restarted controller leads", || second.is_leader());
    wait_for("the slices adopted", || {
        second.metric("netpol_controller_slices") == Some(before.len() as f64)
    });
    assert_eq!(
        slice_writes(&server).len(),
        writes,
        "{:#?}",
        slice_writes(&server)
    );
    let after: Vec<(String, String)> = server
        .objects("NetpolEndpointSlice")
        .iter()
        .map(|s| {
            (
                s["metadata"]["name"].to_string(),
                s["metadata"]["resourceVersion"].to_string(),
            )
        })
        .collect();
    assert_eq!(before, after);
    // Changes made while no controller ran are published once it runs again.
    server.delete("Pod", "ns-1/p-1");
    wait_for("the deletion published", || in_step(&server));
}

#[test]
fn two_replicas_one_writer_and_a_takeover_after_the_lease_expires() {
    let server = ApiServer::start();
    server.preload(pod("web-0", "shop", "node-2", "10.1.0.1", "web"));
    let a = Controller::start(&server, "a");
    let b = Controller::start(&server, "b");
    wait_for("a leader", || a.is_leader() || b.is_leader());
    wait_for("the first publication", || in_step(&server));
    assert!(!(a.is_leader() && b.is_leader()), "two leaders");
    let (leader, other) = if a.is_leader() { (a, b) } else { (b, a) };
    drop(leader);
    server.apply(pod("web-1", "shop", "node-2", "10.1.0.2", "web"));
    // The other replica takes over once the Lease expires (2 s here), then publishes.
    wait_for("the takeover", || other.is_leader());
    wait_for("the change published", || in_step(&server));
    let lease = server
        .leases()
        .into_iter()
        .find(|l| l["metadata"]["name"] == "netpol-controller")
        .unwrap();
    assert_eq!(lease["spec"]["leaseTransitions"], 1, "{lease}");
}

#[test]
fn without_the_crd_a_slice_mode_agent_holds_programming_back() {
    let server = example_server();
    server.set_installed("NetpolEndpointSlice", false);
    let slices = PodSource::Slices { node: NODE.into() };
    let mut agent = ClusterAgent::start_reading(&server, config(), new_sim(), &slices);
    agent.run_until("the slice watch fails", |a| {
        a.health
            .readiness()
            .is_err_and(|why| why.contains("kind NetpolEndpointSlice"))
    });
    assert!(
        !agent.pipeline.synced(),
        "nothing is programmed until the slices list"
    );
}
