//! The documentation runs: every link and path that README.md and docs/*.md name exists inside
//! the repository, and every `netpol ...` (or `cargo run ... -p netpol-cli -- ...`) invocation
//! they show parses with the very command-line parser the binary uses.
//!
//! - **Links** `[text](target)`: a target that is not `http(s)://` must resolve, relative to the
//!   page, to a file or folder inside the repository; an `#anchor` into a Markdown page must
//!   name one of its headings.
//! - **Paths** in code (inline and fenced): a word that starts with one of the repository's
//!   top-level folders (`config/...`, `crates/...`) must exist, and none may lead out of the
//!   repository (`../`).
//! - **Commands**: shell words, cut at pipes, `&&`, `;`, redirections and comments. A command in
//!   a fenced block must parse whole. In prose, code names a command more often than it runs one
//!   (`netpol check --datapath nftables` as a heading): the subcommand, every flag and every
//!   value given must parse, but a required argument or a flag's value may be left out, and a
//!   value in capitals is a placeholder (`--workloads KIND`). Synopses
//!   (`netpol acls FILE [--endpoint ns/pod]`) lose their brackets and take the first of `a|b`.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::Parser;
use netpol_cli::cli::Cli;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// README.md and every page under docs/.
fn pages() -> Vec<PathBuf> {
    let root = repo();
    let mut pages = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

fn relative(path: &Path) -> String {
    path.strip_prefix(repo())
        .unwrap_or(path)
        .display()
        .to_string()
}

/// One piece of code on a page: where it is, whether it is a fenced block, its text.
struct Code {
    line: usize,
    fenced: bool,
    text: String,
}

/// The inline code spans and fenced blocks of a page (lines of fenced blocks one by one, with
/// `\` continuations joined).
fn code_of(text: &str) -> Vec<Code> {
    let mut out = Vec::new();
    let mut fence: Option<String> = None;
    let mut pending: Option<(usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        let number = i + 1;
        let trimmed = line.trim_start();
        if let Some(open) = &fence {
            if trimmed.starts_with(open.as_str()) && trimmed.trim_matches('`').trim().is_empty() {
                fence = None;
                continue;
            }
            let (start, mut joined) = pending.take().unwrap_or((number, String::new()));
            joined.push_str(line.trim_end_matches('\\'));
            joined.push(' ');
            if line.trim_end().ends_with('\\') {
                pending = Some((start, joined));
            } else {
                out.push(Code {
                    line: start,
                    fenced: true,
                    text: joined,
                });
            }
            continue;
        }
        if trimmed.starts_with("```") {
            fence = Some("```".into());
            continue;
        }
        let mut rest = line;
        while let Some(start) = rest.find('`') {
            let after = &rest[start + 1..];
            let Some(end) = after.find('`') else { break };
            out.push(Code {
                line: number,
                fenced: false,
                text: after[..end].to_string(),
            });
            rest = &after[end + 1..];
        }
    }
    out
}

/// Markdown links `[text](target)` outside code, with their line numbers.
fn links_of(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut fenced = false;
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // Code spans can hold `](` that is not a link.
        let mut prose = String::new();
        for (j, part) in line.split('`').enumerate() {
            if j % 2 == 0 {
                prose.push_str(part);
            }
        }
        let mut rest = prose.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            out.push((i + 1, after[..end].trim().to_string()));
            rest = &after[end + 1..];
        }
    }
    out
}

/// GitHub's anchor of a heading: lower case, punctuation but `-` and `_` dropped, spaces `-`.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn anchors_of(page: &Path) -> BTreeSet<String> {
    let text = std::fs::read_to_string(page).unwrap();
    let mut fenced = false;
    let mut out = BTreeSet::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            out.insert(anchor(line.trim_start_matches('#')));
        }
    }
    out
}

/// `path` without `.` and `..` (no file system access), or None if it leaves the root.
fn normalize(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    Some(out)
}

/// Whether `path` (absolute) lies inside the repository and exists.
fn inside_and_exists(path: &Path) -> Result<(), String> {
    let normal = normalize(path).ok_or("leads out of the file system root")?;
    if !normal.starts_with(repo()) {
        return Err("leads out of the repository".into());
    }
    if !normal.exists() {
        return Err("does not exist".into());
    }
    Ok(())
}

