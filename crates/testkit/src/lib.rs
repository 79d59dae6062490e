//! Test support for the node agent and the `netpol` command (a dev-dependency only):
//!
//! - [`apiserver`]: an in-process stand-in for kube-apiserver on loopback, speaking the
//!   list/watch protocol with its real semantics (paging, bookmarks, 410 Gone, scripted
//!   failures), for cluster-mode tests and benchmarks;
//! - [`files`]: scratch folders, the bundled example cluster, an invalid policy;
//! - [`http`]: a plain `GET` on loopback.

pub mod apiserver;
pub mod files;
pub mod http;
pub mod realistic;
mod writable;
