//! `netpol explain FILE FROM TO PROTO/PORT` (or `netpol explain -f PATH... FROM TO PROTO/PORT`):
//! the verdict of one flow, with the rule (or default) that decided its egress side and its
//! ingress side.

use std::io::{self, Write};
use std::path::PathBuf;

use netpol_engine::flow::decide_flow;
use netpol_engine::reference::Decision;
use netpol_engine::{IdentityId, Protocol};

use crate::decide::{decider, EngineArgs};
use crate::input::{self, ManifestArgs};
use crate::outcome::Outcome;
use crate::output::describe;
use crate::output::report::{write_json, FlowJson, TextOrJson};
use crate::scenario::{parse_port, parse_protocol, Endpoint};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// `[FILE] FROM TO PROTO/PORT`. FILE is a scenario file or a manifest file or folder; leave
    /// it out when `-f` names the manifests. FROM and TO are `namespace/pod` or an IP address;
    /// PROTO/PORT is e.g. `TCP/80`.
    #[arg(value_name = "[FILE] FROM TO PROTO/PORT", num_args = 3..=4, required = true)]
    pub positional: Vec<String>,
    #[command(flatten)]
    pub manifests: ManifestArgs,
    /// `text` or `json`.
    #[arg(long, short = 'o', value_enum, default_value_t)]
    pub output: TextOrJson,
    #[command(flatten)]
    pub engine: EngineArgs,
}

/// The positional arguments, read.
#[derive(Debug, PartialEq, Eq)]
struct Query {
    file: Option<PathBuf>,
    from: Endpoint,
    to: Endpoint,
    protocol: Protocol,
    port: u16,
}

/// Reads `[FILE] FROM TO PROTO/PORT`: the FILE is there exactly when no `-f` was given.
fn parse_query(positional: &[String], has_manifests: bool) -> Result<Query, String> {
    let (file, rest) = match (positional, has_manifests) {
        ([from, to, port], true) => (None, [from, to, port]),
        ([file, from, to, port], false) => (Some(PathBuf::from(file)), [from, to, port]),
        (_, true) => return Err("with -f, give FROM TO PROTO/PORT".into()),
        (_, false) => {
            return Err("give FILE FROM TO PROTO/PORT, or -f PATH with FROM TO PROTO/PORT".into())
        }
    };
    let [from, to, port] = rest;
    let (protocol, port) = parse_port_spec(port)?;
    Ok(Query {
        file,
        from: from.parse()?,
        to: to.parse()?,
        protocol,
        port,
    })
}

fn parse_port_spec(s: &str) -> Result<(Protocol, u16), String> {
    let (protocol, port) = s
        .split_once('/')
        .ok_or_else(|| format!("`{s}` is not PROTO/PORT, e.g. TCP/80"))?;
    let port = port
        .parse::<u32>()
        .map_err(|_| format!("`{port}` is not a port (1-65535)"))
        .and_then(parse_port)?;
    Ok((parse_protocol(protocol)?, port))
}

pub fn run(args: &Args, out: &mut dyn Write, err: &mut dyn Write) -> io::Result<Outcome> {
    let query = match parse_query(&args.positional, !args.manifests.filenames.is_empty()) {
        Ok(query) => query,
        Err(e) => {
            writeln!(err, "error: {e}")?;
            return Ok(Outcome::Invalid);
        }
    };
    let Some(input) = args.manifests.input(query.file.as_deref()) else {
        return Ok(Outcome::Invalid);
    };
    let Some(scenario) = input::load(&input, err)? else {
        return Ok(Outcome::Invalid);
    };
    let cluster = &scenario.cluster;
    let (src, dst) = match cluster.flow_identities(&query.from, &query.to) {
        Ok(ids) => ids,
        Err(e) => {
            writeln!(err, "error: {}: {e}", scenario.file.display())?;
            return Ok(Outcome::Invalid);
        }
    };
    let Some(oracle) = decider(args.engine, &scenario, err)? else {
        return Ok(Outcome::Invalid);
    };
    let (protocol, port) = (query.protocol, query.port);
    let decision = decide_flow(oracle.as_ref(), cluster.store(), src, dst, protocol, port);
    let name = |id: IdentityId| {
        cluster
            .store()
            .get(id)
            .map_or_else(|| id.to_string(), ToString::to_string)
    };
    if args.output == TextOrJson::Json {
        let mut flow = FlowJson::new(&query.from, &query.to, protocol, port, &decision);
        flow.source = Some(name(src));
        flow.destination = Some(name(dst));
        write_json(out, &flow)?;
        return Ok(Outcome::Success);
    }
    writeln!(
        out,
        "{} -> {} {protocol}/{port}: {}",
        query.from,
        query.to,
        describe::verdict_word(decision.allowed())
    )?;
    writeln!(out, "  source:      {}", name(src))?;
    writeln!(out, "  destination: {}", name(dst))?;
    let side = |d: &Option<Decision>, whose: &str, id: IdentityId| match d {
        Some(d) => describe::decision(d),
        None => format!("not evaluated: the {whose}, {}, is not a pod", name(id)),
    };
    writeln!(
        out,
        "  egress:      {}",
        side(&decision.egress, "source", src)
    )?;
    writeln!(
        out,
        "  ingress:     {}",
        side(&decision.ingress, "destination", dst)
    )?;
    Ok(Outcome::Success)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_specs() {
        assert_eq!(parse_port_spec("SCTP/81"), Ok((Protocol::Sctp, 81)));
        assert!(parse_port_spec("TCP").is_err());
        assert!(parse_port_spec("TCP/0").is_err());
        assert!(parse_port_spec("ICMP/1").is_err());
        assert!(parse_port_spec("TCP/65536").is_err());
    }

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn the_file_is_given_exactly_when_no_manifests_are() {
        let query = parse_query(&words("s.yaml x/a 10.0.0.1 UDP/53"), false).unwrap();
        assert_eq!(query.file, Some(PathBuf::from("s.yaml")));
        assert_eq!(query.to, "10.0.0.1".parse().unwrap());
        assert_eq!((query.protocol, query.port), (Protocol::Udp, 53));
        let query = parse_query(&words("x/a x/b TCP/80"), true).unwrap();
        assert_eq!(query.file, None);
        assert_eq!(
            parse_query(&words("x/a x/b TCP/80"), false).unwrap_err(),
            "give FILE FROM TO PROTO/PORT, or -f PATH with FROM TO PROTO/PORT"
        );
        assert_eq!(
            parse_query(&words("s.yaml x/a x/b TCP/80"), true).unwrap_err(),
            "with -f, give FROM TO PROTO/PORT"
        );
        assert!(parse_query(&words("s.yaml x/a nowhere TCP/80"), false).is_err());
    }
}
