//! The programmer against the simulator's quirk modes: whatever a real HNS build does with
//! `Remove`, request sizes, duplicate ids, IPv6 sets and its host layer, netpol's default writes
//! converge and leave every other owner's policy byte for byte; the option to `Remove` shows
//! why it is not the default.

use std::collections::BTreeMap;
use std::time::Instant;

use netpol_datapath::{DatapathError, EndpointInfo, Outcome, Refusal};
use netpol_hcn::host_rules::HostRules;
use netpol_hcn::ipsets::{SetSync, WantedSet};
use netpol_hcn::matcher::Packet;
use netpol_hcn::schema::{
    AclAction, AclDirection, AclPolicySetting, EndpointPolicy, ModifyEndpointRequest, RequestType,
    RuleType, SetPolicySetting, IPSET,
};
use netpol_hcn::sim::{Call, Fault, RemoveQuirk, SimMode, SimQuirks};
use netpol_hcn::{rule_id, AclRemoval, HcnApi, HcnDatapath, HcnSim, Programmer, WriteOptions};
use serde_json::json;

const EP: &str = "ep";
const LOCAL: &str = "10.1.0.2";

/// Another owner's policies, among them an ACL netpol's catch-all shares direction and action
/// with (Azure CNI's wireserver Block).
fn foreign() -> Vec<EndpointPolicy> {
    let wireserver = AclPolicySetting {
        id: "azure-wireserver".into(),
        protocols: "6".into(),
        action: AclAction::Block,
        direction: AclDirection::In,
        local_addresses: String::new(),
        remote_addresses: "168.63.129.16".into(),
        local_ports: "80".into(),
        remote_ports: String::new(),
        rule_type: Some(RuleType::Switch),
        priority: 200,
    };
    vec![
        EndpointPolicy::other("OutBoundNAT", &json!({"Exceptions": ["10.0.0.0/8"]})),
        EndpointPolicy::acl(&wireserver),
        EndpointPolicy::other("SDNRoute", &json!({"DestinationPrefix": "10.96.0.0/12"})),
    ]
}

fn acl(action: AclAction, priority: u16, remote: &str, ports: &str) -> AclPolicySetting {
    let mut rule = AclPolicySetting {
        id: String::new(),
        protocols: "6".into(),
        action,
        direction: AclDirection::In,
        local_addresses: String::new(),
        remote_addresses: remote.into(),
        local_ports: ports.into(),
        remote_ports: String::new(),
        rule_type: Some(RuleType::Switch),
        priority,
    };
    rule.id = rule_id(&rule);
    rule
}

/// `n` allows from 10.1.0.11, one port each from `first_port`, then a catch-all Block.
fn rules(n: u16, first_port: u16) -> Vec<AclPolicySetting> {
    let mut out: Vec<_> = (0..n)
        .map(|i| {
            acl(
                AclAction::Allow,
                1000,
                "10.1.0.11",
                &(first_port + i).to_string(),
            )
        })
        .collect();
    let mut block = acl(AclAction::Block, 1001, "", "");
    block.protocols = "256".into();
    block.id = rule_id(&block);
    out.push(block);
    out
}

fn datapath(mode: SimMode) -> HcnDatapath<HcnSim> {
    datapath_on(HcnSim::with_mode(mode))
}

/// The endpoint with its other owners' policies on `sim`.
fn datapath_on(sim: HcnSim) -> HcnDatapath<HcnSim> {
    sim.add_endpoint(
        EndpointInfo {
            id: EP.into(),
            name: "pod".into(),
            addresses: vec![LOCAL.parse().unwrap()],
        },
        foreign(),
    );
    HcnDatapath::new(sim)
}

fn desired(rules: Vec<AclPolicySetting>) -> BTreeMap<String, Vec<AclPolicySetting>> {
    [(EP.to_string(), rules)].into_iter().collect()
}

