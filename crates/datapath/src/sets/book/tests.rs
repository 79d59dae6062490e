use super::*;
use crate::sets::addresses;
use netpol_engine::Shared;
use netpol_engine::{Identity, Labels, PodInfo};
use proptest::prelude::*;
use std::collections::BTreeMap;

fn net(text: &str) -> IpNet {
    text.parse().unwrap()
}

fn host(h: u8) -> std::net::IpAddr {
    [10, 0, 0, h].into()
}

fn labelled(app: u8, h: u8) -> Identity {
    let info = PodInfo {
        namespace: "ns".into(),
        name: format!("p{h}"),
        labels: Labels::from([("app".to_string(), app.to_string())]).into(),
        namespace_labels: Labels::new().into(),
        node: None,
        ports: Vec::new(),
    };
    Identity::pod(info, host(h))
}

/// A namer that spells a set out, salted after a `#`.
fn spelled(set: &RemoteSet, _: &IdentityStore, salt: u32) -> String {
    let ids: Vec<String> = set.identities.iter().map(|id| id.0.to_string()).collect();
    let base = format!("{:?}:{}", set.family, ids.join(","));
    if salt == 0 {
        base
    } else {
        format!("{base}#{salt}")
    }
}

fn v4(identities: Vec<IdentityId>) -> Shared<RemoteSet> {
    let mut identities = identities;
    identities.sort_unstable();
    Shared::new(RemoteSet {
        family: Family::V4,
        identities,
    })
}

fn nets_of(book: &SetBook, slot: SlotId) -> Vec<IpNet> {
    book.get(slot).addresses.nets().copied().collect()
}

/// A datapath that holds what the steps sent: each set by name, with its addresses and
/// revision. Refuses what a real one would: a delta deleting a missing element or adding a
/// present one, a set created twice, a set dropped that it does not hold.
#[derive(Default)]
struct Shadow {
    sets: BTreeMap<String, (u64, BTreeSet<IpNet>)>,
}

impl Shadow {
    fn apply(&mut self, book: &SetBook, step: &SetStep) -> Result<(), String> {
        for (_, dropped) in &step.dropped {
            self.sets
                .remove(&*dropped.name)
                .ok_or_else(|| format!("dropped {} not held", dropped.name))?;
        }
        for slot in &step.created {
            let booked = book.get(*slot);
            let nets = booked.addresses.nets().copied().collect();
            if self
                .sets
                .insert(booked.name.to_string(), (booked.revision, nets))
                .is_some()
            {
                return Err(format!("created {} twice", booked.name));
            }
        }
        for (slot, delta) in &step.changed {
            let booked = book.get(*slot);
            let (revision, nets) = self
                .sets
                .get_mut(&*booked.name)
                .ok_or_else(|| format!("changed {} not held", booked.name))?;
            for net in &delta.removed {
                if !nets.remove(net) {
                    return Err(format!("{}: deleting missing {net}", booked.name));
                }
            }
            for net in &delta.added {
                if !nets.insert(*net) {
                    return Err(format!("{}: adding present {net}", booked.name));
                }
            }
            *revision = booked.revision;
        }
        Ok(())
    }

    /// Whether the datapath holds exactly the book's sets, names, addresses and revisions.
    fn agrees(&self, book: &SetBook) -> Result<(), String> {
        if self.sets.len() != book.len() {
            return Err(format!(
                "{} sets held, {} booked",
                self.sets.len(),
                book.len()
            ));
        }
        for (_, booked) in book.iter() {
            let (revision, nets) = self
                .sets
                .get(&*booked.name)
                .ok_or_else(|| format!("{} not held", booked.name))?;
            let want: BTreeSet<IpNet> = booked.addresses.nets().copied().collect();
            if *nets != want || *revision != booked.revision {
                return Err(format!("{} differs", booked.name));
            }
        }
        Ok(())
    }
}

