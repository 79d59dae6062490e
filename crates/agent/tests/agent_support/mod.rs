//! Shared harness of the agent's end-to-end tests: an embedded-mode pipeline over files in a
//! scratch directory, programming an HCN simulator, driven step by step (no clocks, no threads).

#![allow(dead_code, unused_imports)] // each test binary uses a different part of the harness

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use netpol_agent::indexes::Indexes;
use netpol_agent::instrumented::Instrumented;
use netpol_agent::metrics::Metrics;
use netpol_agent::reconciler::{Pipeline, ReconcileReport};
use netpol_agent::sources::files::{FileSource, Scan};
use netpol_datapath::Backoff;
use netpol_engine::flow::AddressOracle;
use netpol_engine::{Direction, Engine, EngineConfig, Protocol};
use netpol_hcn::discovery::SimulatedCni;
use netpol_hcn::oracle::packet;
use netpol_hcn::schema::AclAction;
use netpol_hcn::sim::{Call, HcnSim};
use netpol_hcn::{HcnApi, HcnDatapath};
use prometheus_client::registry::Registry;

pub const NODE: &str = "node-1";

/// The flows every convergence check probes, in both directions.
pub const PROBES: [(Protocol, u16); 10] = [
    (Protocol::Tcp, 22),
    (Protocol::Tcp, 80),
    (Protocol::Tcp, 443),
    (Protocol::Tcp, 1433),
    (Protocol::Tcp, 8080),
    (Protocol::Tcp, 8443),
    (Protocol::Tcp, 9100),
    (Protocol::Udp, 53),
    (Protocol::Udp, 80),
    (Protocol::Sctp, 80),
];

pub use netpol_testkit::files::{copy_example_cluster, INVALID_POLICY};
pub use netpol_testkit::http::http_get;

/// A fresh scratch directory for one test.
pub fn scratch_dir(test: &str) -> PathBuf {
    netpol_testkit::files::scratch_dir(Path::new(env!("CARGO_TARGET_TMPDIR")), test)
}

/// Writes a synthetic cluster of `pods` pods on two nodes into `dir` (`netpol-dev synth`): the
/// pods of the odd namespaces (`ns-1`, `ns-3`, ...) all run on [`NODE`].
pub fn synth_cluster(dir: &Path, pods: usize) {
    let pods = pods.to_string();
    let args = ["synth", "--pods", &pods, "--nodes", "2", "--out"];
    netpol_dev::run(
        args.into_iter().chain([dir.to_str().unwrap()]),
        &mut std::io::sink(),
    )
    .unwrap();
}

/// One agent: a file source and a pipeline over a shared simulator.
pub struct Agent {
    pub dir: PathBuf,
    pub source: FileSource,
    pub pipeline: Pipeline,
    pub metrics: Metrics,
    pub registry: Registry,
    pub now: Instant,
}

pub fn backoff() -> Backoff {
    Backoff {
        initial: Duration::from_secs(1),
        max: Duration::from_secs(8),
    }
}

impl Agent {
    /// Starts an agent over `dir`, programming `sim` (a restart when `sim` was used before).
    pub fn start(dir: &Path, sim: &Arc<HcnDatapath<HcnSim>>) -> Agent {
        Agent::start_over(dir, sim, sim.clone())
    }

    /// Starts an agent programming `sim` through `raw` (a wrapper or session of it).
    pub fn start_over(dir: &Path, sim: &Arc<HcnDatapath<HcnSim>>, raw: Arc<dyn HcnApi>) -> Agent {
        let mut registry = Registry::default();
        let metrics = Metrics::register(&mut registry);
        let datapath = Arc::new(Instrumented::new(raw, metrics.clone()));
        let pipeline = Pipeline::new(
            NODE,
            datapath,
            Box::new(SimulatedCni::new(sim.clone())),
            backoff(),
            metrics.clone(),
        );
        Agent {
            dir: dir.to_owned(),
            source: FileSource::new(dir),
            pipeline,
            metrics,
            registry,
            now: Instant::now(),
        }
    }

    /// Reads what changed in the files and feeds it to the pipeline, without reconciling.
    pub fn scan(&mut self) -> Scan {
        let mut scan = settled_scan(&mut self.source);
        for event in std::mem::take(&mut scan.events) {
            self.pipeline.ingest(event);
        }
        scan
    }

    /// Scans and reconciles once.
    pub fn sync(&mut self) -> ReconcileReport {
        self.scan();
        self.reconcile()
    }

    pub fn reconcile(&mut self) -> ReconcileReport {
        self.pipeline
            .reconcile(self.now)
            .expect("every kind is listed")
    }

    /// Moves the agent's notion of time forward (for retries).
    pub fn advance(&mut self, by: Duration) {
        self.now += by;
    }

    pub fn write(&self, file: &str, text: &str) {
        let path = self.dir.join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    pub fn remove(&self, file: &str) {
        std::fs::remove_file(self.dir.join(file)).unwrap();
    }

    /// Replaces `from` by `to` in `file`, which must contain it.
    pub fn edit(&self, file: &str, from: &str, to: &str) {
        let path = self.dir.join(file);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains(from), "{file} does not contain {from:?}");
        std::fs::write(path, text.replacen(from, to, 1)).unwrap();
    }

    /// The HCN endpoint holding `pod`'s address.
    pub fn endpoint_of(&self, pod: &str) -> String {
        endpoint_of(&self.pipeline, pod)
    }

    pub fn metrics_text(&self) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry).unwrap();
        text
    }
}

/// Health as it stands after a first full sync.
pub fn synced_health() -> netpol_agent::health::Health {
    let health = netpol_agent::health::Health::default();
    health.heartbeat();
    health.set_synced();
    health
}

