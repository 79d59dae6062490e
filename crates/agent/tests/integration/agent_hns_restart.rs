//! HNS restarts: the service comes back empty, every handle of the agent's client is invalid and
//! its notification registration forgotten. The agent must re-create its client (registering
//! again) and reprogram every endpoint.

use crate::agent_support;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use agent_support::*;
use netpol_agent::reconnect::Reconnecting;
use netpol_datapath::DatapathError;
use netpol_hcn::sim::{HcnSim, SimSession};
use netpol_hcn::{HcnApi, HcnDatapath};

/// A reconnecting datapath over simulator sessions, and how many sessions it opened.
fn sessions(sim: &Arc<HcnDatapath<HcnSim>>) -> (Arc<Reconnecting>, Arc<AtomicUsize>) {
    let opened = Arc::new(AtomicUsize::new(0));
    let (host, count) = (sim.clone(), opened.clone());
    let datapath = Reconnecting::new(Box::new(move || {
        count.fetch_add(1, Ordering::SeqCst);
        Ok(Arc::new(HcnDatapath::new(SimSession::connect(&host))) as Arc<dyn HcnApi>)
    }))
    .unwrap();
    (Arc::new(datapath), opened)
}

#[test]
fn after_a_restart_the_client_is_recreated_registered_again_and_everything_reprogrammed() {
    let dir = scratch_dir("hns-restart-sessions");
    copy_example_cluster(&dir);
    let sim = new_sim();
    let (datapath, opened) = sessions(&sim);
    let woken = Arc::new(AtomicUsize::new(0));
    {
        let woken = woken.clone();
        datapath
            .resync_signal()
            .subscribe(move || _ = woken.fetch_add(1, Ordering::SeqCst));
    }
    let mut agent = Agent::start_over(&dir, &sim, datapath.clone());
    assert!(agent.sync().complete());
    assert_eq!(sim.calls().registrations(), 1);

    sim.calls().restart();
    // The disconnect notification wakes the agent (the driver turns it into a resync); the
    // old registration is gone with the old service.
    assert_eq!(woken.load(Ordering::SeqCst), 1);
    assert_eq!(sim.calls().registrations(), 0);
    agent.pipeline.request_resync();
    let report = agent.reconcile();
    assert!(report.complete(), "{report:?}");
    assert_eq!(report.apply.updated(), 6, "every endpoint reprogrammed");
    assert_eq!(opened.load(Ordering::SeqCst), 2, "one new client");
    assert_eq!(sim.calls().registrations(), 1, "registered again");
    assert_converged(&dir, &sim);

    // A second restart is handled the same way: the new registration works.
    sim.calls().restart();
    assert_eq!(woken.load(Ordering::SeqCst), 2);
    agent.pipeline.request_resync();
    assert_eq!(agent.reconcile().apply.updated(), 6);
    assert_eq!(opened.load(Ordering::SeqCst), 3);
    assert_converged(&dir, &sim);
}

#[test]
fn a_restart_nobody_announced_is_found_by_the_first_failing_call() {
    let dir = scratch_dir("hns-restart-silent");
    copy_example_cluster(&dir);
    let sim = new_sim();
    // HNS refuses the callback registration: only the calls can tell.
    sim.calls().refuse_registrations(true);
    let (datapath, opened) = sessions(&sim);
    let mut agent = Agent::start_over(&dir, &sim, datapath.clone());
    assert!(agent.sync().complete());
    let before = datapath.resync_signal().generation();

    sim.calls().restart();
    // The periodic resync finds out: its first call fails as disconnected, the client is
    // re-created, the call retried, and the resync signal raised for the programmer.
    agent.pipeline.request_resync();
    let first = agent.reconcile();
    assert!(first.discovery_error.is_none(), "{first:?}");
    assert_eq!(opened.load(Ordering::SeqCst), 2);
    assert!(datapath.resync_signal().generation() > before);
    assert_eq!(first.apply.updated(), 6, "every endpoint reprogrammed");
    assert_converged(&dir, &sim);
}

#[test]
fn a_restart_found_while_hns_is_still_down_is_announced_once_it_answers() {
    let dir = scratch_dir("hns-restart-down");
    copy_example_cluster(&dir);
    let sim = new_sim();
    sim.calls().refuse_registrations(true);
    // While `down`, connecting fails as it does while HNS restarts.
    let down = Arc::new(AtomicBool::new(false));
    let (host, is_down) = (sim.clone(), down.clone());
    let datapath = Arc::new(
        Reconnecting::new(Box::new(move || {
            if is_down.load(Ordering::SeqCst) {
                return Err(DatapathError::Call {
                    call: "connecting to HNS",
                    endpoint: None,
                    message: "HNSCall GET /globals/version: RPC_S_SERVER_UNAVAILABLE".into(),
                });
            }
            Ok(Arc::new(HcnDatapath::new(SimSession::connect(&host))) as Arc<dyn HcnApi>)
        }))
        .unwrap(),
    );
    let mut agent = Agent::start_over(&dir, &sim, datapath.clone());
    assert!(agent.sync().complete());

    // HNS restarts and is not back yet when a policy change makes the agent call it: the call
    // fails as disconnected, and so does the reconnect.
    sim.calls().restart();
    down.store(true, Ordering::SeqCst);
    agent.edit("policies/networkpolicies.yaml", "port: 1433", "port: 1434");
    let report = agent.sync();
    assert!(report.apply.failed() > 0, "{report:?}");
    let before = datapath.resync_signal().generation();

    // HNS answers again. The reconnect that succeeds announces the restart, so the endpoints the
    // failed calls did not touch are re-read too: all of them lost their rules.
    down.store(false, Ordering::SeqCst);
    agent.advance(Duration::from_secs(10));
    let first = agent.reconcile();
    assert!(datapath.resync_signal().generation() > before);
    let second = agent.reconcile();
    assert_eq!(first.apply.updated() + second.apply.updated(), 6);
    assert!(second.complete(), "{second:?}");
    assert_converged(&dir, &sim);
}
