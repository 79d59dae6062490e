//! The agent's HTTP endpoints: `/metrics` (Prometheus text), `/healthz` (the reconcile loop is
//! alive and nothing panicked), `/readyz` (a first full sync completed, every source is
//! complete, the datapath answers and every endpoint holds its rules) and `/flows` (the
//! datapath's last logged decisions as JSON, `?since=SEQ` for those after a sequence number;
//! see [`crate::flows`]).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{RawQuery, State};
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use netpol_datapath::{ApplyReport, Outcome};
use prometheus_client::registry::Registry;

use crate::flows::FlowLog;

/// How long the reconcile loop may go without a heartbeat before the agent counts as wedged.
/// The loop beats at least every second; a slow HCN call under load can hold it much longer.
pub const LIVENESS_DEADLINE: Duration = Duration::from_secs(300);

/// How many endpoints without their rules `/readyz` names.
const UNPROGRAMMED_SHOWN: usize = 5;

/// Health as the reconcile loop reports it and the probes read it.
#[derive(Debug)]
pub struct Health {
    started: Instant,
    /// Milliseconds since `started` of the loop's last heartbeat.
    heartbeat_ms: AtomicU64,
    stopped: AtomicBool,
    /// Why the agent can no longer work (a panic), once it cannot.
    fatal: Mutex<Option<String>>,
    synced: AtomicBool,
    datapath_answers: AtomicBool,
    /// Sources that are incomplete (an unreadable file, a kind not listed), with why.
    source_problems: Mutex<BTreeMap<String, String>>,
    /// Endpoints the last reconcile could not program (failed, or waiting to retry), with why.
    unprogrammed: Mutex<BTreeMap<String, String>>,
    /// What `/readyz` says beside "ok" without failing readiness (refused policies): the node
    /// enforces them as designed (fail closed for their own pods), so one tenant's object must
    /// not mark every agent of the fleet not ready and stall its rollouts.
    notices: Mutex<BTreeMap<String, String>>,
}

impl Default for Health {
    fn default() -> Self {
        Health {
            started: Instant::now(),
            heartbeat_ms: AtomicU64::new(0),
            stopped: AtomicBool::new(false),
            fatal: Mutex::new(None),
            synced: AtomicBool::new(false),
            datapath_answers: AtomicBool::new(true),
            source_problems: Mutex::new(BTreeMap::new()),
            unprogrammed: Mutex::new(BTreeMap::new()),
            notices: Mutex::new(BTreeMap::new()),
        }
    }
}

impl Health {
    pub fn heartbeat(&self) {
        let elapsed = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.heartbeat_ms.store(elapsed, Ordering::Relaxed);
    }

    /// The reconcile loop ended (it only does on shutdown or a crash).
    pub fn stopped(&self) {
        self.stopped.store(true, Ordering::Relaxed);
    }

    /// The agent can no longer work (a thread panicked): `/healthz` fails from now on, naming
    /// `reason`, so that the kubelet restarts the agent. The first reason is kept.
    pub fn set_fatal(&self, reason: String) {
        let mut fatal = self.fatal.lock().unwrap_or_else(|p| p.into_inner());
        fatal.get_or_insert(reason);
    }

    /// A reconcile left every endpoint programmed: the agent enforces the complete policy set.
    pub fn set_synced(&self) {
        self.synced.store(true, Ordering::Relaxed);
    }

    /// Whether the last datapath call got an answer.
    pub fn set_datapath_answers(&self, answers: bool) {
        self.datapath_answers.store(answers, Ordering::Relaxed);
    }

    /// Records whether the source `name` is complete: `Some(reason)` while it is not (the agent
    /// then enforces what it could read, and says it is not ready), `None` once it is.
    pub fn set_source_problem(&self, name: &str, problem: Option<String>) {
        let mut problems = self
            .source_problems
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        match problem {
            Some(reason) => problems.insert(name.to_owned(), reason),
            None => problems.remove(name),
        };
    }

