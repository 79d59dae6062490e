//! A connectivity matrix: the flow between every ordered pair of parties (pods, and for the
//! readable view nodes and the regions outside the cluster), decided by any decider, for one
//! protocol and port. Pods are decided per [`Classes`] pair, as the agent decides per security
//! identity, and expanded to pods only when asked for a pod's cell: memory and time grow with
//! classes squared plus pods times other parties, not with pods squared.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::rc::Rc;

use netpol_engine::flow::{decide_flow, DirectionOracle, FlowDecision, FlowDecisionRef};
use netpol_engine::{IdentityId, Protocol};

use super::cell_codes::Grid;
pub use super::classes::Classes;
use super::directions::{pod_pair, with_address, Decisions, Interner, Signatures, Views};
pub use super::parties::{node_parties, outside_parties, pod_parties, Party};
use crate::loader::{ClusterModel, Endpoint, PodRef};

pub use super::directions::UNDEFINED;

/// A computed matrix for one protocol and port over parties (pods first, then nodes and regions
/// outside the cluster), decided once per pair of pod classes and once per pod and other party.
/// A cell is `None` where no flow is defined (a party other than a pod to itself, two parties
/// neither of which is a pod, a pod and its own node, no common address family). A pod to itself
/// is allowed: a pod reaching its own address is not subject to policy.
#[derive(Debug)]
pub struct Matrix {
    pub protocol: Protocol,
    pub port: u16,
    /// How many parties there are, pods first (their names are the caller's: at 150,000 pods a
    /// copy per matrix was 8 MB a probe).
    pub party_count: usize,
    /// How many of the parties are pods.
    pub pods: usize,
    classes: Rc<Classes>,
    /// Each distinct decision once; cells name them by code.
    pub decisions: Decisions,
    /// `[from class][to class]`: between two distinct pods of the classes.
    between_classes: Grid,
    /// `[from class][other]` and `[other][to class]`: between a pod of the class that is not on
    /// the other party (a node) and that party.
    to_others: Grid,
    from_others: Grid,
    /// Each pod's own node, by position among the other parties.
    own_node: Vec<Option<u32>>,
    /// The code of a pod's flow to itself ([`FlowDecision::own_address`]).
    own_address: u32,
}

impl Matrix {
    /// The scenario-format character of a cell: `.` allowed, `X` denied, `-` undefined.
    pub fn symbol(cell: Option<FlowDecisionRef>) -> char {
        match cell {
            Some(d) if d.allowed() => '.',
            Some(_) => 'X',
            None => '-',
        }
    }

    pub fn classes(&self) -> &Classes {
        &self.classes
    }

    fn others(&self) -> usize {
        self.party_count - self.pods
    }

    /// The decision code of the flow from party `from` to party `to`: a position in
    /// `decisions`, or [`UNDEFINED`].
    pub fn code(&self, from: usize, to: usize) -> u32 {
        let (n, others) = (self.pods, self.others());
        match (from < n, to < n) {
            _ if from == to && from < n => self.own_address,
            _ if from == to => UNDEFINED,
            (true, true) => {
                let k = self.classes.len();
                let (a, b) = (self.classes.of[from] as usize, self.classes.of[to] as usize);
                debug_assert!(a < k && b < k);
                self.between_classes.get(a, b)
            }
            (true, false) if self.own_node[from] == Some((to - n) as u32) => UNDEFINED,
            (false, true) if self.own_node[to] == Some((from - n) as u32) => UNDEFINED,
            (true, false) => {
                debug_assert!(to - n < others);
                self.to_others.get(self.classes.of[from] as usize, to - n)
            }
            (false, true) => self.from_others.get(from - n, self.classes.of[to] as usize),
            (false, false) => UNDEFINED,
        }
    }

