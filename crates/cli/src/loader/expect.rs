//! Expectations: the flows a scenario asserts, read from `matrix` and `flows` items.

use std::fmt;
use std::net::IpAddr;
use std::path::Path;
use std::str::FromStr;

use netpol_engine::Protocol;

use super::document::{ExpectationDocument, FlowDocument, PortField};
use super::error::{LoadError, LoadErrors};

/// A pod named `namespace/name`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PodRef {
    pub namespace: String,
    pub name: String,
}

impl fmt::Display for PodRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// One side of a flow as a scenario names it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Endpoint {
    /// `ns/pod`.
    Pod(PodRef),
    /// A bare IP address: the pod or node that has it, or else an address outside the cluster.
    Address(IpAddr),
}

impl FromStr for Endpoint {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if let Ok(ip) = s.parse::<IpAddr>() {
            return Ok(Endpoint::Address(ip));
        }
        match s.split_once('/') {
            Some((namespace, name)) if is_object_name(namespace) && is_object_name(name) => {
                Ok(Endpoint::Pod(PodRef {
                    namespace: namespace.to_owned(),
                    name: name.to_owned(),
                }))
            }
            _ => Err(format!(
                "`{s}` is neither `namespace/pod` nor an IP address"
            )),
        }
    }
}

/// Kubernetes object names are DNS subdomains; this only rules out what cannot be one, so that a
/// CIDR or a stray path is reported instead of looked up as a pod.
fn is_object_name(s: &str) -> bool {
    let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '.');
    let looks_like_an_address =
        s.contains('.') && s.chars().all(|c| c.is_ascii_digit() || c == '.');
    !s.is_empty() && s.chars().all(allowed) && !s.starts_with(['-', '.']) && !looks_like_an_address
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Pod(pod) => write!(f, "{pod}"),
            Endpoint::Address(ip) => write!(f, "{ip}"),
        }
    }
}

/// What a scenario expects of a flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expected {
    Allow,
    Deny,
}

impl Expected {
    pub fn allowed(self) -> bool {
        self == Expected::Allow
    }
}

impl fmt::Display for Expected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Expected::Allow => "allow",
            Expected::Deny => "deny",
        })
    }
}

/// One flow and its expected verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowExpectation {
    pub from: Endpoint,
    pub to: Endpoint,
    pub protocol: Protocol,
    pub port: u16,
    pub expected: Expected,
    /// Where the expectation is written, e.g. `expect[0].matrix` or `expect[1].flows[2]`.
    pub field: String,
}

/// Parses every `expect` item, reporting every malformed one.
pub fn parse_expectations(
    file: &Path,
    items: Vec<ExpectationDocument>,
) -> Result<Vec<FlowExpectation>, LoadErrors> {
    let mut flows = Vec::new();
    let mut errors = Vec::new();
    for (i, item) in items.into_iter().enumerate() {
        let field = format!("expect[{i}]");
        match parse_item(&field, item) {
            Ok(parsed) => flows.extend(parsed),
            Err(problems) => errors.extend(
                problems
                    .into_iter()
                    .map(|(field, message)| LoadError::expectation(file, field, message)),
            ),
        }
    }
    if errors.is_empty() {
        Ok(flows)
    } else {
        Err(LoadErrors(errors))
    }
}

/// A problem: the field at fault and what is wrong with it.
type Problem = (String, String);

fn parse_item(
    field: &str,
    item: ExpectationDocument,
) -> Result<Vec<FlowExpectation>, Vec<Problem>> {
    if item.matrix.is_none() && item.flows.is_none() {
        return Err(vec![(
            field.to_owned(),
            "an item needs a `matrix` or `flows`".into(),
        )]);
    }
    let mut problems = Vec::new();
    // The item's protocol and port: its matrix's, and the default of its flows. `Err` when given
    // but invalid (and already reported), so that it is not also reported as missing.
    let protocol = item
        .protocol
        .map(|p| parse_protocol(&p))
        .transpose()
        .map_err(|m| problems.push((format!("{field}.protocol"), m)));
    let port = item
        .port
        .map(|p| parse_port_field(&p))
        .transpose()
        .map_err(|m| problems.push((format!("{field}.port"), m)));

    let mut flows = Vec::new();
    if let Some(matrix) = item.matrix {
        match (protocol, port) {
            (Ok(Some(protocol)), Ok(Some(port))) => {
                match parse_matrix(&matrix, protocol, port, &format!("{field}.matrix")) {
                    Ok(parsed) => flows.extend(parsed),
                    Err(found) => problems.extend(found),
                }
            }
            (Ok(None), _) => problems.push((field.to_owned(), "a matrix needs a protocol".into())),
            (_, Ok(None)) => problems.push((field.to_owned(), "a matrix needs a port".into())),
            _ => {}
        }
    }
    for (i, flow) in item.flows.into_iter().flatten().enumerate() {
        let defaults = (protocol.ok().flatten(), port.ok().flatten());
        match parse_flow(&format!("{field}.flows[{i}]"), flow, defaults) {
            Ok(flow) => flows.push(flow),
            Err(problem) => problems.push(problem),
        }
    }
    if problems.is_empty() {
        Ok(flows)
    } else {
        Err(problems)
    }
}

