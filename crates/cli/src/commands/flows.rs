//! `netpol flows --node ADDR`: follows a running agent's drop log from a terminal. The agent
//! serves its last logged decisions on `/flows` (`netpol_agent::flows`); this polls for those
//! after the last one printed and prints each as a line: when, the verdict, whose rules decided
//! (ingress or egress), source and destination (pod or address), protocol and port, and the
//! deciding rule in `netpol explain`'s words.

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use netpol_agent::flows::{FlowRecord, FlowsAnswer};

use crate::Outcome;

/// The agent's default HTTP port (`netpol agent --listen`).
const DEFAULT_PORT: u16 = 9590;

/// How long one request to the agent may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The agent's HTTP address (its --listen): HOST:PORT, or HOST for port 9590.
    #[arg(long, value_name = "ADDR")]
    pub node: String,
    /// Print the decisions the agent holds now and exit, instead of following.
    #[arg(long)]
    pub once: bool,
    /// Print each decision as a JSON object on a line of its own.
    #[arg(long)]
    pub json: bool,
    /// Milliseconds between polls while following.
    #[arg(long, value_name = "MS", default_value_t = 500)]
    pub poll: u64,
}

pub fn run(args: &Args, out: &mut dyn Write, err: &mut dyn Write) -> io::Result<Outcome> {
    let mut since = 0;
    let mut told_unavailable = false;
    loop {
        let answer = match fetch(&args.node, since) {
            Ok(answer) => answer,
            Err(error) => {
                writeln!(err, "netpol flows: {}: {error}", args.node)?;
                return Ok(Outcome::Invalid);
            }
        };
        if let Some(reason) = &answer.unavailable {
            if !told_unavailable {
                writeln!(err, "netpol flows: {reason}")?;
                told_unavailable = true;
            }
        }
        // A restarted agent numbers from 1 again.
        if answer.records.first().is_some_and(|r| r.seq <= since) {
            since = 0;
        }
        let after = since;
        for record in answer.records.iter().filter(|r| r.seq > after) {
            if args.json {
                writeln!(out, "{}", serde_json::to_string(record)?)?;
            } else {
                writeln!(out, "{}", line(record))?;
            }
            since = record.seq;
        }
        out.flush()?;
        if args.once {
            return Ok(Outcome::Success);
        }
        std::thread::sleep(Duration::from_millis(args.poll.max(50)));
    }
}

/// One decision as a line: `2026-11-26T20:30:01.123Z deny ingress 10.244.2.10 -> shop/web (10.244.1.10) TCP/81: ...`.
pub fn line(record: &FlowRecord) -> String {
    format!("{} {record}", utc(record.time_ms))
}

/// `ADDR`'s `/flows?since=SINCE`, over plain HTTP/1.0.
fn fetch(address: &str, since: u64) -> Result<FlowsAnswer, String> {
    let host = address.trim_start_matches("http://").trim_end_matches('/');
    let target = if host
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
        && !host.ends_with(']')
    {
        host.to_string()
    } else {
        format!("{host}:{DEFAULT_PORT}")
    };
    let socket = target
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve: {e}"))?
        .next()
        .ok_or("no address")?;
    let mut stream =
        TcpStream::connect_timeout(&socket, REQUEST_TIMEOUT).map_err(|e| e.to_string())?;
    stream
        .set_read_timeout(Some(REQUEST_TIMEOUT))
        .map_err(|e| e.to_string())?;
    write!(
        stream,
        "GET /flows?since={since} HTTP/1.0\r\nHost: {target}\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    let mut response = Vec::new();
    stream
        .read_to_end(&mut response)
        .map_err(|e| e.to_string())?;
    let response = String::from_utf8_lossy(&response);
    let (head, body) = response
        .split_once("\r\n\r\n")
        .ok_or("the agent's answer is not HTTP")?;
    let status = head.lines().next().unwrap_or_default();
    if status.split(' ').nth(1) != Some("200") {
        return Err(format!("the agent answered {status}: {}", body.trim()));
    }
    serde_json::from_str(body).map_err(|e| format!("reading the agent's answer: {e}"))
}

/// Milliseconds since the Unix epoch as an RFC 3339 UTC time.
fn utc(ms: u64) -> String {
    let seconds = ms / 1000;
    let (days, of_day) = (seconds / 86_400, seconds % 86_400);
    // Days to a civil date (Howard Hinnant's algorithm), the epoch moved to 0000-03-01.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        of_day / 3600,
        of_day % 3600 / 60,
        of_day % 60,
        ms % 1000
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_rfc3339_utc() {
        assert_eq!(utc(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(utc(1_795_713_001_123), "2026-11-26T17:10:01.123Z");
        assert_eq!(utc(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }
}
