//! The two agents of the soak, each the daemon's own code (`daemon::run_with`: watches, HTTP,
//! the reconcile loop) on a thread: one programming the HCN simulator, which the soak restarts,
//! one programming nftables in a private network namespace through a backend that refuses
//! transactions when told to. And what a fresh agent computes from the same objects.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use netpol_agent::daemon::{run_with, Observability};
use netpol_agent::datapaths::{hcn_sim, Datapaths};
use netpol_agent::reconciler::Pipeline;
use netpol_agent::sources::files::FileSource;
use netpol_agent::{AgentConfig, DatapathKind, SourceConfig};
use netpol_datapath::{Backoff, Enforcer};
use netpol_hcn::discovery::SimulatedCni;
use netpol_hcn::schema::EndpointPolicy;
use netpol_hcn::sim::HcnSim;
use netpol_hcn::{HcnApi, HcnDatapath};
use netpol_nft::programmer::{NftBackend, NftError};
use netpol_nft::NftEnforcer;
use netpol_testbed::netns::Netns;

use crate::support::{http_get, NODE};

/// nftables in a private namespace, refusing the next `refusals` transactions as a kernel
/// would refuse a bad one (the transaction then changes nothing).
pub struct Refusing {
    pub netns: Arc<Netns>,
    pub refusals: Arc<AtomicU32>,
}

impl NftBackend for Refusing {
    fn apply(&self, script: &str) -> Result<(), NftError> {
        let refused = self
            .refusals
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if refused {
            return Err(NftError::refused("soak: the transaction is refused"));
        }
        self.netns.apply(script)
    }

    fn check(&self, script: &str) -> Result<(), NftError> {
        self.netns.check(script)
    }

    fn chains(&self) -> Result<Option<Vec<String>>, NftError> {
        self.netns.chains()
    }

    fn sets(&self) -> Result<Option<Vec<String>>, NftError> {
        self.netns.sets()
    }
}

/// One agent running the daemon's code on a thread.
pub struct RunningAgent {
    pub listen: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<anyhow::Result<()>>>,
}

fn free_address() -> SocketAddr {
    let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    probe.local_addr().unwrap()
}

impl RunningAgent {
    /// Starts an agent in cluster mode with `datapath`, built with the agent's metrics.
    pub fn start(
        kubeconfig: &Path,
        datapath: impl FnOnce(&Observability) -> Datapaths,
    ) -> RunningAgent {
        let listen = free_address();
        let config = AgentConfig {
            node: NODE.into(),
            source: SourceConfig::Cluster {
                kubeconfig: Some(kubeconfig.to_owned()),
            },
            // Not read: the datapath is given.
            datapath: DatapathKind::HcnSim,
            datapath_options: Default::default(),
            listen,
            resync_period: Duration::from_secs(20),
            debounce: Duration::from_millis(50),
            initial_sync_timeout: Duration::from_secs(5),
            poll_interval: Duration::from_millis(200),
        };
        let observability = Observability::new();
        let datapaths = datapath(&observability);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            run_with(&config, observability, datapaths, async {
                let _ = stopped.await;
            })
        });
        RunningAgent {
            listen,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    pub fn get(&self, path: &str) -> Option<(u16, String)> {
        std::net::TcpStream::connect(self.listen)
            .is_ok()
            .then(|| http_get(self.listen, path))
    }

    pub fn ready(&self) -> bool {
        self.get("/readyz").is_some_and(|(status, _)| status == 200)
    }

    /// A metric's value, 0 when absent.
    pub fn metric(&self, line_start: &str) -> f64 {
        let (_, text) = self.get("/metrics").unwrap_or_default();
        text.lines()
            .find_map(|l| l.strip_prefix(line_start)?.trim().parse().ok())
            .unwrap_or(0.0)
    }

    /// Stops the agent, which must end without an error.
    pub fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        let result = self
            .thread
            .take()
            .unwrap()
            .join()
            .expect("the agent thread");
        result.expect("the agent ends without an error");
    }
}