pub fn new_sim() -> Arc<HcnDatapath<HcnSim>> {
    Arc::new(HcnDatapath::new(HcnSim::new()))
}

/// The endpoints that received a modify call.
pub fn modified(calls: &[Call]) -> Vec<String> {
    let mut endpoints: Vec<String> = calls
        .iter()
        .filter_map(|c| match c {
            Call::Modify { endpoint, .. } => Some(endpoint.clone()),
            _ => None,
        })
        .collect();
    endpoints.sort();
    endpoints.dedup();
    endpoints
}

/// Scans until no file is left settling (a second look at a file written before the scan sees
/// it unchanged and reads it), returning every event and problem of those scans.
pub fn settled_scan(source: &mut FileSource) -> Scan {
    let mut all = Scan::default();
    for _ in 0..3 {
        let scan = source.scan().unwrap();
        all.events.extend(scan.events);
        all.problems.extend(scan.problems);
        all.settling = scan.settling;
        all.objects_mapped += scan.objects_mapped;
        if scan.settling == 0 {
            return all;
        }
    }
    panic!("files still changing after three looks: {:?}", all.problems);
}

/// An engine built from scratch from the files in `dir`: what a fresh agent would compute.
pub fn fresh_engine(dir: &Path) -> Engine {
    let mut source = FileSource::new(dir);
    let mut indexes = Indexes::new();
    let mut engine = Engine::new(EngineConfig {
        local_node: Some(NODE.to_owned()),
        ..EngineConfig::default()
    });
    let mut events = settled_scan(&mut source).events;
    if !source.is_listed() {
        source.accept_partial();
        events.extend(source.scan().unwrap().events);
    }
    for event in events {
        for update in indexes.apply(event).updates {
            update.stage(&mut engine);
        }
    }
    engine.commit();
    engine
}

/// Checks that the rules in the simulator decide every probed flow of every local endpoint as a
/// from-scratch engine over the current files does, and that the simulator holds an endpoint
/// for exactly the local pods. Returns the number of flows checked. Clears the simulator's call
/// log (its own listing is logged there).
pub fn assert_converged(dir: &Path, sim: &HcnDatapath<HcnSim>) -> usize {
    let engine = fresh_engine(dir);
    // Every pod and node address, and one address of every world prefix.
    let per_address = engine.per_address_store();
    let remotes = per_address.representative_addresses();
    let listing = sim.list_endpoints().unwrap().endpoints;
    let mut checked = 0;
    let mut local_pods = 0;
    for (key, _) in engine.endpoints() {
        local_pods += 1;
        let (_, local_addresses) = engine.endpoint_pod(key).unwrap();
        for &local_address in local_addresses {
            let endpoint = listing
                .iter()
                .find(|e| e.addresses.contains(&local_address))
                .unwrap_or_else(|| panic!("no simulated endpoint holds {key}'s {local_address}"));
            for (remote, &address) in &remotes {
                if address.is_ipv4() != local_address.is_ipv4() || address == local_address {
                    continue;
                }
                let identity = per_address.get(*remote).unwrap();
                for direction in Direction::BOTH {
                    for (protocol, port) in PROBES {
                        let want = engine.decide_address(
                            local_address,
                            direction,
                            address,
                            protocol,
                            port,
                        );
                        let got = sim
                            .calls()
                            .evaluate(&endpoint.id, &packet(direction, address, protocol, port))
                            .unwrap();
                        assert_eq!(
                            got.action == AclAction::Allow,
                            want.allowed(),
                            "{key} {direction} {identity} ({address}) {protocol:?}/{port}: \
                             HCN rule {:?} disagrees with the engine ({})",
                            got.rule,
                            want.reason
                        );
                        checked += 1;
                    }
                }
            }
        }
    }
    let managed = listing
        .iter()
        .filter(|e| e.id.starts_with("sim-ep-"))
        .count();
    assert_eq!(managed, local_pods, "one simulated endpoint per local pod");
    sim.calls().take_calls();
    checked
}

/// Whether the programmed rules let `from` reach `to` (both local pods): `from`'s egress and
/// `to`'s ingress, evaluated by the simulator.
pub fn flow_allowed(
    agent: &Agent,
    sim: &HcnSim,
    from: &str,
    to: &str,
    protocol: Protocol,
    port: u16,
) -> bool {
    flow_allowed_in(&agent.pipeline, sim, from, to, protocol, port)
}

/// The HCN endpoint the pipeline matched to `pod`.
pub fn endpoint_of(pipeline: &Pipeline, pod: &str) -> String {
    pipeline
        .endpoints()
        .iter()
        .find(|(_, owner)| owner.as_deref() == Some(pod))
        .map(|(e, _)| e.id.clone())
        .unwrap_or_else(|| panic!("no endpoint for {pod}"))
}

/// [`flow_allowed`] for any pipeline.
pub fn flow_allowed_in(
    pipeline: &Pipeline,
    sim: &HcnSim,
    from: &str,
    to: &str,
    protocol: Protocol,
    port: u16,
) -> bool {
    let address = |pod: &str| {
        let (_, addresses) = pipeline.engine().endpoint_pod(pod).unwrap();
        addresses[0]
    };
    let allows = |endpoint: &str, direction, remote| {
        sim.evaluate(
            &endpoint_of(pipeline, endpoint),
            &packet(direction, remote, protocol, port),
        )
        .unwrap()
        .action
            == AclAction::Allow
    };
    allows(from, Direction::Egress, address(to)) && allows(to, Direction::Ingress, address(from))
}

pub fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}
pub mod cluster;
pub mod counting;
