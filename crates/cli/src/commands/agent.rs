//! `netpol agent`: the node agent's command line, in embedded mode (`--from-dir DIR`: objects
//! from YAML files) or cluster mode (watches through `--kubeconfig PATH`, or the in-cluster
//! configuration). The agent itself is the `netpol-agent` library; this module turns arguments
//! into its configuration, sets up logging and prints the `--once` summary.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use netpol_agent::indexes::PolicyBudgets;
use netpol_agent::once::{self, ATTEMPTS};
use netpol_agent::sources::cluster::PodSource;
use netpol_agent::{daemon, AgentConfig, DatapathOptions, SourceConfig};
use netpol_engine::Protocol;

use crate::decide::HcnIpSets;
use crate::summary;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DatapathKind {
    /// The host's HCN (Windows only).
    Hcn,
    /// An in-process HCN simulator; local endpoints are the pods scheduled on --node.
    HcnSim,
    /// The Linux kernel's nftables, in the agent's network namespace (the node's, with
    /// hostNetwork and CAP_NET_ADMIN): table `inet netpol`, local pods matched by address on the
    /// forward, input and output hooks. Refuses to start on a node whose dataplane bypasses
    /// netfilter.
    Nftables,
}

impl From<DatapathKind> for netpol_agent::DatapathKind {
    fn from(kind: DatapathKind) -> Self {
        match kind {
            DatapathKind::Hcn => netpol_agent::DatapathKind::Hcn,
            DatapathKind::HcnSim => netpol_agent::DatapathKind::HcnSim,
            DatapathKind::Nftables => netpol_agent::DatapathKind::Nftables,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PodSourceArg {
    /// Every Pod of the cluster (direct mode).
    Pods,
    /// NetpolEndpointSlices for other nodes' pods, this node's own Pods in full (slice mode).
    Slices,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Embedded mode: read the cluster's objects from the YAML files under DIR and follow changes.
    #[arg(long, value_name = "DIR", conflicts_with = "kubeconfig")]
    pub from_dir: Option<PathBuf>,
    /// Cluster mode with this kubeconfig; without it (and without --from-dir), the in-cluster
    /// configuration.
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// Cluster mode: list each kind as a streaming list (`sendInitialEvents`) where the server
    /// offers one, instead of in pages. Streaming lists spare the API server's memory on huge
    /// lists, but are never gzipped: with realistic pods they cost several times the bytes.
    #[arg(long, conflicts_with = "from_dir")]
    pub streaming_lists: bool,
    /// Cluster mode: where the pods of other nodes come from. `pods` watches every Pod;
    /// `slices` watches the NetpolEndpointSlices `netpol controller` publishes, and only this
    /// node's own Pods (`fieldSelector=spec.nodeName=NODE`).
    #[arg(long, value_enum, default_value_t = PodSourceArg::Pods, conflicts_with = "from_dir")]
    pub source: PodSourceArg,
    /// This node's name: its pods are the local endpoints.
    #[arg(long, env = "NODE_NAME")]
    pub node: String,
    #[arg(long, value_enum, default_value_t = default_datapath())]
    pub datapath: DatapathKind,
    /// Sync once, print a summary and exit (embedded mode only).
    #[arg(long, requires = "from_dir")]
    pub once: bool,
    /// Where to serve /metrics, /healthz and /readyz.
    #[arg(long, default_value = "0.0.0.0:9590")]
    pub listen: SocketAddr,
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Seconds between full resyncs (every endpoint read back, every file read again).
    #[arg(long, value_name = "SECONDS", default_value_t = 300)]
    pub resync_period: u64,
    /// Milliseconds of quiet that close a batch of changes.
    #[arg(long, value_name = "MS", default_value_t = 100)]
    pub debounce: u64,
    /// Seconds to wait at start for every file to be read (embedded mode) or every policy kind
    /// to be listed (cluster mode) before programming what could be read; readiness stays false
    /// until everything is. Pods, namespaces and nodes are always waited for.
    #[arg(long, value_name = "SECONDS", default_value_t = 30)]
    pub initial_sync_timeout: u64,
    /// Milliseconds between polls of the files in embedded mode.
    #[arg(long, value_name = "MS", default_value_t = 200)]
    pub poll_interval: u64,
    /// Flows the --once summary shows a matrix for, as PROTOCOL/PORT (repeatable).
    #[arg(long = "probe", value_name = "PROTOCOL/PORT", value_parser = parse_probe, default_value = "TCP/80")]
    pub probes: Vec<(Protocol, u16)>,
    /// In the --once summary, list every local endpoint and print the full connectivity matrix
    /// of each probe, not only the counts of allowed and denied pairs.
    #[arg(long, requires = "once")]
    pub matrix: bool,
    /// nftables: start even if this node's dataplane is found to carry pod traffic past
    /// netfilter (Cilium's eBPF host routing, Calico's eBPF dataplane, netkit devices, a bridge
    /// without br_netfilter), where the table would enforce nothing. Only for a node you know
    /// the check is wrong about.
    #[arg(long)]
    pub ignore_netfilter_bypass: bool,
    /// Every policy in audit mode, as if annotated `netpol.io/enforcement: audit`: nothing is
    /// enforced, for a first rollout. Logged once per policy and counted in
    /// netpol_audited_policies.
    #[arg(long)]
    pub audit: bool,
    /// nftables: the netlink log group (NFLOG) the drop log is sent to and read from. Another
    /// process bound to it (ulogd, another agent) keeps the agent from reading the log; packets
    /// are still counted and dropped.
    #[arg(long, value_name = "GROUP", default_value_t = netpol_nft::droplog::LOG_GROUP)]
    pub nflog_group: u16,
    /// nftables: denied connections logged per second for the whole node (and the burst).
    /// Over it, connections are still denied and counted, not logged.
    #[arg(long, value_name = "PER_SECOND", default_value_t = netpol_nft::droplog::LOG_RATE,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub drop_log_rate: u32,
    /// MapState entries one pod's policy may need (shared identity classes counted once, plus
    /// one per remote identity). A pod over it is isolated on purpose (all traffic denied both
    /// ways except ingress from its own node), logged naming the policies responsible and
    /// counted in netpol_endpoints_over_budget; other pods are unaffected.
    #[arg(long, value_name = "ENTRIES", default_value_t = netpol_engine::engine::DEFAULT_MAX_ENTRIES)]
    pub max_policy_entries: usize,
    #[command(flatten)]
    pub budgets: BudgetArgs,
    /// HCN (and hcn-sim): ACLs name network IP sets, so a replica of a workload is one set
    /// update on the network instead of a rewrite of every ACL naming it. `auto` uses them where
    /// the HNS has them (13.0 and later) and inlines addresses elsewhere.
    #[arg(long, value_enum, default_value_t = HcnIpSets::Auto)]
    pub hcn_ip_sets: HcnIpSets,
    /// HCN: how netpol's stale ACLs leave an endpoint. `replace` (as Azure NPM and Calico): one
    /// `Update` of the endpoint's list as just read back, every other owner's policy kept byte
    /// for byte. `remove`: `Remove` requests, only for HNS builds where `Remove` is verified.
    #[arg(long, value_enum, default_value_t = HcnAclRemoval::Replace)]
    pub hcn_acl_removal: HcnAclRemoval,
    /// HCN: at most this many new ACLs per request (`Add` batches), as Azure NPM's 30.
    #[arg(long, value_name = "ACLS", default_value_t = netpol_hcn::DEFAULT_MAX_ACLS_PER_REQUEST as u32,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub hcn_max_acls_per_request: u32,
    /// HCN: `RuleType: Host` allows on every endpoint netpol programs: `auto` where the
    /// network's type needs them (L2Bridge), `on` everywhere, `off` never.
    #[arg(long, value_enum, default_value_t = HcnHostRules::Auto)]
    pub hcn_host_rules: HcnHostRules,
    /// HCN: which field of an ingress ACL names the peer's IP set. `auto`: the HNS version's
    /// (LocalAddresses, as Azure NPM found on Windows Server 2022); `remote` where
    /// `netpol acls --compare` and traffic show the node matches RemoteAddresses.
    #[arg(long, value_enum, default_value_t = HcnSetField::Auto)]
    pub hcn_ingress_set_field: HcnSetField,
    /// HCN: the HNS network (id or name) netpol's IP sets go on. Default: the network most
    /// endpoints are on (with a warning when they are on several).
    #[arg(long, value_name = "NETWORK")]
    pub hcn_network: Option<String>,
    /// hcn-sim: the Windows Server build the simulator models (ideal, ws2019, ws2022, ws2025,
    /// ws2022-remote-sets).
    #[arg(long, default_value = "ideal")]
    pub hcn_sim_mode: netpol_hcn::sim::SimMode,
    /// Embedded mode: where the pods of workloads in the files (Deployments, StatefulSets, ...)
    /// go, as every netpol command places them; with no --assign-nodes, on this node.
    #[command(flatten)]
    pub placement: crate::input::PlacementArgs,
}

/// `--hcn-acl-removal`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum HcnAclRemoval {
    Replace,
    Remove,
}

/// `--hcn-host-rules`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum HcnHostRules {
    Auto,
    On,
    Off,
}

/// `--hcn-ingress-set-field`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum HcnSetField {
    Auto,
    Local,
    Remote,
}

