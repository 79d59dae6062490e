//! `netpol acls FILE [--endpoint ns/pod]`: the HCN requests the agent would send for a scenario's
//! pods, with the rule count of each endpoint, without touching any host.

use std::io::{self, Write};
use std::path::PathBuf;

use netpol_hcn::compile_acls;
use netpol_hcn::naive::naive_rule_counts;

use crate::decide::load_engine;
use crate::input::load_scenario;
use crate::outcome::Outcome;
use crate::scenario::ReadFlags;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A scenario file (its `expect` section is ignored).
    pub file: PathBuf,
    /// Only this endpoint (`namespace/pod`); every pod otherwise.
    #[arg(long)]
    pub endpoint: Option<String>,
}

pub fn run(args: &Args, out: &mut dyn Write, err: &mut dyn Write) -> io::Result<Outcome> {
    let Some(scenario) = load_scenario(&args.file, ReadFlags::default(), err)? else {
        return Ok(Outcome::Invalid);
    };
    let engine = load_engine(&scenario.cluster);
    let mut printed = 0;
    for (key, map) in engine.endpoints() {
        if args.endpoint.as_deref().is_some_and(|wanted| wanted != key) {
            continue;
        }
        let compiled = match compile_acls(map, engine.identities()) {
            Ok(compiled) => compiled,
            Err(e) => {
                writeln!(err, "error: {key}: {e}")?;
                return Ok(Outcome::Invalid);
            }
        };
        writeln!(
            out,
            "# {key}: {} rules ({} ingress, {} egress) from {} MapState entries; the naive expansion would need {}",
            compiled.count.total(),
            compiled.count.ingress,
            compiled.count.egress,
            map.len(),
            naive_rule_counts(map).total(),
        )?;
        for warning in &compiled.warnings {
            writeln!(out, "# warning: {warning}")?;
        }
        writeln!(out, "{}", compiled.update_request_json())?;
        printed += 1;
    }
    if printed == 0 {
        if let Some(wanted) = &args.endpoint {
            writeln!(
                err,
                "error: {}: no pod {wanted} (expected namespace/pod)",
                args.file.display()
            )?;
            return Ok(Outcome::Invalid);
        }
    }
    Ok(Outcome::Success)
}
