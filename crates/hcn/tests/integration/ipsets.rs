//! HNS IP sets: the simulator's set semantics, and the enforcer turning a new replica into one
//! set update and no endpoint update, with both modes deciding alike.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use netpol_datapath::testing::*;
use netpol_datapath::{
    compile_endpoint, Backoff, CompiledRules, Desired, EndpointInfo, Enforcer, LocalPods,
};
use netpol_engine::*;
use netpol_hcn::client::RawError;
use netpol_hcn::discovery::HostEndpoints;
use netpol_hcn::oracle::packet;
use netpol_hcn::schema::{
    AclAction, AclDirection, AclPolicySetting, EndpointPolicy, RequestType, RuleType,
    SetPolicySetting, IPSET,
};
use netpol_hcn::sim::{CallKind, HcnSim, SIM_NETWORK_ID};
use netpol_hcn::version::{Capabilities, HnsVersion};
use netpol_hcn::{HcnApi, HcnCalls, HcnDatapath, HcnEnforcer, IpSetMode};

fn set(id: &str, values: &str) -> SetPolicySetting {
    SetPolicySetting {
        id: id.into(),
        name: id.into(),
        policy_type: IPSET.into(),
        values: values.into(),
    }
}

fn acl_naming(set: &str) -> EndpointPolicy {
    EndpointPolicy::acl(&AclPolicySetting {
        id: format!("netpol-acl-{set}"),
        protocols: "6".into(),
        action: AclAction::Allow,
        direction: AclDirection::In,
        local_addresses: String::new(),
        remote_addresses: set.into(),
        local_ports: "80".into(),
        remote_ports: String::new(),
        rule_type: Some(RuleType::Switch),
        priority: 100,
    })
}

fn tcp_80_from(remote: &str) -> netpol_hcn::matcher::Packet {
    packet(
        Direction::Ingress,
        remote.parse().unwrap(),
        Protocol::Tcp,
        80,
    )
}

#[test]
fn the_simulated_network_keeps_sets_with_add_update_remove_semantics() {
    let dp = HcnDatapath::new(HcnSim::new());
    dp.calls().add_endpoint(
        EndpointInfo {
            id: "ep".into(),
            name: "ep".into(),
            addresses: vec!["10.1.0.2".parse().unwrap()],
        },
        Vec::new(),
    );
    // An ACL naming a set the network lacks is refused.
    let dangling = dp.modify_policies("ep", RequestType::Add, vec![acl_naming("netpol-set-a")]);
    assert!(dangling.is_err(), "{dangling:?}");
    dp.modify_sets(RequestType::Add, vec![set("netpol-set-a", "10.1.0.11")])
        .unwrap();
    // Add of an existing id and Update of a missing one are refused.
    assert!(dp
        .modify_sets(RequestType::Add, vec![set("netpol-set-a", "10.1.0.12")])
        .is_err());
    assert!(dp
        .modify_sets(RequestType::Update, vec![set("netpol-set-b", "10.1.0.12")])
        .is_err());
    dp.modify_policies("ep", RequestType::Add, vec![acl_naming("netpol-set-a")])
        .unwrap();
    let sim = dp.calls();
    assert_eq!(
        sim.evaluate("ep", &tcp_80_from("10.1.0.11"))
            .unwrap()
            .action,
        AclAction::Allow
    );
    assert_eq!(
        sim.evaluate("ep", &tcp_80_from("10.1.0.12"))
            .unwrap()
            .action,
        AclAction::Block
    );
    // An update of the set's values changes the endpoint's decisions, with no endpoint call.
    dp.modify_sets(
        RequestType::Update,
        vec![set("netpol-set-a", "10.1.0.11,10.1.0.12")],
    )
    .unwrap();
    assert_eq!(
        sim.evaluate("ep", &tcp_80_from("10.1.0.12"))
            .unwrap()
            .action,
        AclAction::Allow
    );
    assert_eq!(
        dp.list_sets().unwrap(),
        vec![set("netpol-set-a", "10.1.0.11,10.1.0.12")]
    );
    // A set an ACL names cannot be removed; once no ACL names it, it can.
    assert!(dp
        .modify_sets(RequestType::Remove, vec![set("netpol-set-a", "")])
        .is_err());
    dp.modify_policies("ep", RequestType::Remove, vec![acl_naming("netpol-set-a")])
        .unwrap();
    dp.modify_sets(RequestType::Remove, vec![set("netpol-set-a", "")])
        .unwrap();
    assert!(dp.list_sets().unwrap().is_empty());
}

