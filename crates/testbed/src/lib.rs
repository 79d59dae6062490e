//! Real packets through real kernels, for tests and for `netpol check --datapath nftables`:
//!
//! - [`netns`]: anonymous private network namespaces (nothing mounted or named on the host),
//!   commands run inside them, and the check that a machine can run kernel tests at all.
//! - [`topology`]: a routed network of such namespaces, one router (carrying netpol's table) and
//!   one namespace per host.
//! - [`probe`]: parallel TCP and UDP probes between hosts.
//! - [`services`]: Kubernetes Services as kube-proxy's modes DNAT them on the node.
//!
//! Linux only (namespaces need `unshare` and root). The node agent never links this crate: it is
//! a test rig, and a node has no business making namespaces.
#![cfg(target_os = "linux")]

pub mod netns;
pub mod probe;
pub mod services;
pub mod topology;
pub mod transport;
