//! The enforcer renders each shared compiled list once and keeps the rendering for as long as
//! the list is in use. Its cache is keyed by the list's id, not by where the list lives: rule
//! lists dropped and made again (equal, or different at an address the allocator hands out
//! again) must program exactly what they say.

use crate::common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use netpol_datapath::{compile_endpoint, Backoff, Desired, EndpointInfo, Enforcer, Outcome};
use netpol_engine::*;
use netpol_hcn::discovery::HostEndpoints;
use netpol_hcn::oracle::packet;
use netpol_hcn::schema::AclAction;
use netpol_hcn::{HcnDatapath, HcnEnforcer, HcnSim};

const ENDPOINTS: usize = 3;

fn host() -> Arc<HcnDatapath<HcnSim>> {
    let sim = HcnSim::new();
    for i in 0..ENDPOINTS {
        sim.add_endpoint(
            EndpointInfo {
                id: format!("ep-{i}"),
                name: format!("pod-{i}"),
                addresses: vec![format!("10.1.0.{}", 21 + i).parse().unwrap()],
            },
            Vec::new(),
        );
    }
    Arc::new(HcnDatapath::new(sim))
}

/// Every endpoint with one list, made afresh, that allows TCP `port` from 10.1.0.11 only.
fn enforce_port(
    enforcer: &mut HcnEnforcer,
    port: u16,
    now: Instant,
) -> netpol_datapath::ApplyReport {
    let (map, store) = common::isolated_but_tcp_from_one_host(port);
    let rules = Shared::new(compile_endpoint(&map, &store).unwrap());
    let pods = (0..ENDPOINTS)
        .map(|i| {
            (
                format!("x/pod-{i}"),
                vec![format!("10.1.0.{}", 21 + i).parse().unwrap()],
            )
        })
        .collect();
    let compiled = (0..ENDPOINTS)
        .map(|i| (format!("x/pod-{i}"), rules.clone()))
        .collect();
    // The list goes out of scope on return; only the enforcer's cache may still hold it.
    enforcer
        .enforce(
            &Desired {
                pods: &pods,
                compiled: &compiled,
                identities: &store,
                changed: &BTreeSet::new(),
                audit: &Default::default(),
            },
            false,
            now,
        )
        .unwrap()
}

fn action(dp: &HcnDatapath<HcnSim>, endpoint: &str, port: u16) -> AclAction {
    dp.calls()
        .evaluate(
            endpoint,
            &packet(
                Direction::Ingress,
                "10.1.0.11".parse().unwrap(),
                Protocol::Tcp,
                port,
            ),
        )
        .unwrap()
        .action
}

#[test]
fn lists_dropped_and_made_again_program_what_they_say() {
    let dp = host();
    let backoff = Backoff {
        initial: Duration::from_secs(1),
        max: Duration::from_secs(30),
    };
    let mut enforcer = HcnEnforcer::new(dp.clone(), Box::new(HostEndpoints::default()), backoff);
    let now = Instant::now();
    let mut previous = None;
    // Alternating ports makes each round's list differ from the last one, which was dropped
    // just before: where the allocator reuses its address, an address-keyed cache would
    // program the old rendering. Repeating a port makes a list equal to one dropped earlier.
    for (round, port) in [80, 81, 81, 80, 80, 82, 80, 81, 82, 82]
        .into_iter()
        .enumerate()
    {
        let report = enforce_port(&mut enforcer, port, now);
        for i in 0..ENDPOINTS {
            let endpoint = format!("ep-{i}");
            let outcome = &report.outcomes[&endpoint];
            if previous == Some(port) {
                assert_eq!(
                    *outcome,
                    Outcome::Unchanged,
                    "round {round}: an equal list made again must not rewrite {endpoint}"
                );
            } else {
                assert!(
                    matches!(outcome, Outcome::Updated { .. }),
                    "round {round}: port {port} on {endpoint}: {outcome:?}"
                );
            }
            for probe in [80, 81, 82] {
                let expected = if probe == port {
                    AclAction::Allow
                } else {
                    AclAction::Block
                };
                assert_eq!(
                    action(&dp, &endpoint, probe),
                    expected,
                    "round {round}: list for port {port}, probe {probe} on {endpoint}"
                );
            }
        }
        previous = Some(port);
    }
}
