//! The drop log as the agent keeps it: the last decisions the datapath logged, each naming the
//! policy rule that decided (in `netpol explain`'s words), served on `/flows` and written as
//! structured log lines (target `netpol::flows`).
//!
//! On nftables the kernel logs the first packet of each denied connection through NFLOG under
//! a rate limit for the node (`netpol_nft::droplog`); [`follow_drop_log`] reads them. HCN ACLs
//! cannot log: there the log stays empty and says why.

use std::collections::VecDeque;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use netpol_engine::Protocol;
use netpol_nft::counters::RuleBook;
use serde::{Deserialize, Serialize};

/// How many decisions `/flows` keeps.
pub const FLOWS_KEPT: usize = 1000;

/// One logged decision.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowRecord {
    /// Increasing from 1: `/flows?since=N` returns the records after N.
    pub seq: u64,
    /// Milliseconds since the Unix epoch, when the agent read it.
    pub time_ms: u64,
    /// The local pod (`namespace/name`) holding the address, or the address.
    pub source: String,
    pub destination: String,
    /// `TCP`, `UDP`, `SCTP`, `ICMP`, `ICMPv6`, or the protocol's number.
    pub protocol: String,
    /// The destination port, for protocols with ports.
    pub port: Option<u16>,
    /// `ingress` or `egress`: whose rules decided.
    pub direction: String,
    /// `deny` (or `would-deny`).
    pub verdict: String,
    /// The deciding policy rule: `NetworkPolicy shop/web rule ingress[0]`.
    pub policy_rule: String,
    /// The reason in `explain`'s words.
    pub reason: String,
}

impl std::fmt::Display for FlowRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} {} -> {} {}",
            self.verdict, self.direction, self.source, self.destination, self.protocol
        )?;
        if let Some(port) = self.port {
            write!(f, "/{port}")?;
        }
        write!(f, ": {}", self.reason)
    }
}

/// What `/flows` answers.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowsAnswer {
    pub records: Vec<FlowRecord>,
    /// Why the datapath's decisions are not logged, where they are not.
    pub unavailable: Option<String>,
    /// Log messages the kernel dropped because the agent read too slowly (`ENOBUFS`), and
    /// packets logged that no rule of the table programmed last explains.
    pub lost: u64,
}

#[derive(Debug, Default)]
struct Inner {
    next: u64,
    records: VecDeque<FlowRecord>,
    unavailable: Option<String>,
    lost: u64,
}

/// The last [`FLOWS_KEPT`] decisions.
#[derive(Debug)]
pub struct FlowLog {
    inner: Mutex<Inner>,
}

impl Default for FlowLog {
    fn default() -> Self {
        FlowLog {
            inner: Mutex::new(Inner {
                unavailable: Some("this datapath does not log its decisions".into()),
                ..Inner::default()
            }),
        }
    }
}

impl FlowLog {
    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keeps `record` (its `seq` is set here), forgetting the oldest beyond [`FLOWS_KEPT`].
    pub fn push(&self, mut record: FlowRecord) -> FlowRecord {
        let mut inner = self.inner();
        inner.next += 1;
        record.seq = inner.next;
        if inner.records.len() == FLOWS_KEPT {
            inner.records.pop_front();
        }
        inner.records.push_back(record.clone());
        record
    }

    /// Records why decisions are not logged (None: they are).
    pub fn set_unavailable(&self, reason: Option<String>) {
        self.inner().unavailable = reason;
    }

    pub fn count_lost(&self, n: u64) {
        self.inner().lost += n;
    }

    /// The records after `since`.
    pub fn since(&self, since: u64) -> FlowsAnswer {
        let inner = self.inner();
        FlowsAnswer {
            records: inner
                .records
                .iter()
                .filter(|r| r.seq > since)
                .cloned()
                .collect(),
            unavailable: inner.unavailable.clone(),
            lost: inner.lost,
        }
    }
}

