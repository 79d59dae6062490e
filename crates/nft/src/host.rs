//! The node's own kernel: the `nft` command on `PATH`, as the agent's DaemonSet runs it with
//! `hostNetwork` and `CAP_NET_ADMIN`, and the facts about the node's dataplane that
//! [`crate::bypass`] judges.

use std::io::{self, Write};
use std::path::Path;
use std::process::{Command, Output, Stdio};

use ipnet::IpNet;

use crate::bypass::{HostFacts, Link};
use crate::netlink::NetfilterSocket;
use crate::programmer::{chains_via, sets_via, NftBackend, NftError, LIST_RULES_JSON};
use crate::ruleset::AddressSet;

/// The kernel of the network namespace the agent runs in (the node's), through libnftables in
/// this process where it is installed ([`crate::libnft::LibNft`], a transaction is one call),
/// else through the `nft` command ([`HostNft`]). Made in the calling thread's namespace.
pub fn node_backend() -> Box<dyn NftBackend + Send> {
    match crate::libnft::LibNft::load() {
        Ok(library) => {
            tracing::info!("programming nftables through libnftables in this process");
            Box::new(library)
        }
        Err(reason) => {
            tracing::info!(%reason, "programming nftables through the nft command");
            Box::new(HostNft)
        }
    }
}

/// The kernel of the network namespace the agent runs in, through the `nft` command.
#[derive(Clone, Copy, Debug, Default)]
pub struct HostNft;

impl NftBackend for HostNft {
    fn apply(&self, script: &str) -> Result<(), NftError> {
        run_nft(Command::new("nft"), &["-f", "-"], script).map(drop)
    }

    fn check(&self, script: &str) -> Result<(), NftError> {
        run_nft(Command::new("nft"), &["-c", "-f", "-"], script).map(drop)
    }

    fn chains(&self) -> Result<Option<Vec<String>>, NftError> {
        chains_via(|args| run_nft(Command::new("nft"), args, ""))
    }

    fn sets(&self) -> Result<Option<Vec<String>>, NftError> {
        sets_via(|args| run_nft(Command::new("nft"), args, ""))
    }

    fn rules_json(&self) -> Result<String, NftError> {
        run_nft(Command::new("nft"), &LIST_RULES_JSON, "")
    }

    fn set_contents(&self, set: &AddressSet) -> Result<Option<Vec<IpNet>>, NftError> {
        crate::set_dump::read_netpol_set(set)
    }

    /// Where a netfilter socket opens (it needs the same privilege as `nft`).
    fn adds_elements_directly(&self) -> bool {
        NetfilterSocket::open().is_ok()
    }

    fn add_to_new_set(&self, set: &AddressSet, from: usize, count: usize) -> Result<(), NftError> {
        crate::set_fill::add_to_netpol_set(set, from, count)
    }
}

/// Runs `command args...` with `stdin` and waits for it.
fn output(mut command: Command, program: &str, args: &[&str], stdin: &str) -> io::Result<Output> {
    let mut child = command
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| io::Error::new(e.kind(), format!("{program}: {e}")))?;
    if let Some(mut input) = child.stdin.take() {
        // A command that stops reading early (it refused the first line) closes its end: its
        // exit status and message say why, not the broken pipe.
        if let Err(e) = input.write_all(stdin.as_bytes()) {
            if e.kind() != io::ErrorKind::BrokenPipe {
                return Err(e);
            }
        }
    }
    child.wait_with_output()
}

/// Runs `command args...` with `stdin`, returning its output or failing with its stderr.
pub fn run_piped(
    command: Command,
    program: &str,
    args: &[&str],
    stdin: &str,
) -> io::Result<String> {
    let output = output(command, program, args, stdin)?;
    if !output.status.success() {
        return Err(io::Error::other(format!(
            "{program} {}: {}: {}",
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Runs `nft args...` (as `command`, which may enter a namespace first) with `stdin`: a command
/// that cannot run is [`NftError::Unavailable`], one that fails has refused the script.
pub fn run_nft(command: Command, args: &[&str], stdin: &str) -> Result<String, NftError> {
    let output = output(command, "nft", args, stdin).map_err(NftError::Unavailable)?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(NftError::refused(&format!("{}: {}", output.status, stderr)));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Where Cilium's agent writes the node configuration its BPF programs are compiled with (the
/// DaemonSet mounts it read-only).
pub const CILIUM_NODE_CONFIG: &str = "/var/run/cilium/state/globals/node_config.h";

/// Reads what [`crate::bypass::detect`] needs from the network namespace the agent runs in:
/// its links (`ip -details -json link show`, which sees the namespace of the caller, unlike a
/// `/sys` mounted elsewhere), the bridge-netfilter switches (per namespace, under
/// `/proc/sys/net/bridge`, absent without `br_netfilter`) and Cilium's node configuration.
pub fn host_facts(cilium_node_config: &Path) -> io::Result<HostFacts> {
    let listing = run_piped(
        Command::new("ip"),
        "ip",
        &["-details", "-json", "link", "show"],
        "",
    )?;
    let links = Link::parse_listing(&listing)
        .map_err(|e| io::Error::other(format!("reading `ip -details -json link show`: {e}")))?;
    let switch = |name: &str| -> Option<bool> {
        let path = format!("/proc/sys/net/bridge/{name}");
        std::fs::read_to_string(path).ok().map(|v| v.trim() == "1")
    };
    Ok(HostFacts {
        links,
        bridge_nf_call_iptables: switch("bridge-nf-call-iptables"),
        bridge_nf_call_ip6tables: switch("bridge-nf-call-ip6tables"),
        cilium_node_config: std::fs::read_to_string(cilium_node_config).ok(),
        cilium_node_config_path: cilium_node_config.to_path_buf(),
    })
}
