//! The long-running agent: HTTP endpoints and watches on a small async runtime, the reconcile loop
//! on a thread of its own, and (embedded mode) the file poller on another.
//!
//! A panic on any thread ends the process with [`PANIC_EXIT_CODE`] (see [`exit_on_panic`]):
//! tokio would otherwise swallow a watch task's panic and leave its kind silently unfollowed,
//! and a dead reconcile loop would enforce nothing while the process looks alive. The kubelet
//! restarts the agent; the datapath keeps what was programmed meanwhile.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use prometheus_client::registry::Registry;

use crate::config::{AgentConfig, SourceConfig};
use crate::datapaths::{self, Datapaths};
use crate::driver::{self, Input, LoopConfig};
use crate::follow_files::FollowFiles;
use crate::health::{self, FatalOnUnwind, Health};
use crate::metrics::Metrics;
use crate::reconciler::Pipeline;
use crate::refusals::{Reporter, ReporterConfig};
use crate::sources::cluster::{resources, spawn_watches, PodSource, Sinks, WatchConfig};
use crate::sources::files::{FileSource, TemplatePlacement};

/// The exit code of an agent that panicked (`EX_SOFTWARE`).
pub const PANIC_EXIT_CODE: i32 = 70;

/// Inputs that may wait for the reconcile loop. A source that reads faster than the loop takes
/// its objects waits rather than queueing them: at an initial sync of 150,000 pods an unbounded
/// queue could hold every pod at once.
pub const INPUT_CAPACITY: usize = 1024;

/// What a running agent reports into, made before it starts so that its datapath can report too.
pub struct Observability {
    pub registry: Arc<Registry>,
    pub metrics: Metrics,
    pub health: Arc<Health>,
}

impl Observability {
    /// Fresh metrics, registered, and a fresh health record.
    pub fn new() -> Observability {
        let mut registry = Registry::default();
        let metrics = Metrics::register(&mut registry);
        Observability {
            registry: Arc::new(registry),
            metrics,
            health: Arc::new(Health::default()),
        }
    }
}

impl Default for Observability {
    fn default() -> Self {
        Self::new()
    }
}

/// Runs the agent until it is told to stop (Ctrl-C, SIGTERM, a Windows shutdown event).
pub fn run(config: &AgentConfig) -> anyhow::Result<()> {
    let observability = Observability::new();
    exit_on_panic(observability.health.clone());
    let datapaths = datapaths::build(
        config.datapath,
        config.datapath_options.clone(),
        &observability.metrics,
        &observability.health,
    )?;
    run_with(config, observability, datapaths, shutdown_signal())
}

/// From now on, a panic on any thread marks `health` dead (failing `/healthz`), is printed by the
/// hook that was installed before (the standard one prints the message and where), and ends
/// the process with [`PANIC_EXIT_CODE`]. Process-wide: only the agent's own entry point calls it.
pub fn exit_on_panic(health: Arc<Health>) {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        previous(info);
        let thread = std::thread::current()
            .name()
            .unwrap_or("an unnamed thread")
            .to_owned();
        health.set_fatal(format!("thread {thread} panicked"));
        // Plain stderr: the panic may have happened inside the log writer.
        eprintln!(
            "netpol agent: thread {thread} panicked; exiting with code {PANIC_EXIT_CODE} so that the agent is restarted"
        );
        std::process::exit(PANIC_EXIT_CODE);
    }));
}

