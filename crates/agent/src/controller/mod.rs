//! `netpol controller`: publishes the cluster's pods as NetpolEndpointSlices, so that agents in
//! slice mode read a compact record of other nodes' pods instead of every Pod; and posts the
//! refusal Events of refused policies for the cluster ([`refusals`]).
//!
//! ```text
//! Pod watch ──▶ World (pod → endpoint) ──change──▶ coalesce ──▶ plan (sticky batches) ──▶ writes
//!                                                                  ▲                       │
//!                                     slices listed on taking the Lease, 409 → read again ─┘
//! policy watches ──▶ Policies (the agents' checks and budgets) ──refused, while leading──▶ Events
//! ```
//!
//! - **One writer**: replicas compete for a coordination.k8s.io Lease ([`crate::lease`]); only
//!   the holder writes. A holder that cannot renew stops writing before its Lease can expire;
//!   another replica takes over once it has.
//! - **No gap, no duplicate across restarts and leader changes**: the new leader lists the
//!   slices and adopts them ([`publisher`]); the plan keeps every endpoint in the slice that
//!   holds it and drops an endpoint listed twice.
//! - **Coalesced writes**: a change is published [`ControllerConfig::coalesce`] after it
//!   arrives, with every change that arrived meanwhile: a rolling update touches the few
//!   slices its pods share, a few times.
//! - **Preconditions**: every update and delete carries the resourceVersion read; a 409 or 404
//!   reads the slice again and plans again.
//! - Nothing is published before the pods are listed completely (a partial list would delete
//!   what it has not reached yet).
//!
//! `/healthz`, `/readyz` (ready once the pods are listed, while no followed kind fails) and
//! `/metrics` as the agent serves them.

pub mod metrics;
mod publisher;
mod refusals;
mod world;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use kube::api::ApiResource;
use kube::Client;
use netpol_api::crd::endpoint_slice::MAX_ENDPOINTS;
use netpol_api::Pod;
use prometheus_client::registry::Registry;
use tokio::sync::{watch, Notify};

use crate::daemon::{kube_client, serve_on_runtime, shutdown_signal, INPUT_CAPACITY};
use crate::driver::Input;
use crate::health::{self, FatalOnUnwind, Health};
use crate::indexes::PolicyBudgets;
use crate::kind::SourceKind;
use crate::lease::{elect, LeaseConfig};
use crate::metrics::Metrics;
use crate::sources::cluster::{spawn_follower, Sinks, WatchConfig};
use crate::sources::jitter::Jitter;
use crate::sources::kube_api::KindApi;
use metrics::ControllerMetrics;
use publisher::Publisher;
use refusals::RefusalConfig;
use world::World;

/// What the controller is told.
#[derive(Clone, Debug)]
pub struct ControllerConfig {
    /// A kubeconfig, or None for the in-cluster configuration.
    pub kubeconfig: Option<PathBuf>,
    /// Where to serve /metrics, /healthz and /readyz.
    pub listen: SocketAddr,
    pub lease: LeaseConfig,
    /// How long after a change its slice is written, gathering the changes that follow.
    pub coalesce: Duration,
    /// Endpoints a slice holds at most.
    pub capacity: usize,
    pub watch: WatchConfig,
    /// The agents' policy budgets: the controller posts the refusal Events of slice mode, so it
    /// must refuse what they refuse.
    pub budgets: PolicyBudgets,
}

impl ControllerConfig {
    /// The defaults: Lease `netpol-controller` in `namespace` held for 15 s, writes 200 ms
    /// after a change, [`MAX_ENDPOINTS`] endpoints a slice.
    pub fn new(
        kubeconfig: Option<PathBuf>,
        listen: SocketAddr,
        namespace: &str,
        identity: &str,
    ) -> ControllerConfig {
        ControllerConfig {
            kubeconfig,
            listen,
            lease: LeaseConfig {
                namespace: namespace.to_owned(),
                name: LEASE_NAME.to_owned(),
                identity: identity.to_owned(),
                duration: Duration::from_secs(15),
            },
            coalesce: Duration::from_millis(200),
            capacity: MAX_ENDPOINTS,
            watch: WatchConfig::default(),
            budgets: PolicyBudgets::default(),
        }
    }
}

