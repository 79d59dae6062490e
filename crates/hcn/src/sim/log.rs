//! The simulator's record of calls: what kind, on which endpoint, with which request, within
//! bounds, and a count of every call ever made.

use std::collections::VecDeque;

/// Which HCN call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CallKind {
    Enumerate,
    Query,
    Modify,
    /// `HcnQueryNetworkProperties`.
    QueryNetwork,
    /// `HcnModifyNetwork`.
    ModifyNetwork,
}

/// One recorded call, successful or not.
#[derive(Clone, Debug, PartialEq)]
pub enum Call {
    Enumerate,
    Query { endpoint: String },
    Modify { endpoint: String, request: String },
    QueryNetwork,
    ModifyNetwork { request: String },
}

impl Call {
    pub fn kind(&self) -> CallKind {
        match self {
            Call::Enumerate => CallKind::Enumerate,
            Call::Query { .. } => CallKind::Query,
            Call::Modify { .. } => CallKind::Modify,
            Call::QueryNetwork => CallKind::QueryNetwork,
            Call::ModifyNetwork { .. } => CallKind::ModifyNetwork,
        }
    }

    pub fn endpoint(&self) -> Option<&str> {
        match self {
            Call::Enumerate | Call::QueryNetwork | Call::ModifyNetwork { .. } => None,
            Call::Query { endpoint } | Call::Modify { endpoint, .. } => Some(endpoint),
        }
    }
}

/// The log of calls: the most recent ones in full, within a bound on their number and on the
/// bytes of their requests, and a count of every call ever made. A long-running agent on the
/// simulator makes calls forever; its memory must not grow with them.
#[derive(Debug)]
pub(super) struct CallLog {
    pub(super) recent: VecDeque<Call>,
    /// Bytes of the modify requests held in `recent`.
    bytes: usize,
    max_calls: usize,
    max_bytes: usize,
    pub(super) counts: CallCounts,
}

/// How many calls of each kind were made, and how many the log no longer holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CallCounts {
    pub enumerate: u64,
    pub query: u64,
    pub modify: u64,
    pub network_query: u64,
    pub network_modify: u64,
    /// Calls dropped from the log to keep it within its bounds.
    pub forgotten: u64,
}

/// The log's default bounds: room for every call of a test or a `--once` run on a large node,
/// and a few MB at most in a long run.
pub const DEFAULT_LOG_CALLS: usize = 100_000;
pub const DEFAULT_LOG_BYTES: usize = 16 << 20;

fn request_bytes(call: &Call) -> usize {
    match call {
        Call::Modify { request, .. } | Call::ModifyNetwork { request } => request.len(),
        Call::Enumerate | Call::Query { .. } | Call::QueryNetwork => 0,
    }
}

impl CallLog {
    pub(super) fn new(max_calls: usize, max_bytes: usize) -> CallLog {
        CallLog {
            recent: VecDeque::new(),
            bytes: 0,
            max_calls: max_calls.max(1),
            max_bytes,
            counts: CallCounts::default(),
        }
    }

    pub(super) fn push(&mut self, call: Call) {
        match call.kind() {
            CallKind::Enumerate => self.counts.enumerate += 1,
            CallKind::Query => self.counts.query += 1,
            CallKind::Modify => self.counts.modify += 1,
            CallKind::QueryNetwork => self.counts.network_query += 1,
            CallKind::ModifyNetwork => self.counts.network_modify += 1,
        }
        self.bytes += request_bytes(&call);
        self.recent.push_back(call);
        while self.recent.len() > self.max_calls
            || (self.bytes > self.max_bytes && self.recent.len() > 1)
        {
            if let Some(old) = self.recent.pop_front() {
                self.bytes -= request_bytes(&old);
                self.counts.forgotten += 1;
            }
        }
    }

    pub(super) fn take(&mut self) -> Vec<Call> {
        self.bytes = 0;
        self.recent.drain(..).collect()
    }
}
