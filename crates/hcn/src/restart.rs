//! Noticing an HNS restart by polling. A restarted HNS may have dropped every endpoint policy, and
//! the Windows client opens a fresh handle for every call, so no call fails afterwards: without
//! the service-disconnect callback (which HNS may refuse, and which fires only for the instance
//! it was registered with), nothing would tell the programmer that what it believes programmed
//! is gone until the periodic resync.
//!
//! [`RestartDetector`] reads successive observations of the HNS service (running under which
//! process, or not running) and says when the service that answers now is not the one that
//! answered before. [`RestartPoller`] raises a [`ResyncSignal`] on every restart it sees, and
//! [`RestartWatch`] runs it on a thread of its own; on Windows the probe asks the service control manager for
//! the `hns` service's state and process id. Both are platform-neutral and tested with a probe
//! over the simulator.

use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::resync::ResyncSignal;

/// How often the HNS service is polled: a restart is noticed within this, not at the next full
/// resync.
pub const POLL_INTERVAL: Duration = Duration::from_secs(5);

/// The HNS service as the service control manager sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServiceState {
    /// Running in this process.
    Running { process_id: u32 },
    /// Stopped, starting or stopping.
    NotRunning,
}

/// Decides from successive observations whether HNS restarted.
#[derive(Clone, Debug, Default)]
pub struct RestartDetector {
    last: Option<ServiceState>,
}

impl RestartDetector {
    /// Takes one observation (`None`: the probe itself failed, which says nothing about HNS) and
    /// says whether the HNS running now is another instance than the one seen running before:
    /// its process changed, or it runs again after it was seen not running. The first
    /// observation only sets the baseline.
    pub fn observe(&mut self, observation: Option<ServiceState>) -> bool {
        let Some(now) = observation else {
            return false;
        };
        let restarted = match (self.last, now) {
            (
                Some(ServiceState::Running { process_id: before }),
                ServiceState::Running { process_id },
            ) => before != process_id,
            (Some(ServiceState::NotRunning), ServiceState::Running { .. }) => true,
            _ => false,
        };
        self.last = Some(now);
        restarted
    }
}

/// What a [`RestartPoller`] asks.
pub type Probe = Box<dyn FnMut() -> Option<ServiceState> + Send>;

/// One polling step: observe, and raise the signal if HNS restarted.
pub struct RestartPoller {
    probe: Probe,
    detector: RestartDetector,
    signal: Weak<ResyncSignal>,
}

impl RestartPoller {
    /// Takes the first observation now as the baseline. Holds the signal weakly.
    pub fn new(mut probe: Probe, signal: &Arc<ResyncSignal>) -> RestartPoller {
        let mut detector = RestartDetector::default();
        detector.observe(probe());
        RestartPoller {
            probe,
            detector,
            signal: Arc::downgrade(signal),
        }
    }

    /// Polls once and raises the signal if HNS restarted. False once nobody holds the signal.
    pub fn poll(&mut self) -> bool {
        let Some(signal) = self.signal.upgrade() else {
            return false;
        };
        if self.detector.observe((self.probe)()) {
            tracing::warn!("the HNS service restarted; every endpoint will be re-read");
            signal.raise();
        }
        true
    }
}

/// A [`RestartPoller`] run on a thread of its own every interval, until dropped or until nobody
/// holds the signal.
pub struct RestartWatch {
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl RestartWatch {
    pub fn spawn(mut poller: RestartPoller, interval: Duration) -> RestartWatch {
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("hns-restart-watch".into())
            .spawn(move || loop {
                match stopped.recv_timeout(interval) {
                    Err(RecvTimeoutError::Timeout) => {
                        if !poller.poll() {
                            return;
                        }
                    }
                    Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
                }
            });
        match thread {
            Ok(thread) => RestartWatch {
                stop: Some(stop),
                thread: Some(thread),
            },
            Err(error) => {
                tracing::warn!(%error, "cannot start the HNS restart watch; restarts are noticed by failing calls and the periodic resync");
                RestartWatch {
                    stop: None,
                    thread: None,
                }
            }
        }
    }

    /// Whether the watch is polling.
    pub fn is_running(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }
}

impl Drop for RestartWatch {
    fn drop(&mut self) {
        // Closing the channel ends the wait at once.
        self.stop.take();
        if let Some(thread) = self.thread.take() {
            if thread.join().is_err() {
                tracing::error!("the HNS restart watch panicked");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    fn running(process_id: u32) -> Option<ServiceState> {
        Some(ServiceState::Running { process_id })
    }

    #[test]
    fn a_new_process_or_a_return_after_a_stop_is_a_restart() {
        let mut d = RestartDetector::default();
        assert!(
            !d.observe(running(100)),
            "the first observation is the baseline"
        );
        assert!(!d.observe(running(100)));
        assert!(d.observe(running(200)), "another process");
        assert!(!d.observe(running(200)));
        assert!(!d.observe(Some(ServiceState::NotRunning)));
        assert!(!d.observe(Some(ServiceState::NotRunning)));
        assert!(
            d.observe(running(200)),
            "running again, even in the same process"
        );
    }

    #[test]
    fn a_failed_probe_says_nothing() {
        let mut d = RestartDetector::default();
        assert!(!d.observe(None));
        assert!(!d.observe(running(7)), "still the baseline");
        assert!(!d.observe(None));
        assert!(!d.observe(running(7)));
        assert!(d.observe(running(8)));
    }

    #[test]
    fn a_not_running_baseline_counts_its_start_as_a_restart() {
        // The agent started while HNS was down: whatever it later finds must be read afresh.
        let mut d = RestartDetector::default();
        assert!(!d.observe(Some(ServiceState::NotRunning)));
        assert!(d.observe(running(1)));
    }

    #[test]
    fn the_poller_raises_the_signal_once_per_restart_and_stops_with_it() {
        let state = Arc::new(Mutex::new(running(1)));
        let probe_state = state.clone();
        let signal = Arc::new(ResyncSignal::default());
        let mut poller =
            RestartPoller::new(Box::new(move || *probe_state.lock().unwrap()), &signal);
        assert!(poller.poll());
        assert_eq!(signal.generation(), 0);
        *state.lock().unwrap() = running(2);
        assert!(poller.poll());
        assert!(poller.poll());
        assert_eq!(signal.generation(), 1);
        drop(signal);
        assert!(!poller.poll(), "nobody listens any more");
    }

    #[test]
    fn a_watch_stops_when_dropped() {
        let signal = Arc::new(ResyncSignal::default());
        let poller = RestartPoller::new(Box::new(|| running(1)), &signal);
        let watch = RestartWatch::spawn(poller, Duration::from_secs(3600));
        assert!(watch.is_running());
        // Drop must return promptly although the interval is an hour: it closes the channel.
        drop(watch);
        assert_eq!(signal.generation(), 0);
    }
}
