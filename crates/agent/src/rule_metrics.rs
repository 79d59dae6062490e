//! Per-rule packet and byte counters on `/metrics`, read from the datapath at each scrape
//! (nftables: one listing of the table without set elements), summed by policy rule
//! (`netpol_nft::counters`): `netpol_rule_packets_total` and `netpol_rule_bytes_total`, labelled
//! `kind`, `namespace`, `policy`, `rule`, `direction`, `verdict`. A datapath without counters
//! (HCN) exports no series.

use std::sync::{Arc, Mutex};

use netpol_nft::counters::{parse_counters, CounterTotals, SharedRuleBook};
use netpol_nft::labels::RuleLabels;
use netpol_nft::NftBackend;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::MetricType;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RuleLabelSet {
    kind: String,
    namespace: String,
    policy: String,
    rule: String,
    direction: String,
    verdict: String,
}

impl From<&RuleLabels> for RuleLabelSet {
    fn from(labels: &RuleLabels) -> Self {
        RuleLabelSet {
            kind: labels.kind.clone(),
            namespace: labels.namespace.clone(),
            policy: labels.policy.clone(),
            rule: labels.rule.clone(),
            direction: labels.direction.to_owned(),
            verdict: labels.verdict.to_owned(),
        }
    }
}

/// Where the counters come from, once the datapath is built.
struct Source {
    backend: Box<dyn NftBackend + Send>,
    book: SharedRuleBook,
    totals: CounterTotals,
}

/// The collector, registered before the datapath exists; [`RuleCounters::install`] gives it
/// its source. Clones share the source.
#[derive(Clone, Default)]
pub struct RuleCounters {
    source: Arc<Mutex<Option<Source>>>,
}

impl std::fmt::Debug for RuleCounters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RuleCounters")
    }
}

impl RuleCounters {
    /// From now on, scrapes read the counters of `backend`'s table, named through `book`.
    pub fn install(&self, backend: Box<dyn NftBackend + Send>, book: SharedRuleBook) {
        *self.source.lock().unwrap_or_else(|p| p.into_inner()) = Some(Source {
            backend,
            book,
            totals: CounterTotals::default(),
        });
    }

    /// The totals by labels now; empty without a source. A failed reading is logged and
    /// exports nothing this scrape (the totals are kept for the next).
    pub fn read(&self) -> Vec<(RuleLabels, (u64, u64))> {
        let mut source = self.source.lock().unwrap_or_else(|p| p.into_inner());
        let Some(source) = source.as_mut() else {
            return Vec::new();
        };
        let counts = source
            .backend
            .rules_json()
            .map_err(|e| e.to_string())
            .and_then(|listing| parse_counters(&listing));
        match counts {
            Ok(counts) => source
                .totals
                .update(&counts, &source.book.get())
                .into_iter()
                .collect(),
            Err(error) => {
                tracing::warn!(%error, "reading the rules' counters failed");
                Vec::new()
            }
        }
    }
}

impl Collector for RuleCounters {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let totals = self.read();
        if totals.is_empty() {
            return Ok(());
        }
        for (name, help, bytes) in [
            (
                "rule_packets",
                "Packets decided by each policy rule on this node (summed over its endpoints; nftables only), by direction and verdict",
                false,
            ),
            (
                "rule_bytes",
                "Bytes of the packets decided by each policy rule on this node (summed over its endpoints; nftables only)",
                true,
            ),
        ] {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
            for (labels, (packets, octets)) in &totals {
                let value = if bytes { *octets } else { *packets };
                let labels = RuleLabelSet::from(labels);
                let metric = family.encode_family(&labels)?;
                ConstCounter::new(value).encode(metric)?;
            }
        }
        Ok(())
    }
}
