//! Random MapStates for property tests: nested CIDR identities, pods inside them, wildcard and
//! exact entries, overlapping port prefixes, ties and authentication, respecting the MapState
//! invariant. Shared by the HCN and the nftables equivalence tests and the kernel tests.

use std::collections::HashMap;

use netpol_engine::mapstate::{MapValue, PortKey};
use netpol_engine::*;
use proptest::prelude::*;

use super::{key, store_with, value, MapBuilder};

/// Case counts come from PROPTEST_CASES (default 256).
pub fn proptest_config() -> ProptestConfig {
    ProptestConfig {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|c| c.parse().ok())
            .unwrap_or(256),
        ..ProptestConfig::default()
    }
}

pub const WORLDS: [&str; 7] = [
    "10.0.0.0/8",
    "10.1.0.0/16",
    "10.1.2.0/24",
    "10.1.2.3/32",
    "192.168.0.0/16",
    "fd00::/16",
    "fd00:1::/32",
];
pub const HOSTS: [&str; 6] = [
    "10.1.2.3",
    "10.1.2.4",
    "10.2.0.5",
    "192.168.1.1",
    "172.16.0.1",
    "fd00:1::5",
];

/// Leaf prefixes (none holds another world prefix) pooled into world identities, as the engine
/// pools prefixes that every live entry treats alike ([`pool`]): one inside three nested
/// prefixes, a single address at a pod's address and one of the other family, others under
/// `10.0.0.0/8`, the any-address prefixes and an IPv6 prefix, so a class's prefixes sit under
/// different enclosing rules.
pub const POOLED: [&str; 7] = [
    "10.1.2.128/25",
    "172.16.0.1/32",
    "2001:db9::1/128",
    "10.3.0.0/16",
    "192.0.2.0/24",
    "fd00:2::/32",
    "2001:db8::/32",
];

/// Adds the [`POOLED`] prefixes to `store` as the engine pools them: one world identity for the
/// ranges, one for the single addresses ([`netpol_engine::Leaves`]). Returns both, in that
/// order.
pub fn pool(store: &mut IdentityStore) -> [IdentityId; 2] {
    let entries: std::sync::Arc<[netpol_engine::EntryRef]> =
        std::sync::Arc::from([(std::sync::Arc::from("pooled"), 0)]);
    let mut ids = [None, None];
    for prefix in POOLED {
        let prefix: ipnet::IpNet = prefix.parse().unwrap();
        let leaves = netpol_engine::Leaves::of(&prefix);
        let class = WorldClass::SelectedBy(entries.clone(), leaves);
        let id = store.insert_world_member(prefix, class).0;
        ids[usize::from(leaves == netpol_engine::Leaves::SingleAddresses)] = Some(id);
    }
    ids.map(|id| id.expect("both kinds pooled"))
}

#[derive(Clone, Debug)]
pub struct RandomEntry {
    pub direction: Direction,
    /// Index into the identity list, or None for the wildcard.
    pub class: Option<usize>,
    pub key: PortKey,
    pub precedence: u128,
    pub verdict: Verdict,
    pub auth: Option<AuthMode>,
}

pub fn port_key() -> impl Strategy<Value = PortKey> {
    prop_oneof![
        1 => Just(PortKey::ANY),
        4 => (
            prop::sample::select(vec![Protocol::Tcp, Protocol::Udp, Protocol::Sctp]),
            prop::sample::select(vec![0u16, 53, 80, 81, 82, 443, 1000]),
            prop::sample::select(vec![0u8, 6, 14, 15, 16]),
        )
            .prop_map(|(p, port, len)| key(Some(p), port, len)),
        1 => Just(key(Some(Protocol::Icmp), 0, 0)),
    ]
}

pub fn random_entry() -> impl Strategy<Value = RandomEntry> {
    (
        prop::sample::select(Direction::BOTH.to_vec()),
        prop::option::weighted(0.75, 0..WORLDS.len() + HOSTS.len() + 4),
        port_key(),
        0..6u128,
        prop::sample::select(vec![Verdict::Allow, Verdict::Deny]),
        prop::sample::select(vec![
            None,
            None,
            None,
            Some(AuthMode::Required),
            Some(AuthMode::Disabled),
        ]),
    )
        .prop_map(
            |(direction, class, key, precedence, verdict, auth)| RandomEntry {
                direction,
                class,
                key,
                precedence,
                verdict,
                auth: if verdict == Verdict::Allow {
                    auth
                } else {
                    None
                },
            },
        )
}

/// Whether `outer` covers `inner` within one class.
fn covers(outer: &PortKey, inner: &PortKey) -> bool {
    match (outer.protocol, inner.protocol) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some(a), Some(b)) => {
            a == b
                && outer.len <= inner.len
                && netpol_engine::portprefix::mask(inner.port, outer.len) == outer.port
        }
    }
}

pub fn build(entries: &[RandomEntry], roots: [(u128, Verdict); 2]) -> (MapState, IdentityStore) {
    let (mut store, ids) = store_with(&WORLDS, &HOSTS);
    let mut order: Vec<IdentityId> = ["0.0.0.0/0", "::/0"]
        .iter()
        .chain(WORLDS.iter())
        .chain(HOSTS.iter())
        .map(|n| ids[*n])
        .collect();
    order.extend(pool(&mut store));
    let mut classes: HashMap<(Direction, Option<IdentityId>), HashMap<PortKey, MapValue>> =
        HashMap::new();
    for (d, (precedence, verdict)) in Direction::BOTH.into_iter().zip(roots) {
        classes
            .entry((d, None))
            .or_default()
            .insert(PortKey::ANY, value(precedence, verdict, None));
    }
    for e in entries {
        let class = (e.direction, e.class.map(|i| order[i]));
        let slot = classes.entry(class).or_default();
        if class.1.is_none() && e.key == PortKey::ANY {
            continue; // keep the root
        }
        slot.insert(e.key, value(e.precedence, e.verdict, e.auth));
    }
    // The MapState invariant: no entry has a lower precedence than one covering it in its class.
    for entries in classes.values_mut() {
        let snapshot: Vec<(PortKey, u128)> =
            entries.iter().map(|(k, v)| (*k, v.precedence)).collect();
        entries.retain(|k, v| {
            !snapshot
                .iter()
                .any(|(o, p)| o != k && covers(o, k) && *p > v.precedence)
        });
    }
    let mut b = MapBuilder::default();
    for ((d, id), entries) in classes {
        for (k, v) in entries {
            b.set(d, id, k, v);
        }
    }
    (b.build(), store)
}
