//! The naive expansion the original plan describes, counted for comparison: one rule per remote
//! peer and port, with every port of a range a rule of its own (as Azure NPM expands `endPort`).

use netpol_engine::mapstate::MapKey;

/// How many rules the naive expansion emits for one MapState entry: one per port the key
/// covers, or one for a key that matches every port.
pub fn naive_rule_count(key: &MapKey) -> usize {
    if key.protocol.is_none() || key.port_prefix_len == 0 {
        1
    } else {
        1usize << (16 - u32::from(key.port_prefix_len.min(16)))
    }
}

/// The naive expansion's rule count for a whole MapState, per direction.
pub fn naive_rule_counts(map: &netpol_engine::MapState) -> netpol_datapath::RuleCount {
    let mut count = netpol_datapath::RuleCount::default();
    for (key, _) in map.iter() {
        count.add(key.direction, naive_rule_count(&key));
    }
    count
}
