//! The HCN API as netpol uses it: a host's endpoints and their policy lists. Two
//! implementations: the simulator ([`crate::sim::HcnSim`], through [`crate::HcnDatapath`]) and, on
//! Windows, the HCN client (`crate::windows::HcnClient`).
//!
//! Every method blocks (the HCN calls are synchronous and can take a long time under load). The
//! agent calls them from its reconcile thread, never from its async runtime.

use netpol_datapath::{DatapathError, EndpointInfo};

use crate::resync::ResyncSignal;
use crate::schema::EndpointPolicy;
use crate::version::Capabilities;

/// One host's endpoints and their policy lists.
pub trait HcnApi: Send + Sync {
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
