//! Per-endpoint resolution: the entries whose subject selects an endpoint become per-selector
//! rules with a precedence level and concrete ports. Ingress named ports resolve here, against
//! the endpoint's own container ports; egress named ports can only resolve per remote identity
//! and stay named until the MapState is built.

use std::collections::HashMap;
use std::sync::Arc;

use crate::entry::{AuthMode, Direction, PolicyEntry, Tier, Verdict};
use crate::identity::PodInfo;
use crate::labels::NAMESPACE_NAME_LABEL;
use crate::ports::{PortMatch, Protocol};
use crate::precedence::{isolation_key, Levels};
use crate::reference::Reason;
use crate::selector::{PeerGroup, PeerReach, PodSelector};
use crate::selector_cache::SelectorId;

/// Evaluation bands: the three tiers and, below them, the default.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Band {
    Tier(Tier),
    Default,
}

/// A port clause after resolution.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum RulePort {
    AnyProtocol,
    AllPorts(Protocol),
    Range(Protocol, u16, u16),
    /// An egress named port, resolved against each remote pod.
    Named(Option<Protocol>, String),
}

/// Rules of one endpoint that merge at equal order: (direction, selector, level, ports).
type MergeKey = (Direction, SelectorId, u32, Arc<[RulePort]>);

/// One (peer, ports) rule of one endpoint, ready for the MapState.
#[derive(Clone, Debug)]
pub struct SelectorRule {
    pub direction: Direction,
    pub peer: PeerReach,
    pub selector: SelectorId,
    pub band: Band,
    pub level: u32,
    pub verdict: Verdict,
    /// Shared by every peer of the entry: one entry of 30,000 peers and 100 port ranges is
    /// 30,000 rules and one port list, not 30,000 copies of it (192 MB for one policy).
    pub ports: Arc<[RulePort]>,
    pub auth: Option<AuthMode>,
    pub reason: Arc<Reason>,
}

/// An isolation (default deny) of one endpoint in one tier and direction.
#[derive(Clone, Debug)]
pub struct Isolation {
    pub direction: Direction,
    pub tier: Tier,
    pub level: u32,
    pub reason: Arc<Reason>,
}

/// Resolves the ports of `entry` for `endpoint`. None when the entry lists ports and none of
/// them can ever match (an ingress named port the pod does not declare).
pub fn resolve_ports(entry: &PolicyEntry, endpoint: &PodInfo) -> Option<Vec<RulePort>> {
    if entry.ports.is_empty() {
        return Some(vec![RulePort::AnyProtocol]);
    }
    let mut out = Vec::new();
    for rule in &entry.ports {
        match (&rule.port, rule.protocol) {
            (PortMatch::Any, None) => out.push(RulePort::AnyProtocol),
            (PortMatch::Any, Some(p)) => out.push(RulePort::AllPorts(p)),
            (PortMatch::Range(lo, hi), Some(p)) => out.push(RulePort::Range(p, *lo, *hi)),
            // A range without a protocol cannot be built by translators; treat it as unmatchable.
            (PortMatch::Range(..), None) => {}
            (PortMatch::Named(name), proto) => match entry.direction {
                Direction::Egress => out.push(RulePort::Named(proto, name.clone())),
                Direction::Ingress => out.extend(
                    endpoint
                        .ports
                        .iter()
                        .filter(|np| np.name == *name && proto.is_none_or(|p| p == np.protocol))
                        .map(|np| RulePort::Range(np.protocol, np.port, np.port)),
                ),
            },
        }
    }
    (!out.is_empty()).then_some(out)
}

/// Finds the entries whose subject may select a pod without testing every entry: subjects are
/// bucketed by their pinned namespace and by one of their required pod labels.
#[derive(Debug, Default)]
pub struct SubjectIndex {
    by_label: HashMap<(Option<String>, String, String), Vec<usize>>,
    by_namespace: HashMap<String, Vec<usize>>,
    unindexed: Vec<usize>,
}

impl SubjectIndex {
    pub fn new(entries: &[PolicyEntry]) -> Self {
        Self::of_subjects(entries.iter().map(|e| &e.subject))
    }