/// Runs the agent with `datapaths` until `shutdown` completes, reporting into `observability`.
pub fn run_with(
    config: &AgentConfig,
    observability: Observability,
    datapaths: Datapaths,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let Observability {
        registry,
        metrics,
        health,
    } = observability;
    let Datapaths {
        enforcer,
        hcn,
        flows,
        ..
    } = datapaths;

    let (inputs, receiver) = mpsc::sync_channel(INPUT_CAPACITY);
    let resync = Arc::new(AtomicBool::new(false));
    if let Some(datapath) = hcn {
        crate::coexistence::report_at_start(datapath.as_ref(), &metrics);
        // An HNS restart loses every policy: read everything back at once. The signal may be
        // raised on the reconcile loop's own thread (a call that finds HNS gone), which must not
        // wait for room in its own channel: the flag carries the request, the input only wakes
        // the loop (a full channel wakes it anyway).
        let inputs = inputs.clone();
        let requested = resync.clone();
        datapath.resync_signal().subscribe(move || {
            requested.store(true, Ordering::SeqCst);
            let _ = inputs.try_send(Input::Resync);
        });
    }
    let mut pipeline = Pipeline::with_enforcer(&config.node, enforcer, metrics.clone());
    if let SourceConfig::Cluster {
        pods: PodSource::Slices { .. },
        ..
    } = &config.source
    {
        pipeline.read_remote_pods_from_slices();
    }
    if let Some(limit) = config.datapath_options.max_policy_entries {
        pipeline.set_max_policy_entries(limit);
    }
    pipeline.set_policy_budgets(config.datapath_options.policy_budgets);
    if config.datapath_options.audit_all {
        pipeline.audit_all();
    }
    // In cluster mode refused objects are also reported as Events (`refusals`: who posts).
    let (refusals, mut refused) = tokio::sync::mpsc::unbounded_channel();
    if matches!(config.source, SourceConfig::Cluster { .. }) {
        pipeline.report_refusals(refusals);
    }
    let loop_config = LoopConfig {
        debounce: config.debounce,
        max_batch_delay: Duration::from_secs(1).max(config.debounce),
        resync_period: config.resync_period.max(Duration::from_secs(1)),
    };
    let loop_health = health.clone();
    let reconciler = std::thread::Builder::new()
        .name("reconcile".into())
        .spawn(move || {
            driver::run_with_resync(pipeline, receiver, resync, loop_health, loop_config)
        })?;

    let stop = Arc::new(AtomicBool::new(false));
    let body = |listener| async {
        tracing::info!(listen = %config.listen, node = %config.node, "netpol agent started");
        match &config.source {
            SourceConfig::Files(dir) => {
                let follow = FollowFiles {
                    inputs: inputs.clone(),
                    metrics: metrics.clone(),
                    health: health.clone(),
                    poll: config.poll_interval.max(Duration::from_millis(10)),
                    relist: loop_config.resync_period,
                    initial_wait: config.initial_sync_timeout,
                };
                let source = FileSource::new(dir).with_templates(TemplatePlacement::new(
                    config.templates.clone(),
                    Some(config.node.clone()),
                ));
                let stop = stop.clone();
                std::thread::Builder::new().name("files".into()).spawn({
                    let health = health.clone();
                    move || {
                        let _guard = FatalOnUnwind::new(&health, "the file poller");
                        follow.run(source, &stop);
                    }
                })?;
            }
            SourceConfig::Cluster {
                kubeconfig,
                streaming_lists,
                pods,
            } => {
                let client = kube_client(kubeconfig.as_ref()).await?;
                // One writer of the cluster posts Events on refused objects: the agent holding
                // the Lease, or the controller in slice mode. This node's own, its agent.
                let namespace = std::env::var("POD_NAMESPACE")
                    .ok()
                    .filter(|n| !n.is_empty())
                    .unwrap_or_else(|| "netpol-system".into());
                let reporting = match pods {
                    PodSource::Pods => ReporterConfig::for_node(&namespace, &config.node),
                    PodSource::Slices { .. } => {
                        ReporterConfig::for_node_beside_controller(&namespace, &config.node)
                    }
                };
                let reporter = Reporter::new(
                    client.clone(),
                    reporting,
                    resources().into_iter().map(|(_, r)| r).collect(),
                );
                let (_, none) = tokio::sync::mpsc::unbounded_channel();
                tokio::spawn(reporter.run(std::mem::replace(&mut refused, none)));
                let sinks = Sinks::new(inputs.clone(), metrics.clone(), health.clone());
                let watch = WatchConfig {
                    initial_wait: config.initial_sync_timeout,
                    streaming_lists: *streaming_lists,
                    ..WatchConfig::default()
                };
                spawn_watches(&client, &sinks, watch, pods);
            }
        }
        health::serve_with_flows(listener, health.clone(), registry, flows, shutdown)
            .await
            .context("serving HTTP")
    };
    let stopping = || {
        stop.store(true, Ordering::Relaxed);
        let _ = inputs.send(Input::Shutdown);
    };
    let served = serve_on_runtime(AGENT_THREADS, config.listen, body, stopping);
    if reconciler.join().is_err() {
        bail!("the reconcile loop panicked");
    }
    served?;
    tracing::info!("netpol agent stopped");
    Ok(())
}

/// The name of the agent's runtime threads (watches, HTTP).
pub const AGENT_THREADS: &str = "agent";

/// Serves on a runtime of two worker threads named `thread_name` (so that a profile tells
/// them apart): binds `listen` and runs `body` with it until it returns, then runs `stopping`
/// and gives the runtime's tasks 2 s to end. What `netpol agent` and `netpol controller`
/// share.
pub fn serve_on_runtime<Body, Served>(
    thread_name: &str,
    listen: SocketAddr,
    body: Body,
    stopping: impl FnOnce(),
) -> anyhow::Result<()>
where
    Body: FnOnce(tokio::net::TcpListener) -> Served,
    Served: std::future::Future<Output = anyhow::Result<()>>,
{
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name(thread_name)
        .enable_all()
        .build()?;
    let served = runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .with_context(|| format!("listening on {listen}"))?;
        body(listener).await
    });
    stopping();
    runtime.shutdown_timeout(Duration::from_secs(2));
    served
}

/// A client from `kubeconfig`, or from the in-cluster configuration.
pub async fn kube_client(kubeconfig: Option<&PathBuf>) -> anyhow::Result<kube::Client> {
    let config = match kubeconfig {
        Some(path) => {
            let kubeconfig = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
                .await
                .with_context(|| format!("using {}", path.display()))?
        }
        None => kube::Config::incluster().context("reading the in-cluster configuration")?,
    };
    kube::Client::try_from(config).context("building the Kubernetes client")
}

/// Completes on Ctrl-C, and on SIGTERM (Unix) or a shutdown or close event (Windows), which is
/// how the kubelet stops a container.
pub async fn shutdown_signal() {
    let interrupt = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(windows)]
    let terminate = async {
        match (
            tokio::signal::windows::ctrl_shutdown(),
            tokio::signal::windows::ctrl_close(),
        ) {
            (Ok(mut shutdown), Ok(mut close)) => {
                tokio::select! {
                    _ = shutdown.recv() => {}
                    _ = close.recv() => {}
                }
            }
            _ => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        () = interrupt => {}
        () = terminate => {}
    }
    tracing::info!("shutting down");
}
