//! Policies in audit mode (`netpol.io/enforcement: audit`) in `matrix`: each matrix beside its
//! would-be view (the same matrix with every policy enforced), so that the text, JSON, HTML and
//! scenario outputs mark the same flows as would-denies: allowed, and denied were the audited
//! policies enforced.

use netpol_engine::flow::FlowDecisionRef;
use serde::Serialize;

use super::class_matrix::Matrix;
use super::workload_rows::{Group, Grouped};

/// The text symbol of an allowed flow a policy in audit mode would deny.
pub const WOULD_DENY: char = 'a';

/// The would-be matrices (policies in audit mode enforced), one per probe in the order of the
/// matrices; empty where no policy is in audit mode.
pub struct Audit<'a> {
    would_be: &'a [Matrix],
}

impl<'a> Audit<'a> {
    pub fn new(would_be: &'a [Matrix]) -> Self {
        Audit { would_be }
    }

    /// Whether no policy is in audit mode (no would-be view, nothing to mark).
    pub fn is_empty(&self) -> bool {
        self.would_be.is_empty()
    }

    /// Matrix `index` (`matrix`) between `groups`, with its would-be view where there is one.
    pub fn cells<'g, 'm>(
        &self,
        groups: &'g [Group],
        index: usize,
        matrix: &'m Matrix,
    ) -> AuditedCells<'g, 'm>
    where
        'a: 'm,
    {
        AuditedCells {
            groups,
            matrix,
            grouped: Grouped::new(groups, matrix),
            would_be: self
                .would_be
                .get(index)
                .map(|would_be| (would_be, Grouped::new(groups, would_be))),
        }
    }
}

/// One matrix's cells between groups and, where a policy is in audit mode, its would-be
/// view's (grouped once per matrix: grouping costs every pod).
pub struct AuditedCells<'g, 'm> {
    groups: &'g [Group],
    matrix: &'m Matrix,
    grouped: Grouped<'g>,
    would_be: Option<(&'m Matrix, Grouped<'g>)>,
}

impl<'m> AuditedCells<'_, 'm> {
    /// The enforced decision from group `a` to group `b`, None where no flow is defined.
    pub fn cell(&self, a: usize, b: usize) -> Option<FlowDecisionRef<'m>> {
        self.grouped.cell(self.matrix, a, b)
    }

    /// The enforced decision's code (a position in the matrix's `decisions`, or
    /// [`super::directions::UNDEFINED`]) from group `a` to group `b`.
    pub fn code(&self, a: usize, b: usize) -> u32 {
        self.grouped.code(self.matrix, a, b)
    }

    /// The would-be decision's code (a position in the would-be matrix's `decisions`) from
    /// group `a` to group `b` where the flow is allowed and a policy in audit mode would deny
    /// it; None otherwise.
    pub fn would_deny_code(&self, a: usize, b: usize) -> Option<u32> {
        let (would_be, grouped) = self.would_be.as_ref()?;
        if !self.cell(a, b)?.allowed() {
            return None;
        }
        let code = grouped.code(would_be, a, b);
        would_be
            .decisions
            .get(code)
            .filter(|decision| !decision.allowed())
            .map(|_| code)
    }

    /// The would-be decision of [`AuditedCells::would_deny_code`]'s flow.
    pub fn would_deny(&self, a: usize, b: usize) -> Option<FlowDecisionRef<'m>> {
        let code = self.would_deny_code(a, b)?;
        self.would_be.as_ref()?.0.decisions.get(code)
    }

    /// Row `a`'s symbols (`.`, `X`, `-`), with [`WOULD_DENY`] where the flow is allowed and a
    /// policy in audit mode would deny it.
    pub fn symbol_row(&self, a: usize) -> Vec<char> {
        (0..self.groups.len())
            .map(|b| match self.would_deny(a, b) {
                Some(_) => WOULD_DENY,
                None => Matrix::symbol(self.cell(a, b)),
            })
            .collect()
    }

    /// The flows between groups that are allowed and that a policy in audit mode would deny;
    /// None where no policy is in audit mode.
    pub fn would_deny_flows(&self) -> Option<Vec<FromTo>> {
        self.would_be.as_ref()?;
        let n = self.groups.len();
        let flows = (0..n)
            .flat_map(|a| (0..n).map(move |b| (a, b)))
            .filter(|&(a, b)| self.would_deny(a, b).is_some())
            .map(|(a, b)| FromTo {
                from: self.groups[a].label.clone(),
                to: self.groups[b].label.clone(),
            })
            .collect();
        Some(flows)
    }
}

/// A flow between two groups (or a group and another party), by label.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FromTo {
    pub from: String,
    pub to: String,
}
