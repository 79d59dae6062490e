//! Precedence numbers. Every MapState entry carries one number; the higher wins.
//!
//! A plain entry's number is its *level*: the rank of its (tier, priority, verdict) order key
//! among all order keys in the policy set, best first, so that levels of different tiers never
//! interleave. Pass is resolved by *lifting*: for the key space a Pass covers, the entries of the
//! lower tiers are copied in just under the Pass's own level. A lifted entry's number is the Pass
//! level followed by the lifted entry's own number, shifted down one 32-bit digit. Tiers nest at
//! most four deep (three tiers plus the default), so a u128 of four digits always suffices.

use std::collections::BTreeSet;

use crate::entry::{OrderKey, Priority, Tier, Verdict};

/// One 128-bit precedence: four 32-bit digits, most significant first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Precedence(pub u128);

impl Precedence {
    /// The default allow at the very bottom.
    pub const ROOT: Precedence = Precedence(0);

    pub fn plain(level: u32) -> Self {
        Precedence(u128::from(level) << 96)
    }

    /// The number of a lower-tier entry copied under a Pass at `pass_level`.
    pub fn lifted(pass_level: u32, lower: Precedence) -> Self {
        debug_assert!(lower.0 & 0xffff_ffff == 0, "passes nest at most four deep");
        Precedence((u128::from(pass_level) << 96) | (lower.0 >> 32))
    }
}

/// The order key that isolation in `tier` acts with: below every rule of the tier.
pub fn isolation_key(tier: Tier) -> OrderKey {
    OrderKey {
        tier,
        priority: Priority::new(u32::MAX, String::new(), u32::MAX),
        verdict: Verdict::Deny,
    }
}

/// Levels of all order keys in a policy set.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Levels {
    keys: Vec<OrderKey>,
}

impl Levels {
    /// Ranks `keys` (plus the isolation key of every tier).
    pub fn new(keys: impl IntoIterator<Item = OrderKey>) -> Self {
        let mut set: BTreeSet<OrderKey> = keys.into_iter().collect();
        set.extend(Tier::ALL.map(isolation_key));
        Levels {
            keys: set.into_iter().collect(),
        }
    }

    /// The level of `key`: `len` for the best key down to 1 for the worst; 0 is the root.
    /// Unknown keys rank where they would sort, which keeps the order total.
    pub fn level(&self, key: &OrderKey) -> u32 {
        let index = match self.keys.binary_search(key) {
            Ok(i) | Err(i) => i,
        };
        (self.keys.len() - index) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lifted_entries_sit_between_the_pass_and_the_next_level() {
        // The Pass itself never reaches a map: its lifted entries take its slot, above the next
        // level down and below the next level up.
        let below_pass = Precedence::plain(9);
        let lifted_high = Precedence::lifted(10, Precedence::plain(5));
        let lifted_low = Precedence::lifted(10, Precedence::ROOT);
        assert!(lifted_high > lifted_low);
        assert!(lifted_low > below_pass);
        assert!(lifted_high < Precedence::plain(11));
        let nested = Precedence::lifted(10, Precedence::lifted(3, Precedence::ROOT));
        assert!(nested > lifted_low && nested < lifted_high);
    }

    #[test]
    fn levels_follow_tier_then_priority_then_verdict() {
        let k = |tier, value, verdict| OrderKey {
            tier,
            priority: Priority::new(value, "p", 0),
            verdict,
        };
        let levels = Levels::new([
            k(Tier::Baseline, 0, Verdict::Allow),
            k(Tier::Admin, 5, Verdict::Allow),
            k(Tier::Admin, 5, Verdict::Deny),
            k(Tier::Normal, 0, Verdict::Allow),
        ]);
        let l = |key: OrderKey| levels.level(&key);
        assert!(l(k(Tier::Admin, 5, Verdict::Deny)) > l(k(Tier::Admin, 5, Verdict::Allow)));
        assert!(l(k(Tier::Admin, 5, Verdict::Allow)) > l(isolation_key(Tier::Admin)));
        assert!(l(isolation_key(Tier::Admin)) > l(k(Tier::Normal, 0, Verdict::Allow)));
        assert!(l(isolation_key(Tier::Normal)) > l(k(Tier::Baseline, 0, Verdict::Allow)));
        assert!(l(isolation_key(Tier::Baseline)) >= 1);
    }
}