#[test]
fn a_replica_is_one_address_in_each_set_naming_its_identity() {
    let mut store = IdentityStore::new();
    let (web, _) = store.insert_shared(labelled(1, 1), vec![]);
    let (world, _) = store.insert(Identity::world(net("10.1.0.0/16")));
    let (both, web_only) = (v4(vec![web, world]), v4(vec![web]));
    let mut book = SetBook::default();
    let step = book.step(
        &store,
        &BTreeSet::new(),
        [&both, &web_only, &web_only],
        [],
        &mut spelled,
    );
    assert_eq!(step.created.len(), 2);
    store.insert_shared(labelled(1, 2), vec![]);
    let step = book.step(&store, &BTreeSet::from([web]), [], [], &mut spelled);
    assert!(step.created.is_empty() && step.dropped.is_empty());
    assert_eq!(step.changed.len(), 2);
    for (_, delta) in &step.changed {
        assert_eq!(delta.added, vec![net("10.0.0.2/32")]);
        assert!(delta.removed.is_empty());
    }
    let slot = book.slot_of(&both).unwrap();
    assert_eq!(
        nets_of(&book, slot),
        vec![net("10.0.0.1/32"), net("10.0.0.2/32"), net("10.1.0.0/16")]
    );
    // Unchanged members change nothing.
    let step = book.step(&store, &BTreeSet::from([web, world]), [], [], &mut spelled);
    assert!(step.is_empty());
}

#[test]
fn a_pod_of_a_new_label_set_takes_over_the_name_of_the_set_it_joins() {
    let mut store = IdentityStore::new();
    let web = store.insert_shared(labelled(1, 1), vec![]).0;
    let db = store.insert_shared(labelled(2, 2), vec![]).0;
    let before = v4(vec![web, db]);
    let mut book = SetBook::default();
    book.step(
        &store,
        &BTreeSet::new(),
        [&before, &before],
        [],
        &mut spelled,
    );
    let name = book.name_of(&before).unwrap().clone();
    let slot = book.slot_of(&before).unwrap();

    // A pod of a new label set arrives; both rules naming the set now name it with the pod.
    let new = store.insert_shared(labelled(3, 3), vec![]).0;
    let after = v4(vec![web, db, new]);
    let step = book.step(
        &store,
        &BTreeSet::from([new]),
        [&after, &after],
        [&before, &before],
        &mut spelled,
    );
    assert_eq!(step.taken_over, 1);
    assert!(step.created.is_empty() && step.dropped.is_empty());
    assert_eq!(step.changed.len(), 1);
    assert_eq!(step.changed[0].0, slot);
    assert_eq!(step.changed[0].1.added, vec![net("10.0.0.3/32")]);
    assert_eq!(book.name_of(&after), Some(&name));
    assert!(book.slot_of(&before).is_none());
    assert_eq!(nets_of(&book, slot), addresses(&after, &store));

    // The pod goes: its identity leaves the store, and the set without it takes the name back.
    store.remove_address(host(3));
    let step = book.step(
        &store,
        &BTreeSet::from([new]),
        [&before, &before],
        [&after, &after],
        &mut spelled,
    );
    assert_eq!(step.taken_over, 1);
    assert_eq!(book.name_of(&before), Some(&name));
    assert_eq!(nets_of(&book, slot), addresses(&before, &store));
    assert_eq!(step.changed.len(), 1);
    assert_eq!(step.changed[0].1.removed, vec![net("10.0.0.3/32")]);
}

#[test]
fn a_set_still_in_use_keeps_its_name_and_the_new_one_gets_its_own() {
    let mut store = IdentityStore::new();
    let web = store.insert_shared(labelled(1, 1), vec![]).0;
    let before = v4(vec![web]);
    let mut book = SetBook::default();
    book.step(
        &store,
        &BTreeSet::new(),
        [&before, &before],
        [],
        &mut spelled,
    );
    let new = store.insert_shared(labelled(3, 3), vec![]).0;
    let after = v4(vec![web, new]);
    // One of the two rules naming the set now names the new one.
    let step = book.step(
        &store,
        &BTreeSet::from([new]),
        [&after],
        [&before],
        &mut spelled,
    );
    assert_eq!(step.taken_over, 0);
    assert_eq!(step.created.len(), 1);
    assert!(step.dropped.is_empty());
    assert_ne!(book.name_of(&after), book.name_of(&before));
}

