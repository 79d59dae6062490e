//! Refusals where users look: two agents in cluster mode against one API-server stand-in, each
//! refusing the same invalid policy; only the holder of the Lease posts a Kubernetes Event on it,
//! one per object, reason and generation, naming the field, with the object's uid so that
//! `kubectl describe` shows it. A takeover of the Lease does not post it again.

use crate::agent_support;

use agent_support::cluster::*;
use netpol_agent::refusals::{Refusal, Reporter, ReporterConfig};
use netpol_agent::sources::cluster::resources;
use std::time::{Duration, Instant};

use netpol_testkit::apiserver::ApiServer;
use netpol_testkit::files::INVALID_POLICY;
use serde_json::Value;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};

fn kinds() -> Vec<kube::api::ApiResource> {
    resources().into_iter().map(|(_, r)| r).collect()
}

fn invalid_policy(cidr: &str, label: &str) -> Value {
    let text = INVALID_POLICY.replace("10.0.0.0/33", cidr);
    let mut policy: Value = serde_saphyr::from_str(&text).unwrap();
    policy["metadata"]["labels"] = serde_json::json!({"edit": label});
    policy
}

/// An agent whose pipeline reports refusals, and its reporter.
struct Agent {
    agent: ClusterAgent,
    refused: UnboundedReceiver<Refusal>,
    reporter: Reporter,
    /// The last refusal the pipeline sent.
    last: Option<Refusal>,
}

impl Agent {
    fn start(server: &ApiServer, node: &str) -> Agent {
        let mut agent = ClusterAgent::start(server, config());
        let (refusals, refused) = unbounded_channel();
        agent.pipeline.report_refusals(refusals);
        // The client's connection pool runs on the agent's runtime.
        let _entered = agent.runtime.enter();
        let reporter = Reporter::new(
            server.client(),
            ReporterConfig::for_node("netpol-system", node),
            kinds(),
        );
        drop(_entered);
        Agent {
            agent,
            refused,
            reporter,
            last: None,
        }
    }

    /// Feeds the agent's inputs to its pipeline until it refuses an object saying `says`,
    /// handing every refusal to its reporter.
    fn refuse(&mut self, what: &str, says: &str) {
        let deadline = Instant::now() + PATIENCE;
        loop {
            while let Ok(refusal) = self.refused.try_recv() {
                let hit = refusal.message.contains(says);
                self.last = Some(refusal.clone());
                self.reporter.refused(refusal);
                if hit {
                    return;
                }
            }
            assert!(
                Instant::now() < deadline,
                "{what}: not refused in {PATIENCE:?}"
            );
            if let Ok(input) = self.agent.inputs.recv_timeout(Duration::from_millis(20)) {
                self.agent.take(input);
            }
        }
    }

    fn elect(&mut self) -> bool {
        self.agent.runtime.block_on(self.reporter.elect()).unwrap()
    }

    fn post(&mut self) -> usize {
        self.agent.runtime.block_on(self.reporter.post())
    }
}

