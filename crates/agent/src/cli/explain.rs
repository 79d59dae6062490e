//! `netpol explain FILE FROM TO PROTO/PORT`: the verdict of one flow, with the rule (or default)
//! that decided its egress side and its ingress side.

use std::io::{self, Write};
use std::path::PathBuf;

use netpol_engine::flow::decide_flow;
use netpol_engine::reference::Decision;
use netpol_engine::{IdentityId, Protocol};

use super::describe;
use super::engine::EngineArgs;
use super::{decider, load_scenario, Outcome};
use crate::scenario::{parse_port, parse_protocol, Endpoint};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The scenario file.
    pub file: PathBuf,
    /// The source: `namespace/pod` or an IP address.
    pub from: Endpoint,
    /// The destination: `namespace/pod` or an IP address.
    pub to: Endpoint,
    /// The protocol and destination port, e.g. `TCP/80`.
    #[arg(value_name = "PROTO/PORT", value_parser = parse_port_spec)]
    pub port: (Protocol, u16),
    #[command(flatten)]
    pub engine: EngineArgs,
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
    let Some(scenario) = load_scenario(&args.file, err)? else {
        return Ok(Outcome::Invalid);
    };
    let cluster = &scenario.cluster;
    let (src, dst) = match cluster.flow_identities(&args.from, &args.to) {
        Ok(ids) => ids,
        Err(e) => {
            writeln!(err, "error: {}: {e}", args.file.display())?;
            return Ok(Outcome::Invalid);
        }
    };
    let Some(oracle) = decider(args.engine, &scenario, err)? else {
        return Ok(Outcome::Invalid);
    };
    let (protocol, port) = args.port;
    let decision = decide_flow(oracle.as_ref(), cluster.store(), src, dst, protocol, port);
    let name = |id: IdentityId| {
        cluster
            .store()
            .get(id)
            .map_or_else(|| id.to_string(), ToString::to_string)
    };
    writeln!(
        out,
        "{} -> {} {protocol}/{port}: {}",
        args.from,
        args.to,
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
}
