//! A connectivity matrix as scenario text, the grid `matrix` prints and the `--once` summary
//! shows.

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
