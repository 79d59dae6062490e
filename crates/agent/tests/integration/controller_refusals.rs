//! Refusal Events in slice mode come from `netpol controller`, one writer for the cluster: the
//! leader holds every policy to the agents' checks and budgets and posts one Event per refused
//! object, reason and generation; the other replica posts nothing; a new leader hands its
//! reporter every refusal standing, and what the old leader posted is not posted again. An
//! agent beside the controller posts only its node's own refusals and reads no Lease.
//!
//! Tests wait for conditions (with a generous bound), never for a fixed time.

use std::collections::BTreeSet;

use crate::agent_support;
use crate::controller_slices::{wait_for, Controller};

use agent_support::cluster::*;
use netpol_agent::indexes::PolicyBudgets;
use netpol_agent::refusals::{Refusal, Reporter, ReporterConfig};
use netpol_agent::sources::cluster::resources;
use netpol_testkit::apiserver::ApiServer;
use netpol_testkit::files::INVALID_POLICY;
use serde_json::{json, Value};

fn invalid_policy(name: &str, cidr: &str) -> Value {
    let mut policy: Value =
        serde_saphyr::from_str(&INVALID_POLICY.replace("10.0.0.0/33", cidr)).unwrap();
    policy["metadata"]["name"] = json!(name);
    policy
}

/// A valid policy naming three prefixes: over a budget of two a policy.
fn three_prefixes() -> Value {
    network_policy(
        "wide",
        "shop",
        json!({
            "podSelector": {},
            "egress": [{"to": [
                {"ipBlock": {"cidr": "192.0.2.0/24"}},
                {"ipBlock": {"cidr": "198.51.100.0/24"}},
                {"ipBlock": {"cidr": "203.0.113.0/24"}},
            ]}],
        }),
    )
}

fn replica(server: &ApiServer, identity: &str) -> Controller {
    Controller::start_with(server, identity, |config| {
        config.budgets = PolicyBudgets {
            prefixes_per_object: 2,
            ..PolicyBudgets::default()
        };
    })
}

/// The Events' objects and reasons, and who reported them.
fn events(server: &ApiServer) -> BTreeSet<(String, String, String)> {
    server
        .events()
        .iter()
        .map(|event| {
            assert_eq!(
                event["reportingComponent"], "netpol-controller",
                "{event:#}"
            );
            assert_eq!(event["type"], "Warning", "{event:#}");
            assert!(
                event["involvedObject"]["uid"]
                    .as_str()
                    .is_some_and(|uid| uid.starts_with("uid-")),
                "{event:#}"
            );
            (
                event["involvedObject"]["name"].as_str().unwrap().to_owned(),
                event["reason"].as_str().unwrap().to_owned(),
                event["reportingInstance"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// Posts of Events the server saw, created or refused as existing.
fn event_posts(server: &ApiServer) -> usize {
    server
        .requests()
        .iter()
        .filter(|request| request.starts_with("POST ") && request.contains("/events"))
        .count()
}

fn owned(items: &[(&str, &str, &str)]) -> BTreeSet<(String, String, String)> {
    items
        .iter()
        .map(|(a, b, c)| ((*a).to_owned(), (*b).to_owned(), (*c).to_owned()))
        .collect()
}

#[test]
fn the_leader_posts_each_refusal_once_and_a_new_leader_posts_no_copy() {
    let server = example_server();
    server.apply(invalid_policy("broken", "10.0.0.0/33"));
    server.apply(three_prefixes());
    let a = replica(&server, "replica-a");
    wait_for("replica-a leads", || a.is_leader());
    let b = replica(&server, "replica-b");
    wait_for("both refusals posted", || server.events().len() == 2);
    assert_eq!(
        events(&server),
        owned(&[
            ("broken", "InvalidPolicy", "replica-a"),
            ("wide", "PolicyOverBudget", "replica-a"),
        ])
    );
    assert!(!b.is_leader());
    // The other replica saw the same refusals and posted none of them.
    assert_eq!(event_posts(&server), 2, "{:#?}", server.requests());

    // The leader stops: the other takes over, hands its reporter both standing refusals (each
    // a post the server refuses as existing), then posts a new one.
    drop(a);
    wait_for("replica-b leads", || b.is_leader());
    wait_for("the standing refusals offered again", || {
        event_posts(&server) >= 4
    });
    assert_eq!(server.events().len(), 2, "no copy: {:#?}", server.events());
    server.apply(invalid_policy("broken-too", "10.0.0.0/34"));
    wait_for("the new refusal posted", || server.events().len() == 3);
    assert_eq!(
        events(&server),
        owned(&[
            ("broken", "InvalidPolicy", "replica-a"),
            ("broken-too", "InvalidPolicy", "replica-b"),
            ("wide", "PolicyOverBudget", "replica-a"),
        ])
    );
}

/// An agent beside the controller (slice mode) leaves the refusals of policies to it: it reads
/// no Lease and posts none of them, and still posts its own node's.
#[test]
fn an_agent_beside_the_controller_posts_only_its_own_nodes_refusals() {
    let server = example_server();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let _entered = runtime.enter();
    let reporter = Reporter::new(
        server.client(),
        ReporterConfig::for_node_beside_controller("netpol-system", "node-a"),
        resources().into_iter().map(|(_, r)| r).collect(),
    );
    let (refusals, refused) = tokio::sync::mpsc::unbounded_channel();
    let invalid = netpol_api::ValidationError {
        object: netpol_api::ObjectRef {
            kind: "NetworkPolicy".into(),
            namespace: Some("shop".into()),
            name: "broken".into(),
        },
        field: "spec.ingress[0].from[0].ipBlock.cidr".into(),
        message: "10.0.0.0/33 is not a CIDR".into(),
    };
    server.apply(invalid_policy("broken", "10.0.0.0/33"));
    refusals.send(Refusal::invalid(&invalid)).unwrap();
    let why = "HNS refuses Allow rule netpol-00ff as an invalid policy: left out";
    refusals
        .send(Refusal::datapath("shop/web-1", why).unwrap())
        .unwrap();
    drop(refusals);
    // Returns once the channel is closed and the burst is handled.
    runtime.block_on(reporter.run(refused));
    let posted = server.events();
    assert_eq!(posted.len(), 1, "{posted:#?}");
    assert_eq!(posted[0]["reason"], "HnsRefusedRule");
    assert_eq!(posted[0]["reportingComponent"], "netpol-agent");
    assert!(server.leases().is_empty());
    let lease_requests: Vec<String> = server
        .requests()
        .into_iter()
        .filter(|request| request.contains("leases"))
        .collect();
    assert!(lease_requests.is_empty(), "{lease_requests:?}");
}