    /// Sets (or, with `None`, clears) what `/readyz` reports under `name` while ready.
    pub fn set_notice(&self, name: &str, notice: Option<String>) {
        let mut notices = self.notices.lock().unwrap_or_else(|p| p.into_inner());
        match notice {
            Some(text) => notices.insert(name.to_owned(), text),
            None => notices.remove(name),
        };
    }

    /// What `/readyz` says beside "ok", one line per notice.
    pub fn notices(&self) -> Vec<String> {
        let notices = self.notices.lock().unwrap_or_else(|p| p.into_inner());
        notices.iter().map(|(n, t)| format!("{n}: {t}")).collect()
    }

    /// Records which endpoints a reconcile's apply left without their rules: those that failed
    /// (an endpoint that cannot be read, a call that failed) and those waiting to retry.
    pub fn record_apply(&self, report: &ApplyReport) {
        let mut unprogrammed = self.unprogrammed.lock().unwrap_or_else(|p| p.into_inner());
        let mut now = BTreeMap::new();
        for (endpoint, outcome) in &report.outcomes {
            let reason = match outcome {
                Outcome::Failed { error, .. } => error.to_string(),
                Outcome::Deferred { .. } => unprogrammed
                    .get(endpoint)
                    .cloned()
                    .unwrap_or_else(|| "waiting to retry".into()),
                _ => continue,
            };
            now.insert(endpoint.clone(), reason);
        }
        *unprogrammed = now;
    }

    /// Why the agent is not alive, if it is not.
    pub fn liveness(&self) -> Result<(), String> {
        if let Some(reason) = &*self.fatal.lock().unwrap_or_else(|p| p.into_inner()) {
            return Err(reason.clone());
        }
        if self.stopped.load(Ordering::Relaxed) {
            return Err("the reconcile loop has stopped".into());
        }
        let beat = Duration::from_millis(self.heartbeat_ms.load(Ordering::Relaxed));
        let silent = self.started.elapsed().saturating_sub(beat);
        if silent > LIVENESS_DEADLINE {
            return Err(format!(
                "the reconcile loop has been stuck for {}s",
                silent.as_secs()
            ));
        }
        Ok(())
    }

    /// Why the agent is not ready, if it is not.
    pub fn readiness(&self) -> Result<(), String> {
        self.liveness()?;
        let problems = self
            .source_problems
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let incomplete = (!problems.is_empty()).then(|| {
            let reasons: Vec<String> = problems.iter().map(|(n, r)| format!("{n}: {r}")).collect();
            format!("incomplete sources: {}", reasons.join("; "))
        });
        if !self.synced.load(Ordering::Relaxed) {
            // Why it has not, when a source says.
            return Err(match incomplete {
                Some(why) => format!("the first full sync has not completed; {why}"),
                None => "the first full sync has not completed".into(),
            });
        }
        if !self.datapath_answers.load(Ordering::Relaxed) {
            return Err("the datapath does not answer".into());
        }
        if let Some(why) = incomplete {
            return Err(why);
        }
        drop(problems);
        let unprogrammed = self.unprogrammed.lock().unwrap_or_else(|p| p.into_inner());
        if !unprogrammed.is_empty() {
            let shown: Vec<String> = unprogrammed
                .iter()
                .take(UNPROGRAMMED_SHOWN)
                .map(|(e, r)| format!("{e}: {r}"))
                .collect();
            let more = unprogrammed.len().saturating_sub(UNPROGRAMMED_SHOWN);
            return Err(format!(
                "{} endpoints do not hold their rules: {}{}",
                unprogrammed.len(),
                shown.join("; "),
                if more > 0 {
                    format!("; and {more} more")
                } else {
                    String::new()
                }
            ));
        }
        Ok(())
    }
}

/// Held by a thread's body: if the thread unwinds (a panic), the agent is marked dead, naming
/// `what` panicked.
pub struct FatalOnUnwind<'a> {
    health: &'a Health,
    what: &'static str,
}

