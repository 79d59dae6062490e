//! How long the HTML matrix of a large cluster takes to draw in a real browser, and how large
//! it is.
//!
//! `cargo bench -p netpol-cli --bench html_draw` writes a synthetic cluster of mixed workloads
//! (`NETPOL_HTML_PODS`, default 10,000 pods), prints `matrix --protocol TCP --port 80 -o html`
//! with the release binary, and loads the page in headless Debian `chromium` (`--dump-dom`,
//! which returns once the page has loaded and its script has drawn), `NETPOL_HTML_RUNS` times
//! (default 5), and as many times an empty page. The draw time is the median page run less the
//! median empty run (the browser's own start). Each run's DOM must show the script ran without
//! errors and drew the view the page opens on whole (the overview of namespace pairs, a square
//! per pair, for a page of more than 300 groups; else every cell of the table); a failure to
//! draw stops the benchmark.
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
    netpol_dev::run(
        [
            "synth",
            "--pods",
            &pods.to_string(),
            "--workloads",
            "mixed",
            "--out",
        ]
        .into_iter()
        .map(str::to_owned)
        .chain([cluster.to_str().expect("a UTF-8 scratch path").to_owned()]),
        &mut std::io::sink(),
    )
    .expect("netpol-dev synth writes the cluster");
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
    let mut drawn = String::new();
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
    println!("| pods | page MB | written in s | chromium, page (median of {runs}) s | chromium, empty page s | draw s | drawn |");
    println!("|---|---|---|---|---|---|---|");
    println!(
        "| {pods} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {drawn} |",
        matrix.stdout.len() as f64 / 1e6,
        written.as_secs_f64(),
        page_median.as_secs_f64(),
        blank_median.as_secs_f64(),
        page_median.saturating_sub(blank_median).as_secs_f64(),
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

/// What the page's script drew first, after checking it raised no error and drew its first view
/// whole: the overview's square for every pair of namespaces, or every cell of the table.
fn check_drawn(dom: &str) -> String {
    let errors_at = dom
        .find("<pre id=\"netpol-errors\">")
        .expect("the page's error box")
        + "<pre id=\"netpol-errors\">".len();
    let errors = &dom[errors_at..errors_at + dom[errors_at..].find("</pre>").unwrap()];
    assert_eq!(errors, "", "the page's script raised errors");
    let tag = |marker: &str| -> &str {
        let at = dom.find(marker).unwrap_or_else(|| panic!("no {marker}"));
        let tag = &dom[dom[..at].rfind('<').unwrap()..];
        &tag[..tag.find('>').unwrap()]
    };
    let attribute = |tag: &str, name: &str| -> String {
        let at = tag
            .find(&format!(" {name}=\""))
            .unwrap_or_else(|| panic!("{name} in {tag}"))
            + name.len()
            + 3;
        tag[at..at + tag[at..].find('"').unwrap()].to_owned()
    };
    let number = |tag: &str, name: &str| -> usize { attribute(tag, name).parse().unwrap() };
    let status = tag("id=\"netpol-status\"");
    if attribute(status, "data-view") == "overview" {
        let canvas = tag("class=\"overview\"");
        let n = number(canvas, "data-namespaces");
        let squares: usize = ["allow", "deny", "mixed", "none"]
            .iter()
            .map(|kind| number(canvas, &format!("data-{kind}")))
            .sum();
        assert_eq!(squares, n * n, "a square per pair of namespaces: {canvas}");
        return format!("overview, {n} namespaces");
    }
    let (rows, columns) = (number(status, "data-shown"), number(status, "data-columns"));
    let cells = number(status, "data-cells");
    assert!(rows > 0, "no group drawn: {status}");
    assert_eq!(cells, rows * columns, "every cell of the view drawn");
    format!("{rows} by {columns} groups, {cells} cells")
}