/// The endpoint's other owners' policies are exactly as created, in order, and its netpol
/// rules are `wanted` (in any order).
fn assert_holds(dp: &HcnDatapath<HcnSim>, wanted: &[AclPolicySetting], context: &str) {
    let policies = dp.calls().endpoint(EP).unwrap().policies;
    let (mut owned, others): (Vec<_>, Vec<_>) =
        policies.into_iter().partition(|p| p.netpol_id().is_some());
    assert_eq!(others, foreign(), "{context}: other owners' policies");
    let mut wanted: Vec<EndpointPolicy> = wanted.iter().map(EndpointPolicy::acl).collect();
    let key = |p: &EndpointPolicy| p.netpol_id();
    owned.sort_by_key(key);
    wanted.sort_by_key(key);
    assert_eq!(owned, wanted, "{context}: netpol rules");
}

fn tcp_from(remote: &str, port: u16) -> Packet {
    Packet {
        direction: AclDirection::In,
        remote_address: remote.parse().unwrap(),
        protocol: 6,
        local_port: port,
        remote_port: 50000,
    }
}

/// Every change (first rules, a larger set, a narrower one, none) under every mode: netpol's
/// default writes converge, and the other owners' policies survive every write byte for byte.
#[test]
fn default_writes_converge_and_keep_other_owners_policies_under_every_mode() {
    for mode in SimMode::ALL {
        let dp = datapath(mode);
        let mut programmer = Programmer::default();
        let now = Instant::now();
        for (step, wanted) in [rules(3, 80), rules(70, 1000), rules(1, 443), Vec::new()]
            .into_iter()
            .enumerate()
        {
            let report = programmer.apply(&dp, &desired(wanted.clone()), now);
            assert!(
                matches!(report.outcomes[EP], Outcome::Updated { .. }),
                "{mode} step {step}: {:?}",
                report.outcomes[EP]
            );
            assert_holds(&dp, &wanted, &format!("{mode} step {step}"));
        }
    }
}

/// No request brings more than the bound of new ACLs; an Update never brings one.
#[test]
fn adds_go_in_batches_and_updates_bring_no_new_acl() {
    let dp = datapath(SimMode::Ws2022);
    let mut programmer = Programmer::default();
    let now = Instant::now();
    programmer.apply(&dp, &desired(rules(70, 1000)), now);
    let adds: Vec<usize> = dp
        .calls()
        .take_calls()
        .iter()
        .filter_map(|c| match c {
            Call::Modify { request, .. } => {
                let r: ModifyEndpointRequest = serde_json::from_str(request).unwrap();
                assert_eq!(r.request_type, RequestType::Add, "{request}");
                Some(r.settings.policies.len())
            }
            _ => None,
        })
        .collect();
    assert_eq!(adds, [30, 30, 11]);

    // Unbounded, the same change is one request, which this HNS refuses.
    let dp = datapath(SimMode::Ws2022);
    let mut unbounded = Programmer::with_writes(
        Default::default(),
        WriteOptions {
            max_acls_per_request: 1000,
            ..WriteOptions::default()
        },
    );
    let report = unbounded.apply(&dp, &desired(rules(70, 1000)), now);
    assert!(
        matches!(&report.outcomes[EP], Outcome::Failed { error, .. } if error.to_string().contains("at most 30")),
        "{:?}",
        report.outcomes[EP]
    );
}

/// Where `Remove` does nothing, removing with it never converges (reported, not silently
/// failing open); where it matches loosely, it takes another owner's Block with netpol's.
#[test]
fn remove_requests_fail_where_hns_ignores_them_and_take_others_policies_where_loose() {
    let remove = WriteOptions {
        removal: AclRemoval::Remove,
        ..WriteOptions::default()
    };
    let now = Instant::now();

    let dp = datapath(SimMode::Ws2022);
    let mut programmer = Programmer::with_writes(Default::default(), remove);
    programmer.apply(&dp, &desired(rules(2, 80)), now);
    let report = programmer.apply(&dp, &desired(rules(1, 443)), now);
    assert!(
        matches!(&report.outcomes[EP], Outcome::Failed { error, .. } if error.to_string().contains("holds")),
        "{:?}",
        report.outcomes[EP]
    );

    let dp = datapath(SimMode::Ws2019);
    assert_eq!(dp.calls().quirks().remove, RemoveQuirk::Loose);
    let mut programmer = Programmer::with_writes(Default::default(), remove);
    programmer.apply(&dp, &desired(rules(2, 80)), now);
    programmer.apply(&dp, &desired(Vec::new()), now);
    let left = dp.calls().endpoint(EP).unwrap().policies;
    assert!(
        !left.contains(&foreign()[1]),
        "a loose Remove of netpol's Block takes the wireserver Block too"
    );
}

