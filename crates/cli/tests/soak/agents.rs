//! The two agents of the soak, each the daemon's own code (`daemon::run_with`: watches, HTTP,
//! the reconcile loop) on a thread: one programming the HCN simulator, which the soak restarts,
//! one programming nftables in a private network namespace through a backend that refuses
//! transactions when told to. And what a fresh agent computes from the same objects.

use std::collections::BTreeMap;
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

    fn set_contents(
        &self,
        set: &netpol_nft::ruleset::AddressSet,
    ) -> Result<Option<Vec<ipnet::IpNet>>, NftError> {
        self.netns.set_contents(set)
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
                streaming_lists: false,
                pods: netpol_agent::sources::cluster::PodSource::Pods,
            },
            // Not read: the datapath is given.
            datapath: DatapathKind::HcnSim,
            datapath_options: Default::default(),
            listen,
            resync_period: Duration::from_secs(20),
            debounce: Duration::from_millis(50),
            initial_sync_timeout: Duration::from_secs(5),
            poll_interval: Duration::from_millis(200),
            templates: Default::default(),
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
        flows: Default::default(),
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
    let sets: BTreeMap<String, String> = sim
        .list_sets()
        .unwrap()
        .into_iter()
        .map(|set| (set.id, set.values))
        .collect();
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
                .map(|policy| policy_text(policy, &sets))
                .collect();
            policies.sort();
            (endpoint.name, policies)
        })
        .collect();
    state.sort();
    state
}

/// A policy as what it does: rule ids (hashes of the content, set ids included) left out, and
/// a set id replaced by the set's values. Two agents may name one set differently (a set that
/// took another's name over keeps it after a change; a fresh agent names it by content), so
/// names are not what they must agree on.
fn policy_text(policy: &EndpointPolicy, sets: &BTreeMap<String, String>) -> String {
    fn canonical(value: &mut serde_json::Value, sets: &BTreeMap<String, String>) {
        match value {
            serde_json::Value::Object(map) => {
                map.retain(|key, v| {
                    !(key == "Id" && v.as_str().is_some_and(|s| s.starts_with("netpol-")))
                });
                map.values_mut().for_each(|v| canonical(v, sets));
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(|v| canonical(v, sets)),
            serde_json::Value::String(text) => {
                if let Some(values) = sets.get(text.as_str()) {
                    *text = format!("set of {values}");
                }
            }
            _ => {}
        }
    }
    let mut value = serde_json::to_value(policy).unwrap();
    canonical(&mut value, sets);
    value.to_string()
}

/// netpol's table in `netns`, as what it does: each set's name replaced by its elements, each
/// chain's name by what the chain is (an endpoint chain by its comment, the dispatch and base
/// chains by their kind), so that two tables compare equal when they treat every packet alike
/// whatever they named their sets (see [`policy_text`]).
pub fn nft_state(netns: &Netns) -> Vec<String> {
    let listing = netns
        .run("nft", &["list", "table", "inet", "netpol"], "")
        .unwrap_or_default();
    canonical_table(&listing)
}

/// The blocks (`set NAME { ... }`, `chain NAME { ... }`) of an `nft list table` listing: kind,
/// name and body, whitespace collapsed.
fn blocks(listing: &str) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    let mut current: Option<(String, String, Vec<String>)> = None;
    for line in listing.lines().map(str::trim) {
        let head = line
            .strip_suffix(" {")
            .and_then(|head| head.split_once(' '))
            .filter(|(kind, _)| matches!(*kind, "set" | "chain"));
        if let Some((kind, name)) = head {
            current = Some((kind.to_string(), name.to_string(), Vec::new()));
        } else if line == "}" {
            if let Some((kind, name, body)) = current.take() {
                out.push((kind, name, body.join(" ")));
            }
        } else if let Some((_, _, body)) = &mut current {
            if !line.is_empty() {
                body.push(line.to_string());
            }
        }
    }
    out
}

/// The table of a listing with names replaced by what they stand for, one line per chain.
fn canonical_table(listing: &str) -> Vec<String> {
    let blocks = blocks(listing);
    let mut sets: BTreeMap<&str, String> = BTreeMap::new();
    let mut chains: BTreeMap<&str, String> = BTreeMap::new();
    for (kind, name, body) in &blocks {
        if kind == "set" {
            let mut elements: Vec<&str> = body
                .split_once("elements = {")
                .and_then(|(_, rest)| rest.split_once('}'))
                .map(|(inside, _)| inside.split(',').map(str::trim).collect())
                .unwrap_or_default();
            elements.sort_unstable();
            sets.insert(name, format!("{{{}}}", elements.join(",")));
        } else {
            let id = match body.strip_prefix("comment \"") {
                Some(rest) => rest.split('"').next().unwrap_or_default().to_string(),
                None => name.split('_').next().unwrap_or_default().to_string(),
            };
            chains.insert(name, id);
        }
    }
    let canonical_word = |word: &str| -> String {
        let core = word.trim_end_matches([',', '}']);
        let tail = &word[core.len()..];
        if let Some(set) = core.strip_prefix('@').and_then(|n| sets.get(n)) {
            return format!("{set}{tail}");
        }
        match chains.get(core) {
            Some(id) => format!("<{id}>{tail}"),
            None => word.to_string(),
        }
    };
    let mut state: Vec<String> = blocks
        .iter()
        .filter(|(kind, _, _)| kind == "chain")
        .map(|(_, name, body)| {
            let words: Vec<String> = body.split_whitespace().map(canonical_word).collect();
            format!("{}: {}", chains[name.as_str()], words.join(" "))
        })
        .collect();
    state.sort();
    state
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
