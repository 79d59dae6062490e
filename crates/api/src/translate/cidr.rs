//! CIDR peers: parsing, and exceptions that must lie strictly inside their prefix.

use std::net::{IpAddr, Ipv6Addr};

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

/// Parses an address block strictly, as the API server does for new objects: the CEL `isCIDR()`
/// of the network-policy API and KEP-4858's validation of `ipBlock` both parse with Go's
/// `netip.ParsePrefix` and refuse an IPv4-mapped IPv6 address, so an IPv4 octet or a prefix
/// length with a leading zero (`010.0.0.0/8`, `10.0.0.0/08`), a zone (`fe80::%eth0/64`) and
/// `::ffff:10.0.0.0/104` are errors. A prefix with host bits set (`10.1.2.3/16`) is accepted,
/// as v0.2.0's `isCIDR()` and `ipBlock` accept it, but truncated with a warning since it rarely
/// means what it says.
///
/// `path` names the field, and is only built for an error or a warning: a policy may list
/// 50,000 CIDRs, and building each one's path took a tenth of such a policy's CPU (issue 33).
pub(crate) fn parse_cidr(
    text: &str,
    notation: Notation,
    path: impl FnOnce() -> FieldPath,
    diags: &mut Diagnostics,
) -> Result<IpNet, FieldError> {
    let (address, length) = match memchr::memchr(b'/', text.as_bytes()) {
        Some(slash) => (&text[..slash], Some(&text[slash + 1..])),
        None => (text, None),
    };
    if let Some(problem) = non_canonical_spelling(address, length) {
        return Err(path().error(format!("invalid CIDR {text:?}: {problem}")));
    }
    // std's address parser, not ipnet's: that one tries each form through boxed closures, and
    // was a tenth of a 50,000-CIDR policy's parse (issue 33). The spelling is checked above.
    let address = address.parse::<IpAddr>().ok();
    let net = match (address, length) {
        (Some(address), Some(length)) => length
            .parse::<u8>()
            .ok()
            .and_then(|length| IpNet::new(address, length).ok()),
        (Some(address), None) if notation == Notation::CidrOrAddress => Some(IpNet::from(address)),
        _ => None,
    };
    let Some(net) = net else {
        return Err(path().error(match notation {
            Notation::Cidr => format!("invalid CIDR {text:?}"),
            Notation::CidrOrAddress => format!("invalid CIDR or address {text:?}"),
        }));
    };
    if net.trunc() != net {
        diags.warn(path().error(format!(
            "CIDR {text} has host bits set; it is read as {}",
            net.trunc()
        )));
    }
    Ok(net.trunc())
}

/// What strict parsing refuses that a lax parser would read, of a CIDR's address and its
/// prefix length (after the `/`, if any); `None` for anything else (which the parser then
/// accepts or refuses on its own). The address is scanned once: a policy may list 50,000.
fn non_canonical_spelling(address: &str, length: Option<&str>) -> Option<&'static str> {
    if let Some(length) = length {
        if length.len() > 1 && length.starts_with('0') {
            return Some("the prefix length has a leading zero");
        }
        if !length.bytes().all(|b| b.is_ascii_digit()) {
            return Some("the prefix length is not a decimal number");
        }
    }
    let (mut colon, mut dot, mut zone, mut leading_zero) = (false, false, false, false);
    let bytes = address.as_bytes();
    for (i, b) in bytes.iter().enumerate() {
        match b {
            b':' => colon = true,
            b'.' => dot = true,
            b'%' => zone = true,
            // An octet (what follows the start or a dot) of two or more characters starting
            // with 0.
            b'0' if (i == 0 || bytes[i - 1] == b'.')
                && bytes.get(i + 1).is_some_and(|next| *next != b'.') =>
            {
                leading_zero = true
            }
            _ => {}
        }
    }
    if zone {
        return Some("a zone is not allowed in a CIDR");
    }
    if colon {
        return match address.parse::<Ipv6Addr>() {
            Ok(v6) if v6.to_ipv4_mapped().is_some() => {
                Some("an IPv4-mapped IPv6 address is not allowed; write the IPv4 CIDR")
            }
            _ => None,
        };
    }
    (dot && leading_zero).then_some("an IPv4 octet has a leading zero")
}

/// A CIDR peer with exceptions. Each exception must be of the same address family as the prefix
/// and strictly inside it.
pub(crate) fn cidr_selector(
    cidr: (&str, impl Fn() -> FieldPath),
    except: (&[String], impl Fn() -> FieldPath),
    notation: Notation,
    scope: AddressScope,
    diags: &mut Diagnostics,
) -> Result<CidrSelector, FieldError> {
    let net = parse_cidr(cidr.0, notation, &cidr.1, diags)?;
    let mut excepts = Vec::with_capacity(except.0.len());
    for (i, text) in except.0.iter().enumerate() {
        let path = || except.1().index(i);
        let ex = parse_cidr(text, notation, path, diags)?;
        if !net.contains(&ex) || ex.prefix_len() <= net.prefix_len() {
            return Err(path().error(format!("except {ex} is not strictly inside cidr {net}")));
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
            (cidr, || base.field("cidr")),
            (&except, || base.field("except")),
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
        for bad in [
            "10.1.0.0/33",
            "10.1.0.0/256",
            "::/129",
            "10.1.0.0/",
            "/16",
            "banana",
            "10.1.0.0",
            "",
        ] {
            let (sel, _) = selector(bad, &[]);
            let err = sel.unwrap_err();
            assert_eq!(err.field, "ipBlock.cidr");
            assert!(err.message.starts_with("invalid CIDR"), "{err}");
        }
    }

    #[test]
    fn strict_spelling_as_the_api_server() {
        let cases = [
            ("010.1.0.0/16", "leading zero"),
            ("10.1.0.0/016", "leading zero"),
            ("10.01.0.0/16", "leading zero"),
            ("10.1.0.00/16", "leading zero"),
            ("10.1.0.0%eth0/16", "zone"),
            ("10.1.0.0/+16", "not a decimal"),
            ("::ffff:10.1.0.0/112", "IPv4-mapped"),
            ("::ffff:a01:0/112", "IPv4-mapped"),
            ("fe80::%eth0/64", "zone"),
        ];
        for (bad, problem) in cases {
            let (sel, _) = selector(bad, &[]);
            let err = sel.unwrap_err();
            assert_eq!(err.field, "ipBlock.cidr", "{bad}");
            assert!(err.message.contains(problem), "{bad}: {err}");
        }
        let (sel, _) = selector("10.1.0.0/16", &["010.1.1.0/24"]);
        assert_eq!(sel.unwrap_err().field, "ipBlock.except[0]");
        // Leading zeros inside an IPv6 group are ordinary, as are /0 and an IPv4-compatible
        // spelling of a non-mapped IPv6 address.
        for good in [
            "2001:0db8::/32",
            "0.0.0.0/0",
            "10.10.0.0/16",
            "100.0.0.0/8",
            "10.0.0.0/8",
            "::/0",
            "64:ff9b::10.0.0.0/120",
        ] {
            let (sel, _) = selector(good, &[]);
            assert!(sel.is_ok(), "{good}");
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
            parse_cidr(
                "192.0.2.1",
                Notation::CidrOrAddress,
                || path.clone(),
                &mut diags
            )
            .unwrap(),
            "192.0.2.1/32".parse::<IpNet>().unwrap()
        );
        assert!(parse_cidr("192.0.2.1", Notation::Cidr, || path.clone(), &mut diags).is_err());
    }
}
