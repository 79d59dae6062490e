//! The datapath the agent programs, built once at start: its [`Enforcer`], and the handles the
//! daemon and `--once` need beside it (the HCN resync signal, the simulator).

use std::sync::Arc;

use anyhow::bail;
use netpol_datapath::{Backoff, Enforcer};
#[cfg(windows)]
use netpol_hcn::discovery::HostEndpoints;
use netpol_hcn::discovery::{EndpointDiscovery, SimulatedCni};
use netpol_hcn::sim::{HcnSim, SimSession};
use netpol_hcn::{HcnApi, HcnDatapath, HcnEnforcer, HcnOptions, IpSetMode};

use crate::config::{DatapathKind, DatapathOptions};
use crate::flows::FlowLog;
use crate::health::Health;
use crate::instrumented::Instrumented;
use crate::metrics::Metrics;
use crate::reconnect::Reconnecting;

/// The enforcer of the chosen datapath and, for HCN, the datapath whose resync signal (an HNS
/// restart) the daemon follows and, for the simulator, a handle on it.
pub struct Datapaths {
    pub enforcer: Box<dyn Enforcer>,
    pub hcn: Option<Arc<dyn HcnApi>>,
    pub sim: Option<Arc<HcnDatapath<HcnSim>>>,
    /// The datapath's logged decisions (`/flows`); HCN logs none.
    pub flows: Arc<FlowLog>,
}

impl Datapaths {
    fn hcn(
        datapath: Arc<dyn HcnApi>,
        discovery: Box<dyn EndpointDiscovery>,
        sim: Option<Arc<HcnDatapath<HcnSim>>>,
        options: &HcnOptions,
    ) -> Self {
        Datapaths {
            enforcer: Box::new(
                HcnEnforcer::new(datapath.clone(), discovery, Backoff::default())
                    .with_writes(options.writes, options.host_rules),
            ),
            hcn: Some(datapath),
            sim,
            flows: Arc::new(FlowLog::default()),
        }
    }
}

/// Builds the datapath `kind`, its HCN or `nft` calls counted and timed in `metrics`.
pub fn build(
    kind: DatapathKind,
    options: DatapathOptions,
    metrics: &Metrics,
    health: &Arc<Health>,
) -> anyhow::Result<Datapaths> {
    match kind {
        DatapathKind::HcnSim => hcn_sim_with(
            Arc::new(HcnDatapath::new(HcnSim::with_mode(options.hcn.sim_mode))),
            options.hcn_ip_sets,
            &options.hcn,
            metrics,
            health,
        ),
        DatapathKind::Hcn => host_hcn(options.hcn_ip_sets, &options.hcn, |raw| {
            instrument(raw, metrics, health)
        }),
        DatapathKind::Nftables => nftables(options, metrics, health),
    }
}

/// `raw` with its calls counted and timed in `metrics`, and its answers reported to `health`.
fn instrument(raw: Arc<dyn HcnApi>, metrics: &Metrics, health: &Arc<Health>) -> Arc<dyn HcnApi> {
    Arc::new(Instrumented::new(raw, metrics.clone()).with_health(health.clone()))
}

/// The simulated HCN datapath over `sim`, its calls counted and timed in `metrics`, with IP sets
/// (the simulated HNS has them).
pub fn hcn_sim(
    sim: Arc<HcnDatapath<HcnSim>>,
    metrics: &Metrics,
    health: &Arc<Health>,
) -> anyhow::Result<Datapaths> {
    hcn_sim_with(
        sim,
        IpSetMode::Auto,
        &HcnOptions::default(),
        metrics,
        health,
    )
}

/// [`hcn_sim`] with IP sets used as `ip_sets` says.
pub fn hcn_sim_with(
    sim: Arc<HcnDatapath<HcnSim>>,
    ip_sets: IpSetMode,
    options: &HcnOptions,
    metrics: &Metrics,
    health: &Arc<Health>,
) -> anyhow::Result<Datapaths> {
    let host = sim.clone();
    let (network, field) = (options.network.clone(), options.ingress_set_field);
    // The agent talks to the simulator through sessions an HNS restart invalidates, as it
    // talks to the real HNS; the stand-in CNI plugin keeps its own view.
    let sessions = Reconnecting::new(Box::new(move || {
        Ok(Arc::new(
            HcnDatapath::with_ip_sets(SimSession::connect(&host), ip_sets)
                .with_network(network.clone())
                .with_ingress_set_field(field),
        ) as Arc<dyn HcnApi>)
    }))?;
    ip_sets
        .check(&sessions.capabilities())
        .map_err(anyhow::Error::msg)?;
    Ok(Datapaths::hcn(
        instrument(Arc::new(sessions), metrics, health),
        Box::new(SimulatedCni::new(sim.clone())),
        Some(sim),
        options,
    ))
}

