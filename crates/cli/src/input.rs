//! Where a command's cluster comes from: a scenario file, or manifests named with `-f` (files,
//! folders searched recursively, `-` for stdin), as `kubectl apply -f` reads them.

use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use crate::live::{ClusterArgs, Live};
use crate::loader::{Input, ReadFlags, Scenario};

#[derive(Clone, Debug, Default, clap::Args)]
pub struct ManifestArgs {
    /// Manifests: a YAML or JSON file, a folder (searched recursively) or `-` for stdin, e.g. what
    /// `kubectl get pods,namespaces,nodes,networkpolicies -A -o yaml` prints. Repeatable.
    #[arg(short = 'f', long = "filename", value_name = "PATH")]
    pub filenames: Vec<PathBuf>,
    #[command(flatten)]
    pub read: ReadArgs,
    #[command(flatten)]
    pub live: ClusterArgs,
}

/// How objects are read.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct ReadArgs {
    /// Read a policy with a field its kind does not have (misspelt or misplaced), warning,
    /// instead of refusing it as `kubectl apply` does.
    #[arg(long)]
    pub lenient: bool,
    /// Refuse manifests holding objects of kinds netpol does not read (Service, ConfigMap, ...)
    /// instead of skipping and counting them.
    #[arg(long)]
    pub strict_kinds: bool,
    #[command(flatten)]
    pub placement: PlacementArgs,
    /// The ClusterNetworkPolicy CRD channel of network-policy-api v0.2.0 the cluster serves:
    /// `standard` refuses the experimental fields (`nodes`, `domainNames`) as that CRD lacks
    /// them; `experimental` (the default) accepts `nodes` and applies its named-port rule.
    #[arg(long, value_name = "CHANNEL", default_value_t = netpol_api::CrdChannel::default())]
    pub crd_channel: netpol_api::CrdChannel,
}

impl ReadArgs {
    pub fn flags(&self) -> ReadFlags {
        ReadFlags {
            lenient: self.lenient,
            strict_kinds: self.strict_kinds,
            placement: self.placement.placement(),
            channel: self.crd_channel,
        }
    }
}

/// Where the pods of workload templates go, the same in every command (the agent's too).
#[derive(Clone, Debug, Default, clap::Args)]
pub struct PlacementArgs {
    /// The pod network template pods (of Deployments, StatefulSets, ...) are given addresses
    /// in, each at a stable hash of its namespace and name (its first host is left to the
    /// gateway). Default: 10.244.0.0/16.
    #[arg(long, value_name = "CIDR")]
    pub pod_cidr: Option<ipnet::IpNet>,
    /// The nodes template pods are spread over (by the same hash), comma-separated. Default:
    /// the input's nodes, or one stand-in node `assigned-node` at the pod network's first host
    /// (the agent: its own --node).
    #[arg(long, value_name = "NODE,...", value_delimiter = ',')]
    pub assign_nodes: Vec<String>,
}

impl PlacementArgs {
    pub fn placement(&self) -> netpol_api::workloads::Placement {
        let mut nodes = self.assign_nodes.clone();
        nodes.sort();
        nodes.dedup();
        let pod_cidr = match self.pod_cidr {
            Some(cidr) => cidr.trunc(),
            None => netpol_api::workloads::Placement::default().pod_cidr,
        };
        netpol_api::workloads::Placement::new(pod_cidr, nodes)
    }
}

impl ManifestArgs {
    /// The input: the `-f` manifests if any were named, else `path` (a scenario file, or a
    /// manifest file or folder, told apart by their content).
    /// With `--cluster`: the live cluster, with the `-f` manifests and `path` applied on top.
    pub fn input(&self, path: Option<&Path>) -> Option<Input> {
        if self.live.cluster {
            let mut apply = self.filenames.clone();
            apply.extend(path.map(Path::to_owned));
            return Some(Input::Live(Live {
                cluster: self.live.clone(),
                apply,
            }));
        }
        if self.filenames.is_empty() {
            path.map(Input::detect)
        } else {
            Some(Input::Manifests(self.filenames.clone()))
        }
    }
}

/// Loads a scenario file, reporting its warnings, or every problem that keeps it from loading,
/// on `err`.
pub fn load_scenario(
    file: &Path,
    flags: ReadFlags,
    err: &mut dyn Write,
) -> io::Result<Option<Scenario>> {
    load(&Input::Scenario(file.to_owned()), flags, err)
}

/// Loads an input, reporting its warnings, or every problem that keeps it from loading, on `err`.
/// Stdin is read only if the input names `-`.
pub fn load(input: &Input, flags: ReadFlags, err: &mut dyn Write) -> io::Result<Option<Scenario>> {
    load_with_stdin(input, &mut io::stdin().lock(), flags, err)
}

/// [`load`], reading `-` from `stdin`.
pub fn load_with_stdin(
    input: &Input,
    stdin: &mut dyn Read,
    flags: ReadFlags,
    err: &mut dyn Write,
) -> io::Result<Option<Scenario>> {
    let loaded = match input {
        Input::Scenario(file) => Scenario::load(file, flags),
        Input::Manifests(paths) => Scenario::from_manifests(paths, stdin, flags),
        Input::Live(live) => crate::live::load(live, stdin, flags),
    };
    match loaded {
        Ok(scenario) => {
            for warning in &scenario.warnings {
                writeln!(err, "warning: {warning}")?;
            }
            Ok(Some(scenario))
        }
        Err(errors) => {
            for error in errors.0 {
                writeln!(err, "error: {error}")?;
            }
            Ok(None)
        }
    }
}
