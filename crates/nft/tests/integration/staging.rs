//! New sets larger than `STAGE_ELEMENTS` are created and filled ahead of the transaction that
//! references them, in transactions of at most `STAGE_ELEMENTS` elements: the kernel (the fake,
//! which keeps every element and refuses what the kernel refuses) ends with all of them, a
//! refused main transaction leaves the staged sets known (they are not sent again), and a stage
//! that fails takes back what was staged, the set it was filling included.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Mutex;

use ipnet::IpNet;
use netpol_datapath::testing::*;
use netpol_datapath::{compile_entries, CompileOptions};
use netpol_engine::mapstate::PortKey;
use netpol_engine::*;
use netpol_nft::fake::FakeNft;
use netpol_nft::programmer::{program, Known, NftBackend, NftError};
use netpol_nft::script::Table;
use netpol_nft::staging::STAGE_ELEMENTS;
use netpol_nft::Ruleset;

/// Elements of each large set: consecutive addresses from 100.64.0.0 (the first set) and on
/// (the second), none of them elsewhere.
const BIG: usize = STAGE_ELEMENTS + 7_000;

fn big_address(i: usize) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(Ipv4Addr::new(100, 64, 0, 0)) + i as u32)
}

/// Pod x/a, isolated for egress, may reach the 2 × [`BIG`] addresses (two pooled world
/// identities, one allowed on TCP, the other on UDP).
fn ruleset() -> Ruleset {
    let (mut store, _) = store_with(&[], &[]);
    let mut b = MapBuilder::new(Verdict::Allow);
    b.set(
        Direction::Egress,
        None,
        PortKey::ANY,
        value(1, Verdict::Deny, None),
    );
    for (n, protocol) in [Protocol::Tcp, Protocol::Udp].into_iter().enumerate() {
        let name = std::sync::Arc::from(format!("big{n}").as_str());
        let class =
            WorldClass::SelectedBy(std::sync::Arc::from([(name, 0)]), Leaves::SingleAddresses);
        let mut id = None;
        for i in n * BIG..(n + 1) * BIG {
            let net = IpNet::from(IpAddr::V4(big_address(i)));
            id = Some(store.insert_world_member(net, class.clone()).0);
        }
        b.set(
            Direction::Egress,
            id,
            key(Some(protocol), 0, 0),
            value(1, Verdict::Allow, None),
        );
    }
    let compiled = compile_entries(b.build().iter(), &store, &CompileOptions::default())
        .expect("the MapState compiles");
    let mut ruleset = Ruleset::default();
    ruleset.add(
        "x/a",
        vec!["10.1.0.1".parse().unwrap()],
        &compiled.rules,
        &store,
    );
    ruleset
}

/// The fake kernel, keeping every script it was sent. A `direct` one writes elements directly
/// (as the agent's libnftables backend does over netlink), recording each such call in `added`
/// rather than `sent`; the fake kernel takes the elements as a declaration.
#[derive(Default)]
struct Recording {
    kernel: FakeNft,
    sent: Mutex<Vec<String>>,
    direct: bool,
    added: Mutex<Vec<(String, usize, usize)>>,
}

impl Recording {
    fn sent(&self) -> Vec<String> {
        std::mem::take(&mut *self.sent.lock().unwrap())
    }
}

impl NftBackend for Recording {
    fn apply(&self, script: &str) -> Result<(), NftError> {
        self.sent.lock().unwrap().push(script.to_string());
        self.kernel.apply(script)
    }
    fn check(&self, script: &str) -> Result<(), NftError> {
        self.kernel.check(script)
    }
    fn chains(&self) -> Result<Option<Vec<String>>, NftError> {
        self.kernel.chains()
    }
    fn sets(&self) -> Result<Option<Vec<String>>, NftError> {
        self.kernel.sets()
    }
    fn set_contents(
        &self,
        set: &netpol_nft::ruleset::AddressSet,
    ) -> Result<Option<Vec<IpNet>>, NftError> {
        self.kernel.set_contents(set)
    }
    fn adds_elements_directly(&self) -> bool {
        self.direct
    }
    fn add_to_new_set(
        &self,
        set: &netpol_nft::ruleset::AddressSet,
        from: usize,
        count: usize,
    ) -> Result<(), NftError> {
        let fill = netpol_nft::script::render_set_fill(set, from, count);
        if !self.direct {
            return self.apply(&fill);
        }
        self.added
            .lock()
            .unwrap()
            .push((set.name.to_string(), from, count));
        self.kernel.apply(&fill)
    }
}

