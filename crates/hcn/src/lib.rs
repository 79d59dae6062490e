//! netpol's Windows datapath: per-endpoint HCN ACLs compiled from the engine's MapState.
//!
//! - [`schema`]: the HCN JSON wire types.
//! - [`compile`]: MapState to an ordered ACL list that first-match evaluates exactly as the
//!   MapState lookup decides.
//! - [`sim`]: an in-process HCN with HCN's evaluation semantics, a call log and fault injection.
//! - [`datapath`]: the trait the agent programs endpoints through, implemented by the simulator
//!   and (on Windows) by the HCN client.
//! - [`programmer`]: diffs desired rules against the rules read back and updates only the
//!   endpoints that changed, with per-endpoint retry and backoff.
//! - [`oracle`]: decides flows through the simulator, for `netpol check --datapath hcn-sim`.
//! - [`client`]: the HCN client logic above the raw calls, shared by the simulator and the
//!   Windows FFI (`windows`, on Windows only), so everything but the FFI is tested here.
//!
//! Every [`Datapath`] call blocks: the agent runs them with `tokio::task::spawn_blocking`.

pub mod client;
pub mod compile;
pub mod datapath;
pub mod matcher;
pub mod naive;
pub mod oracle;
pub mod programmer;
pub mod schema;
pub mod sim;
pub mod version;
#[cfg(windows)]
pub mod windows;

pub use client::{HcnCalls, HcnDatapath};
pub use compile::{
    compile_endpoint, compile_endpoint_with, compile_engine, compile_entries, CompileError,
    CompileOptions, CompileWarning, CompiledAcls, CompiledEndpoint, RuleCount,
};
pub use datapath::{Datapath, DatapathError, EndpointInfo, ResyncSignal};
pub use oracle::SimOracle;
pub use programmer::{ApplyReport, Backoff, Outcome, Programmer};
pub use sim::HcnSim;
pub use version::{Capabilities, HnsVersion};
