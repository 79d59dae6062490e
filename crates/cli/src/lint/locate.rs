//! Lines of objects and fields in the files they were read from, for SARIF's physical
//! locations. The loader keeps an object's file and position (`documents[1].items[0]`,
//! `objects[2]`), not lines, since 150,000 pods would carry them for nothing; lint finds the
//! few lines its findings name afterwards, in the text, by indentation: block YAML as
//! `kubectl get -o yaml` and most repositories write it. Where a part of the path is written
//! in flow style (`from: [{...}]`) or as JSON, the deepest line found stands for it; where the
//! object itself cannot be found, there is no line (the file is still named).

/// An object's first line and, where found, its field's line (1-based).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lines {
    pub object: usize,
    pub field: Option<usize>,
}

/// A block of lines: from `first` to before `end`, its keys indented by `indent`.
#[derive(Clone, Copy, Debug)]
struct Block {
    first: usize,
    end: usize,
    indent: usize,
}

/// Where the object at `at` and its `field` (`spec.ingress[1].ports[0]`) are in `text`.
pub fn locate(text: &str, at: &str, field: &str) -> Option<Lines> {
    let lines: Vec<&str> = text.lines().collect();
    let block = object_block(&lines, at)?;
    let object = first_content(&lines, block.first, block.end)? + 1;
    let mut found = None;
    let mut current = block;
    for (key, index) in path(field) {
        let Some((line, value)) = key_in(&lines, current, key) else {
            break;
        };
        found = Some(line + 1);
        current = value;
        if let Some(index) = index {
            let Some(item) = item_of(&lines, current, index) else {
                break;
            };
            found = Some(item.first + 1);
            current = item;
        }
    }
    Some(Lines {
        object,
        field: found,
    })
}

/// The segments of a field path: `spec.ingress[1]` is `spec`, then `ingress` item 1.
fn path(field: &str) -> Vec<(&str, Option<usize>)> {
    field
        .split('.')
        .filter(|s| !s.is_empty())
        .map(|segment| match segment.split_once('[') {
            Some((key, rest)) => (key, rest.trim_end_matches(']').parse().ok()),
            None => (segment, None),
        })
        .collect()
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

fn is_content(line: &str) -> bool {
    let t = line.trim_start();
    !t.is_empty() && !t.starts_with('#')
}

fn first_content(lines: &[&str], first: usize, end: usize) -> Option<usize> {
    (first..end).find(|&i| is_content(lines[i]))
}

/// The block of the object at `at`: `documents[N]` then `.items[M]` or `[M]`, or a scenario's
/// `objects[N]`.
fn object_block(lines: &[&str], at: &str) -> Option<Block> {
    let (head, rest) = match at.split_once(']') {
        Some((head, rest)) => (head, rest),
        None => return None,
    };
    let (root, index) = head.split_once('[')?;
    let index: usize = index.parse().ok()?;
    let mut block = match root {
        "documents" => document(lines, index)?,
        "objects" => {
            let whole = Block {
                first: 0,
                end: lines.len(),
                indent: 0,
            };
            let (_, value) = key_in(lines, whole, "objects")?;
            item_of(lines, value, index)?
        }
        _ => return None,
    };
    for (key, index) in path(rest) {
        if !key.is_empty() {
            let (_, value) = key_in(lines, block, key)?;
            block = value;
        }
        block = item_of(lines, block, index?)?;
    }
    Some(block)
}

/// Document `n` of a multi-document file: the text before the first `---` counts only if it
/// holds something, every part after a `---` counts.
fn document(lines: &[&str], n: usize) -> Option<Block> {
    let markers: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i] == "---" || lines[i].starts_with("--- "))
        .collect();
    let mut parts = Vec::new();
    let first_end = markers.first().copied().unwrap_or(lines.len());
    if first_content(lines, 0, first_end).is_some() {
        parts.push((0, first_end));
    }
    for (k, &marker) in markers.iter().enumerate() {
        let end = markers.get(k + 1).copied().unwrap_or(lines.len());
        parts.push((marker + 1, end));
    }
    let &(first, end) = parts.get(n)?;
    let start = first_content(lines, first, end).unwrap_or(first);
    Some(Block {
        first,
        end,
        indent: lines.get(start).map_or(0, |l| indent(l)),
    })
}

