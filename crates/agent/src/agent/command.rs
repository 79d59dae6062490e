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
use netpol_hcn::sim::HcnSim;
use netpol_hcn::{Datapath, HcnDatapath};
use prometheus_client::registry::Registry;

use super::driver::{self, Input, LoopConfig};
#[cfg(windows)]
use super::endpoints::HostEndpoints;
use super::endpoints::{EndpointDiscovery, SimulatedCni};
use super::health::{self, Health};
use super::instrumented::Instrumented;
use super::kind::SourceKind;
use super::metrics::Metrics;
use super::reconciler::Pipeline;
use super::sources::files::{FileProblem, FileSource, Scan};
use super::summary;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DatapathKind {
    /// The host's HCN (Windows only).
    Hcn,
    /// An in-process HCN simulator; local endpoints are the pods scheduled on --node.
    HcnSim,
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

/// The datapath, its endpoint discovery and, for the simulator, a handle on it.
struct Datapaths {
    datapath: Arc<dyn Datapath>,
    discovery: Box<dyn EndpointDiscovery>,
    sim: Option<Arc<HcnDatapath<HcnSim>>>,
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
            Ok(Datapaths {
                datapath: instrument(sim.clone()),
                discovery: Box::new(SimulatedCni::new(sim.clone())),
                sim: Some(sim),
            })
        }
        DatapathKind::Hcn => host_datapath(instrument),
    }
}

#[cfg(windows)]
fn host_datapath(
    instrument: impl Fn(Arc<dyn Datapath>) -> Arc<dyn Datapath>,
) -> anyhow::Result<Datapaths> {
    let client = netpol_hcn::windows::HcnClient::connect().context("connecting to HNS")?;
    Ok(Datapaths {
        datapath: instrument(Arc::new(HcnDatapath::new(client))),
        discovery: Box::new(HostEndpoints::default()),
        sim: None,
    })
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
    for problem in &scan.problems {
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
        tracing::warn!("{problem}");
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
    let Datapaths {
        datapath,
        discovery,
        sim,
    } = datapaths(args.datapath, &metrics, &health)?;
    let mut pipeline = Pipeline::new(&args.node, datapath, discovery, backoff(), metrics.clone());
    let mut source = FileSource::new(dir);
    let mut scan = source
        .scan()
        .with_context(|| format!("reading {}", dir.display()))?;
    report_problems(&scan, &metrics);
    for event in std::mem::take(&mut scan.events) {
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
    std::mem::forget(pipeline);
    std::mem::forget(source);
    if complete {
        Ok(ExitCode::SUCCESS)
    } else {
        tracing::error!("some endpoints could not be programmed after {ATTEMPTS} attempts");
        Ok(ExitCode::from(1))
    }
}

/// The long-running agent: HTTP endpoints and watches on a small async runtime, the reconcile loop
/// on a thread of its own.
fn run_daemon(args: &Args) -> anyhow::Result<ExitCode> {
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    let health = Arc::new(Health::default());
    let Datapaths {
        datapath,
        discovery,
        sim: _,
    } = datapaths(args.datapath, &metrics, &health)?;

    let (inputs, receiver) = mpsc::channel();
    {
        // An HNS restart loses every policy: read everything back at once.
        let inputs = std::sync::Mutex::new(inputs.clone());
        datapath.resync_signal().subscribe(move || {
            let _ = inputs
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .send(Input::Resync);
        });
    }
    let pipeline = Pipeline::new(&args.node, datapath, discovery, backoff(), metrics.clone());
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
                let (inputs, metrics, stop) = (inputs.clone(), metrics.clone(), stop.clone());
                std::thread::Builder::new()
                    .name("files".into())
                    .spawn(move || follow_files(source, &inputs, &metrics, poll, relist, &stop))?;
            }
            None => {
                let client = kube_client(args.kubeconfig.as_ref()).await?;
                super::sources::cluster::spawn_watches(&client, &inputs);
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

/// Polls the files, sending what changed; relists everything every `relist` period.
fn follow_files(
    mut source: FileSource,
    inputs: &Sender<Input>,
    metrics: &Metrics,
    poll: Duration,
    relist: Duration,
    stop: &AtomicBool,
) {
    let mut next_relist = Instant::now() + relist;
    while !stop.load(Ordering::Relaxed) {
        let scan = if Instant::now() >= next_relist {
            next_relist = Instant::now() + relist;
            source.relist()
        } else {
            source.scan()
        };
        match scan {
            Ok(scan) => {
                report_problems(&scan, metrics);
                for event in scan.events {
                    if inputs.send(Input::Event(Box::new(event))).is_err() {
                        return;
                    }
                }
            }
            Err(error) => {
                tracing::warn!(dir = %source.root().display(), %error, "reading the files failed")
            }
        }
        std::thread::sleep(poll);
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
