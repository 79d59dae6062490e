//! An idle cluster costs an agent only its open watches (issue 36): once synced, with nothing
//! changing, the agent makes no list, no read and no write, though its refusal reporter is
//! running (it posted an Event at start) with a Lease period far shorter than the window, so
//! that any polling would show. Counted by the API server stand-in.

use crate::agent_support;

use std::time::{Duration, Instant};

use agent_support::cluster::*;
use netpol_agent::refusals::{Reporter, ReporterConfig};
use netpol_agent::sources::cluster::resources;
use netpol_testkit::files::INVALID_POLICY;
use serde_json::Value;

#[test]
fn an_idle_agent_makes_no_request_but_its_watches() {
    let server = example_server();
    server.apply(serde_saphyr::from_str::<Value>(INVALID_POLICY).unwrap());
    let mut agent = ClusterAgent::start(&server, config());
    let lease_duration = Duration::from_millis(90);
    let (refusals, refused) = tokio::sync::mpsc::unbounded_channel();
    agent.pipeline.report_refusals(refusals);
    {
        let _entered = agent.runtime.enter();
        let reporter = Reporter::new(
            server.client(),
            ReporterConfig {
                lease_duration,
                ..ReporterConfig::for_node("netpol-system", "node-1")
            },
            resources().into_iter().map(|(_, r)| r).collect(),
        );
        agent.runtime.spawn(reporter.run(refused));
    }
    // The agent is ready, and `/readyz` names the refused policy beside "ok"
    // (docs/semantics.md).
    let names_the_refusal = |a: &ClusterAgent| {
        a.health.readiness().is_ok() && a.health.notices().iter().any(|n| n.contains("broken"))
    };
    agent.run_until("synced, the refusal named and posted", |a| {
        a.pipeline.synced() && names_the_refusal(a) && server.events().len() == 1
    });
    let start = server.traffic();
    assert!(start.writable >= 2, "the reporter wrote nothing: {start:?}");

    // An idle window of more than ten Lease periods.
    let idle_since = Instant::now();
    agent.run_until("an idle window", |_| {
        idle_since.elapsed() > lease_duration * 12
    });
    let idle = server.traffic().since(&start);
    assert_eq!(
        idle.non_watch_requests(),
        0,
        "requests other than watches while idle: {idle:?}"
    );
    assert!(
        names_the_refusal(&agent),
        "{:?} {:?}",
        agent.health.readiness(),
        agent.health.notices()
    );
    println!("start: {start:?}\nidle window: {idle:?}");
}
