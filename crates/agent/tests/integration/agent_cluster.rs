//! The cluster mode against an in-process stand-in for the API server on loopback: the agent's
//! real list/watch code over HTTP, feeding a pipeline that programs the HCN simulator. Each test
//! asserts what ends up programmed.
//!
//! Tests wait for a condition (with a generous bound, failing if it is never reached), never
//! for a fixed time.

use crate::agent_support;

use std::time::Duration;

use agent_support::cluster::*;
use agent_support::*;
use netpol_agent::driver::Input;
use netpol_agent::sources::cluster::WatchConfig;
use netpol_agent::SourceKind;
use netpol_indexes::Event;
use serde_json::json;

#[test]
fn lists_page_by_page_then_watches_from_the_lists_version() {
    let server = example_server();
    let mut agent = ClusterAgent::start(&server, config());
    assert!(agent.health.readiness().is_err());
    agent.run_until("first sync", |a| a.pipeline.synced());
    agent.assert_programs(&server, "paging");
    assert_eq!(agent.valid(SourceKind::NetworkPolicy), 4);

    // The shop's pods came in pages of two: later pages carry the continue token.
    let lists = server.lists_of("Pod");
    assert!(lists.len() >= 2, "{lists:?}");
    assert!(lists.iter().all(|l| l.contains("limit=2")), "{lists:?}");
    assert!(
        lists[1..].iter().all(|l| l.contains("continue=")),
        "{lists:?}"
    );
    // The watch starts from the list's resourceVersion and asks for bookmarks.
    agent.run_until("a watch", |_| !server.watches_of("Pod").is_empty());
    let watch = &server.watches_of("Pod")[0];
    assert!(watch.contains("allowWatchBookmarks=true"), "{watch}");
    assert!(watch.contains("resourceVersion="), "{watch}");
    agent.assert_metric("netpol_kind_synced{kind=\"Pod\"} 1");
}

/// Each list page is decoded and handed to the reconcile loop before the next is asked for, and
/// the loop's input channel is bounded (8 inputs here): a list is never far ahead of the loop.
#[test]
fn a_list_is_read_a_page_at_a_time_as_the_loop_takes_it() {
    let server = example_server();
    for i in 0..60 {
        server.apply(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("batch-{i}"), "namespace": "shop", "labels": {"app": "batch"}},
            "spec": {"nodeName": "node-2", "containers": [{"name": "c"}]},
            "status": {"phase": "Running", "podIP": format!("10.244.9.{}", i + 1)},
        }));
    }
    let mut agent = ClusterAgent::start(&server, config());
    let mut pods_taken = 0;
    while !agent.pipeline.sources_synced() {
        let input = agent.inputs.recv_timeout(PATIENCE).expect("an input");
        if let Input::Event(event) = &input {
            if event.kind == SourceKind::Pod && matches!(event.event, Event::InitApply(_)) {
                pods_taken += 1;
            }
        }
        agent.take(input);
        // Pages of two: what was fetched is at most a full channel and the page being sent
        // ahead of what the loop took.
        let fetched = 2 * server.lists_of("Pod").len();
        assert!(
            fetched <= pods_taken + 8 + 2 + 2,
            "{fetched} pods fetched, {pods_taken} taken"
        );
    }
    assert!(pods_taken > 60, "{pods_taken}");
    agent.pipeline.reconcile(std::time::Instant::now());
    agent.run_until("first sync", |a| a.pipeline.synced());
    assert_eq!(agent.pipeline.indexes().pods().len(), pods_taken);
    agent.assert_programs(&server, "page-at-a-time");
}

