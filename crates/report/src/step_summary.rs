//! A short summary of a run appended to the file `$GITHUB_STEP_SUMMARY`
//! names, when it is set (GitHub Actions shows it on the job's page): the
//! verdict, the gates, the ratios with their intervals, where the report is.

use std::io::Write;
use std::path::Path;

use anyhow::Context;

use faultline_model::format::format_ratio;
use faultline_model::results::{format_interval, format_word, GateOutcome, Results};

pub fn markdown(results: &Results, report: &Path) -> String {
    let mut md = format!("### faultline {}: {}\n\n", results.run.name, results.verdict.as_str());
    if !results.verdict_reasons.is_empty() {
        md.push_str(&format!("{}\n\n", cell(&results.verdict_reasons.join("; "))));
    }
    if !results.gates.is_empty() {
        md.push_str("| Gate | Result | Evidence |\n|---|---|---|\n");
        for g in &results.gates {
            let result = match g.result {
                GateOutcome::Pass => "PASS",
                GateOutcome::Fail => "**FAIL**",
                GateOutcome::Incomplete => "INCOMPLETE",
            };
            let informational = if g.informational { " (information only)" } else { "" };
            md.push_str(&format!("| {}{informational} | {result} | {} |\n", cell(&g.name), cell(&g.evidence)));
        }
        md.push('\n');
    }
    if !results.comparisons.is_empty() {
        md.push_str("| Cell | Variant | vs | Throughput ratio | 95% interval | |\n|---|---|---|---|---|---|\n");
        for c in &results.comparisons {
            let group = faultline_model::compare::Group {
                scenario: c.scenario.clone(),
                matrix: c.matrix.clone(),
                profile: c.profile.clone(),
            };
            md.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} |\n",
                cell(&group.label()),
                cell(&c.target),
                cell(&c.baseline),
                format_ratio(c.throughput.value),
                format_interval(c.throughput.interval),
                format_word(c.word)
            ));
        }
        md.push('\n');
    }
    md.push_str(&format!("Report: `{}`\n\n", report.display()));
    md
}

fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace(['\n', '\r'], " ")
}

/// Appends to `$GITHUB_STEP_SUMMARY` when it names a file; nothing otherwise.
pub fn append_if_asked(results: &Results, report: &Path) -> anyhow::Result<()> {
    let Some(path) = std::env::var_os("GITHUB_STEP_SUMMARY").filter(|p| !p.is_empty()) else { return Ok(()) };
    let path = Path::new(&path);
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("cannot append to $GITHUB_STEP_SUMMARY ({})", path.display()))?;
    file.write_all(faultline_model::redact::text(&markdown(results, report)).as_bytes())
        .with_context(|| format!("cannot append to $GITHUB_STEP_SUMMARY ({})", path.display()))
}