const LOCAL: &str = "10.1.0.2";

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

/// The compiled rules of an endpoint denying ingress but TCP 80 from `peer`.
fn allowing_tcp_80_from(peer: IdentityId, store: &IdentityStore) -> Shared<CompiledRules> {
    let mut b = MapBuilder::new(Verdict::Allow);
    b.set(
        Direction::Ingress,
        None,
        key(None, 0, 0),
        value(2, Verdict::Deny, None),
    );
    b.set(
        Direction::Ingress,
        Some(peer),
        key(Some(Protocol::Tcp), 80, 16),
        value(5, Verdict::Allow, None),
    );
    Shared::new(compile_endpoint(&b.build(), store).unwrap())
}

/// An endpoint allowing TCP 80 from the `web` workload only, enforced; then a replica of `web`
/// added. Returns the calls the replica caused and the simulator.
fn replica_after_sync(ip_sets: bool) -> (Vec<netpol_hcn::sim::Call>, Arc<HcnDatapath<HcnSim>>) {
    let sim = HcnSim::with_capabilities(
        Capabilities::of(HnsVersion::new(15, 0))
            .unwrap()
            .with_ip_sets(ip_sets),
    );
    sim.add_endpoint(
        EndpointInfo {
            id: "ep".into(),
            name: "local".into(),
            addresses: vec![LOCAL.parse().unwrap()],
        },
        Vec::new(),
    );
    let dp = Arc::new(HcnDatapath::new(sim));
    let mut store = IdentityStore::new();
    let (web, _) = store.insert_shared(
        Identity::pod(pod("web-1"), "10.1.0.11".parse().unwrap()),
        vec![],
    );
    let rules = allowing_tcp_80_from(web, &store);
    let pods: LocalPods = [("ns/local".to_string(), vec![LOCAL.parse().unwrap()])]
        .into_iter()
        .collect();
    let compiled = [("ns/local".to_string(), rules.clone())]
        .into_iter()
        .collect();
    let mut enforcer = HcnEnforcer::new(
        dp.clone(),
        Box::new(HostEndpoints::default()),
        Backoff::default(),
    );
    assert_eq!(enforcer.uses_ip_sets(), ip_sets);
    let now = Instant::now();
    let desired = Desired {
        pods: &pods,
        compiled: &compiled,
        identities: &store,
        changed: &BTreeSet::new(),
        audit: &Default::default(),
    };
    assert_eq!(enforcer.enforce(&desired, false, now).unwrap().updated(), 1);
    let sim = dp.calls();
    assert_eq!(
        sim.evaluate("ep", &tcp_80_from("10.1.0.11"))
            .unwrap()
            .action,
        AclAction::Allow
    );
    assert_eq!(
        sim.evaluate("ep", &tcp_80_from("10.1.0.12"))
            .unwrap()
            .action,
        AclAction::Block
    );
    sim.take_calls();

    // The replica joins the identity: the MapState and the compiled rules do not change.
    let (same, _) = store.insert_shared(
        Identity::pod(pod("web-2"), "10.1.0.12".parse().unwrap()),
        vec![],
    );
    assert_eq!(same, web);
    let changed = BTreeSet::from([web]);
    let desired = Desired {
        pods: &pods,
        compiled: &compiled,
        identities: &store,
        changed: &changed,
        audit: &Default::default(),
    };
    enforcer.enforce(&desired, false, now).unwrap();
    let calls = sim.take_calls();
    assert_eq!(
        sim.evaluate("ep", &tcp_80_from("10.1.0.12"))
            .unwrap()
            .action,
        AclAction::Allow
    );
    assert_eq!(
        sim.evaluate("ep", &tcp_80_from("10.1.0.13"))
            .unwrap()
            .action,
        AclAction::Block
    );
    (calls, dp)
}