#[test]
fn only_the_lease_holder_posts_one_event_per_refused_object_and_generation() {
    let server = example_server();
    server.apply(invalid_policy("10.0.0.0/33", "a"));
    let mut a = Agent::start(&server, "node-a");
    let mut b = Agent::start(&server, "node-b");
    a.refuse("the broken policy refused", "10.0.0.0/33");
    b.refuse("the broken policy refused", "10.0.0.0/33");

    assert!(a.elect(), "the first agent takes the free Lease");
    assert!(!b.elect(), "the Lease is held and fresh");
    assert!(a.elect(), "its holder renews it");
    let leases = server.leases();
    assert_eq!(leases.len(), 1, "{leases:#?}");
    assert_eq!(leases[0]["spec"]["holderIdentity"], "node-a");
    assert_eq!(leases[0]["metadata"]["namespace"], "netpol-system");

    assert_eq!(b.post(), 0, "not the holder");
    assert_eq!(a.post(), 1);
    let events = server.events();
    assert_eq!(events.len(), 1, "{events:#?}");
    let event = &events[0];
    assert_eq!(event["metadata"]["namespace"], "shop");
    assert_eq!(event["type"], "Warning");
    assert_eq!(event["reason"], "InvalidPolicy");
    assert_eq!(event["involvedObject"]["kind"], "NetworkPolicy");
    assert_eq!(
        event["involvedObject"]["apiVersion"],
        "networking.k8s.io/v1"
    );
    assert_eq!(event["involvedObject"]["name"], "broken");
    assert_eq!(event["involvedObject"]["namespace"], "shop");
    assert!(
        event["involvedObject"]["uid"]
            .as_str()
            .is_some_and(|u| u.starts_with("uid-")),
        "{event:#}"
    );
    let message = event["message"].as_str().unwrap();
    let field = event["involvedObject"]["fieldPath"].as_str().unwrap();
    assert!(field.contains("cidr"), "{event:#}");
    assert!(message.starts_with(&format!("{field}: ")), "{message}");
    assert!(message.contains("10.0.0.0/33"), "{message}");
    assert_eq!(event["source"]["host"], "node-a");

    // A label change keeps the generation (the agent does not even refuse it again); refused
    // again all the same (a restart, a relist), it is not posted again.
    server.apply(invalid_policy("10.0.0.0/33", "b"));
    let again = a.last.clone().unwrap();
    a.reporter.refused(again);
    assert_eq!(a.post(), 0);
    assert_eq!(server.events().len(), 1);

    // A new generation, still refused: one more Event, naming what it says now.
    server.apply(invalid_policy("10.0.0.0/34", "b"));
    a.refuse("the new generation refused", "10.0.0.0/34");
    b.refuse("the new generation refused", "10.0.0.0/34");
    assert_eq!(a.post(), 1);
    let events = server.events();
    assert_eq!(events.len(), 2, "{events:#?}");
    assert!(
        events
            .iter()
            .any(|e| e["message"].as_str().unwrap().contains("10.0.0.0/34")),
        "{events:#?}"
    );

    // The holder stops renewing (a Lease that expires at once stands for a long silence): the
    // other agent takes it over, and what it remembers was posted already.
    let _entered = a.agent.runtime.enter();
    let mut stalled = Reporter::new(
        server.client(),
        ReporterConfig {
            lease_duration: std::time::Duration::ZERO,
            ..ReporterConfig::for_node("netpol-system", "node-a")
        },
        kinds(),
    );
    assert!(a.agent.runtime.block_on(stalled.elect()).unwrap());
    assert!(b.elect(), "an expired Lease is taken over");
    assert_eq!(server.leases()[0]["spec"]["holderIdentity"], "node-b");
    assert_eq!(server.leases()[0]["spec"]["leaseTransitions"], 1);
    assert_eq!(b.post(), 0, "posted by the previous holder");
    assert_eq!(server.events().len(), 2);
}

/// A rule this node's HNS refuses is this node's alone: its agent posts the Event on the pod
/// without holding the Lease (and without reading it), once per thing refused.
#[test]
fn a_datapath_refusal_is_posted_on_its_pod_by_its_own_agent_without_the_lease() {
    let server = example_server();
    let mut a = Agent::start(&server, "node-a");
    let mut b = Agent::start(&server, "node-b");
    assert!(a.elect(), "another agent holds the Lease");
    assert!(!b.elect());
    let why = "HNS refuses Allow rule netpol-00ff as an invalid policy: left out";
    let refusal = Refusal::datapath("shop/web-1", why).unwrap();
    assert!(refusal.is_local());
    b.reporter.refused(refusal.clone());
    assert_eq!(b.reporter.hand_over(), 0, "not the holder's to post");
    assert_eq!(b.post(), 1);
    let events = server.events();
    assert_eq!(events.len(), 1, "{events:#?}");
    let event = &events[0];
    assert_eq!(event["reason"], "HnsRefusedRule");
    assert_eq!(event["type"], "Warning");
    assert_eq!(event["involvedObject"]["kind"], "Pod");
    assert_eq!(event["involvedObject"]["apiVersion"], "v1");
    assert_eq!(event["involvedObject"]["namespace"], "shop");
    assert_eq!(event["involvedObject"]["name"], "web-1");
    assert_eq!(event["message"], why);
    assert_eq!(event["source"]["host"], "node-b");

    // The same refusal again is not posted again; another one on the same pod is.
    b.reporter.refused(refusal);
    assert_eq!(b.post(), 0);
    b.reporter
        .refused(Refusal::datapath("shop/web-1", "HNS refuses Allow rule netpol-0100").unwrap());
    assert_eq!(b.post(), 1);
    assert_eq!(server.events().len(), 2);
    assert!(Refusal::datapath("no-namespace", why).is_none());
}
