//! Random churn of a cluster on the API server stand-in: pods come, go and are relabelled,
//! NetworkPolicies and AdminNetworkPolicies change, namespaces and nodes are relabelled, added
//! and removed, with a population held in a band so that a long run stays the same size.

use std::collections::BTreeMap;

use netpol_testkit::apiserver::ApiServer;
use serde_json::{json, Value};

/// A small deterministic generator (xorshift64*), so that a failing run can be replayed from
/// its printed seed.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number below `n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }

    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }
}

const APPS: [&str; 5] = ["web", "api", "db", "soak-a", "soak-b"];
const PORTS: [u16; 4] = [80, 443, 1433, 8080];
/// Namespaces the churn owns (besides the example's, which it also fills with pods).
const OWN_NAMESPACES: [&str; 3] = ["soak-0", "soak-1", "soak-2"];
const EXAMPLE_NAMESPACES: [&str; 3] = ["shop", "payments", "monitoring"];
/// Pods the churn keeps around.
const MAX_PODS: usize = 40;
const MAX_POLICIES: usize = 12;

/// What the churn made, as it stands.
#[derive(Default)]
pub struct Churn {
    /// Pod key → (namespace, name, node, address).
    pods: BTreeMap<String, (String, String, String, String)>,
    next_pod: u64,
    /// NetworkPolicy keys.
    policies: Vec<String>,
    next_policy: u64,
    namespaces_present: BTreeMap<&'static str, bool>,
    node_3: bool,
    /// Changes made, by kind of change.
    pub counts: BTreeMap<&'static str, u64>,
}

impl Churn {
    /// Creates the churn's own namespaces.
    pub fn start(server: &ApiServer) -> Churn {
        let mut churn = Churn::default();
        for namespace in OWN_NAMESPACES {
            server.apply(namespace_object(namespace, "x"));
            churn.namespaces_present.insert(namespace, true);
        }
        churn
    }

    fn count(&mut self, what: &'static str) {
        *self.counts.entry(what).or_default() += 1;
    }

    /// Makes one random change.
    pub fn step(&mut self, server: &ApiServer, rng: &mut Rng) {
        match rng.below(20) {
            0..=5 if self.pods.len() < MAX_PODS => self.add_pod(server, rng),
            0..=7 => self.remove_pod(server, rng),
            8..=10 => self.relabel_pod(server, rng),
            11..=13 if self.policies.len() < MAX_POLICIES => self.add_policy(server, rng),
            11..=14 => self.change_or_remove_policy(server, rng),
            15 => self.admin_policy(server, rng),
            16 | 17 => self.namespace(server, rng),
            _ => self.node(server, rng),
        }
    }

    fn live_namespaces(&self) -> Vec<&str> {
        let own = OWN_NAMESPACES
            .iter()
            .filter(|n| self.namespaces_present.get(*n).copied().unwrap_or(false));
        EXAMPLE_NAMESPACES.iter().chain(own).copied().collect()
    }

    fn add_pod(&mut self, server: &ApiServer, rng: &mut Rng) {
        let namespace = rng.pick(&self.live_namespaces()).to_string();
        let name = format!("soak-{}", self.next_pod);
        self.next_pod += 1;
        let local = rng.chance(0.6);
        let node = if local { "node-1" } else { "node-2" };
        // A fresh address (10.244.{10..}.x, never one of the example's), or, one time in five,
        // the address of a pod still listed: a CNI reuses an address its sandbox freed before
        // the old pod's delete arrives, which comes later (a late delete).
        let reused = rng
            .chance(0.2)
            .then(|| self.random_pod(rng))
            .flatten()
            .map(|key| self.pods[&key].3.clone());
        if reused.is_some() {
            self.count("pod added on a reused address");
        }
        let address = reused.unwrap_or_else(|| {
            format!(
                "10.244.{}.{}",
                10 + (self.next_pod / 200) % 200,
                10 + self.next_pod % 200
            )
        });
        server.apply(pod_object(
            &namespace,
            &name,
            rng.pick(&APPS),
            node,
            &address,
        ));
        self.pods.insert(
            format!("{namespace}/{name}"),
            (namespace, name, node.into(), address),
        );
        self.count("pod added");
    }

    fn remove_pod(&mut self, server: &ApiServer, rng: &mut Rng) {
        let Some(key) = self.random_pod(rng) else {
            return;
        };
        self.pods.remove(&key);
        server.delete("Pod", &key);
        self.count("pod deleted");
    }

    fn relabel_pod(&mut self, server: &ApiServer, rng: &mut Rng) {
        let Some(key) = self.random_pod(rng) else {
            return;
        };
        let (namespace, name, node, address) = self.pods[&key].clone();
        server.apply(pod_object(
            &namespace,
            &name,
            rng.pick(&APPS),
            &node,
            &address,
        ));
        self.count("pod relabelled");
    }

    fn random_pod(&self, rng: &mut Rng) -> Option<String> {
        if self.pods.is_empty() {
            return None;
        }
        self.pods.keys().nth(rng.below(self.pods.len())).cloned()
    }

    fn add_policy(&mut self, server: &ApiServer, rng: &mut Rng) {
        let namespace = rng.pick(&self.live_namespaces()).to_string();
        let key = format!("{namespace}/soak-np-{}", self.next_policy);
        self.next_policy += 1;
        server.apply(network_policy(&key, rng));
        self.policies.push(key);
        self.count("policy added");
    }

