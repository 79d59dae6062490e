//! HNS versions and the features they gate.

use std::fmt;

use crate::conventions::IngressSetField;

/// An HNS version, as the globals query reports it.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Deserialize, serde::Serialize,
)]
#[serde(rename_all = "PascalCase")]
pub struct HnsVersion {
    pub major: u32,
    pub minor: u32,
}

impl HnsVersion {
    pub const fn new(major: u32, minor: u32) -> Self {
        HnsVersion { major, minor }
    }

    /// ACL address lists and port ranges.
    pub const ACL_LISTS_AND_RANGES: HnsVersion = HnsVersion::new(7, 2);
    /// The V2 (Hcn*) API netpol uses.
    pub const V2_API: HnsVersion = HnsVersion::new(9, 2);
    /// IPv4 and IPv6 on one endpoint.
    pub const DUAL_STACK: HnsVersion = HnsVersion::new(11, 10);
    /// Network IP sets (`SetPolicy`), as hcsshim's `SetPolicyVersion` gates them.
    pub const SET_POLICY: HnsVersion = HnsVersion::new(13, 0);
}

impl fmt::Display for HnsVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// An HNS too old for netpol.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("HNS {found} lacks {feature}, which needs HNS {needed} or later")]
pub struct Unsupported {
    pub found: HnsVersion,
    pub feature: &'static str,
    pub needed: HnsVersion,
}

/// Whether ACLs name network IP sets (`--hcn-ip-sets`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum IpSetMode {
    /// Where the HNS has them ([`HnsVersion::SET_POLICY`]) and the client makes network calls;
    /// addresses inlined in every ACL otherwise.
    #[default]
    Auto,
    /// Required: the agent refuses to start on an HNS without them.
    On,
    /// Never: addresses inlined in every ACL.
    Off,
}

impl IpSetMode {
    /// Whether `capabilities` (what the datapath would use under this mode) satisfy it: `On`
    /// fails, saying why, where IP sets are not available.
    pub fn check(self, capabilities: &Capabilities) -> Result<(), String> {
        if self == IpSetMode::On && !capabilities.ip_sets {
            return Err(format!(
                "--hcn-ip-sets on: HNS {} has no network IP sets (SetPolicy, HNS {} or later), or \
                 this client makes no network calls; use --hcn-ip-sets auto to inline addresses \
                 where they are missing",
                capabilities.version,
                HnsVersion::SET_POLICY
            ));
        }
        Ok(())
    }
}

/// What an HNS version lets netpol program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capabilities {
    pub version: HnsVersion,
    pub dual_stack: bool,
    /// ACLs name network IP sets rather than inlining addresses: the HNS has `SetPolicy`
    /// ([`HnsVersion::SET_POLICY`]), the client makes network calls, and [`IpSetMode`] is not
    /// `Off`. Without it every address is inlined.
    pub ip_sets: bool,
    /// Which field of an ingress ACL names the peer's set on this HNS. No HNS version is known
    /// to differ from Azure NPM's Windows Server 2022 finding ([`IngressSetField::Local`]);
    /// `--hcn-ingress-set-field` overrides it where a node shows otherwise.
    pub ingress_set_field: IngressSetField,
    /// Whether sets may hold IPv6 members. No HNS version is known to take them (neither Azure
    /// NPM nor Calico ever sends one), so rules of IPv6 sets inline their addresses.
    pub ipv6_sets: bool,
}

impl Capabilities {
    /// The capabilities of `version`, or why netpol cannot run on it at all: it needs the V2 API
    /// and ACL lists and ranges. Missing dual stack only leaves IPv6 rules out.
    pub fn of(version: HnsVersion) -> Result<Capabilities, Unsupported> {
        for (feature, needed) in [
            (
                "ACL address lists and port ranges",
                HnsVersion::ACL_LISTS_AND_RANGES,
            ),
            ("the V2 HCN API", HnsVersion::V2_API),
        ] {
            if version < needed {
                return Err(Unsupported {
                    found: version,
                    feature,
                    needed,
                });
            }
        }
        let dual_stack = version >= HnsVersion::DUAL_STACK;
        if !dual_stack {
            tracing::warn!(
                hns_version = %version,
                "HNS {version} lacks dual stack (needs {}): IPv6 ACL rules will not be programmed",
                HnsVersion::DUAL_STACK
            );
        }
        Ok(Capabilities {
            version,
            dual_stack,
            ip_sets: false,
            ingress_set_field: IngressSetField::default(),
            ipv6_sets: false,
        })
    }

    /// Whether the HNS version has network IP sets (whether netpol uses them is
    /// [`Capabilities::ip_sets`]).
    pub fn set_policy_supported(&self) -> bool {
        self.version >= HnsVersion::SET_POLICY
    }

    /// These capabilities with IP sets used when `wanted` and the HNS version has them.
    pub fn with_ip_sets(self, wanted: bool) -> Capabilities {
        Capabilities {
            ip_sets: wanted && self.set_policy_supported(),
            ..self
        }
    }

    /// How ACLs name sets on this HNS.
    pub fn set_conventions(&self) -> crate::conventions::SetConventions {
        crate::conventions::SetConventions {
            ingress_field: self.ingress_set_field,
            ipv6_sets: self.ipv6_sets,
        }
    }

    /// Compile options that respect these capabilities.
    pub fn compile_options(&self) -> netpol_datapath::CompileOptions {
        netpol_datapath::CompileOptions {
            dual_stack: self.dual_stack,
            ..netpol_datapath::CompileOptions::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_gate_features() {
        assert!(Capabilities::of(HnsVersion::new(15, 0)).unwrap().dual_stack);
        assert!(!Capabilities::of(HnsVersion::new(10, 4)).unwrap().dual_stack);
        assert!(
            Capabilities::of(HnsVersion::new(11, 10))
                .unwrap()
                .dual_stack
        );
        let too_old = Capabilities::of(HnsVersion::new(9, 1)).unwrap_err();
        assert_eq!(too_old.needed, HnsVersion::V2_API);
        assert_eq!(
            too_old.to_string(),
            "HNS 9.1 lacks the V2 HCN API, which needs HNS 9.2 or later"
        );
        let v12 = Capabilities::of(HnsVersion::new(12, 9)).unwrap();
        assert!(!v12.ip_sets && !v12.with_ip_sets(true).ip_sets);
        let v13 = Capabilities::of(HnsVersion::new(13, 0)).unwrap();
        assert!(!v13.ip_sets, "IP sets are opt-in");
        assert!(v13.with_ip_sets(true).ip_sets);
        assert!(!v13.with_ip_sets(false).ip_sets);
        assert!(IpSetMode::On.check(&v13.with_ip_sets(true)).is_ok());
        let refused = IpSetMode::On.check(&v12.with_ip_sets(true)).unwrap_err();
        assert!(
            refused.contains("HNS 12.9") && refused.contains("13.0"),
            "{refused}"
        );
        assert!(IpSetMode::Auto.check(&v12).is_ok());
        assert_eq!(
            Capabilities::of(HnsVersion::new(7, 1)).unwrap_err().needed,
            HnsVersion::ACL_LISTS_AND_RANGES
        );
    }
}
