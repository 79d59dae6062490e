//! Where the drop log goes and how fast (the agent's `--nflog-group`, `--drop-log-rate`): a leaf
//! of its own, since the table model ([`crate::ruleset`]) carries it and [`crate::droplog`]
//! renders it.

/// The netlink log group drop-log packets are sent to by default (one per node: the agent
/// binds it).
pub const LOG_GROUP: u16 = 7741;

/// The default rate of the drop log: log lines a second for the node (and the burst).
pub const LOG_RATE: u32 = 100;

/// What the named limit objects of the drop log are called, before their rate.
const LOG_LIMIT: &str = "drop_log";

/// Where the drop log goes and how fast: the agent's `--nflog-group` and `--drop-log-rate`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DropLog {
    /// The netlink log group.
    pub group: u16,
    /// At most this many log lines a second for the node, after a burst of as many; at least 1.
    pub rate: u32,
}

impl Default for DropLog {
    fn default() -> Self {
        DropLog {
            group: LOG_GROUP,
            rate: LOG_RATE,
        }
    }
}

impl DropLog {
    /// The named limit object every log chain shares. *Why the rate is in the name:* declaring
    /// a limit that exists leaves it as it is, so an agent restarted with another rate declares
    /// a new object (and its log chains, which name it, are new chains).
    pub fn limit_name(&self) -> String {
        format!("{LOG_LIMIT}_{}", self.rate)
    }
}
