//! Per-rule counters, read back from the kernel and summed by policy rule.
//!
//! Every endpoint chain rule carries a `counter` ([`crate::script::render_rule`]). A listing of
//! the table (`nft -j -t list table inet netpol`, without set elements) gives each rule's
//! packets and bytes by chain and position; the [`RuleBook`] the enforcer keeps for the table
//! it programmed says which policy rule each position is ([`RuleLabels`]), and
//! [`CounterTotals`] sums them by labels: the series are bounded by the policies' rules, never
//! by endpoints or flows.
//!
//! A chain whose rules change is replaced by a new chain (names are content hashes), whose
//! counters start at zero: [`CounterTotals`] keeps what a chain had counted when it was last
//! read, so a total never goes back. What a replaced chain counted after the last read before
//! its replacement is not seen; the agent reads at every scrape.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::{Arc, RwLock};

use netpol_engine::reference::Reason;
use netpol_engine::Direction;

use crate::labels::RuleLabels;
use crate::ruleset::{ChainRule, ChainVerdict};

/// What the drop log maps a prefix id back to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoggedRule {
    pub labels: RuleLabels,
    /// The reason of the rule, in `explain`'s words when displayed.
    pub reason: Arc<Reason>,
}

/// Which policy rule each rule of each programmed endpoint chain is, the log ids of the drop
/// rules, and the local endpoints' addresses.
#[derive(Clone, Debug, Default)]
pub struct RuleBook {
    chains: HashMap<String, Arc<[RuleLabels]>>,
    logs: HashMap<String, LoggedRule>,
    endpoints: HashMap<IpAddr, String>,
}

