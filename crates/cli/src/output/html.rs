//! `matrix --output html`: one self-contained page (inline CSS and script, no external fetches)
//! showing each protocol/port's matrix as a coloured grid grouped by namespace, one tab per
//! protocol/port, the deciding rule in each cell's tooltip and, on click, in a detail line.
//!
//! The page carries the cells of `--output json` compactly (per matrix the pods, each distinct
//! deciding rule once, and one number per cell naming its verdict and rule; the per-direction
//! detail is left out) and builds its tables from them in the browser, so the two cannot
//! disagree, and a large cluster's page grows by a few bytes per cell rather than by the text of
//! a rule per cell. When it has drawn every table it writes a marker,
//! `<p id="netpol-status" data-cells="N">`; a script error is written into `#netpol-errors`
//! instead, so a headless browser can tell that the page worked.

use std::collections::HashMap;

use netpol_engine::flow::FlowDecision;
use serde::Serialize;

use super::describe;
use crate::decide::matrix::Matrix;

/// What the page draws: [`crate::commands::matrix::MatricesJson`] with each flow cut to the fields the
/// page shows.
#[derive(Debug, Serialize)]
pub struct PageData {
    pub matrices: Vec<PageMatrix>,
}

#[derive(Debug, Serialize)]
pub struct PageMatrix {
    pub protocol: String,
    pub port: u16,
    pub pods: Vec<String>,
    /// Each distinct deciding rule, once.
    pub rules: Vec<String>,
    /// `cells[from][to]` by position in `pods`: [`UNDEFINED`], or `2 * rule + 1` when allowed
    /// and `2 * rule` when denied, `rule` indexing `rules`.
    pub cells: Vec<Vec<i64>>,
}

/// A cell with no flow (a pod to itself, or across address families).
pub const UNDEFINED: i64 = -1;

impl PageMatrix {
    fn new(matrix: &Matrix) -> Self {
        let mut rules: Vec<String> = Vec::new();
        let mut rule_index: HashMap<String, i64> = HashMap::new();
        let mut code = |decision: &FlowDecision| {
            let rule = describe::deciding_rules(decision);
            let next = rule_index.len() as i64;
            let index = *rule_index.entry(rule.clone()).or_insert_with(|| {
                rules.push(rule);
                next
            });
            2 * index + i64::from(decision.allowed())
        };
        let cells = matrix
            .cells
            .iter()
            .map(|row| {
                row.iter()
                    .map(|cell| cell.as_ref().map_or(UNDEFINED, &mut code))
                    .collect()
            })
            .collect();
        PageMatrix {
            protocol: matrix.protocol.to_string(),
            port: matrix.port,
            pods: matrix.pods.clone(),
            rules,
            cells,
        }
    }
}

impl PageData {
    pub fn new(matrices: &[Matrix]) -> Self {
        PageData {
            matrices: matrices.iter().map(PageMatrix::new).collect(),
        }
    }
}

