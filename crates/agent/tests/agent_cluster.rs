//! The cluster mode against an in-process stand-in for the API server on loopback: the agent's
//! real list/watch code over HTTP, feeding a pipeline that programs the HCN simulator. Each test
//! asserts what ends up programmed.
//!
//! Tests wait for a condition (with a generous bound, failing if it is never reached), never
//! for a fixed time.

mod agent_support;

use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_support::*;
use netpol_agent::driver::Input;
use netpol_agent::health::Health;
use netpol_agent::instrumented::Instrumented;
use netpol_agent::metrics::Metrics;
use netpol_agent::reconciler::Pipeline;
use netpol_agent::sources::cluster::{spawn_watches, Sinks, WatchConfig};
use netpol_agent::SourceKind;
use netpol_datapath::Backoff;
use netpol_engine::Protocol;
use netpol_hcn::discovery::SimulatedCni;
use netpol_hcn::sim::HcnSim;
use netpol_hcn::{HcnApi, HcnDatapath};
use netpol_testkit::apiserver::ApiServer;
use prometheus_client::registry::Registry;
use serde_json::json;

/// How long any awaited condition may take before the test fails.
const PATIENCE: Duration = Duration::from_secs(30);

fn config() -> WatchConfig {
    WatchConfig {
        page_size: 2,
        list_timeout: Duration::from_secs(5),
        watch_timeout_s: 290,
        backoff: Backoff {
            initial: Duration::from_millis(20),
            max: Duration::from_millis(160),
        },
        initial_wait: Duration::from_secs(60),
    }
}

/// The agent in cluster mode, its reconcile loop driven by the test.
struct ClusterAgent {
    runtime: tokio::runtime::Runtime,
    inputs: Receiver<Input>,
    pipeline: Pipeline,
    sim: Arc<HcnDatapath<HcnSim>>,
    registry: Registry,
    health: Arc<Health>,
}

impl ClusterAgent {
    fn start(server: &ApiServer, config: WatchConfig) -> ClusterAgent {
        // The agent's log, shown for failed tests (RUST_LOG picks the level).
        let _ = tracing_subscriber::fmt()
            .with_test_writer()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .try_init();
        let mut registry = Registry::default();
        let metrics = Metrics::register(&mut registry);
        let health = Arc::new(Health::default());
        health.heartbeat();
        let sim = new_sim();
        let raw: Arc<dyn HcnApi> = sim.clone();
        let pipeline = Pipeline::new(
            NODE,
            Arc::new(Instrumented::new(raw, metrics.clone())),
            Box::new(SimulatedCni::new(sim.clone())),
            backoff(),
            metrics.clone(),
        );
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let (inputs, receiver) = mpsc::channel();
        {
            let _entered = runtime.enter();
            let sinks = Sinks {
                inputs,
                metrics,
                health: health.clone(),
            };
            spawn_watches(&server.client(), &sinks, config);
        }
        ClusterAgent {
            runtime,
            inputs: receiver,
            pipeline,
            sim,
            registry,
            health,
        }
    }

    /// Takes inputs and reconciles, as the reconcile loop does, until `done` holds.
    fn run_until(&mut self, what: &str, done: impl Fn(&ClusterAgent) -> bool) {
        let deadline = Instant::now() + PATIENCE;
        while !done(self) {
            assert!(
                Instant::now() < deadline,
                "{what}: not reached in {PATIENCE:?}"
            );
            let Ok(input) = self.inputs.recv_timeout(Duration::from_millis(20)) else {
                continue;
            };
            self.take(input);
            while let Ok(input) = self.inputs.try_recv() {
                self.take(input);
            }
            if self.pipeline.has_pending_changes() {
                if let Some(report) = self.pipeline.reconcile(Instant::now()) {
                    if report.complete() {
                        self.health.set_synced();
                    }
                }
            }
        }
    }

    fn take(&mut self, input: Input) {
        match input {
            Input::Event(event) => self.pipeline.ingest(*event),
            Input::Rejected(kind, event) => self.pipeline.ingest_rejected(kind, *event),
            Input::Resync => self.pipeline.request_resync(),
            Input::Shutdown => {}
        }
    }

