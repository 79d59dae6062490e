//! `matrix --output html`: one self-contained page (inline CSS and script, no external fetches)
//! showing each protocol/port's matrix as a coloured grid grouped by namespace, one tab per
//! protocol/port, the deciding rule in each cell's tooltip and, on click, in a detail line.
//!
//! Rows and columns are the groups of `--output json` (workloads, or pods with `--per-pod`),
//! then its `others`, nodes under the header `(nodes)` and regions outside the cluster under
//! `(outside the cluster)`, as the text output has them:
//! the page carries the groups with their pods once and, per matrix, each distinct deciding rule
//! once and one number per pair of groups naming its verdict and rule (the per-direction detail
//! is left out), and builds its tables in the browser, so the two cannot disagree and a page
//! grows with workloads squared, not pods squared. Runs of equal cells in a row are written
//! once with their length, the most used rules numbered first, and a row equal to an earlier
//! one as that row's position.
//!
//! What is shown follows the address's fragment, so that a view can be linked to and the
//! browser's back button returns from it; the "Show" filter and the overview set it:
//!
//! - `#all`: every group against every group (the first view of a page of up to 300 groups, or
//!   of one namespace);
//! - `#overview` (a page of more than one namespace): one square per pair of namespaces, drawn
//!   on a canvas, green where every pair of their groups is allowed, red where every one is
//!   denied, amber where some are, grey where no flow is defined (the first view of a page of
//!   more than 300 groups: thousands of rows squared do not draw in a browser);
//! - `#namespace=NS`: the groups of one namespace against each other;
//! - `#pair=FROM,TO`: the groups of namespace `FROM` (rows) against those of `TO` (columns), as a
//!   click on an overview square opens.
//!
//! Where a policy is in audit mode (`netpol.io/enforcement: audit`), an allowed cell the audited
//! policies would deny is drawn as the text output's `a` (class `would-deny`, attribute
//! `data-would-deny`, its verdict still `allow`) and the legend explains it; the overview
//! counts such a pair as allowed, as the enforced verdict is.
//!
//! Any other fragment opens the first view. Clicking a row or column head lists the group's
//! pods. When it has drawn a view the script sets a hidden marker, `<p id="netpol-status"
//! data-view="overview|all|namespace|pair" data-cells="N" data-shown="ROWS" data-columns="COLUMNS">`
//! (cells counts table cells over every tab, 0 on the overview), and each overview canvas its
//! counts of namespace pairs by colour (`data-allow`, `data-deny`, `data-mixed`, `data-none`,
//! and `data-namespaces`); a script error is written into `#netpol-errors` instead, so a
//! headless browser can tell that the page worked.

use std::collections::HashMap;

use netpol_engine::flow::FlowDecisionRef;
use serde::Serialize;

use super::describe;
use crate::decide::audit::{Audit, AuditedCells};
use crate::decide::class_matrix::{Matrix, Party};
use crate::decide::workload_rows::Group;

/// What the page draws: the groups of `--output json` and, per matrix, one number per pair of
/// groups.
#[derive(Debug, Serialize)]
pub struct PageData {
    /// The rows and columns, by namespace: workloads, or pods with `--per-pod`.
    pub groups: Vec<PageGroup>,
    pub matrices: Vec<PageMatrix>,
    /// Whether a policy is in audit mode (`netpol.io/enforcement: audit`): the legend then
    /// explains the would-deny mark.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub audit: bool,
}

#[derive(Debug, Serialize)]
pub struct PageGroup {
    /// As JSON's `from` and `to` name it (a node or region as JSON's `others` do).
    pub label: String,
    /// Its header: the pods' namespace, or [`NODES`] or [`OUTSIDE`].
    pub namespace: String,
    /// Its head under the header: the label less the namespace.
    pub name: String,
    /// `node` or `outside`; absent for pods.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<&'static str>,
    /// Its pods, shown on demand (a node or region: itself).
    pub pods: Vec<String>,
}