    /// The flow from party `from` to party `to`, by position.
    pub fn cell(&self, from: usize, to: usize) -> Option<FlowDecisionRef<'_>> {
        self.decisions.get(self.code(from, to))
    }

    /// The decision code of the flow from a pod of class `from` to another pod of class `to`.
    pub fn class_code(&self, from: usize, to: usize) -> u32 {
        self.between_classes.get(from, to)
    }

    /// The decision code of the flow from the pods of class `class` to the other party `other`
    /// (by position after the pods), or from that party to them (`outwards` false): the flow of
    /// every pod of the class that is not on that party (a node).
    pub fn class_other_code(&self, class: usize, other: usize, outwards: bool) -> u32 {
        if outwards {
            self.to_others.get(class, other)
        } else {
            self.from_others.get(other, class)
        }
    }

    /// The other party (by position after the pods) that is pod `pod`'s own node, if any: their
    /// flows are undefined.
    pub fn own_node(&self, pod: usize) -> Option<u32> {
        self.own_node[pod]
    }

    /// How many flows the matrix defines between pods, and how many of them are allowed.
    pub fn pod_counts(&self) -> (u64, u64) {
        let (mut defined, mut allowed) = (0, 0);
        let sizes: Vec<u64> = self
            .classes
            .members
            .iter()
            .map(|m| m.len() as u64)
            .collect();
        for (a, &from) in sizes.iter().enumerate() {
            for (b, &to) in sizes.iter().enumerate() {
                let pairs = if a == b { from * (from - 1) } else { from * to };
                if let Some(d) = self.decisions.get(self.class_code(a, b)) {
                    defined += pairs;
                    allowed += if d.allowed() { pairs } else { 0 };
                }
            }
        }
        (defined, allowed)
    }

    /// How many flows the matrix defines between pods and other parties, and how many of them
    /// are allowed.
    pub fn other_counts(&self) -> (u64, u64) {
        let (mut defined, mut allowed) = (0, 0);
        for pod in 0..self.pods {
            for other in self.pods..self.party_count {
                for code in [self.code(pod, other), self.code(other, pod)] {
                    if let Some(d) = self.decisions.get(code) {
                        defined += 1;
                        allowed += u64::from(d.allowed());
                    }
                }
            }
        }
        (defined, allowed)
    }

    /// One row's symbols.
    pub fn symbol_row(&self, from: usize) -> Vec<char> {
        (0..self.party_count)
            .map(|to| Matrix::symbol(self.cell(from, to)))
            .collect()
    }

    /// Every cell's symbol, row by row (parties squared: for small matrices).
    pub fn symbols(&self) -> Vec<Vec<char>> {
        (0..self.party_count)
            .map(|from| self.symbol_row(from))
            .collect()
    }
}

/// Decides the flow between every ordered pair of pods, one pod per class.
pub fn compute(
    cluster: &ClusterModel,
    oracle: &dyn DirectionOracle,
    protocol: Protocol,
    port: u16,
) -> Matrix {
    let parties = pod_parties(cluster);
    let classes = Rc::new(pod_classes(cluster, &parties));
    compute_between(cluster, oracle, &parties, &classes, protocol, port)
}

/// The classes of the pods among `parties` in `cluster`.
pub fn pod_classes(cluster: &ClusterModel, parties: &[Party]) -> Classes {
    Classes::new(&[cluster], &pods_among(parties))
}

/// The pods among `parties`, in order.
pub fn pods_among(parties: &[Party]) -> Vec<&PodRef> {
    parties
        .iter()
        .filter_map(|p| match p {
            Party::Pod(pod) => Some(pod),
            _ => None,
        })
        .collect()
}

/// The pods (`namespace/name`) whose flows [`compute_between`] asks the decider about, for the
/// pods among `parties` in `classes`: per class its first member and its [`partner`] (flows
/// within the class, and with the first's own node). An oracle that answers at these pods only
/// ([`super::oracle_at`]) decides the whole matrix.
pub fn deciding_pods(
    cluster: &ClusterModel,
    parties: &[Party],
    classes: &Classes,
) -> BTreeSet<String> {
    deciding_pods_where(cluster, parties, classes, &|_| true)
}

/// [`deciding_pods`], with only the first pod of each class `every` says no to: enough where a
/// matrix is asked only for that class's flows with pods of other classes
/// ([`compute_some`]).
pub fn deciding_pods_where(
    cluster: &ClusterModel,
    parties: &[Party],
    classes: &Classes,
    every: &dyn Fn(usize) -> bool,
) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (class, members) in classes.members.iter().enumerate() {
        out.insert(pod_at(parties, members[0]).to_string());
        if every(class) {
            if let Some(m) = partner(cluster, parties, members) {
                out.insert(pod_at(parties, m).to_string());
            }
        }
    }
    out
}

/// The pod at `position` among `parties`, which must be a pod.
fn pod_at(parties: &[Party], position: usize) -> &PodRef {
    match &parties[position] {
        Party::Pod(pod) => pod,
        _ => unreachable!("classes hold pods"),
    }
}