/// HNS saying a rule is already there makes the programmer read the list again and reconcile.
#[test]
fn an_add_refused_as_existing_is_reconciled_from_a_fresh_read() {
    let dp = datapath(SimMode::Ws2022);
    let wanted = rules(2, 80);
    // Another writer puts one of netpol's rules there just before netpol's Add.
    dp.calls().inject(Fault::Interleave {
        endpoint: EP.into(),
        request: ModifyEndpointRequest::new(
            RequestType::Add,
            vec![EndpointPolicy::acl(&wanted[0])],
        ),
        after: false,
    });
    let report = Programmer::default().apply(&dp, &desired(wanted.clone()), Instant::now());
    assert!(
        matches!(report.outcomes[EP], Outcome::Updated { .. }),
        "{:?}",
        report.outcomes[EP]
    );
    assert_holds(&dp, &wanted, "after the refusal");
}

/// An Allow HNS refuses as invalid is left out alone: the endpoint gets its other rules (the
/// refused request's other rules among them), is reported refused naming the rule, and is not
/// retried until its rules change; the packets it would allow stay blocked.
#[test]
fn an_invalid_allow_is_refused_alone_and_not_retried() {
    // Verdicts of netpol's own rules: the host layer is another test's.
    let quirks = SimQuirks {
        host_layer_default_deny: false,
        ..SimMode::Ws2022.quirks()
    };
    let dp = datapath_on(HcnSim::with_mode(SimMode::Ws2022).with_quirks(quirks));
    let mut programmer = Programmer::default();
    let now = Instant::now();
    let good = rules(1, 80);
    programmer.apply(&dp, &desired(good.clone()), now);
    let mut bad = rules(40, 2000);
    bad[35].protocols = "TCP".into();
    bad[35].id = rule_id(&bad[35]);
    let report = programmer.apply(&dp, &desired(bad.clone()), now);
    match &report.outcomes[EP] {
        Outcome::Refused { rule } => {
            assert!(rule.contains("invalid"), "{rule}");
            assert!(rule.contains(&bad[35].id), "names the refused rule: {rule}");
        }
        other => panic!("{other:?}"),
    }
    let mut held = bad.clone();
    held.remove(35);
    assert_holds(&dp, &held, "after the refusal");
    let port = |i: u16| 2000 + i;
    let allowed = dp
        .calls()
        .evaluate(EP, &tcp_from("10.1.0.11", port(34)))
        .unwrap();
    assert_eq!(allowed.action, AclAction::Allow);
    let left_out = dp
        .calls()
        .evaluate(EP, &tcp_from("10.1.0.11", port(35)))
        .unwrap();
    assert_eq!(left_out.action, AclAction::Block, "fails closed");
    dp.calls().take_calls();
    let again = programmer.apply(&dp, &desired(bad), now);
    assert!(matches!(again.outcomes[EP], Outcome::Refused { .. }));
    assert_eq!(
        dp.calls().take_calls(),
        vec![],
        "a refusal is not retried as is"
    );
    // Changed rules are tried again.
    let report = programmer.apply(&dp, &desired(rules(2, 80)), now);
    assert!(matches!(report.outcomes[EP], Outcome::Updated { .. }));
    assert_holds(&dp, &rules(2, 80), "after the change");
}

/// A Block HNS refuses cannot be left out without opening what it closes: the endpoint keeps
/// its previous rules and is reported refused.
#[test]
fn an_invalid_block_keeps_the_previous_rules() {
    let dp = datapath(SimMode::Ws2022);
    let mut programmer = Programmer::default();
    let now = Instant::now();
    let good = rules(1, 80);
    programmer.apply(&dp, &desired(good.clone()), now);
    let mut bad = rules(3, 2000);
    let last = bad.len() - 1;
    bad[last].protocols = "ANY".into();
    bad[last].id = rule_id(&bad[last]);
    let report = programmer.apply(&dp, &desired(bad), now);
    match &report.outcomes[EP] {
        Outcome::Refused { rule } => assert!(rule.contains("invalid"), "{rule}"),
        other => panic!("{other:?}"),
    }
    assert_holds(&dp, &good, "after the refusal");
}

