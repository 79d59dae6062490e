//! How the cluster mode reads the API server (issues 34 and 36): a watch that stalls without
//! closing (a half-open connection) is noticed, ended and resumed from the last resourceVersion
//! while the kind reads as not in sync; a page that fails mid-list is asked for again from its
//! continue token rather than the list starting over; a 429's Retry-After is honoured.
//!
//! Tests wait for a condition (with a generous bound, failing if it is never reached), never
//! for a fixed time.

use crate::agent_support;

use std::time::{Duration, Instant};

use agent_support::cluster::*;
use agent_support::*;
use netpol_agent::sources::cluster::WatchConfig;
use serde_json::json;

fn web_pod(name: &str, ip: &str) -> serde_json::Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "shop", "labels": {"app": "web"}},
        "spec": {"nodeName": NODE, "containers": [{"name": "iis", "ports": [{"name": "http", "containerPort": 80}]}]},
        "status": {"phase": "Running", "podIP": ip},
    })
}

#[test]
fn a_stalled_watch_is_noticed_ended_and_resumed_from_the_last_resource_version() {
    let server = example_server();
    // The API server's bookmarks, about once a minute in a real cluster, here every 20 ms;
    // a watch silent for ten intervals is stalled.
    server.bookmark_every(Duration::from_millis(20));
    let config = WatchConfig {
        stall_timeout: Duration::from_millis(400),
        ..config()
    };
    let mut agent = ClusterAgent::start(&server, config);
    agent.run_until("first sync", |a| a.pipeline.synced());
    agent.run_until("ready", |a| a.health.readiness().is_ok());
    // Bookmarks keep a quiet watch alive: a stalled one would be replaced every 400 ms.
    agent.run_until("a quiet watch outlives two stall time-outs", |_| {
        // (The watch may open just after readiness: wait for it too.)
        server
            .watch_times("Pod")
            .last()
            .is_some_and(|opened| opened.elapsed() > config.stall_timeout * 2)
    });
    assert!(!agent.metrics_text().contains("netpol_watch_stalls_total"));
    let watches = server.watches_of("Pod").len();

    // The pod watch goes silent (open, no event, no bookmark); a pod is made meanwhile.
    server.stall_watches("Pod", true);
    let lists = server.lists_of("Pod").len();
    server.apply(web_pod("web-9", "10.244.1.139"));
    agent.run_until("the stall noticed", |a| {
        a.health
            .readiness()
            .is_err_and(|r| r.contains("kind Pod") && r.contains("watch stalled"))
    });
    agent.assert_metric("netpol_kind_synced{kind=\"Pod\"} 0");
    assert!(
        agent
            .metrics_text()
            .contains("netpol_watch_stalls_total{kind=\"Pod\"}"),
        "{}",
        agent.metrics_text()
    );
    assert!(
        !agent.has_endpoint("shop/web-9"),
        "delivered by a stalled watch"
    );
    // The watch is resumed (not relisted); a re-watch that opens but stalls again does not
    // count as in sync.
    agent.run_until("re-watched", |_| server.watches_of("Pod").len() > watches);
    assert!(agent.health.readiness().is_err());

    // The path heals: the next watch brings the pod, and the kind is in sync again.
    server.stall_watches("Pod", false);
    agent.run_until("the pod that came during the stall", |a| {
        a.has_endpoint("shop/web-9")
    });
    agent.run_until("ready again", |a| a.health.readiness().is_ok());
    agent.assert_metric("netpol_kind_synced{kind=\"Pod\"} 1");
    // Resumed from a resourceVersion before the pod: no list was needed to bring it.
    assert_eq!(server.lists_of("Pod").len(), lists, "a stall relisted");
    agent.assert_programs(&server, "stalled-watch");
}

#[test]
fn a_page_that_fails_mid_list_is_asked_for_again_from_its_continue_token() {
    let server = example_server();
    // Pages of two pods: the first served, the second refused twice.
    server.fail_lists("Pod", &[200, 500, 500]);
    let mut agent = ClusterAgent::start(&server, config());
    agent.run_until("first sync", |a| a.pipeline.synced());
    let lists = server.lists_of("Pod");
    let fresh: Vec<&String> = lists.iter().filter(|l| !l.contains("continue=")).collect();
    assert_eq!(fresh.len(), 1, "the list started over: {lists:#?}");
    // Four pages, the second asked for three times from the same token.
    assert_eq!(lists.len(), 6, "{lists:#?}");
    assert_eq!(lists[1], lists[2]);
    assert_eq!(lists[2], lists[3]);
    agent.assert_metric("netpol_watch_errors_total{kind=\"Pod\"} 2");
    agent.assert_programs(&server, "page-retried");
}