    fn metrics_text(&self) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry).unwrap();
        text
    }

    fn assert_metric(&self, line: &str) {
        let text = self.metrics_text();
        assert!(text.lines().any(|l| l == line), "no {line:?} in:\n{text}");
    }

    fn valid(&self, kind: SourceKind) -> usize {
        self.pipeline.indexes().policy_counts()[&kind].valid
    }

    fn invalid(&self, kind: SourceKind) -> usize {
        self.pipeline.indexes().policy_counts()[&kind].invalid
    }

    fn allowed(&self, from: &str, to: &str, port: u16) -> bool {
        flow_allowed_in(
            &self.pipeline,
            self.sim.calls(),
            from,
            to,
            Protocol::Tcp,
            port,
        )
    }

    /// The simulator holds what a fresh engine computes from the server's objects.
    fn assert_programs(&self, server: &ApiServer, test: &str) {
        let dir = expected_dir(test);
        server.write_objects(&dir);
        assert_converged(&dir, &self.sim);
    }
}

impl Drop for ClusterAgent {
    fn drop(&mut self) {
        // The followers end with the runtime.
        let runtime = std::mem::replace(
            &mut self.runtime,
            tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap(),
        );
        runtime.shutdown_background();
    }
}

fn expected_dir(test: &str) -> PathBuf {
    scratch_dir(&format!("cluster-expected-{test}"))
}

fn example_server() -> ApiServer {
    ApiServer::with_example_cluster()
}

fn network_policy(name: &str, namespace: &str, spec: serde_json::Value) -> serde_json::Value {
    json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    })
}

#[test]
fn lists_page_by_page_then_watches_from_the_lists_version() {
    let server = example_server();
    let mut agent = ClusterAgent::start(&server, config());
    assert!(agent.health.readiness().is_err());
    agent.run_until("first sync", |a| a.pipeline.synced());
    agent.assert_programs(&server, "paging");
    assert_eq!(agent.valid(SourceKind::NetworkPolicy), 4);

    // The shop's pods came in pages of two: later pages carry the continue token.
    let lists = server.lists_of("Pod");
    assert!(lists.len() >= 2, "{lists:?}");
    assert!(lists.iter().all(|l| l.contains("limit=2")), "{lists:?}");
    assert!(
        lists[1..].iter().all(|l| l.contains("continue=")),
        "{lists:?}"
    );
    // The watch starts from the list's resourceVersion and asks for bookmarks.
    agent.run_until("a watch", |_| !server.watches_of("Pod").is_empty());
    let watch = &server.watches_of("Pod")[0];
    assert!(watch.contains("allowWatchBookmarks=true"), "{watch}");
    assert!(watch.contains("resourceVersion="), "{watch}");
    agent.assert_metric("netpol_kind_synced{kind=\"Pod\"} 1");
}

#[test]
fn watched_changes_apply_and_a_dropped_watch_resumes_without_a_list() {
    let server = example_server();
    let mut agent = ClusterAgent::start(&server, config());
    agent.run_until("first sync", |a| a.pipeline.synced());
    agent.run_until("NetworkPolicy watched", |_| {
        !server.watches_of("NetworkPolicy").is_empty()
    });

    // db-0 admits api-1 on 1433; a policy isolating api-1's egress cuts that.
    assert!(agent.allowed("shop/api-1", "shop/db-0", 1433));
    server.apply(network_policy(
        "api-no-egress",
        "shop",
        json!({"podSelector": {"matchLabels": {"app": "api"}}, "policyTypes": ["Egress"]}),
    ));
    agent.run_until("the new policy", |a| {
        a.valid(SourceKind::NetworkPolicy) == 5
    });
    agent.run_until("reprogrammed", |a| {
        !a.allowed("shop/api-1", "shop/db-0", 1433)
    });
    agent.assert_programs(&server, "watch-add");

    // The connection drops; the agent watches again from where it was, without listing.
    let lists = server.lists_of("NetworkPolicy").len();
    server.sever_watches();
    agent.run_until("a second watch", |_| {
        server.watches_of("NetworkPolicy").len() >= 2
    });
    let watches = server.watches_of("NetworkPolicy");
    let version = |w: &str| -> u64 {
        let start = w.find("resourceVersion=").unwrap() + "resourceVersion=".len();
        w[start..].split('&').next().unwrap().parse().unwrap()
    };
    assert!(version(&watches[1]) > version(&watches[0]), "{watches:?}");

    // A deletion after the drop arrives over the resumed watch.
    server.delete("NetworkPolicy", "shop/api-no-egress");
    agent.run_until("the deletion", |a| a.valid(SourceKind::NetworkPolicy) == 4);
    agent.run_until("reprogrammed", |a| {
        a.allowed("shop/api-1", "shop/db-0", 1433)
    });
    assert_eq!(
        server.lists_of("NetworkPolicy").len(),
        lists,
        "no list after a drop"
    );
    agent.assert_programs(&server, "watch-resume");
}

