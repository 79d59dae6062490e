//! `check --output junit`: the JUnit XML that CI systems (GitLab, Jenkins, GitHub test
//! reporters) show as unit tests. One `<testsuite>` per scenario, one `<testcase>` per
//! expectation; a mismatch is a `<failure>` carrying the flow and the deciding rule, a file that
//! does not load is a test case with an `<error>`. On `--datapath nftables` a flow no packet could
//! decide is `<skipped>` with the reason, and a probe that failed is an `<error>`. An allowed flow
//! a policy in audit mode would deny carries `<system-out>would-deny: <rule></system-out>`.

use std::fmt::Write as _;

use crate::checked::{mismatch_line, Fate, Report};

/// The whole XML document.
pub fn document(report: &Report) -> String {
    let failures = report.mismatches().count();
    let not_probed = report.not_probed().count();
    let probe_failures = report.probe_failures();
    let mut xml = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        xml,
        "<testsuites name=\"netpol check\" tests=\"{}\" failures=\"{failures}\" errors=\"{}\" skipped=\"{}\">",
        report.flows() + not_probed + report.invalid.len(),
        report.invalid.len() + probe_failures,
        not_probed - probe_failures,
    );
    for scenario in &report.scenarios {
        let file = scenario.file.display().to_string();
        let count = |wanted: fn(&Fate, bool) -> bool| {
            scenario
                .flows
                .iter()
                .filter(|(e, f)| wanted(f, e.expected.allowed()))
                .count()
        };
        let failed = count(|f, expected| matches!(f, Fate::Decided(d) if d.allowed() != expected));
        let errors = count(|f, _| matches!(f, Fate::Failed(_)));
        let skipped = count(|f, _| matches!(f, Fate::Unprobed(_)));
        let _ = writeln!(
            xml,
            "  <testsuite name=\"{}\" file=\"{}\" tests=\"{}\" failures=\"{failed}\" errors=\"{errors}\" skipped=\"{skipped}\">",
            escape(&scenario.name),
            escape(&file),
            scenario.flows.len()
        );
        for (e, d) in &scenario.flows {
            let name = format!(
                "{}: {} -> {} {}/{} is {}",
                e.field, e.from, e.to, e.protocol, e.port, e.expected
            );
            let open = format!(
                "    <testcase classname=\"{}\" name=\"{}\" file=\"{}\"",
                escape(&scenario.name),
                escape(&name),
                escape(&file)
            );
            let fate = match d {
                Fate::Decided(d) if d.allowed() == e.expected.allowed() => None,
                Fate::Decided(d) => Some(format!(
                    "<failure type=\"mismatch\" message=\"{}\">{}</failure>",
                    escape(&format!("expected {}, decided {}", e.expected, d.verdict)),
                    escape(&mismatch_line(scenario, e, d))
                )),
                Fate::Unprobed(why) => Some(format!(
                    "<skipped message=\"{}\"/>",
                    escape(&format!("not probed: {why}"))
                )),
                Fate::Failed(why) => Some(format!(
                    "<error type=\"probe\" message=\"the probe failed\">{}</error>",
                    escape(why)
                )),
            };
            // An allowed flow a policy in audit mode would deny passes, saying so.
            let would_deny = match d {
                Fate::Decided(d) => d.would_deny.as_deref(),
                _ => None,
            }
            .map(|why| format!("<system-out>would-deny: {}</system-out>", escape(why)));
            let body = match (fate, would_deny) {
                (Some(fate), Some(would_deny)) => Some(format!("{fate}\n      {would_deny}")),
                (fate, would_deny) => fate.or(would_deny),
            };
            match body {
                None => {
                    let _ = writeln!(xml, "{open}/>");
                }
                Some(body) => {
                    let _ = writeln!(xml, "{open}>\n      {body}\n    </testcase>");
                }
            }
        }
        xml.push_str("  </testsuite>\n");
    }
    for (file, errors) in &report.invalid {
        let file = escape(&file.display().to_string());
        let _ = writeln!(
            xml,
            "  <testsuite name=\"{file}\" file=\"{file}\" tests=\"1\" failures=\"0\" errors=\"1\">\n    \
             <testcase classname=\"{file}\" name=\"loads\" file=\"{file}\">\n      \
             <error type=\"load\" message=\"the scenario does not load\">{}</error>\n    \
             </testcase>\n  </testsuite>",
            escape(&errors.join("\n"))
        );
    }
    xml.push_str("</testsuites>\n");
    xml
}

/// Text safe in XML attributes and content.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_characters_are_escaped() {
        assert_eq!(
            escape(r#"a<b & "c">'"#),
            "a&lt;b &amp; &quot;c&quot;&gt;&apos;"
        );
    }
}
