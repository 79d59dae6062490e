//! The HCN API as netpol uses it: a host's endpoints and their policy lists. Two
//! implementations: the simulator ([`crate::sim::HcnSim`], through [`crate::HcnDatapath`]) and, on
//! Windows, the HCN client (`crate::windows::HcnClient`).
//!
//! Every method blocks (the HCN calls are synchronous and can take a long time under load). The
//! agent calls them from its reconcile thread, never from its async runtime.

use netpol_datapath::{DatapathError, EndpointInfo};

use crate::resync::ResyncSignal;
use crate::schema::{EndpointPolicy, RequestType, SetPolicySetting};
use crate::version::Capabilities;

/// The host's endpoints: those that could be read, and those that could not (each with why).
/// One unreadable endpoint must not hide the others: they are programmed, it is reported.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EndpointListing {
    pub endpoints: Vec<EndpointInfo>,
    /// Endpoints enumerated but whose properties could not be read or parsed, by id.
    pub unreadable: Vec<(String, DatapathError)>,
}

/// One host's endpoints and their policy lists.
pub trait HcnApi: Send + Sync {
    /// Every endpoint on the host with its addresses. Fails as a whole only when the endpoints
    /// cannot be enumerated (or HNS is gone); an endpoint that cannot be read is listed as
    /// unreadable.
    fn list_endpoints(&self) -> Result<EndpointListing, DatapathError>;

    /// The endpoint's complete policy list, netpol's and everyone else's.
    fn read_policies(&self, endpoint: &str) -> Result<Vec<EndpointPolicy>, DatapathError>;

    /// Sends one policy request to the endpoint: `Add` the given policies, `Remove` them (each
    /// exactly as read back), or `Update` (replace the whole list: netpol's programmer sends it
    /// with the list just read back, see [`crate::writes`]).
    fn modify_policies(
        &self,
        endpoint: &str,
        request: RequestType,
        policies: Vec<EndpointPolicy>,
    ) -> Result<(), DatapathError>;

    /// The IP sets (`SetPolicy`) on the endpoints' network, netpol's and everyone else's.
    fn list_sets(&self) -> Result<Vec<SetPolicySetting>, DatapathError> {
        Err(unsupported("HcnQueryNetworkProperties"))
    }

    /// Sends one set request to the network: `Add` creates the sets, `Update` replaces their
    /// values, `Remove` deletes them.
    fn modify_sets(
        &self,
        request: RequestType,
        sets: Vec<SetPolicySetting>,
    ) -> Result<(), DatapathError> {
        let _ = (request, sets);
        Err(unsupported("HcnModifyNetwork"))
    }

    /// The `Type` of the network the endpoints are on (`L2Bridge`, `Overlay`, ...), if known:
    /// whether endpoints need host-scope rules ([`crate::host_rules`]).
    fn network_type(&self) -> Result<Option<String>, DatapathError> {
        Ok(None)
    }

    /// What the HNS on this host supports.
    fn capabilities(&self) -> Capabilities;

    /// Raised when state may have been lost and everything must be re-read.
    fn resync_signal(&self) -> &ResyncSignal;
}

/// The error of a network call an implementation does not make.
pub fn unsupported(call: &'static str) -> DatapathError {
    DatapathError::Call {
        call,
        endpoint: None,
        message: "this HCN client makes no network calls (IP sets unsupported)".into(),
    }
}
