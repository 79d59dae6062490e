//! `lint --output text|json|sarif`.

use std::io::{self, Write};

use serde_json::{json, Value};

use super::{Finding, RULES};

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

/// The SARIF 2.1.0 log of `findings`. `artifact` is the file the objects came from, when there
/// is one; every result also names its object as a logical location.
pub fn sarif(findings: &[Finding], artifact: Option<&str>) -> Value {
    let rules: Vec<Value> = RULES
        .iter()
        .map(|(id, severity, text)| {
            json!({
                "id": id,
                "name": id,
                "shortDescription": { "text": text },
                "defaultConfiguration": { "level": severity.as_str() },
                "helpUri": format!("https://github.com/netpol/netpol/blob/main/docs/cli.md#{id}"),
            })
        })
        .collect();
    let results: Vec<Value> = findings
        .iter()
        .map(|f| {
            let rule_index = RULES.iter().position(|(id, _, _)| *id == f.rule);
            let mut location = json!({
                "logicalLocations": [{
                    "fullyQualifiedName": format!("{}.{}", f.object, f.field),
                    "name": f.field,
                    "kind": "object",
                }],
                "message": { "text": format!("{} {}", f.object, f.field) },
            });
            if let Some(uri) = artifact {
                location["physicalLocation"] = json!({ "artifactLocation": { "uri": uri } });
            }
            json!({
                "ruleId": f.rule,
                "ruleIndex": rule_index,
                "level": f.severity.as_str(),
                "message": { "text": format!("{} {}: {} (hint: {})", f.object, f.field, f.message, f.hint) },
                "locations": [location],
                "properties": { "object": f.object, "field": f.field, "hint": f.hint },
            })
        })
        .collect();
    json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": { "driver": {
                "name": "netpol lint",
                "informationUri": "https://github.com/netpol/netpol/blob/main/docs/cli.md",
                "version": env!("CARGO_PKG_VERSION"),
                "rules": rules,
            }},
            "results": results,
        }],
    })
}

pub fn write_sarif(
    out: &mut dyn Write,
    findings: &[Finding],
    artifact: Option<&str>,
) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, &sarif(findings, artifact))?;
    writeln!(out)
}
