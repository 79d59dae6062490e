//! What one fault may not do to a node: an HNS restart between two calls (no call fails, no
//! callback fires) must still be noticed, and one endpoint that cannot be read must not keep
//! the others from being programmed.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use netpol_datapath::{
    compile_endpoint, ApplyReport, Backoff, CompiledPods, Desired, EndpointInfo, Enforcer,
    LocalPods, Outcome,
};
use netpol_engine::*;
use netpol_hcn::discovery::HostEndpoints;
use netpol_hcn::restart::{RestartPoller, ServiceState};
use netpol_hcn::sim::{CallKind, Fault, SimSession};
use netpol_hcn::{compile_acls, HcnApi, HcnDatapath, HcnEnforcer, HcnSim, Programmer};

const EPS: [&str; 3] = ["ep-a", "ep-b", "ep-c"];

fn address(i: usize) -> std::net::IpAddr {
    format!("10.1.0.{}", 11 + i).parse().unwrap()
}

fn host() -> Arc<HcnDatapath<HcnSim>> {
    let sim = HcnSim::new();
    for (i, ep) in EPS.iter().enumerate() {
        sim.add_endpoint(
            EndpointInfo {
                id: ep.to_string(),
                name: format!("pod-{i}"),
                addresses: vec![address(i)],
            },
            Vec::new(),
        );
    }
    Arc::new(HcnDatapath::new(sim))
}

fn map_and_store() -> (MapState, IdentityStore) {
    common::isolated_but_tcp_from_one_host(80)
}

fn holds_netpol_rules(sim: &HcnSim, endpoint: &str) -> bool {
    sim.endpoint(endpoint)
        .unwrap()
        .policies
        .iter()
        .any(|p| p.netpol_id().is_some())
}

#[test]
fn a_restart_between_two_calls_is_found_by_polling_the_hns_service() {
    let sim = host();
    // As the Windows client: a handle per call and no service callback, so after a restart
    // every call succeeds and nothing fails to tell.
    let session = Arc::new(HcnDatapath::new(SimSession::per_call(&sim)));
    let (map, store) = map_and_store();
    let rules = compile_acls(&map, &store).unwrap().rules;
    let desired: BTreeMap<String, _> = EPS.iter().map(|e| (e.to_string(), rules.clone())).collect();
    let mut programmer = Programmer::default();
    let now = Instant::now();
    assert_eq!(
        programmer.apply(session.as_ref(), &desired, now).updated(),
        3
    );

    // The service process the watch sees: the simulator's instance stands for the process id.
    let probe_sim = sim.clone();
    let mut poller = RestartPoller::new(
        Box::new(move || {
            Some(ServiceState::Running {
                process_id: 4000 + probe_sim.calls().service_instance() as u32,
            })
        }),
        session.calls().signal(),
    );

    sim.calls().restart();
    // Without the watch, what the programmer believes programmed hides the loss.
    let report = programmer.apply(session.as_ref(), &desired, now);
    assert!(report.outcomes.values().all(|o| *o == Outcome::Unchanged));
    assert!(!holds_netpol_rules(sim.calls(), "ep-a"));

    assert!(poller.poll());
    let report = programmer.apply(session.as_ref(), &desired, now);
    assert_eq!(report.updated(), 3, "{report:?}");
    assert!(EPS.iter().all(|ep| holds_netpol_rules(sim.calls(), ep)));
    // One restart, one resync.
    assert!(poller.poll());
    let report = programmer.apply(session.as_ref(), &desired, now);
    assert!(report.outcomes.values().all(|o| *o == Outcome::Unchanged));
}

fn pods() -> LocalPods {
    EPS.iter()
        .enumerate()
        .map(|(i, _)| (format!("x/pod-{i}"), vec![address(i)]))
        .collect()
}

fn compiled() -> (CompiledPods, IdentityStore) {
    let (map, store) = map_and_store();
    let rules = netpol_engine::Shared::new(compile_endpoint(&map, &store).unwrap());
    let compiled = pods().keys().map(|k| (k.clone(), rules.clone())).collect();
    (compiled, store)
}

/// Every pod of [`pods`] with the rules of [`compiled`].
fn enforce(enforcer: &mut HcnEnforcer, now: Instant) -> ApplyReport {
    let pods = pods();
    let (compiled, identities) = compiled();
    let desired = Desired {
        pods: &pods,
        compiled: &compiled,
        identities: &identities,
        changed: &BTreeSet::new(),
        audit: &Default::default(),
    };
    enforcer.enforce(&desired, false, now).unwrap()
}

fn failed(report: &ApplyReport, endpoint: &str) -> (u32, Instant) {
    match &report.outcomes[endpoint] {
        Outcome::Failed {
            failures, retry_at, ..
        } => (*failures, *retry_at),
        other => panic!("{endpoint}: {other:?}"),
    }
}

#[test]
fn an_endpoint_that_cannot_be_read_is_skipped_reported_and_listed_again_after_backoff() {
    let sim = host();
    let backoff = Backoff {
        initial: Duration::from_secs(1),
        max: Duration::from_secs(30),
    };
    let mut enforcer = HcnEnforcer::new(sim.clone(), Box::new(HostEndpoints::default()), backoff);
    // ep-b's properties cannot be read during the first listing.
    sim.calls().inject(Fault::Fail {
        kind: CallKind::Query,
        endpoint: Some("ep-b".into()),
    });
    let t0 = Instant::now();
    let report = enforce(&mut enforcer, t0);
    assert_eq!(report.updated(), 2, "the others are programmed: {report:?}");
    assert_eq!(failed(&report, "ep-b"), (1, t0 + Duration::from_secs(1)));
    assert!(!holds_netpol_rules(sim.calls(), "ep-b"));
    assert_eq!(enforcer.next_wakeup(), Some(t0 + Duration::from_secs(1)));

    // Before the backoff expires: still reported, and nothing is listed again.
    sim.calls().take_calls();
    let report = enforce(&mut enforcer, t0);
    assert_eq!(failed(&report, "ep-b"), (1, t0 + Duration::from_secs(1)));
    assert!(sim
        .calls()
        .take_calls()
        .iter()
        .all(|c| c.kind() != CallKind::Enumerate));

    // Then the endpoints are listed again; ep-b reads now and is programmed.
    let report = enforce(&mut enforcer, t0 + Duration::from_secs(1));
    assert!(
        matches!(report.outcomes["ep-b"], Outcome::Updated { .. }),
        "{report:?}"
    );
    assert!(holds_netpol_rules(sim.calls(), "ep-b"));
    assert_eq!(enforcer.next_wakeup(), None);
}

#[test]
fn a_dead_hns_fails_the_listing_as_a_whole() {
    // HNS gone is not one unreadable endpoint: no listing, and the caller reconnects.
    let sim = host();
    let session = HcnDatapath::new(SimSession::connect(&sim));
    sim.calls().restart();
    let error = session.list_endpoints().unwrap_err();
    assert!(error.is_disconnected(), "{error}");
}
