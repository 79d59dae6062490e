//! netpol's pure policy engine. It knows nothing of Kubernetes, Cilium or Windows: API objects are
//! translated into [`PolicyEntry`] values elsewhere, and datapaths consume the per-endpoint
//! [`mapstate::MapState`] this crate computes.
//!
//! Stages: [`entry`] (the rule form) → [`resolve`] (per-endpoint rules) → [`selector_cache`]
//! (selectors to identities) → [`mapstate`] (the datapath view), driven by [`engine::Engine`].
//! [`reference`] is the independent oracle every engine result is tested against; [`explain`]
//! walks the same order and keeps every tier's part for `netpol explain`.

pub mod audit;
pub mod engine;
pub mod entry;
pub mod explain;
pub mod flow;
pub mod identity;
pub mod labels;
mod labelset;
pub mod mapstate;
pub mod portprefix;
pub mod ports;
pub mod precedence;
pub mod prefix_map;
pub mod prefixes;
pub mod reference;
pub mod resolve;
pub mod selector;
pub mod selector_cache;
pub mod shared;

pub use audit::AuditedDecision;
pub use engine::{EndpointChanges, Engine, EngineConfig};
pub use entry::{
    AuthMode, Direction, Enforcement, OrderKey, PolicyEntry, PolicyView, Priority, Provenance,
    Tier, Verdict,
};
pub use flow::{AddressOracle, ByAddress, DirectionOracle};
pub use identity::{
    EntryRef, Identity, IdentityId, IdentityKind, IdentityStore, Leaves, NodeInfo, PodInfo,
    WorldClass,
};
pub use labels::{
    LabelInterner, LabelSelector, Labels, Requirement, SharedLabels, NAMESPACE_NAME_LABEL,
};
pub use mapstate::{ClassChange, MapChange, MapKey, MapState, MapValue, PortKey};
pub use ports::{NamedPort, PortMatch, PortRule, Protocol};
pub use prefixes::PrefixSet;
pub use selector::{AddressScope, CidrSelector, Entity, Peer, PeerGroup, PodSelector};
pub use shared::{Shared, SharedId};
