//! Whether this node's dataplane carries local pods' packets past netfilter, where netpol's table
//! would never see them. An agent that programmed its table on such a node would report every
//! pod enforced while enforcing nothing; it refuses to start instead (unless told to ignore the
//! finding) and names what it found and how to fix it.
//!
//! The check is cheap (one `ip -details -json link show`, two sysctls, one file) and
//! conservative: a dataplane known to bypass netfilter, or one that may and cannot be inspected,
//! is refused. What it recognizes:
//!
//! - **Cilium** (a `cilium_host` link) with eBPF host routing: its BPF programs redirect pod
//!   traffic between devices (`bpf_redirect_peer`/`_neigh`) without entering the host's IP
//!   stack. Legacy host routing (`bpf.hostLegacyRouting=true`) goes through netfilter. Which one
//!   runs is read from the node configuration Cilium's agent writes for its BPF programs
//!   (`ENABLE_HOST_ROUTING`); if that file cannot be read, the answer is unknown and refused.
//! - **Calico's eBPF dataplane** (its `bpfin.cali`/`bpfout.cali` or older `bpfnatin`/`bpfnatout`
//!   links): policy and forwarding in tc programs, past netfilter.
//! - **netkit** links (kernel 6.7+, Cilium's netkit mode): the pod's peer device hands packets to
//!   BPF and the host's stack is skipped.
//! - **A bridge with ports while bridge netfilter is off** (`br_netfilter` not loaded, or
//!   `net.bridge.bridge-nf-call-iptables`/`-ip6tables` 0): pods on one bridge (flannel's
//!   `cni0`, the bridge plugin) reach each other by bridging, which the IP hooks never see.
//!
//! What it cannot see: a tc or XDP program some other software attached to a pod's device that
//! redirects packets. Such a CNI is not supported; the override exists for a node the operator
//! knows to be fine.

use std::path::PathBuf;

use serde::Deserialize;

/// One network link of the node, as `ip -details -json link show` lists it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Link {
    pub name: String,
    /// `linkinfo.info_kind`: `veth`, `bridge`, `netkit`, ...; None for plain devices.
    pub kind: Option<String>,
    /// The bridge (or other master) the link is a port of.
    pub master: Option<String>,
}

#[derive(Deserialize)]
struct RawLink {
    ifname: String,
    #[serde(default)]
    master: Option<String>,
    #[serde(default)]
    linkinfo: Option<RawLinkInfo>,
}

#[derive(Deserialize)]
struct RawLinkInfo {
    #[serde(default)]
    info_kind: Option<String>,
}

impl Link {
    /// The links of an `ip -details -json link show` listing.
    pub fn parse_listing(json: &str) -> Result<Vec<Link>, serde_json::Error> {
        let raw: Vec<RawLink> = serde_json::from_str(json)?;
        Ok(raw
            .into_iter()
            .map(|l| Link {
                name: l.ifname,
                kind: l.linkinfo.and_then(|i| i.info_kind),
                master: l.master,
            })
            .collect())
    }
}

/// What the check looks at, read by `host::host_facts` on a node (and made up in tests).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HostFacts {
    pub links: Vec<Link>,
    /// `net.bridge.bridge-nf-call-iptables`; None when `br_netfilter` is not loaded.
    pub bridge_nf_call_iptables: Option<bool>,
    /// `net.bridge.bridge-nf-call-ip6tables`; None when `br_netfilter` is not loaded.
    pub bridge_nf_call_ip6tables: Option<bool>,
    /// The text of Cilium's node configuration, if it could be read.
    pub cilium_node_config: Option<String>,
    /// Where it was looked for.
    pub cilium_node_config_path: PathBuf,
}

/// A way this node's packets avoid netfilter.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Bypass {
    #[error(
        "Cilium runs here (link cilium_host) with eBPF host routing (ENABLE_HOST_ROUTING in {}): \
         it delivers pod traffic past netfilter, where netpol's table would see none of it; set \
         Cilium's bpf.hostLegacyRouting=true (enable-host-legacy-routing) and restart its agent",
        path.display()
    )]
    CiliumHostRouting { path: PathBuf },
    #[error(
        "Cilium runs here (link cilium_host) but its node configuration {} cannot be read, so \
         whether eBPF host routing carries pod traffic past netfilter is unknown; mount \
         /var/run/cilium read-only into the agent (config/linux does)",
        path.display()
    )]
    CiliumUnknown { path: PathBuf },
    #[error(
        "Calico's eBPF dataplane runs here (link {link}): it forwards pod traffic in BPF, past \
         netfilter; switch Calico to its iptables or nftables dataplane"
    )]
    CalicoEbpf { link: String },
    #[error(
        "link {link} is a netkit device: the pod's packets go to BPF and skip the host's \
         netfilter hooks; use veth devices (Cilium: bpf.datapathMode=veth)"
    )]
    Netkit { link: String },
    #[error(
        "bridge {bridge} has ports ({}) but {switch} is off: pods on one bridge reach each other \
         without passing netfilter; load br_netfilter and set {switch}=1",
        ports.join(", ")
    )]
    UnfilteredBridge {
        bridge: String,
        ports: Vec<String>,
        switch: &'static str,
    },
}

