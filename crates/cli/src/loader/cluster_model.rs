//! A scenario's cluster in engine terms: every identity a flow or a peer can name, and the policy
//! entries that decide flows between them.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::Arc;

use ipnet::IpNet;
use netpol_engine::{
    Enforcement, Identity, IdentityId, IdentityKind, IdentityStore, PodInfo, PolicyEntry,
};

use super::expect::{Endpoint, PodRef};
use super::prepared::Origin;
use netpol_api::workloads::Owner;

/// A cloned cluster shares its identities, pods and nodes with the original until either
/// changes them: the two sides of a `diff` that differ only in policies hold one copy of a
/// 150,000-pod cluster's pods between them, not two.
#[derive(Clone, Debug)]
pub struct ClusterModel {
    core: Arc<Core>,
    /// The node probe allowance, then the entries of every policy object.
    entries: Vec<PolicyEntry>,
    /// Where each policy object was written, by `Kind namespace/name` (`Kind name` when
    /// cluster-scoped), as lint names objects: for locations in SARIF, and the lint findings
    /// the object acknowledges.
    policy_origins: BTreeMap<String, Origin>,
}

#[derive(Clone, Debug)]
struct Core {
    /// Every identity: pods' and nodes' addresses, and the prefixes policies name.
    store: IdentityStore,
    /// Each pod's identities, one per address, its primary address (`status.podIP`) first.
    pods: BTreeMap<PodRef, Vec<IdentityId>>,
    /// What is known of pods beyond their identities.
    facts: BTreeMap<PodRef, PodFacts>,
    /// Each node's identities, one per address.
    nodes: BTreeMap<String, Vec<IdentityId>>,
    /// What the input is called in messages: `the scenario`, `the manifests`.
    input: &'static str,
}

/// What the cluster knows of a pod beyond its identities.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodFacts {
    /// The workload it belongs to (its owner reference), or stands for (derived).
    pub owner: Option<Owner>,
    /// Derived from a workload's pod template: its address was assigned by netpol.
    pub derived: bool,
    /// Why it has no address of its own, when it has none.
    pub unaddressed: Option<String>,
    /// A stand-in for pods the input does not hold that a policy's peer can select (see
    /// `stand_ins.rs`), not a pod of the input.
    pub stand_in: bool,
}

/// How many entries [`ClusterModel::new`] puts ahead of the policies' own.
const BUILT_IN_ENTRIES: usize = 1;

/// The address family of an address, to pair a flow's two sides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Family {
    V4,
    V6,
}

impl Family {
    fn of(ip: IpAddr) -> Family {
        if ip.is_ipv4() {
            Family::V4
        } else {
            Family::V6
        }
    }

    fn name(self) -> &'static str {
        match self {
            Family::V4 => "IPv4",
            Family::V6 => "IPv6",
        }
    }
}

impl Default for ClusterModel {
    fn default() -> Self {
        Self::new()
    }
}

impl ClusterModel {
    /// An empty cluster: every address is outside it, and a pod's own node may always reach it.
    pub fn new() -> Self {
        let mut store = IdentityStore::new();
        for everything in ["0.0.0.0/0", "::/0"] {
            let prefix: IpNet = everything.parse().expect("a valid prefix literal");
            store.insert(Identity::world(prefix));
        }
        let entries = vec![PolicyEntry::node_probe_allowance()];
        debug_assert_eq!(entries.len(), BUILT_IN_ENTRIES);
        ClusterModel {
            core: Arc::new(Core {
                store,
                pods: BTreeMap::new(),
                facts: BTreeMap::new(),
                nodes: BTreeMap::new(),
                input: "the scenario",
            }),
            entries,
            policy_origins: BTreeMap::new(),
        }
    }

    /// The identities, pods and nodes, to change: copied first if another cluster shares them.
    fn core_mut(&mut self) -> &mut Core {
        Arc::make_mut(&mut self.core)
    }

    /// Whether two clusters share their identities, pods and nodes (one was cloned from the
    /// other and neither changed them since): they differ in policy entries at most.
    pub fn shares_pods_with(&self, other: &ClusterModel) -> bool {
        Arc::ptr_eq(&self.core, &other.core)
    }

    /// Shares `other`'s identities, pods and nodes, as a clone of it would: for two sides that
    /// shared them before the same pods were added to `other`.
    pub fn share_pods_of(&mut self, other: &ClusterModel) {
        self.core = Arc::clone(&other.core);
    }

    /// Records where the policy object `object` (`Kind namespace/name`) was written.
    pub fn set_policy_origin(&mut self, object: String, origin: Origin) {
        self.policy_origins.insert(object, origin);
    }