#[test]
fn watched_changes_apply_and_a_dropped_watch_resumes_without_a_list() {
    let server = example_server();
    let mut agent = ClusterAgent::start(&server, config());
    agent.run_until("first sync", |a| a.pipeline.synced());
    agent.run_until("NetworkPolicy watched", |_| {
        !server.watches_of("NetworkPolicy").is_empty()
    });

    // db-0 admits api-1 on 1433; a policy isolating api-1's egress cuts that.
    assert!(agent.allowed("shop/api-1", "shop/db-0", 1433));
    server.apply(network_policy(
        "api-no-egress",
        "shop",
        json!({"podSelector": {"matchLabels": {"app": "api"}}, "policyTypes": ["Egress"]}),
    ));
    agent.run_until("the new policy", |a| {
        a.valid(SourceKind::NetworkPolicy) == 5
    });
    agent.run_until("reprogrammed", |a| {
        !a.allowed("shop/api-1", "shop/db-0", 1433)
    });
    agent.assert_programs(&server, "watch-add");

    // The connection drops; the agent watches again from where it was, without listing.
    let lists = server.lists_of("NetworkPolicy").len();
    server.sever_watches();
    agent.run_until("a second watch", |_| {
        server.watches_of("NetworkPolicy").len() >= 2
    });
    let watches = server.watches_of("NetworkPolicy");
    let version = |w: &str| -> u64 {
        let start = w.find("resourceVersion=").unwrap() + "resourceVersion=".len();
        w[start..].split('&').next().unwrap().parse().unwrap()
    };
    assert!(version(&watches[1]) > version(&watches[0]), "{watches:?}");

    // A deletion after the drop arrives over the resumed watch.
    server.delete("NetworkPolicy", "shop/api-no-egress");
    agent.run_until("the deletion", |a| a.valid(SourceKind::NetworkPolicy) == 4);
    agent.run_until("reprogrammed", |a| {
        a.allowed("shop/api-1", "shop/db-0", 1433)
    });
    assert_eq!(
        server.lists_of("NetworkPolicy").len(),
        lists,
        "no list after a drop"
    );
    agent.assert_programs(&server, "watch-resume");
}

#[test]
fn gone_relists_and_deletions_made_meanwhile_take_effect() {
    let server = example_server();
    let mut agent = ClusterAgent::start(&server, config());
    agent.run_until("first sync", |a| a.pipeline.synced());
    assert!(!agent.allowed("shop/web-1", "shop/db-0", 1433));

    // While the agent is disconnected, db's policy goes and the history is compacted.
    server.delete_unseen("NetworkPolicy", "shop/db");
    server.compact();
    server.sever_watches();
    agent.run_until("the relist", |a| a.valid(SourceKind::NetworkPolicy) == 3);
    agent.run_until("reprogrammed", |a| {
        a.allowed("shop/web-1", "shop/db-0", 1433)
    });
    agent.assert_metric("netpol_relists_total{kind=\"NetworkPolicy\"} 1");
    agent.assert_programs(&server, "gone");
}

#[test]
fn an_invalid_custom_resource_is_skipped_alone() {
    let server = example_server();
    server.apply(json!({
        "apiVersion": "cilium.io/v2", "kind": "CiliumNetworkPolicy",
        "metadata": {"name": "oops", "namespace": "shop"},
        "spec": {"endpointSelector": {}, "ingress": "oops"},
    }));
    server.apply(json!({
        "apiVersion": "policy.networking.k8s.io/v1alpha1", "kind": "AdminNetworkPolicy",
        "metadata": {"name": "high"},
        "spec": {"priority": "high", "subject": {"namespaces": {}}, "ingress": []},
    }));
    let mut agent = ClusterAgent::start(&server, config());
    agent.run_until("first sync", |a| a.pipeline.synced());
    assert_eq!(agent.invalid(SourceKind::CiliumNetworkPolicy), 1);
    assert_eq!(agent.valid(SourceKind::CiliumNetworkPolicy), 1);
    assert_eq!(agent.invalid(SourceKind::AdminNetworkPolicy), 1);
    assert_eq!(agent.valid(SourceKind::AdminNetworkPolicy), 2);
    agent.assert_metric("netpol_policies{kind=\"CiliumNetworkPolicy\",validity=\"invalid\"} 1");
    // Everything else is enforced: the same rules as a fresh engine that skips the two.
    agent.assert_programs(&server, "invalid");

    // A valid policy turned misshapen stops being enforced and counts as invalid; fixed, back.
    assert!(!agent.allowed("shop/web-1", "shop/db-0", 1433));
    let broken = network_policy("db", "shop", json!({"podSelector": {"matchLabels": "db"}}));
    server.apply(broken);
    agent.run_until("db invalid", |a| a.invalid(SourceKind::NetworkPolicy) == 1);
    agent.run_until("db unenforced", |a| {
        a.allowed("shop/web-1", "shop/db-0", 1433)
    });
    agent.assert_programs(&server, "invalid-turned");
    server.delete("NetworkPolicy", "shop/db");
    agent.run_until("db gone", |a| a.invalid(SourceKind::NetworkPolicy) == 0);
}

