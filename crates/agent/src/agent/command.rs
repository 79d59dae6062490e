//! `netpol agent`: the node agent, in embedded mode (`--from-dir DIR`: objects from YAML files) or
//! cluster mode (watches through `--kubeconfig PATH`, or the in-cluster configuration).

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use netpol_engine::Protocol;
use netpol_hcn::programmer::Backoff;
use netpol_hcn::sim::{HcnSim, SimSession};
use netpol_hcn::{Datapath, HcnDatapath};
use prometheus_client::registry::Registry;

use super::driver::{self, Input, LoopConfig};
#[cfg(windows)]
use super::endpoints::HostEndpoints;
use super::endpoints::SimulatedCni;
use super::enforcer::{Enforcer, HcnEnforcer};
use super::health::{self, Health};
use super::indexes::SourceEvent;
use super::instrumented::Instrumented;
use super::kind::SourceKind;
use super::metrics::Metrics;
use super::reconciler::Pipeline;
use super::reconnect::Reconnecting;
use super::sources::cluster::{spawn_watches, Sinks, WatchConfig};
use super::sources::files::{publish_state, FileProblem, FileSource, Scan, SETTLE_AGE};
use super::summary;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DatapathKind {
    /// The host's HCN (Windows only).
    Hcn,
    /// An in-process HCN simulator; local endpoints are the pods scheduled on --node.
    HcnSim,
    /// The Linux kernel's nftables, in the agent's network namespace (the node's, with
    /// hostNetwork and CAP_NET_ADMIN): table `inet netpol`, local pods matched by address on the
    /// forward hook, whatever the CNI.
    Nftables,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Embedded mode: read the cluster's objects from the YAML files under DIR and follow changes.
    #[arg(long, value_name = "DIR", conflicts_with = "kubeconfig")]
    pub from_dir: Option<PathBuf>,
    /// Cluster mode with this kubeconfig; without it (and without --from-dir), the in-cluster
    /// configuration.
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// This node's name: its pods are the local endpoints.
    #[arg(long, env = "NODE_NAME")]
    pub node: String,
    #[arg(long, value_enum, default_value_t = default_datapath())]
    pub datapath: DatapathKind,
    /// Sync once, print a summary and exit (embedded mode only).
    #[arg(long, requires = "from_dir")]
    pub once: bool,
    /// Where to serve /metrics, /healthz and /readyz.
    #[arg(long, default_value = "0.0.0.0:9590")]
    pub listen: SocketAddr,
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Seconds between full resyncs (every endpoint read back, every file read again).
    #[arg(long, value_name = "SECONDS", default_value_t = 300)]
    pub resync_period: u64,
    /// Milliseconds of quiet that close a batch of changes.
    #[arg(long, value_name = "MS", default_value_t = 100)]
    pub debounce: u64,
    /// Seconds to wait at start for every file to be read (embedded mode) or every kind to be
    /// listed (cluster mode) before programming what could be read; readiness stays false
    /// until everything is.
    #[arg(long, value_name = "SECONDS", default_value_t = 30)]
    pub initial_sync_timeout: u64,
    /// Milliseconds between polls of the files in embedded mode.
    #[arg(long, value_name = "MS", default_value_t = 200)]
    pub poll_interval: u64,
    /// Flows the --once summary shows a matrix for, as PROTOCOL/PORT (repeatable).
    #[arg(long = "probe", value_name = "PROTOCOL/PORT", value_parser = parse_probe, default_value = "TCP/80")]
    pub probes: Vec<(Protocol, u16)>,
    /// In the --once summary, list every local endpoint and print the full connectivity matrix
    /// of each probe, not only the counts of allowed and denied pairs.
    #[arg(long, requires = "once")]
    pub matrix: bool,
}

fn default_datapath() -> DatapathKind {
    if cfg!(windows) {
        DatapathKind::Hcn
    } else {
        DatapathKind::HcnSim
    }
}

fn parse_probe(text: &str) -> Result<(Protocol, u16), String> {
    let (protocol, port) = text
        .split_once('/')
        .ok_or_else(|| format!("expected PROTOCOL/PORT, found {text:?}"))?;
    let protocol = crate::scenario::parse_protocol(protocol)?;
    let port = port
        .parse::<u16>()
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| format!("invalid port {port:?}"))?;
    Ok((protocol, port))
}