#[test]
fn a_throttled_list_waits_as_long_as_the_server_asks() {
    let server = example_server();
    server.throttle_lists("Namespace", 1, 1);
    // The backoff alone would retry after 20 ms.
    let mut agent = ClusterAgent::start(&server, config());
    agent.run_until("first sync", |a| a.pipeline.synced());
    let times = server.list_times("Namespace");
    assert!(times.len() >= 2);
    let gap = times[1] - times[0];
    assert!(gap >= Duration::from_secs(1), "retried after {gap:?}");
    agent.assert_programs(&server, "throttled");
}

fn streaming() -> WatchConfig {
    WatchConfig {
        streaming_lists: true,
        ..config()
    }
}

#[test]
fn kinds_are_listed_by_streaming_lists_from_the_watch_cache_where_offered() {
    let server = example_server();
    let mut agent = ClusterAgent::start(&server, streaming());
    agent.run_until("first sync", |a| a.pipeline.synced());
    agent.run_until("ready", |a| a.health.readiness().is_ok());
    for kind in ["Pod", "Namespace", "Node", "NetworkPolicy"] {
        assert!(server.lists_of(kind).is_empty(), "{kind} listed in pages");
        let watches = server.watches_of(kind);
        assert!(
            watches[0].contains("sendInitialEvents=true")
                && watches[0].contains("resourceVersionMatch=NotOlderThan"),
            "{watches:#?}"
        );
    }
    agent.assert_programs(&server, "streaming-lists");
    // Changes follow as they do after a paged list.
    server.apply(web_pod("web-9", "10.244.1.139"));
    agent.run_until("a pod made later", |a| a.has_endpoint("shop/web-9"));
    agent.assert_programs(&server, "streaming-lists-then-watch");
}

#[test]
fn a_server_without_streaming_lists_is_listed_in_pages() {
    let server = example_server();
    server.refuse_streaming_lists();
    let mut agent = ClusterAgent::start(&server, streaming());
    agent.run_until("first sync", |a| a.pipeline.synced());
    agent.run_until("ready", |a| a.health.readiness().is_ok());
    // One refused streaming list per kind, then pages; no error counted for the refusal.
    let streaming = server
        .watches_of("Pod")
        .iter()
        .filter(|w| w.contains("sendInitialEvents=true"))
        .count();
    assert_eq!(streaming, 1);
    assert!(!server.lists_of("Pod").is_empty());
    assert!(!agent.metrics_text().contains("netpol_watch_errors_total"));
    agent.assert_programs(&server, "no-streaming-lists");
}

/// The `limit` of each list request of `kind` the stand-in saw.
fn list_limits(server: &netpol_testkit::apiserver::ApiServer, kind: &str) -> Vec<u32> {
    server
        .lists_of(kind)
        .iter()
        .map(|request| {
            let query = request.split_once('?').map_or("", |(_, q)| q);
            query
                .split('&')
                .find_map(|pair| pair.strip_prefix("limit="))
                .and_then(|limit| limit.parse().ok())
                .unwrap_or_else(|| panic!("a paged list asks for a limit: {request}"))
        })
        .collect()
}