/// The nftables datapath on this node's kernel, once the node's dataplane is known to pass its
/// pods' packets through netfilter.
#[cfg(target_os = "linux")]
fn nftables(
    options: DatapathOptions,
    metrics: &Metrics,
    health: &Arc<Health>,
) -> anyhow::Result<Datapaths> {
    use netpol_nft::host::node_backend;
    use netpol_nft::NftEnforcer;
    if options.ignore_netfilter_bypass {
        tracing::warn!("not checking whether this node's dataplane bypasses netfilter (--ignore-netfilter-bypass)");
    } else {
        refuse_netfilter_bypass()?;
    }
    let backend = crate::instrumented::InstrumentedNft::new(node_backend(), metrics.clone())
        .with_health(health.clone());
    let enforcer =
        NftEnforcer::new(Box::new(backend), Backoff::default()).with_drop_log(options.drop_log);
    let book = enforcer.rule_book();
    // Counters are read at each scrape through a context of their own, not the enforcer's.
    let reader = crate::instrumented::InstrumentedNft::new(node_backend(), metrics.clone());
    metrics
        .rule_counters
        .install(Box::new(reader), book.clone());
    let flows = Arc::new(FlowLog::default());
    if let Err(error) = crate::flows::follow_drop_log(flows.clone(), book, options.drop_log.group) {
        let reason = format!(
            "the drop log cannot be read (NFLOG group {}): {error}",
            options.drop_log.group
        );
        tracing::warn!("{reason}; packets are still counted and dropped");
        flows.set_unavailable(Some(reason));
    }
    Ok(Datapaths {
        enforcer: Box::new(enforcer),
        hcn: None,
        sim: None,
        flows,
    })
}

/// Fails, naming every finding, if this node's dataplane carries pod traffic past netfilter:
/// a table that sees none of the traffic would report every pod enforced and enforce nothing.
#[cfg(target_os = "linux")]
fn refuse_netfilter_bypass() -> anyhow::Result<()> {
    use netpol_nft::bypass::detect;
    use netpol_nft::host::{host_facts, CILIUM_NODE_CONFIG};
    const OVERRIDE: &str = "pass --ignore-netfilter-bypass only if you know the finding is wrong";
    let facts = host_facts(std::path::Path::new(CILIUM_NODE_CONFIG)).map_err(|e| {
        anyhow::anyhow!(
            "cannot tell whether this node's dataplane bypasses netfilter: {e}; {OVERRIDE}"
        )
    })?;
    let found = detect(&facts);
    if found.is_empty() {
        return Ok(());
    }
    let list: Vec<String> = found.iter().map(|b| format!("  - {b}")).collect();
    bail!(
        "this node's dataplane carries pod traffic past netfilter, where the nftables datapath \
         would enforce nothing; refusing to start rather than report pods enforced that are not:\n{}\n{OVERRIDE}",
        list.join("\n")
    )
}

#[cfg(not(target_os = "linux"))]
fn nftables(_: DatapathOptions, _: &Metrics, _: &Arc<Health>) -> anyhow::Result<Datapaths> {
    bail!("the nftables datapath exists only on Linux")
}

#[cfg(windows)]
fn host_hcn(
    ip_sets: IpSetMode,
    options: &HcnOptions,
    instrument: impl Fn(Arc<dyn HcnApi>) -> Arc<dyn HcnApi>,
) -> anyhow::Result<Datapaths> {
    let (network, field) = (options.network.clone(), options.ingress_set_field);
    // Re-created (registering for notifications again) after every HNS restart. Fails at once,
    // saying why, where HNS is missing or too old.
    let client = Reconnecting::new(Box::new(move || {
        let client = netpol_hcn::windows::HcnClient::connect().map_err(|e| {
            netpol_datapath::DatapathError::Call {
                call: "connecting to HNS",
                endpoint: None,
                message: e.to_string(),
            }
        })?;
        Ok(Arc::new(
            HcnDatapath::with_ip_sets(client, ip_sets)
                .with_network(network.clone())
                .with_ingress_set_field(field),
        ) as Arc<dyn HcnApi>)
    }))?;
    // `on` refuses an HNS without IP sets; `auto` inlines addresses there.
    ip_sets
        .check(&client.capabilities())
        .map_err(anyhow::Error::msg)?;
    let capabilities = client.capabilities();
    tracing::info!(
        ip_sets = capabilities.ip_sets,
        mode = ?ip_sets,
        ingress_set_field = %capabilities.ingress_set_field,
        acl_removal = ?options.writes.removal,
        max_acls_per_request = options.writes.max_acls_per_request,
        host_rules = ?options.host_rules,
        "HCN ACLs name network IP sets where ip_sets is true, inline addresses otherwise"
    );
    Ok(Datapaths::hcn(
        instrument(Arc::new(client)),
        Box::new(HostEndpoints::default()),
        None,
        options,
    ))
}

#[cfg(not(windows))]
fn host_hcn(
    _: IpSetMode,
    _: &HcnOptions,
    _: impl Fn(Arc<dyn HcnApi>) -> Arc<dyn HcnApi>,
) -> anyhow::Result<Datapaths> {
    bail!("the HCN datapath exists only on Windows; use --datapath hcn-sim")
}
