//! The agent's Prometheus metrics, in a registry of its own (never a global one), so that tests
//! and several agents in one process do not share counters.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use super::indexes::PolicyCounts;
use super::kind::SourceKind;
use super::rule_metrics::RuleCounters;

/// Label values as Prometheus spells them: snake case.
macro_rules! label_values {
    ($name:ident { $($variant:ident => $text:literal),+ $(,)? }) => {
        #[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
        pub enum $name {
            $($variant),+
        }

        impl $name {
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }
        }

        impl EncodeLabelValue for $name {
            fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
                std::fmt::Write::write_str(encoder, self.as_str())
            }
        }
    };
}

label_values!(Validity {
    Valid => "valid",
    Invalid => "invalid",
});

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PolicyLabels {
    pub kind: String,
    pub validity: Validity,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    pub kind: String,
}

label_values!(DatapathCall {
    ListEndpoints => "list_endpoints",
    ReadPolicies => "read_policies",
    AddPolicies => "add_policies",
    RemovePolicies => "remove_policies",
    UpdatePolicies => "update_policies",
    ListSets => "list_sets",
    ModifySets => "modify_sets",
    NftApply => "nft_apply",
    NftAddElements => "nft_add_elements",
    NftCheck => "nft_check",
    NftList => "nft_list",
});

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CallLabels {
    pub call: DatapathCall,
}

label_values!(ProgramOutcome {
    Updated => "updated",
    Failed => "failed",
    Gone => "gone",
    Refused => "refused",
});

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    pub outcome: ProgramOutcome,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

/// Every metric of one agent. Cloning shares the underlying values.
#[derive(Clone, Debug)]
pub struct Metrics {
    pub policies: Family<PolicyLabels, Gauge>,
    pub audited_policies: Family<KindLabels, Gauge>,
    pub policy_rejections: Family<KindLabels, Counter>,
    pub policies_over_budget: Family<KindLabels, Counter>,
    pub identities: Gauge,
    pub endpoints: Gauge,
    pub mapstate_entries: Gauge,
    pub endpoints_over_budget: Gauge,
    pub acl_rules: Gauge,
    pub datapath_calls: Family<CallLabels, Counter>,
    pub datapath_errors: Family<CallLabels, Counter>,
    pub datapath_call_seconds: HistogramFamily<CallLabels>,
    pub endpoint_programs: Family<OutcomeLabels, Counter>,
    pub reconcile_seconds: Histogram,
    pub change_latency_seconds: Histogram,
    pub last_sync_seconds: Gauge<f64, AtomicU64>,
    pub unreadable_files: Gauge,
    pub kind_synced: Family<KindLabels, Gauge>,
    pub watch_errors: Family<KindLabels, Counter>,
    pub relists: Family<KindLabels, Counter>,
    pub watch_stalls: Family<KindLabels, Counter>,
    /// 1 while this node's own Node object is missing (its last known addresses are kept).
    pub own_node_missing: Gauge,
    pub foreign_acls_evaluated_first: Gauge,
    /// Per-rule counters, read from the datapath at each scrape.
    pub rule_counters: RuleCounters,
    /// What `policies` is the sum of: the index's counts, and the policy objects the files
    /// refused before they reached the index (each written by its own owner).
    policy_tally: Arc<Mutex<PolicyTally>>,
}

/// The two parts of `netpol_policies`.
#[derive(Debug, Default)]
struct PolicyTally {
    index: PolicyCounts,
    refused_by_source: BTreeMap<SourceKind, usize>,
}

fn call_histogram() -> Histogram {
    // 100 µs to ~3 s: a quick HCN query up to a modify of a big list under load, or an `nft`
    // transaction of a large table.
    Histogram::new(exponential_buckets(0.0001, 2.0, 16))
}