/// The member of a class (`members`, by position among `parties`) that decides with its first
/// member the flows within the class, and the class's flows with the first's own node: the
/// first member on another node, else the second member. Pods of a class decide alike towards
/// every pod (no peer selects a pod by its node), so any second member decides flows within the
/// class; one on another node decides the flows with the first's node too, so that a class is
/// asked about at two pods, not three.
pub fn partner(cluster: &ClusterModel, parties: &[Party], members: &[usize]) -> Option<usize> {
    let first_node = cluster.pod_node(pod_at(parties, members[0]));
    members[1..]
        .iter()
        .find(|&&m| cluster.pod_node(pod_at(parties, m)) != first_node)
        .or(members.get(1))
        .copied()
}

/// One pod (`namespace/name`) per class and node among the pods of `parties`: an endpoint's
/// MapState is a function of its class and its node (host-relative peers), so these pods'
/// MapStates stand for every pod's.
pub fn pod_per_class_and_node(
    cluster: &ClusterModel,
    parties: &[Party],
    classes: &Classes,
) -> BTreeSet<String> {
    let mut seen = HashSet::new();
    parties
        .iter()
        .zip(&classes.of)
        .filter_map(|(party, &class)| match party {
            Party::Pod(pod) => seen
                .insert((class, cluster.pod_node(pod)))
                .then(|| pod.to_string()),
            _ => None,
        })
        .collect()
}

/// Decides the flow between every ordered pair of `parties` (pods first, in the order of
/// `classes`): once per pair of pod classes, once per pod and other party.
pub fn compute_between(
    cluster: &ClusterModel,
    oracle: &dyn DirectionOracle,
    parties: &[Party],
    classes: &Rc<Classes>,
    protocol: Protocol,
    port: u16,
) -> Matrix {
    compute_every(
        &mut Prepared::new(cluster, parties, classes),
        oracle,
        protocol,
        port,
    )
}

/// [`compute_between`] with what every probe shares prepared once.
pub fn compute_every(
    prepared: &mut Prepared,
    oracle: &dyn DirectionOracle,
    protocol: Protocol,
    port: u16,
) -> Matrix {
    compute_some(prepared, oracle, protocol, port, &Every)
}

/// Which flows [`compute_some`] decides; the others are left undefined.
pub trait Wanted {
    /// Between a pod of class `from` and another pod of class `to`.
    fn classes(&self, from: usize, to: usize) -> bool;
    /// Between a pod of class `class` and the other party `other` (by position among the
    /// parties after the pods), either way.
    fn with_other(&self, class: usize, other: usize) -> bool;
    /// Where the wanted flows are whole lines: per class whether its row (as the source) is
    /// wanted, and whether its column; per other party whether its flows with every class are.
    /// [`Wanted::classes`] is then `rows[from] || columns[to]` and [`Wanted::with_other`]
    /// `rows[class] || columns[class] || others[other]`, and the matrix holds only those lines.
    fn lines(&self) -> Option<Lines<'_>> {
        None
    }
}

/// Wanted flows as whole rows and columns (see [`Wanted::lines`]).
pub struct Lines<'a> {
    pub rows: &'a [bool],
    pub columns: &'a [bool],
    pub others: &'a [bool],
}

/// Every flow.
struct Every;

impl Wanted for Every {
    fn classes(&self, _: usize, _: usize) -> bool {
        true
    }

    fn with_other(&self, _: usize, _: usize) -> bool {
        true
    }
}

/// What a matrix's cells are decided from that is the same on every probe: each class's
/// representatives and signatures, the remotes' views, each pod's own node, the other
/// parties' identities. Prepared once per cluster and reused for every probe (the views of
/// 40,000 pods' remotes were a third of a diff when made again per probe).
pub struct Prepared<'a> {
    cluster: &'a ClusterModel,
    parties: &'a [Party],
    classes: Rc<Classes>,
    pods: usize,
    /// Per class: its first pod's identities by family, and its partner's (for flows within
    /// the class).
    firsts: Vec<Vec<(bool, IdentityId)>>,
    seconds: Vec<Option<Vec<(bool, IdentityId)>>>,
    signatures: Signatures,
    views: Views<'a>,
    /// Each pod's own node, by position among the other parties.
    own_node: Vec<Option<u32>>,
    /// Each other party's identity.
    other_ids: Vec<Option<IdentityId>>,
}