impl RuleBook {
    /// The book of `chains` (endpoint key, direction, chain name, rules), as
    /// [`crate::script::RenderMemo::chains`] gives them, and of the endpoints' `addresses`.
    pub fn build<'a>(
        chains: impl Iterator<Item = (&'a str, Direction, &'a str, &'a [ChainRule])>,
        addresses: impl Iterator<Item = (IpAddr, &'a str)>,
    ) -> RuleBook {
        let mut book = RuleBook::default();
        // Replicas share one rule list: labelled once.
        let mut lists: HashMap<(usize, Direction), Arc<[RuleLabels]>> = HashMap::new();
        for (_, direction, name, rules) in chains {
            let labels = lists
                .entry((rules.as_ptr() as usize, direction))
                .or_insert_with(|| {
                    rules
                        .iter()
                        .map(|r| RuleLabels::of(&r.reason, direction, r.verdict))
                        .collect()
                })
                .clone();
            for (rule, label) in rules.iter().zip(labels.iter()) {
                let logged = matches!(rule.verdict, ChainVerdict::Drop | ChainVerdict::WouldDeny);
                if logged && !book.logs.contains_key(&label.id()) {
                    book.logs.insert(
                        label.id(),
                        LoggedRule {
                            labels: label.clone(),
                            reason: explained(&rule.reason),
                        },
                    );
                }
            }
            book.chains.insert(name.to_string(), labels);
        }
        book.endpoints = addresses.map(|(a, k)| (a, k.to_string())).collect();
        book
    }

    /// The labels of rule `index` (from 0) of chain `chain`.
    pub fn rule(&self, chain: &str, index: usize) -> Option<&RuleLabels> {
        self.chains.get(chain)?.get(index)
    }

    /// The drop rule a log prefix's id names.
    pub fn logged(&self, id: &str) -> Option<&LoggedRule> {
        self.logs.get(id)
    }

    /// The local endpoint (pod key) holding `address`.
    pub fn endpoint_of(&self, address: IpAddr) -> Option<&str> {
        self.endpoints.get(&address).map(String::as_str)
    }
}

/// The book of the table programmed last, shared by the enforcer (which replaces it after each
/// transaction that changed chains) and its readers (the agent's metrics and drop log).
#[derive(Clone, Debug, Default)]
pub struct SharedRuleBook(Arc<RwLock<Arc<RuleBook>>>);

impl SharedRuleBook {
    /// The book as it is now.
    pub fn get(&self) -> Arc<RuleBook> {
        self.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn set(&self, book: RuleBook) {
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(book);
    }
}

/// `reason` as `explain` words it: an isolating entry's provenance names the policy, not the
/// rule the entry came with (isolation is the policy's, whichever of its rules carried it).
fn explained(reason: &Arc<Reason>) -> Arc<Reason> {
    match &**reason {
        Reason::Isolated { tier, provenance } if !provenance.rule.is_empty() => {
            let mut provenance = provenance.clone();
            provenance.rule.clear();
            Arc::new(Reason::Isolated {
                tier: *tier,
                provenance,
            })
        }
        _ => reason.clone(),
    }
}

/// One rule's counter as the kernel lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleCount {
    pub chain: String,
    /// The rule's position in its chain, from 0.
    pub index: usize,
    pub packets: u64,
    pub bytes: u64,
}

/// The counters of a JSON listing of netpol's table (`nft -j list table inet netpol`): every
/// rule holding a counter, by chain and position.
pub fn parse_counters(listing: &str) -> Result<Vec<RuleCount>, String> {
    let value: serde_json::Value =
        serde_json::from_str(listing).map_err(|e| format!("reading nft's JSON listing: {e}"))?;
    let items = value
        .get("nftables")
        .and_then(|v| v.as_array())
        .ok_or("nft's JSON listing has no `nftables` array")?;
    let mut positions: HashMap<&str, usize> = HashMap::new();
    let mut out = Vec::new();
    for rule in items.iter().filter_map(|i| i.get("rule")) {
        // The listing is the whole ruleset: other tables' chains may have any name.
        let field = |name: &str| rule.get(name).and_then(|v| v.as_str());
        if field("family") != Some("inet") || field("table") != Some("netpol") {
            continue;
        }
        let Some(chain) = field("chain") else {
            continue;
        };
        let position = positions.entry(chain).or_insert(0);
        let index = *position;
        *position += 1;
        let counter = rule
            .get("expr")
            .and_then(|e| e.as_array())
            .and_then(|exprs| exprs.iter().find_map(|e| e.get("counter")));
        if let Some(counter) = counter {
            let number = |field: &str| counter.get(field).and_then(|v| v.as_u64()).unwrap_or(0);
            out.push(RuleCount {
                chain: chain.to_string(),
                index,
                packets: number("packets"),
                bytes: number("bytes"),
            });
        }
    }
    Ok(out)
}

/// Packets and bytes.
pub type Totals = (u64, u64);

/// Totals by policy rule that never go back when chains are replaced.
#[derive(Debug, Default)]
pub struct CounterTotals {
    /// What each rule counted when last read, by (chain, position).
    last: HashMap<(String, usize), (RuleLabels, Totals)>,
    /// What rules of chains since gone (or reset) had counted, by labels.
    retired: BTreeMap<RuleLabels, Totals>,
}

impl CounterTotals {
    /// Takes a reading (`counts`, labelled through `book`) and returns the totals by labels.
    /// A rule the book does not know (a chain of another table than the one programmed last)
    /// is left out.
    pub fn update(
        &mut self,
        counts: &[RuleCount],
        book: &RuleBook,
    ) -> BTreeMap<RuleLabels, Totals> {
        let mut now: HashMap<(String, usize), (RuleLabels, Totals)> = HashMap::new();
        for count in counts {
            let key = (count.chain.clone(), count.index);
            let labels = match book.rule(&count.chain, count.index) {
                Some(labels) => labels.clone(),
                // Known from an earlier reading: the chain is on its way out.
                None => match self.last.get(&key) {
                    Some((labels, _)) => labels.clone(),
                    None => continue,
                },
            };
            if let Some((old_labels, old)) = self.last.get(&key) {
                if count.packets < old.0 || count.bytes < old.1 {
                    // The same name counted again from zero: the chain was made anew.
                    add(&mut self.retired, old_labels.clone(), *old);
                }
            }
            now.insert(key, (labels, (count.packets, count.bytes)));
        }
        for (key, (labels, totals)) in self.last.drain() {
            if !now.contains_key(&key) {
                add(&mut self.retired, labels, totals);
            }
        }
        self.last = now;
        let mut totals = self.retired.clone();
        for (labels, counted) in self.last.values() {
            add(&mut totals, labels.clone(), *counted);
        }
        totals
    }
}

fn add(into: &mut BTreeMap<RuleLabels, Totals>, labels: RuleLabels, (packets, bytes): Totals) {
    let total = into.entry(labels).or_default();
    total.0 += packets;
    total.1 += bytes;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ruleset::ChainVerdict;
    use netpol_engine::entry::Provenance;

    fn rule(name: &str, verdict: ChainVerdict) -> ChainRule {
        ChainRule {
            remote: None,
            protocol: None,
            dports: Vec::new(),
            verdict,
            reason: Arc::new(Reason::Rule {
                tier: netpol_engine::Tier::Normal,
                priority: Default::default(),
                provenance: Provenance {
                    kind: "NetworkPolicy".into(),
                    namespace: Some("shop".into()),
                    name: name.into(),
                    rule: "ingress[0]".into(),
                },
            }),
        }
    }

    fn listing(rules: &[(&str, u64)]) -> String {
        let items: Vec<String> = rules
            .iter()
            .map(|(chain, packets)| {
                format!(
                    r#"{{"rule": {{"family": "inet", "table": "netpol", "chain": "{chain}", "handle": 4, "expr": [{{"counter": {{"packets": {packets}, "bytes": {}}}}}, {{"return": null}}]}}}}"#,
                    packets * 100
                )
            })
            .collect();
        format!(
            r#"{{"nftables": [{{"metainfo": {{"version": "1.0.6"}}}}, {{"chain": {{"name": "ep_a"}}}}, {}]}}"#,
            items.join(", ")
        )
    }

    #[test]
    fn counters_sum_by_policy_rule_across_endpoints_and_survive_a_replaced_chain() {
        let rules: Arc<[ChainRule]> = vec![
            rule("web", ChainVerdict::Return),
            rule("deny-all", ChainVerdict::Drop),
        ]
        .into();
        let chains = [
            ("shop/a", Direction::Ingress, "ep_a", &rules[..]),
            ("shop/b", Direction::Ingress, "ep_b", &rules[..]),
        ];
        let book = RuleBook::build(chains.into_iter(), std::iter::empty());
        // Another table's rules in the listing (a chain of the same name) are not netpol's.
        let other = r#"{"rule": {"family": "ip", "table": "nat", "chain": "ep_a", "handle": 9, "expr": [{"counter": {"packets": 1000, "bytes": 1}}]}}"#;
        let with_other = listing(&[("ep_a", 3), ("ep_a", 1), ("ep_b", 4), ("ep_b", 2)]).replacen(
            "[{\"metainfo\"",
            &format!("[{other}, {{\"metainfo\""),
            1,
        );
        assert!(with_other.contains("\"nat\""));
        let counts = parse_counters(&with_other).unwrap();
        assert_eq!(counts.len(), 4);
        assert_eq!(counts[1].index, 1);
        let mut totals = CounterTotals::default();
        let read = totals.update(&counts, &book);
        let web = RuleLabels::of(&rules[0].reason, Direction::Ingress, ChainVerdict::Return);
        let deny = RuleLabels::of(&rules[1].reason, Direction::Ingress, ChainVerdict::Drop);
        assert_eq!(read[&web], (7, 700));
        assert_eq!(read[&deny], (3, 300));
        assert_eq!(book.logged(&deny.id()).unwrap().labels, deny);
        // ep_b is replaced by ep_c, which starts from zero: the totals keep ep_b's.
        let chains = [
            ("shop/a", Direction::Ingress, "ep_a", &rules[..]),
            ("shop/b", Direction::Ingress, "ep_c", &rules[..]),
        ];
        let book = RuleBook::build(chains.into_iter(), std::iter::empty());
        let counts = parse_counters(&listing(&[
            ("ep_a", 5),
            ("ep_a", 1),
            ("ep_c", 1),
            ("ep_c", 0),
        ]))
        .unwrap();
        let read = totals.update(&counts, &book);
        assert_eq!(read[&web], (10, 1000));
        assert_eq!(read[&deny], (3, 300));
    }
}
