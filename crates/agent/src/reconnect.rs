//! A datapath that survives an HNS restart. A restarted HNS invalidates every handle of the
//! client and forgets its service-callback registration, so the client must be re-created (which
//! registers again) and every endpoint read back and reprogrammed.
//!
//! [`Reconnecting`] holds the current client and a way to connect a new one. It reconnects when
//! the current client's disconnect notification fires (the reconnect then happens on the next
//! call), or when a call fails with [`DatapathError::Disconnected`] (the call is then retried
//! once on the new client). Each reconnect raises the agent-facing [`ResyncSignal`], which stays
//! the same across clients, so that the programmer forgets what it believed programmed and the
//! reconcile loop wakes up.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use netpol_datapath::DatapathError;
use netpol_hcn::api::EndpointListing;
use netpol_hcn::schema::{EndpointPolicy, RequestType, SetPolicySetting};
use netpol_hcn::{Capabilities, HcnApi, ResyncSignal};

/// Connects a new client.
pub type Connect = Box<dyn Fn() -> Result<Arc<dyn HcnApi>, DatapathError> + Send + Sync>;

/// Shared with the current client's disconnect listener.
#[derive(Default)]
struct Notices {
    /// The current client's service went away: reconnect before the next call.
    stale: AtomicBool,
    /// A failed call found HNS gone and nobody has announced it yet (the reconnect that would
    /// have failed too): the reconnect that succeeds announces it.
    unannounced: AtomicBool,
    /// The signal the agent listens to.
    resync: ResyncSignal,
}

pub struct Reconnecting {
    connect: Connect,
    current: Mutex<Arc<dyn HcnApi>>,
    notices: Arc<Notices>,
    capabilities: Capabilities,
}

impl Reconnecting {
    /// Connects the first client.
    pub fn new(connect: Connect) -> Result<Reconnecting, DatapathError> {
        let notices = Arc::new(Notices::default());
        let first = connect()?;
        listen(&first, &notices);
        Ok(Reconnecting {
            capabilities: first.capabilities(),
            connect,
            current: Mutex::new(first),
            notices,
        })
    }

    /// The client to call: the current one, or a new one if the current one's service is gone.
    fn client(&self) -> Result<Arc<dyn HcnApi>, DatapathError> {
        let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        if self.notices.stale.swap(false, Ordering::SeqCst) {
            // The disconnect listener already raised the resync.
            *current = self.reconnect(false)?;
        }
        Ok(current.clone())
    }

    fn reconnect(&self, announce: bool) -> Result<Arc<dyn HcnApi>, DatapathError> {
        match (self.connect)() {
            Ok(client) => {
                tracing::warn!(
                    "HNS restarted: reconnected; every endpoint is read and programmed again"
                );
                listen(&client, &self.notices);
                if self.notices.unannounced.swap(false, Ordering::SeqCst) || announce {
                    self.notices.resync.raise();
                }
                Ok(client)
            }
            Err(error) => {
                // Try again on the next call, and announce the restart then.
                self.notices.stale.store(true, Ordering::SeqCst);
                if announce {
                    self.notices.unannounced.store(true, Ordering::SeqCst);
                }
                Err(error)
            }
        }
    }

    /// Runs `call` on the current client; after a disconnect, once more on a new one.
    fn call<T>(
        &self,
        call: impl Fn(&dyn HcnApi) -> Result<T, DatapathError>,
    ) -> Result<T, DatapathError> {
        let client = self.client()?;
        match call(client.as_ref()) {
            Err(error) if error.is_disconnected() => {
                let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
                // Another caller may have reconnected meanwhile.
                if Arc::ptr_eq(&current, &client) {
                    // Nobody heard of the restart (no disconnect notification): announce it.
                    *current = self.reconnect(true)?;
                }
                let client = current.clone();
                drop(current);
                call(client.as_ref())
            }
            result => result,
        }
    }
}

/// Marks the client stale when its service reports going away.
fn listen(client: &Arc<dyn HcnApi>, notices: &Arc<Notices>) {
    let notices = Arc::downgrade(notices);
    client.resync_signal().subscribe(move || {
        if let Some(notices) = notices.upgrade() {
            notices.stale.store(true, Ordering::SeqCst);
            // Wake the agent now: the reconnect happens on its next call.
            notices.resync.raise();
        }
    });
}

impl HcnApi for Reconnecting {
    fn list_endpoints(&self) -> Result<EndpointListing, DatapathError> {
        self.call(|d| d.list_endpoints())
    }

    fn read_policies(&self, endpoint: &str) -> Result<Vec<EndpointPolicy>, DatapathError> {
        self.call(|d| d.read_policies(endpoint))
    }

    fn modify_policies(
        &self,
        endpoint: &str,
        request: RequestType,
        policies: Vec<EndpointPolicy>,
    ) -> Result<(), DatapathError> {
        // A copy per call, kept for the retry on a new client after a disconnect.
        self.call(|d| d.modify_policies(endpoint, request, policies.clone()))
    }

    fn list_sets(&self) -> Result<Vec<SetPolicySetting>, DatapathError> {
        self.call(|d| d.list_sets())
    }

    fn modify_sets(
        &self,
        request: RequestType,
        sets: Vec<SetPolicySetting>,
    ) -> Result<(), DatapathError> {
        self.call(|d| d.modify_sets(request, sets.clone()))
    }

    fn network_type(&self) -> Result<Option<String>, DatapathError> {
        self.call(|d| d.network_type())
    }

    fn capabilities(&self) -> Capabilities {
        self.capabilities
    }

    fn resync_signal(&self) -> &ResyncSignal {
        &self.notices.resync
    }
}
