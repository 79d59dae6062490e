//! `netpol controller`: the cluster component of slice mode. Watches every Pod once for the
//! cluster and publishes what agents need of them as NetpolEndpointSlices (netpol.io/v1alpha1);
//! agents started with `--source slices` read those instead of every Pod. Run as a Deployment
//! of two replicas: one holds the Lease and writes, the other takes over once it expires. The
//! controller itself is `netpol_agent::controller`; this module turns arguments into its
//! configuration.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use netpol_agent::controller::{self, ControllerConfig};

use super::agent::{start_logging, BudgetArgs, LogFormat};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A kubeconfig; without it, the in-cluster configuration.
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// Where to serve /metrics, /healthz and /readyz.
    #[arg(long, default_value = "0.0.0.0:9591")]
    pub listen: SocketAddr,
    /// The namespace of the controller's Lease (`netpol-controller`).
    #[arg(long, env = "POD_NAMESPACE", default_value = "netpol-system")]
    pub namespace: String,
    /// This replica's name in the Lease (its pod's name).
    #[arg(long, env = "POD_NAME")]
    pub identity: String,
    /// Seconds a leader that stopped renewing keeps the Lease: the longest a failover takes.
    #[arg(long, value_name = "SECONDS", default_value_t = 15,
          value_parser = clap::value_parser!(u64).range(2..))]
    pub lease_duration: u64,
    /// Milliseconds between a pod change and its slice's write, gathering the changes that
    /// follow into the same write.
    #[arg(long, value_name = "MS", default_value_t = 200)]
    pub coalesce: u64,
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// The agents' budgets (set both alike): the controller posts the refusal Events of slice
    /// mode.
    #[command(flatten)]
    pub budgets: BudgetArgs,
}

impl Args {
    pub fn config(&self) -> ControllerConfig {
        let mut config = ControllerConfig::new(
            self.kubeconfig.clone(),
            self.listen,
            &self.namespace,
            &self.identity,
        );
        config.lease.duration = Duration::from_secs(self.lease_duration);
        config.coalesce = Duration::from_millis(self.coalesce);
        config.budgets = self.budgets.budgets();
        config
    }
}

pub fn run(args: &Args) -> ExitCode {
    start_logging(args.log_format, "controller");
    match controller::run(&args.config()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!("{error:#}");
            ExitCode::from(2)
        }
    }
}
