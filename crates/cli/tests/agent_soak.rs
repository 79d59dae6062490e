//! Soak: two agents in cluster mode (the daemon's own code, in-process) against the API server
//! stand-in, through random churn of pods, policies, namespaces and nodes, with dropped watches,
//! 410s (compacted history), failed lists and watches, HNS restarts and refused nftables
//! transactions. At the end, with the faults cleared, both datapaths must hold exactly what a
//! fresh agent programs from the same objects, and the process's memory must not have grown
//! after the warm-up.
//!
//! `NETPOL_SOAK_SECONDS` sets how long the churn lasts (60 by default, as in CI);
//! `NETPOL_SOAK_SEED` replays a run. Needs root (a private network namespace for nftables);
//! elsewhere it fails with the reason, unless `NETPOL_SKIP_KERNEL=1`.
#![cfg(target_os = "linux")]

mod soak;
mod support;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use netpol_testbed::netns::Netns;
use netpol_testkit::apiserver::ApiServer;
use soak::agents::*;
use soak::churn::{Churn, Rng};
use support::scratch_dir;

/// Every watched kind, for scripted list and watch failures.
const KINDS: [&str; 5] = [
    "Pod",
    "Namespace",
    "Node",
    "NetworkPolicy",
    "AdminNetworkPolicy",
];

/// How long the agents may take to converge once the faults stop (a list retried at the
/// backoff's 30 s cap included).
const SETTLE: Duration = Duration::from_secs(120);

/// Memory the process may gain after the warm-up, besides 10%: the allocator's and the
/// stand-in's buffers settling (the 10-minute run went from 28 MiB at warm-up to a plateau of
/// 31 MiB), far below what a leak of events, objects or rules over the run would add.
const RSS_SLACK: u64 = 8 << 20;

