//! The `--cluster` flags, and the input they name (read by [`crate::live`]).

use std::path::PathBuf;

/// How to reach the live cluster, as kubectl's flags say it.
#[derive(Clone, Debug, Default, PartialEq, Eq, clap::Args)]
pub struct ClusterArgs {
    /// Read the live cluster (once, read-only: list every kind netpol reads), found as kubectl
    /// finds it: --kubeconfig, KUBECONFIG, ~/.kube/config, then the in-cluster configuration.
    /// Manifests given too are applied on top of it, as `kubectl apply` would.
    #[arg(long)]
    pub cluster: bool,
    /// The kubeconfig file to use (instead of KUBECONFIG or ~/.kube/config).
    #[arg(long, value_name = "FILE", requires = "cluster")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (instead of its current-context).
    #[arg(long, value_name = "NAME", requires = "cluster")]
    pub context: Option<String>,
    /// Objects per list page, as `kubectl get --chunk-size`.
    #[arg(long, value_name = "N", default_value_t = 500, requires = "cluster")]
    pub chunk_size: u32,
    /// What if this object were deleted: `KIND/NAMESPACE/NAME`, or `KIND/NAME` for a
    /// cluster-scoped kind (e.g. `networkpolicy/shop/web-from-shop`). Repeatable.
    #[arg(
        long = "delete",
        value_name = "KIND/NAMESPACE/NAME",
        requires = "cluster"
    )]
    pub delete: Vec<String>,
}

/// The live cluster with manifests applied and objects deleted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Live {
    pub cluster: ClusterArgs,
    /// Manifests applied on top (files, folders, `-`).
    pub apply: Vec<PathBuf>,
}
