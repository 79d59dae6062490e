//! Where compiled rules are enforced: the one trait every datapath implements.
//!
//! The agent's pipeline compiles each local pod's MapState once into [`CompiledRules`] and hands
//! every pod's rules to an [`Enforcer`]; `netpol_hcn::HcnEnforcer` (Windows HCN or its
//! simulator) and `netpol_nft::NftEnforcer` (Linux nftables) bring their datapath there. Both
//! report per endpoint in the same [`ApplyReport`].

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use std::time::Instant;

use netpol_engine::{IdentityId, IdentityStore, Shared};

use crate::compile::{CompileOptions, CompiledRules};
use crate::error::DatapathError;
use crate::report::ApplyReport;

/// The local pods the engine holds, by key, with their addresses.
pub type LocalPods = BTreeMap<String, Vec<IpAddr>>;

/// Compiled rules of each local pod, by pod key.
pub type CompiledPods = BTreeMap<String, Shared<CompiledRules>>;

/// A datapath endpoint: a pod's network interface on this host (an HCN endpoint), or the pod
/// itself where the datapath matches pods by address (nftables).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndpointInfo {
    /// The datapath's id (an HCN endpoint GUID; the pod key on nftables).
    pub id: String,
    pub name: String,
    pub addresses: Vec<IpAddr>,
}

/// What a datapath must enforce: every local pod's compiled rules, and the ipcache their remote
/// sets resolve through.
#[derive(Clone, Copy)]
pub struct Desired<'a> {
    pub pods: &'a LocalPods,
    pub compiled: &'a CompiledPods,
    /// Resolves the identities the rules' remote sets name to their addresses.
    pub identities: &'a IdentityStore,
    /// The identities whose addresses changed since the previous call: only the address sets
    /// naming them can differ from what the datapath was last given.
    pub changed: &'a BTreeSet<IdentityId>,
    /// Audit mode (`netpol_engine::audit`): the would-be rules (every entry enforced, audited
    /// ones included) of each local pod an audited policy selects, compiled on the same
    /// identities as `compiled`. A datapath that can report would-denies
    /// ([`Enforcer::reports_would_deny`]) passes what `compiled` allows and these deny, and
    /// counts and logs it; the others ignore them. Empty for every other pod.
    pub audit: &'a CompiledPods,
}

/// A datapath that enforces compiled rules.
pub trait Enforcer: Send {
    /// Brings the datapath to `desired`. `refresh` re-reads everything the datapath holds (and
    /// resolves every address set anew) instead of trusting what was last programmed. An error
    /// means nothing could be programmed this time (the endpoints could not be listed).
    fn enforce(
        &mut self,
        desired: &Desired<'_>,
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

    /// Whether the datapath reports would-denies ([`Desired::audit`]): nftables counts and logs
    /// them; HCN ACLs can do neither, so audited denies are not programmed there.
    fn reports_would_deny(&self) -> bool {
        false
    }
}