impl<'a> FatalOnUnwind<'a> {
    pub fn new(health: &'a Health, what: &'static str) -> Self {
        FatalOnUnwind { health, what }
    }
}

impl Drop for FatalOnUnwind<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.health.set_fatal(format!(
                "{} panicked: the agent no longer enforces what changes",
                self.what
            ));
        }
    }
}

/// Awaits a task; if it panicked (tokio keeps a task's panic to itself), the agent is marked
/// dead, naming `what` panicked.
pub async fn fatal_if_task_panics(
    health: Arc<Health>,
    what: String,
    task: tokio::task::JoinHandle<()>,
) {
    if let Err(error) = task.await {
        if error.is_panic() {
            health.set_fatal(format!(
                "{what} panicked: the agent no longer enforces what changes"
            ));
        }
    }
}

#[derive(Clone)]
struct AppState {
    health: Arc<Health>,
    registry: Arc<Registry>,
    flows: Arc<FlowLog>,
}

/// The router serving the endpoints, with a drop log that logs nothing.
pub fn router(health: Arc<Health>, registry: Arc<Registry>) -> Router {
    router_with_flows(health, registry, Arc::default())
}

/// The router serving the endpoints, `/flows` from `flows`.
pub fn router_with_flows(
    health: Arc<Health>,
    registry: Arc<Registry>,
    flows: Arc<FlowLog>,
) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/flows", get(flows_since))
        .with_state(AppState {
            health,
            registry,
            flows,
        })
}

/// `/flows?since=SEQ`: the records after SEQ (all kept without it), as JSON.
async fn flows_since(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> impl IntoResponse {
    let since = query
        .as_deref()
        .unwrap_or_default()
        .split('&')
        .find_map(|pair| pair.strip_prefix("since="))
        .map(str::parse::<u64>);
    let since = match since {
        None => 0,
        Some(Ok(n)) => n,
        Some(Err(_)) => {
            return (StatusCode::BAD_REQUEST, "since: not a number\n").into_response();
        }
    };
    match serde_json::to_string(&state.flows.since(since)) {
        Ok(body) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response(),
        Err(_) => (StatusCode::INTERNAL_SERVER_ERROR, "encoding flows failed").into_response(),
    }
}

async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    let mut text = String::new();
    match prometheus_client::encoding::text::encode(&mut text, &state.registry) {
        Ok(()) => (
            StatusCode::OK,
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            text,
        )
            .into_response(),
        Err(_) => (StatusCode::INTERNAL_SERVER_ERROR, "encoding metrics failed").into_response(),
    }
}

fn probe(result: Result<(), String>) -> (StatusCode, String) {
    match result {
        Ok(()) => (StatusCode::OK, "ok\n".into()),
        Err(reason) => (StatusCode::SERVICE_UNAVAILABLE, format!("{reason}\n")),
    }
}

async fn healthz(State(state): State<AppState>) -> impl IntoResponse {
    probe(state.health.liveness())
}

/// 503 with the reason when not ready; 200 with "ok" and any notices (refused policies)
/// otherwise.
async fn readyz(State(state): State<AppState>) -> impl IntoResponse {
    let (status, mut text) = probe(state.health.readiness());
    if status == StatusCode::OK {
        for notice in state.health.notices() {
            text.push_str(&notice);
            text.push('\n');
        }
    }
    (status, text)
}

/// Serves the endpoints on `listener` until `shutdown` completes.
pub async fn serve(
    listener: tokio::net::TcpListener,
    health: Arc<Health>,
    registry: Arc<Registry>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_with_flows(listener, health, registry, Arc::default(), shutdown).await
}

/// [`serve`], `/flows` from `flows`.
pub async fn serve_with_flows(
    listener: tokio::net::TcpListener,
    health: Arc<Health>,
    registry: Arc<Registry>,
    flows: Arc<FlowLog>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router_with_flows(health, registry, flows))
        .with_graceful_shutdown(shutdown)
        .await
}