/// Runs the agent; the exit code says how it ended.
pub fn run(args: &Args) -> ExitCode {
    init_logging(args.log_format);
    let result = if args.once {
        run_once(args)
    } else {
        run_daemon(args)
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            tracing::error!("{error:#}");
            ExitCode::from(2)
        }
    }
}

fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    // A second initialization (tests) keeps the first subscriber.
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

/// The enforcer of the chosen datapath and, for HCN, the datapath whose resync signal (an HNS
/// restart) the daemon follows and, for the simulator, a handle on it.
struct Datapaths {
    enforcer: Box<dyn Enforcer>,
    hcn: Option<Arc<dyn Datapath>>,
    sim: Option<Arc<HcnDatapath<HcnSim>>>,
}

impl Datapaths {
    fn hcn(
        datapath: Arc<dyn Datapath>,
        discovery: Box<dyn super::endpoints::EndpointDiscovery>,
        sim: Option<Arc<HcnDatapath<HcnSim>>>,
    ) -> Self {
        Datapaths {
            enforcer: Box::new(HcnEnforcer::new(datapath.clone(), discovery, backoff())),
            hcn: Some(datapath),
            sim,
        }
    }
}

fn datapaths(
    kind: DatapathKind,
    metrics: &Metrics,
    health: &Arc<Health>,
) -> anyhow::Result<Datapaths> {
    let instrument = |raw: Arc<dyn Datapath>| -> Arc<dyn Datapath> {
        Arc::new(Instrumented::new(raw, metrics.clone()).with_health(health.clone()))
    };
    match kind {
        DatapathKind::HcnSim => {
            let sim = Arc::new(HcnDatapath::new(HcnSim::new()));
            let host = sim.clone();
            // The agent talks to the simulator through sessions an HNS restart invalidates, as
            // it talks to the real HNS; the stand-in CNI plugin keeps its own view.
            let sessions = Reconnecting::new(Box::new(move || {
                Ok(Arc::new(HcnDatapath::new(SimSession::connect(&host))) as Arc<dyn Datapath>)
            }))?;
            Ok(Datapaths::hcn(
                instrument(Arc::new(sessions)),
                Box::new(SimulatedCni::new(sim.clone())),
                Some(sim),
            ))
        }
        DatapathKind::Hcn => host_datapath(instrument),
        DatapathKind::Nftables => nftables_datapath(),
    }
}

#[cfg(target_os = "linux")]
fn nftables_datapath() -> anyhow::Result<Datapaths> {
    use super::enforcer::NftEnforcer;
    use netpol_nft::programmer::HostNft;
    Ok(Datapaths {
        enforcer: Box::new(NftEnforcer::new(Box::new(HostNft), backoff())),
        hcn: None,
        sim: None,
    })
}

#[cfg(not(target_os = "linux"))]
fn nftables_datapath() -> anyhow::Result<Datapaths> {
    bail!("the nftables datapath exists only on Linux")
}

#[cfg(windows)]
fn host_datapath(
    instrument: impl Fn(Arc<dyn Datapath>) -> Arc<dyn Datapath>,
) -> anyhow::Result<Datapaths> {
    // Re-created (registering for notifications again) after every HNS restart.
    let client = Reconnecting::new(Box::new(|| {
        let client = netpol_hcn::windows::HcnClient::connect().map_err(|e| {
            netpol_hcn::DatapathError::Call {
                call: "connecting to HNS",
                endpoint: None,
                message: e.to_string(),
            }
        })?;
        Ok(Arc::new(HcnDatapath::new(client)) as Arc<dyn Datapath>)
    }))
    .context("connecting to HNS")?;
    Ok(Datapaths::hcn(
        instrument(Arc::new(client)),
        Box::new(HostEndpoints::default()),
        None,
    ))
}

#[cfg(not(windows))]
fn host_datapath(_: impl Fn(Arc<dyn Datapath>) -> Arc<dyn Datapath>) -> anyhow::Result<Datapaths> {
    bail!("the HCN datapath exists only on Windows; use --datapath hcn-sim")
}

fn backoff() -> Backoff {
    Backoff::default()
}

/// Logs a scan's problems and counts invalid policies.
fn report_problems(scan: &Scan, metrics: &Metrics) {
    report_file_problems(&scan.problems, metrics);
}

