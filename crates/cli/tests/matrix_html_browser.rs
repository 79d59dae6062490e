//! `netpol matrix --output html` in a real headless browser (Debian's `chromium`): the page's
//! script must run without errors, draw a cell for every pair of pods on every protocol/port tab,
//! and agree cell by cell with `--output json`.
//!
//! Without chromium the test fails with instructions, unless `NETPOL_SKIP_BROWSER=1` is set.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

const BROWSER: &str = "chromium";

/// A file or folder of the example manifests (`examples/manifests`).
fn manifests(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/manifests")
        .join(name)
        .to_str()
        .unwrap()
        .to_owned()
}

fn matrix(output: &str) -> Vec<u8> {
    let result = Command::new(env!("CARGO_BIN_EXE_netpol"))
        .args([
            "matrix",
            "-f",
            &manifests("cluster.yaml"),
            "-f",
            &manifests("policies-after"),
            "--output",
            output,
            // JSON: every flow whole, to compare the page with.
            "--flows",
        ])
        .output()
        .expect("the netpol binary runs");
    assert!(
        result.status.success(),
        "{}",
        String::from_utf8_lossy(&result.stderr)
    );
    result.stdout
}

/// The DOM after the page's scripts ran, as headless chromium dumps it.
fn rendered_dom(page: &Path, scratch: &Path) -> Option<String> {
    let run = Command::new(BROWSER)
        .arg("--headless")
        .arg("--no-sandbox")
        .arg("--disable-gpu")
        .arg(format!(
            "--user-data-dir={}",
            scratch.join("profile").display()
        ))
        .arg("--dump-dom")
        .arg(format!("file://{}", page.display()))
        .output();
    match run {
        Ok(out) => {
            assert!(
                out.status.success(),
                "chromium failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            Some(String::from_utf8(out.stdout).expect("the DOM is UTF-8"))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => panic!("cannot run {BROWSER}: {e}"),
    }
}

/// The value of attribute `name` in the tag text `tag` (`<td class=... data-from="x/a" ...>`).
fn attribute(tag: &str, name: &str) -> Option<String> {
    let start = tag.find(&format!(" {name}=\""))? + name.len() + 3;
    let end = tag[start..].find('"')? + start;
    Some(tag[start..end].replace("&gt;", ">").replace("&amp;", "&"))
}

/// Every start tag named `name` in `dom`, in document order.
fn tags<'a>(dom: &'a str, name: &str) -> Vec<(usize, &'a str)> {
    let open = format!("<{name} ");
    dom.match_indices(&open)
        .map(|(at, _)| (at, &dom[at..at + dom[at..].find('>').unwrap()]))
        .collect()
}

#[test]
fn the_html_matrix_runs_in_chromium_and_agrees_with_json() {
    let scratch = std::env::temp_dir().join(format!("netpol-html-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).unwrap();
    let page: PathBuf = scratch.join("matrix.html");
    std::fs::write(&page, matrix("html")).unwrap();
    let dom = rendered_dom(&page, &scratch);
    std::fs::remove_dir_all(&scratch).unwrap();
    let Some(dom) = dom else {
        if std::env::var_os("NETPOL_SKIP_BROWSER").is_some_and(|v| v == "1") {
            eprintln!("skipped: {BROWSER} is not installed and NETPOL_SKIP_BROWSER=1");
            return;
        }
        panic!(
            "{BROWSER} is not installed: install it (Debian: `apt-get install -y chromium`) \
             or set NETPOL_SKIP_BROWSER=1 to skip this test"
        );
    };

    let errors_at = dom
        .find("<pre id=\"netpol-errors\">")
        .expect("the error box")
        + 24;
    let errors = &dom[errors_at..errors_at + dom[errors_at..].find("</pre>").unwrap()];
    assert_eq!(errors, "", "the page's script raised errors");

    let json: Value = serde_json::from_slice(&matrix("json")).unwrap();
    let matrices = json["matrices"].as_array().unwrap();
    // What JSON says, as (tab, from, to, verdict) for every defined flow.
    let mut expected = Vec::new();
    let mut cells = 0;
    for m in matrices {
        let tab = format!("{}/{}", m["protocol"].as_str().unwrap(), m["port"]);
        cells += json["groups"].as_array().unwrap().len().pow(2);
        for f in m["flows"].as_array().unwrap() {
            expected.push(format!(
                "{tab} {} {} {}",
                f["from"].as_str().unwrap(),
                f["to"].as_str().unwrap(),
                f["verdict"].as_str().unwrap()
            ));
        }
    }
    assert!(
        expected.iter().any(|c| c.ends_with(" deny")),
        "{expected:?}"
    );
    assert!(
        expected.iter().any(|c| c.ends_with(" allow")),
        "{expected:?}"
    );

    let status = tags(&dom, "p")
        .into_iter()
        .find(|(_, t)| t.contains("id=\"netpol-status\""))
        .expect("the status marker");
    assert_eq!(
        attribute(status.1, "data-cells"),
        Some(cells.to_string()),
        "the script drew every cell"
    );

    // What the browser drew: each cell under the tab (section) it belongs to.
    let sections = tags(&dom, "section");
    let tabs: Vec<&str> = tags(&dom, "button")
        .iter()
        .map(|(at, t)| {
            assert!(t.contains("data-tab="));
            let text_at = at + t.len() + 1;
            &dom[text_at..text_at + dom[text_at..].find('<').unwrap()]
        })
        .collect();
    assert_eq!(tabs, ["TCP/5432", "TCP/8080"]);
    let mut drawn = Vec::new();
    let mut titles = Vec::new();
    for (at, td) in tags(&dom, "td") {
        let section = sections
            .iter()
            .rev()
            .find(|(s, _)| *s < at)
            .expect("every cell is in a tab");
        let tab = format!(
            "{}/{}",
            attribute(section.1, "data-protocol").unwrap(),
            attribute(section.1, "data-port").unwrap()
        );
        let verdict = attribute(td, "data-verdict").unwrap();
        if verdict != "none" {
            drawn.push(format!(
                "{tab} {} {} {verdict}",
                attribute(td, "data-from").unwrap(),
                attribute(td, "data-to").unwrap()
            ));
            titles.push(attribute(td, "title").unwrap());
        }
    }
    assert_eq!(drawn, expected);
    assert!(
        titles.contains(
            &"ops/prober -> shop/web TCP/8080: deny (ingress: deny: no Normal-tier rule matched \
              and NetworkPolicy shop/web-from-shop isolates the pod)"
                .to_string()
        ),
        "{titles:#?}"
    );
    // Grouped by namespace: one header per namespace run, spanning its pods.
    let namespace_headers: Vec<String> = tags(&dom, "th")
        .iter()
        .filter(|(_, t)| t.contains("class=\"ns\"") && t.contains("colspan"))
        .map(|(at, t)| {
            let text_at = at + t.len() + 1;
            format!(
                "{}x{}",
                &dom[text_at..text_at + dom[text_at..].find('<').unwrap()],
                attribute(t, "colspan").unwrap()
            )
        })
        .collect();
    assert_eq!(namespace_headers, ["opsx1", "shopx2", "opsx1", "shopx2"]);
}

/// A page of thousands of pods (a synthetic cluster of mixed workloads): it stays small (each
/// row's cells are runs), opens on its first namespace, and draws that namespace's cells without
/// script errors.
#[test]
fn a_large_html_matrix_opens_on_one_namespace_and_draws() {
    let scratch = std::env::temp_dir().join(format!("netpol-html-large-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).unwrap();
    let cluster = scratch.join("cluster");
    let synth = Command::new(env!("CARGO_BIN_EXE_netpol"))
        .args(["synth", "--pods", "2000", "--workloads", "mixed", "--out"])
        .arg(&cluster)
        .output()
        .expect("the netpol binary runs");
    assert!(
        synth.status.success(),
        "{}",
        String::from_utf8_lossy(&synth.stderr)
    );
    let result = Command::new(env!("CARGO_BIN_EXE_netpol"))
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
        .expect("the netpol binary runs");
    assert!(
        result.status.success(),
        "{}",
        String::from_utf8_lossy(&result.stderr)
    );
    let html = result.stdout;
    assert!(
        html.len() < 1 << 20,
        "a 2,000-pod page of {} bytes",
        html.len()
    );
    let page = scratch.join("matrix.html");
    std::fs::write(&page, &html).unwrap();
    let dom = rendered_dom(&page, &scratch);
    std::fs::remove_dir_all(&scratch).unwrap();
    let Some(dom) = dom else {
        if std::env::var_os("NETPOL_SKIP_BROWSER").is_some_and(|v| v == "1") {
            eprintln!("skipped: {BROWSER} is not installed and NETPOL_SKIP_BROWSER=1");
            return;
        }
        panic!("{BROWSER} is not installed (or set NETPOL_SKIP_BROWSER=1)");
    };
    let errors_at = dom
        .find("<pre id=\"netpol-errors\">")
        .expect("the error box")
        + 24;
    let errors = &dom[errors_at..errors_at + dom[errors_at..].find("</pre>").unwrap()];
    assert_eq!(errors, "", "the page's script raised errors");
    let status = tags(&dom, "p")
        .into_iter()
        .find(|(_, t)| t.contains("id=\"netpol-status\""))
        .expect("the status marker")
        .1;
    let shown: usize = attribute(status, "data-shown").unwrap().parse().unwrap();
    let cells: usize = attribute(status, "data-cells").unwrap().parse().unwrap();
    let groups = tags(&dom, "option").len() - 1;
    assert!(
        shown > 0 && groups > 1,
        "{shown} groups shown, {groups} namespaces"
    );
    assert_eq!(
        cells,
        shown * shown,
        "one tab, every cell of the namespace drawn"
    );
    assert_eq!(tags(&dom, "td").len(), cells);
}