impl Metrics {
    /// New metrics, registered in `registry` under the `netpol` prefix.
    pub fn register(registry: &mut Registry) -> Metrics {
        let metrics = Metrics {
            policies: Family::default(),
            audited_policies: Family::default(),
            policy_rejections: Family::default(),
            policies_over_budget: Family::default(),
            identities: Gauge::default(),
            endpoints: Gauge::default(),
            mapstate_entries: Gauge::default(),
            endpoints_over_budget: Gauge::default(),
            acl_rules: Gauge::default(),
            datapath_calls: Family::default(),
            datapath_errors: Family::default(),
            datapath_call_seconds: Family::new_with_constructor(call_histogram),
            endpoint_programs: Family::default(),
            reconcile_seconds: Histogram::new(exponential_buckets(0.0005, 2.0, 16)),
            // 1 ms to ~65 s: includes the debounce and any retries until the datapath took it.
            change_latency_seconds: Histogram::new(exponential_buckets(0.001, 2.0, 17)),
            last_sync_seconds: Gauge::default(),
            unreadable_files: Gauge::default(),
            kind_synced: Family::default(),
            watch_errors: Family::default(),
            relists: Family::default(),
            watch_stalls: Family::default(),
            own_node_missing: Gauge::default(),
            foreign_acls_evaluated_first: Gauge::default(),
            rule_counters: RuleCounters::default(),
            policy_tally: Arc::default(),
        };
        let r = registry.sub_registry_with_prefix("netpol");
        r.register(
            "policies",
            "Policies known, by kind and validity (invalid ones are skipped)",
            metrics.policies.clone(),
        );
        r.register(
            "audited_policies",
            "Valid policies in audit mode (netpol.io/enforcement: audit, or --audit), by kind: \
             not enforced, and what they would deny is passed without being reported",
            metrics.audited_policies.clone(),
        );
        r.register(
            "policy_rejections",
            "Policy changes rejected as invalid",
            metrics.policy_rejections.clone(),
        );
        r.register(
            "policies_over_budget",
            "Policy changes refused for a budget (--max-policy-prefixes, --max-policy-selectors, \
             --max-policy-ports, --max-namespace-prefixes); their pods keep only their isolation",
            metrics.policies_over_budget.clone(),
        );
        r.register(
            "identities",
            "Identities known to the engine: pod and node addresses and world prefixes",
            metrics.identities.clone(),
        );
        r.register(
            "endpoints",
            "Local endpoints (pods on this node with an address)",
            metrics.endpoints.clone(),
        );
        r.register(
            "mapstate_entries",
            "MapState entries over all local endpoints",
            metrics.mapstate_entries.clone(),
        );
        r.register(
            "endpoints_over_budget",
            "Local endpoints isolated because their policy needs more MapState entries than --max-policy-entries",
            metrics.endpoints_over_budget.clone(),
        );
        r.register(
            "acl_rules",
            "Rules netpol has programmed (or found in place) for this host's endpoints: HCN ACLs, or the compiled rules of the endpoints' nftables chains",
            metrics.acl_rules.clone(),
        );
        r.register(
            "datapath_calls",
            "Datapath calls, by call",
            metrics.datapath_calls.clone(),
        );
        r.register(
            "datapath_errors",
            "Failed datapath calls, by call",
            metrics.datapath_errors.clone(),
        );
        r.register(
            "datapath_call_duration_seconds",
            "Datapath call latency, by call",
            metrics.datapath_call_seconds.clone(),
        );
        r.register(
            "endpoint_programs",
            "Endpoint programming attempts that did something, by outcome",
            metrics.endpoint_programs.clone(),
        );
        r.register(
            "reconcile_duration_seconds",
            "Duration of one reconcile: engine commit, compile and programming",
            metrics.reconcile_seconds.clone(),
        );
        r.register(
            "change_latency_seconds",
            "From a change's arrival (watch event, changed file) to the datapath holding it, per reconcile that left every endpoint programmed (its oldest change)",
            metrics.change_latency_seconds.clone(),
        );
        r.register(
            "last_sync_timestamp_seconds",
            "Unix time of the last reconcile that left every endpoint programmed",
            metrics.last_sync_seconds.clone(),
        );
        r.register(
            "unreadable_files",
            "Files (embedded mode) that cannot be read or parsed; their previous objects are kept",
            metrics.unreadable_files.clone(),
        );
        r.register(
            "kind_synced",
            "1 while the kind's objects are listed and watched, 0 while its list or watch fails",
            metrics.kind_synced.clone(),
        );
        r.register(
            "watch_errors",
            "Failed lists and watches, by kind",
            metrics.watch_errors.clone(),
        );
        r.register(
            "relists",
            "Complete lists of a kind after the first (410 Gone, a failed watch, a CRD installed)",
            metrics.relists.clone(),
        );
        r.register(
            "watch_stalls",
            "Watches ended because nothing arrived, not even a bookmark, for the stall time-out (a half-open connection), by kind",
            metrics.watch_stalls.clone(),
        );
        r.register(
            "own_node_missing",
            "1 while this node's own Node object is missing (deleted, not yet created, not readable): its last known addresses keep the node-probe allowance",
            metrics.own_node_missing.clone(),
        );
        r.register(
            "hcn_foreign_acls_evaluated_first",
            "Other owners' ACLs on this node's endpoints that HCN evaluates before netpol's rules they overlap, found at start (each also logged as a warning)",
            metrics.foreign_acls_evaluated_first.clone(),
        );
        r.register_collector(Box::new(metrics.rule_counters.clone()));
        metrics
    }

