//! Every path a packet to or from a local pod takes through its node, with real packets: the
//! router of the test network is the node (it holds the node's address; kubelet and hostNetwork
//! pods are its processes), its hosts are the node's pods and a remote pod. netpol's table is
//! programmed on the node and each path is probed:
//!
//! - routed pod to pod, and pod to a remote pod (`forward`);
//! - the node (or a hostNetwork pod: the same namespace and address) to a pod (`output`);
//! - a pod to its node (`input`);
//! - a pod, the node and a remote client to a Service, after kube-proxy's DNAT in each of its
//!   iptables (legacy and nft) and nftables modes (`forward` and `output` see the backend).
//!
//! Each fate is also compared with the in-process evaluation of the same table. Needs root with
//! `unshare`, `nft`, `ip` and (for the iptables modes) `iptables-legacy` and `iptables-nft`;
//! elsewhere it fails with the reason, unless `NETPOL_SKIP_KERNEL=1`.
#![cfg(target_os = "linux")]

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use netpol_datapath::testing::*;
use netpol_datapath::{compile_entries, CompileOptions};
use netpol_engine::*;
use netpol_nft::eval::{evaluate, Packet};
use netpol_nft::programmer::program;
use netpol_nft::Ruleset;
use netpol_testbed::netns;
use netpol_testbed::probe::{self, ProbeResult, Transport};
use netpol_testbed::services::{Service, ServiceProxy};
use netpol_testbed::topology::{Host, Topology};

const NODE: &str = "10.0.0.1";
const A: &str = "10.1.0.1";
const A6: &str = "fd00:1::1";
const B: &str = "10.1.0.2";
const B6: &str = "fd00:1::2";
const NODE6: &str = "fd00::a";
/// A pod on another node: its packets reach this node routed.
const REMOTE: &str = "10.2.0.1";

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// Pod a is isolated both ways. Ingress: TCP 80 and 8080 from b only. Egress: TCP 80 to b and to
/// the remote pod, TCP 9100 to the node. Pod b is an endpoint nothing isolates.
fn ruleset() -> Ruleset {
    let (store, ids) = store_with(&[], &[B, B6, REMOTE, NODE]);
    let mut map = MapBuilder::new(Verdict::Deny);
    let allow = value(1, Verdict::Allow, None);
    let tcp = |port| key(Some(Protocol::Tcp), port, 16);
    for port in [80, 8080] {
        for b in [B, B6] {
            map.set(Direction::Ingress, Some(ids[b]), tcp(port), allow.clone());
        }
    }
    for remote in [B, REMOTE] {
        map.set(Direction::Egress, Some(ids[remote]), tcp(80), allow.clone());
    }
    map.set(Direction::Egress, Some(ids[NODE]), tcp(9100), allow);
    let compiled = compile_entries(map.build().iter(), &store, &CompileOptions::default())
        .expect("the MapState compiles");
    let mut ruleset = Ruleset::default();
    ruleset.add("x/a", vec![ip(A), ip(A6)], &compiled.rules, &store);
    ruleset.add("x/b", vec![ip(B), ip(B6)], &[], &store);
    ruleset
}

/// The node with pods a and b, and the remote pod, with netpol's table programmed on the node.
fn node() -> (Topology, Ruleset) {
    let hosts = vec![
        Host {
            name: "x/a".into(),
            addresses: vec![ip(A), ip(A6)],
        },
        Host {
            name: "x/b".into(),
            addresses: vec![ip(B), ip(B6)],
        },
        Host {
            name: "remote pod".into(),
            addresses: vec![ip(REMOTE)],
        },
    ];
    let topology =
        Topology::build_node(vec![ip(NODE), ip(NODE6)], hosts).expect("the network builds");
    let ruleset = ruleset();
    program(topology.router(), &mut None, &ruleset).expect("the table loads");
    (topology, ruleset)
}

