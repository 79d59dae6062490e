//! The reconcile loop: one thread that owns the pipeline, batches bursts of events and
//! reconciles. Datapath calls block (HCN calls can take seconds), so the loop runs on a thread of
//! its own rather than on the async runtime that serves HTTP and runs the watches.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use netpol_api::ValidationError;
use netpol_indexes::Event;

use super::health::{FatalOnUnwind, Health};
use super::indexes::SourceEvent;
use super::kind::SourceKind;
use super::reconciler::{Pipeline, ReconcileReport};

/// The longest the loop sleeps, so that its heartbeat stays fresh.
const HEARTBEAT: Duration = Duration::from_secs(1);

/// What the loop is told.
#[derive(Debug)]
pub enum Input {
    Event(Box<SourceEvent>),
    /// A policy its source could not read as its kind, in place of its event.
    Rejected(SourceKind, Box<Event<ValidationError>>),
    /// Slice mode: a NetpolEndpointSlice's event (the pods of other nodes).
    Slice(Box<Event<netpol_api::crd::NetpolEndpointSlice>>),
    /// Re-read every endpoint (the datapath may have lost state).
    Resync,
    Shutdown,
    /// An input still to be made by the thread that takes it (see [`Deferred`]).
    Deferred(Deferred),
}

/// An input made by the thread that takes it rather than the one that sends it: a large
/// policy listed from the API server travels as its JSON text and is decoded where it is
/// translated. So what waits in the channel is the text, not the decoded object (several times
/// larger), and the decoding's transient memory is freed on the thread that allocated it, where
/// the allocator reuses it for the next one, instead of piling up in another thread's heap
/// (issue 33: five 1.9 MB NetworkPolicies listed in cluster mode peaked at +60 MB, at +29 MB
/// decoded this way).
pub struct Deferred {
    make: Box<dyn FnOnce() -> Option<Input> + Send>,
    /// What the sender counts as in flight until the input is made (the text's bytes).
    _held: tokio::sync::OwnedSemaphorePermit,
}

impl Deferred {
    /// An input `make` makes, holding `held` (what the sender counts as in flight) until then.
    pub fn holding(
        held: tokio::sync::OwnedSemaphorePermit,
        make: impl FnOnce() -> Option<Input> + Send + 'static,
    ) -> Deferred {
        Deferred {
            make: Box::new(make),
            _held: held,
        }
    }
}

impl std::fmt::Debug for Deferred {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Deferred")
    }
}

impl Input {
    /// The input to act on: this one, or the one a deferred input makes (`None`: nothing to
    /// do; the maker has said why).
    pub fn made(self) -> Option<Input> {
        match self {
            // What it held goes once the input is made.
            Input::Deferred(Deferred { make, _held }) => make(),
            other => Some(other),
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub struct LoopConfig {
    /// A batch closes once no event arrived for this long...
    pub debounce: Duration,
    /// ...or once its first event is this old, so that a steady stream cannot starve it.
    pub max_batch_delay: Duration,
    /// How often every endpoint is read back to catch drift.
    pub resync_period: Duration,
}

/// Runs until told to shut down or until every sender is gone.
pub fn run(pipeline: Pipeline, inputs: Receiver<Input>, health: Arc<Health>, config: LoopConfig) {
    run_with_resync(
        pipeline,
        inputs,
        Arc::new(AtomicBool::new(false)),
        health,
        config,
    );
}

/// [`run`], also resyncing whenever `resync` is set (by a thread that cannot wait for room in
/// a bounded input channel; an [`Input::Resync`] then serves only to wake the loop).
pub fn run_with_resync(
    mut pipeline: Pipeline,
    inputs: Receiver<Input>,
    resync: Arc<AtomicBool>,
    health: Arc<Health>,
    config: LoopConfig,
) {
    // A panic anywhere in the pipeline (indexes, engine, compiler, datapath) must not leave
    // `/healthz` green while nothing is enforced.
    let _guard = FatalOnUnwind::new(&health, "the reconcile loop");
    let mut next_resync = Instant::now() + config.resync_period;
    'outer: loop {
        health.heartbeat();
        let now = Instant::now();
        let wake = [
            pipeline.next_wakeup(),
            Some(next_resync),
            Some(now + HEARTBEAT),
        ]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(now);
        match inputs.recv_timeout(wake.saturating_duration_since(now)) {
            Ok(input) => {
                if !take(&mut pipeline, input) {
                    break;
                }
                // Debounce: keep taking events until the burst is over.
                let first = Instant::now();
                let mut last = first;
                loop {
                    let close = (last + config.debounce).min(first + config.max_batch_delay);
                    match inputs.recv_timeout(close.saturating_duration_since(Instant::now())) {
                        Ok(input) => {
                            if !take(&mut pipeline, input) {
                                break 'outer;
                            }
                            last = Instant::now();
                        }
                        Err(RecvTimeoutError::Timeout) => break,
                        Err(RecvTimeoutError::Disconnected) => break 'outer,
                    }
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
        report_own_node(&pipeline, &health);
        if resync.swap(false, Ordering::SeqCst) {
            pipeline.request_resync();
        }
        let now = Instant::now();
        if now >= next_resync {
            pipeline.request_resync();
            next_resync = now + config.resync_period;
        }
        let retry_due = pipeline.next_wakeup().is_some_and(|at| at <= now);
        if pipeline.has_pending_changes() || retry_due {
            if let Some(report) = pipeline.reconcile(now) {
                log(&report, now.elapsed());
                if report.discovery_error.is_none() {
                    health.record_apply(&report.apply);
                }
                if report.complete() {
                    health.set_synced();
                }
            }
        }
    }
    health.stopped();
}

/// Puts a missing own Node object (not ready) and refused policies (a notice: ready, since the
/// node enforces them as designed) in `/readyz` (the pipeline logs and counts them), or takes
/// them out once the object is back or the policies are fixed.
pub fn report_own_node(pipeline: &Pipeline, health: &Health) {
    health.set_source_problem("own Node", pipeline.own_node_problem());
    health.set_notice("refused policies", pipeline.refused_policies_problem());
}

/// Applies one input as the loop does; false means stop.
pub fn take(pipeline: &mut Pipeline, input: Input) -> bool {
    let Some(input) = input.made() else {
        return true;
    };
    match input {
        Input::Event(event) => pipeline.ingest(*event),
        Input::Rejected(kind, event) => pipeline.ingest_rejected(kind, *event),
        Input::Slice(event) => pipeline.ingest_slice(*event),
        Input::Resync => pipeline.request_resync(),
        Input::Shutdown => return false,
        Input::Deferred(_) => unreachable!("made above"),
    }
    true
}

fn log(report: &ReconcileReport, took: Duration) {
    let updated = report.apply.updated();
    let failed = report.apply.failed();
    if updated > 0 || failed > 0 || !report.changed_pods.is_empty() {
        tracing::info!(
            changed_pods = report.changed_pods.len(),
            patched = report.patched,
            compiled = report.compiled,
            updated_endpoints = updated,
            failed_endpoints = failed,
            took_ms = took.as_millis(),
            "reconciled"
        );
    }
}
