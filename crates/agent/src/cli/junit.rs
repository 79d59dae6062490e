//! `check --output junit`: the JUnit XML that CI systems (GitLab, Jenkins, GitHub test
//! reporters) show as unit tests. One `<testsuite>` per scenario, one `<testcase>` per
//! expectation; a mismatch is a `<failure>` carrying the flow and the deciding rule, a file that
//! does not load is a test case with an `<error>`.

use std::fmt::Write as _;

use super::check::{mismatch_line, passed, Report};
use super::describe;

/// The whole XML document.
pub fn document(report: &Report) -> String {
    let failures = report.mismatches().count();
    let mut xml = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        xml,
        "<testsuites name=\"netpol check\" tests=\"{}\" failures=\"{failures}\" errors=\"{}\">",
        report.flows() + report.invalid.len(),
        report.invalid.len()
    );
    for scenario in &report.scenarios {
        let file = scenario.file.display().to_string();
        let failed = scenario.flows.iter().filter(|(e, d)| !passed(e, d)).count();
        let _ = writeln!(
            xml,
            "  <testsuite name=\"{}\" file=\"{}\" tests=\"{}\" failures=\"{failed}\" errors=\"0\">",
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
            if passed(e, d) {
                let _ = writeln!(xml, "{open}/>");
            } else {
                let message = format!(
                    "expected {}, decided {}",
                    e.expected,
                    describe::verdict_word(d.allowed())
                );
                let _ = writeln!(
                    xml,
                    "{open}>\n      <failure type=\"mismatch\" message=\"{}\">{}</failure>\n    </testcase>",
                    escape(&message),
                    escape(&mismatch_line(scenario, e, d))
                );
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
