//! The signal that HNS may have lost netpol's rules behind its back.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Bumped whenever the datapath may have lost state behind netpol's back (HNS restarted or the
/// connection to it dropped). The programmer compares generations and re-reads every endpoint;
/// listeners (say, a closure that wakes the agent's reconcile loop) are called on each bump.
#[derive(Default)]
pub struct ResyncSignal {
    generation: AtomicU64,
    listeners: Mutex<Vec<Box<dyn Fn() + Send + Sync>>>,
}

impl ResyncSignal {
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// Records a loss of state and notifies the listeners.
    pub fn raise(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        let listeners = self.listeners.lock().unwrap_or_else(|p| p.into_inner());
        for listener in listeners.iter() {
            listener();
        }
    }

    /// Calls `listener` on every future [`ResyncSignal::raise`], possibly from an HCN thread.
    pub fn subscribe(&self, listener: impl Fn() + Send + Sync + 'static) {
        self.listeners
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Box::new(listener));
    }
}

impl std::fmt::Debug for ResyncSignal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResyncSignal")
            .field("generation", &self.generation())
            .finish_non_exhaustive()
    }
}