/// A world class of single addresses, selected by the live entry `policy`.
fn addresses_class(store: &mut IdentityStore, policy: &str, addresses: &[&str]) -> IdentityId {
    let class = netpol_engine::WorldClass::SelectedBy(
        std::sync::Arc::from([(std::sync::Arc::from(policy), 0)]),
        netpol_engine::Leaves::SingleAddresses,
    );
    let mut id = None;
    for address in addresses {
        id = Some(store.insert_world_member(net(address), class.clone()).0);
    }
    id.expect("addresses")
}

#[test]
fn a_class_of_addresses_joining_a_set_of_addresses_takes_its_name_over_with_its_own() {
    let mut store = IdentityStore::new();
    let first = addresses_class(&mut store, "p", &["192.0.2.1/32", "192.0.2.7/32"]);
    let before = v4(vec![first]);
    let mut book = SetBook::default();
    book.step(&store, &BTreeSet::new(), [&before], [], &mut spelled);
    let name = book.name_of(&before).unwrap().to_string();
    let second = addresses_class(&mut store, "q", &["198.51.100.3/32", "198.51.100.4/32"]);
    let after = v4(vec![first, second]);
    let step = book.step(
        &store,
        &BTreeSet::from([second]),
        [&after],
        [&before],
        &mut spelled,
    );
    assert_eq!(step.taken_over, 1);
    assert!(step.created.is_empty() && step.dropped.is_empty());
    assert_eq!(book.name_of(&after).unwrap().to_string(), name);
    let slot = book.slot_of(&after).unwrap();
    assert_eq!(step.changed.len(), 1);
    let (changed, delta) = &step.changed[0];
    assert_eq!(*changed, slot);
    assert_eq!(
        delta.added,
        [net("198.51.100.3/32"), net("198.51.100.4/32")]
    );
    assert!(delta.removed.is_empty());
    // And back: the class leaving takes its addresses with it, under the same name.
    let step = book.step(
        &store,
        &BTreeSet::from([second]),
        [&before],
        [&after],
        &mut spelled,
    );
    assert_eq!(step.taken_over, 1);
    assert_eq!(book.name_of(&before).unwrap().to_string(), name);
    assert_eq!(
        step.changed[0].1.removed,
        [net("198.51.100.3/32"), net("198.51.100.4/32")]
    );
}

#[test]
fn a_range_joining_a_set_with_ranges_takes_it_over_and_holds_the_pod_inside() {
    let mut store = IdentityStore::new();
    let web = store.insert_shared(labelled(1, 1), vec![]).0;
    let wide = store.insert(Identity::world(net("192.168.0.0/16"))).0;
    let before = v4(vec![web, wide]);
    let mut book = SetBook::default();
    book.step(&store, &BTreeSet::new(), [&before], [], &mut spelled);
    let around_web = store.insert(Identity::world(net("10.0.0.0/24"))).0;
    let after = v4(vec![web, wide, around_web]);
    let step = book.step(
        &store,
        &BTreeSet::from([around_web]),
        [&after],
        [&before],
        &mut spelled,
    );
    assert_eq!(step.taken_over, 1);
    let (_, delta) = &step.changed[0];
    // The pod's own address is inside the new prefix: the prefix stands for it.
    assert_eq!(delta.added, [net("10.0.0.0/24")]);
    assert_eq!(delta.removed, [net("10.0.0.1/32")]);
    let slot = book.slot_of(&after).unwrap();
    assert_eq!(
        nets_of(&book, slot),
        [net("10.0.0.0/24"), net("192.168.0.0/16")]
    );
}