/// The controller's Lease.
pub const LEASE_NAME: &str = "netpol-controller";

/// The name of the controller's threads (the pod index's is `controller-pods`).
pub const THREAD_NAME: &str = "controller";

/// How often an idle controller shows it is alive (liveness).
const HEARTBEAT: Duration = Duration::from_secs(10);

/// Who writes, as the election loop last found: `term` counts the times this replica became
/// the leader, so that the writer knows to list the slices again.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Leadership {
    leader: bool,
    term: u64,
}

/// Runs the controller until Ctrl-C or SIGTERM.
pub fn run(config: &ControllerConfig) -> anyhow::Result<()> {
    run_with(config, shutdown_signal())
}

/// Runs the controller until `shutdown` completes.
pub fn run_with(
    config: &ControllerConfig,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let mut registry = Registry::default();
    let watch_metrics = Metrics::register(&mut registry);
    let metrics = ControllerMetrics::register(&mut registry);
    let registry = Arc::new(registry);
    let health = Arc::new(Health::default());
    health.heartbeat();
    let body = |listener| async {
        let client = kube_client(config.kubeconfig.as_ref()).await?;
        tracing::info!(
            listen = %config.listen,
            identity = %config.lease.identity,
            lease = %format!("{}/{}", config.lease.namespace, config.lease.name),
            "netpol controller started"
        );
        let world = Arc::new(Mutex::new(World::default()));
        let changed = Arc::new(Notify::new());
        let (inputs, receiver) = mpsc::sync_channel(INPUT_CAPACITY);
        follow_pods(receiver, world.clone(), changed.clone(), health.clone())?;
        let sinks = Sinks::new(inputs, watch_metrics, health.clone());
        let pods = KindApi::new(client.clone(), ApiResource::erase::<Pod>(&()));
        spawn_follower(pods, SourceKind::Pod, &sinks, config.watch);
        let (leadership, follows) = watch::channel(Leadership::default());
        refusals::spawn(
            &client,
            RefusalConfig {
                budgets: config.budgets,
                watch: config.watch,
                namespace: config.lease.namespace.clone(),
                identity: config.lease.identity.clone(),
            },
            follows.clone(),
            sinks.metrics.clone(),
            health.clone(),
        )?;
        tokio::spawn(lead(
            client.clone(),
            config.lease.clone(),
            leadership,
            metrics.clone(),
            changed.clone(),
        ));
        let writer = Writer {
            world,
            publisher: Publisher::new(client, config.capacity),
            leadership: follows,
            changed,
            metrics,
            health: health.clone(),
            coalesce: config.coalesce,
        };
        tokio::spawn(writer.run());
        health::serve(listener, health, registry, shutdown)
            .await
            .context("serving HTTP")
    };
    // Named, so that a profile (or the api_cost bench) tells the controller's threads apart.
    serve_on_runtime(THREAD_NAME, config.listen, body, || {})?;
    tracing::info!("netpol controller stopped");
    Ok(())
}

/// Applies the pod watch's events to `world` on a thread of its own, waking the writer on
/// each change.
fn follow_pods(
    receiver: mpsc::Receiver<Input>,
    world: Arc<Mutex<World>>,
    changed: Arc<Notify>,
    health: Arc<Health>,
) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name(format!("{THREAD_NAME}-pods"))
        .spawn(move || {
            let _guard = FatalOnUnwind::new(&health, "the pod index");
            for input in receiver {
                let Input::Event(event) = input else {
                    continue;
                };
                let change = world
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .apply(event.event);
                if change {
                    changed.notify_one();
                }
            }
        })
        .map(|_| ())
}

