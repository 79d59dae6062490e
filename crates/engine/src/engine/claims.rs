//! Who owns an address that more than one pod or node claims at once.
//!
//! A CNI frees a pod's address when its sandbox stops, before the API object is deleted, so the
//! next pod on the node can be given the address while the old object still lists it; the old
//! object's delete then arrives late. Nodes can share an address with a pod the same way when a
//! node is replaced. So an address may have several claimants, and exactly one of them owns it
//! (only the owner's identity is in the ipcache): the one that claimed it last in time, by the
//! object's creation time, and among equal or unknown creation times the claim that arrived last.
//! A claimant that goes away takes only its own claim; if it owned the address, the newest claim
//! left takes over, so a late delete never strips the address from its new owner and the
//! previous owner's address comes back if the newer claim goes first.
//!
//! Host-network pods claim nothing: their address is their node's.

use std::collections::HashMap;
use std::net::IpAddr;

/// When an object claimed its addresses. Greater is newer: a known creation time beats an
/// unknown one, a later one an earlier one, and then the claim that arrived later wins.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) struct ClaimRank {
    created: Option<i64>,
    arrival: u64,
}

/// An object that claims addresses: a pod by its engine key, a node by its name.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum Claimant {
    Pod(Box<str>),
    Node(Box<str>),
}

impl Claimant {
    pub(super) fn pod_key(&self) -> Option<&str> {
        match self {
            Claimant::Pod(key) => Some(key),
            Claimant::Node(_) => None,
        }
    }
}

#[derive(Clone, Debug)]
struct Claim {
    rank: ClaimRank,
    claimant: Claimant,
}

/// Every claimed address with its claims, newest first: the first claim owns the address.
#[derive(Debug, Default)]
pub(super) struct ClaimBook {
    arrivals: u64,
    addresses: HashMap<IpAddr, Vec<Claim>>,
}

impl ClaimRank {
    /// The creation time the claim was made with.
    pub(super) fn created(&self) -> Option<i64> {
        self.created
    }
}

impl ClaimBook {
    /// A rank for an object claiming addresses now, created at `created` (seconds) if known.
    pub(super) fn new_rank(&mut self, created: Option<i64>) -> ClaimRank {
        self.arrivals += 1;
        ClaimRank {
            created,
            arrival: self.arrivals,
        }
    }

    /// The rank `claimant` holds its claim on `address` with, if it has one.
    pub(super) fn rank_of(&self, address: IpAddr, claimant: &Claimant) -> Option<ClaimRank> {
        self.addresses
            .get(&address)?
            .iter()
            .find(|c| &c.claimant == claimant)
            .map(|c| c.rank)
    }

    /// Records `claimant`'s claim on `address`, replacing any claim it had there.
    pub(super) fn claim(&mut self, address: IpAddr, claimant: Claimant, rank: ClaimRank) {
        let claims = self.addresses.entry(address).or_default();
        claims.retain(|c| c.claimant != claimant);
        let at = claims.partition_point(|c| c.rank > rank);
        claims.insert(at, Claim { rank, claimant });
    }

    /// Takes `claimant`'s claim on `address` away, if it had one.
    pub(super) fn release(&mut self, address: IpAddr, claimant: &Claimant) {
        if let Some(claims) = self.addresses.get_mut(&address) {
            claims.retain(|c| &c.claimant != claimant);
            if claims.is_empty() {
                self.addresses.remove(&address);
            }
        }
    }

    /// Who owns `address`.
    pub(super) fn owner(&self, address: IpAddr) -> Option<&Claimant> {
        self.addresses
            .get(&address)
            .and_then(|claims| claims.first())
            .map(|c| &c.claimant)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(key: &str) -> Claimant {
        Claimant::Pod(key.into())
    }

    #[test]
    fn the_newest_claim_owns_and_a_late_release_of_an_older_one_changes_nothing() {
        let mut book = ClaimBook::default();
        let address: IpAddr = "10.1.2.5".parse().unwrap();
        let old = book.new_rank(Some(100));
        book.claim(address, pod("y/old"), old);
        let new = book.new_rank(Some(200));
        book.claim(address, pod("y/new"), new);
        assert_eq!(book.owner(address), Some(&pod("y/new")));
        book.release(address, &pod("y/old"));
        assert_eq!(book.owner(address), Some(&pod("y/new")));
    }

    #[test]
    fn creation_time_beats_arrival_order_and_the_previous_owner_comes_back() {
        let mut book = ClaimBook::default();
        let address: IpAddr = "10.1.2.5".parse().unwrap();
        // The newer pod's event arrives first: it still owns the address when the older one's
        // (stale) event arrives after it.
        let new = book.new_rank(Some(200));
        book.claim(address, pod("y/new"), new);
        let old = book.new_rank(Some(100));
        book.claim(address, pod("y/old"), old);
        assert_eq!(book.owner(address), Some(&pod("y/new")));
        book.release(address, &pod("y/new"));
        assert_eq!(book.owner(address), Some(&pod("y/old")));
        book.release(address, &pod("y/old"));
        assert_eq!(book.owner(address), None);
        assert!(book.addresses.is_empty());
    }

    #[test]
    fn without_creation_times_the_later_claim_wins_and_keeps_its_rank_when_renewed() {
        let mut book = ClaimBook::default();
        let address: IpAddr = "10.1.2.5".parse().unwrap();
        let first = book.new_rank(None);
        book.claim(address, pod("a"), first);
        let second = book.new_rank(None);
        book.claim(address, pod("b"), second);
        assert_eq!(book.owner(address), Some(&pod("b")));
        // `a` is updated (relabelled): it keeps the rank it claimed with, so it does not win.
        let kept = book.rank_of(address, &pod("a")).unwrap();
        book.claim(address, pod("a"), kept);
        assert_eq!(book.owner(address), Some(&pod("b")));
        // A known creation time is newer than an unknown one.
        let node = book.new_rank(Some(1));
        book.claim(address, Claimant::Node("n1".into()), node);
        assert_eq!(book.owner(address), Some(&Claimant::Node("n1".into())));
    }
}