impl<'a> Prepared<'a> {
    /// For `parties` (pods first, in the order of `classes`, then other parties) of `cluster`.
    pub fn new(cluster: &'a ClusterModel, parties: &'a [Party], classes: &Rc<Classes>) -> Self {
        let pods = parties.iter().take_while(|p| p.is_pod()).count();
        assert_eq!(pods, classes.of.len(), "pods come first, one class each");
        assert!(parties[pods..].iter().all(|p| !p.is_pod()));
        let identities = |position: usize| match &parties[position] {
            Party::Pod(pod) => cluster.pod_identity_families(pod),
            _ => Vec::new(),
        };
        let firsts: Vec<_> = classes.members.iter().map(|m| identities(m[0])).collect();
        let seconds: Vec<_> = classes
            .members
            .iter()
            .map(|m| partner(cluster, parties, m).map(identities))
            .collect();
        let infos: Vec<&netpol_engine::PodInfo> = classes
            .members
            .iter()
            .map(|m| match &parties[m[0]] {
                Party::Pod(pod) => cluster.pod_info(pod).expect("a pod of the cluster"),
                _ => unreachable!("classes hold pods"),
            })
            .collect();
        let signatures = Signatures::new(cluster, &infos);
        let views = Views::new(cluster, &signatures);
        let others = &parties[pods..];
        // Each node party by name, the first of a name as `position` would find it.
        let mut node_at: HashMap<&str, u32> = HashMap::new();
        for (o, other) in others.iter().enumerate().rev() {
            if let Party::Node { name, .. } = other {
                node_at.insert(name, o as u32);
            }
        }
        let own_node = parties[..pods]
            .iter()
            .map(|pod| match pod {
                Party::Pod(pod) => cluster
                    .pod_node(pod)
                    .and_then(|node| node_at.get(node).copied()),
                _ => None,
            })
            .collect();
        let other_ids = others
            .iter()
            .map(|other| match other.endpoint() {
                Endpoint::Address(address) => cluster.store().resolve(address),
                Endpoint::Pod(_) => None,
            })
            .collect();
        Prepared {
            cluster,
            parties,
            classes: Rc::clone(classes),
            pods,
            firsts,
            seconds,
            signatures,
            views,
            own_node,
            other_ids,
        }
    }
}

