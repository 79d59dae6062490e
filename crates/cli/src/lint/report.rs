//! `lint --output text|json|sarif`.

use std::collections::HashMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::locate::{locate, Lines};
use super::{Finding, RULES};
use crate::loader::ClusterModel;

/// `text`: one finding per line with its hint below it, then a count.
pub fn write_text(out: &mut dyn Write, findings: &[Finding]) -> io::Result<()> {
    for f in findings {
        writeln!(
            out,
            "{}: {} {} {}: {}",
            f.severity.as_str(),
            f.rule,
            f.object,
            f.field,
            f.message
        )?;
        writeln!(out, "  hint: {}", f.hint)?;
    }
    match findings.len() {
        0 => writeln!(out, "no findings"),
        1 => writeln!(out, "1 finding"),
        n => writeln!(out, "{n} findings"),
    }
}

/// `json`: `{"findings": [...]}`.
pub fn write_json(out: &mut dyn Write, findings: &[Finding]) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, &json!({ "findings": findings }))?;
    writeln!(out)
}

/// Where a finding is written: the file (as given, relative to the working directory where it
/// is below it) and, where the text shows them, the lines of its object and field.
pub struct Place {
    pub uri: String,
    pub lines: Option<Lines>,
}

/// The place of each finding's object, from the origins the loader recorded; `None` for
/// objects not read from a file (stdin, the live cluster).
pub fn places(findings: &[Finding], cluster: &ClusterModel) -> Vec<Option<Place>> {
    let cwd = std::env::current_dir().ok();
    let mut texts: HashMap<PathBuf, Option<String>> = HashMap::new();
    findings
        .iter()
        .map(|f| {
            let origin = cluster.policy_origin(&f.object)?;
            let file: &Path = &origin.file;
            let text = texts
                .entry(file.to_path_buf())
                .or_insert_with(|| std::fs::read_to_string(file).ok())
                .as_deref()?;
            let relative = match &cwd {
                Some(cwd) if file.is_absolute() => file.strip_prefix(cwd).unwrap_or(file),
                _ => file,
            };
            let uri = relative
                .components()
                .filter(|c| !matches!(c, std::path::Component::CurDir))
                .map(|c| c.as_os_str().to_string_lossy())
                .collect::<Vec<_>>()
                .join("/");
            Some(Place {
                uri,
                lines: locate(text, &origin.at, &f.field),
            })
        })
        .collect()
}

/// A fingerprint of a finding that stays the same while its rule, object and field do, however
/// the file around it moves (FNV-1a, 64 bits, as hex).
fn fingerprint(f: &Finding) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in [f.rule, &f.object, &f.field].join("\u{1f}").bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{hash:016x}")
}

/// The rules as SARIF's `tool.driver.rules` lists them.
fn sarif_rules() -> Vec<Value> {
    RULES
        .iter()
        .map(|(id, severity, text)| {
            json!({
                "id": id,
                "name": id,
                "shortDescription": { "text": text },
                "defaultConfiguration": { "level": severity.as_str() },
                "helpUri": format!("{DOCS_URI}#{id}"),
            })
        })
        .collect()
}

/// Where the rules are documented; each rule's section has the rule id as its anchor.
pub const DOCS_URI: &str = "https://github.com/netpol/netpol/blob/main/docs/cli.md";

/// A SARIF 2.1.0 log of one run, with `results` and `invocations`.
fn log(results: Vec<Value>, invocation: Value) -> Value {
    json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": { "driver": {
                "name": "netpol lint",
                "informationUri": DOCS_URI,
                "version": env!("CARGO_PKG_VERSION"),
                "rules": sarif_rules(),
            }},
            "invocations": [invocation],
            "results": results,
        }],
    })
}

/// The SARIF 2.1.0 log of `findings`, each at its `places` entry where it has one; every result
/// also names its object as a logical location.
pub fn sarif(findings: &[Finding], places: &[Option<Place>]) -> Value {
    let results: Vec<Value> = findings
        .iter()
        .zip(places)
        .map(|(f, place)| {
            let rule_index = RULES.iter().position(|(id, _, _)| *id == f.rule);
            let mut location = json!({
                "logicalLocations": [{
                    "fullyQualifiedName": format!("{}.{}", f.object, f.field),
                    "name": f.field,
                    "kind": "object",
                }],
                "message": { "text": format!("{} {}", f.object, f.field) },
            });
            if let Some(place) = place {
                let mut physical = json!({ "artifactLocation": { "uri": place.uri } });
                if let Some(lines) = place.lines {
                    // The field's line where found, within the object's.
                    let line = lines.field.unwrap_or(lines.object);
                    physical["region"] = json!({ "startLine": line });
                    physical["contextRegion"] = json!({ "startLine": lines.object });
                }
                location["physicalLocation"] = physical;
            }
            json!({
                "ruleId": f.rule,
                "ruleIndex": rule_index,
                "level": f.severity.as_str(),
                "message": { "text": format!("{} {}: {} (hint: {})", f.object, f.field, f.message, f.hint) },
                "locations": [location],
                "partialFingerprints": { "netpolFinding/v1": fingerprint(f) },
                "properties": { "object": f.object, "field": f.field, "hint": f.hint },
            })
        })
        .collect();
    log(results, json!({ "executionSuccessful": true }))
}

pub fn write_sarif(
    out: &mut dyn Write,
    findings: &[Finding],
    places: &[Option<Place>],
) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, &sarif(findings, places))?;
    writeln!(out)
}

/// A SARIF 2.1.0 log for a run that could not lint (bad input): no results, and each error as
/// a tool execution notification, so that an upload step still gets a valid log.
pub fn sarif_failure(errors: &[String]) -> Value {
    let notifications: Vec<Value> = errors
        .iter()
        .map(|e| {
            json!({
                "level": "error",
                "message": { "text": e.strip_prefix("error: ").unwrap_or(e) },
            })
        })
        .collect();
    log(
        Vec::new(),
        json!({ "executionSuccessful": false, "toolExecutionNotifications": notifications }),
    )
}

pub fn write_sarif_failure(out: &mut dyn Write, errors: &[String]) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, &sarif_failure(errors))?;
    writeln!(out)
}