#[test]
fn policy_list_pages_are_sized_in_bytes_so_large_policies_come_a_few_at_a_time() {
    use netpol_dev::cidr::{self, Kind, Selects, Way};
    let server = example_server();
    // Twelve CiliumNetworkPolicies of 1,800 /32s (about 30 KB of JSON each), listed before the
    // example cluster's own small one (payments/ledger-egress), and small NetworkPolicies.
    let args = cidr::Args {
        kind: Kind::Cilium,
        count: 12,
        prefixes: 1_800,
        selects: Selects::None,
        direction: Way::Egress,
        namespace: "a-big".into(),
        out: Default::default(),
    };
    for policy in cidr::policies(&args).unwrap() {
        server.apply(policy);
    }
    for i in 0..30 {
        server.apply(network_policy(
            &format!("small-{i}"),
            "shop",
            json!({"podSelector": {"matchLabels": {"app": format!("app-{i}")}}}),
        ));
    }
    // Pages of about 100 KB, at most 50 objects.
    let config = WatchConfig {
        policy_page_size: 50,
        policy_page_bytes: 100_000,
        ..config()
    };
    let mut agent = ClusterAgent::start(&server, config);
    agent.run_until("first sync", |a| a.pipeline.synced());
    assert_eq!(
        agent.valid(netpol_agent::SourceKind::CiliumNetworkPolicy),
        13
    );
    // The first page is sized for objects at etcd's limit (one fits in 100 KB), the next ones
    // for the 30 KB the first showed: three a page (the last holds the small one).
    assert_eq!(list_limits(&server, "CiliumNetworkPolicy"), [1, 3, 3, 3, 3]);
    // Small policies come 50 a page after the first.
    let small = list_limits(&server, "NetworkPolicy");
    assert_eq!(small[0], 1);
    assert!(small[1..].iter().all(|l| *l == 50), "{small:?}");
    // Pods, namespaces and nodes keep their object count.
    assert!(list_limits(&server, "Pod").iter().all(|l| *l == 2));
}

/// Policy pages are read as they arrive, each policy sent before more of the page is read
/// (issue 33). A page whose connection breaks half-way, after some of its policies were sent,
/// is asked for again from its continue token: the policies it sent are sent again, each
/// replacing itself, and the list completes with every policy once.
#[test]
fn a_policy_page_cut_off_mid_body_is_asked_for_again_and_nothing_is_counted_twice() {
    use netpol_dev::cidr::{self, Kind, Selects, Way};
    let server = example_server();
    // Six CiliumNetworkPolicies of 5,000 /32s (about 90 KB of JSON each: read from their text),
    // listed before the example cluster's own small one.
    let args = cidr::Args {
        kind: Kind::Cilium,
        count: 6,
        prefixes: 5_000,
        selects: Selects::None,
        direction: Way::Egress,
        namespace: "a-big".into(),
        out: Default::default(),
    };
    for policy in cidr::policies(&args).unwrap() {
        assert!(policy.to_string().len() >= netpol_api::large_json::LARGE_ITEM_BYTES);
        server.apply(policy);
    }
    // Pages of three policies; the second one breaks half-way.
    let config = WatchConfig {
        policy_page_size: 3,
        ..config()
    };
    server.fail_lists("CiliumNetworkPolicy", &[200, 1]);
    let mut agent = ClusterAgent::start(&server, config);
    agent.run_until("first sync", |a| a.pipeline.synced());
    assert_eq!(
        agent.valid(netpol_agent::SourceKind::CiliumNetworkPolicy),
        7
    );
    let lists = server.lists_of("CiliumNetworkPolicy");
    let fresh = lists.iter().filter(|l| !l.contains("continue=")).count();
    assert_eq!(fresh, 1, "the list started over: {lists:#?}");
    // Three pages, the second asked for twice from the same token.
    assert_eq!(lists.len(), 4, "{lists:#?}");
    assert_eq!(lists[1], lists[2]);
    agent.assert_metric("netpol_watch_errors_total{kind=\"CiliumNetworkPolicy\"} 1");
    agent.assert_programs(&server, "policy-page-cut-off");
}

/// A large policy that arrives by a watch (added, modified, deleted) is kept as its text by the
/// follower and read by the reconcile loop without a JSON tree (issue 33), with the same
/// result as a small one: counted, enforced as a fresh engine computes it, and gone when
/// deleted.
#[test]
fn a_large_policy_watched_is_read_from_its_text_and_enforced() {
    let server = example_server();
    let mut agent = ClusterAgent::start(&server, config());
    agent.run_until("first sync", |a| a.pipeline.synced());
    let before = agent.valid(netpol_agent::SourceKind::NetworkPolicy);
    let policy = |peers: u32| {
        let to: Vec<serde_json::Value> = (0..peers)
            .map(|i| json!({"ipBlock": {"cidr": format!("10.{}.{}.1/32", 100 + i / 256, i % 256)}}))
            .collect();
        network_policy(
            "web-egress-list",
            "shop",
            json!({"podSelector": {"matchLabels": {"app": "web"}}, "policyTypes": ["Egress"],
                "egress": [{"to": to, "ports": [{"protocol": "TCP", "port": 443}]}]}),
        )
    };
    assert!(policy(3_000).to_string().len() >= netpol_api::large_json::LARGE_ITEM_BYTES);
    server.apply(policy(3_000));
    agent.run_until("the large policy added", |a| {
        a.valid(netpol_agent::SourceKind::NetworkPolicy) == before + 1
    });
    agent.assert_programs(&server, "large-watched-added");
    // Peer 2,500 (10.109.196.1) is allowed; modified, the policy keeps its first 2,000 peers
    // (still large), and it is not.
    assert!(web_egress_allowed(&agent, "10.109.196.1"));
    server.apply(policy(2_000));
    agent.run_until("the large policy modified", |a| {
        !web_egress_allowed(a, "10.109.196.1")
    });
    assert!(web_egress_allowed(&agent, "10.107.207.1"), "peer 1,999");
    agent.assert_programs(&server, "large-watched-modified");
    server.delete("NetworkPolicy", "shop/web-egress-list");
    agent.run_until("the large policy deleted", |a| {
        a.valid(netpol_agent::SourceKind::NetworkPolicy) == before
    });
    agent.assert_programs(&server, "large-watched-deleted");
    assert_eq!(agent.invalid(netpol_agent::SourceKind::NetworkPolicy), 0);
}

