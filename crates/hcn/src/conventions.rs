//! How netpol writes to HNS where HNS builds differ, or where what a build does is not
//! documented: which field of an ingress ACL names the peer's IP set, how stale ACLs leave an
//! endpoint, and how many ACLs one request may bring. Each choice follows what the dataplanes
//! that ran on real nodes for years do (docs/windows.md, "Compatibility", gives the sources).

use std::fmt;

/// Which field of an `In` ACL names the IP set of the peer (the packet's source). Egress ACLs
/// name the peer's set in `RemoteAddresses` under both conventions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum IngressSetField {
    /// `LocalAddresses`: Azure NPM's convention after testing on Windows Server 2022 (its sets
    /// are "source" in `LocalAddresses`, "destination" in `RemoteAddresses` for both
    /// directions; azure-container-networking `npm/pkg/dataplane/policies/policy_windows.go`,
    /// "HNS has confusing Local and Remote address definitions"). The default: the only
    /// convention a production dataplane shipped with IP sets.
    #[default]
    Local,
    /// `RemoteAddresses`, as for inlined addresses (the field's documented meaning).
    Remote,
}

impl IngressSetField {
    /// The HCN field name.
    pub fn field(self) -> &'static str {
        match self {
            IngressSetField::Local => "LocalAddresses",
            IngressSetField::Remote => "RemoteAddresses",
        }
    }

    /// The other convention.
    pub fn other(self) -> IngressSetField {
        match self {
            IngressSetField::Local => IngressSetField::Remote,
            IngressSetField::Remote => IngressSetField::Local,
        }
    }
}

impl fmt::Display for IngressSetField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.field())
    }
}

/// How the HNS reads IP sets, from its [`crate::Capabilities`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SetConventions {
    pub ingress_field: IngressSetField,
    pub ipv6_sets: bool,
}

/// How netpol's stale ACLs leave an endpoint (`--hcn-acl-removal`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum AclRemoval {
    /// An `Update` carrying the endpoint's whole list as just read back, without the stale
    /// rules: every other owner's policy byte for byte, in its place. Azure NPM removes this way
    /// (its `Remove` is disabled "until remove bug is solved") and Calico replaces whole lists.
    #[default]
    Replace,
    /// `Remove` requests carrying the stale rules exactly as read back. No production dataplane
    /// removes ACLs so; only for HNS builds where `Remove` is verified.
    Remove,
}

/// Azure NPM's `MaxBatchedACLsPerPod` (`npm/config/config.go`): after 500 policies on one pod
/// took two hours in single requests and one minute batched (PR #1893).
pub const DEFAULT_MAX_ACLS_PER_REQUEST: usize = 30;

/// How the programmer writes an endpoint's ACLs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WriteOptions {
    pub removal: AclRemoval,
    /// At most this many ACLs an endpoint does not hold yet per request (`Add` batches; an
    /// `Update` never brings a new one). At least 1.
    pub max_acls_per_request: usize,
}

impl Default for WriteOptions {
    fn default() -> Self {
        WriteOptions {
            removal: AclRemoval::default(),
            max_acls_per_request: DEFAULT_MAX_ACLS_PER_REQUEST,
        }
    }
}