/// The policy budgets: the agent's flags, and the controller's, which posts the refusal Events
/// of slice mode and must refuse what the agents refuse.
#[derive(Debug, clap::Args)]
pub struct BudgetArgs {
    /// CIDR prefixes (each cidr and each except) one policy object may name. An object over any
    /// --max-policy-* or --max-namespace-* budget is refused alone: logged, counted in
    /// netpol_policies_over_budget, reported as a PolicyOverBudget Event in cluster mode, and its
    /// pods keep only its isolation (fail closed); every other object keeps working.
    #[arg(long, value_name = "PREFIXES", default_value_t = PolicyBudgets::default().prefixes_per_object)]
    pub max_policy_prefixes: usize,
    /// Peers other than CIDRs (pod, namespace, node selectors, entities) one policy object may
    /// name.
    #[arg(long, value_name = "PEERS", default_value_t = PolicyBudgets::default().selectors_per_object)]
    pub max_policy_selectors: usize,
    /// Port clauses one policy object may list, over all its rules.
    #[arg(long, value_name = "PORTS", default_value_t = PolicyBudgets::default().ports_per_object)]
    pub max_policy_ports: usize,
    /// CIDR prefixes the policies of one namespace may name together, admitted in the order they
    /// arrive (cluster-scoped policies share one such budget).
    #[arg(long, value_name = "PREFIXES", default_value_t = PolicyBudgets::default().prefixes_per_namespace)]
    pub max_namespace_prefixes: usize,
}

