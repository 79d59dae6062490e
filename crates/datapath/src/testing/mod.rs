//! Fixtures for the datapaths' tests (feature `testing`): hand-built MapStates and identity
//! stores, random MapStates for property tests, the addresses and ports worth probing, and what a
//! datapath must do for a lookup result. Shared by the HCN, nftables and kernel tests, so each
//! datapath is checked against the MapState lookup on the same inputs.

pub mod random;

pub use random::*;

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use netpol_engine::mapstate::{MapState, MapValue, PortKey};
use netpol_engine::portprefix::{mask, range_to_prefixes};
use netpol_engine::reference::Reason;
use netpol_engine::*;

use crate::ordered::RuleAction;

pub fn pod_info(name: &str) -> PodInfo {
    PodInfo {
        namespace: "ns".into(),
        name: name.into(),
        labels: Labels::new().into(),
        namespace_labels: Labels::new().into(),
        node: None,
        ports: Vec::new(),
    }
}

/// A store with the two any-address world identities, plus `worlds` and pods at `hosts`.
pub fn store_with(worlds: &[&str], hosts: &[&str]) -> (IdentityStore, HashMap<String, IdentityId>) {
    let mut store = IdentityStore::new();
    let mut ids = HashMap::new();
    for w in ["0.0.0.0/0", "::/0"].iter().chain(worlds) {
        let (id, _) = store.insert(Identity::world(w.parse().unwrap()));
        ids.insert(w.to_string(), id);
    }
    for (i, h) in hosts.iter().enumerate() {
        let (id, _) = store.insert(Identity::pod(
            pod_info(&format!("p{i}")),
            h.parse().unwrap(),
        ));
        ids.insert(h.to_string(), id);
    }
    (store, ids)
}

pub fn value(precedence: u128, verdict: Verdict, auth: Option<AuthMode>) -> MapValue {
    MapValue {
        precedence,
        verdict,
        auth,
        reason: Arc::new(Reason::Default),
    }
}

/// Builds MapStates class by class.
#[derive(Default)]
pub struct MapBuilder {
    classes: HashMap<(Direction, Option<IdentityId>), HashMap<PortKey, MapValue>>,
}

impl MapBuilder {
    /// A MapState whose two roots have `root` (Allow: nothing isolates; Deny: isolated).
    pub fn new(root: Verdict) -> Self {
        let mut b = MapBuilder::default();
        for d in Direction::BOTH {
            b.set(d, None, PortKey::ANY, value(1, root, None));
        }
        b
    }

    pub fn set(
        &mut self,
        direction: Direction,
        identity: Option<IdentityId>,
        key: PortKey,
        v: MapValue,
    ) -> &mut Self {
        self.classes
            .entry((direction, identity))
            .or_default()
            .insert(key, v);
        self
    }

    /// Entries for `lo..=hi` of `protocol`, split into prefixes as the engine keys them.
    pub fn range(
        &mut self,
        direction: Direction,
        identity: Option<IdentityId>,
        protocol: Protocol,
        lo: u16,
        hi: u16,
        v: MapValue,
    ) -> &mut Self {
        for (port, len) in range_to_prefixes(lo, hi) {
            self.set(
                direction,
                identity,
                key(Some(protocol), port, len),
                v.clone(),
            );
        }
        self
    }

    pub fn build(&self) -> MapState {
        let mut map = MapState::default();
        let mut changes = Vec::new();
        for (class, entries) in &self.classes {
            map.replace_class(*class, entries.clone(), &mut changes);
        }
        map
    }
}

pub fn key(protocol: Option<Protocol>, port: u16, len: u8) -> PortKey {
    PortKey {
        protocol,
        port: mask(port, len),
        len,
    }
}

/// What a datapath must do for a lookup result: allow only an allow that needs no
/// authentication.
pub fn expected(v: &MapValue) -> RuleAction {
    if v.verdict == Verdict::Allow && v.auth != Some(AuthMode::Required) {
        RuleAction::Allow
    } else {
        RuleAction::Block
    }
}

/// Addresses worth probing: every identity's own address, both ends of every world prefix, and
/// a few outside addresses.
pub fn probe_addresses(store: &IdentityStore) -> Vec<IpAddr> {
    let mut out: Vec<IpAddr> = Vec::new();
    for (id, _) in store.iter() {
        for prefix in store.members(id) {
            out.push(prefix.network());
            out.push(prefix.broadcast());
        }
    }
    out.extend(store.representative_addresses().into_values());
    out.extend(
        [
            "8.8.8.8",
            "10.200.0.1",
            "192.168.9.9",
            "fd00::1",
            "2001:db8::1",
        ]
        .iter()
        .map(|a| a.parse::<IpAddr>().unwrap()),
    );
    out.sort();
    out.dedup();
    out
}

pub const PROBE_PORTS: [u16; 10] = [0, 1, 53, 79, 80, 81, 82, 443, 1000, 65535];