#[test]
fn with_ip_sets_a_replica_is_one_set_update_and_no_endpoint_call() {
    let (calls, dp) = replica_after_sync(true);
    let count = |kind| calls.iter().filter(|c| c.kind() == kind).count();
    assert_eq!(count(CallKind::ModifyNetwork), 1, "{calls:?}");
    assert_eq!(count(CallKind::Modify), 0, "{calls:?}");
    assert_eq!(count(CallKind::Query), 0, "{calls:?}");
    let sets = dp.calls().sets();
    assert_eq!(sets.len(), 1);
    assert_eq!(sets.values().next().unwrap().values, "10.1.0.11,10.1.0.12");
}

#[test]
fn inline_addresses_update_the_endpoint_instead() {
    let (calls, dp) = replica_after_sync(false);
    let count = |kind| calls.iter().filter(|c| c.kind() == kind).count();
    assert_eq!(count(CallKind::ModifyNetwork), 0, "{calls:?}");
    assert!(count(CallKind::Modify) >= 1, "{calls:?}");
    assert!(dp.calls().sets().is_empty());
}

#[test]
fn the_mode_decides_whether_sets_are_used_and_never_where_the_hns_lacks_them() {
    let uses = |sim: HcnSim, mode: IpSetMode| {
        let dp: Arc<dyn HcnApi> = Arc::new(HcnDatapath::with_ip_sets(sim, mode));
        let enforcer = HcnEnforcer::new(
            dp.clone(),
            Box::new(HostEndpoints::default()),
            Backoff::default(),
        );
        assert_eq!(enforcer.uses_ip_sets(), dp.capabilities().ip_sets);
        (
            enforcer.uses_ip_sets(),
            mode.check(&dp.capabilities()).is_ok(),
        )
    };
    // The simulator is HNS 15.0: auto and on use sets, off inlines.
    assert_eq!(uses(HcnSim::new(), IpSetMode::Auto), (true, true));
    assert_eq!(uses(HcnSim::new(), IpSetMode::On), (true, true));
    assert_eq!(uses(HcnSim::new(), IpSetMode::Off), (false, true));
    // HNS 12.9 has no SetPolicy: auto inlines, on is refused.
    let old = || {
        HcnSim::with_capabilities(
            Capabilities::of(HnsVersion::new(12, 9))
                .unwrap()
                .with_ip_sets(true),
        )
    };
    assert_eq!(uses(old(), IpSetMode::Auto), (false, true));
    assert_eq!(uses(old(), IpSetMode::On), (false, false));
}

#[test]
fn sets_go_on_the_network_the_endpoints_are_on() {
    let sim = HcnSim::new();
    sim.add_endpoint(
        EndpointInfo {
            id: "ep".into(),
            name: "local".into(),
            addresses: vec![LOCAL.parse().unwrap()],
        },
        Vec::new(),
    );
    let dp = HcnDatapath::new(sim);
    assert_eq!(dp.network(), None);
    dp.list_endpoints().unwrap();
    assert_eq!(dp.network().as_deref(), Some(SIM_NETWORK_ID));
    dp.modify_sets(RequestType::Add, vec![set("netpol-set-a", "10.1.0.11")])
        .unwrap();
    assert_eq!(
        dp.list_sets().unwrap(),
        vec![set("netpol-set-a", "10.1.0.11")]
    );
    // Another network is not the simulator's.
    assert_eq!(
        dp.calls()
            .query_network(Some("0f000000-0000-4000-8000-000000000000"), "{}"),
        Err(RawError::NotFound)
    );
}

/// The table keeps identities' keys to name new sets without serialising every identity again:
/// the ids it gives are the ids `set_id` computes, for sets sharing identities and for a set
/// named before its identities were known.
#[test]
fn the_table_names_sets_as_set_id_does() {
    use netpol_datapath::{Family, RemoteSet};
    use netpol_hcn::ipsets::{set_id, SetTable};
    let mut store = IdentityStore::new();
    let ids: Vec<IdentityId> = (0..4)
        .map(|i| {
            let address = format!("10.2.0.{}", i + 1).parse().unwrap();
            store
                .insert(Identity::pod(pod(&format!("p{i}")), address))
                .0
        })
        .collect();
    let unknown = IdentityId(999);
    let sets = [
        vec![ids[0], ids[1]],
        vec![ids[0], ids[1], ids[2]],
        vec![ids[3], unknown],
        vec![ids[2], ids[3]],
    ];
    let mut table = SetTable::default();
    for identities in sets {
        let set = RemoteSet {
            family: Family::V4,
            identities,
        };
        assert_eq!(table.get(&set, &store).id, set_id(&set, &store));
    }
}