/// The HCN agent over `sim`.
pub fn hcn_agent(kubeconfig: &Path, sim: &Arc<HcnDatapath<HcnSim>>) -> RunningAgent {
    let sim = sim.clone();
    RunningAgent::start(kubeconfig, move |o| {
        hcn_sim(sim, &o.metrics, &o.health).expect("the simulator connects")
    })
}

/// The nftables agent over `backend`.
pub fn nft_agent(kubeconfig: &Path, backend: Refusing) -> RunningAgent {
    RunningAgent::start(kubeconfig, move |_| Datapaths {
        enforcer: Box::new(NftEnforcer::new(Box::new(backend), soak_backoff())),
        hcn: None,
        sim: None,
    })
}

fn soak_backoff() -> Backoff {
    Backoff {
        initial: Duration::from_millis(200),
        max: Duration::from_secs(2),
    }
}

/// A simulator whose call log stays small, so that memory measures the agent.
pub fn small_sim() -> Arc<HcnDatapath<HcnSim>> {
    Arc::new(HcnDatapath::new(
        HcnSim::new().with_call_log_limits(1000, 1 << 20),
    ))
}

/// What the HCN simulator holds: each endpoint's policies, by the pod it was made for.
pub fn hcn_state(sim: &HcnDatapath<HcnSim>) -> Vec<(String, Vec<String>)> {
    let mut state: Vec<(String, Vec<String>)> = sim
        .list_endpoints()
        .unwrap()
        .endpoints
        .into_iter()
        .map(|endpoint| {
            let mut policies: Vec<String> = sim
                .read_policies(&endpoint.id)
                .unwrap()
                .iter()
                .map(policy_text)
                .collect();
            policies.sort();
            (endpoint.name, policies)
        })
        .collect();
    state.sort();
    state
}

fn policy_text(policy: &EndpointPolicy) -> String {
    serde_json::to_string(policy).unwrap()
}

/// The chain names of netpol's table in `netns`.
pub fn nft_state(netns: &Netns) -> Vec<String> {
    let mut chains = netns.chains().unwrap().unwrap_or_default();
    chains.sort();
    chains
}

/// A fresh agent's one reconcile over the objects in `dir`, through `enforcer`.
fn fresh_reconcile(dir: &Path, enforcer: Box<dyn Enforcer>) {
    let mut pipeline = Pipeline::with_enforcer(NODE, enforcer, Observability::new().metrics);
    let mut source = FileSource::new(dir);
    for _ in 0..3 {
        let scan = source.scan().unwrap();
        assert!(scan.problems.is_empty(), "{:?}", scan.problems);
        for event in scan.events {
            pipeline.ingest(event);
        }
        if scan.settling == 0 {
            break;
        }
    }
    let report = pipeline
        .reconcile(Instant::now())
        .expect("every kind is in the files");
    assert!(report.complete(), "{report:?}");
}

/// What a fresh agent programs from the objects in `dir`: into a new simulator, and into the
/// table of a new namespace.
pub fn fresh_states(dir: &Path) -> (Vec<(String, Vec<String>)>, Vec<String>) {
    let sim = Arc::new(HcnDatapath::new(HcnSim::new()));
    let enforcer = netpol_hcn::HcnEnforcer::new(
        sim.clone() as Arc<dyn HcnApi>,
        Box::new(SimulatedCni::new(sim.clone())),
        soak_backoff(),
    );
    fresh_reconcile(dir, Box::new(enforcer));
    let netns = Arc::new(Netns::new().unwrap());
    let backend = Refusing {
        netns: netns.clone(),
        refusals: Arc::default(),
    };
    fresh_reconcile(
        dir,
        Box::new(NftEnforcer::new(Box::new(backend), soak_backoff())),
    );
    (hcn_state(&sim), nft_state(&netns))
}

/// The process's resident set, in bytes.
pub fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
        .expect("VmRSS in /proc/self/status")
}
