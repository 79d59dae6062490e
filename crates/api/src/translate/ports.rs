//! Protocols, port numbers, ranges and named ports, validated as the Kubernetes API server does.

use netpol_engine::Protocol;

use crate::error::{FieldError, FieldPath};

/// A Kubernetes `Protocol` field: absent means TCP; only TCP, UDP and SCTP exist, spelled in
/// capitals.
pub(crate) fn k8s_protocol(value: Option<&str>, path: &FieldPath) -> Result<Protocol, FieldError> {
    match value {
        None | Some("TCP") => Ok(Protocol::Tcp),
        Some("UDP") => Ok(Protocol::Udp),
        Some("SCTP") => Ok(Protocol::Sctp),
        Some(other) => Err(path.error(format!(
            "unknown protocol {other:?} (expected TCP, UDP or SCTP)"
        ))),
    }
}

/// A port number in 1..=65535.
pub(crate) fn port_number(value: i64, path: &FieldPath) -> Result<u16, FieldError> {
    u16::try_from(value)
        .ok()
        .filter(|p| *p != 0)
        .ok_or_else(|| path.error(format!("port {value} is outside 1-65535")))
}

/// An inclusive range given by two sibling fields of `parent`, e.g. `port`/`endPort` or
/// `start`/`end`. Each bound must be a valid port and the end must not be below the start.
pub(crate) fn port_range(
    parent: &FieldPath,
    (start_name, start): (&str, i64),
    (end_name, end): (&str, i64),
) -> Result<(u16, u16), FieldError> {
    let start_port = port_number(start, &parent.field(start_name))?;
    let end_port = port_number(end, &parent.field(end_name))?;
    if end_port < start_port {
        return Err(parent.field(end_name).error(format!(
            "{end_name} {end_port} is below {start_name} {start_port}"
        )));
    }
    Ok((start_port, end_port))
}

/// A container port name (IANA_SVC_NAME): 1-15 lowercase letters, digits and dashes, with at
/// least one letter, no leading, trailing or doubled dash.
pub(crate) fn named_port(name: &str, path: &FieldPath) -> Result<String, FieldError> {
    let valid_chars = name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    let valid = (1..=15).contains(&name.len())
        && valid_chars
        && name.bytes().any(|b| b.is_ascii_lowercase())
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--");
    if valid {
        Ok(name.to_owned())
    } else {
        Err(path.error(format!(
            "invalid port name {name:?}: a port name has 1-15 lowercase letters, digits and \
             single inner dashes, with at least one letter"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path() -> FieldPath {
        FieldPath::root("spec").field("ports").index(0)
    }

    #[test]
    fn protocol_defaults_to_tcp_and_is_case_sensitive() {
        assert_eq!(k8s_protocol(None, &path()).unwrap(), Protocol::Tcp);
        assert_eq!(k8s_protocol(Some("SCTP"), &path()).unwrap(), Protocol::Sctp);
        assert_eq!(k8s_protocol(Some("UDP"), &path()).unwrap(), Protocol::Udp);
        let err = k8s_protocol(Some("XYZ"), &path()).unwrap_err();
        assert!(err.message.contains("unknown protocol \"XYZ\""));
        assert!(k8s_protocol(Some("tcp"), &path()).is_err());
        assert!(k8s_protocol(Some("ICMP"), &path()).is_err());
    }

    #[test]
    fn port_numbers_are_1_to_65535() {
        assert_eq!(port_number(1, &path()).unwrap(), 1);
        assert_eq!(port_number(65535, &path()).unwrap(), 65535);
        for bad in [0, -1, 65536, 70000] {
            let err = port_number(bad, &path()).unwrap_err();
            assert_eq!(err.message, format!("port {bad} is outside 1-65535"));
        }
    }

    #[test]
    fn ranges_must_not_be_reversed() {
        assert_eq!(
            port_range(&path(), ("port", 80), ("endPort", 80)).unwrap(),
            (80, 80)
        );
        let err = port_range(&path(), ("port", 80), ("endPort", 70)).unwrap_err();
        assert_eq!(err.field, "spec.ports[0].endPort");
        assert_eq!(err.message, "endPort 70 is below port 80");
        let err = port_range(&path(), ("port", 80), ("endPort", 70000)).unwrap_err();
        assert_eq!(err.field, "spec.ports[0].endPort");
    }

    #[test]
    fn port_names_follow_iana_svc_name() {
        for good in ["http", "serve-80-tcp", "a", "h2c", "abcdefghijklmno"] {
            assert!(named_port(good, &path()).is_ok(), "{good}");
        }
        for bad in [
            "",
            "80",
            "HTTP",
            "-http",
            "http-",
            "ht--tp",
            "abcdefghijklmnop",
            "ht_tp",
        ] {
            assert!(named_port(bad, &path()).is_err(), "{bad}");
        }
    }
}
