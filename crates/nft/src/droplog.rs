//! The drop log in the table: every drop rule counts its packets, then jumps to the log chain of
//! its policy rule, which logs the packet to a netlink log group (NFLOG, [`LOG_GROUP`] unless
//! the agent's `--nflog-group` says otherwise) under one rate limit for the whole node
//! ([`DropLog::limit_name`], `--drop-log-rate`) and drops it.
//!
//! *Why a chain of its own:* `limit` is a match in nftables: over the rate, a rule holding it
//! does not match, and its `drop` would not run. In a chain of its own the limit only decides
//! whether the packet is logged (the first rule), and the second rule drops it whatever the
//! rate; the counter, in the endpoint chain's rule, counts every packet. A log chain is shared by
//! every endpoint one policy rule applies to, so there are as many as the policies have deny
//! rules, not as many as endpoints.
//!
//! A would-deny (a deny rule of an audit chain, `crate::ruleset::EndpointChains`) goes to a log
//! chain of its own (`goto`, its prefix's verdict is `would-deny`), which logs under the same
//! limit and ends without a verdict: the packet returns to the dispatch chain, which goes on
//! as if the enforced chain had returned.
//!
//! The dispatch chain accepts established and related packets before any endpoint chain, so
//! what a drop rule sees is the first packet of a connection (and its retransmissions): the log
//! names connections denied, not every packet of a flood. The prefix carries the labels' id
//! ([`RuleLabels::id`]), which the agent maps back to the policy rule: names may be longer than
//! the 127 bytes a prefix holds.

use crate::labels::{RuleLabels, WOULD_DENY};
pub use crate::log_settings::{DropLog, LOG_GROUP, LOG_RATE};
use crate::naming::hash;

/// What log chains' names start with.
pub const LOG_CHAIN_PREFIX: &str = "log_";

/// The first word of every drop-log prefix.
const PREFIX_WORD: &str = "netpol";

/// The name and lines of the log chain of rules with `labels`: it logs, then drops (a
/// would-deny's passes).
pub fn log_chain(labels: &RuleLabels, log: &DropLog) -> (String, Vec<String>) {
    let mut lines = vec![format!(
        "limit name \"{}\" log group {} prefix \"{PREFIX_WORD} {} {}\"",
        log.limit_name(),
        log.group,
        labels.verdict,
        labels.id()
    )];
    // A would-deny passes: the chain ends and the packet returns where the audit chain was
    // entered from.
    if labels.verdict != WOULD_DENY {
        lines.push("drop".to_string());
    }
    let name = format!(
        "{LOG_CHAIN_PREFIX}{}",
        hash(lines.iter().map(String::as_str))
    );
    (name, lines)
}

/// The declaration of the rate limit inside a table block (`add` semantics: declaring it again
/// leaves it as it is).
pub fn limit_declaration(log: &DropLog) -> String {
    format!(
        "\tlimit {} {{ rate {rate}/second burst {rate} packets; }}\n",
        log.limit_name(),
        rate = log.rate
    )
}

/// Whether chain `name` is a log chain.
pub fn is_log_chain(name: &str) -> bool {
    name.starts_with(LOG_CHAIN_PREFIX)
}

/// (verdict, labels id) of a drop-log prefix netpol wrote; None for any other prefix.
pub fn parse_prefix(prefix: &str) -> Option<(&str, &str)> {
    let mut words = prefix.trim_end_matches('\0').split(' ');
    if words.next()? != PREFIX_WORD {
        return None;
    }
    let verdict = words.next()?;
    let id = words.next()?;
    words.next().is_none().then_some((verdict, id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_chain_logs_under_the_node_limit_then_drops_and_its_prefix_reads_back() {
        let labels = RuleLabels {
            kind: "NetworkPolicy".into(),
            namespace: "shop".into(),
            policy: "web".into(),
            rule: "default-deny".into(),
            direction: "ingress",
            verdict: "deny",
        };
        let (name, lines) = log_chain(&labels, &DropLog::default());
        assert!(is_log_chain(&name));
        assert_eq!(
            lines[0],
            format!(
                "limit name \"drop_log_100\" log group 7741 prefix \"netpol deny {}\"",
                labels.id()
            )
        );
        assert_eq!(
            limit_declaration(&DropLog::default()),
            "\tlimit drop_log_100 { rate 100/second burst 100 packets; }\n"
        );
        // Another group and rate: another limit object, another chain.
        let other = DropLog { group: 12, rate: 5 };
        let (other_name, other_lines) = log_chain(&labels, &other);
        assert_ne!(other_name, name);
        assert!(other_lines[0].starts_with("limit name \"drop_log_5\" log group 12 "));
        assert_eq!(lines[1], "drop");
        // A would-deny logs under the same limit and ends without a verdict: it passes.
        let would_deny = RuleLabels {
            verdict: WOULD_DENY,
            ..labels.clone()
        };
        let (audit_name, audit_lines) = log_chain(&would_deny, &DropLog::default());
        assert_ne!(audit_name, name);
        assert_eq!(
            audit_lines,
            [format!(
                "limit name \"drop_log_100\" log group 7741 prefix \"netpol would-deny {}\"",
                would_deny.id()
            )]
        );
        let prefix = format!("netpol deny {}\0", labels.id());
        assert_eq!(parse_prefix(&prefix), Some(("deny", labels.id().as_str())));
        assert_eq!(parse_prefix("other deny x"), None);
    }
}