    /// Where the policy object `object` (`Kind namespace/name`) was written, if known.
    pub fn policy_origin(&self, object: &str) -> Option<&Origin> {
        self.policy_origins.get(object)
    }

    /// Names the input in messages, e.g. `the manifests`.
    pub fn set_input_name(&mut self, input: &'static str) {
        if self.core.input != input {
            self.core_mut().input = input;
        }
    }

    /// What the input is called in messages.
    pub fn input_name(&self) -> &'static str {
        self.core.input
    }

    /// Records what is known of a pod beyond its identities.
    pub fn set_facts(&mut self, pod: PodRef, facts: PodFacts) {
        self.core_mut().facts.insert(pod, facts);
    }

    /// What is known of a pod beyond its identities.
    pub fn facts(&self, pod: &PodRef) -> Option<&PodFacts> {
        self.core.facts.get(pod)
    }

    /// Adds a pod with one identity per address, its primary address first. A pod without an
    /// address is known by name but cannot take part in a flow.
    pub fn add_pod(&mut self, pod: PodRef, identities: Vec<Identity>) {
        let core = self.core_mut();
        let ids = identities
            .into_iter()
            .map(|identity| core.store.insert(identity).0)
            .collect();
        core.pods.insert(pod, ids);
    }

    pub fn add_node(&mut self, name: impl Into<String>, identities: Vec<Identity>) {
        let core = self.core_mut();
        let ids = identities
            .into_iter()
            .map(|identity| core.store.insert(identity).0)
            .collect();
        core.nodes.insert(name.into(), ids);
    }

    /// Adds policy entries, registering every prefix their peers name as an identity outside the
    /// cluster, so that CIDR peers and their exceptions match whole identities.
    pub fn add_entries(&mut self, entries: impl IntoIterator<Item = PolicyEntry>) {
        for entry in entries {
            self.add_prefixes_of(&entry);
            self.entries.push(entry);
        }
    }

    /// Registers the prefixes `entry`'s peers name as identities outside the cluster, as
    /// [`ClusterModel::add_entries`] does, without adding the entry; a prefix already known changes
    /// nothing (so clusters sharing their identities keep sharing them).
    pub fn add_prefixes_of(&mut self, entry: &PolicyEntry) {
        for prefix in entry.peers.iter().flat_map(|peer| peer.prefixes()) {
            let world = Identity::world(prefix);
            if self.core.store.id_of(&world).is_none() {
                self.core_mut().store.insert(world);
            }
        }
    }

    pub fn store(&self) -> &IdentityStore {
        &self.core.store
    }

    /// Every entry that decides flows: the node probe allowance and the policies' entries.
    pub fn entries(&self) -> &[PolicyEntry] {
        &self.entries
    }

    /// The entries translated from policy objects, without the built-in node probe allowance
    /// (for engines that add it themselves).
    pub fn policy_entries(&self) -> &[PolicyEntry] {
        &self.entries[BUILT_IN_ENTRIES..]
    }

    /// The cluster as the would-be view sees it (`netpol_engine::audit`): every policy
    /// enforced, those in audit mode included. None where no policy is in audit mode (the
    /// would-be view is the cluster itself). Pods, nodes and identities are shared, not copied.
    pub fn would_be(&self) -> Option<ClusterModel> {
        let audited = |e: &PolicyEntry| e.enforcement == Enforcement::Audit;
        if !self.policy_entries().iter().any(audited) {
            return None;
        }
        let mut cluster = self.clone();
        for entry in &mut cluster.entries {
            entry.enforcement = Enforcement::Enforce;
        }
        Some(cluster)
    }

    /// Whether the cluster has the pod (a map lookup, not a scan).
    pub fn has_pod(&self, pod: &PodRef) -> bool {
        self.core.pods.contains_key(pod)
    }

    /// The identities of a pod, primary address first, each with whether it is IPv4.
    pub fn pod_identity_families(&self, pod: &PodRef) -> Vec<(bool, IdentityId)> {
        self.core.pods.get(pod).map_or_else(Vec::new, |ids| {
            ids.iter()
                .map(|&id| (self.address_of(id).is_ipv4(), id))
                .collect()
        })
    }

    /// Every pod with its identities, primary address first.
    pub fn pods(&self) -> impl Iterator<Item = (&PodRef, Vec<&Identity>)> {
        self.core
            .pods
            .iter()
            .map(|(pod, ids)| (pod, self.identities(ids)))
    }

    /// Every node with its identities.
    pub fn nodes(&self) -> impl Iterator<Item = (&str, Vec<&Identity>)> {
        self.core
            .nodes
            .iter()
            .map(|(node, ids)| (node.as_str(), self.identities(ids)))
    }

    /// The prefixes outside the cluster that identities stand for: the whole address spaces and
    /// every prefix a policy names.
    pub fn outside_prefixes(&self) -> Vec<IpNet> {
        self.core
            .store
            .iter()
            .filter(|(_, identity)| matches!(identity.kind, IdentityKind::World))
            .map(|(_, identity)| identity.prefix)
            .collect()
    }

    /// A pod as policies see it (labels, node, named ports), if it has an address.
    pub fn pod_info(&self, pod: &PodRef) -> Option<&PodInfo> {
        let id = self.core.pods.get(pod)?.first()?;
        self.core.store.get(*id)?.as_pod()
    }

    /// The node a pod runs on, if it has an address and says.
    pub fn pod_node(&self, pod: &PodRef) -> Option<&str> {
        self.pod_info(pod)?.node.as_deref()
    }

    /// Every address a pod or node has.
    pub fn cluster_addresses(&self) -> BTreeSet<IpAddr> {
        self.core
            .pods
            .values()
            .chain(self.core.nodes.values())
            .flatten()
            .map(|id| self.address_of(*id))
            .collect()
    }

    fn identities(&self, ids: &[IdentityId]) -> Vec<&Identity> {
        ids.iter()
            .filter_map(|id| self.core.store.get(*id))
            .collect()
    }

    /// Pods that have an address, by namespace then name, each with its primary identity.
    pub fn addressed_pods(&self) -> impl Iterator<Item = (&PodRef, IdentityId)> {
        self.core
            .pods
            .iter()
            .filter_map(|(pod, ids)| ids.first().map(|id| (pod, *id)))
    }

    /// The identities of a flow's source and destination. A pod sends and receives on its
    /// address of the family the flow uses: the family of the address the flow names, if it names
    /// one; between two pods, the first family of the destination's addresses (primary first)
    /// that the source has too.
    pub fn flow_identities(
        &self,
        from: &Endpoint,
        to: &Endpoint,
    ) -> Result<(IdentityId, IdentityId), String> {
        let family = match (from, to) {
            (_, Endpoint::Address(ip)) | (Endpoint::Address(ip), _) => Family::of(*ip),
            (Endpoint::Pod(src), Endpoint::Pod(dst)) => {
                let src_families = self.families(src)?;
                self.families(dst)?
                    .into_iter()
                    .find(|f| src_families.contains(f))
                    .ok_or_else(|| format!("pods {src} and {dst} share no address family"))?
            }
        };
        Ok((self.identity(from, family)?, self.identity(to, family)?))
    }

    fn pod_ids(&self, pod: &PodRef) -> Result<&[IdentityId], String> {
        let ids = self
            .core
            .pods
            .get(pod)
            .ok_or_else(|| format!("no pod {pod} in {}", self.core.input))?;
        if ids.is_empty() {
            let why = self.facts(pod).and_then(|f| f.unaddressed.as_deref());
            return Err(match why {
                Some(why) => format!("pod {pod} {why}"),
                None => format!("pod {pod} has no address (status.podIP)"),
            });
        }
        Ok(ids)
    }

    /// The families of a pod's addresses, primary first.
    fn families(&self, pod: &PodRef) -> Result<Vec<Family>, String> {
        Ok(self
            .pod_ids(pod)?
            .iter()
            .map(|id| Family::of(self.address_of(*id)))
            .collect())
    }

    fn identity(&self, endpoint: &Endpoint, family: Family) -> Result<IdentityId, String> {
        match endpoint {
            Endpoint::Address(ip) => self
                .store()
                .resolve(*ip)
                .ok_or_else(|| format!("no identity holds {ip}")),
            Endpoint::Pod(pod) => self
                .pod_ids(pod)?
                .iter()
                .copied()
                .find(|id| Family::of(self.address_of(*id)) == family)
                .ok_or_else(|| format!("pod {pod} has no {} address", family.name())),
        }
    }

    fn address_of(&self, id: IdentityId) -> IpAddr {
        self.store()
            .get(id)
            .expect("pod identities stay in the store")
            .prefix
            .addr()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netpol_engine::{
        AddressScope, CidrSelector, Direction, NodeInfo, Peer, PodInfo, PodSelector, Priority,
        Provenance, Tier, Verdict,
    };

    fn pod_ref(ns: &str, name: &str) -> PodRef {
        PodRef {
            namespace: ns.into(),
            name: name.into(),
        }
    }

    fn pod_identities(ns: &str, name: &str, ips: &[&str]) -> Vec<Identity> {
        let info = PodInfo {
            namespace: ns.into(),
            name: name.into(),
            labels: Default::default(),
            namespace_labels: Default::default(),
            node: Some("n1".into()),
            ports: vec![],
        };
        ips.iter()
            .map(|ip| Identity::pod(info.clone(), ip.parse().unwrap()))
            .collect()
    }

    fn cluster() -> ClusterModel {
        let mut c = ClusterModel::new();
        c.add_pod(
            pod_ref("x", "dual"),
            pod_identities("x", "dual", &["10.1.0.1", "fd00::1"]),
        );
        c.add_pod(pod_ref("x", "v6"), pod_identities("x", "v6", &["fd00::2"]));
        c.add_pod(pod_ref("x", "v4"), pod_identities("x", "v4", &["10.1.0.4"]));
        c.add_pod(pod_ref("x", "pending"), vec![]);
        let node = NodeInfo {
            name: "n1".into(),
            labels: Default::default(),
        };
        c.add_node(
            "n1",
            vec![Identity::node(node, "10.0.0.1".parse().unwrap())],
        );
        c
    }

    fn describe(c: &ClusterModel, from: &str, to: &str) -> Result<String, String> {
        let (src, dst) = c.flow_identities(&from.parse().unwrap(), &to.parse().unwrap())?;
        let store = c.store();
        Ok(format!(
            "{} -> {}",
            store.get(src).unwrap(),
            store.get(dst).unwrap()
        ))
    }

    #[test]
    fn flows_use_the_family_of_the_named_address_or_the_destination() {
        let c = cluster();
        assert_eq!(
            describe(&c, "x/dual", "x/v6").unwrap(),
            "pod x/dual (fd00::1) -> pod x/v6 (fd00::2)"
        );
        assert_eq!(
            describe(&c, "x/dual", "192.0.2.1").unwrap(),
            "pod x/dual (10.1.0.1) -> world 0.0.0.0/0"
        );
        assert_eq!(
            describe(&c, "10.0.0.1", "x/dual").unwrap(),
            "node n1 (10.0.0.1) -> pod x/dual (10.1.0.1)"
        );
        assert_eq!(
            describe(&c, "x/v6", "x/dual").unwrap(),
            "pod x/v6 (fd00::2) -> pod x/dual (fd00::1)"
        );
        assert_eq!(
            describe(&c, "x/dual", "x/v4").unwrap(),
            "pod x/dual (10.1.0.1) -> pod x/v4 (10.1.0.4)"
        );
        assert_eq!(
            describe(&c, "x/v4", "x/v6").unwrap_err(),
            "pods x/v4 and x/v6 share no address family"
        );
        assert_eq!(
            describe(&c, "x/v6", "192.0.2.1").unwrap_err(),
            "pod x/v6 has no IPv4 address"
        );
        assert_eq!(
            describe(&c, "x/dual", "x/pending").unwrap_err(),
            "pod x/pending has no address (status.podIP)"
        );
        assert_eq!(
            describe(&c, "x/nope", "x/dual").unwrap_err(),
            "no pod x/nope in the scenario"
        );
    }

    #[test]
    fn peer_prefixes_become_world_identities() {
        let mut c = cluster();
        c.add_entries([PolicyEntry {
            tier: Tier::Normal,
            priority: Priority::unordered(),
            verdict: Verdict::Allow,
            subject: PodSelector::all(),
            direction: Direction::Egress,
            peers: vec![Peer::Cidr(CidrSelector {
                net: "192.0.2.0/24".parse().unwrap(),
                except: vec!["192.0.2.128/25".parse().unwrap()].into(),
                scope: AddressScope::Any,
            })],
            ports: vec![],
            default_deny: true,
            enforcement: netpol_engine::Enforcement::Enforce,
            auth: None,
            provenance: Provenance::default(),
        }]);
        assert_eq!(
            describe(&c, "x/dual", "192.0.2.1").unwrap(),
            "pod x/dual (10.1.0.1) -> world 192.0.2.0/24"
        );
        assert_eq!(
            describe(&c, "x/dual", "192.0.2.200").unwrap(),
            "pod x/dual (10.1.0.1) -> world 192.0.2.128/25"
        );
        assert_eq!(c.entries().len(), 2, "the node probe allowance comes first");
        assert_eq!(c.entries()[0], PolicyEntry::node_probe_allowance());
        assert_eq!(c.policy_entries(), &c.entries()[1..]);
        let pods: Vec<String> = c.addressed_pods().map(|(p, _)| p.to_string()).collect();
        assert_eq!(pods, ["x/dual", "x/v4", "x/v6"]);
    }
}
