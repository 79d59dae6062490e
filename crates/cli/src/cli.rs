//! The command line as clap parses it: one [`Command`] per subcommand, each holding its module's
//! `Args`. In the library rather than in `main.rs` so that tests parse the invocations the
//! documentation shows with the very parser the binary uses (`Cli::try_parse_from`).

use clap::{Parser, Subcommand};

use crate::commands::{
    acls, agent, check, cleanup, controller, crds, diff, explain, flows, lint, matrix, version,
};

/// Kubernetes network policy for Windows nodes: one engine for NetworkPolicy,
/// AdminNetworkPolicy, ClusterNetworkPolicy and Cilium policies.
#[derive(Debug, Parser)]
#[command(name = "netpol", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check scenario files: print every flow whose verdict differs from the expectation.
    Check(check::Args),
    /// Print the computed connectivity matrix of a scenario's or manifests' pods.
    Matrix(matrix::Args),
    /// Explain the verdict of one flow: the rule that decided each direction.
    Explain(explain::Args),
    /// Print the flows whose verdict changes from BEFORE to AFTER, with the deciding rules.
    Diff(diff::Args),
    /// Report policy smells (rules that never decide, policies that change nothing, peers that
    /// select nothing, ...), as text, JSON or SARIF.
    Lint(lint::Args),
    /// Print the HCN ACL requests the agent would send for a scenario's pods, with rule counts.
    Acls(acls::Args),
    /// Run the node agent: keep this node's endpoint rules equal to what the policies say.
    Agent(agent::Args),
    /// Publish the cluster's pods as NetpolEndpointSlices for agents in slice mode (a
    /// Deployment of two replicas; the Lease holder writes).
    Controller(controller::Args),
    /// Follow a running agent's drop log: each denied connection with the rule that denied it.
    Flows(flows::Args),
    /// Remove everything netpol programmed on this node (its nftables table, or its HCN ACLs
    /// and IP sets), and nothing of any other owner.
    Cleanup(cleanup::Args),
    /// Print the CustomResourceDefinitions of the policy kinds netpol owns or needs.
    Crds(crds::Args),
    /// Print netpol's version, the commit it was built from, its target and build date.
    Version(version::Args),
}