fn report_file_problems(problems: &[FileProblem], metrics: &Metrics) {
    for problem in problems {
        if let FileProblem::InvalidObject { error, .. } = problem {
            if let Some(kind) = SourceKind::ALL
                .into_iter()
                .find(|k| k.as_str() == error.object.kind)
            {
                if kind.is_policy() {
                    metrics.count_rejection(kind);
                }
            }
        }
        tracing::warn!("{}", super::logline::bounded(&problem.to_string()));
    }
}

/// `--once`'s first list: waits (boundedly) for files still being written, then lists what
/// could be read. Returns the events and every problem met.
fn read_once(
    source: &mut FileSource,
    poll: Duration,
) -> anyhow::Result<(Vec<SourceEvent>, Vec<FileProblem>)> {
    let started = Instant::now();
    let mut problems = Vec::new();
    loop {
        let scan = source
            .scan()
            .with_context(|| format!("reading {}", source.root().display()))?;
        problems.extend(scan.problems);
        if source.is_listed() {
            return Ok((scan.events, problems));
        }
        // Only files still changing are worth waiting for, and not for long; unreadable ones
        // are reported and the rest is listed.
        if scan.settling == 0 || started.elapsed() > 2 * SETTLE_AGE {
            source.accept_partial();
        } else {
            std::thread::sleep(poll);
        }
    }
}

/// `--once`: sync, retrying failed endpoints a few times, print the summary.
fn run_once(args: &Args) -> anyhow::Result<ExitCode> {
    const ATTEMPTS: usize = 5;
    let started = Instant::now();
    let dir = args.from_dir.as_ref().context("--once needs --from-dir")?;
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    let health = Arc::new(Health::default());
    let Datapaths { enforcer, sim, .. } = datapaths(args.datapath, &metrics, &health)?;
    let mut pipeline = Pipeline::with_enforcer(&args.node, enforcer, metrics.clone());
    let mut source = FileSource::new(dir);
    let (events, problems) = read_once(&mut source, Duration::from_millis(args.poll_interval))?;
    report_file_problems(&problems, &metrics);
    let unreadable = source.unreadable().len();
    // Nothing reads the files again: the source's copy of every object would only add to the
    // peak while the engine and compiler work.
    drop(source);
    for event in events {
        pipeline.ingest(event);
    }
    let mut complete = false;
    for _ in 0..ATTEMPTS {
        let report = pipeline
            .reconcile(Instant::now())
            .context("the files did not list every kind")?;
        if report.complete() {
            complete = true;
            break;
        }
        if let Some(at) = pipeline.next_wakeup() {
            std::thread::sleep(at.saturating_duration_since(Instant::now()));
        }
    }
    let mut out = std::io::stdout().lock();
    summary::write_sync_cost(&mut out, &pipeline, started.elapsed())?;
    summary::write(
        &mut out,
        &args.node,
        &pipeline,
        sim.as_ref().map(|s| s.calls()),
        &args.probes,
        args.matrix,
    )?;
    out.flush()?;
    // The process ends here: freeing a large cluster's state piece by piece would only add
    // to the time `--once` reports and takes.
    let invalid = problems
        .iter()
        .filter(|p| matches!(p, FileProblem::InvalidObject { .. }))
        .count()
        + invalid_policies(&pipeline);
    std::mem::forget(pipeline);
    if !complete {
        tracing::error!("some endpoints could not be programmed after {ATTEMPTS} attempts");
    }
    if unreadable > 0 || invalid > 0 {
        tracing::error!(
            unreadable_files = unreadable,
            invalid_objects = invalid,
            "not every object was read: the rules above leave out what could not be"
        );
    }
    if complete && unreadable == 0 && invalid == 0 {
        Ok(ExitCode::SUCCESS)
    } else {
        Ok(ExitCode::from(1))
    }
}

/// Policies read but refused by translation (their errors were logged).
fn invalid_policies(pipeline: &Pipeline) -> usize {
    let counts = pipeline.indexes().policy_counts();
    counts.values().map(|c| c.invalid).sum()
}

