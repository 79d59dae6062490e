//! The programmer over the simulator: idempotence, per-endpoint diffs, faults and convergence,
//! and never touching policies netpol does not own.

use crate::common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use netpol_datapath::{Backoff, EndpointInfo, Outcome};
use netpol_hcn::matcher::Packet;
use netpol_hcn::schema::{
    AclAction, AclDirection, AclPolicySetting, EndpointPolicy, ModifyEndpointRequest, RequestType,
    RuleType,
};
use netpol_hcn::sim::{Call, CallKind, Fault};
use netpol_hcn::HcnApi;
use netpol_hcn::{compile_acls, HcnDatapath, HcnSim, Programmer};
use serde_json::json;

const EPS: [&str; 3] = ["ep-a", "ep-b", "ep-c"];

fn foreign_policies() -> Vec<EndpointPolicy> {
    let foreign_acl = AclPolicySetting {
        id: "azure-acl-host".into(),
        protocols: "6".into(),
        action: AclAction::Allow,
        direction: AclDirection::In,
        local_addresses: String::new(),
        remote_addresses: "10.0.0.1".into(),
        local_ports: "10250".into(),
        remote_ports: String::new(),
        rule_type: Some(RuleType::Host),
        priority: 100,
    };
    vec![
        EndpointPolicy::other("OutBoundNAT", &json!({"Exceptions": ["10.0.0.0/8"]})),
        EndpointPolicy::acl(&foreign_acl),
        EndpointPolicy::other(
            "SDNRoute",
            &json!({"DestinationPrefix": "10.96.0.0/12", "NeedEncap": true}),
        ),
    ]
}

fn setup() -> HcnDatapath<HcnSim> {
    let sim = HcnSim::new();
    for (i, ep) in EPS.iter().enumerate() {
        sim.add_endpoint(
            EndpointInfo {
                id: ep.to_string(),
                name: format!("pod-{i}"),
                addresses: vec![format!("10.1.0.{}", 11 + i).parse().unwrap()],
            },
            foreign_policies(),
        );
    }
    HcnDatapath::new(sim)
}

/// Compiled rules: ingress isolated except TCP `port` from 10.1.0.11.
fn rules(port: u16) -> Vec<AclPolicySetting> {
    let (map, store) = common::isolated_but_tcp_from_one_host(port);
    compile_acls(&map, &store).unwrap().rules
}

fn desired(port: u16) -> BTreeMap<String, Vec<AclPolicySetting>> {
    EPS.iter().map(|ep| (ep.to_string(), rules(port))).collect()
}

fn count(calls: &[Call], kind: CallKind) -> usize {
    calls.iter().filter(|c| c.kind() == kind).count()
}

/// Every endpoint that still exists holds its foreign policies unchanged and in order, and
/// exactly the desired netpol rules (in any order: HCN evaluates by priority).
fn assert_converged(dp: &HcnDatapath<HcnSim>, desired: &BTreeMap<String, Vec<AclPolicySetting>>) {
    for (ep, rules) in desired {
        let Some(state) = dp.calls().endpoint(ep) else {
            continue;
        };
        let (owned, foreign): (Vec<_>, Vec<_>) = state
            .policies
            .into_iter()
            .partition(|p| p.netpol_id().is_some());
        assert_eq!(
            foreign,
            foreign_policies(),
            "{ep}: foreign policies changed"
        );
        assert_eq!(
            by_id(&owned),
            by_id(&rules_policies(rules)),
            "{ep}: netpol rules"
        );
    }
}

fn rules_policies(rules: &[AclPolicySetting]) -> Vec<EndpointPolicy> {
    rules.iter().map(EndpointPolicy::acl).collect()
}

/// Netpol rules sorted by id.
fn by_id(policies: &[EndpointPolicy]) -> Vec<AclPolicySetting> {
    let mut rules: Vec<AclPolicySetting> = policies
        .iter()
        .map(|p| p.as_acl().unwrap().unwrap())
        .collect();
    rules.sort_by(|a, b| a.id.cmp(&b.id));
    rules
}

