//! `faultline run --junit FILE`: the verdict as JUnit XML for CI test
//! views. One testcase per built-in gate and cell (per group of cells for a
//! ratio gate, one for a plugin gate): a FAIL is a `<failure>`, an
//! INCOMPLETE is `<skipped>` with the reason (so is the FAIL of an
//! informational gate, which the verdict ignores). Cells that could not run are
//! `<error>`s, cells cut short are skipped, and the run's own verdict is a
//! testcase of its own.

use std::fmt::Write as _;

use faultline_model::results::{CellStatus, GateOutcome, Results, Verdict};

struct Case {
    class: String,
    name: String,
    outcome: Outcome,
}

enum Outcome {
    Pass,
    Failure(String),
    Error(String),
    Skipped(String),
}

pub fn render(results: &Results) -> String {
    let spec = &results.run.name;
    let mut suites: Vec<(String, Vec<Case>)> = Vec::new();
    for g in &results.gates {
        let class = format!("{spec}.gate.{}", g.name);
        // An informational gate is reported, never a failure of the build.
        let outcome = |result: GateOutcome, evidence: &str| match (result, g.informational) {
            (GateOutcome::Pass, _) => Outcome::Pass,
            (GateOutcome::Fail, false) => Outcome::Failure(evidence.to_string()),
            (GateOutcome::Fail, true) => Outcome::Skipped(format!("informational gate failed: {evidence}")),
            (GateOutcome::Incomplete, _) => Outcome::Skipped(evidence.to_string()),
        };
        let mut cases: Vec<Case> = g
            .cells
            .iter()
            .map(|c| Case { class: class.clone(), name: c.cell.clone(), outcome: outcome(c.result, &c.evidence) })
            .collect();
        // A plugin gate, or one that covered no cell: the gate as a whole.
        if cases.is_empty() {
            cases.push(Case { class: class.clone(), name: g.expr.clone(), outcome: outcome(g.result, &g.evidence) });
        }
        suites.push((format!("gate {}", g.name), cases));
    }
    let cells = results
        .cells
        .iter()
        .map(|c| {
            let why = c.error.clone().unwrap_or_default();
            Case {
                class: format!("{spec}.cell"),
                name: c.label(),
                outcome: match c.status {
                    CellStatus::Completed => Outcome::Pass,
                    CellStatus::Failed => Outcome::Error(why),
                    CellStatus::Interrupted => Outcome::Skipped(
                        format!("interrupted; its numbers cover part of the window {why}").trim_end().to_string(),
                    ),
                    CellStatus::Skipped => Outcome::Skipped(match why.is_empty() {
                        true => "never started: the run stopped before it".into(),
                        false => why,
                    }),
                },
            }
        })
        .collect();
    suites.push(("cells".into(), cells));
    let reasons = results.verdict_reasons.join("; ");
    let verdict = Case {
        class: format!("{spec}.run"),
        name: "verdict".into(),
        outcome: match results.verdict {
            Verdict::Pass => Outcome::Pass,
            Verdict::Fail => Outcome::Failure(reasons),
            Verdict::Incomplete => Outcome::Error(format!("INCOMPLETE: {reasons}")),
        },
    };
    suites.push(("run".into(), vec![verdict]));

    let count = |cases: &[Case], f: fn(&Outcome) -> bool| cases.iter().filter(|c| f(&c.outcome)).count();
    let failures = |o: &Outcome| matches!(o, Outcome::Failure(_));
    let errors = |o: &Outcome| matches!(o, Outcome::Error(_));
    let skipped = |o: &Outcome| matches!(o, Outcome::Skipped(_));
    let all: Vec<&Case> = suites.iter().flat_map(|(_, c)| c).collect();
    let total = |f: fn(&Outcome) -> bool| all.iter().filter(|c| f(&c.outcome)).count();
    let mut xml = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        xml,
        "<testsuites name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\">",
        escape(&format!("faultline {spec}")),
        all.len(),
        total(failures),
        total(errors),
        total(skipped)
    );
    for (name, cases) in &suites {
        let _ = writeln!(
            xml,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\">",
            escape(name),
            cases.len(),
            count(cases, failures),
            count(cases, errors),
            count(cases, skipped)
        );
        for c in cases {
            let open = format!("    <testcase classname=\"{}\" name=\"{}\"", escape(&c.class), escape(&c.name));
            let _ = match &c.outcome {
                Outcome::Pass => writeln!(xml, "{open}/>"),
                Outcome::Failure(m) => {
                    writeln!(xml, "{open}>\n      <failure message=\"{}\"/>\n    </testcase>", escape(m))
                }
                Outcome::Error(m) => {
                    writeln!(xml, "{open}>\n      <error message=\"{}\"/>\n    </testcase>", escape(m))
                }
                Outcome::Skipped(m) => {
                    writeln!(xml, "{open}>\n      <skipped message=\"{}\"/>\n    </testcase>", escape(m))
                }
            };
        }
        xml.push_str("  </testsuite>\n");
    }
    xml.push_str("</testsuites>\n");
    xml
}

/// Text safe in an XML attribute; characters XML 1.0 cannot hold dropped.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' => out.push_str("&#10;"),
            '\t' => out.push_str("&#9;"),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_what_xml_cannot_hold() {
        assert_eq!(escape("a<b & \"c\"\n\u{1}'"), "a&lt;b &amp; &quot;c&quot;&#10;&apos;");
    }
}