/// [`compute_between`], deciding only the flows `wanted` names: the others are left undefined
/// (`diff` needs only the flows that may change, see [`super::changing`]).
pub fn compute_some(
    prepared: &mut Prepared,
    oracle: &dyn DirectionOracle,
    protocol: Protocol,
    port: u16,
    wanted: &dyn Wanted,
) -> Matrix {
    let Prepared {
        cluster,
        parties,
        ref classes,
        pods,
        ref firsts,
        ref seconds,
        ref signatures,
        ref mut views,
        ref own_node,
        ref other_ids,
    } = *prepared;
    let mut interner = Interner::default();
    let own_address = interner.flow(Some(FlowDecision::own_address()));
    let k = classes.len();
    let identities = |position: usize| match &parties[position] {
        Party::Pod(pod) => cluster.pod_identity_families(pod),
        _ => Vec::new(),
    };
    let class_cell = |interner: &mut Interner, views: &mut Views, from: usize, to: usize| {
        // Two distinct pods: the representatives, or within a class its first and its partner.
        let target = if from == to {
            seconds[from].as_deref()
        } else {
            Some(&firsts[to][..])
        };
        match target.and_then(|t| pod_pair(&firsts[from], t)) {
            _ if !wanted.classes(from, to) => UNDEFINED,
            None => UNDEFINED,
            Some((src, dst)) => {
                let egress = interner.half(
                    oracle,
                    views,
                    true,
                    signatures.egress[from],
                    src,
                    dst,
                    protocol,
                    port,
                );
                let ingress = interner.half(
                    oracle,
                    views,
                    false,
                    signatures.ingress[to],
                    dst,
                    src,
                    protocol,
                    port,
                );
                interner.pair(egress, ingress)
            }
        }
    };
    let lines = wanted.lines();
    let between_classes = match &lines {
        None => {
            let mut cells = Vec::with_capacity(k * k);
            for from in 0..k {
                for to in 0..k {
                    cells.push(class_cell(&mut interner, views, from, to));
                }
            }
            Grid::dense(k, cells)
        }
        Some(lines) => Grid::lines(
            k,
            k,
            &|from| lines.rows[from],
            &|to| lines.columns[to],
            &mut |from, to| class_cell(&mut interner, views, from, to),
        ),
    };
    let others = &parties[pods..];
    // A class and another party: decided by a member that is not on that party (a node), as
    // its pods decide alike towards everything but their own node. Both ways at once.
    let other_cells = |interner: &mut Interner, views: &mut Views, c: usize, o: usize| {
        let members = &classes.members[c];
        if !wanted.with_other(c, o) {
            return (UNDEFINED, UNDEFINED);
        }
        let Some(&pod) = members.iter().find(|&&m| own_node[m] != Some(o as u32)) else {
            return (UNDEFINED, UNDEFINED);
        };
        let other = &others[o];
        let family = other_ids[o].map(|_| other.endpoint());
        let pod_id = match family {
            Some(Endpoint::Address(address)) => {
                let own = if pod == members[0] {
                    firsts[c].clone()
                } else {
                    identities(pod)
                };
                own.iter()
                    .find(|(v4, _)| *v4 == address.is_ipv4())
                    .map(|&(_, id)| id)
            }
            _ => None,
        };
        let (Some(pod_id), Some(other_id)) = (pod_id, other_ids[o]) else {
            return (UNDEFINED, UNDEFINED);
        };
        let sigs = (signatures.egress[c], signatures.ingress[c]);
        let mut way = |outwards: bool| {
            with_address(
                interner, views, cluster, oracle, sigs, pod_id, other_id, outwards, protocol, port,
            )
        };
        let to = way(true);
        (to, way(false))
    };
    let (to_others, from_others) = match &lines {
        None => {
            let mut to_others = Vec::with_capacity(k * others.len());
            let mut from_others = vec![UNDEFINED; k * others.len()];
            for c in 0..k {
                for o in 0..others.len() {
                    let (to, from) = other_cells(&mut interner, views, c, o);
                    to_others.push(to);
                    from_others[o * k + c] = from;
                }
            }
            (
                Grid::dense(others.len(), to_others),
                Grid::dense(k, from_others),
            )
        }
        Some(lines) => {
            let class_lines = |c: usize| lines.rows[c] || lines.columns[c];
            let mut from_codes: HashMap<(usize, usize), u32> = HashMap::new();
            let to_others = Grid::lines(
                k,
                others.len(),
                &class_lines,
                &|o| lines.others[o],
                &mut |c, o| {
                    let (to, from) = other_cells(&mut interner, views, c, o);
                    from_codes.insert((o, c), from);
                    to
                },
            );
            let from_others = Grid::lines(
                others.len(),
                k,
                &|o| lines.others[o],
                &class_lines,
                &mut |o, c| from_codes.remove(&(o, c)).unwrap_or(UNDEFINED),
            );
            (to_others, from_others)
        }
    };
    Matrix {
        protocol,
        port,
        party_count: parties.len(),
        pods,
        classes: Rc::clone(classes),
        decisions: interner.decisions,
        between_classes,
        to_others,
        from_others,
        own_node: own_node.clone(),
        own_address,
    }
}

/// The flow from one party to another, or `None` where it is not defined. A pod to itself is
/// a flow, always allowed.
pub fn decide_between(
    cluster: &ClusterModel,
    oracle: &dyn DirectionOracle,
    from: &Party,
    to: &Party,
    protocol: Protocol,
    port: u16,
) -> Option<FlowDecision> {
    if from == to {
        return from.is_pod().then(FlowDecision::own_address);
    }
    if !(from.is_pod() || to.is_pod()) || own_node(cluster, from, to) {
        return None;
    }
    let (src, dst) = cluster
        .flow_identities(&from.endpoint(), &to.endpoint())
        .ok()?;
    Some(decide_flow(
        oracle,
        cluster.store(),
        src,
        dst,
        protocol,
        port,
    ))
}

/// Whether one party is a pod and the other its own node: traffic Kubernetes leaves undefined.
fn own_node(cluster: &ClusterModel, a: &Party, b: &Party) -> bool {
    let (pod, node) = match (a, b) {
        (Party::Pod(pod), Party::Node { name, .. })
        | (Party::Node { name, .. }, Party::Pod(pod)) => (pod, name),
        _ => return false,
    };
    cluster.pod_node(pod) == Some(node.as_str())
}
