//! `netpol matrix --output html` in a real headless browser (Debian's `chromium`): the page's
//! script must run without errors and draw what `--output json` says. A small page opens on
//! every group (`#all`) and is compared with JSON cell by cell; a large page opens on the
//! overview of namespace pairs, whose counts are compared with JSON's, and its `#pair=A,B` and
//! `#namespace=NS` views draw exactly those namespaces' cells; a 10,000-pod page stays under
//! 5 MB and draws without script errors (nothing here is timed; `benches/html_draw.rs` times it).
//!
//! Without chromium the tests fail with instructions, unless `NETPOL_SKIP_BROWSER=1` is set.

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

/// What `netpol ARGS` prints, after checking that it succeeded.
fn netpol(args: &[&str]) -> Vec<u8> {
    let result = Command::new(env!("CARGO_BIN_EXE_netpol"))
        .args(args)
        .output()
        .expect("the netpol binary runs");
    assert!(
        result.status.success(),
        "netpol {args:?}: {}",
        String::from_utf8_lossy(&result.stderr)
    );
    result.stdout
}

fn matrix(output: &str) -> Vec<u8> {
    netpol(&[
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
}

/// A scratch folder, removed when dropped (also when a test fails).
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("netpol-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    /// A synthetic cluster of `pods` pods of mixed workloads, written into the folder.
    fn synth(&self, pods: usize) -> String {
        let cluster = self.0.join("cluster");
        let cluster = cluster.to_str().unwrap();
        netpol_dev::run(
            [
                "synth",
                "--pods",
                &pods.to_string(),
                "--workloads",
                "mixed",
                "--out",
                cluster,
            ],
            &mut std::io::sink(),
        )
        .expect("netpol-dev synth writes the cluster");
        cluster.to_owned()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The DOM after the page's scripts ran, as headless chromium dumps it, the page opened with
/// `fragment` (`""`, or `#...`). `None` when chromium is not installed and
/// `NETPOL_SKIP_BROWSER=1` says to skip.
fn rendered_dom(page: &Path, fragment: &str, scratch: &Scratch) -> Option<String> {
    let run = Command::new(BROWSER)
        .arg("--headless")
        .arg("--no-sandbox")
        .arg("--disable-gpu")
        .arg(format!(
            "--user-data-dir={}",
            scratch.0.join("profile").display()
        ))
        .arg("--dump-dom")
        .arg(format!("file://{}{fragment}", page.display()))
        .output();
    match run {
        Ok(out) => {
            assert!(
                out.status.success(),
                "chromium failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let dom = String::from_utf8(out.stdout).expect("the DOM is UTF-8");
            assert_eq!(
                script_errors(&dom),
                "",
                "the page's script raised errors ({fragment})"
            );
            Some(dom)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if std::env::var_os("NETPOL_SKIP_BROWSER").is_some_and(|v| v == "1") {
                eprintln!("skipped: {BROWSER} is not installed and NETPOL_SKIP_BROWSER=1");
                return None;
            }
            panic!(
                "{BROWSER} is not installed: install it (Debian: `apt-get install -y chromium`) \
                 or set NETPOL_SKIP_BROWSER=1 to skip this test"
            );
        }
        Err(e) => panic!("cannot run {BROWSER}: {e}"),
    }
}

/// What the page's script wrote into its error box.
fn script_errors(dom: &str) -> &str {
    let errors_at = dom
        .find("<pre id=\"netpol-errors\">")
        .expect("the error box")
        + "<pre id=\"netpol-errors\">".len();
    &dom[errors_at..errors_at + dom[errors_at..].find("</pre>").unwrap()]
}

/// The value of attribute `name` in the tag text `tag` (`<td class=... data-from="x/a" ...>`).
fn attribute(tag: &str, name: &str) -> Option<String> {
    let start = tag.find(&format!(" {name}=\""))? + name.len() + 3;
    let end = tag[start..].find('"')? + start;
    Some(tag[start..end].replace("&gt;", ">").replace("&amp;", "&"))
}

/// A numeric attribute that must be there.
fn number(tag: &str, name: &str) -> usize {
    attribute(tag, name)
        .unwrap_or_else(|| panic!("no {name} in {tag}"))
        .parse()
        .unwrap()
}

/// Every start tag named `name` in `dom`, in document order.
fn tags<'a>(dom: &'a str, name: &str) -> Vec<(usize, &'a str)> {
    let open = format!("<{name} ");
    dom.match_indices(&open)
        .map(|(at, _)| (at, &dom[at..at + dom[at..].find('>').unwrap()]))
        .collect()
}

/// The status marker the script sets once it has drawn.
fn status_marker(dom: &str) -> &str {
    tags(dom, "p")
        .into_iter()
        .find(|(_, t)| t.contains("id=\"netpol-status\""))
        .expect("the status marker")
        .1
}

/// Each tab's protocol/port (`TCP/80`) and the position of its section.
fn sections(dom: &str) -> Vec<(usize, String)> {
    tags(dom, "section")
        .into_iter()
        .map(|(at, t)| {
            let tab = format!(
                "{}/{}",
                attribute(t, "data-protocol").unwrap(),
                attribute(t, "data-port").unwrap()
            );
            (at, tab)
        })
        .collect()
}

/// The tab the tag at `at` is drawn under.
fn tab_of(sections: &[(usize, String)], at: usize) -> &str {
    &sections
        .iter()
        .rev()
        .find(|(s, _)| *s < at)
        .expect("drawn under a tab")
        .1
}

/// Every drawn cell with a flow, as `TAB FROM TO VERDICT`, in document order.
fn drawn_cells(dom: &str) -> Vec<String> {
    let sections = sections(dom);
    tags(dom, "td")
        .into_iter()
        .filter_map(|(at, td)| {
            let verdict = attribute(td, "data-verdict").unwrap();
            (verdict != "none").then(|| {
                format!(
                    "{} {} {} {verdict}",
                    tab_of(&sections, at),
                    attribute(td, "data-from").unwrap(),
                    attribute(td, "data-to").unwrap()
                )
            })
        })
        .collect()
}

#[test]
fn the_html_matrix_runs_in_chromium_and_agrees_with_json() {
    let scratch = Scratch::new("html");
    let page: PathBuf = scratch.0.join("matrix.html");
    std::fs::write(&page, matrix("html")).unwrap();
    let Some(dom) = rendered_dom(&page, "", &scratch) else {
        return;
    };

    let json: Value = serde_json::from_slice(&matrix("json")).unwrap();
    let matrices = json["matrices"].as_array().unwrap();
    // What JSON says, as (tab, from, to, verdict) for every defined flow.
    // Rows and columns are the groups, then the nodes and outside regions (JSON's `others`),
    // as in the text output.
    let parties =
        json["groups"].as_array().unwrap().len() + json["others"].as_array().unwrap().len();
    let mut expected = Vec::new();
    let mut cells = 0;
    for m in matrices {
        let tab = format!("{}/{}", m["protocol"].as_str().unwrap(), m["port"]);
        cells += parties.pow(2);
        let flows = m["flows"].as_array().unwrap().iter();
        for f in flows.chain(m["other_flows"].as_array().unwrap()) {
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

    // Three groups: the page opens on all of them, with no overview.
    let status = status_marker(&dom);
    assert_eq!(attribute(status, "data-view").as_deref(), Some("all"));
    assert_eq!(
        attribute(status, "data-cells"),
        Some(cells.to_string()),
        "the script drew every cell"
    );
    assert!(tags(&dom, "canvas").is_empty());

    // What the browser drew: each cell under the tab (section) it belongs to.
    let tabs: Vec<&str> = tags(&dom, "button")
        .iter()
        .map(|(at, t)| {
            assert!(t.contains("data-tab="));
            let text_at = at + t.len() + 1;
            &dom[text_at..text_at + dom[text_at..].find('<').unwrap()]
        })
        .collect();
    // The ports the rules name, and one probe each for every other TCP port and for the
    // protocols no rule names (labelled so in the JSON's `stands_for`).
    assert_eq!(tabs, ["TCP/80", "TCP/5432", "TCP/8080", "UDP/80"]);
    // The same cells (the page draws row by row over every party, JSON lists flows between
    // groups before those with others).
    let mut drawn = drawn_cells(&dom);
    drawn.sort();
    expected.sort();
    assert_eq!(drawn, expected);
    let titles: Vec<String> = tags(&dom, "td")
        .iter()
        .map(|(_, td)| attribute(td, "title").unwrap())
        .collect();
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
    // One run of namespace headers per probe (four tabs): shop's pods and the stand-in for its
    // other pods (web-from-shop admits every pod of shop), then the node and the outside.
    assert_eq!(
        namespace_headers,
        ["opsx1", "shopx3", "(nodes)x1", "(outside the cluster)x1"].repeat(tabs.len())
    );
    // The node and outside rows are drawn with their heads, as the text output has them.
    let ingress_from_outside = "TCP/8080 0.0.0.0/0 shop/web deny";
    assert!(
        expected.iter().any(|c| c == ingress_from_outside),
        "{expected:?}"
    );
}

/// What `matrix --output json` says about the pairs of groups, for comparing the page with.
struct Expected {
    /// Group labels, in JSON's order (the page's).
    labels: Vec<String>,
    /// Namespaces in order of first appearance, and each group's by number.
    namespaces: Vec<String>,
    namespace_of: Vec<usize>,
    /// Per matrix, its tab (`TCP/80`) and its verdicts between groups, `from * groups + to`:
    /// `Some(allowed)`, `None` where no flow is defined.
    matrices: Vec<(String, Vec<Option<bool>>)>,
}

impl Expected {
    fn new(json: &Value) -> Self {
        // The page's rows: the groups, then the nodes and outside regions under their headers.
        let groups = json["groups"].as_array().unwrap();
        let others = json["others"].as_array().unwrap();
        let g = groups.len() + others.len();
        let labels = groups
            .iter()
            .map(|group| group["label"].as_str().unwrap().to_owned())
            .chain(
                others
                    .iter()
                    .map(|o| o["name"].as_str().unwrap().to_owned()),
            )
            .collect();
        let (mut namespaces, mut namespace_of) = (Vec::<String>::new(), Vec::new());
        let headers = groups
            .iter()
            .map(|group| {
                let pod = group["pods"][0].as_str().unwrap();
                pod[..pod.find('/').unwrap()].to_owned()
            })
            .chain(others.iter().map(|o| match o["kind"].as_str().unwrap() {
                "node" => "(nodes)".to_owned(),
                _ => "(outside the cluster)".to_owned(),
            }));
        for ns in headers {
            let ns = ns.as_str();
            let at = match namespaces.iter().position(|n| n == ns) {
                Some(at) => at,
                None => {
                    namespaces.push(ns.to_owned());
                    namespaces.len() - 1
                }
            };
            namespace_of.push(at);
        }
        let matrices = json["matrices"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                let tab = format!("{}/{}", m["protocol"].as_str().unwrap(), m["port"]);
                let decisions = m["decisions"].as_array().unwrap();
                let mut verdicts = vec![None; g * g];
                // Parties are numbered groups first, then nodes and outside regions.
                for row in m["rows"].as_array().unwrap() {
                    let from = row["from"].as_u64().unwrap() as usize;
                    for run in row["to"].as_array().unwrap() {
                        let [first, last, decision] =
                            [0, 1, 2].map(|i| run[i].as_u64().unwrap() as usize);
                        let allowed = decisions[decision]["verdict"] == "allow";
                        for to in first..=last {
                            verdicts[from * g + to] = Some(allowed);
                        }
                    }
                }
                (tab, verdicts)
            })
            .collect();
        Expected {
            labels,
            namespaces,
            namespace_of,
            matrices,
        }
    }

    fn groups_in(&self, ns: usize) -> Vec<usize> {
        (0..self.labels.len())
            .filter(|&g| self.namespace_of[g] == ns)
            .collect()
    }

    /// Per namespace pair (`a * namespaces + b`) of matrix `m`: what colour the overview gives
    /// it, from how many pairs of their groups are allowed and how many denied.
    fn kinds(&self, m: usize) -> Vec<&'static str> {
        let (g, n) = (self.labels.len(), self.namespaces.len());
        let mut counts = vec![(0usize, 0usize); n * n];
        for from in 0..g {
            for to in 0..g {
                let pair = &mut counts[self.namespace_of[from] * n + self.namespace_of[to]];
                match self.matrices[m].1[from * g + to] {
                    Some(true) => pair.0 += 1,
                    Some(false) => pair.1 += 1,
                    None => {}
                }
            }
        }
        counts
            .into_iter()
            .map(|(allow, deny)| match (allow, deny) {
                (0, 0) => "none",
                (_, 0) => "allow",
                (0, _) => "deny",
                _ => "mixed",
            })
            .collect()
    }

    /// The cells with a flow from groups `rows` to groups `columns` on every tab, as
    /// [`drawn_cells`] lists them.
    fn cells(&self, rows: &[usize], columns: &[usize]) -> Vec<String> {
        let g = self.labels.len();
        let mut out = Vec::new();
        for (tab, verdicts) in &self.matrices {
            for &from in rows {
                for &to in columns {
                    if let Some(allowed) = verdicts[from * g + to] {
                        let verdict = if allowed { "allow" } else { "deny" };
                        out.push(format!(
                            "{tab} {} {} {verdict}",
                            self.labels[from], self.labels[to]
                        ));
                    }
                }
            }
        }
        out
    }
}

/// A page of thousands of pods (a synthetic cluster of mixed workloads, every probe port): it
/// stays small (each row's cells are runs) and opens on the overview of namespace pairs, whose
/// colours agree with the JSON of the same cluster, and its pair and namespace views draw exactly
/// those namespaces' cells, as JSON has them.
#[test]
fn a_large_html_matrix_opens_on_the_overview_and_its_views_agree_with_json() {
    let scratch = Scratch::new("html-large");
    let cluster = scratch.synth(2000);
    let html = netpol(&["matrix", "-o", "html", "-f", &cluster]);
    let json: Value =
        serde_json::from_slice(&netpol(&["matrix", "-o", "json", "-f", &cluster])).unwrap();
    // Seven probe ports (the five written, every other TCP port, every UDP and SCTP port); one
    // (TCP/80) was 0.25 MB, and no probe's tab may be larger.
    let probes = json["matrices"].as_array().unwrap().len();
    assert!(
        html.len() < probes << 18,
        "a 2,000-pod page of {} bytes for {probes} probes",
        html.len()
    );
    let expected = Expected::new(&json);
    let n = expected.namespaces.len();
    assert!(
        expected.labels.len() > 300 && n > 1,
        "{} groups, {n} namespaces: not a page that opens on the overview",
        expected.labels.len()
    );
    let page = scratch.0.join("matrix.html");
    std::fs::write(&page, &html).unwrap();

    let Some(dom) = rendered_dom(&page, "", &scratch) else {
        return;
    };
    let status = status_marker(&dom);
    assert_eq!(attribute(status, "data-view").as_deref(), Some("overview"));
    assert_eq!(number(status, "data-cells"), 0);
    assert!(tags(&dom, "td").is_empty(), "no table on the overview");
    // One canvas per tab, its counts of namespace pairs by colour those of JSON.
    let sections = sections(&dom);
    let canvases = tags(&dom, "canvas");
    assert_eq!(canvases.len(), expected.matrices.len());
    let mut seen = [0usize; 4];
    const KINDS: [&str; 4] = ["allow", "deny", "mixed", "none"];
    for (m, (at, canvas)) in canvases.iter().enumerate() {
        let tab = &expected.matrices[m].0;
        assert_eq!(tab_of(&sections, *at), tab);
        assert_eq!(number(canvas, "data-namespaces"), n, "{tab}");
        let kinds = expected.kinds(m);
        for (k, kind) in KINDS.iter().enumerate() {
            let count = kinds.iter().filter(|c| *c == kind).count();
            assert_eq!(
                number(canvas, &format!("data-{kind}")),
                count,
                "{tab} {kind}"
            );
            seen[k] += count;
        }
    }
    assert!(
        seen[..3].iter().all(|&c| c > 0),
        "the cluster shows allowed, denied and mixed pairs of namespaces: {seen:?}"
    );

    // A mixed pair of two namespaces (the one of most pairs of groups), and the namespace of
    // most groups, each opened by its fragment.
    // Namespaces of pods the cluster holds (not the headers of nodes, outside regions or
    // stand-ins of other namespaces, whose names a fragment would have to escape).
    let held = |ns: usize| !expected.namespaces[ns].starts_with('(');
    let mixed = (0..expected.matrices.len())
        .flat_map(|m| {
            let kinds = expected.kinds(m);
            (0..n * n).filter(move |&p| kinds[p] == "mixed" && p / n != p % n)
        })
        .filter(|p| held(p / n) && held(p % n))
        .max_by_key(|p| expected.groups_in(p / n).len() * expected.groups_in(p % n).len())
        .expect("a mixed pair of two namespaces");
    let (from, to) = (mixed / n, mixed % n);
    let biggest = (0..n)
        .filter(|&ns| held(ns))
        .max_by_key(|&ns| expected.groups_in(ns).len())
        .unwrap();
    // The nodes and the outside are rows and columns of the overview too.
    assert!(
        expected
            .namespaces
            .iter()
            .any(|ns| ns == "(outside the cluster)"),
        "{:?}",
        expected.namespaces
    );
    // A click on the pair's square of the overview opens it: the page with a script that
    // clicks the middle of the square (row `from`, column `to`) and notes the fragment.
    let clicking = scratch.0.join("click.html");
    let click = format!(
        "<pre id=\"clicked\"></pre><script>
const canvas = document.querySelector(\"canvas\");
const size = canvas.width / Number(canvas.getAttribute(\"data-namespaces\"));
const box = canvas.getBoundingClientRect();
const at = {{ bubbles: true, clientX: box.left + canvas.clientLeft + ({to} + 0.5) * size,
  clientY: box.top + canvas.clientTop + ({from} + 0.5) * size }};
canvas.dispatchEvent(new MouseEvent(\"click\", at));
document.getElementById(\"clicked\").textContent = location.hash;
</script></body>"
    );
    std::fs::write(
        &clicking,
        String::from_utf8(html.clone())
            .unwrap()
            .replace("</body>", &click),
    )
    .unwrap();
    let Some(dom) = rendered_dom(&clicking, "", &scratch) else {
        return;
    };
    let pair = format!(
        "#pair={},{}",
        expected.namespaces[from], expected.namespaces[to]
    );
    assert!(
        dom.contains(&format!("<pre id=\"clicked\">{pair}</pre>")),
        "a click on the square of {pair}"
    );
    let views = [
        (pair, "pair", from, to),
        (
            format!("#namespace={}", expected.namespaces[biggest]),
            "namespace",
            biggest,
            biggest,
        ),
    ];
    for (fragment, view, from, to) in views {
        let Some(dom) = rendered_dom(&page, &fragment, &scratch) else {
            return;
        };
        let (rows, columns) = (expected.groups_in(from), expected.groups_in(to));
        let cells = rows.len() * columns.len() * expected.matrices.len();
        let status = status_marker(&dom);
        assert_eq!(attribute(status, "data-view").as_deref(), Some(view));
        assert_eq!(number(status, "data-shown"), rows.len(), "{fragment}");
        assert_eq!(number(status, "data-columns"), columns.len(), "{fragment}");
        assert_eq!(number(status, "data-cells"), cells, "{fragment}");
        assert_eq!(tags(&dom, "td").len(), cells, "{fragment}");
        assert_eq!(
            drawn_cells(&dom),
            expected.cells(&rows, &columns),
            "{fragment}"
        );
    }
}

/// The 10,000-pod synthetic cluster's page (one probe port): under 5 MB, and it draws its
/// overview in chromium without script errors. Not timed here (see `benches/html_draw.rs`).
#[test]
fn a_10000_pod_html_matrix_is_under_5_mb_and_draws() {
    let scratch = Scratch::new("html-10000");
    let cluster = scratch.synth(10_000);
    let html = netpol(&[
        "matrix",
        "--protocol",
        "TCP",
        "--port",
        "80",
        "-o",
        "html",
        "-f",
        &cluster,
    ]);
    assert!(
        html.len() < 5_000_000,
        "a 10,000-pod page of {} bytes",
        html.len()
    );
    let page = scratch.0.join("matrix.html");
    std::fs::write(&page, &html).unwrap();
    let Some(dom) = rendered_dom(&page, "", &scratch) else {
        return;
    };
    let status = status_marker(&dom);
    assert_eq!(attribute(status, "data-view").as_deref(), Some("overview"));
    let canvases = tags(&dom, "canvas");
    assert_eq!(canvases.len(), 1);
    let canvas = canvases[0].1;
    let n = number(canvas, "data-namespaces");
    assert!(n > 1, "{canvas}");
    let squares: usize = ["allow", "deny", "mixed", "none"]
        .iter()
        .map(|kind| number(canvas, &format!("data-{kind}")))
        .sum();
    assert_eq!(squares, n * n, "a square per pair of namespaces: {canvas}");
}

/// The legend entry of the would-deny mark (its start tag).
fn audit_legend(dom: &str) -> &str {
    tags(dom, "span")
        .into_iter()
        .find(|(_, t)| t.contains("id=\"netpol-legend-audit\""))
        .expect("the audit legend")
        .1
}

/// Three policies, two in audit mode (`netpol.io/enforcement: audit`): shop's db takes only web
/// (enforced), web takes only shop (audited), the prober may only reach shop's db (audited).
const AUDITED_POLICIES: &str = "\
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: db-from-web, namespace: shop}
spec:
  podSelector: {matchLabels: {app: db}}
  policyTypes: [Ingress]
  ingress:
  - from: [{podSelector: {matchLabels: {app: web}}}]
    ports: [{port: pg}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: web-from-shop, namespace: shop, annotations: {netpol.io/enforcement: audit}}
spec:
  podSelector: {matchLabels: {app: web}}
  policyTypes: [Ingress]
  ingress:
  - from: [{namespaceSelector: {matchLabels: {team: shop}}}]
    ports: [{port: 8080}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: prober-to-db, namespace: ops, annotations: {netpol.io/enforcement: audit}}
spec:
  podSelector: {matchLabels: {app: prober}}
  policyTypes: [Egress]
  egress:
  - to: [{namespaceSelector: {matchLabels: {team: shop}}, podSelector: {matchLabels: {app: db}}}]
";

/// The page marks as would-denies (the text's `a`) exactly the flows JSON's `would_deny`
/// lists, on every tab, each still allowed; the legend explains the mark only where a policy
/// is in audit mode.
#[test]
fn the_html_matrix_marks_what_audited_policies_would_deny_as_json_does() {
    let scratch = Scratch::new("html-audit");
    let policies = scratch.0.join("policies.yaml");
    std::fs::write(&policies, AUDITED_POLICIES).unwrap();
    let audited = |output: &str| {
        netpol(&[
            "matrix",
            "-f",
            &manifests("cluster.yaml"),
            "-f",
            policies.to_str().unwrap(),
            "--output",
            output,
        ])
    };
    let page = scratch.0.join("matrix.html");
    std::fs::write(&page, audited("html")).unwrap();
    let Some(dom) = rendered_dom(&page, "", &scratch) else {
        return;
    };
    let json: Value = serde_json::from_slice(&audited("json")).unwrap();
    let mut expected: Vec<String> = json["matrices"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| {
            let tab = format!("{}/{}", m["protocol"].as_str().unwrap(), m["port"]);
            let flows = m["would_deny"].as_array().expect("would_deny").clone();
            flows.into_iter().map(move |f| {
                format!(
                    "{tab} {} {}",
                    f["from"].as_str().unwrap(),
                    f["to"].as_str().unwrap()
                )
            })
        })
        .collect();
    let sections = sections(&dom);
    let mut drawn: Vec<String> = tags(&dom, "td")
        .into_iter()
        .filter(|(_, td)| td.contains(" data-would-deny"))
        .map(|(at, td)| {
            assert_eq!(attribute(td, "data-verdict").as_deref(), Some("allow"));
            assert!(td.contains("class=\"cell would-deny\""), "{td}");
            assert!(
                attribute(td, "title")
                    .unwrap()
                    .contains("would deny (audit)"),
                "{td}"
            );
            let text_at = at + td.len() + 1;
            assert_eq!(&dom[text_at..text_at + 1], "a", "{td}");
            format!(
                "{} {} {}",
                tab_of(&sections, at),
                attribute(td, "data-from").unwrap(),
                attribute(td, "data-to").unwrap()
            )
        })
        .collect();
    drawn.sort();
    expected.sort();
    assert_eq!(drawn, expected);
    // Both audited policies show: web's ingress on its port, the prober's egress everywhere
    // but shop's db, on more than one tab.
    for flow in [
        "TCP/8080 ops/prober shop/web",
        "TCP/80 ops/prober 0.0.0.0/0",
        "TCP/5432 ops/prober 0.0.0.0/0",
    ] {
        assert!(expected.iter().any(|c| c == flow), "{flow}: {expected:?}");
    }
    // The enforced policy's denials stay denials, never would-denies.
    assert!(
        drawn_cells(&dom).contains(&"TCP/5432 ops/prober shop/db deny".to_string()),
        "{dom}"
    );
    let legend = audit_legend(&dom);
    assert!(!legend.contains("hidden"), "{legend}");

    // Without a policy in audit mode: no mark, the legend entry hidden.
    let page = scratch.0.join("enforced.html");
    std::fs::write(&page, matrix("html")).unwrap();
    let dom = rendered_dom(&page, "", &scratch).unwrap();
    assert!(tags(&dom, "td")
        .iter()
        .all(|(_, td)| !td.contains(" data-would-deny")));
    let legend = audit_legend(&dom);
    assert!(legend.contains("hidden"), "{legend}");
}