#[test]
fn a_crd_installed_later_is_followed() {
    let server = example_server();
    server.delete_unseen("CiliumNetworkPolicy", "payments/ledger-egress");
    server.set_installed("CiliumNetworkPolicy", false);
    let mut agent = ClusterAgent::start(&server, config());
    agent.run_until("first sync without the CRD", |a| a.pipeline.synced());
    agent.assert_programs(&server, "crd-absent");
    assert!(
        agent.health.readiness().is_ok(),
        "an absent CRD is an empty kind"
    );

    server.set_installed("CiliumNetworkPolicy", true);
    server.apply(json!({
        "apiVersion": "cilium.io/v2", "kind": "CiliumNetworkPolicy",
        "metadata": {"name": "db-deny", "namespace": "shop"},
        "spec": {
            "endpointSelector": {"matchLabels": {"app": "db"}},
            "ingressDeny": [{"fromEndpoints": [{"matchLabels": {"app": "api"}}]}],
        },
    }));
    agent.run_until("the CRD's objects", |a| {
        a.valid(SourceKind::CiliumNetworkPolicy) == 1
    });
    agent.run_until("reprogrammed", |a| {
        !a.allowed("shop/api-1", "shop/db-0", 1433)
    });
    agent.assert_programs(&server, "crd-installed");
}

#[test]
fn failed_lists_back_off_and_readiness_waits_for_the_first_full_sync() {
    let server = example_server();
    // (kube's client retries a 503 itself, so the script sticks to codes it does not.)
    server.fail_lists("NetworkPolicy", &[500, 500, 403, 500]);
    let mut agent = ClusterAgent::start(&server, config());
    agent.run_until("three failed lists", |_| {
        server.lists_of("NetworkPolicy").len() >= 3
    });
    // Every other kind may be listed, but nothing is programmed and the node is not ready.
    assert!(!agent.pipeline.sources_synced());
    assert!(modified(&agent.sim.calls().calls()).is_empty());
    assert!(agent.health.readiness().is_err());

    agent.run_until("first sync", |a| a.pipeline.synced());
    agent.run_until("ready", |a| a.health.readiness().is_ok());
    agent.assert_programs(&server, "backoff");
    agent.assert_metric("netpol_watch_errors_total{kind=\"NetworkPolicy\"} 4");
    // Each retry waited at least the backoff's delay, doubling from 20 ms.
    let times = server.list_times("NetworkPolicy");
    let policy = config().backoff;
    for (n, pair) in times.windows(2).take(4).enumerate() {
        let gap = pair[1] - pair[0];
        let want = policy.delay(u32::try_from(n).unwrap() + 1);
        assert!(gap >= want, "retry {n}: {gap:?} < {want:?}");
    }
}

#[test]
fn a_hung_list_times_out_and_is_retried() {
    let server = example_server();
    server.fail_lists("Namespace", &[0]);
    let config = WatchConfig {
        page_timeout: Duration::from_millis(300),
        ..config()
    };
    let mut agent = ClusterAgent::start(&server, config);
    agent.run_until("first sync", |a| a.pipeline.synced());
    assert!(server.lists_of("Namespace").len() >= 2);
    agent.assert_metric("netpol_watch_errors_total{kind=\"Namespace\"} 1");
    agent.assert_programs(&server, "hung");
}

#[test]
fn a_kind_that_cannot_be_listed_is_waited_for_then_left_out_visibly() {
    let server = example_server();
    server.fail_lists("AdminNetworkPolicy", &[403; 10_000]);
    let config = WatchConfig {
        initial_wait: Duration::from_millis(300),
        ..config()
    };
    let mut agent = ClusterAgent::start(&server, config);
    agent.run_until("sync without the kind", |a| a.pipeline.synced());
    // What is programmed: everything but the admin policies.
    let dir = expected_dir("forbidden");
    server.write_objects(&dir);
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        if text.contains("\"kind\":\"AdminNetworkPolicy\"") {
            std::fs::remove_file(path).unwrap();
        }
    }
    assert_converged(&dir, &agent.sim);
    let reason = agent.health.readiness().unwrap_err();
    assert!(reason.contains("kind AdminNetworkPolicy"), "{reason}");
    agent.assert_metric("netpol_kind_synced{kind=\"AdminNetworkPolicy\"} 0");

    // Permission granted: the kind lists, is enforced, and the node is ready.
    server.clear_failures();
    agent.run_until("the admin policies", |a| {
        a.valid(SourceKind::AdminNetworkPolicy) == 2
    });
    agent.run_until("ready", |a| a.health.readiness().is_ok());
    agent.assert_metric("netpol_kind_synced{kind=\"AdminNetworkPolicy\"} 1");
    agent.assert_programs(&server, "forbidden-granted");
}
