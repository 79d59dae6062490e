//! Where compiled rules are enforced: the one trait every datapath implements.
//!
//! The agent's pipeline compiles each local pod's MapState once into [`CompiledRules`] and hands
//! every pod's rules to an [`Enforcer`]; `netpol_hcn::HcnEnforcer` (Windows HCN or its
//! simulator) and `netpol_nft::NftEnforcer` (Linux nftables) bring their datapath there. Both
//! report per endpoint in the same [`ApplyReport`].

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use crate::compile::{CompileOptions, CompiledRules};
use crate::error::DatapathError;
use crate::report::ApplyReport;

/// The local pods the engine holds, by key, with their addresses.
pub type LocalPods = BTreeMap<String, Vec<IpAddr>>;

/// Compiled rules of each local pod, by pod key.
pub type CompiledPods = BTreeMap<String, Arc<CompiledRules>>;

/// A datapath endpoint: a pod's network interface on this host (an HCN endpoint), or the pod
/// itself where the datapath matches pods by address (nftables).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndpointInfo {
    /// The datapath's id (an HCN endpoint GUID; the pod key on nftables).
    pub id: String,
    pub name: String,
    pub addresses: Vec<IpAddr>,
}

/// A datapath that enforces compiled rules.
pub trait Enforcer: Send {
    /// Brings the datapath to `compiled` for the local `pods`. `refresh` re-reads everything the
    /// datapath holds instead of trusting what was last programmed. An error means nothing could
    /// be programmed this time (the endpoints could not be listed).
    fn enforce(
        &mut self,
        pods: &LocalPods,
        compiled: &CompiledPods,
        refresh: bool,
        now: Instant,
    ) -> Result<ApplyReport, DatapathError>;

    /// The datapath's endpoints as last seen, each with the pod it belongs to.
    fn endpoints(&self) -> &[(EndpointInfo, Option<String>)];

    /// When it wants to run again on its own: a retry after a failure, a look for missing
    /// endpoints.
    fn next_wakeup(&self) -> Option<Instant>;

    /// What the compiler may use on this datapath.
    fn compile_options(&self) -> CompileOptions;
}
