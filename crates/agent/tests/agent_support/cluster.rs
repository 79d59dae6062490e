//! The cluster mode's harness: the agent's real list/watch code over HTTP against the API
//! server stand-in, feeding a pipeline that programs the HCN simulator, its reconcile loop
//! driven by the test.

use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::*;
use netpol_agent::driver::Input;
use netpol_agent::health::Health;
use netpol_agent::instrumented::Instrumented;
use netpol_agent::metrics::Metrics;
use netpol_agent::reconciler::Pipeline;
use netpol_agent::sources::cluster::{spawn_watches, PodSource, Sinks, WatchConfig};
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
pub const PATIENCE: Duration = Duration::from_secs(30);

pub fn config() -> WatchConfig {
    WatchConfig {
        page_size: 2,
        policy_page_size: 2,
        policy_page_bytes: usize::MAX,
        // Paged lists, which the scripted list failures of most tests are about; streaming
        // lists have tests of their own.
        streaming_lists: false,
        page_timeout: Duration::from_secs(5),
        watch_timeout_s: 290,
        stall_timeout: Duration::from_secs(90),
        backoff: Backoff {
            initial: Duration::from_millis(20),
            max: Duration::from_millis(160),
        },
        initial_wait: Duration::from_secs(60),
    }
}

/// The agent in cluster mode, its reconcile loop driven by the test.
pub struct ClusterAgent {
    pub runtime: tokio::runtime::Runtime,
    pub inputs: Receiver<Input>,
    pub pipeline: Pipeline,
    pub sim: Arc<HcnDatapath<HcnSim>>,
    pub registry: Registry,
    pub health: Arc<Health>,
}

impl ClusterAgent {
    pub fn start(server: &ApiServer, config: WatchConfig) -> ClusterAgent {
        ClusterAgent::start_on(server, config, new_sim())
    }

    /// An agent programming `sim`, which may hold what an earlier agent programmed.
    pub fn start_on(
        server: &ApiServer,
        config: WatchConfig,
        sim: Arc<HcnDatapath<HcnSim>>,
    ) -> ClusterAgent {
        ClusterAgent::start_reading(server, config, sim, &PodSource::Pods)
    }

    /// An agent reading the pods of other nodes from `pods` (every Pod, or slices).
    pub fn start_reading(
        server: &ApiServer,
        config: WatchConfig,
        sim: Arc<HcnDatapath<HcnSim>>,
        pods: &PodSource,
    ) -> ClusterAgent {
        // The agent's log, shown for failed tests (RUST_LOG picks the level).
        let _ = tracing_subscriber::fmt()
            .with_test_writer()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .try_init();
        let mut registry = Registry::default();
        let metrics = Metrics::register(&mut registry);
        let health = Arc::new(Health::default());
        health.heartbeat();
        let raw: Arc<dyn HcnApi> = sim.clone();
        let mut pipeline = Pipeline::new(
            NODE,
            Arc::new(Instrumented::new(raw, metrics.clone())),
            Box::new(SimulatedCni::new(sim.clone())),
            backoff(),
            metrics.clone(),
        );
        if matches!(pods, PodSource::Slices { .. }) {
            pipeline.read_remote_pods_from_slices();
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        // Far below the agent's capacity: every list here fills it and waits for the loop.
        let (inputs, receiver) = mpsc::sync_channel(8);
        {
            let _entered = runtime.enter();
            let sinks = Sinks::new(inputs, metrics, health.clone());
            spawn_watches(&server.client(), &sinks, config, pods);
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
    pub fn run_until(&mut self, what: &str, done: impl Fn(&ClusterAgent) -> bool) {
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
            netpol_agent::driver::report_own_node(&self.pipeline, &self.health);
            if self.pipeline.has_pending_changes() {
                if let Some(report) = self.pipeline.reconcile(Instant::now()) {
                    if report.complete() {
                        self.health.set_synced();
                    }
                }
            }
        }
    }

    pub fn take(&mut self, input: Input) {
        netpol_agent::driver::take(&mut self.pipeline, input);
    }

    /// Whether a local endpoint holds the pod `pod` (`namespace/name`).
    pub fn has_endpoint(&self, pod: &str) -> bool {
        self.pipeline
            .endpoints()
            .iter()
            .any(|(_, p)| p.as_deref() == Some(pod))
    }

    pub fn metrics_text(&self) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry).unwrap();
        text
    }

    pub fn assert_metric(&self, line: &str) {
        let text = self.metrics_text();
        assert!(text.lines().any(|l| l == line), "no {line:?} in:\n{text}");
    }

    pub fn valid(&self, kind: SourceKind) -> usize {
        self.pipeline.indexes().policy_counts()[&kind].valid
    }

    pub fn invalid(&self, kind: SourceKind) -> usize {
        self.pipeline.indexes().policy_counts()[&kind].invalid
    }

    pub fn allowed(&self, from: &str, to: &str, port: u16) -> bool {
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
    pub fn assert_programs(&self, server: &ApiServer, test: &str) {
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

pub fn expected_dir(test: &str) -> PathBuf {
    scratch_dir(&format!("cluster-expected-{test}"))
}

pub fn example_server() -> ApiServer {
    ApiServer::with_example_cluster()
}

pub fn network_policy(name: &str, namespace: &str, spec: serde_json::Value) -> serde_json::Value {
    json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    })
}