impl BudgetArgs {
    pub fn budgets(&self) -> PolicyBudgets {
        PolicyBudgets {
            prefixes_per_object: self.max_policy_prefixes,
            selectors_per_object: self.max_policy_selectors,
            ports_per_object: self.max_policy_ports,
            prefixes_per_namespace: self.max_namespace_prefixes,
        }
    }
}

impl Args {
    fn datapath_options(&self) -> DatapathOptions {
        DatapathOptions {
            ignore_netfilter_bypass: self.ignore_netfilter_bypass,
            max_policy_entries: Some(self.max_policy_entries),
            audit_all: self.audit,
            drop_log: netpol_nft::droplog::DropLog {
                group: self.nflog_group,
                rate: self.drop_log_rate,
            },
            policy_budgets: self.budgets.budgets(),
            hcn_ip_sets: self.hcn_ip_sets.into(),
            hcn: netpol_hcn::HcnOptions {
                writes: netpol_hcn::WriteOptions {
                    removal: match self.hcn_acl_removal {
                        HcnAclRemoval::Replace => netpol_hcn::AclRemoval::Replace,
                        HcnAclRemoval::Remove => netpol_hcn::AclRemoval::Remove,
                    },
                    max_acls_per_request: self.hcn_max_acls_per_request as usize,
                },
                host_rules: match self.hcn_host_rules {
                    HcnHostRules::Auto => netpol_hcn::host_rules::HostRules::Auto,
                    HcnHostRules::On => netpol_hcn::host_rules::HostRules::On,
                    HcnHostRules::Off => netpol_hcn::host_rules::HostRules::Off,
                },
                ingress_set_field: match self.hcn_ingress_set_field {
                    HcnSetField::Auto => None,
                    HcnSetField::Local => Some(netpol_hcn::IngressSetField::Local),
                    HcnSetField::Remote => Some(netpol_hcn::IngressSetField::Remote),
                },
                network: self.hcn_network.clone(),
                sim_mode: self.hcn_sim_mode,
            },
        }
    }

