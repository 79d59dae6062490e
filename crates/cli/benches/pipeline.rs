//! The agent's whole path for one change, event in to datapath programmed: the embedded mode's
//! file source notices a changed file, the indexes and the engine take the change, the pipeline
//! compiles what changed and the enforcer programs the datapath (the simulated HCN, or real
//! nftables in a private network namespace).
//!
//! `cargo bench -p netpol-cli --bench pipeline` writes a `netpol-dev synth` cluster per size
//! (`NETPOL_PIPELINE_PODS`, default `10000,40000`; `150000` is opt-in: it takes minutes and about
//! 1 GB per datapath to set up), syncs node-1 once per datapath, then times each kind of change
//! `NETPOL_PIPELINE_ROUNDS` times (default 20):
//!
//! - a replica of an existing workload on another node added, then deleted;
//! - a pod of a new label set added, then deleted;
//! - a NetworkPolicy naming two StatefulSet replicas by their `pod-name` label in any namespace
//!   added, then deleted (issue 33: it costs what it selects, not one identity per pod);
//! - five CiliumNetworkPolicies of 50,000 `/32`s selecting node-1's pods of `ns-1`, added one
//!   after another, then deleted (issue 33: the fifth should cost what the first did);
//! - a rolling update of a 100-replica workload: each old replica deleted as its new one starts,
//!   one event at a time, then the same batched into one reconcile (as the debounce coalesces
//!   them).
//!
//! Each change is timed from the file's rename to the enforcer's return, in wall and in CPU
//! (this process's, plus the `nft` processes it ran), with the simulator's endpoint and network
//! modify calls it caused. `NETPOL_PIPELINE_DATAPATHS` lists the datapaths, comma-separated:
//! `hcn-sim-sets` (the simulated HCN with ACLs naming network IP sets, the agent's default),
//! `hcn-sim-inline` (`--hcn-ip-sets off`: addresses inlined in every ACL) and `nftables` (real
//! nftables in a private network namespace; root). Default: `hcn-sim-sets,hcn-sim-inline`.
//! `NETPOL_PIPELINE_CHANGES` lists the kinds of change to time (`replica`, `new`, `pod-name`,
//! `live-cidr`, `rolling`;
//! default all), so that a profile (`perf record`) can hold one kind alone.
//! `NETPOL_PIPELINE_WORKLOADS` picks the cluster's shape as `netpol-dev synth --workloads` does
//! (`deployments`, the default, `statefulsets`, `daemonsets`, `jobs`, `mixed`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use netpol_agent::datapaths;
use netpol_agent::health::Health;
use netpol_agent::metrics::Metrics;
use netpol_agent::reconciler::Pipeline;
use netpol_agent::sources::files::FileSource;
use netpol_agent::{DatapathKind, DatapathOptions};
use netpol_dev::synth::{write_cluster, Cluster, Sizes};
use netpol_hcn::sim::HcnSim;
use netpol_hcn::{HcnDatapath, IpSetMode};
use prometheus_client::registry::Registry;

const NODE: &str = "node-1";

// The agent binary's allocator (`netpol_agent::allocator`), so that the pipeline is timed as it
// runs.
netpol_agent::use_mimalloc!();