/// The long-running agent: HTTP endpoints and watches on a small async runtime, the reconcile loop
/// on a thread of its own.
fn run_daemon(args: &Args) -> anyhow::Result<ExitCode> {
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    let health = Arc::new(Health::default());
    let Datapaths { enforcer, hcn, .. } = datapaths(args.datapath, &metrics, &health)?;

    let (inputs, receiver) = mpsc::channel();
    if let Some(datapath) = hcn {
        // An HNS restart loses every policy: read everything back at once.
        let inputs = std::sync::Mutex::new(inputs.clone());
        datapath.resync_signal().subscribe(move || {
            let _ = inputs
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .send(Input::Resync);
        });
    }
    let pipeline = Pipeline::with_enforcer(&args.node, enforcer, metrics.clone());
    let config = LoopConfig {
        debounce: Duration::from_millis(args.debounce),
        max_batch_delay: Duration::from_secs(1).max(Duration::from_millis(args.debounce)),
        resync_period: Duration::from_secs(args.resync_period.max(1)),
    };
    let loop_health = health.clone();
    let reconciler = std::thread::Builder::new()
        .name("reconcile".into())
        .spawn(move || driver::run(pipeline, receiver, loop_health, config))?;

    let stop = Arc::new(AtomicBool::new(false));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let registry = Arc::new(registry);
    let served = runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(args.listen)
            .await
            .with_context(|| format!("listening on {}", args.listen))?;
        tracing::info!(listen = %args.listen, node = %args.node, "netpol agent started");
        match &args.from_dir {
            Some(dir) => {
                let source = FileSource::new(dir);
                let poll = Duration::from_millis(args.poll_interval.max(10));
                let relist = config.resync_period;
                let follow = FollowFiles {
                    inputs: inputs.clone(),
                    metrics: metrics.clone(),
                    health: health.clone(),
                    poll,
                    relist,
                    initial_wait: Duration::from_secs(args.initial_sync_timeout),
                };
                let stop = stop.clone();
                std::thread::Builder::new()
                    .name("files".into())
                    .spawn(move || follow.run(source, &stop))?;
            }
            None => {
                let client = kube_client(args.kubeconfig.as_ref()).await?;
                let sinks = Sinks {
                    inputs: inputs.clone(),
                    metrics: metrics.clone(),
                    health: health.clone(),
                };
                let config = WatchConfig {
                    initial_wait: Duration::from_secs(args.initial_sync_timeout),
                    ..WatchConfig::default()
                };
                spawn_watches(&client, &sinks, config);
            }
        }
        health::serve(listener, health.clone(), registry, shutdown_signal())
            .await
            .context("serving HTTP")
    });
    stop.store(true, Ordering::Relaxed);
    let _ = inputs.send(Input::Shutdown);
    runtime.shutdown_timeout(Duration::from_secs(2));
    if reconciler.join().is_err() {
        bail!("the reconcile loop panicked");
    }
    served?;
    tracing::info!("netpol agent stopped");
    Ok(ExitCode::SUCCESS)
}

/// The embedded mode's polling loop and what it reports to.
struct FollowFiles {
    inputs: Sender<Input>,
    metrics: Metrics,
    health: Arc<Health>,
    poll: Duration,
    /// How often every file is read again and every kind relisted.
    relist: Duration,
    /// How long the first list waits for unreadable or still-changing files.
    initial_wait: Duration,
}

impl FollowFiles {
    /// Polls the files, sending what changed, until `stop`.
    fn run(self, mut source: FileSource, stop: &AtomicBool) {
        let started = Instant::now();
        let mut next_relist = started + self.relist;
        while !stop.load(Ordering::Relaxed) {
            if !source.is_listed() && started.elapsed() >= self.initial_wait {
                tracing::warn!(
                    waited_s = self.initial_wait.as_secs(),
                    "some files are still unreadable or changing: programming what could be read"
                );
                source.accept_partial();
            }
            let scan = if source.is_listed() && Instant::now() >= next_relist {
                next_relist = Instant::now() + self.relist;
                source.relist()
            } else {
                source.scan()
            };
            match scan {
                Ok(scan) => {
                    report_problems(&scan, &self.metrics);
                    publish_state(&source, &self.metrics, &self.health);
                    for event in scan.events {
                        if self.inputs.send(Input::Event(Box::new(event))).is_err() {
                            return;
                        }
                    }
                }
                Err(error) => {
                    tracing::warn!(dir = %source.root().display(), %error, "reading the files failed");
                    self.health.set_source_problem(
                        "files",
                        Some(format!("listing the files failed: {error}")),
                    );
                }
            }
            std::thread::sleep(self.poll);
        }
    }
}

async fn kube_client(kubeconfig: Option<&PathBuf>) -> anyhow::Result<kube::Client> {
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
async fn shutdown_signal() {
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
