//! proptest: the would-denies of netpol's nftables table (audit chains) are exactly the
//! reference evaluator's (`netpol_engine::audit::decide_audited`), rule for rule.
//!
//! Random pods and entries (a quarter audited, the engine's own generator) go into an engine
//! that keeps audited entries, as the agent's does; each local endpoint's enforced map and
//! would-be map are compiled and built into the table with audit chains; then, for every local
//! address, remote address, direction and probe, the endpoint's chain (and its audit chain) is
//! run with nftables semantics and compared with both reference verdicts:
//! - the enforced chain allows exactly what the reference's enforced verdict allows;
//! - the audit chain meets a would-deny exactly where the enforced verdict allows and the
//!   would-be verdict denies (audited allows shadowing audited denies included).
//!
//! Which rule a would-deny names is compared in the tests below, not here: the compiler merges
//! the entries of one level (consecutive entries of one action) into as few rules as it can,
//! each named by the best-ranked entry it carries (`netpol_datapath::compile::levels`), so a
//! flow decided by a lower-ranked entry of a merged rule is counted under the rule's name, for
//! denies and would-denies alike.
//!
//! "Allows" is the datapath's: an allow that requires authentication is compiled as a block
//! (no datapath of netpol's authenticates), so it counts as a deny in both views, and an
//! audited one is a would-deny (what the datapath would do were the policy enforced).
//! Case counts come from PROPTEST_CASES (default 256); a failure prints proptest's seed file.

use crate::common;

use common::*;
use netpol_datapath::{compile_entries, CompileOptions};
use netpol_engine::reference::{Decision, Reason};
use netpol_engine::*;
use netpol_nft::eval::{evaluate_side, Packet};
use netpol_nft::labels::RuleLabels;
use netpol_nft::{ChainVerdict, Ruleset};
use proptest::prelude::*;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|c| c.parse().ok())
            .unwrap_or(256),
        ..ProptestConfig::default()
    }
}

/// Whether the datapath lets a decision through: an allow requiring authentication is a block.
fn passes(decision: &Decision) -> bool {
    decision.allowed() && decision.auth != Some(AuthMode::Required)
}

/// The labels a would-deny is counted and logged under, from the rule's reason.
fn labels(reason: &Reason, direction: Direction) -> RuleLabels {
    RuleLabels::of(reason, direction, ChainVerdict::WouldDeny)
}

/// The table of every local endpoint, with audit chains where an audited entry selects it.
fn table(engine: &Engine) -> Result<Ruleset, String> {
    let store = engine.identities();
    let options = CompileOptions::default();
    let mut ruleset = Ruleset::default();
    for (key, map) in engine.endpoints() {
        let addresses = engine.endpoint_pod(key).unwrap().1.to_vec();
        let rules = compile_entries(map.iter(), store, &options).map_err(|e| e.to_string())?;
        let would_be = match engine.would_be_map(key) {
            Some(map) => {
                compile_entries(map.iter(), store, &options)
                    .map_err(|e| e.to_string())?
                    .rules
            }
            None => rules.rules.clone(),
        };
        ruleset.add_audited(key, addresses, &rules.rules, &would_be, store);
    }
    Ok(ruleset)
}

