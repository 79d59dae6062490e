//! A datapath wrapper that counts and times every call, so that the metrics see exactly what the
//! programmers and the endpoint discovery do, whichever datapath sits underneath: any HCN
//! datapath (the Windows client or the simulator), or any `nft` backend ([`InstrumentedNft`]).

use std::sync::Arc;
use std::time::Instant;

use netpol_datapath::DatapathError;
use netpol_hcn::api::EndpointListing;
use netpol_hcn::schema::{EndpointPolicy, RequestType, SetPolicySetting};
use netpol_hcn::{Capabilities, HcnApi, ResyncSignal};
use netpol_nft::{NftBackend, NftError};

use super::health::Health;
use super::metrics::{DatapathCall, Metrics};

/// `inner`, its calls counted, timed and reported to health.
pub struct Instrumented<D = Arc<dyn HcnApi>> {
    inner: D,
    metrics: Metrics,
    health: Option<Arc<Health>>,
}

/// The nftables datapath's `nft` calls, counted and timed like the HCN calls: `nft_apply` (a
/// transaction), `nft_check` (a check-only transaction, while looking for refused endpoints) and
/// `nft_list` (reading the table back). A refused script counts as an error of its call but is an
/// answer for health; only an `nft` that cannot run is not.
pub type InstrumentedNft = Instrumented<Box<dyn NftBackend + Send>>;

impl<D> Instrumented<D> {
    pub fn new(inner: D, metrics: Metrics) -> Self {
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

    /// Runs `f` as `call`; `judge` says whether its result is a success and whether it is an
    /// answer at all.
    fn timed<T, E>(
        &self,
        call: DatapathCall,
        f: impl FnOnce() -> Result<T, E>,
        judge: impl FnOnce(&Result<T, E>) -> (bool, bool),
    ) -> Result<T, E> {
        let start = Instant::now();
        let result = f();
        let (ok, answered) = judge(&result);
        self.metrics.observe_call(call, start.elapsed(), ok);
        if let Some(health) = &self.health {
            health.set_datapath_answers(answered);
        }
        result
    }
}

/// HCN: a vanished endpoint is an answer, not a datapath failure.
fn hcn<T>(result: &Result<T, DatapathError>) -> (bool, bool) {
    let ok = matches!(result, Ok(_) | Err(DatapathError::NotFound { .. }));
    (ok, ok)
}

/// nft: a refusal failed, but nft answered.
fn nft<T>(result: &Result<T, NftError>) -> (bool, bool) {
    (
        result.is_ok(),
        !matches!(result, Err(NftError::Unavailable(_))),
    )
}

impl<H: HcnApi + ?Sized> HcnApi for Instrumented<Arc<H>> {
    fn list_endpoints(&self) -> Result<EndpointListing, DatapathError> {
        self.timed(
            DatapathCall::ListEndpoints,
            || self.inner.list_endpoints(),
            hcn,
        )
    }

    fn read_policies(&self, endpoint: &str) -> Result<Vec<EndpointPolicy>, DatapathError> {
        self.timed(
            DatapathCall::ReadPolicies,
            || self.inner.read_policies(endpoint),
            hcn,
        )
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
        self.timed(
            call,
            || self.inner.modify_policies(endpoint, request, policies),
            hcn,
        )
    }

    fn list_sets(&self) -> Result<Vec<SetPolicySetting>, DatapathError> {
        self.timed(DatapathCall::ListSets, || self.inner.list_sets(), hcn)
    }

    fn modify_sets(
        &self,
        request: RequestType,
        sets: Vec<SetPolicySetting>,
    ) -> Result<(), DatapathError> {
        self.timed(
            DatapathCall::ModifySets,
            || self.inner.modify_sets(request, sets),
            hcn,
        )
    }

    fn network_type(&self) -> Result<Option<String>, DatapathError> {
        self.inner.network_type()
    }

    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    fn resync_signal(&self) -> &ResyncSignal {
        self.inner.resync_signal()
    }
}

impl<B: NftBackend + ?Sized> NftBackend for Instrumented<Box<B>> {
    fn apply(&self, script: &str) -> Result<(), NftError> {
        self.timed(DatapathCall::NftApply, || self.inner.apply(script), nft)
    }

    fn check(&self, script: &str) -> Result<(), NftError> {
        self.timed(DatapathCall::NftCheck, || self.inner.check(script), nft)
    }

    fn chains(&self) -> Result<Option<Vec<String>>, NftError> {
        self.timed(DatapathCall::NftList, || self.inner.chains(), nft)
    }

    fn sets(&self) -> Result<Option<Vec<String>>, NftError> {
        self.timed(DatapathCall::NftList, || self.inner.sets(), nft)
    }

    fn rules_json(&self) -> Result<String, NftError> {
        self.timed(DatapathCall::NftList, || self.inner.rules_json(), nft)
    }

    fn set_contents(
        &self,
        set: &netpol_nft::ruleset::AddressSet,
    ) -> Result<Option<Vec<ipnet::IpNet>>, NftError> {
        self.timed(DatapathCall::NftList, || self.inner.set_contents(set), nft)
    }

    fn adds_elements_directly(&self) -> bool {
        self.inner.adds_elements_directly()
    }

    fn add_to_new_set(
        &self,
        set: &netpol_nft::ruleset::AddressSet,
        from: usize,
        count: usize,
    ) -> Result<(), NftError> {
        self.timed(
            DatapathCall::NftAddElements,
            || self.inner.add_to_new_set(set, from, count),
            nft,
        )
    }

    fn patch_sets(&self, patches: &[netpol_nft::script::SetPatch<'_>]) -> Result<(), NftError> {
        self.timed(
            DatapathCall::NftAddElements,
            || self.inner.patch_sets(patches),
            nft,
        )
    }
}