#[test]
fn a_range_joining_a_set_of_single_addresses_makes_a_set_of_its_own() {
    let mut store = IdentityStore::new();
    let web = store.insert_shared(labelled(1, 1), vec![]).0;
    let before = v4(vec![web]);
    let mut book = SetBook::default();
    book.step(&store, &BTreeSet::new(), [&before], [], &mut spelled);
    let world = store.insert(Identity::world(net("10.0.0.0/24"))).0;
    let after = v4(vec![web, world]);
    let step = book.step(
        &store,
        &BTreeSet::from([world]),
        [&after],
        [&before],
        &mut spelled,
    );
    assert_eq!(step.taken_over, 0);
    assert_eq!((step.created.len(), step.dropped.len()), (1, 1));
    assert_eq!(
        nets_of(&book, book.slot_of(&after).unwrap()),
        vec![net("10.0.0.0/24")]
    );
}

#[test]
fn a_canonical_name_held_by_a_set_that_took_it_over_is_salted() {
    let mut store = IdentityStore::new();
    let web = store.insert_shared(labelled(1, 1), vec![]).0;
    let a = v4(vec![web]);
    let mut book = SetBook::default();
    book.step(&store, &BTreeSet::new(), [&a], [], &mut spelled);
    let new = store.insert_shared(labelled(2, 2), vec![]).0;
    let b = v4(vec![web, new]);
    book.step(&store, &BTreeSet::from([new]), [&b], [&a], &mut spelled);
    // `b` holds `a`'s canonical name; `a` comes back into use beside it.
    assert_eq!(&**book.name_of(&b).unwrap(), spelled(&a, &store, 0));
    let step = book.step(&store, &BTreeSet::new(), [&a], [], &mut spelled);
    assert_eq!(step.created.len(), 1);
    assert_eq!(&**book.name_of(&a).unwrap(), spelled(&a, &store, 1));
}

/// One step of a random history.
#[derive(Clone, Debug)]
enum Step {
    /// An address joins the shared identity of label `app` (a new identity when no pod has it).
    Join {
        host: u8,
        app: u8,
    },
    Leave {
        host: u8,
    },
    /// A rule of a list selects other labels (a policy change).
    Select {
        list: usize,
        rule: usize,
        apps: u8,
    },
    /// A list goes out of use, or comes back.
    Toggle {
        list: usize,
    },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0u8..24, 0u8..6).prop_map(|(host, app)| Step::Join { host, app }),
        3 => (0u8..24).prop_map(|host| Step::Leave { host }),
        1 => (0usize..3, 0usize..3, any::<u8>())
            .prop_map(|(list, rule, apps)| Step::Select { list, rule, apps }),
        1 => (0usize..3).prop_map(|list| Step::Toggle { list }),
    ]
}

/// A compiled list as the book sees it: one set per rule, of the identities whose label the
/// rule selects (bit `app` of its mask), with the world prefixes of the rule's mask's top bits.
fn list_sets(rules: &[u8], store: &IdentityStore, worlds: &[IdentityId]) -> Vec<Shared<RemoteSet>> {
    rules
        .iter()
        .filter_map(|mask| {
            let mut identities: Vec<IdentityId> = store
                .iter()
                .filter(|(_, i)| {
                    i.as_pod()
                        .and_then(|p| p.labels.get("app"))
                        .and_then(|app| app.parse::<u8>().ok())
                        .is_some_and(|app| mask & (1 << app) != 0)
                })
                .map(|(id, _)| id)
                .collect();
            if mask & 0x80 != 0 {
                identities.extend(worlds.iter().take(1));
            }
            if mask & 0x40 != 0 {
                identities.extend(worlds.iter().skip(1));
            }
            (!identities.is_empty()).then(|| v4(identities))
        })
        .collect()
}

