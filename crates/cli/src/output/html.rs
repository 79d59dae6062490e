//! `matrix --output html`: one self-contained page (inline CSS and script, no external fetches)
//! showing each protocol/port's matrix as a coloured grid grouped by namespace, one tab per
//! protocol/port, the deciding rule in each cell's tooltip and, on click, in a detail line.
//!
//! Rows and columns are the groups of `--output json` (workloads, or pods with `--per-pod`):
//! the page carries the groups with their pods once and, per matrix, each distinct deciding rule
//! once and one number per pair of groups naming its verdict and rule (the per-direction detail
//! is left out), and builds its tables in the browser, so the two cannot disagree and a page
//! grows with workloads squared, not pods squared. A namespace filter redraws the tables for
//! one namespace's groups (a page of more than 300 groups opens on its first namespace); runs
//! of equal cells in a row are written once with their length, the most used rules numbered
//! first; clicking a row or column head lists the group's pods. When it has
//! drawn the tables it sets a hidden marker, `<p id="netpol-status" data-cells="N">`; a script
//! error is written into `#netpol-errors` instead, so a headless browser can tell that the page
//! worked.

use std::collections::HashMap;

use netpol_engine::flow::FlowDecisionRef;
use serde::Serialize;

use super::describe;
use crate::decide::groups::{Group, Grouped};
use crate::decide::matrix::{Matrix, Party};

/// What the page draws: the groups of `--output json` and, per matrix, one number per pair of
/// groups.
#[derive(Debug, Serialize)]
pub struct PageData {
    /// The rows and columns, by namespace: workloads, or pods with `--per-pod`.
    pub groups: Vec<PageGroup>,
    pub matrices: Vec<PageMatrix>,
}