    fn kind_labels(kind: SourceKind) -> KindLabels {
        KindLabels {
            kind: kind.as_str().to_owned(),
        }
    }

    pub fn set_kind_synced(&self, kind: SourceKind, synced: bool) {
        self.kind_synced
            .get_or_create(&Self::kind_labels(kind))
            .set(i64::from(synced));
    }

    pub fn count_watch_error(&self, kind: SourceKind) {
        self.watch_errors
            .get_or_create(&Self::kind_labels(kind))
            .inc();
    }

    pub fn count_watch_stall(&self, kind: SourceKind) {
        self.watch_stalls
            .get_or_create(&Self::kind_labels(kind))
            .inc();
    }

    pub fn count_relist(&self, kind: SourceKind) {
        self.relists.get_or_create(&Self::kind_labels(kind)).inc();
    }

    /// The index's counts of valid and invalid policies.
    pub fn set_policy_counts(&self, counts: &PolicyCounts) {
        let mut tally = self.policy_tally.lock().unwrap_or_else(|p| p.into_inner());
        tally.index = counts.clone();
        self.publish_policy_counts(&tally);
    }

    /// The policy objects of each kind the files refused (they never reach the index): counted
    /// as invalid with the index's.
    pub fn set_refused_by_source(&self, refused: BTreeMap<SourceKind, usize>) {
        let mut tally = self.policy_tally.lock().unwrap_or_else(|p| p.into_inner());
        tally.refused_by_source = refused;
        self.publish_policy_counts(&tally);
    }

    fn publish_policy_counts(&self, tally: &PolicyTally) {
        for kind in SourceKind::POLICIES {
            let counts = tally.index.get(&kind).copied().unwrap_or_default();
            let refused = tally.refused_by_source.get(&kind).copied().unwrap_or(0);
            for (validity, n) in [
                (Validity::Valid, counts.valid),
                (Validity::Invalid, counts.invalid + refused),
            ] {
                self.policies
                    .get_or_create(&PolicyLabels {
                        kind: kind.as_str().to_owned(),
                        validity,
                    })
                    .set(gauge_value(n));
            }
            self.audited_policies
                .get_or_create(&KindLabels {
                    kind: kind.as_str().to_owned(),
                })
                .set(gauge_value(counts.audited));
        }
    }

    pub fn count_rejection(&self, kind: SourceKind) {
        self.policy_rejections
            .get_or_create(&Self::kind_labels(kind))
            .inc();
    }

    pub fn count_over_budget(&self, kind: SourceKind) {
        self.policies_over_budget
            .get_or_create(&Self::kind_labels(kind))
            .inc();
    }

    pub fn observe_call(&self, call: DatapathCall, elapsed: Duration, ok: bool) {
        let labels = CallLabels { call };
        self.datapath_calls.get_or_create(&labels).inc();
        if !ok {
            self.datapath_errors.get_or_create(&labels).inc();
        }
        self.datapath_call_seconds
            .get_or_create(&labels)
            .observe(elapsed.as_secs_f64());
    }

    pub fn record_sync(&self, at: SystemTime) {
        let seconds = at
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs_f64();
        self.last_sync_seconds.set(seconds);
    }
}

/// Gauges hold i64; counts of things in memory always fit.
pub fn gauge_value(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}