proptest! {
    /// Through any history of joins, leaves, new and vanished label sets, policy changes and
    /// lists coming and going, what a datapath holds after applying each step is exactly the
    /// book: every set in use, by its name, with the addresses resolving it anew gives; names
    /// are unique; uses count the rules naming each set; and a pod of a new label set (or the
    /// last pod of one leaving) changes the contents of the sets it joins, never their names.
    #[test]
    fn a_datapath_following_the_steps_holds_every_set_in_use(
        worlds in proptest::collection::vec((0u8..24, 28u8..=32), 0..3),
        mut rules in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 1..4), 3),
        steps in proptest::collection::vec(step(), 1..40),
    ) {
        let mut store = IdentityStore::new();
        let worlds: Vec<IdentityId> = worlds
            .iter()
            .map(|(h, len)| store.insert(Identity::world(IpNet::new(host(*h), *len).unwrap().trunc())).0)
            .collect();
        let cidrs = |store: &IdentityStore, h: u8| -> Vec<IpNet> {
            let mut cidrs: Vec<IpNet> = store
                .world_prefixes()
                .map(|(p, _)| p)
                .filter(|p| p.contains(&host(h)))
                .collect();
            cidrs.sort();
            cidrs
        };
        let mut in_use = [true; 3];
        let lists = |rules: &[Vec<u8>], in_use: &[bool; 3], store: &IdentityStore| -> Vec<Vec<Shared<RemoteSet>>> {
            rules
                .iter()
                .zip(in_use)
                .map(|(r, used)| if *used { list_sets(r, store, &worlds) } else { Vec::new() })
                .collect()
        };
        let mut book = SetBook::default();
        let mut shadow = Shadow::default();
        let mut current = lists(&rules, &in_use, &store);
        let first = book.step(&store, &BTreeSet::new(), current.iter().flatten(), [], &mut spelled);
        shadow.apply(&book, &first).map_err(TestCaseError::fail)?;
        for step in steps {
            let mut changed = BTreeSet::new();
            match step {
                Step::Join { host: h, app } => {
                    if store.host(host(h)).is_none() {
                        let (id, _) = store.insert_shared(labelled(app, h), cidrs(&store, h));
                        changed.insert(id);
                    }
                }
                Step::Leave { host: h } => {
                    if let Some((id, _)) = store.remove_address(host(h)) {
                        changed.insert(id);
                    }
                }
                Step::Select { list, rule, apps } => {
                    let rules = &mut rules[list];
                    let at = rule % rules.len();
                    rules[at] = apps;
                }
                Step::Toggle { list } => in_use[list] = !in_use[list],
            }
            let next = lists(&rules, &in_use, &store);
            // Lists whose sets did not change stay as they are (their allocations too).
            let (mut gained, mut lost) = (Vec::new(), Vec::new());
            for (old, new) in current.iter_mut().zip(next) {
                if *old != new {
                    lost.extend(old.iter().cloned());
                    gained.extend(new.iter().cloned());
                    *old = new;
                }
            }
            let done = book.step(&store, &changed, &gained, &lost, &mut spelled);
            shadow.apply(&book, &done).map_err(TestCaseError::fail)?;
            shadow.agrees(&book).map_err(TestCaseError::fail)?;

            let mut uses: HashMap<&RemoteSet, usize> = HashMap::new();
            for set in current.iter().flatten() {
                *uses.entry(set).or_default() += 1;
            }
            prop_assert_eq!(book.len(), uses.len());
            let names: HashSet<&str> = book.iter().map(|(_, b)| &*b.name).collect();
            prop_assert_eq!(names.len(), book.len());
            for (set, count) in uses {
                let slot = book.slot_of(set).expect("every set in use is booked");
                prop_assert_eq!(book.get(slot).uses, count);
                prop_assert_eq!(nets_of(&book, slot), addresses(set, &store));
            }
            // No set is named anew where it could have taken over the name of one that went
            // out of use in the same step: differing from it only by non-world changed
            // identities.
            for slot in &done.created {
                let set = &book.get(*slot).set;
                for (_, dropped) in &done.dropped {
                    let (gone, came) = super::sorted_differences(dropped.set.identities.iter().copied(), set.identities.iter().copied());
                    let only_changed = gone.iter().chain(&came).all(|id| {
                        changed.contains(id) && !worlds.contains(id)
                    });
                    prop_assert!(
                        dropped.set.family != set.family || !only_changed,
                        "{} named anew beside {}", book.get(*slot).name, dropped.name
                    );
                }
            }
        }
    }
}