#[derive(Debug, Serialize)]
pub struct PageGroup {
    /// As JSON's `from` and `to` name it.
    pub label: String,
    pub namespace: String,
    /// Its pods, shown on demand.
    pub pods: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct PageMatrix {
    pub protocol: String,
    pub port: u16,
    /// Each distinct deciding rule, once.
    pub rules: Vec<String>,
    /// Per row (`from`, by position in `groups`), its cells (`to`) as runs: `[code, count, code,
    /// count, ...]`, `count` consecutive cells holding `code`: [`UNDEFINED`], or `2 * rule + 1`
    /// when allowed and `2 * rule` when denied, `rule` indexing `rules` (most used first).
    pub cells: Vec<Vec<i64>>,
}

/// A cell with no flow (a pod to itself, or across address families).
pub const UNDEFINED: i64 = -1;

impl PageMatrix {
    fn new(groups: &[Group], matrix: &Matrix) -> Self {
        let mut rules: Vec<String> = Vec::new();
        let mut rule_index: HashMap<String, i64> = HashMap::new();
        let mut code = |decision: FlowDecisionRef| {
            let rule = describe::deciding_rules(decision);
            let next = rule_index.len() as i64;
            let index = *rule_index.entry(rule.clone()).or_insert_with(|| {
                rules.push(rule);
                next
            });
            2 * index + i64::from(decision.allowed())
        };
        // Each distinct decision is described once.
        let mut codes: HashMap<u32, i64> = HashMap::new();
        let grouped = Grouped::new(groups, matrix);
        let mut cells: Vec<Vec<i64>> = (0..groups.len())
            .map(|a| {
                let mut row: Vec<i64> = Vec::new();
                for b in 0..groups.len() {
                    let flow = grouped.code(matrix, a, b);
                    let cell = match matrix.decisions.get(flow) {
                        None => UNDEFINED,
                        Some(d) => *codes.entry(flow).or_insert_with(|| code(d)),
                    };
                    match row.len() {
                        n if n >= 2 && row[n - 2] == cell => row[n - 1] += 1,
                        _ => row.extend([cell, 1]),
                    }
                }
                row
            })
            .collect();
        // Rules numbered by how many runs name them, so that the common ones are short.
        let mut runs = vec![0usize; rules.len()];
        for row in &cells {
            for &cell in row.iter().step_by(2).filter(|&&c| c != UNDEFINED) {
                runs[(cell >> 1) as usize] += 1;
            }
        }
        let mut order: Vec<usize> = (0..rules.len()).collect();
        order.sort_by_key(|&r| std::cmp::Reverse(runs[r]));
        let mut renumbered = vec![0i64; rules.len()];
        for (new, &old) in order.iter().enumerate() {
            renumbered[old] = new as i64;
        }
        for row in &mut cells {
            for cell in row.iter_mut().step_by(2).filter(|c| **c != UNDEFINED) {
                *cell = 2 * renumbered[(*cell >> 1) as usize] + (*cell & 1);
            }
        }
        let rules = order
            .into_iter()
            .map(|r| std::mem::take(&mut rules[r]))
            .collect();
        PageMatrix {
            protocol: matrix.protocol.to_string(),
            port: matrix.port,
            rules,
            cells,
        }
    }
}

impl PageData {
    /// The page of `matrices` between the pod `groups` of `parties`.
    pub fn new(parties: &[Party], groups: &[Group], matrices: &[Matrix]) -> Self {
        PageData {
            groups: groups
                .iter()
                .map(|g| {
                    let pods: Vec<String> =
                        g.members.iter().map(|&m| parties[m].to_string()).collect();
                    PageGroup {
                        label: g.label.clone(),
                        namespace: pods[0].split('/').next().unwrap_or_default().to_owned(),
                        pods,
                    }
                })
                .collect(),
            matrices: matrices
                .iter()
                .map(|m| PageMatrix::new(groups, m))
                .collect(),
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
// Groups beyond which the page opens on one namespace ("all" stays in the filter).
const LARGE = 300;
function el(tag, attrs, text) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}
// Consecutive runs of groups in one namespace (groups come sorted by namespace).
function runs(shown, groups) {
  const out = [];
  for (const g of shown) {
    const ns = groups[g].namespace;
    if (out.length && out[out.length - 1].ns === ns) out[out.length - 1].count++;
    else out.push({ ns, count: 1 });
  }
  return out;
}
// A row's cells from its runs: [code, count, code, count, ...].
function expand(runs) {
  const out = [];
  for (let i = 0; i < runs.length; i += 2) for (let n = 0; n < runs[i + 1]; n++) out.push(runs[i]);
  return out;
}
function shortName(group) {
  const slash = group.label.indexOf("/");
  return slash < 0 ? group.label : group.label.slice(slash + 1);
}
function drawTable(m, label, groups, shown) {
  const table = el("table");
  const nsRow = el("tr");
  nsRow.appendChild(el("th", { colspan: "2", rowspan: "2" }, "from \\ to"));
  for (const r of runs(shown, groups)) nsRow.appendChild(el("th", { class: "ns", colspan: String(r.count) }, r.ns));
  const head = el("tr");
  for (const g of shown) head.appendChild(el("th", { class: "pod", title: groups[g].label, "data-group": String(g) }, shortName(groups[g])));
  table.append(nsRow, head);
  let cells = 0;
  let at = 0;
  for (const r of runs(shown, groups)) {
    for (let i = 0; i < r.count; i++, at++) {
      const row = shown[at];
      const from = groups[row].label;
      const rowCells = expand(m.cells[row]);
      const tr = el("tr");
      if (i === 0) tr.appendChild(el("th", { class: "ns", rowspan: String(r.count) }, r.ns));
      tr.appendChild(el("th", { class: "pod", title: from, "data-group": String(row) }, shortName(groups[row])));
      for (const column of shown) {
        const to = groups[column].label;
        const code = rowCells[column];
        const verdict = code < 0 ? "none" : (code % 2 ? "allow" : "deny");
        const td = document.createElement("td");
        td.className = "cell " + verdict;
        td.setAttribute("data-from", from);
        td.setAttribute("data-to", to);
        td.setAttribute("data-verdict", verdict);
        td.title = code < 0 ? from + " -> " + to + ": not defined"
          : from + " -> " + to + " " + label + ": " + verdict + " (" + m.rules[code >> 1] + ")";
        td.textContent = code < 0 ? "-" : (code % 2 ? "." : "X");
        tr.appendChild(td);
        cells++;
      }
      table.appendChild(tr);
    }
  }
  return { table, cells };
}
function draw(data) {
  const nav = document.getElementById("netpol-tabs");
  const main = document.getElementById("netpol-matrices");
  const detail = document.getElementById("netpol-detail");
  const filter = document.getElementById("netpol-namespace");
  const groups = data.groups;
  const namespaces = [...new Set(groups.map((g) => g.namespace))];
  for (const ns of namespaces) filter.appendChild(el("option", { value: ns }, ns));
  // A large matrix opens on its first namespace: thousands of rows squared do not draw.
  if (groups.length > LARGE && namespaces.length > 1) filter.value = namespaces[0];
  const sections = [];
  let active = 0;
  data.matrices.forEach((m, index) => {
    const label = m.protocol + "/" + m.port;
    const button = el("button", { "data-tab": String(index) }, label);
    const section = el("section", { "data-protocol": m.protocol, "data-port": String(m.port) });
    button.addEventListener("click", () => {
      nav.querySelectorAll("button").forEach((b) => b.classList.remove("active"));
      main.querySelectorAll("section").forEach((s) => s.classList.remove("active"));
      button.classList.add("active");
      section.classList.add("active");
      active = index;
    });
    if (index === 0) { button.classList.add("active"); section.classList.add("active"); }
    nav.appendChild(button);
    main.appendChild(section);
    sections.push({ m, label, section });
  });
  // One listener for every cell and header: a cell's rule, or a group's pods, on click.
  main.addEventListener("click", (e) => {
    const target = e.target;
    if (target.tagName === "TD") {
      main.querySelectorAll("td.selected").forEach((c) => c.classList.remove("selected"));
      target.classList.add("selected");
      detail.textContent = target.title;
    } else if (target.hasAttribute && target.hasAttribute("data-group")) {
      const g = groups[Number(target.getAttribute("data-group"))];
      detail.textContent = g.label + ": " + g.pods.join(", ");
    }
  });
  function redraw() {
    const ns = filter.value;
    const shown = [];
    groups.forEach((g, i) => { if (ns === "" || g.namespace === ns) shown.push(i); });
    let cells = 0;
    for (const s of sections) {
      s.section.replaceChildren();
      const drawn = drawTable(s.m, s.label, groups, shown);
      s.section.appendChild(drawn.table);
      cells += drawn.cells;
    }
    const status = document.getElementById("netpol-status");
    status.setAttribute("data-cells", String(cells));
    status.setAttribute("data-shown", String(shown.length));
  }
  filter.addEventListener("change", redraw);
  redraw();
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
         <p><label>Namespace <select id=\"netpol-namespace\"><option value=\"\">all</option></select></label> \
         Click a row or column head for its pods.</p>\n\
         <nav id=\"netpol-tabs\"></nav>\n<div id=\"netpol-matrices\"></div>\n\
         <div id=\"netpol-detail\"></div>\n<pre id=\"netpol-errors\"></pre>\n\
         <p id=\"netpol-status\" data-cells=\"\" hidden></p>\n\
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
