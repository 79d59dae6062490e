//! CIDR peers: parsing, and exceptions that must lie strictly inside their prefix.

use ipnet::IpNet;
use netpol_engine::{AddressScope, CidrSelector};

use crate::error::{Diagnostics, FieldError, FieldPath};

/// Which spellings of an address block a field accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Notation {
    /// `10.0.0.0/8` only, as Kubernetes and the network-policy API require.
    Cidr,
    /// Also a bare address, meaning its host prefix, as Cilium accepts.
    CidrOrAddress,
}

/// Parses an address block. A prefix with host bits set (`10.1.2.3/16`) is accepted, as the API
/// server accepts it, but truncated with a warning since it rarely means what it says.
pub(crate) fn parse_cidr(
    text: &str,
    notation: Notation,
    path: &FieldPath,
    diags: &mut Diagnostics,
) -> Result<IpNet, FieldError> {
    let net = match text.parse::<IpNet>() {
        Ok(net) => net,
        Err(_) if notation == Notation::CidrOrAddress => match text.parse::<std::net::IpAddr>() {
            Ok(addr) => IpNet::from(addr),
            Err(_) => return Err(path.error(format!("invalid CIDR or address {text:?}"))),
        },
        Err(_) => return Err(path.error(format!("invalid CIDR {text:?}"))),
    };
    if net.trunc() != net {
        diags.warn(path.error(format!(
            "CIDR {text} has host bits set; it is read as {}",
            net.trunc()
        )));
    }
    Ok(net.trunc())
}

/// A CIDR peer with exceptions. Each exception must be of the same address family as the prefix
/// and strictly inside it.
pub(crate) fn cidr_selector(
    cidr: (&str, &FieldPath),
    except: (&[String], &FieldPath),
    notation: Notation,
    scope: AddressScope,
    diags: &mut Diagnostics,
) -> Result<CidrSelector, FieldError> {
    let net = parse_cidr(cidr.0, notation, cidr.1, diags)?;
    let mut excepts = Vec::with_capacity(except.0.len());
    for (i, text) in except.0.iter().enumerate() {
        let path = except.1.index(i);
        let ex = parse_cidr(text, notation, &path, diags)?;
        if !net.contains(&ex) || ex.prefix_len() <= net.prefix_len() {
            return Err(path.error(format!("except {ex} is not strictly inside cidr {net}")));
        }
        excepts.push(ex);
    }
    Ok(CidrSelector {
        net,
        except: excepts.into(),
        scope,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn selector(cidr: &str, except: &[&str]) -> (Result<CidrSelector, FieldError>, Diagnostics) {
        let mut diags = Diagnostics::default();
        let base = FieldPath::root("ipBlock");
        let except: Vec<String> = except.iter().map(|s| s.to_string()).collect();
        let result = cidr_selector(
            (cidr, &base.field("cidr")),
            (&except, &base.field("except")),
            Notation::Cidr,
            AddressScope::Any,
            &mut diags,
        );
        (result, diags)
    }

    #[test]
    fn valid_blocks_with_exceptions() {
        let (sel, diags) = selector("10.1.0.0/16", &["10.1.1.0/24"]);
        let sel = sel.unwrap();
        assert_eq!(sel.net, "10.1.0.0/16".parse::<IpNet>().unwrap());
        assert_eq!(
            Vec::from(sel.except),
            vec!["10.1.1.0/24".parse::<IpNet>().unwrap()]
        );
        assert!(diags.warnings.is_empty());
        let (sel, _) = selector("2001:db8::/32", &["2001:db8:1::/48"]);
        assert!(sel.is_ok());
    }

    #[test]
    fn invalid_cidr_is_an_error() {
        for bad in ["10.1.0.0/33", "banana", "10.1.0.0", ""] {
            let (sel, _) = selector(bad, &[]);
            let err = sel.unwrap_err();
            assert_eq!(err.field, "ipBlock.cidr");
            assert!(err.message.starts_with("invalid CIDR"), "{err}");
        }
    }

    #[test]
    fn except_must_be_strictly_inside() {
        for bad in ["10.2.0.0/24", "10.1.0.0/16", "10.0.0.0/8", "2001:db8::/64"] {
            let (sel, _) = selector("10.1.0.0/16", &["10.1.1.0/24", bad]);
            let err = sel.unwrap_err();
            assert_eq!(err.field, "ipBlock.except[1]", "{bad}");
            assert!(err.message.contains("not strictly inside"), "{err}");
        }
    }

    #[test]
    fn host_bits_are_truncated_with_a_warning() {
        let (sel, diags) = selector("10.1.2.3/16", &[]);
        assert_eq!(sel.unwrap().net, "10.1.0.0/16".parse::<IpNet>().unwrap());
        assert_eq!(diags.warnings.len(), 1);
        assert_eq!(diags.warnings[0].field, "ipBlock.cidr");
    }

    #[test]
    fn bare_addresses_only_where_allowed() {
        let mut diags = Diagnostics::default();
        let path = FieldPath::root("toCIDR").index(0);
        assert_eq!(
            parse_cidr("192.0.2.1", Notation::CidrOrAddress, &path, &mut diags).unwrap(),
            "192.0.2.1/32".parse::<IpNet>().unwrap()
        );
        assert!(parse_cidr("192.0.2.1", Notation::Cidr, &path, &mut diags).is_err());
    }
}
