//! What the agent is told to do: which node, which source, which datapath, and its timings.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Where the cluster's objects come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SourceConfig {
    /// Embedded mode: the YAML files under a folder, followed as they change.
    Files(PathBuf),
    /// Cluster mode: watches through this kubeconfig, or the in-cluster configuration.
    /// `streaming_lists`: list as streaming lists where the server offers them, rather than in
    /// gzipped pages ([`crate::sources::cluster::WatchConfig::streaming_lists`]).
    /// `pods`: where the pods of other nodes come from (every Pod, or NetpolEndpointSlices).
    Cluster {
        kubeconfig: Option<PathBuf>,
        streaming_lists: bool,
        pods: crate::sources::cluster::PodSource,
    },
}

/// The datapath the agent programs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DatapathKind {
    /// The host's HCN (Windows only).
    Hcn,
    /// An in-process HCN simulator; local endpoints are the pods scheduled on the node.
    HcnSim,
    /// The Linux kernel's nftables, in the agent's network namespace (the node's).
    Nftables,
}

/// What the chosen datapath is told beyond its kind.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DatapathOptions {
    /// nftables: program the table even on a node whose dataplane was found to carry pod traffic
    /// past netfilter (`netpol_nft::bypass`), where it would enforce nothing. For a node the
    /// operator knows the check to be wrong about.
    pub ignore_netfilter_bypass: bool,
    /// MapState entries one endpoint may need before it is isolated instead of programmed
    /// (`netpol_engine::engine::DEFAULT_MAX_ENTRIES` when None). Carried here because it bounds
    /// what each datapath is given per endpoint.
    pub max_policy_entries: Option<usize>,
    /// How much one policy object, and the objects of one namespace, may name before they are
    /// refused (`indexes::PolicyBudgets`); carried here beside the entry budget it guards.
    pub policy_budgets: crate::indexes::PolicyBudgets,
    /// nftables: the drop log's netlink log group and rate (`--nflog-group`, `--drop-log-rate`).
    pub drop_log: netpol_nft::droplog::DropLog,
    /// `--audit`: every policy in audit mode (not enforced, whatever its annotation), for a
    /// first rollout.
    pub audit_all: bool,
    /// HCN: whether ACLs name network IP sets (`--hcn-ip-sets`); `Auto` uses them where the HNS
    /// has them (HNS 13.0 and later, and the simulator, which is HNS 15.0).
    pub hcn_ip_sets: netpol_hcn::IpSetMode,
    /// HCN: how ACLs are written, host-scope rules, the ingress set convention, the network, and
    /// the simulator's mode.
    pub hcn: netpol_hcn::HcnOptions,
}

/// Everything the agent needs to run.
#[derive(Clone, Debug)]
pub struct AgentConfig {
    /// This node's name: its pods are the local endpoints.
    pub node: String,
    pub source: SourceConfig,
    pub datapath: DatapathKind,
    pub datapath_options: DatapathOptions,
    /// Where to serve /metrics, /healthz and /readyz.
    pub listen: SocketAddr,
    /// Between full resyncs (every endpoint read back, every file read again).
    pub resync_period: Duration,
    /// Quiet that closes a batch of changes.
    pub debounce: Duration,
    /// How long to wait at start for every file to be read or every kind to be listed before
    /// programming what could be read.
    pub initial_sync_timeout: Duration,
    /// Between polls of the files in embedded mode.
    pub poll_interval: Duration,
    /// Embedded mode: where the pods of workloads in the files go (`--pod-cidr`,
    /// `--assign-nodes`); with no node named, on this node.
    pub templates: netpol_api::workloads::Placement,
}
