//! netpol's Linux datapath: each endpoint's ordered rules (the compiler's datapath-neutral form,
//! [`netpol_datapath::OrderedRule`]) as chains of one nftables table, `inet netpol`.
//!
//! - [`ruleset`]: the model: per endpoint an ingress and an egress chain of first-match rules,
//!   jumped to from one forward-hook base chain by the endpoint's addresses.
//! - [`script`]: the model as an `nft -f` script that replaces the table in one transaction.
//! - [`programmer`]: diff-based programming: reads back netpol's chain names, adds what is new,
//!   deletes what is obsolete, all in one transaction; nothing if nothing changed.
//! - [`eval`]: an in-process evaluation of the model with nftables semantics, for tests and for
//!   explaining a real packet's fate.
//! - [`enforcer`]: [`NftEnforcer`], the neutral `Enforcer` over the programmer; `host` (Linux):
//!   the node's own kernel through the `nft` command.
//!
//! Real packets through these tables (private namespaces, topologies, probes) are the test rigs
//! of crate `netpol-testbed`, which the node agent does not link.
//!
//! ## Hooks, priorities, conntrack
//!
//! The base chain hooks `forward` at priority `filter` (0) with policy `accept`: netpol sees every
//! packet a node routes between pods and to or from outside, whatever the CNI, and leaves traffic
//! that is no local pod's to others. Its first rule accepts `ct state established,related`: a reply
//! of a connection whose first packet passed is never filtered again, as Kubernetes requires
//! (policies decide connections, not packets), and only new flows pay for rule evaluation. A
//! connection allowed when it started survives a later policy change until conntrack forgets it,
//! which is what kube-proxy-era datapaths and Cilium do too.
//!
//! The base chain then jumps to the egress chain of the source's endpoint, then to the ingress
//! chain of the destination's endpoint (verdict maps keyed by address). Allow rules `return`, so a
//! flow between two local pods needs both sides' allow; block rules `drop`.

pub mod bypass;
pub mod enforcer;
pub mod eval;
#[cfg(target_os = "linux")]
pub mod host;
pub mod isolate;
pub mod naming;
pub mod programmer;
pub mod ruleset;
pub mod script;

pub use enforcer::NftEnforcer;
pub use eval::{Evaluation, Packet};
pub use naming::chain_name;
pub use programmer::{NftBackend, NftError};
pub use ruleset::{ChainRule, ChainVerdict, EndpointChains, RemoteMatch, Ruleset};
pub use script::{Table, TABLE};
