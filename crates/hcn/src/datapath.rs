//! The interface the agent programs endpoints through. Two implementations: the simulator
//! ([`crate::sim::HcnSim`]) and, on Windows, the HCN client (`crate::windows::HcnClient`).
//!
//! Every method blocks (the HCN calls are synchronous and can take a long time under load). The
//! agent must call them off its async runtime, with `tokio::task::spawn_blocking`.

use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use crate::schema::EndpointPolicy;
use crate::version::Capabilities;

/// An HCN endpoint: a pod's network interface on this host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndpointInfo {
    /// The HCN endpoint GUID.
    pub id: String,
    pub name: String,
    pub addresses: Vec<IpAddr>,
}

/// A failed datapath call.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DatapathError {
    /// The endpoint does not exist (any more). HCN endpoints never come back under the same id.
    #[error("endpoint {endpoint} not found")]
    NotFound { endpoint: String },
    /// HCN refused the call or it failed; worth retrying.
    #[error("{call} failed{}: {message}", endpoint_suffix(.endpoint))]
    Call {
        call: &'static str,
        endpoint: Option<String>,
        message: String,
    },
    /// The client's connection to HNS is gone (the service restarted): the client must be
    /// re-created, and every endpoint read again.
    #[error("{call} failed: the HNS service restarted; the client must reconnect")]
    Disconnected { call: &'static str },
    /// HCN returned something netpol cannot read.
    #[error("{call} returned unreadable JSON{}: {message}", endpoint_suffix(.endpoint))]
    BadResponse {
        call: &'static str,
        endpoint: Option<String>,
        message: String,
    },
}

fn endpoint_suffix(endpoint: &Option<String>) -> String {
    endpoint
        .as_ref()
        .map_or_else(String::new, |e| format!(" for endpoint {e}"))
}

impl DatapathError {
    pub fn is_not_found(&self) -> bool {
        matches!(self, DatapathError::NotFound { .. })
    }

    pub fn is_disconnected(&self) -> bool {
        matches!(self, DatapathError::Disconnected { .. })
    }
}

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

/// One host's endpoints and their policy lists.
pub trait Datapath: Send + Sync {
    /// Every endpoint on the host with its addresses.
    fn list_endpoints(&self) -> Result<Vec<EndpointInfo>, DatapathError>;

    /// The endpoint's complete policy list, netpol's and everyone else's.
    fn read_policies(&self, endpoint: &str) -> Result<Vec<EndpointPolicy>, DatapathError>;

    /// Replaces the endpoint's complete policy list (an HCN `Update`). Callers pass back every
    /// policy they do not own exactly as read.
    fn update_policies(
        &self,
        endpoint: &str,
        policies: Vec<EndpointPolicy>,
    ) -> Result<(), DatapathError>;

    /// What the HNS on this host supports.
    fn capabilities(&self) -> Capabilities;

    /// Raised when state may have been lost and everything must be re-read.
    fn resync_signal(&self) -> &ResyncSignal;
}
