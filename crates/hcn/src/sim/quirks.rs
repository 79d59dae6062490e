//! What a real HNS may do differently from the simulator's plain reading of the schema, as modes
//! the simulator can run in. Each quirk is one behaviour the production dataplanes' code or
//! history points at (docs/windows.md, "Compatibility"); a [`SimMode`] is the set of quirks one
//! Windows Server build is taken to have. Where a build's behaviour is not known, its mode takes
//! the harsher reading, so that netpol passing there says something.

use std::fmt;
use std::str::FromStr;

use crate::conventions::IngressSetField;
use crate::version::{Capabilities, HnsVersion};

/// What an endpoint `Remove` request does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum RemoveQuirk {
    /// Takes away the policies equal to the given ones.
    #[default]
    Exact,
    /// Takes away every ACL of the same direction and action as a given one, whoever owns it
    /// (another owner's wireserver Block goes with netpol's catch-all Block).
    Loose,
    /// Answers success and changes nothing (Azure NPM's "remove bug").
    Ignored,
}

/// What the network does with an ACL naming a set it does not hold.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum MissingSetQuirk {
    /// The request is refused (`HCN_E_INVALID_POLICY`).
    #[default]
    Refused,
    /// The ACL is taken and the missing set matches no address.
    MatchesNothing,
}

/// The quirks the simulator runs with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SimQuirks {
    pub remove: RemoveQuirk,
    /// The field of an `In` ACL whose set HNS matches against the peer; a set in the other field
    /// is matched against the endpoint's own address.
    pub ingress_set_field: IngressSetField,
    /// The network's `Type` (`L2Bridge`, `Overlay`, `NAT`, ...).
    pub network_type: &'static str,
    /// On an l2bridge network, once an endpoint holds any ACL, traffic also crosses a host layer
    /// that only `RuleType: Host` rules allow: default deny there without one.
    pub host_layer_default_deny: bool,
    /// A request bringing more ACLs than this that the endpoint does not hold yet is refused.
    pub max_new_acls_per_request: Option<usize>,
    /// A set with an IPv6 member is refused (`HCN_E_INVALID_POLICY`).
    pub ipv6_sets_refused: bool,
    pub missing_set: MissingSetQuirk,
    /// An `Add` of an ACL whose `Id` the endpoint holds is refused
    /// (`HCN_E_POLICY_ALREADY_EXISTS`).
    pub duplicate_ids_refused: bool,
}

impl Default for SimQuirks {
    fn default() -> Self {
        SimMode::Ideal.quirks()
    }
}

/// A Windows Server build as the simulator models it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SimMode {
    /// The schema read plainly: exact `Remove`, a peer's set in `RemoteAddresses` whatever the
    /// direction, IPv6 sets, no host layer, no request bound.
    /// No build is known to behave so; it is the simulator netpol's tests were written on.
    #[default]
    Ideal,
    /// Windows Server 2019 (HNS 10.x: no IP sets, so every address inline), l2bridge with its
    /// host layer, `Remove` matching loosely (older builds, per netpol's own runbook history).
    Ws2019,
    /// Windows Server 2022 (HNS 13.x/14.x): IP sets with ingress sets in `LocalAddresses` (Azure
    /// NPM), `Remove` ignored (NPM's "remove bug"), IPv6 sets refused, requests bounded, l2bridge
    /// host layer, duplicate ids refused, a missing set matching nothing.
    Ws2022,
    /// Windows Server 2025 (HNS 15.x): taken to be Windows Server 2022's quirks until a node
    /// shows otherwise.
    Ws2025,
    /// Windows Server 2022 with the other ingress set convention (`RemoteAddresses`), for a node
    /// where `acls --compare` finds it; netpol must be told (`--hcn-ingress-set-field remote`).
    Ws2022RemoteSets,
}

impl SimMode {
    /// Every mode, for tests that run each.
    pub const ALL: [SimMode; 5] = [
        SimMode::Ideal,
        SimMode::Ws2019,
        SimMode::Ws2022,
        SimMode::Ws2025,
        SimMode::Ws2022RemoteSets,
    ];

    pub fn name(self) -> &'static str {
        match self {
            SimMode::Ideal => "ideal",
            SimMode::Ws2019 => "ws2019",
            SimMode::Ws2022 => "ws2022",
            SimMode::Ws2025 => "ws2025",
            SimMode::Ws2022RemoteSets => "ws2022-remote-sets",
        }
    }

    /// The HNS version the mode reports.
    pub fn version(self) -> HnsVersion {
        match self {
            SimMode::Ideal | SimMode::Ws2025 => HnsVersion::new(15, 0),
            SimMode::Ws2019 => HnsVersion::new(10, 4),
            SimMode::Ws2022 | SimMode::Ws2022RemoteSets => HnsVersion::new(13, 2),
        }
    }

    pub fn quirks(self) -> SimQuirks {
        let strict = SimQuirks {
            remove: RemoveQuirk::Ignored,
            ingress_set_field: IngressSetField::Local,
            network_type: "L2Bridge",
            host_layer_default_deny: true,
            max_new_acls_per_request: Some(crate::conventions::DEFAULT_MAX_ACLS_PER_REQUEST),
            ipv6_sets_refused: true,
            missing_set: MissingSetQuirk::MatchesNothing,
            duplicate_ids_refused: true,
        };
        match self {
            SimMode::Ideal => SimQuirks {
                remove: RemoveQuirk::Exact,
                ingress_set_field: IngressSetField::Remote,
                network_type: "NAT",
                host_layer_default_deny: false,
                max_new_acls_per_request: None,
                ipv6_sets_refused: false,
                missing_set: MissingSetQuirk::Refused,
                duplicate_ids_refused: false,
            },
            SimMode::Ws2019 => SimQuirks {
                remove: RemoveQuirk::Loose,
                ..strict
            },
            SimMode::Ws2022 | SimMode::Ws2025 => strict,
            SimMode::Ws2022RemoteSets => SimQuirks {
                ingress_set_field: IngressSetField::Remote,
                ..strict
            },
        }
    }

    /// What the simulated HNS lets netpol program, with the ingress set convention netpol is
    /// configured with on such a node (the mode's own: a node that needs the other one is told
    /// so by `--hcn-ingress-set-field`).
    pub fn capabilities(self) -> Capabilities {
        let capabilities = Capabilities::of(self.version())
            .expect("every simulated HNS is supported")
            .with_ip_sets(true);
        Capabilities {
            ingress_set_field: self.quirks().ingress_set_field,
            ipv6_sets: !self.quirks().ipv6_sets_refused,
            ..capabilities
        }
    }
}

impl fmt::Display for SimMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for SimMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        SimMode::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = SimMode::ALL.iter().map(|m| m.name()).collect();
                format!("unknown simulator mode {s:?}; one of {}", names.join(", "))
            })
    }
}