/// Whether the first local `shop/web` pod may open TCP/443 to `address`, as the simulator's
/// programmed rules decide.
fn web_egress_allowed(agent: &ClusterAgent, address: &str) -> bool {
    use netpol_engine::{Direction, Protocol};
    use netpol_hcn::oracle::packet;
    use netpol_hcn::schema::AclAction;
    let (endpoint, _) = agent
        .pipeline
        .endpoints()
        .iter()
        .find(|(_, pod)| pod.as_deref().is_some_and(|p| p.starts_with("shop/web")))
        .expect("a local shop/web pod");
    let packet = packet(Direction::Egress, ip(address), Protocol::Tcp, 443);
    agent
        .sim
        .calls()
        .evaluate(&endpoint.id, &packet)
        .unwrap()
        .action
        == AclAction::Allow
}

/// Large policies' texts on their way to the reconcile loop are bounded in bytes
/// (`LARGE_IN_FLIGHT_BYTES`, 8 MiB), not only by the channel's count: with the loop not making
/// them, four 1.9 MB NetworkPolicies are sent and the fifth waits until one of them is made.
#[test]
fn large_policy_texts_in_flight_to_the_reconcile_loop_are_bounded_in_bytes() {
    use netpol_agent::sources::cluster::LARGE_IN_FLIGHT_BYTES;
    use netpol_dev::cidr::{self, Kind, Selects, Way};
    let server = example_server();
    let args = cidr::Args {
        kind: Kind::NetworkPolicy,
        count: 6,
        prefixes: 50_000,
        selects: Selects::None,
        direction: Way::Egress,
        namespace: "a-big".into(),
        out: Default::default(),
    };
    let mut size = 0;
    for policy in cidr::policies(&args).unwrap() {
        size = policy.to_string().len();
        server.apply(policy);
    }
    let fit = LARGE_IN_FLIGHT_BYTES as usize / size;
    assert_eq!(fit, 4, "{size} bytes a policy");
    let agent = ClusterAgent::start(&server, config());
    // Inputs are taken from the channel, the large policies held without being made.
    let mut held = Vec::new();
    for _ in 0..fit {
        let input = next_deferred(&agent.inputs, Duration::from_secs(30));
        held.push(input.unwrap_or_else(|| panic!("fewer than {fit} sent")));
    }
    assert!(
        next_deferred(&agent.inputs, Duration::from_millis(500)).is_none(),
        "a fifth sent while four wait"
    );
    // One made: the next comes.
    let made = held.pop().unwrap().made();
    assert!(matches!(made, Some(netpol_agent::driver::Input::Event(_))));
    assert!(
        next_deferred(&agent.inputs, Duration::from_secs(30)).is_some(),
        "the fifth never came"
    );
}

/// The next deferred input (a large policy's text) within `patience`, the others taken and
/// dropped.
fn next_deferred(
    inputs: &std::sync::mpsc::Receiver<netpol_agent::driver::Input>,
    patience: Duration,
) -> Option<netpol_agent::driver::Input> {
    use netpol_agent::driver::Input;
    let deadline = Instant::now() + patience;
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match inputs.recv_timeout(left) {
            Ok(input @ Input::Deferred(_)) => return Some(input),
            Ok(_) => {}
            Err(_) => return None,
        }
    }
    None
}