/// The line of `key` among `block`'s keys, and the block of its value.
fn key_in(lines: &[&str], block: Block, key: &str) -> Option<(usize, Block)> {
    for i in block.first..block.end {
        let line = lines[i];
        if !is_content(line) {
            continue;
        }
        // The first key of an item shares the dash's line: `- name: x`.
        let (column, text) = key_text(line);
        if column != block.indent {
            continue;
        }
        let text = text.trim_start_matches('"');
        let Some(rest) = text.strip_prefix(key) else {
            continue;
        };
        let rest = rest.trim_start_matches('"');
        if !rest.starts_with(':') {
            continue;
        }
        // The value: the lines below indented deeper than the key, up to the next one that is not.
        let end = (i + 1..block.end)
            .find(|&j| {
                is_content(lines[j]) && indent(lines[j]) <= column && !is_dash_at(lines[j], column)
            })
            .unwrap_or(block.end);
        let inner = first_content(lines, i + 1, end).map_or(column + 2, |j| key_text(lines[j]).0);
        return Some((
            i,
            Block {
                first: i + 1,
                end,
                indent: inner,
            },
        ));
    }
    None
}

/// Whether `line` is a sequence item whose dash is at `column` (YAML lets a key's items sit at
/// the key's own indentation).
fn is_dash_at(line: &str, column: usize) -> bool {
    indent(line) == column && line.trim_start().starts_with('-')
}

/// The column and text of a line's first key: after any `- ` of sequence items.
fn key_text(line: &str) -> (usize, &str) {
    let mut column = indent(line);
    let mut text = line.trim_start();
    while let Some(rest) = text.strip_prefix('-') {
        if !(rest.is_empty() || rest.starts_with(' ')) {
            break;
        }
        let trimmed = rest.trim_start();
        column += text.len() - trimmed.len();
        text = trimmed;
    }
    (column, text)
}

/// Item `n` of the sequence that is `block`'s value.
fn item_of(lines: &[&str], block: Block, n: usize) -> Option<Block> {
    let first = first_content(lines, block.first, block.end)?;
    let dash = indent(lines[first]);
    if !lines[first].trim_start().starts_with('-') {
        return None;
    }
    let starts: Vec<usize> = (first..block.end)
        .filter(|&i| is_dash_at(lines[i], dash))
        .collect();
    let start = *starts.get(n)?;
    let end = starts.get(n + 1).copied().unwrap_or(block.end);
    let column = key_text(lines[start]).0;
    Some(Block {
        first: start,
        end,
        indent: column,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "\
# a comment
apiVersion: v1
kind: Namespace
metadata: {name: x}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: db
  namespace: x
spec:
  podSelector: {}
  ingress:
  - from:
    - podSelector: {}
    ports:
    - port: 80
    - port: 81
  - ports: [{port: 5432}]
---
kind: List
items:
- kind: NetworkPolicy
  metadata: {name: a}
- kind: NetworkPolicy
  metadata: {name: b}
  spec:
    egress:
    - {}
";

    #[test]
    fn objects_and_fields_are_found_by_indentation() {
        let at = |at: &str, field: &str| locate(TEXT, at, field);
        assert_eq!(
            at("documents[0]", "spec"),
            Some(Lines {
                object: 2,
                field: None
            })
        );
        assert_eq!(
            at("documents[1]", "spec.podSelector").unwrap().field,
            Some(12)
        );
        assert_eq!(
            at("documents[1]", "spec.ingress[0]").unwrap().field,
            Some(14)
        );
        assert_eq!(
            at("documents[1]", "spec.ingress[0].ports[1]")
                .unwrap()
                .field,
            Some(18)
        );
        assert_eq!(
            at("documents[1]", "spec.ingress[1]").unwrap().field,
            Some(19)
        );
        // Flow style: the deepest line found stands for the field.
        assert_eq!(
            at("documents[1]", "spec.ingress[1].ports[0]")
                .unwrap()
                .field,
            Some(19)
        );
        let b = at("documents[2].items[1]", "spec.egress[0]").unwrap();
        assert_eq!(b.object, 25);
        assert_eq!(b.field, Some(29));
        assert_eq!(at("documents[3]", "spec"), None);
    }

    #[test]
    fn scenario_objects_are_found_in_their_list() {
        let text = "name: s\nobjects:\n- kind: Namespace\n  metadata: {name: x}\n- kind: NetworkPolicy\n  spec:\n    podSelector: {}\n";
        let found = locate(text, "objects[1]", "spec.podSelector").unwrap();
        assert_eq!(found.object, 5);
        assert_eq!(found.field, Some(7));
    }
}
