//! netpol's Windows datapath: the neutral ordered rules (`netpol-datapath`) as per-endpoint HCN
//! ACLs.
//!
//! - [`schema`]: the HCN JSON wire types.
//! - [`render`]: ordered rules to ACL settings (HCN's syntax, its per-rule address limit, rule
//!   ids), and [`naive`] the plan's naive expansion, counted for comparison.
//! - [`api`]: the HCN API as netpol uses it ([`HcnApi`]: endpoints and their policy lists),
//!   implemented by [`client::HcnDatapath`] over raw calls: the simulator ([`sim`]) or, on
//!   Windows, the FFI (`windows`). [`client`] holds everything above the raw calls, so all but
//!   the FFI is tested here.
//! - [`programmer`]: diffs desired rules against the rules read back and updates only the
//!   endpoints that changed, with per-endpoint retry and backoff.
//! - [`discovery`]: the host's endpoints and the pods they belong to (a stand-in CNI on the
//!   simulator).
//! - [`cleanup`]: removes netpol's ACLs and IP sets from a host, and nothing else
//!   (`netpol cleanup`).
//! - [`coexistence`]: other owners' ACLs HCN evaluates before netpol's (reported, never
//!   touched).
//! - [`enforcer`]: [`HcnEnforcer`], the neutral `Enforcer` over all of the above.
//! - [`oracle`]: decides flows through the simulator, for `netpol check --datapath hcn-sim`.
//!
//! Every [`HcnApi`] call blocks: the agent makes them from its reconcile thread, never on its
//! async runtime.

pub mod addresses;
pub mod aggregate;
pub mod api;
pub mod cleanup;
pub mod client;
pub mod coexistence;
pub mod conventions;
pub mod diff;
pub mod discovery;
pub mod enforcer;
pub mod host_rules;
pub mod hresult;
pub mod ipsets;
pub mod matcher;
pub mod naive;
pub mod options;
pub mod oracle;
pub mod programmer;
pub mod render;
pub mod restart;
pub mod resync;
pub mod schema;
pub mod sim;
pub mod version;
#[cfg(windows)]
pub mod windows;
pub mod writes;

pub use api::HcnApi;
pub use client::{HcnCalls, HcnDatapath};
pub use conventions::{AclRemoval, IngressSetField, WriteOptions, DEFAULT_MAX_ACLS_PER_REQUEST};
pub use enforcer::HcnEnforcer;
pub use options::HcnOptions;
pub use oracle::SimOracle;
pub use programmer::Programmer;
pub use render::{
    compile_acls, compile_acls_with, compile_entries_acls, rule_id, HcnAcls, Remotes,
    MAX_ADDRESSES_PER_RULE,
};
pub use resync::ResyncSignal;
pub use sim::HcnSim;
pub use version::{Capabilities, HnsVersion, IpSetMode};