/// The first flow direction where the table and the reference disagree.
fn first_mismatch(engine: &Engine, entries: &[PolicyEntry]) -> Option<String> {
    let ruleset = match table(engine) {
        Ok(ruleset) => ruleset,
        Err(e) => return Some(format!("compile failed: {e}")),
    };
    let mut store = engine.per_address_store();
    for prefix in entries
        .iter()
        .flat_map(|e| &e.peers)
        .flat_map(Peer::prefixes)
    {
        store.insert(Identity::world(prefix));
    }
    let reference = flow::ReferenceOracle {
        entries,
        store: &store,
    };
    let representatives = ByAddress::new(&store, ());
    let mut remotes: Vec<IdentityId> = store.iter().map(|(id, _)| id).collect();
    remotes.extend(
        OUTSIDE
            .iter()
            .filter_map(|ip| store.resolve(ip.parse().unwrap())),
    );
    for (key, chains) in &ruleset.endpoints {
        for &address in &chains.addresses {
            let endpoint = store.resolve(address).unwrap();
            for &remote in &remotes {
                let Some(remote_address) = representatives.address_of(remote) else {
                    continue;
                };
                if engine
                    .endpoint_pod(key)
                    .unwrap()
                    .1
                    .contains(&remote_address)
                {
                    continue; // a pod's own address is no policy's business
                }
                for direction in Direction::BOTH {
                    for (protocol, port) in PROBES {
                        let (source, destination) = match direction {
                            Direction::Ingress => (remote_address, address),
                            Direction::Egress => (address, remote_address),
                        };
                        let packet = Packet {
                            source,
                            destination,
                            protocol,
                            dport: port,
                        };
                        let side = evaluate_side(&ruleset, chains, direction, &packet);
                        let got_passes = side.rule.is_none_or(|r| r.verdict != ChainVerdict::Drop);
                        let got = side.would_deny.map(|r| labels(&r.reason, direction));
                        let want =
                            reference.decide_audited(endpoint, direction, remote, protocol, port);
                        let want_passes = passes(&want.enforced);
                        let would_deny = want_passes && !passes(&want.would_be);
                        if got_passes != want_passes || got.is_some() != would_deny {
                            return Some(format!(
                                "{key} {direction} {} {protocol}/{port}: nft passes={got_passes} \
                                 would-deny={got:?}; reference enforced {:?} ({}), would-be {:?} \
                                 ({})",
                                store.get(remote).unwrap(),
                                want.enforced.verdict,
                                want.enforced.reason,
                                want.would_be.verdict,
                                want.would_be.reason,
                            ));
                        }
                    }
                }
            }
        }
    }
    None
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn audit_chains_would_deny_exactly_what_the_reference_would_deny(
        pods in prop::collection::vec(pod_spec(), 1..6),
        entries in entries(8),
        on_node in any::<bool>(),
    ) {
        let engine = engine_keeping_audited(&pods, entries, on_node);
        let every_entry = engine.entries().to_vec();
        if let Some(mismatch) = first_mismatch(&engine, &every_entry) {
            prop_assert!(false, "{}", mismatch);
        }
    }
}

/// The shadowing case spelled out: an audited allow ahead of an audited deny (higher tier)
/// lets its flows through in the would-be view, so only the rest is a would-deny.
#[test]
fn an_audited_allow_shadows_an_audited_deny() {
    let spec = PodSpec {
        namespace: 0,
        app: "web",
        node: 0,
        http_port: 80,
        ipv6: false,
    };
    let client = PodSpec {
        app: "db",
        ..spec.clone()
    };
    let audited = |tier: Tier, verdict: Verdict, ports: Vec<PortRule>, rule: &str| PolicyEntry {
        tier,
        priority: Priority::new(1, "p", 0),
        verdict,
        subject: PodSelector::all(),
        direction: Direction::Ingress,
        peers: vec![Peer::pods(PodSelector::all())],
        ports,
        default_deny: false,
        enforcement: Enforcement::Audit,
        auth: None,
        provenance: Provenance {
            kind: "Test".into(),
            namespace: None,
            name: "audited".into(),
            rule: rule.into(),
        },
    };
    let entries = vec![
        audited(
            Tier::Admin,
            Verdict::Allow,
            vec![PortRule::single(Protocol::Tcp, 80)],
            "allow-80",
        ),
        audited(Tier::Baseline, Verdict::Deny, vec![], "deny-all"),
    ];
    let engine = engine_keeping_audited(&[spec, client], entries.clone(), false);
    assert_eq!(first_mismatch(&engine, &entries), None);
    let ruleset = table(&engine).unwrap();
    let web = &ruleset.endpoints["pod0"];
    let db = ruleset.endpoints["pod1"].addresses[0];
    let probe = |port| {
        let packet = Packet {
            source: db,
            destination: web.addresses[0],
            protocol: Protocol::Tcp,
            dport: port,
        };
        evaluate_side(&ruleset, web, Direction::Ingress, &packet)
            .would_deny
            .map(|r| labels(&r.reason, Direction::Ingress).rule)
    };
    assert_eq!(probe(80), None, "the audited allow shadows the deny");
    assert_eq!(probe(81).as_deref(), Some("deny-all"));
}
