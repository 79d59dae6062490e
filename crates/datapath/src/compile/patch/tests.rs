use super::*;
use crate::compile::{compile_endpoint_indexed, compile_endpoint_with, CompileOptions};
use crate::testing::*;
use netpol_engine::mapstate::MapState;
use netpol_engine::*;
use proptest::prelude::*;
use std::collections::BTreeSet;
use std::net::IpAddr;

/// A pod identity of its own at `address` (a new label set).
fn new_pod(store: &mut IdentityStore, name: &str, address: &str) -> IdentityId {
    let address: IpAddr = address.parse().unwrap();
    let cidrs = store
        .world_prefixes()
        .map(|(p, _)| p)
        .filter(|p| p.contains(&address))
        .collect();
    store
        .insert_shared(Identity::pod(pod_info(name), address), cidrs)
        .0
}

/// `map` with identity `id` given, in `direction`, the class `like` has (the same allocation,
/// or an equal copy as an incremental recompute computes it), or no class.
fn with_class_of(
    map: &MapState,
    direction: Direction,
    id: IdentityId,
    like: Option<IdentityId>,
    share: bool,
) -> MapState {
    let mut map = map.clone();
    let mut changes = Vec::new();
    let entries = like
        .and_then(|like| map.class((direction, Some(like))).cloned())
        .unwrap_or_default();
    if share {
        map.replace_class_shared((direction, Some(id)), entries, &mut changes);
    } else {
        let copy = entries.iter().map(|(k, v)| (*k, v.clone())).collect();
        map.replace_class((direction, Some(id)), copy, &mut changes);
    }
    map
}

/// `map` without any class of `id`.
fn without(map: &MapState, id: IdentityId) -> MapState {
    let mut map = map.clone();
    let mut changes = Vec::new();
    for direction in Direction::BOTH {
        map.replace_class_shared((direction, Some(id)), ClassEntries::default(), &mut changes);
    }
    map
}

/// Patches `compiled` from `before` to `after`; where the patch applies, it must equal the full
/// compile of `after`. Returns whether it applied.
fn check(
    compiled: &(CompiledRules, CompileIndex),
    before: &MapState,
    after: &MapState,
    changed: IdentityId,
    store: &IdentityStore,
) -> Result<Option<(CompiledRules, CompileIndex)>, TestCaseError> {
    let changes = before.changes_to(after);
    let full = compile_endpoint_with(after, store, &CompileOptions::default())
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    let patched = patch(
        &compiled.0,
        &compiled.1,
        &changes,
        &BTreeSet::from([changed]),
        store,
        &mut PatchMemo::default(),
    );
    if let Some((rules, _)) = &patched {
        prop_assert_eq!(rules, &full, "patched rules differ from a full compile");
    }
    Ok(patched)
}

#[test]
fn a_pod_of_a_new_label_set_joins_the_sets_of_its_class_and_leaves_them_again() {
    let (mut store, ids) = store_with(&WORLDS, &HOSTS);
    // 172.16.0.1 lies in no world prefix: its class goes to the main list.
    let peer = ids["172.16.0.1"];
    let mut b = MapBuilder::new(Verdict::Deny);
    b.set(
        Direction::Ingress,
        Some(peer),
        key(Some(Protocol::Tcp), 80, 16),
        value(2, Verdict::Allow, None),
    );
    let before = b.build();
    let compiled = compile_endpoint_indexed(&before, &store, &CompileOptions::default()).unwrap();
    let new = new_pod(&mut store, "new", "172.31.0.9");
    let after = with_class_of(&before, Direction::Ingress, new, Some(peer), false);
    let changes = before.changes_to(&after);
    let (rules, index) = patch(
        &compiled.0,
        &compiled.1,
        &changes,
        &BTreeSet::from([new]),
        &store,
        &mut PatchMemo::default(),
    )
    .expect("a join of a class the endpoint has is patched");
    assert_eq!(
        rules,
        compile_endpoint_with(&after, &store, &CompileOptions::default()).unwrap()
    );
    let set = rules.rules[0].remotes.as_ref().unwrap();
    assert_eq!(set.identities, vec![peer, new]);

    // It leaves: back to the rules before.
    store.remove_address("172.31.0.9".parse().unwrap());
    let changes = after.changes_to(&before);
    let (back, _) = patch(
        &rules,
        &index,
        &changes,
        &BTreeSet::from([new]),
        &store,
        &mut PatchMemo::default(),
    )
    .expect("a leave from a class that keeps identities is patched");
    assert_eq!(back, compiled.0);

    // The last identity of a class leaving takes rules with it: compiled in full.
    let alone = without(&before, peer);
    let changes = before.changes_to(&alone);
    assert!(patch(
        &compiled.0,
        &compiled.1,
        &changes,
        &BTreeSet::from([peer]),
        &store,
        &mut PatchMemo::default()
    )
    .is_none());
}

#[test]
fn a_pod_inside_a_prefix_with_entries_is_compiled_in_full() {
    let (mut store, ids) = store_with(&WORLDS, &HOSTS);
    let peer = ids["172.16.0.1"];
    let wide = ids["10.0.0.0/8"];
    let mut b = MapBuilder::new(Verdict::Deny);
    for id in [peer, wide] {
        b.set(
            Direction::Egress,
            Some(id),
            key(Some(Protocol::Udp), 53, 16),
            value(2, Verdict::Allow, None),
        );
    }
    let before = b.build();
    let compiled = compile_endpoint_indexed(&before, &store, &CompileOptions::default()).unwrap();
    // Inside 10.0.0.0/8, whose rule would catch it: an exception list may be needed.
    let new = new_pod(&mut store, "new", "10.9.0.1");
    let after = with_class_of(&before, Direction::Egress, new, Some(peer), true);
    let changes = before.changes_to(&after);
    assert!(patch(
        &compiled.0,
        &compiled.1,
        &changes,
        &BTreeSet::from([new]),
        &store,
        &mut PatchMemo::default()
    )
    .is_none());
}

