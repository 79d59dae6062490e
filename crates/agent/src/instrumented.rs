//! Datapath wrappers that count and time every call, so that the metrics see exactly what the
//! programmers and the endpoint discovery do: [`Instrumented`] around any HCN datapath (the
//! Windows client or the simulator), [`InstrumentedNft`] around any `nft` backend.

use std::sync::Arc;
use std::time::Instant;

use netpol_datapath::{DatapathError, EndpointInfo};
use netpol_hcn::schema::EndpointPolicy;
use netpol_hcn::{Capabilities, HcnApi, ResyncSignal};
use netpol_nft::{NftBackend, NftError};

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
    fn list_endpoints(&self) -> Result<Vec<EndpointInfo>, DatapathError> {
        self.timed(DatapathCall::ListEndpoints, || self.inner.list_endpoints())
    }

    fn read_policies(&self, endpoint: &str) -> Result<Vec<EndpointPolicy>, DatapathError> {
        self.timed(DatapathCall::ReadPolicies, || {
            self.inner.read_policies(endpoint)
        })
    }

    fn update_policies(
        &self,
        endpoint: &str,
        policies: Vec<EndpointPolicy>,
    ) -> Result<(), DatapathError> {
        self.timed(DatapathCall::UpdatePolicies, || {
            self.inner.update_policies(endpoint, policies)
        })
    }

    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    fn resync_signal(&self) -> &ResyncSignal {
        self.inner.resync_signal()
    }
}

/// The nftables datapath's `nft` calls, counted and timed like the HCN calls: `nft_apply` (a
/// transaction), `nft_check` (a check-only transaction, while looking for refused endpoints) and
/// `nft_list` (reading the table back). A refused script counts as an error of its call but is an
/// answer for health; only an `nft` that cannot run is not.
pub struct InstrumentedNft {
    inner: Box<dyn NftBackend + Send>,
    metrics: Metrics,
    health: Option<Arc<Health>>,
}

impl InstrumentedNft {
    pub fn new(inner: Box<dyn NftBackend + Send>, metrics: Metrics) -> Self {
        InstrumentedNft {
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
        f: impl FnOnce() -> Result<T, NftError>,
    ) -> Result<T, NftError> {
        let start = Instant::now();
        let result = f();
        self.metrics
            .observe_call(call, start.elapsed(), result.is_ok());
        if let Some(health) = &self.health {
            health.set_datapath_answers(!matches!(result, Err(NftError::Unavailable(_))));
        }
        result
    }
}

impl NftBackend for InstrumentedNft {
    fn apply(&self, script: &str) -> Result<(), NftError> {
        self.timed(DatapathCall::NftApply, || self.inner.apply(script))
    }

    fn check(&self, script: &str) -> Result<(), NftError> {
        self.timed(DatapathCall::NftCheck, || self.inner.check(script))
    }

    fn chains(&self) -> Result<Option<Vec<String>>, NftError> {
        self.timed(DatapathCall::NftList, || self.inner.chains())
    }
}