/// Other owners' policies come back from every write exactly as HNS holds them: their settings'
/// text (key order, spacing, fields netpol does not know) and their place in the list, under
/// every mode's `Remove` and with either removal option where it converges.
#[test]
fn other_owners_policies_survive_every_write_byte_for_byte() {
    let odd = [
        r#"{"Type":"ACL","Settings":{ "Priority":200,"Id" : "npm-ingress-x","Action":"Block","Direction":"In","RuleType":"Switch","Protocols":"6","RemoteAddresses":"168.63.129.16","Extra":{"b":1,"a":[1.50,2e3]}}}"#,
        r#"{"Type":"OutBoundNAT","Settings":{"Exceptions":["10.0.0.0/8"],"VirtualIP":""}}"#,
        r#"{"Type":"L4WFPPROXY","Settings":{"Port":"15001","UserSID":"S-1-5-18","FilterTuple":{"Protocols":"6"}}}"#,
    ];
    let foreign: Vec<EndpointPolicy> = odd
        .iter()
        .map(|t| serde_json::from_str(t).unwrap())
        .collect();
    let texts = |policies: &[EndpointPolicy]| -> Vec<String> {
        policies
            .iter()
            .filter(|p| p.netpol_id().is_none())
            .map(|p| serde_json::to_string(p).unwrap())
            .collect()
    };
    let expected = texts(&foreign);
    assert_eq!(expected, odd, "the envelope keeps the settings' text");
    for mode in SimMode::ALL {
        for removal in [AclRemoval::Replace, AclRemoval::Remove] {
            // Remove converges only where HNS removes exactly.
            if removal == AclRemoval::Remove && mode.quirks().remove != RemoveQuirk::Exact {
                continue;
            }
            let sim = HcnSim::with_mode(mode);
            sim.add_endpoint(
                EndpointInfo {
                    id: EP.into(),
                    name: "pod".into(),
                    addresses: vec![LOCAL.parse().unwrap()],
                },
                foreign.clone(),
            );
            let dp = HcnDatapath::new(sim);
            let writes = WriteOptions {
                removal,
                ..WriteOptions::default()
            };
            let mut programmer = Programmer::with_writes(Default::default(), writes);
            let now = Instant::now();
            for (step, wanted) in [rules(3, 80), rules(45, 1000), rules(1, 443), Vec::new()]
                .into_iter()
                .enumerate()
            {
                let report = programmer.apply(&dp, &desired(wanted), now);
                assert!(
                    matches!(report.outcomes[EP], Outcome::Updated { .. }),
                    "{mode} {removal:?} step {step}: {:?}",
                    report.outcomes[EP]
                );
                let policies = dp.calls().endpoint(EP).unwrap().policies;
                assert_eq!(texts(&policies), expected, "{mode} {removal:?} step {step}");
            }
        }
    }
}

/// On an l2bridge network whose host layer denies by default, endpoints need the host-scope
/// allows: without them netpol's own allows let nothing through.
#[test]
fn l2bridge_endpoints_need_host_scope_rules() {
    let now = Instant::now();
    for host_rules in [HostRules::Off, HostRules::Auto] {
        let dp = datapath(SimMode::Ws2022);
        dp.list_endpoints().unwrap();
        let mut programmer = Programmer::default();
        let network_type = dp.network_type().unwrap();
        assert_eq!(network_type.as_deref(), Some("L2Bridge"));
        programmer.set_host_rules(host_rules.rules_for(network_type.as_deref()));
        programmer.apply(&dp, &desired(rules(1, 80)), now);
        let allowed = dp.calls().evaluate(EP, &tcp_from("10.1.0.11", 80)).unwrap();
        let blocked = dp.calls().evaluate(EP, &tcp_from("10.1.0.12", 80)).unwrap();
        assert_eq!(blocked.action, AclAction::Block);
        let expected = match host_rules {
            HostRules::Off => AclAction::Block,
            _ => AclAction::Allow,
        };
        assert_eq!(allowed.action, expected, "{host_rules:?}");
    }
}

