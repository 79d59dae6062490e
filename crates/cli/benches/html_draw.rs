//! How long the HTML matrix of a large cluster takes to draw in a real browser, and how large
//! it is.
//!
//! `cargo bench -p netpol-cli --bench html_draw` writes a synthetic cluster of mixed workloads
//! (`NETPOL_HTML_PODS`, default 10,000 pods), prints `matrix --protocol TCP --port 80 -o html`
//! with the release binary, and loads the page in headless Debian `chromium` (`--dump-dom`,
//! which returns once the page has loaded and its script has drawn), `NETPOL_HTML_RUNS` times
//! (default 5), and as many times an empty page. The draw time is the median page run less the
//! median empty run (the browser's own start). Each run's DOM must show the script ran without
//! errors and drew the namespace the page opens on (the status marker's `data-cells` equals
//! `data-shown` squared); a failure to draw stops the benchmark.
//!
//! Not a test: the suite's `matrix_html_browser.rs` checks what is drawn, this measures it.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const BROWSER: &str = "chromium";

fn main() {
    let netpol = env!("CARGO_BIN_EXE_netpol");
    let env = |name: &str, default: usize| -> usize {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let pods = env("NETPOL_HTML_PODS", 10_000);
    let runs = env("NETPOL_HTML_RUNS", 5).max(1);
    let work = std::env::temp_dir().join(format!("netpol-html-draw-{}", std::process::id()));
    let cluster = work.join("cluster");
    let synth = Command::new(netpol)
        .args(["synth", "--pods", &pods.to_string(), "--workloads", "mixed"])
        .arg("--out")
        .arg(&cluster)
        .output()
        .expect("netpol synth runs");
    assert!(synth.status.success());
    let started = Instant::now();
    let matrix = Command::new(netpol)
        .args([
            "matrix",
            "--protocol",
            "TCP",
            "--port",
            "80",
            "-o",
            "html",
            "-f",
        ])
        .arg(&cluster)
        .output()
        .expect("netpol matrix runs");
    let written = started.elapsed();
    assert!(
        matrix.status.success(),
        "{}",
        String::from_utf8_lossy(&matrix.stderr)
    );
    let page = work.join("matrix.html");
    std::fs::write(&page, &matrix.stdout).unwrap();
    let blank = work.join("blank.html");
    std::fs::write(&blank, "<!doctype html><title>blank</title><p>blank</p>").unwrap();

    let mut page_runs = Vec::new();
    let mut blank_runs = Vec::new();
    let mut drawn = (0, 0);
    for run in 0..runs {
        let (elapsed, dom) = load(&blank, &work.join(format!("profile-blank-{run}")));
        assert!(dom.contains("blank"), "chromium did not load an empty page");
        blank_runs.push(elapsed);
        let (elapsed, dom) = load(&page, &work.join(format!("profile-page-{run}")));
        drawn = check_drawn(&dom);
        page_runs.push(elapsed);
    }
    let median = |runs: &mut Vec<Duration>| {
        runs.sort();
        runs[runs.len() / 2]
    };
    let (page_median, blank_median) = (median(&mut page_runs), median(&mut blank_runs));
    println!("| pods | page MB | written in s | chromium, page (median of {runs}) s | chromium, empty page s | draw s | groups drawn | cells drawn |");
    println!("|---|---|---|---|---|---|---|---|");
    println!(
        "| {pods} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {} | {} |",
        matrix.stdout.len() as f64 / 1e6,
        written.as_secs_f64(),
        page_median.as_secs_f64(),
        blank_median.as_secs_f64(),
        page_median.saturating_sub(blank_median).as_secs_f64(),
        drawn.0,
        drawn.1
    );
    let _ = std::fs::remove_dir_all(&work);
}

/// Loads `page` in headless chromium, returning how long until the DOM was dumped, and the DOM.
fn load(page: &Path, profile: &Path) -> (Duration, String) {
    let started = Instant::now();
    let run = Command::new(BROWSER)
        .args(["--headless", "--no-sandbox", "--disable-gpu"])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap_or_else(|e| panic!("{BROWSER} does not run ({e}): apt-get install chromium"));
    let elapsed = started.elapsed();
    assert!(
        run.status.success(),
        "{BROWSER} failed on {}",
        page.display()
    );
    (elapsed, String::from_utf8_lossy(&run.stdout).into_owned())
}

/// The groups and cells the page's script drew, after checking it raised no error and drew
/// every cell of the namespace it opens on.
fn check_drawn(dom: &str) -> (usize, usize) {
    let errors_at = dom
        .find("<pre id=\"netpol-errors\">")
        .expect("the page's error box")
        + "<pre id=\"netpol-errors\">".len();
    let errors = &dom[errors_at..errors_at + dom[errors_at..].find("</pre>").unwrap()];
    assert_eq!(errors, "", "the page's script raised errors");
    let status_at = dom.find("id=\"netpol-status\"").expect("the status marker");
    let status = &dom[dom[..status_at].rfind('<').unwrap()..];
    let status = &status[..status.find('>').unwrap()];
    let attribute = |name: &str| -> usize {
        let at = status
            .find(&format!("{name}=\""))
            .unwrap_or_else(|| panic!("{name} in {status}"))
            + name.len()
            + 2;
        status[at..at + status[at..].find('"').unwrap()]
            .parse()
            .unwrap()
    };
    let (shown, cells) = (attribute("data-shown"), attribute("data-cells"));
    assert!(shown > 0, "no group drawn: {status}");
    assert_eq!(cells, shown * shown, "every cell of the namespace drawn");
    (shown, cells)
}
