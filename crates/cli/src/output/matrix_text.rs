//! A connectivity matrix as text: the scenario form (`matrix -o scenario`, pasted into
//! scenarios; the `--once` summary) and the numbered form `matrix` prints by default.

use std::io::{self, Write};

/// A matrix as scenario text: a header row of destinations, then one row per source with one
/// symbol (`.`, `X`, `-`) per destination, every column as wide as the longest pod name so that
/// the cells line up.
pub fn render(pods: &[String], symbols: &[Vec<char>]) -> Vec<String> {
    let mut text = Vec::new();
    render_rows(&mut text, pods, "", |row| symbols[row].clone()).expect("writes to memory");
    lines(text)
}

/// [`render`] written line by line as each row is asked of `row`, each line after `indent`: a
/// large matrix is never held whole.
pub fn render_rows(
    out: &mut dyn Write,
    pods: &[String],
    indent: &str,
    mut row: impl FnMut(usize) -> Vec<char>,
) -> io::Result<()> {
    let width = pods.iter().map(String::len).max().unwrap_or(1);
    let line = |out: &mut dyn Write, first: &str, rest: &mut dyn Iterator<Item = String>| {
        let mut cells = vec![format!("{first:<width$}")];
        cells.extend(rest.map(|c| format!("{c:<width$}")));
        writeln!(out, "{indent}{}", cells.join("  ").trim_end())
    };
    line(out, "-", &mut pods.iter().cloned())?;
    for (i, pod) in pods.iter().enumerate() {
        line(out, pod, &mut row(i).into_iter().map(String::from))?;
    }
    Ok(())
}

/// A matrix for reading at size: one numbered row per party (`3 shop/web (3 pods)`), and columns
/// headed by the same numbers, so that long names are written once.
pub fn render_numbered(labels: &[String], symbols: &[Vec<char>]) -> Vec<String> {
    let mut text = Vec::new();
    render_numbered_rows(&mut text, labels, "", |row| symbols[row].clone())
        .expect("writes to memory");
    lines(text)
}

/// [`render_numbered`] written line by line as each row is asked of `row`.
pub fn render_numbered_rows(
    out: &mut dyn Write,
    labels: &[String],
    indent: &str,
    mut row: impl FnMut(usize) -> Vec<char>,
) -> io::Result<()> {
    let number_width = labels.len().to_string().len();
    let label_width = labels.iter().map(String::len).max().unwrap_or(0);
    let cell = |text: &str| format!("{text:>number_width$}");
    let head = format!("{:<w$}", "from \\ to", w = number_width + 1 + label_width);
    let mut header = vec![head];
    header.extend((1..=labels.len()).map(|n| cell(&n.to_string())));
    writeln!(out, "{indent}{}", header.join("  ").trim_end())?;
    for (i, label) in labels.iter().enumerate() {
        let mut cells = vec![format!("{:>number_width$} {label:<label_width$}", i + 1)];
        cells.extend(row(i).iter().map(|c| cell(&c.to_string())));
        writeln!(out, "{indent}{}", cells.join("  ").trim_end())?;
    }
    Ok(())
}

fn lines(text: Vec<u8>) -> Vec<String> {
    String::from_utf8(text)
        .expect("names are UTF-8")
        .lines()
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenario_columns_line_up_under_the_longest_name() {
        let pods = vec!["x/a".to_string(), "web/frontend".to_string()];
        assert_eq!(
            render(&pods, &[vec!['-', 'X'], vec!['.', '-']]),
            [
                "-             x/a           web/frontend",
                "x/a           -             X",
                "web/frontend  .             -",
            ]
        );
    }

    #[test]
    fn numbered_rows_head_the_columns() {
        let labels = vec!["shop/web (3 pods)".to_string(), "node n1".to_string()];
        let symbols = vec![vec!['.', '-'], vec!['X', '-']];
        assert_eq!(
            render_numbered(&labels, &symbols),
            [
                "from \\ to            1  2",
                "1 shop/web (3 pods)  .  -",
                "2 node n1            X  -",
            ]
        );
    }
}