/// The header of the nodes' rows and columns (no namespace can be so named).
pub const NODES: &str = "(nodes)";
/// The header of the rows and columns of regions outside the cluster.
pub const OUTSIDE: &str = "(outside the cluster)";

#[derive(Debug, Serialize)]
pub struct PageMatrix {
    pub protocol: String,
    pub port: u16,
    /// Each distinct deciding rule, once.
    pub rules: Vec<String>,
    /// Per row (`from`, by position in `groups`), its cells (`to`) as runs: `[code, count, code,
    /// count, ...]`, `count` consecutive cells holding `code`: [`UNDEFINED`], or `2 * rule + 1`
    /// when allowed and `2 * rule` when denied, `rule` indexing `rules` (most used first); or,
    /// for a row equal to an earlier one, that row's position.
    pub cells: Vec<PageRow>,
    /// The rules (by index) whose allowed cells a policy in audit mode would deny: such a
    /// cell's rule names both the allowing rules and what would deny it, so that no code is
    /// added per cell. Absent where nothing is a would-deny.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub would_deny: Vec<i64>,
}

/// One row's cells: as runs, or the same as an earlier row (the replicas of a workload split
/// into groups, stand-ins of namespaces alike: at 10,000 pods 1,079 distinct rows of 2,462).
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum PageRow {
    Runs(Vec<i64>),
    SameAs(usize),
}

/// A cell with no flow (a pod to itself, or across address families).
pub const UNDEFINED: i64 = -1;

