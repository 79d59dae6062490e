//! `matrix --output json`'s compact cells: per matrix each distinct direction decision and each
//! distinct flow decision once, and per source party its destinations as runs of consecutive
//! parties with one decision. A matrix of thousands of workloads is then as large as what
//! differs along its rows, not workloads squared times a decision's description.

use netpol_engine::reference::Decision;
use serde::ser::{SerializeSeq, SerializeStruct};
use serde::{Serialize, Serializer};

use super::describe;
use super::report::DirectionJson;
use crate::decide::class_matrix::{Matrix, UNDEFINED};
use crate::decide::workload_rows::{Group, Grouped};

/// A flow decision by its directions: positions in [`Cells::directions`].
#[derive(Debug, Serialize)]
pub struct DecisionRef {
    /// `allow` or `deny`.
    pub verdict: &'static str,
    /// Absent where the source is not a pod.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub egress: Option<u32>,
    /// Absent where the destination is not a pod.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ingress: Option<u32>,
}

/// The cells of one matrix between parties numbered as `groups` then `others` list them.
pub struct Cells<'a> {
    matrix: &'a Matrix,
    groups: &'a [Group],
    /// Each distinct direction decision once.
    directions: &'a [Decision],
    /// Per flow decision of the matrix (by code): its entry in `decisions`.
    decisions: Vec<DecisionRef>,
}

impl<'a> Cells<'a> {
    /// `groups` are every party's group, pods' first (as `decide::workload_rows::group` orders them).
    pub fn new(matrix: &'a Matrix, groups: &'a [Group]) -> Self {
        // The matrix holds each distinct direction once and a flow as a pair of them.
        let table = &matrix.decisions;
        let decisions = (0..table.len() as u32)
            .map(|code| {
                let [egress, ingress] = table.halves_of(code);
                DecisionRef {
                    verdict: describe::verdict_word(table.get(code).is_some_and(|d| d.allowed())),
                    egress,
                    ingress,
                }
            })
            .collect();
        Cells {
            matrix,
            groups,
            directions: table.halves(),
            decisions,
        }
    }
}

/// One source party's row: `[first, last, decision]` runs of destinations.
struct Row<'r> {
    from: usize,
    runs: &'r [[u32; 3]],
}

impl Serialize for Row<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut row = serializer.serialize_struct("Row", 2)?;
        row.serialize_field("from", &self.from)?;
        row.serialize_field("to", self.runs)?;
        row.end()
    }
}

/// The rows, made and written one at a time.
struct Rows<'c, 'a>(&'c Cells<'a>);

impl Serialize for Rows<'_, '_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let Cells { matrix, groups, .. } = self.0;
        let grouped = Grouped::new(groups, matrix);
        let mut seq = serializer.serialize_seq(None)?;
        let mut runs: Vec<[u32; 3]> = Vec::new();
        for from in 0..groups.len() {
            runs.clear();
            for to in 0..groups.len() {
                let code = grouped.code(matrix, from, to);
                if code == UNDEFINED {
                    continue;
                }
                match runs.last_mut() {
                    Some(run) if run[1] + 1 == to as u32 && run[2] == code => run[1] += 1,
                    _ => runs.push([to as u32, to as u32, code]),
                }
            }
            if !runs.is_empty() {
                seq.serialize_element(&Row { from, runs: &runs })?;
            }
        }
        seq.end()
    }
}

impl Serialize for Cells<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut cells = serializer.serialize_struct("Cells", 3)?;
        let directions: Vec<DirectionJson> = self.directions.iter().map(Into::into).collect();
        cells.serialize_field("directions", &directions)?;
        cells.serialize_field("decisions", &self.decisions)?;
        cells.serialize_field("rows", &Rows(self))?;
        cells.end()
    }
}