/// A set HNS refuses (an IPv6 member) holds back only itself; the other sets are added.
#[test]
fn a_refused_set_is_isolated_from_the_others() {
    let dp = datapath(SimMode::Ws2022);
    let v4 = SetPolicySetting {
        id: "netpol-set-0004".into(),
        name: "netpol-set-0004".into(),
        policy_type: IPSET.into(),
        values: "10.1.0.11".into(),
    };
    let v6 = SetPolicySetting {
        id: "netpol-set-0006".into(),
        name: "netpol-set-0006".into(),
        policy_type: IPSET.into(),
        values: "fd00::11".into(),
    };
    let wanted: BTreeMap<&str, WantedSet<'_>> = [&v4, &v6]
        .into_iter()
        .map(|s| {
            (
                s.id.as_str(),
                WantedSet {
                    setting: s,
                    revision: 1,
                },
            )
        })
        .collect();
    let mut sync = SetSync::default();
    let changes = sync.add_and_update(&dp, &wanted).unwrap();
    assert_eq!(changes.added, 1);
    let refused: Vec<&str> = sync.refused().map(|(id, _)| id).collect();
    assert_eq!(refused, ["netpol-set-0006"]);
    assert!(dp.calls().sets().contains_key("netpol-set-0004"));
    // Not sent again while its values stay.
    dp.calls().take_calls();
    sync.add_and_update(&dp, &wanted).unwrap();
    assert!(dp
        .calls()
        .take_calls()
        .iter()
        .all(|c| !matches!(c, Call::ModifyNetwork { .. })));
    let refusal = dp
        .modify_sets(RequestType::Add, vec![v6.clone()])
        .unwrap_err();
    assert_eq!(refusal.refusal(), Some(Refusal::InvalidPolicy));
    assert!(matches!(refusal, DatapathError::Refused { .. }));
}

/// Ingress rules naming a peer set in the field this HNS does not match it against fail
/// closed, or open for a peer set the endpoint itself is in: the convention must be right.
#[test]
fn an_ingress_set_in_the_other_field_does_not_match_the_peer() {
    let now = Instant::now();
    let set = SetPolicySetting {
        id: "netpol-set-00aa".into(),
        name: "netpol-set-00aa".into(),
        policy_type: IPSET.into(),
        values: "10.1.0.11".into(),
    };
    for (mode, field_ok) in [(SimMode::Ws2022, true), (SimMode::Ws2022RemoteSets, false)] {
        let dp = datapath(mode);
        dp.modify_sets(RequestType::Add, vec![set.clone()]).unwrap();
        // netpol's default: the peer set of an ingress rule in LocalAddresses.
        let mut allow = acl(AclAction::Allow, 1000, "", "80");
        allow.local_addresses = set.id.clone();
        allow.id = rule_id(&allow);
        let mut block = acl(AclAction::Block, 1001, "", "");
        block.id = rule_id(&block);
        let mut programmer = Programmer::default();
        dp.list_endpoints().unwrap();
        programmer.set_host_rules(HostRules::Auto.rules_for(dp.network_type().unwrap().as_deref()));
        programmer.apply(&dp, &desired(vec![allow, block]), now);
        let from_peer = dp.calls().evaluate(EP, &tcp_from("10.1.0.11", 80)).unwrap();
        let expected = if field_ok {
            AclAction::Allow
        } else {
            AclAction::Block
        };
        assert_eq!(from_peer.action, expected, "{mode}");
    }
}

/// A mode's quirks, for a test that wants one changed.
#[test]
fn modes_name_their_builds() {
    for mode in SimMode::ALL {
        assert_eq!(mode.name().parse::<SimMode>().unwrap(), mode);
        let q: SimQuirks = mode.quirks();
        assert_eq!(mode.capabilities().ingress_set_field, q.ingress_set_field);
    }
    assert!("ws2016".parse::<SimMode>().is_err());
}