impl PageMatrix {
    fn new(audited: &AuditedCells<'_, '_>, groups: usize, matrix: &Matrix) -> Self {
        let mut rules: Vec<String> = Vec::new();
        let mut would_deny_rules: Vec<bool> = Vec::new();
        let mut rule_index: HashMap<String, i64> = HashMap::new();
        let mut code = |decision: FlowDecisionRef, would_deny: Option<FlowDecisionRef>| {
            let mut rule = describe::deciding_rules(decision);
            if let Some(would_be) = would_deny {
                rule = format!("{rule}; {}", describe::would_deny_flow(would_be));
            }
            let next = rule_index.len() as i64;
            let index = *rule_index.entry(rule.clone()).or_insert_with(|| {
                rules.push(rule);
                would_deny_rules.push(would_deny.is_some());
                next
            });
            2 * index + i64::from(decision.allowed())
        };
        // Each distinct decision (with its would-be decision, where a would-deny) is described
        // once.
        let mut codes: HashMap<(u32, Option<u32>), i64> = HashMap::new();
        let mut cells: Vec<Vec<i64>> = (0..groups)
            .map(|a| {
                let mut row: Vec<i64> = Vec::new();
                for b in 0..groups {
                    let flow = audited.code(a, b);
                    let would_deny = audited.would_deny_code(a, b);
                    let cell = match matrix.decisions.get(flow) {
                        None => UNDEFINED,
                        Some(d) => *codes
                            .entry((flow, would_deny))
                            .or_insert_with(|| code(d, would_deny.and(audited.would_deny(a, b)))),
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
        let would_deny = (0..rules.len())
            .filter(|&new| would_deny_rules[order[new]])
            .map(|new| new as i64)
            .collect();
        let rules = order
            .into_iter()
            .map(|r| std::mem::take(&mut rules[r]))
            .collect();
        let mut first_of: HashMap<Vec<i64>, usize> = HashMap::new();
        let cells = cells
            .into_iter()
            .enumerate()
            .map(|(at, row)| match first_of.get(&row) {
                Some(&first) => PageRow::SameAs(first),
                None => {
                    first_of.insert(row.clone(), at);
                    PageRow::Runs(row)
                }
            })
            .collect();
        PageMatrix {
            protocol: matrix.protocol.to_string(),
            port: matrix.port,
            rules,
            cells,
            would_deny,
        }
    }
}

impl PageData {
    /// The page of `matrices` between the `groups` of `parties`: pods' groups (under their
    /// namespaces), then nodes and regions outside the cluster (under [`NODES`] and
    /// [`OUTSIDE`]), as the text output has them; cells a policy in audit mode would deny
    /// (`audit`) are marked.
    pub fn new(parties: &[Party], groups: &[Group], matrices: &[Matrix], audit: &Audit) -> Self {
        PageData {
            groups: groups
                .iter()
                .map(|g| {
                    let first = &parties[g.members[0]];
                    let pods: Vec<String> =
                        g.members.iter().map(|&m| parties[m].to_string()).collect();
                    let (namespace, name, kind) = match first {
                        Party::Pod(pod) => {
                            let name = g.label.strip_prefix(&format!("{}/", pod.namespace));
                            let name = name.unwrap_or(&g.label).to_owned();
                            (pod.namespace.clone(), name, None)
                        }
                        Party::Node { name, .. } => (NODES.to_owned(), name.clone(), Some("node")),
                        Party::Outside(_) => (OUTSIDE.to_owned(), g.label.clone(), Some("outside")),
                    };
                    PageGroup {
                        label: g.label.clone(),
                        namespace,
                        name,
                        kind,
                        pods,
                    }
                })
                .collect(),
            matrices: matrices
                .iter()
                .enumerate()
                .map(|(index, m)| PageMatrix::new(&audit.cells(groups, index, m), groups.len(), m))
                .collect(),
            audit: !audit.is_empty(),
        }
    }
}

const STYLE: &str = r#"
body { font: 14px system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.2em; }
h2 { font-size: 1em; font-weight: normal; }
nav button { font: inherit; padding: .3em .8em; margin-right: .3em; border: 1px solid #999;
  background: #f4f4f4; cursor: pointer; }
nav button.active { background: #2b5fad; color: white; border-color: #2b5fad; }
button.back { font: inherit; margin-left: 1em; cursor: pointer; }
section { display: none; margin-top: 1em; }
section.active { display: block; }
table { border-collapse: collapse; }
th, td { border: 1px solid #ccc; padding: 2px 6px; text-align: center; }
th.ns { background: #e8eef8; }
th.pod { font-weight: normal; white-space: nowrap; }
td.allow { background: #bfe5bf; }
td.deny { background: #f2b8b5; }
td.would-deny { background: #dbe6a0; }
td.none { background: #eee; color: #999; }
td.cell { cursor: pointer; min-width: 1.5em; }
td.selected { outline: 2px solid #222; }
canvas.overview { cursor: pointer; border: 1px solid #ccc; image-rendering: pixelated; }
#netpol-detail { margin-top: 1em; min-height: 1.5em; font-family: monospace; }
#netpol-errors { color: #a00; }
.legend span { padding: 0 .5em; margin-right: .5em; }
"#;

const SCRIPT: &str = r##"
"use strict";
const errors = document.getElementById("netpol-errors");
window.addEventListener("error", (e) => {
  errors.textContent += "script error: " + e.message + "\n";
});
// Groups beyond which the page opens on the overview of namespace pairs (when it has more than
// one namespace): thousands of rows squared do not draw. "all" stays in the filter.
const LARGE = 300;
const COLOURS = { allow: "#bfe5bf", deny: "#f2b8b5", mixed: "#f5d58a", none: "#eeeeee" };
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
// Row `row`'s runs: its own, or those of the earlier row it names as equal.
function runsOf(m, row) {
  const cells = m.cells[row];
  return typeof cells === "number" ? m.cells[cells] : cells;
}
// A row's cells from its runs: [code, count, code, count, ...].
function expand(runs) {
  const out = [];
  for (let i = 0; i < runs.length; i += 2) for (let n = 0; n < runs[i + 1]; n++) out.push(runs[i]);
  return out;
}
function shortName(group) {
  return group.name;
}
// The cells from the groups `rows` to the groups `columns`, under namespace headers.
function drawTable(m, label, groups, rows, columns) {
  const table = el("table");
  // Rules whose allowed cells a policy in audit mode would deny.
  const audited = new Set(m.would_deny || []);
  const nsRow = el("tr");
  nsRow.appendChild(el("th", { colspan: "2", rowspan: "2" }, "from \\ to"));
  for (const r of runs(columns, groups)) nsRow.appendChild(el("th", { class: "ns", colspan: String(r.count) }, r.ns));
  const head = el("tr");
  for (const g of columns) head.appendChild(el("th", { class: "pod", title: groups[g].label, "data-group": String(g) }, shortName(groups[g])));
  table.append(nsRow, head);
  let cells = 0;
  let at = 0;
  for (const r of runs(rows, groups)) {
    for (let i = 0; i < r.count; i++, at++) {
      const row = rows[at];
      const from = groups[row].label;
      const rowCells = expand(runsOf(m, row));
      const tr = el("tr");
      if (i === 0) tr.appendChild(el("th", { class: "ns", rowspan: String(r.count) }, r.ns));
      tr.appendChild(el("th", { class: "pod", title: from, "data-group": String(row) }, shortName(groups[row])));
      for (const column of columns) {
        const to = groups[column].label;
        const code = rowCells[column];
        const verdict = code < 0 ? "none" : (code % 2 ? "allow" : "deny");
        // Allowed, and a policy in audit mode would deny it: the text output's `a`.
        const wouldDeny = code >= 0 && code % 2 === 1 && audited.has(code >> 1);
        const td = document.createElement("td");
        td.className = "cell " + (wouldDeny ? "would-deny" : verdict);
        td.setAttribute("data-from", from);
        td.setAttribute("data-to", to);
        td.setAttribute("data-verdict", verdict);
        if (wouldDeny) td.setAttribute("data-would-deny", "");
        td.title = code < 0 ? from + " -> " + to + ": not defined"
          : from + " -> " + to + " " + label + ": " + verdict + (wouldDeny ? ", would deny (audit)" : "")
            + " (" + m.rules[code >> 1] + ")";
        td.textContent = code < 0 ? "-" : (wouldDeny ? "a" : (code % 2 ? "." : "X"));
        tr.appendChild(td);
        cells++;
      }
      table.appendChild(tr);
    }
  }
  return { table, cells };
}
// The page's namespaces in order of first appearance (`names`), each group's namespace by
// number (`of`), and per group where the run of consecutive groups of its namespace ends
// (`runEnd`: groups come sorted by namespace, but a run is all that is assumed).
function namespaces(groups) {
  const names = [], index = new Map();
  const of = new Int32Array(groups.length), runEnd = new Int32Array(groups.length);
  groups.forEach((g, i) => {
    if (!index.has(g.namespace)) { index.set(g.namespace, names.length); names.push(g.namespace); }
    of[i] = index.get(g.namespace);
  });
  for (let i = groups.length - 1; i >= 0; i--) {
    runEnd[i] = i + 1 < groups.length && of[i + 1] === of[i] ? runEnd[i + 1] : i + 1;
  }
  return { names, index, of, runEnd };
}
// Per pair of namespaces (`from * n + to`), how many pairs of their groups are allowed and how
// many denied: each row's runs are cut where the columns' namespace changes.
function summarize(m, space) {
  const n = space.names.length;
  const allow = new Uint32Array(n * n), deny = new Uint32Array(n * n);
  m.cells.forEach((_, g) => {
    const row = runsOf(m, g);
    const from = space.of[g] * n;
    let column = 0;
    for (let i = 0; i < row.length; i += 2) {
      const code = row[i], end = column + row[i + 1];
      while (code >= 0 && column < end) {
        const stop = Math.min(end, space.runEnd[column]);
        (code % 2 ? allow : deny)[from + space.of[column]] += stop - column;
        column = stop;
      }
      column = end;
    }
  });
  return { allow, deny };
}
// A pair of namespaces' colour: every pair of their groups allowed, every one denied, some of
// each, or no flow defined.
function kind(allow, deny) {
  return allow + deny === 0 ? "none" : (deny === 0 ? "allow" : (allow === 0 ? "deny" : "mixed"));
}
// The whole cluster at a glance: one square per pair of namespaces, sources as rows. Hovering
// names the pair and its counts; a click opens its groups (`open`). The canvas carries its
// counts of squares by colour (`data-allow`, ...) for tests.
function drawOverview(label, space, summary, open, detail) {
  const n = space.names.length;
  const size = Math.max(2, Math.min(16, Math.floor(1000 / n)));
  const canvas = el("canvas", { class: "overview", width: String(n * size), height: String(n * size) });
  const context = canvas.getContext("2d");
  const counts = { allow: 0, deny: 0, mixed: 0, none: 0 };
  for (let a = 0; a < n; a++) {
    for (let b = 0; b < n; b++) {
      const k = kind(summary.allow[a * n + b], summary.deny[a * n + b]);
      counts[k]++;
      context.fillStyle = COLOURS[k];
      context.fillRect(b * size, a * size, size, size);
    }
  }
  for (const [k, c] of Object.entries(counts)) canvas.setAttribute("data-" + k, String(c));
  canvas.setAttribute("data-namespaces", String(n));
  // The square under the mouse (offsets are from inside the canvas's border).
  const square = (e) => {
    const b = Math.floor(e.offsetX / size), a = Math.floor(e.offsetY / size);
    return a >= 0 && a < n && b >= 0 && b < n ? [a, b] : null;
  };
  canvas.addEventListener("mousemove", (e) => {
    const at = square(e);
    if (!at) return;
    const [a, b] = at;
    const allow = summary.allow[a * n + b], deny = summary.deny[a * n + b];
    canvas.title = space.names[a] + " -> " + space.names[b] + " " + label + ": " + allow + " of "
      + (allow + deny) + " pairs of groups allowed";
    detail.textContent = canvas.title + " (click for its groups)";
  });
  canvas.addEventListener("click", (e) => {
    const at = square(e);
    if (at) open({ kind: "pair", from: space.names[at[0]], to: space.names[at[1]] });
  });
  const heading = el("h2", {}, label + ": " + n + " namespaces, sources as rows; " + counts.allow
    + " pairs of namespaces all allowed, " + counts.deny + " all denied, " + counts.mixed
    + " mixed, " + counts.none + " without flows");
  return [heading, canvas];
}
function draw(data) {
  const nav = document.getElementById("netpol-tabs");
  const main = document.getElementById("netpol-matrices");
  const detail = document.getElementById("netpol-detail");
  const filter = document.getElementById("netpol-view");
  const status = document.getElementById("netpol-status");
  const groups = data.groups;
  const space = namespaces(groups);
  if (data.audit) document.getElementById("netpol-legend-audit").hidden = false;
  const first = groups.length > LARGE && space.names.length > 1 ? "overview" : "all";
  // The filter's values are the fragments it opens.
  if (space.names.length > 1) filter.appendChild(el("option", { value: "overview" }, "overview: every pair of namespaces"));
  filter.appendChild(el("option", { value: "all" }, "all " + groups.length + " groups"));
  for (const ns of space.names) filter.appendChild(el("option", { value: fragment({ kind: "namespace", from: ns }) }, "namespace " + ns));
  const sections = [];
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
    main.appendChild(section);
    sections.push({ m, label, section, summary: null });
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
  // The view a fragment names: #overview, #all, #namespace=NS or #pair=FROM,TO; any other (or
  // none) is the page's first view.
  function viewOf(hash) {
    let text = hash.replace(/^#/, "");
    try { text = decodeURIComponent(text); } catch (_) { /* taken as written */ }
    if (text === "all" || (text === "overview" && space.names.length > 1)) return { kind: text };
    if (text.startsWith("namespace=")) return { kind: "namespace", from: text.slice(10), to: text.slice(10) };
    if (text.startsWith("pair=")) {
      const [from, to = from] = text.slice(5).split(",");
      return { kind: "pair", from, to };
    }
    return { kind: first };
  }
  function fragment(view) {
    if (view.kind === "namespace") return "namespace=" + encodeURIComponent(view.from);
    if (view.kind === "pair") return "pair=" + encodeURIComponent(view.from) + "," + encodeURIComponent(view.to);
    return view.kind;
  }
  // Opening a view changes the fragment; the fragment's change draws it (so back and forward work).
  function open(view) { location.hash = fragment(view); }
  function render(view) {
    const inNamespace = (ns) => {
      const number = space.index.get(ns), out = [];
      space.of.forEach((of, i) => { if (of === number) out.push(i); });
      return out;
    };
    const every = groups.map((_, i) => i);
    const [rows, columns] = view.kind === "all" ? [every, every]
      : (view.kind === "overview" ? [[], []] : [inNamespace(view.from), inNamespace(view.to)]);
    // A pair of namespaces is not in the filter; its hidden blank option stands for it.
    filter.value = view.kind === "pair" ? "" : fragment(view);
    let cells = 0;
    for (const s of sections) {
      s.section.replaceChildren();
      if (view.kind === "overview") {
        s.summary = s.summary || summarize(s.m, space);
        s.section.append(...drawOverview(s.label, space, s.summary, open, detail));
        continue;
      }
      if (view.kind !== "all") {
        const missing = [...new Set([view.from, view.to])].filter((ns) => !space.index.has(ns));
        const heading = el("h2", {}, missing.length ? "no namespace " + missing.join(", ") + " on this page"
          : (view.kind === "pair" ? view.from + " -> " + view.to : "namespace " + view.from) + " "
            + s.label + ": " + rows.length + " by " + columns.length + " groups");
        if (space.names.length > 1) {
          const back = el("button", { class: "back" }, "back to the overview");
          back.addEventListener("click", () => open({ kind: "overview" }));
          heading.appendChild(back);
        }
        s.section.appendChild(heading);
        if (missing.length) continue;
      }
      const drawn = drawTable(s.m, s.label, groups, rows, columns);
      s.section.appendChild(drawn.table);
      cells += drawn.cells;
    }
    status.setAttribute("data-view", view.kind);
    status.setAttribute("data-cells", String(cells));
    status.setAttribute("data-shown", String(rows.length));
    status.setAttribute("data-columns", String(columns.length));
  }
  filter.addEventListener("change", () => { location.hash = filter.value; });
  window.addEventListener("hashchange", () => render(viewOf(location.hash)));
  render(viewOf(location.hash));
}
draw(JSON.parse(document.getElementById("netpol-data").textContent));
"##;

/// The whole page for `data` (the `--output json` value), titled `title`.
pub fn page(title: &str, data: &impl Serialize) -> String {
    let json = serde_json::to_string(data).expect("matrix data serializes");
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{title}</title>\n\
         <style>{STYLE}</style>\n</head>\n<body>\n<h1>{title}</h1>\n\
         <p class=\"legend\"><span class=\"allow\" style=\"background:#bfe5bf\">. allowed</span>\
         <span style=\"background:#f2b8b5\">X denied</span>\
         <span id=\"netpol-legend-audit\" style=\"background:#dbe6a0\" hidden>a allowed, and a policy in \
         audit mode (netpol.io/enforcement: audit) would deny it</span><span style=\"background:#f5d58a\">some allowed \
         (overview)</span><span style=\"background:#eee\">- no flow</span>\
         Hover over a cell for the deciding rule, or click it.</p>\n\
         <p><label>Show <select id=\"netpol-view\"><option value=\"\" hidden>a pair of namespaces</option></select></label> \
         Click a row or column head for its pods, a square of the overview for its namespaces' workloads.</p>\n\
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