/// How many of the large sets' elements a script carries.
fn big_elements(script: &str) -> usize {
    script.matches("100.64.").count() + script.matches("100.65.").count()
}

/// The large sets the fake kernel holds: name and element count.
fn held_big_sets(kernel: &FakeNft) -> Vec<(String, usize)> {
    let Some(table) = kernel.table() else {
        return Vec::new();
    };
    table
        .sets
        .into_iter()
        .map(|(name, elements)| (name, elements.len()))
        .filter(|(_, n)| *n > STAGE_ELEMENTS)
        .collect()
}

#[test]
fn large_new_sets_are_filled_in_bounded_parts_before_the_chains_that_name_them() {
    let ruleset = ruleset();
    let backend = Recording::default();
    let mut known = None;
    let report = program(&backend, &mut known, &ruleset).unwrap();
    let sent = backend.sent();
    assert_eq!(sent.len(), 5, "two parts of each set, the main transaction");
    let (stages, main) = sent.split_at(4);
    for stage in stages {
        assert!(big_elements(stage) <= STAGE_ELEMENTS);
        assert!(!stage.contains("chain "));
        assert!(
            !stage.contains("add element"),
            "parts declare the set: {stage:.200}"
        );
    }
    assert_eq!(
        stages.iter().map(|s| big_elements(s)).sum::<usize>(),
        2 * BIG
    );
    assert_eq!(
        big_elements(&main[0]),
        0,
        "the main transaction names the sets"
    );
    assert!(main[0].contains("chain "));
    assert!(report.sets_added >= 2, "{report:?}");
    let held = held_big_sets(&backend.kernel);
    assert_eq!(held.len(), 2);
    assert!(held.iter().all(|(_, n)| *n == BIG), "{held:?}");
    let table = Table::new(&ruleset).unwrap();
    let mut want: Vec<&str> = table.names().collect();
    let mut have = backend.kernel.chains().unwrap().unwrap();
    have.sort_unstable();
    want.sort_unstable();
    assert_eq!(have, want);

    // Nothing changed: nothing is sent.
    program(&backend, &mut known, &ruleset).unwrap();
    assert!(backend.sent().is_empty());

    // A restart reads the large sets back rather than refilling them: nothing is sent either.
    let restart = program(&backend, &mut None, &ruleset).unwrap();
    assert!(backend.sent().is_empty(), "{restart:?}");
    // A large set changed while the agent was down is patched by its difference.
    let gone = big_address(5).to_string();
    let (holder, _) = backend
        .kernel
        .table()
        .unwrap()
        .sets
        .into_iter()
        .find(|(_, elements)| elements.contains(&gone))
        .unwrap();
    backend
        .kernel
        .apply(&format!(
            "delete element inet netpol {holder} {{ {gone} }}\n"
        ))
        .unwrap();
    backend.sent();
    program(&backend, &mut None, &ruleset).unwrap();
    let sent = backend.sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(big_elements(&sent[0]), 1, "{}", sent[0]);
    assert!(held_big_sets(&backend.kernel)
        .iter()
        .all(|(_, n)| *n == BIG));
}

