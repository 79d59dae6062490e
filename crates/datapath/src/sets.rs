//! From symbolic remote sets to addresses, through the ipcache ([`IdentityStore`]).
//!
//! A [`RemoteSet`] names identities; its addresses are their members of the set's family. Where
//! a world identity of the set holds another identity of the set (a pod inside a CIDR both
//! allowed at one level, or a longer prefix inside a shorter one), the inner one adds nothing:
//! the outer prefix already matches its addresses. Leaving inner members out keeps a set's
//! addresses disjoint, which nftables' interval sets require, and keeps it small.
//!
//! Whether a world identity holds another is the same for every member of the inner identity:
//! the engine groups addresses into one identity only when the same policy prefixes hold them.
//! So an identity contributes all of its members to a set, or none, now and after any replica
//! comes or goes ([`Contribution`]).

use ipnet::IpNet;
use netpol_engine::{IdentityId, IdentityStore, PrefixSet};

use crate::ordered::{Family, RemoteSet};

/// What one identity adds to one set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Contribution {
    /// Its members of the set's family.
    Members,
    /// Nothing: a world identity of the set already holds its addresses.
    Covered,
}

fn family_matches(family: Family, net: &IpNet) -> bool {
    family == Family::Any || Family::of(net) == family
}

/// The world prefixes of a set, which are the only members that can hold others, as a
/// [`PrefixSet`]: whether one holds an address is a lookup per distinct prefix length, not a scan,
/// so a set of 70,000 `except` holes resolves in linear time, not quadratic.
fn world_prefixes(set: &RemoteSet, store: &IdentityStore) -> PrefixSet {
    PrefixSet::new(
        set.identities
            .iter()
            .filter_map(|id| store.get(*id).filter(|i| i.is_world()).map(|i| i.prefix))
            .filter(|prefix| family_matches(set.family, prefix)),
    )
}

/// What `id` adds to `set`, given the set's world prefixes.
fn contribution_among(
    id: IdentityId,
    worlds: &PrefixSet,
    store: &IdentityStore,
    v6: bool,
) -> Contribution {
    let Some(identity) = store.get(id) else {
        return Contribution::Covered;
    };
    let inner = if identity.is_world() {
        Some(identity.prefix)
    } else {
        store.member_of_family(id, v6)
    };
    // A world prefix is held by a strictly shorter one (it holds itself); a pod or node
    // address also by a world prefix of its own length (a `/32` naming the same address).
    let held = |inner: IpNet| {
        if identity.is_world() {
            inner.prefix_len() > 0 && worlds.holds(&inner, inner.prefix_len() - 1)
        } else {
            worlds.contains(&inner)
        }
    };
    match inner {
        Some(inner) if held(inner) => Contribution::Covered,
        _ => Contribution::Members,
    }
}

/// What `id` adds to `set`.
pub fn contribution(set: &RemoteSet, id: IdentityId, store: &IdentityStore) -> Contribution {
    contribution_among(
        id,
        &world_prefixes(set, store),
        store,
        set.family == Family::V6,
    )
}

/// The addresses of a set: disjoint prefixes, sorted.
pub fn addresses(set: &RemoteSet, store: &IdentityStore) -> Vec<IpNet> {
    let mut out = members(set, store);
    out.sort_unstable();
    out.dedup();
    out
}

/// The addresses of a set, disjoint but in no order and possibly repeated: for a caller that
/// aggregates them (which sorts), sorting here first cost half of resolving a large set.
pub fn members(set: &RemoteSet, store: &IdentityStore) -> Vec<IpNet> {
    let worlds = world_prefixes(set, store);
    let v6 = set.family == Family::V6;
    let mut out: Vec<IpNet> = Vec::new();
    for id in &set.identities {
        if contribution_among(*id, &worlds, store, v6) == Contribution::Members {
            out.extend(
                store
                    .members(*id)
                    .iter()
                    .filter(|m| family_matches(set.family, m)),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use netpol_engine::{Identity, Labels, PodInfo};

    fn pod(name: &str) -> PodInfo {
        PodInfo {
            namespace: "ns".into(),
            name: name.into(),
            labels: Labels::new().into(),
            namespace_labels: Labels::new().into(),
            node: None,
            ports: Vec::new(),
        }
    }

    #[test]
    fn members_inside_a_prefix_of_the_set_add_nothing() {
        let mut store = IdentityStore::new();
        let (wide, _) = store.insert(Identity::world("10.0.0.0/8".parse().unwrap()));
        let (narrow, _) = store.insert(Identity::world("10.1.0.0/16".parse().unwrap()));
        let (inside, _) = store.insert(Identity::pod(pod("a"), "10.1.2.3".parse().unwrap()));
        let (outside, _) = store.insert(Identity::pod(pod("b"), "192.168.0.1".parse().unwrap()));
        let (v6, _) = store.insert(Identity::pod(pod("c"), "fd00::1".parse().unwrap()));
        let set = RemoteSet {
            family: Family::V4,
            identities: vec![wide, narrow, inside, outside, v6],
        };
        assert_eq!(
            addresses(&set, &store),
            vec![
                "10.0.0.0/8".parse::<IpNet>().unwrap(),
                "192.168.0.1/32".parse().unwrap()
            ]
        );
        assert_eq!(contribution(&set, inside, &store), Contribution::Covered);
        assert_eq!(contribution(&set, narrow, &store), Contribution::Covered);
        assert_eq!(contribution(&set, outside, &store), Contribution::Members);
        let alone = RemoteSet {
            family: Family::V4,
            identities: vec![narrow, inside],
        };
        assert_eq!(
            addresses(&alone, &store),
            vec!["10.1.0.0/16".parse::<IpNet>().unwrap()]
        );
    }
}
