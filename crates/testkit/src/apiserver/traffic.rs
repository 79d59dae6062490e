//! What clients cost the stand-in: requests by sort and bytes of response bodies, counted as
//! they are served, for the benchmarks of an agent's start and for the tests of its idle cost.

use std::sync::atomic::{AtomicU64, Ordering};

/// The live counters.
#[derive(Debug, Default)]
pub(crate) struct Traffic {
    pub lists: AtomicU64,
    pub watches: AtomicU64,
    /// Reads of one object (`GET` of a name).
    pub gets: AtomicU64,
    /// Creates, updates and reads of the writable kinds (Leases, Events).
    pub writable: AtomicU64,
    pub list_bytes: AtomicU64,
    pub watch_bytes: AtomicU64,
    pub other_bytes: AtomicU64,
}

impl Traffic {
    pub fn count(counter: &AtomicU64, by: usize) {
        counter.fetch_add(by as u64, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> TrafficCount {
        let read = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        TrafficCount {
            lists: read(&self.lists),
            watches: read(&self.watches),
            gets: read(&self.gets),
            writable: read(&self.writable),
            list_bytes: read(&self.list_bytes),
            watch_bytes: read(&self.watch_bytes),
            other_bytes: read(&self.other_bytes),
        }
    }
}

/// The counters at one moment; [`TrafficCount::since`] gives what happened between two.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TrafficCount {
    /// List requests (each page counts).
    pub lists: u64,
    /// Watch requests (each re-watch counts).
    pub watches: u64,
    /// Reads of one object.
    pub gets: u64,
    /// Requests to Leases and Events.
    pub writable: u64,
    /// Response bytes of lists, of watch streams, and of everything else.
    pub list_bytes: u64,
    pub watch_bytes: u64,
    pub other_bytes: u64,
}

impl TrafficCount {
    pub fn requests(&self) -> u64 {
        self.lists + self.watches + self.gets + self.writable
    }

    /// Every request that is not a watch: what an idle agent should not make.
    pub fn non_watch_requests(&self) -> u64 {
        self.lists + self.gets + self.writable
    }

    pub fn bytes(&self) -> u64 {
        self.list_bytes + self.watch_bytes + self.other_bytes
    }

    /// What was counted after `earlier`.
    pub fn since(&self, earlier: &TrafficCount) -> TrafficCount {
        TrafficCount {
            lists: self.lists - earlier.lists,
            watches: self.watches - earlier.watches,
            gets: self.gets - earlier.gets,
            writable: self.writable - earlier.writable,
            list_bytes: self.list_bytes - earlier.list_bytes,
            watch_bytes: self.watch_bytes - earlier.watch_bytes,
            other_bytes: self.other_bytes - earlier.other_bytes,
        }
    }
}
