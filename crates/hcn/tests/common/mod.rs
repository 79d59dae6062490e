//! Hand-built MapStates and identity stores, and the check that the simulator, fed the compiled
//! rules, decides every flow as the MapState lookup does.
#![allow(dead_code)]

pub mod random;

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use netpol_engine::mapstate::{MapState, MapValue, PortKey};
use netpol_engine::portprefix::{mask, range_to_prefixes};
use netpol_engine::reference::Reason;
use netpol_engine::*;
use netpol_hcn::oracle::packet;
use netpol_hcn::schema::AclAction;
use netpol_hcn::sim::check_priorities;
use netpol_hcn::{CompileOptions, CompiledAcls, EndpointInfo, HcnSim};
#[allow(unused_imports)]
pub use random::*;

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

/// What HCN must do for a lookup result: allow only an allow that needs no authentication.
pub fn expected(v: &MapValue) -> AclAction {
    if v.verdict == Verdict::Allow && v.auth != Some(AuthMode::Required) {
        AclAction::Allow
    } else {
        AclAction::Block
    }
}

/// Loads compiled rules into a fresh simulator endpoint, checking HCN's priority rule.
pub fn simulate(acls: &CompiledAcls, local: &[IpAddr]) -> HcnSim {
    let policies = acls.policies();
    check_priorities(&policies)
        .expect("no overlapping rules of different actions share a priority");
    let sim = HcnSim::new();
    sim.add_endpoint(
        EndpointInfo {
            id: "ep".into(),
            name: "ep".into(),
            addresses: local.to_vec(),
        },
        policies,
    );
    sim
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

/// The first flow where the simulator and the lookup disagree.
pub fn first_mismatch(
    map: &MapState,
    store: &IdentityStore,
    options: &CompileOptions,
) -> Option<String> {
    let acls = match netpol_hcn::compile_entries(map.iter(), store, options) {
        Ok(a) => a,
        Err(e) => return Some(format!("compile failed: {e}")),
    };
    let sim = simulate(&acls, &["10.99.0.1".parse().unwrap()]);
    for address in probe_addresses(store) {
        let Some(remote) = store.resolve(address) else {
            continue;
        };
        for direction in Direction::BOTH {
            for protocol in Protocol::ALL {
                for port in PROBE_PORTS {
                    let want = expected(&map.lookup(direction, remote, protocol, port));
                    let got = sim
                        .evaluate("ep", &packet(direction, address, protocol, port))
                        .unwrap();
                    if got.action != want {
                        return Some(format!(
                            "{direction} {address} ({}) {protocol}/{port}: sim {:?} by {:?}, lookup {want:?}\nrules: {}",
                            store.get(remote).unwrap(),
                            got.action,
                            got.rule,
                            acls.update_request_json()
                        ));
                    }
                }
            }
        }
    }
    None
}
