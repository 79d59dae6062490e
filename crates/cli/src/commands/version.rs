//! `netpol version [--output json]`: what this binary is, for a bug report or to check which
//! build a node runs: the version (Cargo.toml's, bumped as docs/operations.md says), the commit
//! it was built from (`unknown` when built from a tarball without `.git`), the target triple and
//! the build day. The values are set at build time by `build.rs`.

use std::io::{self, Write};

use serde::Serialize;

use crate::outcome::Outcome;
use crate::output::report::TextOrJson;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// `text` (one fact a line) or `json`.
    #[arg(long, short = 'o', value_enum, default_value_t)]
    pub output: TextOrJson,
}

/// The build facts of this binary.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BuildInfo {
    pub version: &'static str,
    pub commit: &'static str,
    pub target: &'static str,
    pub build_date: &'static str,
}

/// This binary's build facts.
pub const BUILD: BuildInfo = BuildInfo {
    version: env!("CARGO_PKG_VERSION"),
    commit: env!("NETPOL_GIT_COMMIT"),
    target: env!("NETPOL_TARGET"),
    build_date: env!("NETPOL_BUILD_DATE"),
};

pub fn run(args: &Args, out: &mut dyn Write) -> io::Result<Outcome> {
    match args.output {
        TextOrJson::Text => write!(
            out,
            "netpol {}\ncommit: {}\ntarget: {}\nbuilt: {}\n",
            BUILD.version, BUILD.commit, BUILD.target, BUILD.build_date
        )?,
        TextOrJson::Json => writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&BUILD).expect("build facts serialize")
        )?,
    }
    Ok(Outcome::Success)
}
