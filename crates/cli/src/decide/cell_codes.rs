//! The cells of a matrix as decision codes: every cell, or only some whole rows and columns.
//! `diff` asks a matrix only for the rows and columns of the classes that may change (see
//! `changing.rs`): at 150,000 pods a dense grid of 18,000 classes squared would be over a
//! gigabyte per side and probe, for the few rows and columns a one-policy change touches.

use std::collections::HashMap;

use super::directions::UNDEFINED;

/// A grid of `rows × width` decision codes.
#[derive(Debug)]
pub struct Grid {
    width: usize,
    /// Every cell, row by row; empty when the grid is sparse.
    dense: Vec<u32>,
    /// Whole rows and whole columns: every other cell is [`UNDEFINED`].
    rows: HashMap<u32, Box<[u32]>>,
    columns: HashMap<u32, Box<[u32]>>,
}

impl Grid {
    /// A grid of every cell, given row by row.
    pub fn dense(width: usize, cells: Vec<u32>) -> Grid {
        Grid {
            width,
            dense: cells,
            rows: HashMap::new(),
            columns: HashMap::new(),
        }
    }

    /// A grid of `height × width` cells holding the rows `rows` says and the columns `columns`
    /// says, each cell decided once by `decide(row, column)` (rows first, then the columns'
    /// cells outside those rows, in order).
    pub fn lines(
        height: usize,
        width: usize,
        rows: &dyn Fn(usize) -> bool,
        columns: &dyn Fn(usize) -> bool,
        decide: &mut dyn FnMut(usize, usize) -> u32,
    ) -> Grid {
        let mut grid = Grid {
            width,
            dense: Vec::new(),
            rows: HashMap::new(),
            columns: HashMap::new(),
        };
        for r in (0..height).filter(|&r| rows(r)) {
            let row = (0..width).map(|c| decide(r, c)).collect();
            grid.rows.insert(r as u32, row);
        }
        for c in (0..width).filter(|&c| columns(c)) {
            let column = (0..height)
                .map(|r| match grid.rows.get(&(r as u32)) {
                    Some(row) => row[c],
                    None => decide(r, c),
                })
                .collect();
            grid.columns.insert(c as u32, column);
        }
        grid
    }

    /// The code at `row`, `column`: [`UNDEFINED`] where a sparse grid holds no line through it.
    pub fn get(&self, row: usize, column: usize) -> u32 {
        if !self.dense.is_empty() {
            return self.dense[row * self.width + column];
        }
        if let Some(line) = self.rows.get(&(row as u32)) {
            return line[column];
        }
        match self.columns.get(&(column as u32)) {
            Some(line) => line[row],
            None => UNDEFINED,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_hold_their_cells_and_nothing_else_decides_twice() {
        let mut asked = Vec::new();
        let grid = Grid::lines(4, 3, &|r| r == 1, &|c| c == 2, &mut |r, c| {
            asked.push((r, c));
            (10 * r + c) as u32
        });
        assert_eq!(
            asked,
            [(1, 0), (1, 1), (1, 2), (0, 2), (2, 2), (3, 2)],
            "each cell once"
        );
        for r in 0..4 {
            for c in 0..3 {
                let wanted = if r == 1 || c == 2 {
                    (10 * r + c) as u32
                } else {
                    UNDEFINED
                };
                assert_eq!(grid.get(r, c), wanted, "{r} {c}");
            }
        }
        let dense = Grid::dense(2, vec![1, 2, 3, 4]);
        assert_eq!((dense.get(0, 1), dense.get(1, 0)), (2, 3));
    }
}