#[test]
fn applying_twice_makes_no_calls_the_second_time() {
    let dp = setup();
    let mut programmer = Programmer::default();
    let now = Instant::now();
    let want = desired(80);
    let report = programmer.apply(&dp, &want, now);
    assert_eq!(report.updated(), 3);
    let calls = dp.calls().take_calls();
    // Per endpoint: a read, one Add of netpol's rules (nothing to remove), a read back.
    assert_eq!(
        (
            count(&calls, CallKind::Query),
            count(&calls, CallKind::Modify)
        ),
        (6, 3)
    );
    assert!(calls.iter().all(|c| match c {
        Call::Modify { request, .. } => request.contains(r#""RequestType":"Add""#),
        _ => true,
    }));
    assert_converged(&dp, &want);

    let report = programmer.apply(&dp, &want, now);
    assert!(report.outcomes.values().all(|o| *o == Outcome::Unchanged));
    assert_eq!(dp.calls().take_calls(), vec![]);

    // A restarted agent reads back and finds nothing to change: no modify, no reset connections.
    let mut fresh = Programmer::default();
    let report = fresh.apply(&dp, &want, now);
    assert!(report.outcomes.values().all(|o| *o == Outcome::Unchanged));
    let calls = dp.calls().take_calls();
    assert_eq!(
        (
            count(&calls, CallKind::Query),
            count(&calls, CallKind::Modify)
        ),
        (3, 0)
    );
}

#[test]
fn only_endpoints_whose_rules_changed_are_updated() {
    let dp = setup();
    let mut programmer = Programmer::default();
    let now = Instant::now();
    programmer.apply(&dp, &desired(80), now);
    dp.calls().take_calls();

    let mut want = desired(80);
    want.insert("ep-b".into(), rules(443));
    let report = programmer.apply(&dp, &want, now);
    assert_eq!(
        report.outcomes["ep-b"],
        Outcome::Updated {
            added: 1,
            removed: 1
        }
    );
    assert_eq!(report.outcomes["ep-a"], Outcome::Unchanged);
    let calls = dp.calls().take_calls();
    assert!(
        calls.iter().all(|c| c.endpoint() == Some("ep-b")),
        "{calls:?}"
    );
    // A read, the new rule added, the list read again and written back without the stale rule
    // (every other policy as read), a read back.
    let kinds: Vec<&str> = calls
        .iter()
        .map(|c| match c {
            Call::Modify { request, .. } if request.contains(r#""RequestType":"Add""#) => "add",
            Call::Modify { request, .. } if request.contains(r#""RequestType":"Remove""#) => {
                "remove"
            }
            Call::Modify { request, .. } if request.contains(r#""RequestType":"Update""#) => {
                "update"
            }
            Call::Modify { .. } => "other modify",
            Call::Query { .. } => "read",
            Call::Enumerate => "enumerate",
            Call::QueryNetwork | Call::ModifyNetwork { .. } => "network",
        })
        .collect();
    assert_eq!(kinds, ["read", "add", "read", "update", "read"]);
    assert_converged(&dp, &want);
}

#[test]
fn an_empty_rule_list_removes_netpol_rules_and_keeps_the_rest() {
    let dp = setup();
    let mut programmer = Programmer::default();
    let now = Instant::now();
    programmer.apply(&dp, &desired(80), now);
    let mut want = desired(80);
    want.insert("ep-a".into(), Vec::new());
    programmer.apply(&dp, &want, now);
    assert_eq!(
        dp.calls().endpoint("ep-a").unwrap().policies,
        foreign_policies()
    );
    assert_converged(&dp, &want);
}

/// Runs one fault scenario: the first apply hits `fault` on ep-b; retrying converges, touching
/// only ep-b, with exactly `retry_calls` (queries, modifies); then nothing more is called.
fn fault_converges(fault: Fault, retry_calls: (usize, usize)) {
    let dp = setup();
    let backoff = Backoff {
        initial: Duration::from_secs(1),
        max: Duration::from_secs(30),
    };
    let mut programmer = Programmer::new(backoff);
    let t0 = Instant::now();
    let want = desired(80);
    dp.calls().inject(fault);

    let report = programmer.apply(&dp, &want, t0);
    let Outcome::Failed {
        retry_at,
        failures: 1,
        ..
    } = report.outcomes["ep-b"].clone()
    else {
        panic!("ep-b should have failed: {:?}", report.outcomes["ep-b"]);
    };
    assert_eq!(retry_at, t0 + Duration::from_secs(1));
    assert_eq!(report.updated(), 2, "other endpoints are not held back");
    assert_eq!(programmer.next_retry(), Some(retry_at));
    dp.calls().take_calls();

    // Before the backoff expires nothing is called.
    let report = programmer.apply(&dp, &want, t0);
    assert_eq!(report.outcomes["ep-b"], Outcome::Deferred { retry_at });
    assert_eq!(dp.calls().take_calls(), vec![]);

    let report = programmer.apply(&dp, &want, retry_at);
    assert!(
        matches!(report.outcomes["ep-b"], Outcome::Updated { .. }),
        "{:?}",
        report.outcomes["ep-b"]
    );
    let calls = dp.calls().take_calls();
    assert!(
        calls.iter().all(|c| c.endpoint() == Some("ep-b")),
        "{calls:?}"
    );
    assert_eq!(
        (
            count(&calls, CallKind::Query),
            count(&calls, CallKind::Modify)
        ),
        retry_calls
    );
    assert_converged(&dp, &want);
    assert_eq!(programmer.next_retry(), None);

    programmer.apply(&dp, &want, retry_at);
    assert_eq!(dp.calls().take_calls(), vec![]);
}

#[test]
fn a_failed_modify_is_retried_after_backoff_and_converges() {
    fault_converges(
        Fault::Fail {
            kind: CallKind::Modify,
            endpoint: Some("ep-b".into()),
        },
        (2, 1),
    );
}

#[test]
fn a_failed_query_is_retried_after_backoff_and_converges() {
    fault_converges(
        Fault::Fail {
            kind: CallKind::Query,
            endpoint: Some("ep-b".into()),
        },
        (2, 1),
    );
}

#[test]
fn backoff_grows_with_consecutive_failures() {
    let dp = setup();
    let backoff = Backoff {
        initial: Duration::from_secs(1),
        max: Duration::from_secs(30),
    };
    let mut programmer = Programmer::new(backoff);
    let t0 = Instant::now();
    let want = desired(80);
    for _ in 0..3 {
        dp.calls().inject(Fault::Fail {
            kind: CallKind::Modify,
            endpoint: Some("ep-b".into()),
        });
    }
    let mut now = t0;
    for (failures, delay) in [(1, 1), (2, 2), (3, 4)] {
        let report = programmer.apply(&dp, &want, now);
        let Outcome::Failed {
            retry_at,
            failures: f,
            ..
        } = report.outcomes["ep-b"].clone()
        else {
            panic!()
        };
        assert_eq!((f, retry_at), (failures, now + Duration::from_secs(delay)));
        now = retry_at;
    }
    assert!(matches!(
        programmer.apply(&dp, &want, now).outcomes["ep-b"],
        Outcome::Updated { .. }
    ));
}

#[test]
fn an_endpoint_that_vanishes_mid_update_is_reported_gone_and_left_alone() {
    let dp = setup();
    let mut programmer = Programmer::default();
    let now = Instant::now();
    let want = desired(80);
    dp.calls().inject(Fault::VanishDuringModify {
        endpoint: "ep-b".into(),
    });
    let report = programmer.apply(&dp, &want, now);
    assert_eq!(report.outcomes["ep-b"], Outcome::Gone);
    assert_eq!(report.updated(), 2);
    assert!(dp.calls().endpoint("ep-b").is_none());
    assert_eq!(programmer.next_retry(), None);
    dp.calls().take_calls();

    let report = programmer.apply(&dp, &want, now);
    assert_eq!(report.outcomes["ep-b"], Outcome::Gone);
    assert_eq!(dp.calls().take_calls(), vec![]);
    assert_converged(&dp, &want);
}

#[test]
fn a_service_restart_is_detected_and_everything_is_reprogrammed_once() {
    let dp = setup();
    let mut programmer = Programmer::default();
    let now = Instant::now();
    let want = desired(80);
    programmer.apply(&dp, &want, now);
    dp.calls().take_calls();

    dp.calls().restart();
    assert!(EPS
        .iter()
        .all(|ep| dp.calls().endpoint(ep).unwrap().policies.is_empty()));
    let report = programmer.apply(&dp, &want, now);
    assert_eq!(report.updated(), 3);
    let calls = dp.calls().take_calls();
    assert_eq!(
        (
            count(&calls, CallKind::Query),
            count(&calls, CallKind::Modify)
        ),
        (6, 3)
    );
    for ep in EPS {
        // The restart dropped the foreign policies; netpol does not invent them back.
        let policies = dp.calls().endpoint(ep).unwrap().policies;
        assert!(policies.iter().all(|p| p.netpol_id().is_some()));
        assert_eq!(policies.len(), want[ep].len());
    }
    programmer.apply(&dp, &want, now);
    assert_eq!(dp.calls().take_calls(), vec![]);
}

#[test]
fn rules_netpol_does_not_own_are_refused_without_a_call() {
    let dp = setup();
    let mut programmer = Programmer::default();
    let mut foreign = rules(80);
    foreign[0].id = "someone-else".into();
    let want = BTreeMap::from([("ep-a".to_string(), foreign)]);
    let report = programmer.apply(&dp, &want, Instant::now());
    assert_eq!(
        report.outcomes["ep-a"],
        Outcome::Refused {
            rule: "someone-else".into()
        }
    );
    assert_eq!(dp.calls().take_calls(), vec![]);
}

#[test]
fn listing_endpoints_goes_through_enumerate_and_query() {
    let dp = setup();
    let listing = dp.list_endpoints().unwrap();
    assert!(listing.unreadable.is_empty());
    let endpoints = listing.endpoints;
    assert_eq!(
        endpoints.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(),
        EPS
    );
    assert_eq!(
        endpoints[1].addresses,
        vec!["10.1.0.12".parse::<std::net::IpAddr>().unwrap()]
    );
    let calls = dp.calls().take_calls();
    assert_eq!(
        (
            count(&calls, CallKind::Enumerate),
            count(&calls, CallKind::Query)
        ),
        (1, 3)
    );

    dp.calls().inject(Fault::Fail {
        kind: CallKind::Enumerate,
        endpoint: None,
    });
    let err = dp.list_endpoints().unwrap_err();
    assert!(err.to_string().contains("HcnEnumerateEndpoints"), "{err}");
}

/// A policy another owner (a CNI plugin) puts on an endpoint.
fn cni_policy() -> EndpointPolicy {
    EndpointPolicy::other(
        "L4WFPPROXY",
        &json!({"Port": "15001", "UserSID": "S-1-5-18"}),
    )
}

fn add_request(policies: Vec<EndpointPolicy>) -> ModifyEndpointRequest {
    ModifyEndpointRequest::new(RequestType::Add, policies)
}

#[test]
fn a_policy_another_writer_adds_between_netpols_read_and_write_survives() {
    let dp = setup();
    let mut programmer = Programmer::default();
    let want = desired(80);
    // The CNI plugin adds its policy to ep-b while netpol holds the list it read.
    dp.calls().inject(Fault::Interleave {
        endpoint: "ep-b".into(),
        request: add_request(vec![cni_policy()]),
        after: false,
    });
    let report = programmer.apply(&dp, &want, Instant::now());
    assert_eq!(report.updated(), 3);

    let policies = dp.calls().endpoint("ep-b").unwrap().policies;
    assert!(policies.contains(&cni_policy()), "{policies:?}");
    let (owned, foreign): (Vec<_>, Vec<_>) =
        policies.into_iter().partition(|p| p.netpol_id().is_some());
    let mut expected_foreign = foreign_policies();
    expected_foreign.push(cni_policy());
    assert_eq!(foreign, expected_foreign);
    assert_eq!(by_id(&owned), by_id(&rules_policies(&want["ep-b"])));

    // The same interleaving against the read-modify-Update the programmer no longer sends: the
    // CNI's policy is lost, which is why netpol writes only Add and Remove.
    let read = dp.read_policies("ep-c").unwrap();
    dp.calls().inject(Fault::Interleave {
        endpoint: "ep-c".into(),
        request: add_request(vec![cni_policy()]),
        after: false,
    });
    dp.modify_policies("ep-c", RequestType::Update, read)
        .unwrap();
    assert!(!dp
        .calls()
        .endpoint("ep-c")
        .unwrap()
        .policies
        .contains(&cni_policy()));
}

#[test]
fn a_writer_that_replaces_the_list_just_after_netpol_is_caught_by_the_read_back() {
    let dp = setup();
    let mut programmer = Programmer::default();
    let want = desired(80);
    // Another owner replaces ep-a's list from a read older than netpol's write: netpol's new
    // rules are gone right after netpol added them.
    let mut stale = foreign_policies();
    stale.push(cni_policy());
    dp.calls().inject(Fault::Interleave {
        endpoint: "ep-a".into(),
        request: ModifyEndpointRequest::update(stale),
        after: true,
    });
    let report = programmer.apply(&dp, &want, Instant::now());
    assert!(
        matches!(report.outcomes["ep-a"], Outcome::Updated { .. }),
        "{:?}",
        report.outcomes["ep-a"]
    );
    let calls: Vec<Call> = dp
        .calls()
        .take_calls()
        .into_iter()
        .filter(|c| c.endpoint() == Some("ep-a"))
        .collect();
    // Read, Add (overwritten), read back: missing; Add again, read back: clean.
    assert_eq!(
        (
            count(&calls, CallKind::Query),
            count(&calls, CallKind::Modify)
        ),
        (3, 2)
    );
    let policies = dp.calls().endpoint("ep-a").unwrap().policies;
    assert!(policies.contains(&cni_policy()));
    let owned: Vec<EndpointPolicy> = policies
        .into_iter()
        .filter(|p| p.netpol_id().is_some())
        .collect();
    assert_eq!(by_id(&owned), by_id(&rules_policies(&want["ep-a"])));
}

#[test]
fn a_writer_that_keeps_replacing_the_list_is_a_failure_after_bounded_attempts() {
    let dp = setup();
    let mut programmer = Programmer::default();
    let want = desired(80);
    for _ in 0..netpol_hcn::programmer::ATTEMPTS {
        dp.calls().inject(Fault::Interleave {
            endpoint: "ep-a".into(),
            request: ModifyEndpointRequest::update(foreign_policies()),
            after: true,
        });
    }
    let now = Instant::now();
    let report = programmer.apply(&dp, &want, now);
    let Outcome::Failed { error, .. } = &report.outcomes["ep-a"] else {
        panic!("{:?}", report.outcomes["ep-a"]);
    };
    assert!(
        error.to_string().contains("another writer keeps replacing"),
        "{error}"
    );
    assert_eq!(report.updated(), 2, "the other endpoints are programmed");
    // The other writer has stopped: the retry converges.
    let retry = programmer.next_retry().unwrap();
    let report = programmer.apply(&dp, &want, retry);
    assert!(matches!(report.outcomes["ep-a"], Outcome::Updated { .. }));
    assert_converged(&dp, &want);
}

fn acl(action: AclAction, priority: u16, remote: &str) -> AclPolicySetting {
    let mut rule = AclPolicySetting {
        id: String::new(),
        protocols: "6".into(),
        action,
        direction: AclDirection::In,
        local_addresses: String::new(),
        remote_addresses: remote.into(),
        local_ports: String::new(),
        remote_ports: String::new(),
        rule_type: Some(RuleType::Switch),
        priority,
    };
    rule.id = netpol_hcn::rule_id(&rule);
    rule
}

fn tcp_from(remote: &str) -> Packet {
    Packet {
        direction: AclDirection::In,
        remote_address: remote.parse().unwrap(),
        protocol: 6,
        local_port: 80,
        remote_port: 40000,
    }
}

/// Programs `old` on ep-a, then `new` with the Remove that follows the Add failing, so that
/// ep-a is left holding both, as it does between the two requests. Checks that every packet
/// gets its old or its new verdict there, and that the retry converges. Returns the verdicts in
/// between.
fn between_old_and_new(
    old: Vec<AclPolicySetting>,
    new: Vec<AclPolicySetting>,
    packets: &[Packet],
) -> Vec<AclAction> {
    let dp = setup();
    let mut programmer = Programmer::default();
    let now = Instant::now();
    let verdicts = |dp: &HcnDatapath<HcnSim>| -> Vec<AclAction> {
        packets
            .iter()
            .map(|p| dp.calls().evaluate("ep-a", p).unwrap().action)
            .collect()
    };
    let old_desired = BTreeMap::from([("ep-a".to_string(), old)]);
    let new_desired = BTreeMap::from([("ep-a".to_string(), new)]);
    programmer.apply(&dp, &old_desired, now);
    let before = verdicts(&dp);

    dp.calls().inject(Fault::FailLater {
        kind: CallKind::Modify,
        endpoint: "ep-a".into(),
        skip: 1,
    });
    let report = programmer.apply(&dp, &new_desired, now);
    assert!(matches!(report.outcomes["ep-a"], Outcome::Failed { .. }));
    let between = verdicts(&dp);

    let retry = programmer.next_retry().unwrap();
    programmer.apply(&dp, &new_desired, retry);
    assert_converged(&dp, &new_desired);
    let after = verdicts(&dp);
    for (i, packet) in packets.iter().enumerate() {
        assert!(
            between[i] == before[i] || between[i] == after[i],
            "{packet:?}: {:?} between {:?} and {:?}",
            between[i],
            before[i],
            after[i]
        );
    }
    between
}

#[test]
fn while_a_change_is_written_every_packet_gets_its_old_or_its_new_verdict() {
    // A block widens from a /24 to a /16, and the allow-all after it is unchanged. Removing the
    // old block before adding the new one would let 10.1.0.11 through in between, though both
    // lists block it.
    let between = between_old_and_new(
        vec![
            acl(AclAction::Block, 1000, "10.1.0.0/24"),
            acl(AclAction::Allow, 1001, ""),
        ],
        vec![
            acl(AclAction::Block, 1000, "10.1.0.0/16"),
            acl(AclAction::Allow, 1001, ""),
        ],
        &[
            tcp_from("10.1.0.11"),
            tcp_from("10.1.9.9"),
            tcp_from("10.2.0.1"),
        ],
    );
    assert_eq!(between[0], AclAction::Block);

    // The levels' actions flip: the new rules share priorities with old rules of the other
    // action. HCN's order between them is undefined, but either is the old or the new verdict.
    between_old_and_new(
        vec![
            acl(AclAction::Block, 1000, "10.1.0.11"),
            acl(AclAction::Allow, 1001, ""),
        ],
        vec![
            acl(AclAction::Allow, 1000, "10.1.0.11"),
            acl(AclAction::Block, 1001, ""),
        ],
        &[tcp_from("10.1.0.11"), tcp_from("10.1.0.12")],
    );
}
