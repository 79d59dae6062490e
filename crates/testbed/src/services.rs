//! Kubernetes Services on the test node, as kube-proxy programs them: a virtual address and port
//! that destination NAT turns into a backend pod's. What matters for netpol is where that
//! happens: in `nat` `PREROUTING` (a pod's or an outside client's packet) and `nat` `OUTPUT` (the
//! node's and hostNetwork pods' own), both at priority `dstnat` (-100), before the filter hooks
//! netpol's table uses, so that the table sees the backend's address. Each mode here writes those
//! rules with the tool kube-proxy's mode uses:
//!
//! - `iptables` mode on a legacy (x_tables) node: `iptables-legacy`;
//! - `iptables` mode on an nf_tables node: `iptables-nft`;
//! - `nftables` mode: native nftables, table `ip kube-proxy` / `ip6 kube-proxy` with
//!   `nat-prerouting` and `nat-output` chains as kube-proxy names them.
//!
//! IPVS mode is not built here: this kernel has no `ip_vs` (see docs/semantics.md for how the
//! table's hooks are placed for it).

use std::io;
use std::net::SocketAddr;

use crate::netns::Netns;
use crate::transport::Transport;

/// A Service port with one backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Service {
    /// The cluster IP and port clients connect to.
    pub vip: SocketAddr,
    /// The backend pod's address and target port.
    pub backend: SocketAddr,
    pub transport: Transport,
}

/// How kube-proxy writes the Service's DNAT.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServiceProxy {
    IptablesLegacy,
    IptablesNft,
    Nftables,
}

impl ServiceProxy {
    pub const ALL: [ServiceProxy; 3] = [
        ServiceProxy::IptablesLegacy,
        ServiceProxy::IptablesNft,
        ServiceProxy::Nftables,
    ];

    /// The tool this mode needs.
    fn tool(self, v6: bool) -> &'static str {
        match (self, v6) {
            (ServiceProxy::IptablesLegacy, false) => "iptables-legacy",
            (ServiceProxy::IptablesLegacy, true) => "ip6tables-legacy",
            (ServiceProxy::IptablesNft, false) => "iptables-nft",
            (ServiceProxy::IptablesNft, true) => "ip6tables-nft",
            (ServiceProxy::Nftables, _) => "nft",
        }
    }

    /// Why this mode cannot be built in `ns`, if it cannot (its tool is missing).
    pub fn unavailable(self, ns: &Netns) -> Option<String> {
        let tool = self.tool(false);
        ns.run(tool, &["--version"], "")
            .err()
            .map(|e| format!("{self:?} needs {tool}: {e}"))
    }

    /// Programs `service`'s DNAT into `ns` (the node).
    pub fn program(self, ns: &Netns, service: &Service) -> io::Result<()> {
        let v6 = service.vip.is_ipv6();
        let protocol = match service.transport {
            Transport::Tcp => "tcp",
            Transport::Udp => "udp",
        };
        let (vip, port) = (service.vip.ip(), service.vip.port());
        let backend = service.backend;
        match self {
            ServiceProxy::IptablesLegacy | ServiceProxy::IptablesNft => {
                let tool = self.tool(v6);
                let to = backend.to_string();
                let vip = vip.to_string();
                let port = port.to_string();
                for chain in ["PREROUTING", "OUTPUT"] {
                    let args = [
                        "-w",
                        "-t",
                        "nat",
                        "-A",
                        chain,
                        "-d",
                        &vip,
                        "-p",
                        protocol,
                        "--dport",
                        &port,
                        "-j",
                        "DNAT",
                        "--to-destination",
                        &to,
                    ];
                    ns.run(tool, &args, "")?;
                }
                Ok(())
            }
            ServiceProxy::Nftables => {
                let family = if v6 { "ip6" } else { "ip" };
                let rule =
                    format!("{family} daddr {vip} {protocol} dport {port} dnat to {backend}");
                ns.nft(&format!(
                    "table {family} kube-proxy {{\n\
                     \tchain nat-prerouting {{ type nat hook prerouting priority dstnat; policy accept; }}\n\
                     \tchain nat-output {{ type nat hook output priority -100; policy accept; }}\n\
                     }}\n\
                     add rule {family} kube-proxy nat-prerouting {rule}\n\
                     add rule {family} kube-proxy nat-output {rule}\n"
                ))
            }
        }
    }
}
