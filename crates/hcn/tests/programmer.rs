//! The programmer over the simulator: idempotence, per-endpoint diffs, faults and convergence,
//! and never touching policies netpol does not own.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use netpol_datapath::testing::*;
use netpol_datapath::{Backoff, EndpointInfo, Outcome};
use netpol_engine::*;
use netpol_hcn::schema::{AclAction, AclDirection, AclPolicySetting, EndpointPolicy, RuleType};
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
    let (store, ids) = store_with(&[], &["10.1.0.11"]);
    let mut b = MapBuilder::new(Verdict::Allow);
    b.set(
        Direction::Ingress,
        None,
        key(None, 0, 0),
        value(2, Verdict::Deny, None),
    );
    b.set(
        Direction::Ingress,
        Some(ids["10.1.0.11"]),
        key(Some(Protocol::Tcp), port, 16),
        value(5, Verdict::Allow, None),
    );
    compile_acls(&b.build(), &store).unwrap().rules
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
    // A read, the new rule added, the stale one removed, a read back.
    let kinds: Vec<&str> = calls
        .iter()
        .map(|c| match c {
            Call::Modify { request, .. } if request.contains(r#""RequestType":"Add""#) => "add",
            Call::Modify { request, .. } if request.contains(r#""RequestType":"Remove""#) => {
                "remove"
            }
            Call::Modify { .. } => "other modify",
            Call::Query { .. } => "read",
            Call::Enumerate => "enumerate",
        })
        .collect();
    assert_eq!(kinds, ["read", "add", "remove", "read"]);
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
