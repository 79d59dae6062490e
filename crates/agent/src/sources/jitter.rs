//! Per-agent jitter, so that agents started together (a DaemonSet rollout, a restarted API
//! server) do not retry and re-watch together: each follower draws its own stretch of every
//! delay and its own watch time-out.

use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

/// A small random stream (xorshift), seeded differently in every process and follower.
#[derive(Debug)]
pub struct Jitter {
    state: u64,
}

impl Default for Jitter {
    fn default() -> Self {
        // `RandomState` is seeded from the OS per process and varied per instance: enough to
        // spread agents, and no dependency for it.
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u64(0x9e37_79b9_7f4a_7c15);
        Jitter {
            state: hasher.finish() | 1,
        }
    }
}

impl Jitter {
    /// A fraction in [0, 1).
    fn fraction(&mut self) -> f64 {
        let mut x = self.state;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.state = x;
        // The top 53 bits make an f64 in [0, 1) exactly.
        (x >> 11) as f64 / (1u64 << 53) as f64
    }

    /// `delay` stretched by up to a quarter: never shorter than asked, so that a backoff still
    /// waits at least its delay.
    pub fn stretch(&mut self, delay: Duration) -> Duration {
        delay.mul_f64(1.0 + self.fraction() / 4.0)
    }

    /// A watch time-out between three quarters of `seconds` and `seconds`.
    pub fn watch_timeout(&mut self, seconds: u32) -> u32 {
        let low = f64::from(seconds) * 0.75;
        let drawn = low + (f64::from(seconds) - low) * self.fraction();
        (drawn.round() as u32).clamp(1, seconds.max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stretches_stay_in_bounds_and_vary() {
        let mut jitter = Jitter::default();
        let base = Duration::from_millis(1000);
        let drawn: Vec<Duration> = (0..200).map(|_| jitter.stretch(base)).collect();
        assert!(drawn.iter().all(|d| *d >= base && *d < base.mul_f64(1.25)));
        assert!(drawn.iter().any(|d| *d != drawn[0]), "no variation");
        let timeouts: Vec<u32> = (0..200).map(|_| jitter.watch_timeout(290)).collect();
        assert!(
            timeouts.iter().all(|t| (217..=290).contains(t)),
            "{timeouts:?}"
        );
        assert!(timeouts.iter().any(|t| *t != timeouts[0]), "no variation");
        // Two followers draw differently.
        let (mut a, mut b) = (Jitter::default(), Jitter::default());
        let a: Vec<u32> = (0..8).map(|_| a.watch_timeout(290)).collect();
        let b: Vec<u32> = (0..8).map(|_| b.watch_timeout(290)).collect();
        assert_ne!(a, b);
    }
}
