//! The cluster mode through API server outages (issue 18): a kind of pods, namespaces or nodes
//! that cannot be listed is never taken as empty; a slow list of many pages completes; and the
//! delays an outage grew never carry over to the next, so an event made during a short watch
//! outage arrives promptly.
//!
//! Tests wait for a condition (with a generous bound, failing if it is never reached), never
//! for a fixed time.

use crate::agent_support;

use std::time::{Duration, Instant};

use agent_support::cluster::*;
use agent_support::*;
use netpol_agent::sources::cluster::WatchConfig;
use netpol_agent::SourceKind;
use netpol_datapath::Backoff;
use serde_json::json;

/// Requests of `times` made after `since`.
fn after(times: &[Instant], since: Instant) -> usize {
    times.iter().filter(|t| **t > since).count()
}

#[test]
fn pods_that_cannot_be_listed_are_never_taken_as_empty_and_the_datapath_keeps_what_it_has() {
    let server = example_server();
    let sim = new_sim();
    // A first agent programmed the node; it restarts while the API server fails pod lists.
    {
        let mut first = ClusterAgent::start_on(&server, config(), sim.clone());
        first.run_until("first sync", |a| a.pipeline.synced());
        first.assert_programs(&server, "core-kind-before");
    }
    server.fail_lists("Pod", &[403; 10_000]);
    sim.calls().take_calls();
    let config = WatchConfig {
        initial_wait: Duration::from_millis(300),
        ..config()
    };
    let started = Instant::now();
    let mut agent = ClusterAgent::start_on(&server, config, sim.clone());
    // Well past the initial wait, the pod lists are still retried...
    let waited = started + config.initial_wait;
    agent.run_until("pod lists retried past the initial wait", |_| {
        after(&server.list_times("Pod"), waited) >= 3
    });
    agent.run_until("the other kinds listed", |a| {
        a.pipeline.indexes().unsynced() == vec![SourceKind::Pod]
    });
    // ...and nothing was programmed: every endpoint keeps the rules it had.
    assert!(!agent.pipeline.sources_synced());
    assert!(
        modified(&agent.sim.calls().calls()).is_empty(),
        "a node whose pods could not be listed was reprogrammed"
    );
    agent.assert_programs(&server, "core-kind-held");
    let reason = agent.health.readiness().unwrap_err();
    assert!(reason.contains("kind Pod"), "{reason}");
    assert!(
        reason.contains("nothing is programmed until it lists"),
        "{reason}"
    );
    agent.assert_metric("netpol_kind_synced{kind=\"Pod\"} 0");

    // The pods list: enforcement resumes, with what changed meanwhile.
    server.delete("NetworkPolicy", "shop/db");
    server.clear_failures();
    agent.run_until("first sync", |a| a.pipeline.synced());
    agent.run_until("ready", |a| a.health.readiness().is_ok());
    agent.assert_programs(&server, "core-kind-listed");
}

#[test]
fn a_list_slower_than_the_page_time_out_completes_page_by_page() {
    let server = example_server();
    // Eight pod pages of 300 ms each: 2.4 s for the whole list, 1.5 s allowed per page.
    server.slow_list_pages("Pod", Duration::from_millis(300));
    let config = WatchConfig {
        page_size: 1,
        page_timeout: Duration::from_millis(1500),
        ..config()
    };
    let started = Instant::now();
    let mut agent = ClusterAgent::start(&server, config);
    agent.run_until("first sync", |a| a.pipeline.synced());
    assert!(
        started.elapsed() > config.page_timeout,
        "the list took longer than one page's time-out"
    );
    // One request per pod: no page timed out, the first list was the one that completed.
    assert_eq!(server.lists_of("Pod").len(), 8);
    assert!(!agent
        .metrics_text()
        .contains("netpol_watch_errors_total{kind=\"Pod\"}"));
    agent.assert_programs(&server, "slow-pages");
}

#[test]
fn after_an_outage_the_backoff_starts_afresh_and_a_pod_made_during_a_watch_outage_arrives() {
    let server = example_server();
    // Eight failed pod lists grow the delay to 20 ms × 2^7 = 2.56 s; were it kept, the watch
    // retries after the next outage would wait 5 s, 10 s, 20 s.
    server.fail_lists("Pod", &[500; 8]);
    let config = WatchConfig {
        backoff: Backoff {
            initial: Duration::from_millis(20),
            max: Duration::from_secs(60),
        },
        ..config()
    };
    let mut agent = ClusterAgent::start(&server, config);
    agent.run_until("first sync", |a| a.pipeline.synced());
    agent.run_until("pods watched", |_| !server.watches_of("Pod").is_empty());

    // The pod watch drops and is refused three times; a pod is made on node-1 meanwhile.
    server.fail_watches("Pod", &[500, 500, 500]);
    let outage = Instant::now();
    server.sever_watches();
    agent.run_until("the pod watch refused", |_| {
        after(&server.watch_times("Pod"), outage) >= 1
    });
    server.apply(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web-3", "namespace": "shop", "labels": {"app": "web"}},
        "spec": {"nodeName": NODE, "containers": [{"name": "iis", "ports": [{"name": "http", "containerPort": 80}]}]},
        "status": {"phase": "Running", "podIP": "10.244.1.130"},
    }));
    agent.run_until("the new pod programmed", |a| {
        a.pipeline
            .endpoints()
            .iter()
            .any(|(_, pod)| pod.as_deref() == Some("shop/web-3"))
    });
    agent.assert_programs(&server, "watch-outage");
    agent.run_until("the pod watch through", |_| {
        after(&server.watch_times("Pod"), outage) >= 4
    });

    // The re-watches: three refused, the fourth through, each after the fresh backoff's delay.
    let watches: Vec<Instant> = server
        .watch_times("Pod")
        .into_iter()
        .filter(|t| *t > outage)
        .collect();
    assert!(watches.len() >= 4, "{} watches", watches.len());
    for (n, pair) in watches.windows(2).take(3).enumerate() {
        let gap = pair[1] - pair[0];
        let want = config.backoff.delay(u32::try_from(n).unwrap() + 1);
        assert!(gap >= want, "re-watch {n}: {gap:?} < {want:?}");
        // Far below what the list failures had grown the delay to.
        assert!(
            gap < config.backoff.delay(9) / 2,
            "re-watch {n} after {gap:?}"
        );
    }
    agent.assert_metric("netpol_watch_errors_total{kind=\"Pod\"} 11");
}
