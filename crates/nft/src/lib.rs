//! netpol's Linux datapath: each endpoint's ordered rules (the compiler's datapath-neutral form,
//! [`netpol_datapath::OrderedRule`]) as chains of one nftables table, `inet netpol`.
//!
//! - [`ruleset`]: the model: per endpoint an ingress and an egress chain of first-match rules,
//!   reached by the endpoint's addresses from one dispatch chain that every base chain jumps to.
//! - [`script`]: the model as an `nft -f` script that replaces the table in one transaction.
//! - [`programmer`]: diff-based programming against what the kernel holds (chains; named address
//!   sets, patched element by element): adds what is new, deletes what is obsolete, all in one
//!   transaction; nothing if nothing changed.
//! - [`eval`]: an in-process evaluation of the model with nftables semantics, for tests and for
//!   explaining a real packet's fate.
//! - [`isolate`]: a refused transaction is bisected with check-only transactions and only the
//!   endpoints whose chains the kernel refuses are isolated.
//! - [`naming`]: chain names (hashes) and comments (bounded, safe), whatever an endpoint key holds.
//! - [`enforcer`]: [`NftEnforcer`], the neutral `Enforcer` over the programmer; `host` (Linux):
//!   the node's own kernel through the `nft` command; [`fake`]: an in-memory stand-in for tests.
//! - [`cleanup`]: deletes netpol's table and nothing else (`netpol cleanup`).
//! - [`bypass`]: whether the node's dataplane carries pod traffic past netfilter, checked before
//!   the agent starts.
//!
//! Real packets through these tables (private namespaces, topologies, probes) are the test rigs
//! of crate `netpol-testbed`, which the node agent does not link.
//!
//! ## Hooks, priorities, conntrack
//!
//! Three base chains, all with policy `accept`, cover every path a packet to or from a local pod
//! takes through the node (see [`script::HOOKS`]): `forward` at `filter` (0) for what the node
//! routes between pods and to or from anywhere else; `output` at `filter` for what the node
//! itself and hostNetwork pods send to a pod; `input` at 101 for what a pod sends to its node.
//! kube-proxy's DNAT (-100) has run before each of them, so a Service is judged by its backend;
//! `input` comes after IPVS (98-99), which sends a Service's packets on through `output`. Traffic
//! that is no local pod's is left to others.
//!
//! Each base chain jumps to one dispatch chain. Its first rule accepts `ct state
//! established,related`: a reply of a connection whose first packet passed is never filtered
//! again, as Kubernetes requires (policies decide connections, not packets), and only new flows
//! pay for rule evaluation. A connection allowed when it started survives a later policy change
//! until conntrack forgets it, which is what kube-proxy-era datapaths and Cilium do too. It then
//! jumps to the egress chain of the source's endpoint, then to the ingress chain of the
//! destination's endpoint (verdict maps keyed by address). Allow rules `return`, so a flow between
//! two local pods needs both sides' allow; block rules `drop`. An isolated endpoint's addresses
//! map to `drop` in both.

pub mod bypass;
pub mod cleanup;
pub mod counters;
pub mod droplog;
pub mod enforcer;
pub mod eval;
pub mod fake;
#[cfg(target_os = "linux")]
pub mod generation;
#[cfg(target_os = "linux")]
pub mod host;
pub mod isolate;
pub mod labels;
#[cfg(target_os = "linux")]
pub mod libnft;
mod log_settings;
pub mod naming;
#[cfg(target_os = "linux")]
pub mod netlink;
pub mod nflog;
pub mod programmer;
mod rule_text;
pub mod ruleset;
pub mod script;
#[cfg(target_os = "linux")]
pub mod set_dump;
#[cfg(target_os = "linux")]
pub mod set_fill;
pub mod sets;
pub mod staging;

pub use enforcer::NftEnforcer;
pub use eval::{Evaluation, Packet};
pub use naming::chain_name;
pub use programmer::{NftBackend, NftError};
pub use ruleset::{ChainRule, ChainVerdict, EndpointChains, RemoteMatch, Ruleset};
pub use script::{Table, TABLE};