    /// The index of subjects alone, numbered in the order given.
    pub fn of_subjects<'a>(subjects: impl IntoIterator<Item = &'a PodSelector>) -> Self {
        let mut index = SubjectIndex::default();
        for (i, subject) in subjects.into_iter().enumerate() {
            index.insert(i, subject);
        }
        index
    }

    fn insert(&mut self, i: usize, subject: &PodSelector) {
        let namespace = subject
            .namespaces
            .match_labels
            .get(NAMESPACE_NAME_LABEL)
            .cloned();
        if let Some((k, v)) = subject.pods.match_labels.iter().next() {
            self.by_label
                .entry((namespace, k.clone(), v.clone()))
                .or_default()
                .push(i);
        } else if let Some(ns) = namespace {
            self.by_namespace.entry(ns).or_default().push(i);
        } else {
            self.unindexed.push(i);
        }
    }

    /// Indices of entries that may select `pod` (a superset; callers still match).
    pub fn candidates(&self, pod: &PodInfo) -> Vec<usize> {
        let mut out: Vec<usize> = self.unindexed.clone();
        if let Some(v) = self.by_namespace.get(&pod.namespace) {
            out.extend(v);
        }
        for (k, v) in pod.labels.iter() {
            for ns in [Some(pod.namespace.clone()), None] {
                if let Some(list) = self.by_label.get(&(ns, k.clone(), v.clone())) {
                    out.extend(list);
                }
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }
}

/// The resolved policy of one endpoint, before selectors are expanded into identities.
#[derive(Clone, Debug, Default)]
pub struct EndpointPolicy {
    pub rules: Vec<SelectorRule>,
    pub isolations: Vec<Isolation>,
}

impl EndpointPolicy {
    /// Resolves `entries` (already known to select `endpoint`), each with its position in the
    /// engine's entry list if it has one, with `acquire` mapping each group of an entry's peers
    /// ([`PeerGroup`]) to its selector-cache id (given the entry's position too).
    pub fn resolve<'a>(
        entries: impl IntoIterator<Item = (Option<usize>, &'a PolicyEntry)>,
        endpoint: &PodInfo,
        levels: &Levels,
        mut acquire: impl FnMut(Option<usize>, PeerGroup<'_>) -> SelectorId,
    ) -> Self {
        let mut policy = EndpointPolicy::default();
        let mut merged: HashMap<MergeKey, usize> = HashMap::new();
        for (at, entry) in entries {
            if entry.default_deny
                && !policy
                    .isolations
                    .iter()
                    .any(|i| i.direction == entry.direction && i.tier == entry.tier)
            {
                policy.isolations.push(Isolation {
                    direction: entry.direction,
                    tier: entry.tier,
                    level: levels.level(&isolation_key(entry.tier)),
                    reason: Arc::new(Reason::Isolated {
                        tier: entry.tier,
                        provenance: entry.provenance.clone(),
                    }),
                });
            }
            let Some(ports) = resolve_ports(entry, endpoint) else {
                continue;
            };
            let ports: Arc<[RulePort]> = ports.into();
            let level = levels.level(&entry.order_key());
            let reason = Arc::new(Reason::Rule {
                tier: entry.tier,
                priority: entry.priority.clone(),
                provenance: entry.provenance.clone(),
            });
            for group in PeerGroup::of_entry(&entry.peers) {
                let selector = acquire(at, group);
                // Merge at equal order (CFP-23380): one rule per (selector, ports, order), with the
                // strongest authentication of the merged entries.
                let key = (entry.direction, selector, level, ports.clone());
                if let Some(&i) = merged.get(&key) {
                    let rule: &mut SelectorRule = &mut policy.rules[i];
                    rule.auth = rule.auth.max(entry.auth);
                    continue;
                }
                merged.insert(key, policy.rules.len());
                policy.rules.push(SelectorRule {
                    direction: entry.direction,
                    peer: group.reach(),
                    selector,
                    band: Band::Tier(entry.tier),
                    level,
                    verdict: entry.verdict,
                    ports: ports.clone(),
                    auth: entry.auth,
                    reason: reason.clone(),
                });
            }
        }
        policy.flatten();
        // Kept as long as the endpoint: no growth slack (a rule per peer, 50,000 for one
        // CIDR-heavy entry).
        policy.rules.shrink_to_fit();
        policy
    }

    /// Drops rules no lookup can reach (CFP-23380 "flatten"): of the rules of one tier with the
    /// same (direction, selector, ports), only the first in order can ever match. Shadowing never
    /// crosses tiers: a lower tier's rule is exactly what a Pass above may delegate to.
    fn flatten(&mut self) {
        let mut order: Vec<usize> = (0..self.rules.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(self.rules[i].level));
        let mut seen: HashMap<(Band, Direction, SelectorId, &[RulePort]), u32> = HashMap::new();
        let mut keep = vec![true; self.rules.len()];
        for i in order {
            let rule = &self.rules[i];
            let key = (rule.band, rule.direction, rule.selector, &rule.ports[..]);
            let first_level = *seen.entry(key).or_insert(rule.level);
            keep[i] = first_level == rule.level;
        }
        let mut index = 0;
        self.rules.retain(|_| {
            index += 1;
            keep[index - 1]
        });
    }
}
