//! netpol's pure policy engine. It knows nothing of Kubernetes, Cilium or Windows: API objects are
//! translated into [`PolicyEntry`] values elsewhere, and datapaths consume the per-endpoint
//! [`mapstate::MapState`] this crate computes.

pub mod entry;
pub mod flow;
pub mod identity;
pub mod labels;
pub mod ports;
pub mod reference;
pub mod selector;

pub use entry::{AuthMode, Direction, OrderKey, PolicyEntry, Priority, Provenance, Tier, Verdict};
pub use identity::{Identity, IdentityId, IdentityKind, IdentityStore, NodeInfo, PodInfo};
pub use labels::{LabelSelector, Labels, Requirement, NAMESPACE_NAME_LABEL};
pub use ports::{NamedPort, PortMatch, PortRule, Protocol};
pub use selector::{AddressScope, CidrSelector, Entity, Peer, PodSelector};