const STYLE: &str = r#"
body { font: 14px system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.2em; }
nav button { font: inherit; padding: .3em .8em; margin-right: .3em; border: 1px solid #999;
  background: #f4f4f4; cursor: pointer; }
nav button.active { background: #2b5fad; color: white; border-color: #2b5fad; }
section { display: none; margin-top: 1em; }
section.active { display: block; }
table { border-collapse: collapse; }
th, td { border: 1px solid #ccc; padding: 2px 6px; text-align: center; }
th.ns { background: #e8eef8; }
th.pod { font-weight: normal; white-space: nowrap; }
td.allow { background: #bfe5bf; }
td.deny { background: #f2b8b5; }
td.none { background: #eee; color: #999; }
td.cell { cursor: pointer; min-width: 1.5em; }
td.selected { outline: 2px solid #222; }
#netpol-detail { margin-top: 1em; min-height: 1.5em; font-family: monospace; }
#netpol-errors { color: #a00; }
.legend span { padding: 0 .5em; margin-right: .5em; }
"#;

const SCRIPT: &str = r#"
"use strict";
const errors = document.getElementById("netpol-errors");
window.addEventListener("error", (e) => {
  errors.textContent += "script error: " + e.message + "\n";
});
function el(tag, attrs, text) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}
function namespaceOf(pod) { return pod.split("/")[0]; }
function podName(pod) { return pod.split("/").slice(1).join("/"); }
// Consecutive runs of pods in one namespace (pods come sorted by namespace).
function groups(pods) {
  const out = [];
  for (const pod of pods) {
    const ns = namespaceOf(pod);
    if (out.length && out[out.length - 1].ns === ns) out[out.length - 1].count++;
    else out.push({ ns, count: 1 });
  }
  return out;
}
function draw(data) {
  const nav = document.getElementById("netpol-tabs");
  const main = document.getElementById("netpol-matrices");
  const detail = document.getElementById("netpol-detail");
  let cells = 0;
  data.matrices.forEach((m, index) => {
    const label = m.protocol + "/" + m.port;
    const button = el("button", { "data-tab": String(index) }, label);
    const section = el("section", { "data-protocol": m.protocol, "data-port": String(m.port) });
    button.addEventListener("click", () => {
      nav.querySelectorAll("button").forEach((b) => b.classList.remove("active"));
      main.querySelectorAll("section").forEach((s) => s.classList.remove("active"));
      button.classList.add("active");
      section.classList.add("active");
    });
    if (index === 0) { button.classList.add("active"); section.classList.add("active"); }
    nav.appendChild(button);
    const table = el("table");
    const nsRow = el("tr");
    nsRow.appendChild(el("th", { colspan: "2", rowspan: "2" }, "from \\ to"));
    for (const g of groups(m.pods)) nsRow.appendChild(el("th", { class: "ns", colspan: String(g.count) }, g.ns));
    const podRow = el("tr");
    for (const pod of m.pods) podRow.appendChild(el("th", { class: "pod", title: pod }, podName(pod)));
    table.append(nsRow, podRow);
    let row = 0;
    for (const g of groups(m.pods)) {
      for (let i = 0; i < g.count; i++, row++) {
        const from = m.pods[row];
        const tr = el("tr");
        if (i === 0) tr.appendChild(el("th", { class: "ns", rowspan: String(g.count) }, g.ns));
        tr.appendChild(el("th", { class: "pod", title: from }, podName(from)));
        m.pods.forEach((to, column) => {
          const code = m.cells[row][column];
          const flow = code < 0 ? null
            : { verdict: code % 2 ? "allow" : "deny", deciding_rule: m.rules[code >> 1] };
          const verdict = flow ? flow.verdict : "none";
          const td = el("td", {
            class: "cell " + verdict,
            "data-from": from,
            "data-to": to,
            "data-verdict": verdict,
            title: flow ? from + " -> " + to + " " + label + ": " + verdict + " (" + flow.deciding_rule + ")"
                        : from + " -> " + to + ": not defined",
          }, flow ? (flow.verdict === "allow" ? "." : "X") : "-");
          td.addEventListener("click", () => {
            main.querySelectorAll("td.selected").forEach((c) => c.classList.remove("selected"));
            td.classList.add("selected");
            detail.textContent = td.title;
          });
          tr.appendChild(td);
          cells++;
        });
        table.appendChild(tr);
      }
    }
    section.appendChild(table);
    main.appendChild(section);
  });
  const status = document.getElementById("netpol-status");
  status.setAttribute("data-cells", String(cells));
  status.textContent = "drew " + cells + " cells in " + data.matrices.length + " matrices";
}
draw(JSON.parse(document.getElementById("netpol-data").textContent));
"#;

/// The whole page for `data` (the `--output json` value), titled `title`.
pub fn page(title: &str, data: &impl Serialize) -> String {
    let json = serde_json::to_string(data).expect("matrix data serializes");
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{title}</title>\n\
         <style>{STYLE}</style>\n</head>\n<body>\n<h1>{title}</h1>\n\
         <p class=\"legend\"><span class=\"allow\" style=\"background:#bfe5bf\">. allowed</span>\
         <span style=\"background:#f2b8b5\">X denied</span><span style=\"background:#eee\">- no flow</span>\
         Hover over a cell for the deciding rule, or click it.</p>\n\
         <nav id=\"netpol-tabs\"></nav>\n<div id=\"netpol-matrices\"></div>\n\
         <div id=\"netpol-detail\"></div>\n<pre id=\"netpol-errors\"></pre>\n\
         <p id=\"netpol-status\" data-cells=\"\">the script did not run</p>\n\
         <script id=\"netpol-data\" type=\"application/json\">{data}</script>\n\
         <script>{SCRIPT}</script>\n</body>\n</html>\n",
        title = escape_text(title),
        data = script_safe(&json),
    )
}

/// JSON that cannot end its `<script>` element early: `<` only occurs inside JSON strings,
/// where `\u003c` means the same.
fn script_safe(json: &str) -> String {
    json.replace('<', "\\u003c")
}

fn escape_text(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_cannot_close_the_script_and_the_page_fetches_nothing() {
        let page = page(
            "a <b>",
            &serde_json::json!({"matrices": [], "x": "</script><script>alert(1)</script>"}),
        );
        assert_eq!(page.matches("</script>").count(), 2, "{page}");
        assert!(page.contains("<title>a &lt;b&gt;</title>"));
        for external in ["src=", "href=", "http://", "https://", "@import"] {
            assert!(!page.contains(external), "{external} in the page");
        }
    }
}