/// Takes or renews the Lease every third of its duration. A replica that cannot renew stops
/// writing once two thirds of the duration have passed since its last renewal, before another
/// can take the Lease over.
async fn lead(
    client: Client,
    lease: LeaseConfig,
    leadership: watch::Sender<Leadership>,
    metrics: ControllerMetrics,
    changed: Arc<Notify>,
) {
    let mut jitter = Jitter::default();
    let mut renewed: Option<tokio::time::Instant> = None;
    let mut term = 0;
    loop {
        let leader = match elect(&client, &lease).await {
            Ok(held) => {
                renewed = held.then(tokio::time::Instant::now);
                held
            }
            Err(error) => {
                tracing::warn!(lease = %lease.name, "the controller's Lease cannot be read or written: {error}");
                renewed.is_some_and(|at| at.elapsed() < lease.duration * 2 / 3)
            }
        };
        if leader != leadership.borrow().leader {
            if leader {
                term += 1;
                tracing::info!(identity = %lease.identity, "holding the Lease: this replica publishes the slices");
            } else {
                tracing::warn!(identity = %lease.identity, "not holding the Lease (any more): no slice writes from this replica");
            }
            leadership.send_replace(Leadership { leader, term });
            metrics.leader.set(i64::from(leader));
            changed.notify_one();
        }
        tokio::time::sleep(jitter.stretch(lease.duration / 3)).await;
    }
}

/// Publishes the world as slices while this replica leads.
struct Writer {
    world: Arc<Mutex<World>>,
    publisher: Publisher,
    leadership: watch::Receiver<Leadership>,
    changed: Arc<Notify>,
    metrics: ControllerMetrics,
    health: Arc<Health>,
    coalesce: Duration,
}

impl Writer {
    async fn run(mut self) {
        let mut term_seen = 0;
        let mut failures: u32 = 0;
        let backoff = netpol_datapath::Backoff {
            initial: Duration::from_millis(500),
            max: Duration::from_secs(30),
        };
        // A round is due: a change arrived, or the last round must be retried.
        let mut retry: Option<Duration> = None;
        loop {
            let woken = tokio::time::timeout(retry.unwrap_or(HEARTBEAT), self.changed.notified())
                .await
                .is_ok();
            self.health.heartbeat();
            let synced = self.lock_world().is_synced();
            if synced {
                self.health.set_synced();
            }
            let Leadership { leader, term } = *self.leadership.borrow();
            if !(woken || retry.is_some()) || !leader || !synced {
                retry = None;
                continue;
            }
            // Let the burst land: every change of the next moments goes in this round.
            tokio::time::sleep(self.coalesce).await;
            if term != term_seen {
                self.publisher.forget();
                term_seen = term;
            }
            retry = match self.round().await {
                Ok(stale) => {
                    failures = 0;
                    // A stale write read its slice again: plan again at once.
                    (stale > 0).then_some(Duration::ZERO)
                }
                Err(error) => {
                    failures = failures.saturating_add(1);
                    self.metrics.failed_rounds.inc();
                    let delay = backoff.delay(failures);
                    tracing::warn!(
                        failures,
                        retry_in_ms = delay.as_millis(),
                        "publishing the slices failed: {error}"
                    );
                    Some(delay)
                }
            };
        }
    }

    /// Plans and writes once; returns how many writes were stale.
    async fn round(&mut self) -> Result<usize, kube::Error> {
        if let Some(adopted) = self.publisher.ensure_loaded().await? {
            tracing::info!(
                slices = adopted,
                "listed the slices published so far: adopting them"
            );
        }
        let (writes, endpoints) = {
            let mut world = self.world.lock().unwrap_or_else(|p| p.into_inner());
            let dirty = world.take_dirty();
            (
                self.publisher.plan(world.wanted(), &dirty),
                world.wanted().len(),
            )
        };
        if writes.is_empty() {
            self.metrics.set_sizes(endpoints, self.publisher.slices());
            return Ok(0);
        }
        let published = self.publisher.apply(writes).await?;
        self.metrics.count(&published);
        self.metrics.set_sizes(endpoints, self.publisher.slices());
        tracing::info!(
            created = published.created,
            updated = published.updated,
            deleted = published.deleted,
            stale = published.stale,
            endpoints,
            slices = self.publisher.slices(),
            "published"
        );
        Ok(published.stale)
    }

    fn lock_world(&self) -> std::sync::MutexGuard<'_, World> {
        self.world.lock().unwrap_or_else(|p| p.into_inner())
    }
}