    fn change_or_remove_policy(&mut self, server: &ApiServer, rng: &mut Rng) {
        if self.policies.is_empty() {
            return;
        }
        let index = rng.below(self.policies.len());
        if rng.chance(0.5) {
            server.apply(network_policy(&self.policies[index], rng));
            self.count("policy changed");
        } else {
            let key = self.policies.swap_remove(index);
            server.delete("NetworkPolicy", &key);
            self.count("policy deleted");
        }
    }

    /// The example's admin policies get a new priority now and then.
    fn admin_policy(&mut self, server: &ApiServer, rng: &mut Rng) {
        let priority = rng.below(100);
        let verdict = rng.pick(&["Allow", "Deny", "Pass"]);
        server.apply(json!({
            "apiVersion": "policy.networking.k8s.io/v1alpha1", "kind": "AdminNetworkPolicy",
            "metadata": {"name": "soak-admin"},
            "spec": {
                "priority": priority,
                "subject": {"namespaces": {"matchLabels": {"team": rng.pick(&["x", "y", "shop"])}}},
                "ingress": [{
                    "name": "soak", "action": verdict,
                    "from": [{"namespaces": {"matchLabels": {"team": rng.pick(&["x", "y", "payments"])}}}],
                    "ports": [{"portNumber": {"protocol": "TCP", "port": rng.pick(&PORTS)}}],
                }],
            },
        }));
        self.count("admin policy changed");
    }

    /// A churn namespace is relabelled, or (when empty) deleted or created again.
    fn namespace(&mut self, server: &ApiServer, rng: &mut Rng) {
        let namespace = rng.pick(&OWN_NAMESPACES);
        let present = self.namespaces_present[namespace];
        let occupied = self.pods.values().any(|p| p.0 == namespace)
            || self
                .policies
                .iter()
                .any(|p| p.starts_with(&format!("{namespace}/")));
        if present && !occupied && rng.chance(0.3) {
            server.delete("Namespace", namespace);
            self.namespaces_present.insert(namespace, false);
            self.count("namespace deleted");
        } else {
            server.apply(namespace_object(namespace, rng.pick(&["x", "y"])));
            self.namespaces_present.insert(namespace, true);
            self.count(if present {
                "namespace relabelled"
            } else {
                "namespace added"
            });
        }
    }

    /// node-2 changes zone; node-3 comes and goes.
    fn node(&mut self, server: &ApiServer, rng: &mut Rng) {
        if rng.chance(0.5) {
            let zone = rng.pick(&["zone-b", "zone-c"]);
            server.apply(node_object("node-2", "10.0.0.2", zone));
            self.count("node relabelled");
        } else if self.node_3 {
            server.delete("Node", "node-3");
            self.node_3 = false;
            self.count("node deleted");
        } else {
            server.apply(node_object("node-3", "10.0.0.3", "zone-c"));
            self.node_3 = true;
            self.count("node added");
        }
    }

    pub fn total(&self) -> u64 {
        self.counts.values().sum()
    }
}

fn namespace_object(name: &str, team: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": name, "labels": {"team": team}},
    })
}

fn node_object(name: &str, address: &str, zone: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"topology.kubernetes.io/zone": zone}},
        "status": {"addresses": [{"type": "InternalIP", "address": address}]},
    })
}

/// A pod created in the order of its number (`soak-N`): when two pods list one address, the
/// newer owns it, and the agents must agree whatever order they saw the events in.
fn pod_object(namespace: &str, name: &str, app: &str, node: &str, address: &str) -> Value {
    let number: u64 = name
        .strip_prefix("soak-")
        .and_then(|n| n.parse().ok())
        .unwrap_or_default();
    let created = format!(
        "2026-01-{:02}T{:02}:{:02}:{:02}Z",
        1 + number / 86_400,
        number / 3_600 % 24,
        number / 60 % 60,
        number % 60
    );
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": app},
                     "creationTimestamp": created},
        "spec": {"nodeName": node, "containers": [{"name": "c", "ports": [{"name": "http", "containerPort": 8080}]}]},
        "status": {"phase": "Running", "podIP": address},
    })
}

fn network_policy(key: &str, rng: &mut Rng) -> Value {
    let (namespace, name) = key.split_once('/').unwrap();
    let selector = |rng: &mut Rng| {
        if rng.chance(0.3) {
            json!({})
        } else {
            json!({"matchLabels": {"app": rng.pick(&APPS)}})
        }
    };
    let peer = |rng: &mut Rng| match rng.below(3) {
        0 => json!({"podSelector": selector(rng)}),
        1 => {
            json!({"namespaceSelector": {"matchLabels": {"team": rng.pick(&["x", "y", "shop"])}}})
        }
        _ => json!({"ipBlock": {"cidr": "10.244.0.0/16", "except": ["10.244.10.0/24"]}}),
    };
    let rule = |rng: &mut Rng, side: &str| json!({side: [peer(rng)], "ports": [{"port": rng.pick(&PORTS)}, {"port": "http"}]});
    let types = rng.pick(&[&["Ingress"][..], &["Egress"], &["Ingress", "Egress"]]);
    json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "podSelector": selector(rng),
            "policyTypes": types,
            "ingress": [rule(rng, "from")],
            "egress": [rule(rng, "to")],
        },
    })
}
