//! The node agent: keeps every local endpoint's datapath rules equal to what the policies say.
//!
//! ```text
//! sources ──watch events──▶ indexes ──updates──▶ engine ──MapState changes──▶ compiler ──▶ programmer ──▶ datapath
//! (kube watches or files)   (pure)               (incremental)                             (diff, retry)
//! ```
//!
//! The cluster mode and the embedded mode differ only in their source: both feed the same
//! [`indexes::SourceEvent`]s through the same [`reconciler::Pipeline`].

pub mod command;
pub mod crds;
pub mod driver;
pub mod endpoints;
pub mod enforcer;
pub mod health;
pub mod indexes;
pub mod instrumented;
pub mod kind;
pub mod logline;
pub mod metrics;
pub mod reconciler;
pub mod reconnect;
pub mod sources;
pub mod summary;
pub mod usage;

pub use kind::SourceKind;
