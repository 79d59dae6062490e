//! The output forms of the authoring tools: the JSON structs every `--output json` shares, JUnit
//! for `check`, the self-contained HTML matrix page, the text grid, and how flows and rules are
//! described in all of them.

pub mod cells;
pub mod chain;
pub mod describe;
pub mod html;
pub mod junit;
pub mod matrix_text;
pub mod report;