#[test]
fn every_link_stays_inside_the_repository_and_exists() {
    let mut problems = Vec::new();
    let mut checked = 0;
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        let own_anchors = anchors_of(&page);
        for (line, target) in links_of(&text) {
            if target.starts_with("http://") || target.starts_with("https://") {
                continue;
            }
            checked += 1;
            let at = format!("{}:{line}: link {target:?}", relative(&page));
            let (path, fragment) = target.split_once('#').unwrap_or((&target, ""));
            let file = if path.is_empty() {
                page.clone()
            } else {
                page.parent().unwrap().join(path)
            };
            if let Err(e) = inside_and_exists(&file) {
                problems.push(format!("{at} {e}"));
                continue;
            }
            if !fragment.is_empty() && file.extension().is_some_and(|e| e == "md") {
                let anchors = if path.is_empty() {
                    own_anchors.clone()
                } else {
                    anchors_of(&normalize(&file).unwrap())
                };
                if !anchors.contains(fragment) {
                    problems.push(format!("{at}: no heading has the anchor #{fragment}"));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(
        checked > 10,
        "only {checked} links found: the parser is broken"
    );
}

/// The repository's top-level folders (what a repository path in code starts with).
fn top_level_folders() -> BTreeSet<String> {
    std::fs::read_dir(repo())
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name != "target" && name != ".git")
        .collect()
}

/// The words of code that name repository paths: starting with a top-level folder and `/`, or
/// leading out (`../`).
fn path_words(code: &str, folders: &BTreeSet<String>) -> Vec<String> {
    code.split(|c: char| c.is_whitespace() || matches!(c, '`' | '"' | '\'' | '(' | ')' | '='))
        .map(|w| w.trim_end_matches([',', ':', ';', '.']))
        .filter(|w| {
            w.starts_with("../")
                || w.split_once('/')
                    .is_some_and(|(first, _)| folders.contains(first))
        })
        .filter(|w| !w.contains(['*', '<', '>', '{', '$', '|', '[']) && !w.contains("..."))
        .map(str::to_string)
        .collect()
}

#[test]
fn every_path_in_code_exists_inside_the_repository() {
    let folders = top_level_folders();
    assert!(
        folders.contains("config") && folders.contains("crates"),
        "{folders:?}"
    );
    let mut problems = Vec::new();
    let mut checked = 0;
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for code in code_of(&text) {
            for word in path_words(&code.text, &folders) {
                checked += 1;
                // Repository paths are written from the repository's root.
                let path = word.split_once('#').map_or(word.as_str(), |(p, _)| p);
                if let Err(e) = inside_and_exists(&repo().join(path)) {
                    problems.push(format!(
                        "{}:{}: path {word:?} {e}",
                        relative(&page),
                        code.line
                    ));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(
        checked > 20,
        "only {checked} paths found: the parser is broken"
    );
}

/// Shell words of a line, quotes removed (enough for documentation).
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quote: Option<char> = None;
    let mut any = false;
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '"' | '\'') => {
                quote = Some(c);
                any = true;
            }
            (None, c) if c.is_whitespace() => {
                if any || !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
                any = false;
            }
            (None, c) => word.push(c),
        }
    }
    if any || !word.is_empty() {
        words.push(word);
    }
    words
}

/// The netpol invocations (arguments after the program name) of one piece of code.
fn invocations(code: &Code) -> Vec<Vec<String>> {
    let text = code.text.trim();
    let text = text.strip_prefix("$ ").unwrap_or(text);
    let mut out = Vec::new();
    let mut command: Vec<String> = Vec::new();
    let mut words = shell_words(text).into_iter().peekable();
    let mut finish = |command: &mut Vec<String>| {
        if let Some(args) = netpol_args(command, code.fenced) {
            out.push(args);
        }
        command.clear();
    };
    while let Some(word) = words.next() {
        match word.as_str() {
            "|" | "||" | "&&" | ";" => finish(&mut command),
            "#" => break,
            ">" | ">>" | "2>" | "<" => {
                words.next();
            }
            w if w.starts_with('#') => break,
            w if w.starts_with('>') || w.starts_with("2>") => {}
            _ => command.push(word),
        }
    }
    finish(&mut command);
    out
}

/// The arguments netpol gets from `command`, if it runs netpol.
fn netpol_args(command: &[String], fenced: bool) -> Option<Vec<String>> {
    let first = command.first()?;
    let cargo_run_of = |package: &str| {
        first == "cargo"
            && command.get(1).is_some_and(|w| w == "run")
            && command.iter().any(|w| w == package)
    };
    // The development binary's invocations are parsed by its own parser (see the test).
    let (program, args): (&str, Vec<String>) =
        if matches!(first.as_str(), "netpol" | "netpol.exe" | "./netpol") {
            ("netpol", command[1..].to_vec())
        } else if first == "netpol-dev" {
            ("netpol-dev", command[1..].to_vec())
        } else if cargo_run_of("netpol-cli") || cargo_run_of("netpol-dev") {
            let dashes = command.iter().position(|w| w == "--")?;
            let program = if cargo_run_of("netpol-dev") {
                "netpol-dev"
            } else {
                "netpol"
            };
            (program, command[dashes + 1..].to_vec())
        } else {
            return None;
        };
    let mut out = vec![program.to_string()];
    for arg in args {
        let mut arg = arg;
        if !fenced {
            // A synopsis: `[--flag VALUE]`, `PATH...`, `hcn|nftables`.
            arg = arg.replace(['[', ']'], "").replace("...", "");
            if let Some((first, _)) = arg.split_once('|') {
                arg = first.to_string();
            }
            if arg.is_empty() {
                continue;
            }
        }
        // Placeholders that stand for numbers.
        if matches!(arg.as_str(), "N" | "SECONDS" | "MS" | "ENTRIES") {
            arg = "10".into();
        }
        out.push(arg);
    }
    // `netpol` alone, or `netpol ARGS`, in prose names the program, not an invocation.
    let placeholder_only =
        !fenced && out.len() == 2 && out[1].chars().all(|c| c.is_ascii_uppercase());
    (out.len() > 1 && !placeholder_only).then_some(out)
}

/// Whether a parse error of prose code only says that something was left out or stands in
/// capitals for a value.
fn names_a_command(error: &clap::Error) -> bool {
    let placeholder = |value: &str| {
        value.is_empty()
            || value
                .chars()
                .all(|c| c.is_ascii_uppercase() || c == '_' || c == '/')
    };
    match error.kind() {
        ErrorKind::MissingRequiredArgument => true,
        ErrorKind::InvalidValue => matches!(
            error.get(ContextKind::InvalidValue),
            Some(ContextValue::String(value)) if placeholder(value)
        ),
        _ => false,
    }
}

#[test]
fn every_netpol_invocation_parses() {
    let mut problems = Vec::new();
    let mut parsed = 0;
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for code in code_of(&text) {
            for args in invocations(&code) {
                parsed += 1;
                let parsed_args = if args[0] == "netpol-dev" {
                    netpol_dev::cli::Cli::try_parse_from(&args).map(drop)
                } else {
                    Cli::try_parse_from(&args).map(drop)
                };
                match parsed_args {
                    Ok(_) => {}
                    Err(e)
                        if matches!(
                            e.kind(),
                            ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
                        ) => {}
                    Err(e) if !code.fenced && names_a_command(&e) => {}
                    Err(e) => problems.push(format!(
                        "{}:{}: `{}`: {}",
                        relative(&page),
                        code.line,
                        args.join(" "),
                        e.render().to_string().lines().next().unwrap_or_default()
                    )),
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "{} of {parsed} invocations do not parse:\n{}",
        problems.len(),
        problems.join("\n")
    );
    assert!(
        parsed > 50,
        "only {parsed} invocations found: the parser is broken"
    );
}

#[test]
fn the_parsers_of_this_test_read_what_they_should() {
    let code = code_of("Run `netpol check x.yaml` or:\n\n```sh\nnetpol acls -f a.yaml \\\n  --compare b.json | head # c\n```\n");
    let all: Vec<Vec<String>> = code.iter().flat_map(invocations).collect();
    assert_eq!(
        all,
        [
            vec!["netpol", "check", "x.yaml"],
            vec!["netpol", "acls", "-f", "a.yaml", "--compare", "b.json"]
        ]
    );
    let synopsis = Code {
        line: 1,
        fenced: false,
        text: "netpol cleanup --datapath hcn|nftables [--x] PATH...".into(),
    };
    assert_eq!(
        invocations(&synopsis),
        [vec![
            "netpol",
            "cleanup",
            "--datapath",
            "hcn",
            "--x",
            "PATH"
        ]]
    );
    assert_eq!(
        links_of("see [a](docs/a.md#x) and `[b](c)`"),
        [(1, "docs/a.md#x".to_string())]
    );
    assert_eq!(
        anchor("Failure modes: open or closed, on purpose"),
        "failure-modes-open-or-closed-on-purpose"
    );
    let folders: BTreeSet<String> = ["config".to_string()].into();
    assert_eq!(
        path_words(
            "kubectl apply -k config/windows; see ../x and config/<os>",
            &folders
        ),
        ["config/windows", "../x"]
    );
}

#[test]
fn the_version_is_the_same_in_cargo_the_changelog_and_the_overlays() {
    let version = env!("CARGO_PKG_VERSION");
    let changelog = std::fs::read_to_string(repo().join("CHANGELOG.md")).unwrap();
    assert!(
        changelog
            .lines()
            .any(|l| l.trim() == format!("## {version}")),
        "CHANGELOG.md has no section `## {version}` (docs/operations.md: bumping the version)"
    );
    for overlay in ["windows", "linux"] {
        let path = format!("config/{overlay}/kustomization.yaml");
        let text = std::fs::read_to_string(repo().join(&path)).unwrap();
        let tags: Vec<&str> = text
            .lines()
            .filter_map(|l| l.trim().strip_prefix("newTag:"))
            .map(str::trim)
            .collect();
        assert_eq!(
            tags,
            [version],
            "{path}: the image tag is the release version"
        );
        let dockerfile = format!("config/{overlay}/Dockerfile");
        let text = std::fs::read_to_string(repo().join(&dockerfile)).unwrap();
        assert!(
            text.contains(&format!(":{version} ")),
            "{dockerfile}: the build comment tags {version}"
        );
    }
}