#[test]
fn gone_relists_and_deletions_made_meanwhile_take_effect() {
    let server = example_server();
    let mut agent = ClusterAgent::start(&server, config());
    agent.run_until("first sync", |a| a.pipeline.synced());
    assert!(!agent.allowed("shop/web-1", "shop/db-0", 1433));

    // While the agent is disconnected, db's policy goes and the history is compacted.
    server.delete_unseen("NetworkPolicy", "shop/db");
    server.compact();
    server.sever_watches();
    agent.run_until("the relist", |a| a.valid(SourceKind::NetworkPolicy) == 3);
    agent.run_until("reprogrammed", |a| {
        a.allowed("shop/web-1", "shop/db-0", 1433)
    });
    agent.assert_metric("netpol_relists_total{kind=\"NetworkPolicy\"} 1");
    agent.assert_programs(&server, "gone");
}

#[test]
fn an_invalid_custom_resource_is_skipped_alone() {
    let server = example_server();
    server.apply(json!({
        "apiVersion": "cilium.io/v2", "kind": "CiliumNetworkPolicy",
        "metadata": {"name": "oops", "namespace": "shop"},
        "spec": {"endpointSelector": {}, "ingress": "oops"},
    }));
    server.apply(json!({
        "apiVersion": "policy.networking.k8s.io/v1alpha1", "kind": "AdminNetworkPolicy",
        "metadata": {"name": "high"},
        "spec": {"priority": "high", "subject": {"namespaces": {}}, "ingress": []},
    }));
    let mut agent = ClusterAgent::start(&server, config());
    agent.run_until("first sync", |a| a.pipeline.synced());
    assert_eq!(agent.invalid(SourceKind::CiliumNetworkPolicy), 1);
    assert_eq!(agent.valid(SourceKind::CiliumNetworkPolicy), 1);
    assert_eq!(agent.invalid(SourceKind::AdminNetworkPolicy), 1);
    assert_eq!(agent.valid(SourceKind::AdminNetworkPolicy), 2);
    agent.assert_metric("netpol_policies{kind=\"CiliumNetworkPolicy\",validity=\"invalid\"} 1");
    // Everything else is enforced: the same rules as a fresh engine that skips the two.
    agent.assert_programs(&server, "invalid");

    // A valid policy turned misshapen stops being enforced and counts as invalid; fixed, back.
    assert!(!agent.allowed("shop/web-1", "shop/db-0", 1433));
    let broken = network_policy("db", "shop", json!({"podSelector": {"matchLabels": "db"}}));
    server.apply(broken);
    agent.run_until("db invalid", |a| a.invalid(SourceKind::NetworkPolicy) == 1);
    agent.run_until("db unenforced", |a| {
        a.allowed("shop/web-1", "shop/db-0", 1433)
    });
    agent.assert_programs(&server, "invalid-turned");
    server.delete("NetworkPolicy", "shop/db");
    agent.run_until("db gone", |a| a.invalid(SourceKind::NetworkPolicy) == 0);
}