/// The record of a packet the kernel logged under prefix id `id` with `verdict`, named through
/// `book`; None if the book knows no such rule.
pub fn record(
    book: &RuleBook,
    id: &str,
    headers: Option<&netpol_nft::nflog::PacketHeaders>,
    at: SystemTime,
) -> Option<FlowRecord> {
    let rule = book.logged(id)?;
    let name = |address: IpAddr| {
        book.endpoint_of(address)
            .map_or_else(|| address.to_string(), |k| format!("{k} ({address})"))
    };
    let (source, destination, protocol, port) = match headers {
        Some(h) => (
            name(h.source),
            name(h.destination),
            protocol_name(h.protocol),
            h.ports.map(|(_, destination)| destination),
        ),
        None => Default::default(),
    };
    Some(FlowRecord {
        seq: 0,
        time_ms: at
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        source,
        destination,
        protocol,
        port,
        direction: rule.labels.direction.to_string(),
        verdict: rule.labels.verdict.to_string(),
        policy_rule: rule.labels.policy_rule(),
        reason: rule.reason.to_string(),
    })
}

/// A protocol number in the words policies use.
fn protocol_name(number: u8) -> String {
    Protocol::ALL
        .into_iter()
        .find(|p| p.number() == number)
        .map_or_else(|| number.to_string(), |p| p.to_string())
}

/// Reads the drop log of this network namespace's kernel into `log` until the process ends,
/// naming each packet's rule through `book`. Binding the log group fails where another process
/// holds it or the kernel has no NFLOG: the agent then enforces as before and `/flows` says why.
#[cfg(target_os = "linux")]
pub fn follow_drop_log(
    log: std::sync::Arc<FlowLog>,
    book: netpol_nft::counters::SharedRuleBook,
    group: u16,
) -> std::io::Result<()> {
    use netpol_nft::droplog::parse_prefix;
    use netpol_nft::nflog::NflogSocket;
    let mut socket = NflogSocket::bind(group, std::time::Duration::from_secs(1))?;
    log.set_unavailable(None);
    std::thread::Builder::new()
        .name("drop-log".into())
        .spawn(move || loop {
            let packets = match socket.receive() {
                Ok(packets) => packets,
                Err(error) if netpol_nft::nflog::is_overrun(&error) => {
                    log.count_lost(1);
                    continue;
                }
                Err(error) => {
                    tracing::error!(%error, "reading the drop log failed; no more decisions are logged");
                    log.set_unavailable(Some(format!("reading the drop log failed: {error}")));
                    return;
                }
            };
            let book = book.get();
            for packet in packets {
                let Some((_, id)) = parse_prefix(&packet.prefix) else {
                    continue;
                };
                match record(&book, id, packet.headers.as_ref(), SystemTime::now()) {
                    Some(record) => {
                        let record = log.push(record);
                        tracing::info!(
                            target: "netpol::flows",
                            verdict = %record.verdict,
                            direction = %record.direction,
                            source = %record.source,
                            destination = %record.destination,
                            protocol = %record.protocol,
                            port = record.port,
                            policy_rule = %record.policy_rule,
                            reason = %record.reason,
                            "datapath decision"
                        );
                    }
                    None => log.count_lost(1),
                }
            }
        })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(n: u16) -> FlowRecord {
        FlowRecord {
            seq: 0,
            time_ms: 0,
            source: "a".into(),
            destination: "b".into(),
            protocol: "TCP".into(),
            port: Some(n),
            direction: "ingress".into(),
            verdict: "deny".into(),
            policy_rule: "x".into(),
            reason: "y".into(),
        }
    }

    #[test]
    fn the_log_keeps_the_last_records_and_answers_what_came_after_a_sequence_number() {
        let log = FlowLog::default();
        assert!(log.since(0).unavailable.is_some());
        for n in 0..(FLOWS_KEPT as u16 + 5) {
            log.push(record(n));
        }
        let all = log.since(0);
        assert_eq!(all.records.len(), FLOWS_KEPT);
        assert_eq!(all.records[0].seq, 6);
        let last = all.records.last().unwrap().seq;
        let after = log.since(last - 2);
        assert_eq!(after.records.len(), 2);
        assert_eq!(after.records[1].port, Some(FLOWS_KEPT as u16 + 4));
        assert_eq!(protocol_name(6), "TCP");
        assert_eq!(protocol_name(47), "47");
    }
}
