//! Hand-written custom resource types for the policy APIs netpol reads.
//!
//! Enumerations whose values netpol must check (actions, tiers, protocols, entities, modes) are
//! kept as strings, so that an unknown value reaches translation and is reported with the object
//! and the field it is in, rather than failing deserialization of the whole object. Fields netpol
//! deliberately does not implement are modelled as raw JSON so that their presence can be
//! rejected by name instead of being silently dropped.

pub mod admin;
pub mod cilium;
pub mod cluster_network_policy;

pub use admin::{
    AdminNetworkPolicy, AdminNetworkPolicySpec, BaselineAdminNetworkPolicy,
    BaselineAdminNetworkPolicySpec,
};
pub use cilium::{CiliumClusterwideNetworkPolicy, CiliumNetworkPolicy};
pub use cluster_network_policy::{ClusterNetworkPolicy, ClusterNetworkPolicySpec};
