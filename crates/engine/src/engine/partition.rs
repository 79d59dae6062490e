//! The engine's partition of pods, for tools that decide once per class of pods alike.
//!
//! Two addresses are one security identity when nothing a peer selector reads tells their pods
//! apart (`labels_in_use`: the labels it reads, of each key the values it names), their pods
//! have the same named ports and namespace, and they lie inside the same prefixes CIDR peers
//! name (`identities`: cluster CIDRs). Two endpoints are resolved alike when, beyond that,
//! nothing a subject selector reads tells them apart (twins). [`Partition`] answers both for
//! any pod given a policy set, without loading an engine: the authoring tools (`netpol matrix`,
//! `diff`, `lint`) decide a flow once per pair of classes and ask this partition what the
//! classes are, rather than re-deriving it from the selectors (`tests/integration/partition.rs` checks it
//! against the identities and MapStates an engine computes).
//!
//! Every entry counts, as in an engine with no local node: a tool sees the whole cluster.

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap};
use std::net::IpAddr;

use ipnet::IpNet;

use super::labels_in_use::LabelsInUse;
use crate::entry::PolicyEntry;
use crate::identity::PodInfo;
use crate::labels::Labels;
use crate::ports::NamedPort;
use crate::prefixes::truncations;
use crate::selector::Peer;

/// What the selectors and CIDR peers of a policy set tell apart of pods.
#[derive(Debug)]
pub struct Partition {
    /// What peer selectors read: a pod's identity.
    peers: LabelsInUse,
    /// What subject selectors read: which entries select a pod as their subject.
    subjects: LabelsInUse,
    /// Each prefix a CIDR peer names (its network and its `except`s), by its position.
    prefixes: HashMap<IpNet, u32>,
    /// The distinct lengths among `prefixes`: the prefixes holding an address are among its
    /// truncations to these lengths.
    lengths: Vec<u8>,
}

/// A pod's class in a [`Partition`]: pods with equal keys have, address by address, one
/// security identity, and are selected by the same entries as subjects (their MapStates are
/// equal where they run on one node, as twins). It borrows from the pod it was made of.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PodKey<'a> {
    namespace: &'a str,
    /// The pod's labels and its namespace's as peer selectors see them.
    labels: Cow<'a, Labels>,
    namespace_labels: Cow<'a, Labels>,
    /// The same as subject selectors see them.
    subject_labels: Cow<'a, Labels>,
    subject_namespace_labels: Cow<'a, Labels>,
    ports: &'a [NamedPort],
    /// Per address, in the order given: the positions of the CIDR peers' prefixes holding it.
    addresses: Vec<Vec<u32>>,
}

impl Partition {
    /// The partition `entries` make (every entry counts, as in an engine with no local node).
    pub fn of(entries: &[PolicyEntry]) -> Partition {
        let named: BTreeSet<IpNet> = entries
            .iter()
            .flat_map(|e| &e.peers)
            .filter(|p| matches!(p, Peer::Cidr(_)))
            .flat_map(Peer::prefixes)
            .collect();
        let lengths: BTreeSet<u8> = named.iter().map(IpNet::prefix_len).collect();
        Partition {
            peers: LabelsInUse::of(entries),
            subjects: LabelsInUse::of_subjects(entries),
            prefixes: named.into_iter().zip(0..).collect(),
            lengths: lengths.into_iter().collect(),
        }
    }

    /// The class of `pod` at `addresses` (its primary address first, as its identities are).
    pub fn pod_key<'a>(
        &self,
        pod: &'a PodInfo,
        addresses: impl IntoIterator<Item = IpAddr>,
    ) -> PodKey<'a> {
        let (labels, namespace_labels) = self.peers.seen_pod(pod);
        let (subject_labels, subject_namespace_labels) = self.subjects.seen_pod(pod);
        PodKey {
            namespace: &pod.namespace,
            labels,
            namespace_labels,
            subject_labels,
            subject_namespace_labels,
            ports: &pod.ports,
            addresses: addresses
                .into_iter()
                .map(|a| self.prefixes_holding(a))
                .collect(),
        }
    }

    /// The positions of the prefixes holding `address`, ascending.
    fn prefixes_holding(&self, address: IpAddr) -> Vec<u32> {
        let host = IpNet::from(address);
        let mut holding: Vec<u32> = truncations(&host, &self.lengths)
            .filter_map(|net| self.prefixes.get(&net).copied())
            .collect();
        holding.sort_unstable();
        holding
    }
}