/// Parses one flow. A flow without its own protocol or port takes its item's, if it has one.
fn parse_flow(
    field: &str,
    flow: FlowDocument,
    (item_protocol, item_port): (Option<Protocol>, Option<u16>),
) -> Result<FlowExpectation, Problem> {
    let at = |name: &str| format!("{field}.{name}");
    let protocol = match flow.protocol {
        Some(p) => parse_protocol(&p).map_err(|m| (at("protocol"), m))?,
        None => {
            item_protocol.ok_or_else(|| (field.to_owned(), "a flow needs a protocol".into()))?
        }
    };
    let port = match flow.port {
        Some(p) => parse_port_field(&p).map_err(|m| (at("port"), m))?,
        None => item_port.ok_or_else(|| (field.to_owned(), "a flow needs a port".into()))?,
    };
    Ok(FlowExpectation {
        from: flow.from.parse().map_err(|m| (at("from"), m))?,
        to: flow.to.parse().map_err(|m| (at("to"), m))?,
        protocol,
        port,
        expected: match flow.verdict.as_str() {
            "allow" => Expected::Allow,
            "deny" => Expected::Deny,
            other => return Err((at("verdict"), format!("`{other}` is not `allow` or `deny`"))),
        },
        field: field.to_owned(),
    })
}

/// The protocols a flow of a scenario can use: those with ports.
pub fn parse_protocol(name: &str) -> Result<Protocol, String> {
    match Protocol::parse(name) {
        Some(protocol) if protocol.has_ports() => Ok(protocol),
        _ => Err(format!("`{name}` is not TCP, UDP or SCTP")),
    }
}

/// A destination port: 1 to 65535.
pub fn parse_port(port: u32) -> Result<u16, String> {
    u16::try_from(port)
        .ok()
        .filter(|p| *p != 0)
        .ok_or_else(|| format!("{port} is not a port (1-65535)"))
}

/// A port as a scenario writes it: a number from 1 to 65535, never a name.
fn parse_port_field(port: &PortField) -> Result<u16, String> {
    match port {
        PortField::Number(n) => u32::try_from(*n)
            .map_err(|_| format!("{n} is not a port (1-65535)"))
            .and_then(parse_port),
        PortField::Name(name) => Err(format!(
            "`{name}` is not a port number: scenarios give ports by number (1-65535), not by \
             name (`netpol explain` takes names, e.g. TCP/{name})"
        )),
    }
}

