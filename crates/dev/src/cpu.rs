//! This process's CPU time, for benchmarks and size tests that report what a step cost.

/// The CPU seconds (user and system) this process has used, from `/proc/self/stat` (in the
/// kernel's 10 ms ticks); 0 where there is no procfs.
pub fn process_cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // Fields after the command name, which is in parentheses and may hold spaces.
    let Some(end) = stat.rfind(')') else {
        return 0.0;
    };
    let fields: Vec<&str> = stat[end + 1..].split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the command name.
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    (ticks(11) + ticks(12)) as f64 / 100.0
}

#[cfg(test)]
mod tests {
    #[test]
    fn cpu_time_grows_with_work() {
        let before = super::process_cpu_seconds();
        let mut x = 0u64;
        let start = std::time::Instant::now();
        while start.elapsed().as_millis() < 120 {
            x = x.wrapping_mul(31).wrapping_add(std::hint::black_box(7));
        }
        std::hint::black_box(x);
        assert!(
            super::process_cpu_seconds() > before,
            "a busy loop of 120 ms uses CPU"
        );
    }
}
