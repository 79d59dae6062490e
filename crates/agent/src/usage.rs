//! What the process has used so far, as the kernel counts it: CPU time and peak resident memory.
//! Read from `/proc/self` on Linux; elsewhere unknown (None).

use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Usage {
    /// User plus system CPU time of every thread.
    pub cpu: Duration,
    /// The peak resident set size (VmHWM), in bytes.
    pub peak_rss: u64,
}

impl Usage {
    pub fn of_this_process() -> Option<Usage> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        Some(Usage {
            cpu: cpu_time(&stat)?,
            peak_rss: peak_rss(&status)?,
        })
    }
}

/// utime + stime from `/proc/self/stat`, in clock ticks of 1/100 s (the value Linux fixes
/// `USER_HZ` at for every architecture netpol runs on).
fn cpu_time(stat: &str) -> Option<Duration> {
    // The command name may hold spaces and parentheses: fields are counted after the last ')'.
    let fields: Vec<&str> = stat.get(stat.rfind(')')? + 2..)?.split(' ').collect();
    // After the name, field 1 is the state; utime and stime are fields 12 and 13.
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

fn peak_rss(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_formats() {
        let stat = "4242 (my (odd) cmd) R 1 2 3 4 5 6 7 8 9 10 250 130 0 0 20 0 1 0";
        assert_eq!(cpu_time(stat), Some(Duration::from_millis(3800)));
        let status = "Name:\tnetpol\nVmPeak:\t  300 kB\nVmHWM:\t   2048 kB\n";
        assert_eq!(peak_rss(status), Some(2 * 1024 * 1024));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_has_used_memory() {
        let usage = Usage::of_this_process().unwrap();
        assert!(usage.peak_rss > 1024 * 1024);
    }
}
