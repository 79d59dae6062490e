//! A routed test network: one router namespace, and one namespace per host (a pod, a node, an
//! outside address) joined to it by a veth pair. Every packet between two hosts crosses the
//! router's forward hook, where netpol's table is loaded.
//!
//! The router can also be a node of its own ([`Topology::build_node`]): it then holds the node's
//! addresses (on a link of its own, as a node holds its InternalIP) and sources what it sends to its
//! hosts from them. Its hosts are then the node's local pods: a packet from the node (kubelet, a
//! hostNetwork pod: processes of the router's namespace) to a pod takes the `output` hook, a pod's
//! packet to the node takes `input`, as on a Calico or Cilium-legacy node. Services
//! ([`crate::services`]) are DNAT rules of a kube-proxy mode on the router.
//!
//! Addressing, Calico-style: a host holds its addresses as /32 and /128 on `eth0` and routes
//! everything to the router through the link-local next hops 169.254.1.1 and fe80::1, which every
//! router-side veth carries; the router has a host route per address. Duplicate address detection
//! is off so IPv6 addresses work at once.

use std::collections::HashMap;
use std::fmt::Write;
use std::io;
use std::net::{IpAddr, SocketAddr};

use crate::netns::Netns;
use crate::services::{Service, ServiceProxy};

const NEXT_HOP_V4: &str = "169.254.1.1";
const NEXT_HOP_V6: &str = "fe80::1";
const SYSCTLS: [&str; 4] = [
    "net.ipv6.conf.all.accept_dad=0",
    "net.ipv6.conf.default.accept_dad=0",
    "net.ipv4.ip_forward=1",
    "net.ipv6.conf.all.forwarding=1",
];

/// One host of the network: a name for messages and its addresses (the first of each family is
/// the source of what it sends).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Host {
    pub name: String,
    pub addresses: Vec<IpAddr>,
}

/// Where an address lives: on the router (the node's own) or on host `i`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    Router,
    Host(usize),
}

/// The built network. Dropping it removes every namespace and everything in them.
pub struct Topology {
    router: Netns,
    hosts: Vec<(Host, Netns)>,
    by_address: HashMap<IpAddr, Place>,
    node: Vec<IpAddr>,
    services: Vec<Service>,
}

impl Topology {
    /// A router without addresses of its own: every probe between hosts is forwarded.
    pub fn build(hosts: Vec<Host>) -> io::Result<Topology> {
        Self::build_node(Vec::new(), hosts)
    }

