//! The crash-recovery section of the report: the rows of the recovery
//! matrix (`faultline_check::durability::matrix`), one line each, with
//! examples of lost writes.

use faultline_model::format::one_line;
use faultline_model::labels::{matrix_suffix, point_label};
use faultline_model::recovery::RecoveryRow;

/// The report's section: one line per row, with examples of lost writes.
pub fn markdown(rows: &[RecoveryRow]) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "## Crash recovery\n\nEach restart killed the server (`crash`: SIGKILL) or shut it down (`clean`: SIGTERM) and started it again on its own data; then every write acknowledged in the cell was looked for.\n\n| scenario | matrix | variant | restart | result |\n|---|---|---|---|---|\n",
    );
    for r in rows {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            r.scenario,
            point_label(&r.matrix),
            r.variant,
            r.restart,
            one_line(&r.sentence())
        ));
    }
    let examples: Vec<String> = rows
        .iter()
        .flat_map(|r| {
            let point = matrix_suffix(&r.matrix);
            r.examples.iter().map(move |e| format!("- {}{point} {}: {}", r.scenario, r.restart, one_line(e)))
        })
        .chain(rows.iter().flat_map(|r| r.failures.iter().map(|f| format!("- restart failed: {}", one_line(f)))))
        .collect();
    if !examples.is_empty() {
        out.push('\n');
        out.push_str(&examples.join("\n"));
        out.push('\n');
    }
    out
}