#[test]
fn a_refused_main_transaction_keeps_the_staged_sets_known_and_they_are_not_sent_again() {
    let ruleset = ruleset();
    let backend = Recording::default();
    backend.kernel.poison("chain ");
    let mut known = None;
    let refused = program(&backend, &mut known, &ruleset);
    assert!(refused.is_err());
    let held = held_big_sets(&backend.kernel);
    assert_eq!(held.len(), 2, "the staged sets stay");
    for (name, _) in &held {
        assert!(
            known
                .as_ref()
                .is_some_and(|k: &Known| k.sets.contains_key(name)),
            "the programmer knows the kernel holds {name}"
        );
    }
    backend.sent();

    backend.kernel.heal();
    program(&backend, &mut known, &ruleset).unwrap();
    let sent = backend.sent();
    assert_eq!(sent.len(), 1, "only the main transaction");
    assert_eq!(big_elements(&sent[0]), 0);
    assert!(backend.kernel.chain_names().is_some_and(|c| !c.is_empty()));

    // When no chain names them any more, they are deleted.
    program(&backend, &mut known, &Ruleset::default()).unwrap();
    assert_eq!(held_big_sets(&backend.kernel), Vec::new());
}

#[test]
fn a_stage_that_fails_takes_back_the_sets_staged_before_it() {
    let ruleset = ruleset();
    // The second part of the second set staged (sets go in the order of their names).
    let trial = Recording::default();
    program(&trial, &mut None, &ruleset).unwrap();
    let last_part = trial.sent().swap_remove(3);
    let element = last_part
        .split(", ")
        .nth(100)
        .expect("the part lists its elements");
    let backend = Recording::default();
    backend.kernel.poison(&format!(", {element}, "));
    let mut known = None;
    let failed = program(&backend, &mut known, &ruleset);
    assert!(failed.is_err());
    let sent = backend.sent();
    assert_eq!(sent.len(), 5, "three parts, the refused one, the deletion");
    assert_eq!(
        sent[4]
            .lines()
            .filter(|l| l.starts_with("delete set "))
            .count(),
        2,
        "the whole set and the one half filled: {}",
        sent[4]
    );
    assert!(backend.kernel.table().is_none_or(|t| t.sets.is_empty()));

    backend.kernel.heal();
    program(&backend, &mut known, &ruleset).unwrap();
    assert_eq!(held_big_sets(&backend.kernel).len(), 2);
}

#[test]
fn a_declaration_that_fails_takes_back_only_the_sets_that_exist() {
    let ruleset = ruleset();
    // The first part of the second set staged: its declaration.
    let trial = Recording::default();
    program(&trial, &mut None, &ruleset).unwrap();
    let declaration = trial.sent().swap_remove(2);
    let element = declaration
        .split(", ")
        .nth(100)
        .expect("the part lists its elements");
    let backend = Recording::default();
    backend.kernel.poison(&format!(", {element}, "));
    let mut known = None;
    assert!(program(&backend, &mut known, &ruleset).is_err());
    let sent = backend.sent();
    assert_eq!(
        sent.len(),
        4,
        "two parts, the refused declaration, the deletion"
    );
    assert_eq!(
        sent[3]
            .lines()
            .filter(|l| l.starts_with("delete set "))
            .count(),
        1,
        "the whole set alone, not the one never declared: {}",
        sent[3]
    );
    assert!(backend.kernel.table().is_none_or(|t| t.sets.is_empty()));
}

#[test]
fn a_backend_that_writes_elements_directly_gets_all_but_a_few_in_one_call() {
    use netpol_nft::staging::DECLARED_ELEMENTS;
    let ruleset = ruleset();
    let backend = Recording {
        direct: true,
        ..Recording::default()
    };
    program(&backend, &mut None, &ruleset).unwrap();
    let sent = backend.sent();
    assert_eq!(
        sent.len(),
        3,
        "a declaration of each set, the main transaction"
    );
    for declaration in &sent[..2] {
        assert_eq!(big_elements(declaration), DECLARED_ELEMENTS);
        assert!(!declaration.contains("chain "));
    }
    let added = backend.added.lock().unwrap().clone();
    assert_eq!(added.len(), 2, "{added:?}");
    assert!(added
        .iter()
        .all(|(_, from, count)| (*from, *count) == (DECLARED_ELEMENTS, BIG - DECLARED_ELEMENTS)));
    let held = held_big_sets(&backend.kernel);
    assert_eq!(held.len(), 2);
    assert!(held.iter().all(|(_, n)| *n == BIG), "{held:?}");
}