    /// A router that is a node with `node` addresses, and `hosts` routed through it.
    pub fn build_node(node: Vec<IpAddr>, hosts: Vec<Host>) -> io::Result<Topology> {
        let mut by_address: HashMap<IpAddr, Place> =
            node.iter().map(|a| (*a, Place::Router)).collect();
        for (i, host) in hosts.iter().enumerate() {
            for address in &host.addresses {
                if let Some(place) = by_address.insert(*address, Place::Host(i)) {
                    let other = match place {
                        Place::Router => "the node",
                        Place::Host(j) => hosts[j].name.as_str(),
                    };
                    return Err(io::Error::other(format!(
                        "address {address} is on both {other} and {}",
                        host.name
                    )));
                }
            }
        }
        let router = Netns::new()?;
        router.run(
            "sysctl",
            &["-q", "-w"]
                .iter()
                .chain(&SYSCTLS)
                .copied()
                .collect::<Vec<_>>(),
            "",
        )?;
        let mut router_batch = String::from("link set lo up\n");
        if !node.is_empty() {
            // The node's own link (a veth whose peer leads nowhere: this kernel may have no
            // dummy links) and a default route through it, as a node has: it is what lets the
            // node send to a Service VIP, which is routed before kube-proxy's DNAT rewrites it.
            router_batch.push_str(
                "link add node0 type veth peer name node0p\nlink set node0 up\nlink set node0p up\n",
            );
        }
        for address in &node {
            let (len, flags) = if address.is_ipv6() {
                (128, " nodad")
            } else {
                (32, "")
            };
            let _ = writeln!(router_batch, "addr add {address}/{len} dev node0{flags}");
        }
        for v6 in [false, true] {
            if let Some(source) = node.iter().find(|a| a.is_ipv6() == v6) {
                let default = if v6 { "::/0" } else { "default" };
                let _ = writeln!(router_batch, "route add {default} dev node0 src {source}");
            }
        }
        let mut built = Vec::with_capacity(hosts.len());
        for (i, host) in hosts.into_iter().enumerate() {
            let ns = Netns::new()?;
            ns.run("sysctl", &["-q", "-w", SYSCTLS[0], SYSCTLS[1]], "")?;
            ns.ip_batch(&host_batch(&host, &format!("h{i}"), router.tid()))
                .map_err(|e| io::Error::other(format!("host {}: {e}", host.name)))?;
            let _ = writeln!(
                router_batch,
                "addr add {NEXT_HOP_V4}/32 dev h{i}\naddr add {NEXT_HOP_V6}/64 dev h{i} nodad\nlink set h{i} up"
            );
            for address in &host.addresses {
                // The node speaks to its pods from its own address of the family, as a node
                // whose pod-facing devices hold no address does.
                let source = node.iter().find(|a| a.is_ipv6() == address.is_ipv6());
                let src = source.map(|a| format!(" src {a}")).unwrap_or_default();
                let _ = writeln!(router_batch, "route add {address} dev h{i}{src}");
            }
            built.push((host, ns));
        }
        router.ip_batch(&router_batch)?;
        Ok(Topology {
            router,
            hosts: built,
            by_address,
            node,
            services: Vec::new(),
        })
    }

    /// The node's addresses (empty for a plain router).
    pub fn node_addresses(&self) -> &[IpAddr] {
        &self.node
    }

    /// Adds `service` to the router as `proxy` would program it.
    pub fn add_service(&mut self, proxy: ServiceProxy, service: Service) -> io::Result<()> {
        proxy.program(&self.router, &service)?;
        self.services.push(service);
        Ok(())
    }

    /// Where a connection to `target` lands: the backend of the Service at `target`, or
    /// `target` itself.
    pub fn backend_of(&self, target: SocketAddr) -> SocketAddr {
        self.services
            .iter()
            .find(|s| s.vip == target)
            .map_or(target, |s| s.backend)
    }

    /// The router, where the filter runs.
    pub fn router(&self) -> &Netns {
        &self.router
    }

    /// The namespace holding `address` (the router's for the node's addresses).
    pub fn host_at(&self, address: IpAddr) -> Option<&Netns> {
        self.by_address.get(&address).map(|place| match place {
            Place::Router => &self.router,
            Place::Host(i) => &self.hosts[*i].1,
        })
    }
}

/// The `ip -batch` script that wires one host: its end of the veth, addresses, routes.
fn host_batch(host: &Host, router_side: &str, router_tid: i32) -> String {
    let mut batch = format!(
        "link set lo up\nlink add eth0 type veth peer name {router_side} netns {router_tid}\n"
    );
    for address in &host.addresses {
        let (len, flags) = if address.is_ipv6() {
            (128, " nodad")
        } else {
            (32, "")
        };
        let _ = writeln!(batch, "addr add {address}/{len} dev eth0{flags}");
    }
    batch.push_str("link set eth0 up\n");
    if let Some(v4) = host.addresses.iter().find(|a| a.is_ipv4()) {
        let _ = writeln!(
            batch,
            "route add {NEXT_HOP_V4} dev eth0 scope link\nroute add default via {NEXT_HOP_V4} dev eth0 src {v4}"
        );
    }
    if let Some(v6) = host.addresses.iter().find(|a| a.is_ipv6()) {
        let _ = writeln!(batch, "route add ::/0 via {NEXT_HOP_V6} dev eth0 src {v6}");
    }
    batch
}
