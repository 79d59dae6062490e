//! The controller's own metrics, beside the watch metrics it shares with the agent
//! (`netpol_kind_synced`, `netpol_watch_errors_total`, ...).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::publisher::Published;
use crate::metrics::gauge_value;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WriteLabels {
    /// create, update, delete, stale.
    pub write: &'static str,
}

#[derive(Clone, Default)]
pub struct ControllerMetrics {
    /// 1 while this replica holds the Lease (the only one writing).
    pub leader: Gauge,
    /// Slice writes by kind; `stale` counts those refused (409, 404) and read again.
    pub writes: Family<WriteLabels, Counter>,
    /// Endpoints published (pods with an identity).
    pub endpoints: Gauge,
    /// NetpolEndpointSlices held.
    pub slices: Gauge,
    /// Rounds of writes that failed (API errors other than 409 and 404), retried.
    pub failed_rounds: Counter,
}

impl ControllerMetrics {
    pub fn register(registry: &mut Registry) -> ControllerMetrics {
        let metrics = ControllerMetrics::default();
        registry.register(
            "netpol_controller_leader",
            "1 while this replica holds the controller's Lease and writes slices",
            metrics.leader.clone(),
        );
        registry.register(
            "netpol_controller_slice_writes",
            "NetpolEndpointSlice writes, by kind (stale: refused as 409/404 and read again)",
            metrics.writes.clone(),
        );
        registry.register(
            "netpol_controller_endpoints",
            "Pod endpoints the controller publishes",
            metrics.endpoints.clone(),
        );
        registry.register(
            "netpol_controller_slices",
            "NetpolEndpointSlices the controller holds",
            metrics.slices.clone(),
        );
        registry.register(
            "netpol_controller_failed_rounds",
            "Rounds of slice writes that failed and are retried",
            metrics.failed_rounds.clone(),
        );
        metrics
    }

    pub fn count(&self, published: &Published) {
        for (write, n) in [
            ("create", published.created),
            ("update", published.updated),
            ("delete", published.deleted),
            ("stale", published.stale),
        ] {
            self.writes
                .get_or_create(&WriteLabels { write })
                .inc_by(n as u64);
        }
    }

    pub fn set_sizes(&self, endpoints: usize, slices: usize) {
        self.endpoints.set(gauge_value(endpoints));
        self.slices.set(gauge_value(slices));
    }
}
