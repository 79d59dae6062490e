//! A datapath wrapper that counts and times every call, so that the metrics see exactly what the
//! programmer and the endpoint discovery do, whichever datapath sits underneath.

use std::sync::Arc;
use std::time::Instant;

use netpol_datapath::DatapathError;
use netpol_hcn::api::EndpointListing;
use netpol_hcn::schema::{EndpointPolicy, RequestType};
use netpol_hcn::{Capabilities, HcnApi, ResyncSignal};

use super::health::Health;
use super::metrics::{DatapathCall, Metrics};

pub struct Instrumented {
    inner: Arc<dyn HcnApi>,
    metrics: Metrics,
    health: Option<Arc<Health>>,
}

impl Instrumented {
    pub fn new(inner: Arc<dyn HcnApi>, metrics: Metrics) -> Self {
        Instrumented {
            inner,
            metrics,
            health: None,
        }
    }

    /// Also reports to `health` whether each call got an answer.
    pub fn with_health(mut self, health: Arc<Health>) -> Self {
        self.health = Some(health);
        self
    }

    fn timed<T>(
        &self,
        call: DatapathCall,
        f: impl FnOnce() -> Result<T, DatapathError>,
    ) -> Result<T, DatapathError> {
        let start = Instant::now();
        let result = f();
        // A vanished endpoint is an answer, not a datapath failure.
        let ok = matches!(&result, Ok(_) | Err(DatapathError::NotFound { .. }));
        self.metrics.observe_call(call, start.elapsed(), ok);
        if let Some(health) = &self.health {
            health.set_datapath_answers(ok);
        }
        result
    }
}

impl HcnApi for Instrumented {
    fn list_endpoints(&self) -> Result<EndpointListing, DatapathError> {
        self.timed(DatapathCall::ListEndpoints, || self.inner.list_endpoints())
    }

    fn read_policies(&self, endpoint: &str) -> Result<Vec<EndpointPolicy>, DatapathError> {
        self.timed(DatapathCall::ReadPolicies, || {
            self.inner.read_policies(endpoint)
        })
    }

    fn modify_policies(
        &self,
        endpoint: &str,
        request: RequestType,
        policies: Vec<EndpointPolicy>,
    ) -> Result<(), DatapathError> {
        let call = match request {
            RequestType::Add => DatapathCall::AddPolicies,
            RequestType::Remove => DatapathCall::RemovePolicies,
            RequestType::Update | RequestType::Refresh => DatapathCall::UpdatePolicies,
        };
        self.timed(call, || {
            self.inner.modify_policies(endpoint, request, policies)
        })
    }

    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    fn resync_signal(&self) -> &ResyncSignal {
        self.inner.resync_signal()
    }
}
