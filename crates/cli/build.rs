//! Build facts for `netpol version`: the commit the binary was built from, its target triple and
//! the build date, as compile-time environment variables (`NETPOL_GIT_COMMIT`, `NETPOL_TARGET`,
//! `NETPOL_BUILD_DATE`).
//!
//! - The commit is `git rev-parse HEAD` in the source tree; a source tarball without `.git` (or
//!   a machine without git) builds with `unknown`. A packager may set `NETPOL_GIT_COMMIT` to the
//!   commit the tarball was cut from.
//! - The date is the day (UTC) of `SOURCE_DATE_EPOCH` when set (reproducible builds), else of
//!   the build. Only the day, so that rebuilding on the same commit gives the same binary that
//!   day and the crate is not recompiled on every build.

use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

fn main() {
    println!("cargo:rerun-if-env-changed=NETPOL_GIT_COMMIT");
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
    let commit = std::env::var("NETPOL_GIT_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty())
        .or_else(git_commit)
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=NETPOL_GIT_COMMIT={}", commit.trim());
    let target = std::env::var("TARGET").unwrap_or_else(|_| "unknown".into());
    println!("cargo:rustc-env=NETPOL_TARGET={target}");
    let seconds = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs())
        });
    println!("cargo:rustc-env=NETPOL_BUILD_DATE={}", civil_date(seconds));
}

/// HEAD's commit, and the files whose change means another commit (so the script runs again).
fn git_commit() -> Option<String> {
    let git = |args: &[&str]| -> Option<String> {
        let output = Command::new("git").args(args).output().ok()?;
        output
            .status
            .success()
            .then(|| String::from_utf8_lossy(&output.stdout).trim().to_string())
            .filter(|s| !s.is_empty())
    };
    let commit = git(&["rev-parse", "HEAD"])?;
    // HEAD (which branch), the branch's ref and packed-refs (where it points): in a worktree
    // the first lives in the worktree's git dir, the others in the common one.
    for path in [
        git(&["rev-parse", "--git-path", "HEAD"]),
        git(&["rev-parse", "--git-path", "packed-refs"]),
        git(&["symbolic-ref", "-q", "HEAD"])
            .and_then(|branch| git(&["rev-parse", "--git-path", &branch])),
    ]
    .into_iter()
    .flatten()
    {
        println!("cargo:rerun-if-changed={path}");
    }
    Some(commit)
}

/// `YYYY-MM-DD` of a Unix time (UTC), by the days-to-civil algorithm of H. Hinnant.
fn civil_date(seconds: u64) -> String {
    let days = (seconds / 86_400) as i64 + 719_468;
    let era = days.div_euclid(146_097);
    let day_of_era = days.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}