fn main() {
    let sizes = std::env::var("NETPOL_PIPELINE_PODS").unwrap_or_else(|_| "10000,40000".into());
    let rounds: usize = std::env::var("NETPOL_PIPELINE_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(20);
    let datapaths = std::env::var("NETPOL_PIPELINE_DATAPATHS")
        .unwrap_or_else(|_| "hcn-sim-sets,hcn-sim-inline".into());
    let work = std::env::temp_dir().join(format!("netpol-pipeline-{}", std::process::id()));
    println!(
        "| pods | datapath | change | wall ms (median) | CPU ms (median) | CPU ms (max) | endpoints updated | endpoint modifies | network modifies |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for pods in sizes.split(',').filter_map(|s| s.trim().parse().ok()) {
        for datapath in datapaths.split(',').map(str::trim) {
            let dir = work.join(format!("{pods}"));
            run_size(pods, &dir, rounds, datapath);
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}

/// One timed step: wall and CPU (own and children's) in milliseconds.
#[derive(Clone, Copy, Debug)]
struct Cost {
    wall: f64,
    cpu: f64,
}

fn cpu_seconds() -> f64 {
    let usage = |who| {
        // SAFETY: getrusage writes into the struct it is given.
        let mut u: libc::rusage = unsafe { std::mem::zeroed() };
        unsafe { libc::getrusage(who, &mut u) };
        let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
        t(u.ru_utime) + t(u.ru_stime)
    };
    usage(libc::RUSAGE_SELF) + usage(libc::RUSAGE_CHILDREN)
}

fn measure(f: impl FnOnce()) -> Cost {
    let (wall, cpu) = (Instant::now(), cpu_seconds());
    f();
    Cost {
        wall: wall.elapsed().as_secs_f64() * 1e3,
        cpu: (cpu_seconds() - cpu) * 1e3,
    }
}

struct Bench {
    dir: PathBuf,
    source: FileSource,
    pipeline: Pipeline,
    /// Endpoints the last reconcile updated.
    updated: usize,
    /// Compiled lists patched by the change and compiled in full, since the last look.
    patched: usize,
    compiled: usize,
    /// The simulator, when the datapath is the simulated HCN.
    sim: Option<Arc<HcnDatapath<HcnSim>>>,
}

/// Endpoint and network modify calls made so far.
fn modifies(sim: &Option<Arc<HcnDatapath<HcnSim>>>) -> (u64, u64) {
    sim.as_ref().map_or((0, 0), |s| {
        let counts = s.calls().call_counts();
        (counts.modify, counts.network_modify)
    })
}

impl Bench {
    /// Writes (by rename, as users should) a file and has the whole path take it in.
    fn write(&mut self, file: &str, text: &str) -> Cost {
        let path = self.dir.join(file);
        let partial = self.dir.join(format!(".{file}.partial"));
        std::fs::write(&partial, text).unwrap();
        settle(&partial);
        measure(|| {
            std::fs::rename(&partial, &path).unwrap();
            self.take_in();
        })
    }

    fn remove(&mut self, file: &str) -> Cost {
        let path = self.dir.join(file);
        measure(|| {
            std::fs::remove_file(&path).unwrap();
            self.take_in();
        })
    }

    /// A timed change with the endpoints it updated and the modify calls it made.
    fn step(&mut self, change: impl FnOnce(&mut Bench) -> Cost) -> (Cost, usize, (u64, u64)) {
        let before = modifies(&self.sim);
        let cost = change(self);
        let after = modifies(&self.sim);
        (cost, self.updated, (after.0 - before.0, after.1 - before.1))
    }

    /// Says how many compiled lists the changes since the last call patched and compiled in full.
    fn compilations(&mut self, what: &str) {
        eprintln!(
            "{what}: {} compiled lists patched, {} compiled in full",
            self.patched, self.compiled
        );
        (self.patched, self.compiled) = (0, 0);
    }

    /// One poll of the files and one reconcile, as the daemon's loop does after a debounce.
    fn take_in(&mut self) {
        let scan = self.source.scan().unwrap();
        for event in scan.events {
            self.pipeline.ingest(event);
        }
        let report = self.pipeline.reconcile(Instant::now()).unwrap();
        assert!(report.complete(), "every endpoint programmed");
        self.updated = report.apply.updated();
        self.patched += report.patched;
        self.compiled += report.compiled;
    }
}

/// Dates a file back, so the file source takes it at first sight instead of waiting for two
/// polls to agree (it would, on a file this fresh).
fn settle(path: &Path) {
    let file = std::fs::File::options().write(true).open(path).unwrap();
    file.set_modified(SystemTime::now() - Duration::from_secs(60))
        .unwrap();
}

fn run_size(pods: usize, dir: &Path, rounds: usize, datapath: &str) {
    let workloads = std::env::var("NETPOL_PIPELINE_WORKLOADS").map_or_else(
        |_| Default::default(),
        |w| clap::ValueEnum::from_str(&w, true).expect("a workload shape netpol-dev synth knows"),
    );
    let cluster = Cluster {
        sizes: Sizes::for_pods(pods),
        workloads,
        format: Default::default(),
    };
    write_cluster(&cluster, dir).unwrap();
    for entry in std::fs::read_dir(dir).unwrap() {
        settle(&entry.unwrap().path());
    }
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    let health = Arc::new(Health::default());
    // Held for the run: the namespace the nftables table lives in.
    let mut _netns = None;
    let (enforcer, sim) = match datapath {
        "nftables" => {
            let (enforcer, netns) = nft_enforcer();
            _netns = netns;
            (enforcer, None)
        }
        "hcn-sim-sets" | "hcn-sim-inline" => {
            let options = DatapathOptions {
                hcn_ip_sets: if datapath == "hcn-sim-sets" {
                    IpSetMode::On
                } else {
                    IpSetMode::Off
                },
                ..Default::default()
            };
            let built = datapaths::build(DatapathKind::HcnSim, options, &metrics, &health).unwrap();
            (built.enforcer, built.sim)
        }
        other => panic!("unknown datapath {other:?} in NETPOL_PIPELINE_DATAPATHS"),
    };
    let mut bench = Bench {
        dir: dir.to_owned(),
        source: FileSource::new(dir),
        pipeline: Pipeline::with_enforcer(NODE, enforcer, metrics),
        updated: 0,
        patched: 0,
        compiled: 0,
        sim,
    };
    let sync = measure(|| bench.take_in());
    eprintln!(
        "{pods} pods, {datapath}: initial sync {:.0} ms wall, {:.0} ms CPU, {} local endpoints",
        sync.wall,
        sync.cpu,
        bench.pipeline.compiled().len()
    );
    (bench.patched, bench.compiled) = (0, 0);
    let report = |what: &str, mut costs: Vec<(Cost, usize, (u64, u64))>| {
        let updated = costs.iter().map(|(_, u, _)| *u).max().unwrap_or(0);
        let endpoint_calls = costs.iter().map(|(_, _, c)| c.0).max().unwrap_or(0);
        let network_calls = costs.iter().map(|(_, _, c)| c.1).max().unwrap_or(0);
        let mut costs: Vec<Cost> = costs.drain(..).map(|(c, _, _)| c).collect();
        costs.sort_by(|a, b| a.cpu.total_cmp(&b.cpu));
        let cpu_median = costs[costs.len() / 2].cpu;
        let cpu_max = costs[costs.len() - 1].cpu;
        costs.sort_by(|a, b| a.wall.total_cmp(&b.wall));
        let wall_median = costs[costs.len() / 2].wall;
        println!(
            "| {pods} | {datapath} | {what} | {wall_median:.2} | {cpu_median:.2} | {cpu_max:.2} | {updated} | {endpoint_calls} | {network_calls} |"
        );
    };

    // A replica of app 0 of namespace ns-1 (node-2 and up host it), on a node that is not ours.
    let replica = |k: usize| {
        pod_yaml(
            &format!("bench-replica-{k}"),
            1,
            "app-0",
            "web",
            "node-2",
            k,
        )
    };
    let (mut added, mut deleted) = (Vec::new(), Vec::new());
    for k in (0..rounds).filter(|_| timed("replica")) {
        added.push(bench.step(|b| b.write("bench-replica.yaml", &replica(k))));
        deleted.push(bench.step(|b| b.remove("bench-replica.yaml")));
    }
    if timed("replica") {
        report("replica added", added);
        report("replica deleted", deleted);
        bench.compilations("replicas");
    }

    let (mut added, mut deleted) = (Vec::new(), Vec::new());
    for k in (0..rounds).filter(|_| timed("new")) {
        let text = pod_yaml(
            &format!("bench-new-{k}"),
            1,
            &format!("new-{k}"),
            "web",
            "node-2",
            k,
        );
        added.push(bench.step(|b| b.write("bench-new.yaml", &text)));
        deleted.push(bench.step(|b| b.remove("bench-new.yaml")));
    }
    if timed("new") {
        report("new label set added", added);
        report("new label set deleted", deleted);
        bench.compilations("new label sets");
    }
    if timed("pod-name") {
        pod_name_policy(&mut bench, dir, rounds, &report);
    }
    if timed("live-cidr") {
        live_cidr_policies(&mut bench, &report);
    }
    if !timed("rolling") {
        return;
    }

    // A rolling update: 100 replicas of one workload, each replaced by a new one (one file per
    // replica, as a watch delivers one object per event).
    let workload = |generation: usize, r: usize| {
        pod_yaml(
            &format!("roll-{generation}-{r}"),
            2,
            "app-roll",
            "api",
            &format!("node-{}", 2 + r % 8),
            200 + generation * 100 + r,
        )
    };
    for r in 0..100 {
        let path = dir.join(format!("roll-{r}.yaml"));
        std::fs::write(&path, workload(0, r)).unwrap();
        settle(&path);
    }
    bench.take_in();
    let before = modifies(&bench.sim);
    let rolled = measure(|| {
        for r in 0..100 {
            bench.write(&format!("roll-{r}.yaml"), &workload(1, r));
        }
    });
    let after = modifies(&bench.sim);
    println!(
        "| {pods} | {datapath} | rolling update, 100 replicas one by one (total) | {:.1} | {:.1} | | | {} | {} |",
        rolled.wall,
        rolled.cpu,
        after.0 - before.0,
        after.1 - before.1
    );
    let before = modifies(&bench.sim);
    let batched = measure(|| {
        for r in 0..100 {
            let path = dir.join(format!("roll-{r}.yaml"));
            let partial = dir.join(format!(".roll-{r}.partial"));
            std::fs::write(&partial, workload(2, r)).unwrap();
            settle(&partial);
            std::fs::rename(&partial, &path).unwrap();
        }
        bench.take_in();
    });
    let after = modifies(&bench.sim);
    println!(
        "| {pods} | {datapath} | rolling update, 100 replicas in one batch (total) | {:.1} | {:.1} | | {} | {} | {} |",
        batched.wall,
        batched.cpu,
        bench.updated,
        after.0 - before.0,
        after.1 - before.1
    );
}

/// One timed change: its cost, the endpoints it updated, and the simulator's endpoint and network
/// modify calls.
type Step = (Cost, usize, (u64, u64));

/// A policy naming two StatefulSet replicas by their own `statefulset.kubernetes.io/pod-name`
/// label, in any namespace, from every pod of a namespace with a local endpoint (issue 33): added,
/// then deleted. Its cost should follow the two pods it names, not every pod carrying the key.
fn pod_name_policy(bench: &mut Bench, dir: &Path, rounds: usize, report: &dyn Fn(&str, Vec<Step>)) {
    let replicas: Vec<String> = (0..2)
        .map(|r| {
            pod_yaml(
                &format!("bench-db-{r}"),
                1,
                "bench-db",
                "db",
                "node-2",
                900 + r,
            )
            .replacen(
                "  labels:\n",
                &format!("  labels:\n    statefulset.kubernetes.io/pod-name: bench-db-{r}\n"),
                1,
            )
        })
        .collect();
    let path = dir.join("bench-named-replicas.yaml");
    std::fs::write(&path, replicas.join("---\n")).unwrap();
    settle(&path);
    bench.take_in();
    let local = bench
        .pipeline
        .engine()
        .endpoints()
        .next()
        .map(|(key, _)| key.to_owned());
    let namespace = local
        .as_deref()
        .and_then(|key| key.split_once('/'))
        .map(|(namespace, _)| namespace.to_owned())
        .expect("a local endpoint");
    let policy = format!(
        "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n  name: to-two-replicas\n  \
         namespace: {namespace}\nspec:\n  podSelector: {{}}\n  policyTypes: [Egress]\n  egress:\n  \
         - to:\n    - namespaceSelector: {{}}\n      podSelector:\n        matchExpressions:\n        \
         - key: statefulset.kubernetes.io/pod-name\n          operator: In\n          \
         values: [bench-db-0, bench-db-1]\n"
    );
    let (mut added, mut deleted) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        added.push(bench.step(|b| b.write("bench-pod-name-policy.yaml", &policy)));
        deleted.push(bench.step(|b| b.remove("bench-pod-name-policy.yaml")));
    }
    report("policy naming two replicas by pod-name added", added);
    report("policy naming two replicas by pod-name deleted", deleted);
    bench.compilations("pod-name policies");
}

/// Five CiliumNetworkPolicies of 50,000 `/32`s each selecting the pods of `ns-1` (all on
/// node-1 in a synthetic cluster; `netpol-dev cidr --selects local`), added one after another
/// to the running agent, then deleted in reverse (issue 33): each is one step, so the report
/// shows whether the fifth costs what the first did.
fn live_cidr_policies(bench: &mut Bench, report: &dyn Fn(&str, Vec<Step>)) {
    use netpol_dev::cidr::{policies, Args, Kind, Selects, Way};
    const COUNT: usize = 5;
    let args = Args {
        kind: Kind::Cilium,
        count: COUNT,
        prefixes: 50_000,
        selects: Selects::Local,
        direction: Way::Egress,
        namespace: "ns-1".into(),
        out: PathBuf::new(),
    };
    let texts: Vec<String> = policies(&args)
        .expect("valid arguments")
        .map(|policy| policy.to_string())
        .collect();
    let file = |k: usize| format!("bench-live-cidr-{k}.json");
    for (k, text) in texts.iter().enumerate() {
        let step = bench.step(|b| b.write(&file(k), text));
        report(
            &format!("live 50,000-prefix policy {} of {COUNT} added", k + 1),
            vec![step],
        );
    }
    for k in (0..COUNT).rev() {
        let step = bench.step(|b| b.remove(&file(k)));
        report(
            &format!("live 50,000-prefix policy {} of {COUNT} deleted", k + 1),
            vec![step],
        );
    }
    bench.compilations("live CIDR policies");
}

/// Whether `NETPOL_PIPELINE_CHANGES` asks for this kind of change (all by default).
fn timed(kind: &str) -> bool {
    std::env::var("NETPOL_PIPELINE_CHANGES")
        .map_or(true, |kinds| kinds.split(',').any(|k| k.trim() == kind))
}

/// A pod as `netpol-dev synth` writes them, with its own name and address.
fn pod_yaml(name: &str, ns: usize, app: &str, tier: &str, node: &str, k: usize) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: ns-{ns}\n  labels:\n    \
         app: {app}\n    tier: {tier}\n    pod-template-hash: bench{k}\nspec:\n  nodeName: {node}\n  \
         containers:\n  - name: main\n    ports:\n    - name: http\n      containerPort: 8080\n    \
         - name: metrics\n      containerPort: 9090\nstatus:\n  phase: Running\n  podIP: 10.250.{}.{}\n",
        k / 250,
        1 + k % 250
    )
}

