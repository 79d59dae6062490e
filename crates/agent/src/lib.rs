//! The node agent: keeps every local endpoint's datapath rules equal to what the policies say.
//!
//! ```text
//! sources ──watch events──▶ indexes ──updates──▶ engine ──MapState changes──▶ compiler ──▶ Enforcer ──▶ datapath
//! (kube watches or files)   (pure)               (incremental)                (neutral)     (HCN or nftables: diff, retry)
//! ```
//!
//! The cluster mode and the embedded mode differ only in their source: both feed the same
//! [`indexes::SourceEvent`]s through the same [`reconciler::Pipeline`]. This crate is a library;
//! the `netpol` command (crate `netpol-cli`) parses arguments and calls [`daemon::run`] or
//! [`once::sync`].
//!
//! | module | job |
//! |---|---|
//! | [`sources`] | cluster watches (list/watch, paging, bookmarks, backoff) and the embedded mode's files |
//! | [`indexes`] | pure state machines from watch events to engine updates |
//! | [`reconciler`] | the pipeline: commit the engine, compile what changed, hand it to the enforcer |
//! | [`driver`] | runs the pipeline on its own thread: debounce, retries, periodic resync |
//! | [`datapaths`] | builds the chosen datapath's enforcer |
//! | [`coexistence`] | at start on HCN, other owners' ACLs evaluated before netpol's (warning, metric) |
//! | [`reconnect`], [`instrumented`] | the HCN client re-created after an HNS restart; HCN and `nft` calls counted and timed |
//! | [`refusals`] | Events on refused objects, posted by one writer: the agent holding a Lease, or the controller |
//! | [`health`], [`metrics`], [`rule_metrics`] | `/healthz`, `/readyz`, `/metrics` (with the datapath's per-rule counters) |
//! | [`flows`] | the drop log: the datapath's last decisions, naming their rules, on `/flows` |
//! | [`daemon`], [`follow_files`], [`once`] | the long-running agent, its file poller, and `--once` |
//! | [`controller`], [`lease`] | `netpol controller`: pods published as NetpolEndpointSlices by the Lease holder, which also posts the refusal Events of slice mode |
//! | [`allocator`] | mimalloc, the binary's allocator, set up as the benchmarks set it up |

pub mod allocator;
pub mod coexistence;
pub mod config;
pub mod controller;
pub mod daemon;
pub mod datapath_refusals;
pub mod datapaths;
pub mod driver;
pub mod flows;
pub mod follow_files;
pub mod health;
pub mod instrumented;
pub mod lease;
pub mod logline;
pub mod metrics;
pub mod once;
pub mod reconciler;
pub mod reconnect;
pub mod refusals;
pub mod rule_metrics;
pub mod sources;
pub mod usage;
pub mod would_be;

pub use config::{AgentConfig, DatapathKind, DatapathOptions, SourceConfig};
pub use netpol_indexes::SourceKind;
/// The indexes live in their own crate, which builds without a Kubernetes client (the fuzz
/// targets drive them); these keep the agent's paths.
pub use netpol_indexes::{self as indexes, kind};