fn seconds() -> u64 {
    std::env::var("NETPOL_SOAK_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60)
}

fn seed() -> u64 {
    std::env::var("NETPOL_SOAK_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        })
}

/// Faults injected, by kind.
#[derive(Debug, Default)]
struct Faults {
    severed: u64,
    gone: u64,
    failed_lists: u64,
    failed_watches: u64,
    hns_restarts: u64,
    nft_refusals: u64,
}

impl Faults {
    fn inject(
        &mut self,
        server: &ApiServer,
        sim: &netpol_hcn::HcnDatapath<netpol_hcn::sim::HcnSim>,
        refusals: &AtomicU32,
        rng: &mut Rng,
    ) {
        if rng.chance(0.02) {
            server.sever_watches();
            self.severed += 1;
        }
        if rng.chance(0.007) {
            // The history is forgotten and the watches drop: they resume into a 410 and list.
            server.compact();
            server.sever_watches();
            self.gone += 1;
        }
        if rng.chance(0.01) {
            server.fail_lists(rng.pick(&KINDS), &[500]);
            self.failed_lists += 1;
        }
        if rng.chance(0.01) {
            server.fail_watches(rng.pick(&KINDS), &[500, 500]);
            server.sever_watches();
            self.failed_watches += 1;
        }
        if rng.chance(0.01) {
            sim.calls().restart();
            self.hns_restarts += 1;
        }
        if rng.chance(0.02) {
            let n = 1 + rng.below(3) as u32;
            refusals.fetch_add(n, Ordering::SeqCst);
            self.nft_refusals += u64::from(n);
        }
    }
}

/// Waits for `done`, failing with `what` after `patience`.
fn wait_for(what: &str, patience: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + patience;
    while !done() {
        assert!(
            Instant::now() < deadline,
            "{what}: not reached in {patience:?}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[test]
fn agents_under_churn_and_faults_end_equal_to_a_fresh_computation_without_growing() {
    if netpol_testbed::netns::skip_kernel_test("agent_soak") {
        return;
    }
    // The agents' log, shown for a failed run (RUST_LOG picks the level).
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .try_init();
    let seconds = seconds();
    let seed = seed();
    eprintln!("soak: {seconds} s of churn, seed {seed} (NETPOL_SOAK_SEED replays it)");
    let mut rng = Rng::new(seed);
    let dir = scratch_dir("soak");
    let server = ApiServer::with_example_cluster();
    let kubeconfig = dir.join("kubeconfig");
    server.write_kubeconfig(&kubeconfig);

    let sim = small_sim();
    let netns = Arc::new(Netns::new().expect("a private network namespace"));
    let refusals = Arc::new(AtomicU32::new(0));
    let hcn = hcn_agent(&kubeconfig, &sim);
    let nft = nft_agent(
        &kubeconfig,
        Refusing {
            netns: netns.clone(),
            refusals: refusals.clone(),
        },
    );
    wait_for("both agents ready", SETTLE, || hcn.ready() && nft.ready());

    let mut churn = Churn::start(&server);
    let mut faults = Faults::default();
    let started = Instant::now();
    let end = started + Duration::from_secs(seconds);
    let warm_up = started + Duration::from_secs(seconds / 4).max(Duration::from_secs(10));
    let mut warm_rss = None;
    let mut peak_rss = 0;
    while Instant::now() < end {
        churn.step(&server, &mut rng);
        faults.inject(&server, &sim, &refusals, &mut rng);
        if rng.chance(0.01) {
            server.forget_requests();
        }
        let rss = rss();
        if Instant::now() >= warm_up {
            warm_rss.get_or_insert(rss);
            peak_rss = peak_rss.max(rss);
        }
        std::thread::sleep(Duration::from_millis(10 + rng.below(60) as u64));
    }

    // The faults stop; both agents must converge to what a fresh agent computes.
    server.clear_failures();
    refusals.store(0, Ordering::SeqCst);
    let expected = scratch_dir("soak-expected");
    server.write_objects(&expected);
    let (want_hcn, want_nft) = fresh_states(&expected);
    assert!(
        want_hcn.iter().any(|(_, policies)| !policies.is_empty()),
        "the fresh computation programs something"
    );
    assert!(
        want_nft
            .iter()
            .any(|chain| chain.contains(" saddr {10.") || chain.contains(" daddr {10.")),
        "the fresh table's rules name sets of addresses: {want_nft:?}"
    );
    wait_for("the HCN agent converged", SETTLE, || {
        hcn_state(&sim) == want_hcn
    });
    wait_for("the nftables agent converged", SETTLE, || {
        nft_state(&netns) == want_nft
    });
    wait_for("both agents ready", SETTLE, || hcn.ready() && nft.ready());
    let end_rss = rss();
    let warm_rss = warm_rss.expect("a warm-up measurement");

    let reconciles = |agent: &RunningAgent| agent.metric("netpol_reconcile_duration_seconds_count");
    eprintln!(
        "soak: {} changes ({:?}), faults {faults:?}; reconciles: HCN {}, nftables {}; \
         watch errors: HCN {}; relists of pods: HCN {}; endpoints at the end: {}, nft chains: {}; \
         RSS warm-up {} MiB, peak {} MiB, end {} MiB",
        churn.total(),
        churn.counts,
        reconciles(&hcn),
        reconciles(&nft),
        sum_metric(&hcn, "netpol_watch_errors_total"),
        hcn.metric("netpol_relists_total{kind=\"Pod\"}"),
        want_hcn.len(),
        want_nft.len(),
        warm_rss >> 20,
        peak_rss >> 20,
        end_rss >> 20,
    );
    assert!(
        faults.hns_restarts > 0 && faults.gone > 0 && faults.nft_refusals > 0,
        "every kind of fault was injected: {faults:?}"
    );
    assert!(
        end_rss <= warm_rss + warm_rss / 10 + RSS_SLACK,
        "memory grew after the warm-up: {} MiB then {} MiB",
        warm_rss >> 20,
        end_rss >> 20
    );
    hcn.stop();
    nft.stop();
}

/// The sum of a metric family's samples.
fn sum_metric(agent: &RunningAgent, family: &str) -> f64 {
    let (_, text) = agent.get("/metrics").unwrap_or_default();
    text.lines()
        .filter(|l| l.starts_with(family))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}
