//! The datapath-neutral stage between the engine and any datapath.
//!
//! ```text
//! MapState ──compile──▶ OrderedRule list ──┬──▶ HCN ACL settings (netpol-hcn)
//!                                          └──▶ nftables chains  (netpol-nft)
//! ```
//!
//! - [`compile`]: one endpoint's MapState to ordered first-match rules ([`OrderedRule`]), exactly
//!   as the MapState lookup decides; shared by every datapath, so they share ordering, nesting
//!   exceptions, port merging and fail-closed authentication.
//! - [`enforcer`]: the [`Enforcer`] trait each datapath implements, and what it is given.
//! - [`report`], [`error`], [`backoff`]: what an apply did per endpoint, how a call failed, and
//!   when to retry.
//!
//! Nothing here knows HCN's JSON or nftables' syntax.

pub mod backoff;
pub mod compile;
pub mod enforcer;
pub mod error;
pub mod ordered;
pub mod report;
pub mod sets;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

pub use backoff::Backoff;
pub use compile::{
    compile_endpoint, compile_endpoint_indexed, compile_endpoint_with, compile_engine,
    compile_entries, CompileError, CompileIndex, CompileOptions, CompileWarning, CompiledEndpoint,
    CompiledRules, PatchMemo, RuleCount,
};
pub use enforcer::{CompiledPods, Desired, EndpointInfo, Enforcer, LocalPods};
pub use error::{DatapathError, Refusal};
pub use ordered::{Family, OrderedRule, RemoteSet, RuleAction, ALL_PORTS};
pub use report::{ApplyReport, Outcome};
