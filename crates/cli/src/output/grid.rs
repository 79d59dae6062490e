//! A connectivity matrix as text: the scenario form (`matrix -o scenario`, pasted into
//! scenarios; the `--once` summary) and the numbered form `matrix` prints by default.

/// A matrix as scenario text: a header row of destinations, then one row per source with one
/// symbol (`.`, `X`, `-`) per destination, every column as wide as the longest pod name so that
/// the cells line up.
pub fn render(pods: &[String], symbols: &[Vec<char>]) -> Vec<String> {
    let width = pods.iter().map(String::len).max().unwrap_or(1);
    let row = |first: &str, rest: Vec<String>| {
        let mut cells = vec![format!("{first:<width$}")];
        cells.extend(rest.iter().map(|c| format!("{c:<width$}")));
        cells.join("  ").trim_end().to_owned()
    };
    let mut lines = vec![row("-", pods.to_vec())];
    for (pod, cells) in pods.iter().zip(symbols) {
        lines.push(row(pod, cells.iter().map(char::to_string).collect()));
    }
    lines
}

/// A matrix for reading at size: one numbered row per party (`3 shop/web (3 pods)`), and columns
/// headed by the same numbers, so that long names are written once.
pub fn render_numbered(labels: &[String], symbols: &[Vec<char>]) -> Vec<String> {
    let number_width = labels.len().to_string().len();
    let label_width = labels.iter().map(String::len).max().unwrap_or(0);
    let cell = |text: &str| format!("{text:>number_width$}");
    let head = format!("{:<w$}", "from \\ to", w = number_width + 1 + label_width);
    let mut header = vec![head];
    header.extend((1..=labels.len()).map(|n| cell(&n.to_string())));
    let mut lines = vec![header.join("  ").trim_end().to_owned()];
    for (i, (label, row)) in labels.iter().zip(symbols).enumerate() {
        let mut cells = vec![format!("{:>number_width$} {label:<label_width$}", i + 1)];
        cells.extend(row.iter().map(|c| cell(&c.to_string())));
        lines.push(cells.join("  ").trim_end().to_owned());
    }
    lines
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
