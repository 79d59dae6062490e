//! Which pairs of pod classes can decide differently on the two sides of a diff, so that `diff`
//! decides only those: at 10,000 pods a one-policy change touches a few classes' rows and
//! columns of a matrix of 1,251 squared class pairs.
//!
//! The egress half of a flow between two pods is decided by the egress entries that select the
//! source (in their order, whose relative precedence no other entry changes) and by what the
//! destination is to their peers: its labels, namespace labels, named ports and addresses (a
//! CIDR peer covers an address alike on both sides). The ingress half likewise. So a flow from
//! class `a` to class `b` can change only where `a`'s egress entries or `b`'s ingress entries
//! differ between the sides, or where a pod of `a` or `b` differs itself. A flow between a pod
//! and a node or a region outside likewise, and where the other party's identity differs
//! (a node's labels or address, or the policy prefix its address falls in); a pod at such an
//! address is decided whole, so its flows are always decided.

use netpol_engine::{Identity, PodInfo, PolicyEntry};

use super::class_matrix::{Classes, Lines, Party, Wanted};
use super::directions::Signatures;
use crate::loader::{ClusterModel, Endpoint, PodRef};

/// Per class: whether its row (as the source) or its column (as the destination) may change;
/// per other party, whether it differs between the sides.
pub struct Changing {
    rows: Vec<bool>,
    columns: Vec<bool>,
    others: Vec<bool>,
}

impl Changing {
    /// The classes of the pods among each side's `parties` (the same pods on both sides, first,
    /// then the other parties, position for position) in `classes`.
    pub fn new(
        clusters: [&ClusterModel; 2],
        parties: [&[Party]; 2],
        classes: &Classes,
    ) -> Changing {
        let pods = classes.of.len();
        let other = |side: usize, o: usize| {
            let party = &parties[side][pods + o];
            let identity = match party.endpoint() {
                Endpoint::Address(address) => clusters[side]
                    .store()
                    .resolve(address)
                    .and_then(|id| clusters[side].store().get(id)),
                Endpoint::Pod(_) => None,
            };
            (party, identity)
        };
        let others = (0..parties[0].len() - pods)
            .map(|o| {
                let (was, now) = (other(0, o), other(1, o));
                let at_pod = [was.1, now.1]
                    .iter()
                    .any(|i| i.is_some_and(|i| i.as_pod().is_some()));
                was != now || at_pod
            })
            .collect();
        let parties = parties[0];
        let pod = |position: usize| match &parties[position] {
            Party::Pod(pod) => pod,
            _ => unreachable!("classes hold pods"),
        };
        let signatures = clusters.map(|cluster| {
            let infos: Vec<&PodInfo> = classes
                .members
                .iter()
                .map(|m| cluster.pod_info(pod(m[0])).expect("a pod of both sides"))
                .collect();
            Signatures::new(cluster, &infos)
        });
        let entries = |side: usize, signature: u32| -> Vec<&PolicyEntry> {
            let all = clusters[side].entries();
            signatures[side]
                .entries(signature)
                .iter()
                .map(|&e| &all[e as usize])
                .collect()
        };
        let mut changing = Changing {
            rows: Vec::with_capacity(classes.len()),
            columns: Vec::with_capacity(classes.len()),
            others,
        };
        for (c, members) in classes.members.iter().enumerate() {
            let itself = members
                .iter()
                .any(|&m| identities(clusters[0], pod(m)) != identities(clusters[1], pod(m)));
            let egress = entries(0, signatures[0].egress[c]) != entries(1, signatures[1].egress[c]);
            let ingress =
                entries(0, signatures[0].ingress[c]) != entries(1, signatures[1].ingress[c]);
            changing.rows.push(itself || egress);
            changing.columns.push(itself || ingress);
        }
        changing
    }

    /// Whether flows from a pod of class `class` to any other pod may change.
    pub fn row(&self, class: usize) -> bool {
        self.rows[class]
    }

    /// Whether flows from any pod to a pod of class `class` may change.
    pub fn column(&self, class: usize) -> bool {
        self.columns[class]
    }

    /// Whether flows between the other party `other` and any pod may change.
    pub fn other(&self, other: usize) -> bool {
        self.others[other]
    }

    /// Whether a flow from a pod of class `from` to a pod of class `to` may change.
    pub fn may_change(&self, from: usize, to: usize) -> bool {
        self.rows[from] || self.columns[to]
    }
}

impl Changing {
    /// Whether flows of class `class` other than those of its first pod with other classes may
    /// be asked about: within the class, or with another party (decided by a member not on it).
    pub fn every_member(&self, class: usize) -> bool {
        self.rows[class] || self.columns[class] || self.others.iter().any(|&o| o)
    }
}

impl Wanted for Changing {
    fn classes(&self, from: usize, to: usize) -> bool {
        self.may_change(from, to)
    }

    fn with_other(&self, class: usize, other: usize) -> bool {
        self.rows[class] || self.columns[class] || self.others[other]
    }

    fn lines(&self) -> Option<Lines<'_>> {
        Some(Lines {
            rows: &self.rows,
            columns: &self.columns,
            others: &self.others,
        })
    }
}

/// A pod's identities, primary address first.
fn identities<'a>(cluster: &'a ClusterModel, pod: &PodRef) -> Vec<&'a Identity> {
    cluster
        .pod_identity_families(pod)
        .into_iter()
        .filter_map(|(_, id)| cluster.store().get(id))
        .collect()
}
