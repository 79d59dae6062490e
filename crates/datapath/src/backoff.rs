//! Retry delays after failures, shared by every datapath's programmer.

use std::time::Duration;

/// Retry delays: `initial`, doubling per consecutive failure, at most `max`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    pub initial: Duration,
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            initial: Duration::from_millis(500),
            max: Duration::from_secs(60),
        }
    }
}

impl Backoff {
    /// The delay after `failures` consecutive failures (1 for the first).
    pub fn delay(&self, failures: u32) -> Duration {
        let factor = 1u32
            .checked_shl(failures.saturating_sub(1))
            .unwrap_or(u32::MAX);
        self.initial.saturating_mul(factor).min(self.max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let b = Backoff {
            initial: Duration::from_secs(1),
            max: Duration::from_secs(10),
        };
        assert_eq!(b.delay(1), Duration::from_secs(1));
        assert_eq!(b.delay(2), Duration::from_secs(2));
        assert_eq!(b.delay(4), Duration::from_secs(8));
        assert_eq!(b.delay(5), Duration::from_secs(10));
        assert_eq!(b.delay(100), Duration::from_secs(10));
    }
}