/// Every bypass `facts` show; empty when netfilter sees every path to and from a local pod.
pub fn detect(facts: &HostFacts) -> Vec<Bypass> {
    let mut found = Vec::new();
    let has = |name: &str| facts.links.iter().any(|l| l.name == name);
    if has("cilium_host") {
        let path = facts.cilium_node_config_path.clone();
        match &facts.cilium_node_config {
            // The define named the feature up to the migration to runtime configuration; the
            // variable keeps its name in lower case. Either present means BPF host routing.
            Some(text) if text.to_ascii_uppercase().contains("ENABLE_HOST_ROUTING") => {
                found.push(Bypass::CiliumHostRouting { path })
            }
            Some(_) => {}
            None => found.push(Bypass::CiliumUnknown { path }),
        }
    }
    for link in ["bpfin.cali", "bpfout.cali", "bpfnatin", "bpfnatout"] {
        if has(link) {
            found.push(Bypass::CalicoEbpf {
                link: link.to_string(),
            });
            break;
        }
    }
    for link in &facts.links {
        if link.kind.as_deref() == Some("netkit") {
            found.push(Bypass::Netkit {
                link: link.name.clone(),
            });
        }
    }
    let switches = [
        (
            "net.bridge.bridge-nf-call-iptables",
            facts.bridge_nf_call_iptables,
        ),
        (
            "net.bridge.bridge-nf-call-ip6tables",
            facts.bridge_nf_call_ip6tables,
        ),
    ];
    let off = switches.iter().find(|(_, on)| *on != Some(true));
    if let Some((switch, _)) = off {
        for bridge in facts
            .links
            .iter()
            .filter(|l| l.kind.as_deref() == Some("bridge"))
        {
            let ports: Vec<String> = facts
                .links
                .iter()
                .filter(|l| l.master.as_deref() == Some(bridge.name.as_str()))
                .map(|l| l.name.clone())
                .collect();
            if !ports.is_empty() {
                found.push(Bypass::UnfilteredBridge {
                    bridge: bridge.name.clone(),
                    ports,
                    switch,
                });
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(name: &str, kind: Option<&str>, master: Option<&str>) -> Link {
        Link {
            name: name.into(),
            kind: kind.map(Into::into),
            master: master.map(Into::into),
        }
    }

    fn node(links: Vec<Link>) -> HostFacts {
        HostFacts {
            links,
            bridge_nf_call_iptables: Some(true),
            bridge_nf_call_ip6tables: Some(true),
            cilium_node_config: None,
            cilium_node_config_path: "/var/run/cilium/state/globals/node_config.h".into(),
        }
    }

    #[test]
    fn a_listing_of_ip_link_is_read() {
        let json = r#"[{"ifindex":1,"ifname":"lo","flags":["LOOPBACK"]},
            {"ifindex":2,"ifname":"cni0","linkinfo":{"info_kind":"bridge","info_data":{}}},
            {"ifindex":3,"ifname":"veth1","master":"cni0","linkinfo":{"info_kind":"veth","info_slave_kind":"bridge"}}]"#;
        assert_eq!(
            Link::parse_listing(json).unwrap(),
            vec![
                link("lo", None, None),
                link("cni0", Some("bridge"), None),
                link("veth1", Some("veth"), Some("cni0")),
            ]
        );
    }

    #[test]
    fn a_routed_cni_passes() {
        let facts = node(vec![
            link("lo", None, None),
            link("eth0", None, None),
            link("cali1234", Some("veth"), None),
            link("tunl0", Some("ipip"), None),
            // A bridge without ports (docker0 of an idle Docker) carries nothing.
            link("docker0", Some("bridge"), None),
        ]);
        assert_eq!(detect(&facts), vec![]);
    }

    #[test]
    fn cilium_is_judged_by_its_node_configuration() {
        let mut facts = node(vec![link("cilium_host", Some("veth"), None)]);
        assert!(matches!(detect(&facts)[..], [Bypass::CiliumUnknown { .. }]));
        facts.cilium_node_config = Some("#define ENABLE_HOST_ROUTING 1\n".into());
        let found = detect(&facts);
        assert!(matches!(found[..], [Bypass::CiliumHostRouting { .. }]));
        assert!(found[0].to_string().contains("hostLegacyRouting"));
        facts.cilium_node_config = Some("#define ENABLE_IPV4 1\n".into());
        assert_eq!(detect(&facts), vec![]);
    }

    #[test]
    fn calico_ebpf_and_netkit_are_refused() {
        let facts = node(vec![
            link("bpfin.cali", Some("veth"), None),
            link("bpfout.cali", Some("veth"), None),
            link("lxc1", Some("netkit"), None),
        ]);
        assert_eq!(
            detect(&facts),
            vec![
                Bypass::CalicoEbpf {
                    link: "bpfin.cali".into()
                },
                Bypass::Netkit {
                    link: "lxc1".into()
                },
            ]
        );
    }

    #[test]
    fn a_bridge_with_ports_needs_bridge_netfilter() {
        let links = vec![
            link("cni0", Some("bridge"), None),
            link("veth1", Some("veth"), Some("cni0")),
            link("veth2", Some("veth"), Some("cni0")),
        ];
        assert_eq!(detect(&node(links.clone())), vec![]);
        let mut off = node(links.clone());
        off.bridge_nf_call_ip6tables = Some(false);
        let found = detect(&off);
        assert_eq!(
            found,
            vec![Bypass::UnfilteredBridge {
                bridge: "cni0".into(),
                ports: vec!["veth1".into(), "veth2".into()],
                switch: "net.bridge.bridge-nf-call-ip6tables",
            }]
        );
        assert!(found[0].to_string().contains("br_netfilter"));
        let mut unloaded = node(links);
        unloaded.bridge_nf_call_iptables = None;
        unloaded.bridge_nf_call_ip6tables = None;
        assert_eq!(detect(&unloaded).len(), 1);
    }
}
