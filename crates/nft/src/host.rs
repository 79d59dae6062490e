//! The node's own kernel: the `nft` command on `PATH`, as the agent's DaemonSet runs it with
//! `hostNetwork` and `CAP_NET_ADMIN`.

use std::io::{self, Write};
use std::process::{Command, Stdio};

use crate::programmer::{chains_via, NftBackend};

/// The kernel of the network namespace the agent runs in (the node's).
#[derive(Clone, Copy, Debug, Default)]
pub struct HostNft;

impl NftBackend for HostNft {
    fn apply(&self, script: &str) -> io::Result<()> {
        run_piped(Command::new("nft"), "nft", &["-f", "-"], script).map(drop)
    }

    fn chains(&self) -> io::Result<Option<Vec<String>>> {
        chains_via(|args| run_piped(Command::new("nft"), "nft", args, ""))
    }
}

/// Runs `command args...` with `stdin`, returning its output or failing with its stderr.
pub fn run_piped(
    mut command: Command,
    program: &str,
    args: &[&str],
    stdin: &str,
) -> io::Result<String> {
    let mut child = command
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| io::Error::new(e.kind(), format!("{program}: {e}")))?;
    if let Some(mut input) = child.stdin.take() {
        input.write_all(stdin.as_bytes())?;
    }
    let output = child.wait_with_output()?;
    if !output.status.success() {
        return Err(io::Error::other(format!(
            "{program} {}: {}: {}",
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}