    fn config(&self) -> AgentConfig {
        let source = match &self.from_dir {
            Some(dir) => SourceConfig::Files(dir.clone()),
            None => SourceConfig::Cluster {
                kubeconfig: self.kubeconfig.clone(),
                streaming_lists: self.streaming_lists,
                pods: match self.source {
                    PodSourceArg::Pods => PodSource::Pods,
                    PodSourceArg::Slices => PodSource::Slices {
                        node: self.node.clone(),
                    },
                },
            },
        };
        AgentConfig {
            node: self.node.clone(),
            source,
            datapath: self.datapath.into(),
            datapath_options: self.datapath_options(),
            listen: self.listen,
            resync_period: Duration::from_secs(self.resync_period),
            debounce: Duration::from_millis(self.debounce),
            initial_sync_timeout: Duration::from_secs(self.initial_sync_timeout),
            poll_interval: Duration::from_millis(self.poll_interval),
            templates: self.placement.placement(),
        }
    }
}

fn default_datapath() -> DatapathKind {
    if cfg!(windows) {
        DatapathKind::Hcn
    } else {
        DatapathKind::HcnSim
    }
}

fn parse_probe(text: &str) -> Result<(Protocol, u16), String> {
    let (protocol, port) = text
        .split_once('/')
        .ok_or_else(|| format!("expected PROTOCOL/PORT, found {text:?}"))?;
    let protocol = crate::loader::parse_protocol(protocol)?;
    let port = port
        .parse::<u16>()
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| format!("invalid port {port:?}"))?;
    Ok((protocol, port))
}

/// Runs the agent; the exit code says how it ended.
pub fn run(args: &Args) -> ExitCode {
    start_logging(args.log_format, "agent");
    let config = args.config();
    let result = match (&config.source, args.once) {
        (SourceConfig::Files(dir), true) => run_once(args, dir),
        _ => daemon::run(&config).map(|()| ExitCode::SUCCESS),
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            tracing::error!("{error:#}");
            ExitCode::from(2)
        }
    }
}

/// Starts logging in `format` and says which build of `netpol {command}` is starting (the
/// first line of every long-running command's log).
pub(crate) fn start_logging(format: LogFormat, command: &str) {
    init_logging(format);
    let build = &super::version::BUILD;
    tracing::info!(
        version = build.version,
        commit = build.commit,
        target = build.target,
        "netpol {command} starting"
    );
}

fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    // A second initialization (tests) keeps the first subscriber.
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

/// `--once`: sync, print the summary, exit 0 only when everything was read and programmed.
fn run_once(args: &Args, dir: &std::path::Path) -> anyhow::Result<ExitCode> {
    let synced = once::sync(
        dir,
        &args.node,
        args.datapath.into(),
        args.datapath_options(),
        Duration::from_millis(args.poll_interval),
        args.placement.placement(),
    )?;
    let mut out = std::io::stdout().lock();
    summary::write_sync_cost(&mut out, &synced.pipeline, synced.took)?;
    summary::write(
        &mut out,
        &args.node,
        &synced.pipeline,
        synced.sim.as_ref().map(|s| s.calls()),
        &args.probes,
        args.matrix,
    )?;
    out.flush()?;
    if !synced.complete {
        for (endpoint, why) in &synced.failed {
            tracing::error!(%endpoint, "not programmed: {why}");
        }
        tracing::error!("some endpoints could not be programmed after {ATTEMPTS} attempts");
    }
    if synced.unreadable_files > 0 || synced.invalid_objects > 0 {
        tracing::error!(
            unreadable_files = synced.unreadable_files,
            invalid_objects = synced.invalid_objects,
            "not every object was read: the rules above leave out what could not be"
        );
    }
    let code = if synced.is_clean() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    };
    // The process ends here: freeing a large cluster's state piece by piece would only add to
    // the time `--once` reports and takes.
    std::mem::forget(synced);
    Ok(code)
}
