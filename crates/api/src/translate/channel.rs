//! The release channel of the ClusterNetworkPolicy CRD (network-policy-api v0.2.0) that objects
//! are checked against.
//!
//! v0.2.0 ships the same kind in two CRDs. The experimental one adds the egress peers `nodes` and
//! `domainNames`, and one CEL rule on egress rules (a `destinationNamedPort` cannot be combined
//! with a `networks`, `nodes` or `domainNames` peer). An API server serving the standard CRD
//! prunes the experimental fields (and `kubectl apply` refuses them as unknown fields); one serving
//! the experimental CRD enforces the extra rule. Objects read from the API server have been
//! through that already; objects read from files are checked here against the channel the user
//! names, so that a file is refused where the server would refuse it.

use std::fmt;
use std::str::FromStr;

/// Which v0.2.0 CRD the objects are meant for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum CrdChannel {
    /// `config/crd/standard`: no `nodes`, no `domainNames`.
    Standard,
    /// `config/crd/experimental`, a superset of the standard CRD. The default: netpol enforces
    /// `nodes`, and everything the standard channel accepts the experimental one accepts too,
    /// except a named port next to a CIDR peer, which matches nothing anyway.
    #[default]
    Experimental,
}

/// The CRD annotation naming the channel, as upstream's generated CRDs carry it.
pub const CHANNEL_ANNOTATION: &str = "policy.networking.k8s.io/channel";

impl CrdChannel {
    pub const ALL: [CrdChannel; 2] = [CrdChannel::Standard, CrdChannel::Experimental];

    pub fn name(self) -> &'static str {
        match self {
            CrdChannel::Standard => "standard",
            CrdChannel::Experimental => "experimental",
        }
    }

    /// Whether a field upstream marks `<network-policy-api:experimental>` exists in this CRD.
    pub fn has_experimental_fields(self) -> bool {
        self == CrdChannel::Experimental
    }
}

impl fmt::Display for CrdChannel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for CrdChannel {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        CrdChannel::ALL
            .into_iter()
            .find(|c| c.name() == s)
            .ok_or_else(|| format!("unknown CRD channel {s:?} (expected standard or experimental)"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for channel in CrdChannel::ALL {
            assert_eq!(channel.name().parse::<CrdChannel>(), Ok(channel));
        }
        assert!("Standard".parse::<CrdChannel>().is_err());
        assert_eq!(CrdChannel::default(), CrdChannel::Experimental);
    }
}