#[test]
fn a_pod_inside_a_prefix_joins_like_the_pods_of_its_class_in_that_prefix() {
    let (mut store, ids) = store_with(&WORLDS, &HOSTS);
    // 10.2.0.5 lies in 10.0.0.0/8 only; the prefix's rule and the pod's both allow UDP/53, so
    // the pod needs no exception list: it is in the main list, enclosed by 10.0.0.0/8.
    let peer = ids["10.2.0.5"];
    let wide = ids["10.0.0.0/8"];
    let mut b = MapBuilder::new(Verdict::Deny);
    for id in [peer, wide] {
        b.set(
            Direction::Egress,
            Some(id),
            key(Some(Protocol::Udp), 53, 16),
            value(2, Verdict::Allow, None),
        );
    }
    let before = b.build();
    let compiled = compile_endpoint_indexed(&before, &store, &CompileOptions::default()).unwrap();
    let new = new_pod(&mut store, "new", "10.9.0.1");
    let after = with_class_of(&before, Direction::Egress, new, Some(peer), false);
    let changes = before.changes_to(&after);
    let (rules, _) = patch(
        &compiled.0,
        &compiled.1,
        &changes,
        &BTreeSet::from([new]),
        &store,
        &mut PatchMemo::default(),
    )
    .expect("placed as the pods of its class in the same prefix are");
    assert_eq!(
        rules,
        compile_endpoint_with(&after, &store, &CompileOptions::default()).unwrap()
    );
    assert!(rules
        .rules
        .iter()
        .any(|r| r.remotes.as_ref().is_some_and(|s| s.contains(new))));
}

/// Where a new identity goes, in a random history step.
#[derive(Clone, Debug)]
enum Step {
    /// A pod of a new label set at one of `NEW_PODS`, with the class (in each direction) of one
    /// of the existing identities (or none), shared or copied.
    Join {
        at: usize,
        like: [Option<usize>; 2],
        share: bool,
    },
    /// An identity (a host of the fixture, or one that joined) loses every class and its
    /// address.
    Leave { which: usize },
}

const NEW_PODS: [&str; 5] = [
    "172.31.0.9",
    "172.31.0.10",
    "10.1.2.77",
    "192.168.5.5",
    "fd00:1::77",
];

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (
            0..NEW_PODS.len(),
            [
                prop::option::weighted(0.8, 0..WORLDS.len() + HOSTS.len() + 2),
                prop::option::weighted(0.8, 0..WORLDS.len() + HOSTS.len() + 2),
            ],
            any::<bool>(),
        )
            .prop_map(|(at, like, share)| Step::Join { at, like, share }),
        2 => (0..HOSTS.len() + NEW_PODS.len()).prop_map(|which| Step::Leave { which }),
    ]
}

proptest! {
    #![proptest_config(proptest_config())]

    /// Through random joins and leaves of pods (new label sets sharing an existing identity's
    /// class, or none), wherever a patch applies it equals compiling the new MapState in full,
    /// and the patched index keeps patching correctly.
    #[test]
    fn patched_rules_equal_a_full_compile(
        entries in prop::collection::vec(random_entry(), 0..24),
        roots in prop::array::uniform2((0..3u128, prop::sample::select(vec![Verdict::Allow, Verdict::Deny]))),
        steps in prop::collection::vec(step(), 1..8),
    ) {
        let (mut map, mut store) = build(&entries, roots);
        let mut ids: Vec<IdentityId> = store.iter().map(|(id, _)| id).collect();
        let mut compiled = compile_endpoint_indexed(&map, &store, &CompileOptions::default())
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let mut joined: Vec<Option<(IdentityId, IpAddr)>> = vec![None; NEW_PODS.len()];
        for step in steps {
            let (changed, next) = match step {
                Step::Join { at, like, share } => {
                    if joined[at].is_some() {
                        continue;
                    }
                    let address: IpAddr = NEW_PODS[at].parse().unwrap();
                    let id = new_pod(&mut store, &format!("new{at}"), NEW_PODS[at]);
                    joined[at] = Some((id, address));
                    let mut next = map.clone();
                    for (direction, like) in Direction::BOTH.into_iter().zip(like) {
                        let like = like.map(|i| ids[i % ids.len()]);
                        next = with_class_of(&next, direction, id, like, share);
                    }
                    ids.push(id);
                    (id, next)
                }
                Step::Leave { which } => {
                    let (id, address) = if which < HOSTS.len() {
                        let address: IpAddr = HOSTS[which].parse().unwrap();
                        match store.resolve(address).filter(|id| store.host(address) == Some(*id)) {
                            Some(id) => (id, address),
                            None => continue,
                        }
                    } else {
                        match joined[which - HOSTS.len()].take() {
                            Some(pair) => pair,
                            None => continue,
                        }
                    };
                    store.remove_address(address);
                    (id, without(&map, id))
                }
            };
            let patched = check(&compiled, &map, &next, changed, &store)?;
            compiled = match patched {
                Some(p) => p,
                None => compile_endpoint_indexed(&next, &store, &CompileOptions::default())
                    .map_err(|e| TestCaseError::fail(e.to_string()))?,
            };
            map = next;
        }
    }
}