/// nftables as the agent runs it (`node_backend`: libnftables in process where installed, else
/// `nft` spawned from the agent's own namespace), with this thread moved into a new private
/// namespace first. Not the testbed's `Netns` backend: it enters the namespace in the child
/// before `exec`, which makes the standard library fork (copying this process's page tables,
/// hundreds of MB at 150,000 pods) where the agent's `nft` is spawned without copying them.
/// `NETPOL_PIPELINE_NFT=command` times the `nft` command even where the library is installed.
#[cfg(target_os = "linux")]
fn nft_enforcer() -> (
    Box<dyn netpol_datapath::Enforcer>,
    Option<netpol_testbed::netns::Netns>,
) {
    let netns = netpol_testbed::netns::Netns::new().expect("a private network namespace (root)");
    netns.enter().expect("entering the private namespace");
    let backend: Box<dyn netpol_nft::NftBackend + Send> =
        match std::env::var("NETPOL_PIPELINE_NFT").as_deref() {
            Ok("command") => Box::new(netpol_nft::host::HostNft),
            _ => match netpol_nft::libnft::LibNft::load() {
                Ok(library) => Box::new(library),
                Err(reason) => {
                    eprintln!("nftables through the nft command: {reason}");
                    Box::new(netpol_nft::host::HostNft)
                }
            },
        };
    let enforcer = netpol_nft::NftEnforcer::new(backend, netpol_datapath::Backoff::default());
    (Box::new(enforcer), Some(netns))
}

#[cfg(not(target_os = "linux"))]
fn nft_enforcer() -> (Box<dyn netpol_datapath::Enforcer>, Option<()>) {
    panic!("nftables needs Linux")
}
