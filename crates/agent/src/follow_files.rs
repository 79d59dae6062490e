//! The embedded mode's polling loop: scans the files, sends what changed to the reconcile loop,
//! and keeps readiness and metrics on what could not be read.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::driver::Input;
use crate::health::Health;
use crate::metrics::Metrics;
use crate::sources::files::report::{publish_state, report_file_problems};
use crate::sources::files::FileSource;

/// The polling loop and what it reports to.
pub struct FollowFiles {
    /// Bounded: the poller waits while the reconcile loop has not taken what it sent.
    pub inputs: SyncSender<Input>,
    pub metrics: Metrics,
    pub health: Arc<Health>,
    pub poll: Duration,
    /// How often every file is read again and every kind relisted.
    pub relist: Duration,
    /// How long the first list waits for unreadable or still-changing files.
    pub initial_wait: Duration,
}

impl FollowFiles {
    /// Polls the files, sending what changed, until `stop`.
    pub fn run(self, mut source: FileSource, stop: &AtomicBool) {
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
            // Events go to the reconcile loop as the files are parsed.
            let mut stopped = false;
            let mut send = |event| {
                if !stopped && self.inputs.send(Input::Event(Box::new(event))).is_err() {
                    stopped = true;
                }
            };
            let scan = if source.is_listed() && Instant::now() >= next_relist {
                next_relist = Instant::now() + self.relist;
                source.relist_into(&mut send)
            } else {
                source.scan_into(&mut send)
            };
            if stopped {
                return;
            }
            match scan {
                Ok(scan) => {
                    report_file_problems(&scan.problems, &self.metrics);
                    publish_state(&source, &self.metrics, &self.health);
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