/// A set HNS refuses (an IPv6 member, on a build that takes netpol's word that it accepts them)
/// holds back only the endpoint whose rules name it: reported refused with the set named, its
/// rules as they were; the other endpoint is programmed with its set and is not held back.
#[test]
fn a_set_hns_refuses_holds_back_only_the_endpoints_naming_it() {
    use netpol_datapath::Outcome;
    use netpol_hcn::sim::{SimMode, SimQuirks};
    let mode = SimMode::Ws2022;
    let sim = HcnSim::with_capabilities(Capabilities {
        ipv6_sets: true,
        ..mode.capabilities()
    })
    .with_quirks(SimQuirks {
        ipv6_sets_refused: true,
        ..mode.quirks()
    });
    for (id, name, address) in [("ep-a", "a", "10.1.0.2"), ("ep-b", "b", "10.1.0.3")] {
        sim.add_endpoint(
            EndpointInfo {
                id: id.into(),
                name: name.into(),
                addresses: vec![address.parse().unwrap()],
            },
            Vec::new(),
        );
    }
    let dp = Arc::new(HcnDatapath::new(sim));
    let mut store = IdentityStore::new();
    // Two workloads (namespaces), so two identities.
    let in_namespace = |namespace: &str| PodInfo {
        namespace: namespace.into(),
        ..pod("web")
    };
    let (v4, _) = store.insert_shared(
        Identity::pod(in_namespace("v4"), "10.1.0.11".parse().unwrap()),
        vec![],
    );
    let (v6, _) = store.insert_shared(
        Identity::pod(in_namespace("v6"), "fd00::11".parse().unwrap()),
        vec![],
    );
    assert_ne!(v4, v6);
    let allowing = |peer: IdentityId| allowing_tcp_80_from(peer, &store);
    let pods: LocalPods = [
        ("ns/a".to_string(), vec!["10.1.0.2".parse().unwrap()]),
        ("ns/b".to_string(), vec!["10.1.0.3".parse().unwrap()]),
    ]
    .into_iter()
    .collect();
    let compiled = [
        ("ns/a".to_string(), allowing(v4)),
        ("ns/b".to_string(), allowing(v6)),
    ]
    .into_iter()
    .collect();
    let mut enforcer = HcnEnforcer::new(
        dp.clone(),
        Box::new(HostEndpoints::default()),
        Backoff::default(),
    );
    let desired = Desired {
        pods: &pods,
        compiled: &compiled,
        identities: &store,
        changed: &BTreeSet::new(),
        audit: &Default::default(),
    };
    let report = enforcer.enforce(&desired, false, Instant::now()).unwrap();
    assert!(
        matches!(report.outcomes["ep-a"], Outcome::Updated { .. }),
        "{:?}",
        report.outcomes["ep-a"]
    );
    match &report.outcomes["ep-b"] {
        Outcome::Refused { rule } => assert!(rule.contains("netpol-set-"), "{rule}"),
        other => panic!("ep-b: {other:?}"),
    }
    let sim = dp.calls();
    assert_eq!(sim.sets().len(), 1, "the IPv4 set is on the network");
    assert!(sim.endpoint("ep-b").unwrap().policies.is_empty());
    assert_eq!(
        sim.evaluate("ep-a", &tcp_80_from("10.1.0.11"))
            .unwrap()
            .action,
        AclAction::Allow
    );
    assert_eq!(
        sim.evaluate("ep-a", &tcp_80_from("10.1.0.12"))
            .unwrap()
            .action,
        AclAction::Block
    );
    // The next step sends the refused set no more and reports the endpoint refused still.
    sim.take_calls();
    let again = enforcer.enforce(&desired, false, Instant::now()).unwrap();
    assert!(matches!(again.outcomes["ep-b"], Outcome::Refused { .. }));
    assert!(sim
        .take_calls()
        .iter()
        .all(|c| c.kind() != CallKind::ModifyNetwork && c.kind() != CallKind::Modify));
}