/// (from, to, port, passes, why)
type Case = (&'static str, &'static str, u16, bool, &'static str);

/// Probes every case over TCP and checks its fate, and the in-process evaluation of the packet
/// the filter sees (the backend's, for a Service).
fn check(topology: &Topology, ruleset: &Ruleset, cases: &[Case]) {
    let flows: Vec<(IpAddr, IpAddr, u16)> = cases
        .iter()
        .map(|&(from, to, port, _, _)| (ip(from), ip(to), port))
        .collect();
    let results = probe::tcp(topology, &flows, Duration::from_millis(1000));
    let mut wrong = Vec::new();
    for ((case, &(from, to, port)), result) in cases.iter().zip(&flows).zip(&results) {
        let want = if case.3 {
            ProbeResult::Passed
        } else {
            ProbeResult::Dropped
        };
        if result != &want {
            wrong.push(format!("{case:?}: {result:?}"));
        }
        let seen = topology.backend_of(SocketAddr::new(to, port));
        let model = evaluate(
            ruleset,
            &Packet {
                source: from,
                destination: seen.ip(),
                protocol: Protocol::Tcp,
                dport: seen.port(),
            },
        );
        if model.accepted != case.3 {
            wrong.push(format!("{case:?}: the in-process evaluation disagrees"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn every_path_to_and_from_a_local_pod_is_filtered() {
    if netns::skip_kernel_test("every_path_to_and_from_a_local_pod_is_filtered") {
        return;
    }
    let (topology, ruleset) = node();
    let listing = topology
        .router()
        .run("nft", &["list", "table", "inet", "netpol"], "")
        .unwrap();
    for hook in ["hook forward", "hook input", "hook output"] {
        assert!(listing.contains(hook), "{hook}:\n{listing}");
    }
    check(
        &topology,
        &ruleset,
        &[
            (B, A, 80, true, "forward: a admits b on 80"),
            (B, A, 81, false, "forward: ... and nothing else"),
            (REMOTE, A, 80, false, "forward: a admits no remote pod"),
            (A, B, 80, true, "forward: a may send to b on 80"),
            (A, REMOTE, 80, true, "forward: and to the remote pod on 80"),
            (A, REMOTE, 81, false, "forward: but not on 81"),
            (
                NODE,
                A,
                80,
                false,
                "output: a admits no packet from the node",
            ),
            (NODE, B, 22, true, "output: b is not isolated"),
            (A, NODE, 9100, true, "input: a may send to its node on 9100"),
            (A, NODE, 9101, false, "input: ... and nothing else"),
            (B, NODE, 9101, true, "input: b is not isolated"),
            (REMOTE, NODE, 9101, true, "input: not a local pod's packet"),
            // IPv6 needs neighbor discovery between isolated a and its node, which no policy
            // admits: it is plumbing, not a flow.
            (B6, A6, 80, true, "forward, IPv6: a admits b"),
            (B6, A6, 81, false, "forward, IPv6: ... on 80 only"),
            (
                NODE6,
                A6,
                80,
                false,
                "output, IPv6: a admits no packet from the node",
            ),
            (NODE6, B6, 22, true, "output, IPv6: b is not isolated"),
        ],
    );
}

#[test]
fn services_are_judged_by_their_backends_after_kube_proxys_dnat() {
    if netns::skip_kernel_test("services_are_judged_by_their_backends_after_kube_proxys_dnat") {
        return;
    }
    for proxy in ServiceProxy::ALL {
        let (mut topology, ruleset) = node();
        let test =
            format!("services_are_judged_by_their_backends_after_kube_proxys_dnat ({proxy:?})");
        if netns::skip_without(&test, proxy.unavailable(topology.router())) {
            continue;
        }
        let services = [
            ("10.96.0.10:80", "10.1.0.1:8080"),
            ("10.96.0.11:80", "10.2.0.1:80"),
            ("10.96.0.12:80", "10.2.0.1:81"),
        ];
        for (vip, backend) in services {
            topology
                .add_service(
                    proxy,
                    Service {
                        vip: vip.parse().unwrap(),
                        backend: backend.parse().unwrap(),
                        transport: Transport::Tcp,
                    },
                )
                .unwrap_or_else(|e| panic!("{proxy:?}: {e}"));
        }
        // Were the filter to see the VIP rather than the backend, a's ingress would not apply to
        // the first Service and a's egress would drop the second.
        check(
            &topology,
            &ruleset,
            &[
                (
                    B,
                    "10.96.0.10",
                    80,
                    true,
                    "b to a's Service: a admits b on 8080",
                ),
                (REMOTE, "10.96.0.10", 80, false, "remote pod to a's Service"),
                (
                    NODE,
                    "10.96.0.10",
                    80,
                    false,
                    "node to a's Service (nat output)",
                ),
                (
                    A,
                    "10.96.0.11",
                    80,
                    true,
                    "a to the remote pod's Service on 80",
                ),
                (
                    A,
                    "10.96.0.12",
                    80,
                    false,
                    "a to the remote pod's Service on 81",
                ),
                (B, "10.96.0.12", 80, true, "b is not isolated"),
            ],
        );
    }
}
