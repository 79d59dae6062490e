//! `netpol cleanup --datapath hcn|nftables`: removes from this node everything netpol
//! programmed, and nothing any other owner did. On Linux that is table `inet netpol`
//! ([`netpol_nft::cleanup`]); on Windows, the ACLs whose `Id` starts with `netpol-` on every HCN
//! endpoint and then the network IP sets whose `Id` starts with `netpol-set-`
//! ([`netpol_hcn::cleanup`]). Run it after the agent is gone from the node (docs/operations.md):
//! an agent still running would program its rules again.
//!
//! Exit status: 0 nothing of netpol's is left, 1 something could not be removed (each named), 2
//! the datapath cannot be reached here.

use std::io::{self, Write};

use netpol_hcn::cleanup::CleanupReport;

use crate::outcome::Outcome;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum CleanupDatapath {
    /// This Windows host's HCN: netpol's ACLs on every endpoint, then netpol's IP sets.
    Hcn,
    /// This Linux host's kernel (the network namespace this runs in): table `inet netpol`.
    Nftables,
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Which datapath to take netpol's rules off.
    #[arg(long, value_enum)]
    pub datapath: CleanupDatapath,
}

pub fn run(args: &Args, out: &mut dyn Write, err: &mut dyn Write) -> io::Result<Outcome> {
    match args.datapath {
        CleanupDatapath::Nftables => nftables(out, err),
        CleanupDatapath::Hcn => hcn(out, err),
    }
}

#[cfg(target_os = "linux")]
fn nftables(out: &mut dyn Write, err: &mut dyn Write) -> io::Result<Outcome> {
    let backend = netpol_nft::host::node_backend();
    match netpol_nft::cleanup::remove_table(backend.as_ref()) {
        Ok(true) => writeln!(out, "deleted table {}", netpol_nft::TABLE)?,
        Ok(false) => writeln!(out, "no table {}: nothing to remove", netpol_nft::TABLE)?,
        Err(e) => {
            writeln!(err, "error: deleting table {}: {e}", netpol_nft::TABLE)?;
            return Ok(Outcome::Invalid);
        }
    }
    Ok(Outcome::Success)
}

#[cfg(not(target_os = "linux"))]
fn nftables(_: &mut dyn Write, err: &mut dyn Write) -> io::Result<Outcome> {
    writeln!(err, "error: the nftables datapath exists only on Linux")?;
    Ok(Outcome::Invalid)
}

#[cfg(windows)]
fn hcn(out: &mut dyn Write, err: &mut dyn Write) -> io::Result<Outcome> {
    let client = match netpol_hcn::windows::HcnClient::connect() {
        Ok(client) => client,
        Err(e) => {
            writeln!(err, "error: connecting to HNS failed: {e}")?;
            return Ok(Outcome::Invalid);
        }
    };
    let datapath = netpol_hcn::HcnDatapath::new(client);
    // Stale ACLs go by an Update of each list, as the agent's default: `Remove` is unverified.
    match netpol_hcn::cleanup::remove_netpol_state(&datapath, netpol_hcn::WriteOptions::default()) {
        Ok(report) => write_report(&report, out),
        Err(e) => {
            writeln!(err, "error: {e}")?;
            Ok(Outcome::Invalid)
        }
    }
}

#[cfg(not(windows))]
fn hcn(_: &mut dyn Write, err: &mut dyn Write) -> io::Result<Outcome> {
    writeln!(
        err,
        "error: the HCN datapath exists only on Windows (run netpol.exe cleanup --datapath hcn on the node)"
    )?;
    Ok(Outcome::Invalid)
}

/// What an HCN cleanup did, one line per failure and a summary; 0 when nothing is left.
pub fn write_report(report: &CleanupReport, out: &mut dyn Write) -> io::Result<Outcome> {
    for (endpoint, why) in &report.failures {
        writeln!(out, "endpoint {endpoint}: not cleaned: {why}")?;
    }
    if report.sets_kept > 0 {
        writeln!(
            out,
            "{} netpol IP sets kept: an endpoint that could not be cleaned may still name them; run cleanup again",
            report.sets_kept
        )?;
    }
    writeln!(
        out,
        "{} netpol ACLs removed from {} of {} endpoints, {} netpol IP sets removed; left alone: {} policies and {} IP sets of other owners",
        report.acls_removed,
        report.endpoints_cleaned,
        report.endpoints,
        report.sets_removed,
        report.other_policies_kept,
        report.other_sets_kept
    )?;
    Ok(if report.complete() {
        Outcome::Success
    } else {
        Outcome::Mismatch
    })
}