#[test]
fn a_crd_installed_later_is_followed() {
    let server = example_server();
    server.delete_unseen("CiliumNetworkPolicy", "payments/ledger-egress");
    server.set_installed("CiliumNetworkPolicy", false);
    let mut agent = ClusterAgent::start(&server, config());
    agent.run_until("first sync without the CRD", |a| a.pipeline.synced());
    agent.assert_programs(&server, "crd-absent");
    assert!(
        agent.health.readiness().is_ok(),
        "an absent CRD is an empty kind"
    );

    server.set_installed("CiliumNetworkPolicy", true);
    server.apply(json!({
        "apiVersion": "cilium.io/v2", "kind": "CiliumNetworkPolicy",
        "metadata": {"name": "db-deny", "namespace": "shop"},
        "spec": {
            "endpointSelector": {"matchLabels": {"app": "db"}},
            "ingressDeny": [{"fromEndpoints": [{"matchLabels": {"app": "api"}}]}],
        },
    }));
    agent.run_until("the CRD's objects", |a| {
        a.valid(SourceKind::CiliumNetworkPolicy) == 1
    });
    agent.run_until("reprogrammed", |a| {
        !a.allowed("shop/api-1", "shop/db-0", 1433)
    });
    agent.assert_programs(&server, "crd-installed");
}

#[test]
fn failed_lists_back_off_and_readiness_waits_for_the_first_full_sync() {
    let server = example_server();
    // (kube's client retries a 503 itself, so the script sticks to codes it does not.)
    server.fail_lists("NetworkPolicy", &[500, 500, 403, 500]);
    let mut agent = ClusterAgent::start(&server, config());
    agent.run_until("three failed lists", |_| {
        server.lists_of("NetworkPolicy").len() >= 3
    });
    // Every other kind may be listed, but nothing is programmed and the node is not ready.
    assert!(!agent.pipeline.sources_synced());
    assert!(modified(&agent.sim.calls().calls()).is_empty());
    assert!(agent.health.readiness().is_err());

    agent.run_until("first sync", |a| a.pipeline.synced());
    agent.run_until("ready", |a| a.health.readiness().is_ok());
    agent.assert_programs(&server, "backoff");
    agent.assert_metric("netpol_watch_errors_total{kind=\"NetworkPolicy\"} 4");
    // Each retry waited at least the backoff's delay, doubling from 20 ms.
    let times = server.list_times("NetworkPolicy");
    let policy = config().backoff;
    for (n, pair) in times.windows(2).take(4).enumerate() {
        let gap = pair[1] - pair[0];
        let want = policy.delay(u32::try_from(n).unwrap() + 1);
        assert!(gap >= want, "retry {n}: {gap:?} < {want:?}");
    }
}

#[test]
fn a_hung_list_times_out_and_is_retried() {
    let server = example_server();
    server.fail_lists("Namespace", &[0]);
    let config = WatchConfig {
        list_timeout: Duration::from_millis(300),
        ..config()
    };
    let mut agent = ClusterAgent::start(&server, config);
    agent.run_until("first sync", |a| a.pipeline.synced());
    assert!(server.lists_of("Namespace").len() >= 2);
    agent.assert_metric("netpol_watch_errors_total{kind=\"Namespace\"} 1");
    agent.assert_programs(&server, "hung");
}

#[test]
fn a_kind_that_cannot_be_listed_is_waited_for_then_left_out_visibly() {
    let server = example_server();
    server.fail_lists("AdminNetworkPolicy", &[403; 10_000]);
    let config = WatchConfig {
        initial_wait: Duration::from_millis(300),
        ..config()
    };
    let mut agent = ClusterAgent::start(&server, config);
    agent.run_until("sync without the kind", |a| a.pipeline.synced());
    // What is programmed: everything but the admin policies.
    let dir = expected_dir("forbidden");
    server.write_objects(&dir);
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        if text.contains("\"kind\":\"AdminNetworkPolicy\"") {
            std::fs::remove_file(path).unwrap();
        }
    }
    assert_converged(&dir, &agent.sim);
    let reason = agent.health.readiness().unwrap_err();
    assert!(reason.contains("kind AdminNetworkPolicy"), "{reason}");
    agent.assert_metric("netpol_kind_synced{kind=\"AdminNetworkPolicy\"} 0");

    // Permission granted: the kind lists, is enforced, and the node is ready.
    server.clear_failures();
    agent.run_until("the admin policies", |a| {
        a.valid(SourceKind::AdminNetworkPolicy) == 2
    });
    agent.run_until("ready", |a| a.health.readiness().is_ok());
    agent.assert_metric("netpol_kind_synced{kind=\"AdminNetworkPolicy\"} 1");
    agent.assert_programs(&server, "forbidden-granted");
}