/// Parses a matrix: a header row of destinations, then one row per source with one cell per
/// destination: `.` allowed, `X` denied, `-` not checked.
fn parse_matrix(
    text: &str,
    protocol: Protocol,
    port: u16,
    field: &str,
) -> Result<Vec<FlowExpectation>, Vec<Problem>> {
    let problem = |line: usize, message: String| (format!("{field} line {line}"), message);
    let mut lines = text
        .lines()
        .enumerate()
        .map(|(i, line)| (i + 1, line.split_whitespace().collect::<Vec<_>>()))
        .filter(|(_, cells)| !cells.is_empty());
    let Some((header_line, header)) = lines.next() else {
        return Err(vec![(field.to_owned(), "the matrix is empty".into())]);
    };
    if header.len() < 2 {
        return Err(vec![problem(
            header_line,
            "the header row names no destination".into(),
        )]);
    }
    let mut problems = Vec::new();
    let destinations: Vec<Option<Endpoint>> = header[1..]
        .iter()
        .map(|cell| {
            cell.parse()
                .map_err(|m| problems.push(problem(header_line, m)))
                .ok()
        })
        .collect();
    let mut flows = Vec::new();
    let mut rows = 0;
    for (line, row) in lines {
        rows += 1;
        let source = match row[0].parse::<Endpoint>() {
            Ok(source) => source,
            Err(m) => {
                problems.push(problem(line, m));
                continue;
            }
        };
        if row.len() != destinations.len() + 1 {
            problems.push(problem(
                line,
                format!(
                    "row {source} has {} cells for {} destinations",
                    row.len() - 1,
                    destinations.len()
                ),
            ));
            continue;
        }
        for (cell, destination) in row[1..].iter().zip(&destinations) {
            let Some(destination) = destination else {
                continue;
            };
            let expected = match *cell {
                "." => Expected::Allow,
                "X" => Expected::Deny,
                "-" => continue,
                other => {
                    problems.push(problem(
                        line,
                        format!("cell {source} -> {destination} is `{other}`, not `.`, `X` or `-`"),
                    ));
                    continue;
                }
            };
            flows.push(FlowExpectation {
                from: source.clone(),
                to: destination.clone(),
                protocol,
                port,
                expected,
                field: field.to_owned(),
            });
        }
    }
    if rows == 0 {
        problems.push((field.to_owned(), "the matrix has no source rows".into()));
    }
    if problems.is_empty() {
        Ok(flows)
    } else {
        Err(problems)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(s: &str) -> Endpoint {
        s.parse().unwrap()
    }

    fn matrix_item(matrix: &str) -> ExpectationDocument {
        ExpectationDocument {
            protocol: Some("SCTP".into()),
            port: Some(PortField::Number(81)),
            matrix: Some(matrix.into()),
            flows: None,
        }
    }

    fn errors(items: Vec<ExpectationDocument>) -> Vec<String> {
        parse_expectations(Path::new("s.yaml"), items)
            .unwrap_err()
            .0
            .iter()
            .map(|e| e.to_string())
            .collect()
    }

    #[test]
    fn endpoints_are_pods_or_addresses() {
        assert_eq!(
            pod("x/a"),
            Endpoint::Pod(PodRef {
                namespace: "x".into(),
                name: "a".into()
            })
        );
        assert_eq!(
            pod("fd00::1"),
            Endpoint::Address("fd00::1".parse().unwrap())
        );
        assert!("10.0.0.0/8".parse::<Endpoint>().is_err());
        assert!("x".parse::<Endpoint>().is_err());
        assert!("x/".parse::<Endpoint>().is_err());
        assert!("X/a".parse::<Endpoint>().is_err());
    }

    #[test]
    fn matrix_cells_become_flows_and_dashes_are_skipped() {
        let flows = parse_expectations(
            Path::new("s.yaml"),
            vec![matrix_item(
                "-    x/a  y/b  10.0.0.1\n\n  x/a  -    X    .\n  y/b  .    -    -\n",
            )],
        )
        .unwrap();
        let summary: Vec<String> = flows
            .iter()
            .map(|f| {
                format!(
                    "{} {} {}/{} {}",
                    f.from, f.to, f.protocol, f.port, f.expected
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                "x/a y/b SCTP/81 deny",
                "x/a 10.0.0.1 SCTP/81 allow",
                "y/b x/a SCTP/81 allow"
            ]
        );
        assert!(flows.iter().all(|f| f.field == "expect[0].matrix"));
    }

    #[test]
    fn malformed_matrices_name_the_line_and_cell() {
        let errs = errors(vec![matrix_item("- x/a y/b\nx/a - x\ny/b .\n")]);
        assert_eq!(
            errs,
            [
                "s.yaml: expect[0].matrix line 2: cell x/a -> y/b is `x`, not `.`, `X` or `-`",
                "s.yaml: expect[0].matrix line 3: row y/b has 1 cells for 2 destinations",
            ]
        );
    }

    /// A pod reaching its own address is a flow like any other (always allowed: hairpin traffic
    /// is not subject to policy), so a diagonal cell other than `-` is checked.
    #[test]
    fn a_diagonal_cell_is_a_checked_flow() {
        let flows = parse_expectations(
            Path::new("s.yaml"),
            vec![matrix_item("- x/a y/b\nx/a . X\ny/b - X\n")],
        )
        .unwrap();
        let words: Vec<String> = flows
            .iter()
            .map(|f| format!("{} {} {}", f.from, f.to, f.expected))
            .collect();
        assert_eq!(words, ["x/a x/a allow", "x/a y/b deny", "y/b y/b deny"]);
    }

    #[test]
    fn matrix_needs_a_port_protocol_and_valid_values() {
        let mut no_port = matrix_item("- x/a\n");
        no_port.port = None;
        let mut bad_port = matrix_item("- x/a\n");
        bad_port.port = Some(PortField::Number(70000));
        let mut icmp = matrix_item("- x/a\n");
        icmp.protocol = Some("ICMP".into());
        let no_destinations = matrix_item("-\nx/a\n");
        let no_rows = matrix_item("- x/a\n");
        let empty = ExpectationDocument {
            protocol: None,
            port: None,
            matrix: None,
            flows: None,
        };
        assert_eq!(
            errors(vec![
                no_port,
                bad_port,
                icmp,
                no_destinations,
                no_rows,
                empty
            ]),
            [
                "s.yaml: expect[0]: a matrix needs a port",
                "s.yaml: expect[1].port: 70000 is not a port (1-65535)",
                "s.yaml: expect[2].protocol: `ICMP` is not TCP, UDP or SCTP",
                "s.yaml: expect[3].matrix line 1: the header row names no destination",
                "s.yaml: expect[4].matrix: the matrix has no source rows",
                "s.yaml: expect[5]: an item needs a `matrix` or `flows`",
            ]
        );
    }

    #[test]
    fn flows_are_checked_field_by_field() {
        let flow = |to: &str, port: u32, verdict: &str| FlowDocument {
            from: "x/a".into(),
            to: to.into(),
            protocol: Some("UDP".into()),
            port: Some(PortField::Number(port.into())),
            verdict: verdict.into(),
        };
        let item = ExpectationDocument {
            protocol: None,
            port: None,
            matrix: None,
            flows: Some(vec![
                flow("192.0.2.1", 53, "allow"),
                flow("192.0.2.1", 0, "allow"),
                flow("192.0.2.1", 53, "Allow"),
                flow("nowhere", 53, "deny"),
            ]),
        };
        assert_eq!(
            errors(vec![item]),
            [
                "s.yaml: expect[0].flows[1].port: 0 is not a port (1-65535)",
                "s.yaml: expect[0].flows[2].verdict: `Allow` is not `allow` or `deny`",
                "s.yaml: expect[0].flows[3].to: `nowhere` is neither `namespace/pod` nor an IP address",
            ]
        );
    }

    fn flow(protocol: Option<&str>, port: Option<u32>) -> FlowDocument {
        FlowDocument {
            from: "x/a".into(),
            to: "x/b".into(),
            protocol: protocol.map(Into::into),
            port: port.map(|p| PortField::Number(p.into())),
            verdict: "deny".into(),
        }
    }

    #[test]
    fn flows_take_a_missing_protocol_and_port_from_their_item() {
        let item = ExpectationDocument {
            protocol: Some("UDP".into()),
            port: Some(PortField::Number(53)),
            matrix: Some("- x/b\nx/a X\n".into()),
            flows: Some(vec![flow(None, None), flow(Some("TCP"), Some(80))]),
        };
        let parsed = parse_expectations(Path::new("s.yaml"), vec![item]).unwrap();
        let summary: Vec<(Protocol, u16, &str)> = parsed
            .iter()
            .map(|f| (f.protocol, f.port, f.field.as_str()))
            .collect();
        assert_eq!(
            summary,
            [
                (Protocol::Udp, 53, "expect[0].matrix"),
                (Protocol::Udp, 53, "expect[0].flows[0]"),
                (Protocol::Tcp, 80, "expect[0].flows[1]"),
            ]
        );
    }

    #[test]
    fn a_flow_without_protocol_or_port_anywhere_is_an_error() {
        let item = ExpectationDocument {
            protocol: None,
            port: Some(PortField::Number(80)),
            matrix: None,
            flows: Some(vec![flow(None, None)]),
        };
        let errors = parse_expectations(Path::new("s.yaml"), vec![item]).unwrap_err();
        assert_eq!(
            errors.to_string(),
            "s.yaml: expect[0].flows[0]: a flow needs a protocol"
        );
    }
}
