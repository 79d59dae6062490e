//! The kinds of API objects the agent follows, one watch (or one slice of the files) each.

use netpol_api::Object;

/// One watched kind. Each kind is listed and relisted on its own, so events carry their kind even
/// when they carry no object (`Init`, `InitDone`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SourceKind {
    Namespace,
    Pod,
    Node,
    NetworkPolicy,
    AdminNetworkPolicy,
    BaselineAdminNetworkPolicy,
    ClusterNetworkPolicy,
    CiliumNetworkPolicy,
    CiliumClusterwideNetworkPolicy,
    /// Slice mode's NetpolEndpointSlices: the pods of other nodes, as the controller publishes
    /// them. Not an [`Object`] kind (its events reach the indexes on their own path), so not in
    /// [`SourceKind::ALL`].
    NetpolEndpointSlice,
}

impl SourceKind {
    /// The kinds of [`Object`]s.
    pub const ALL: [SourceKind; 9] = [
        SourceKind::Namespace,
        SourceKind::Pod,
        SourceKind::Node,
        SourceKind::NetworkPolicy,
        SourceKind::AdminNetworkPolicy,
        SourceKind::BaselineAdminNetworkPolicy,
        SourceKind::ClusterNetworkPolicy,
        SourceKind::CiliumNetworkPolicy,
        SourceKind::CiliumClusterwideNetworkPolicy,
    ];

    /// The policy kinds: objects that translate into policy entries.
    pub const POLICIES: [SourceKind; 6] = [
        SourceKind::NetworkPolicy,
        SourceKind::AdminNetworkPolicy,
        SourceKind::BaselineAdminNetworkPolicy,
        SourceKind::ClusterNetworkPolicy,
        SourceKind::CiliumNetworkPolicy,
        SourceKind::CiliumClusterwideNetworkPolicy,
    ];

    /// The kind as spelled in `kind:`.
    pub fn as_str(self) -> &'static str {
        match self {
            SourceKind::Namespace => "Namespace",
            SourceKind::Pod => "Pod",
            SourceKind::Node => "Node",
            SourceKind::NetworkPolicy => "NetworkPolicy",
            SourceKind::AdminNetworkPolicy => "AdminNetworkPolicy",
            SourceKind::BaselineAdminNetworkPolicy => "BaselineAdminNetworkPolicy",
            SourceKind::ClusterNetworkPolicy => "ClusterNetworkPolicy",
            SourceKind::CiliumNetworkPolicy => "CiliumNetworkPolicy",
            SourceKind::CiliumClusterwideNetworkPolicy => "CiliumClusterwideNetworkPolicy",
            SourceKind::NetpolEndpointSlice => "NetpolEndpointSlice",
        }
    }

    pub fn of(object: &Object) -> SourceKind {
        match object {
            Object::Namespace(_) => SourceKind::Namespace,
            Object::Pod(_) => SourceKind::Pod,
            Object::Node(_) => SourceKind::Node,
            Object::NetworkPolicy(_) => SourceKind::NetworkPolicy,
            Object::AdminNetworkPolicy(_) => SourceKind::AdminNetworkPolicy,
            Object::BaselineAdminNetworkPolicy(_) => SourceKind::BaselineAdminNetworkPolicy,
            Object::ClusterNetworkPolicy(_) => SourceKind::ClusterNetworkPolicy,
            Object::CiliumNetworkPolicy(_) => SourceKind::CiliumNetworkPolicy,
            Object::CiliumClusterwideNetworkPolicy(_) => SourceKind::CiliumClusterwideNetworkPolicy,
        }
    }

    pub fn is_policy(self) -> bool {
        Self::POLICIES.contains(&self)
    }
}

impl std::fmt::Display for SourceKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
