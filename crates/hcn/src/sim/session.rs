//! A client's session with the simulator: its handles and notification registration, which an
//! HNS restart invalidates.

use std::sync::Arc;

use super::HcnSim;
use crate::client::{HcnCalls, RawError};
use crate::resync::ResyncSignal;
use crate::version::Capabilities;

/// A client's connection to the simulated HNS. [`SimSession::connect`] holds handles of the
/// service instance that was running when it connected and a service callback registered then:
/// after a restart every call fails with [`RawError::Disconnected`] and the callback never fires
/// again, so the client must connect anew. [`SimSession::per_call`] is the Windows client as it
/// is: a handle opened per call (so no call fails after a restart) and no callback, so that only
/// a [`crate::restart::RestartWatch`] notices the restart.
#[derive(Debug)]
pub struct SimSession {
    sim: Arc<crate::HcnDatapath<HcnSim>>,
    /// The service instance its handles belong to; None when it opens one per call.
    service: Option<u64>,
    disconnect: Arc<ResyncSignal>,
}

impl SimSession {
    /// Connects to the running service instance and registers for its disconnect callback.
    pub fn connect(sim: &Arc<crate::HcnDatapath<HcnSim>>) -> SimSession {
        let disconnect = Arc::new(ResyncSignal::default());
        let service = {
            let mut state = sim.calls().lock();
            if !state.refuse_registrations {
                state.registrations.push(Arc::downgrade(&disconnect));
            }
            state.service
        };
        SimSession {
            sim: sim.clone(),
            service: Some(service),
            disconnect,
        }
    }

    /// A session that opens a handle per call and registers no callback.
    pub fn per_call(sim: &Arc<crate::HcnDatapath<HcnSim>>) -> SimSession {
        SimSession {
            sim: sim.clone(),
            service: None,
            disconnect: Arc::new(ResyncSignal::default()),
        }
    }

    /// The signal the session raises on a restart it hears of, shared for a restart watch.
    pub fn signal(&self) -> &Arc<ResyncSignal> {
        &self.disconnect
    }

    fn live(&self) -> Result<&HcnSim, RawError> {
        let sim = self.sim.calls();
        match self.service {
            Some(service) if service != sim.service_instance() => Err(RawError::Disconnected),
            _ => Ok(sim),
        }
    }
}

impl HcnCalls for SimSession {
    fn enumerate_endpoints(&self, query: &str) -> Result<String, RawError> {
        self.live()?.enumerate_endpoints(query)
    }

    fn query_endpoint(&self, endpoint: &str, query: &str) -> Result<String, RawError> {
        self.live()?.query_endpoint(endpoint, query)
    }

    fn modify_endpoint(&self, endpoint: &str, request: &str) -> Result<(), RawError> {
        self.live()?.modify_endpoint(endpoint, request)
    }

    fn query_network(&self, network: Option<&str>, query: &str) -> Result<String, RawError> {
        self.live()?.query_network(network, query)
    }

    fn modify_network(&self, network: Option<&str>, request: &str) -> Result<(), RawError> {
        self.live()?.modify_network(network, request)
    }

    fn capabilities(&self) -> Capabilities {
        self.sim.calls().capabilities
    }

    fn resync_signal(&self) -> &ResyncSignal {
        &self.disconnect
    }
}
