//! The gate metrics as a build holds them: the spec's own table and the
//! rows each registered checker provides. They are tested here, where both
//! are in sight (the spec crate cannot see the checkers above it).

use std::collections::BTreeSet;

use faultline_check::checker;
use faultline_spec::gate::metrics;
use faultline_spec::metric::GateMetric;

/// No checker's metric takes a name the table or another checker has.
#[test]
fn every_metric_has_a_name_of_its_own() {
    let checkers = checker::declared();
    let mut names = BTreeSet::new();
    for m in metrics::all(checkers) {
        for name in std::iter::once(&m.name).chain(m.aliases) {
            assert!(names.insert(*name), "`{name}` names two metrics");
            assert_eq!(GateMetric::named(name, checkers), Some(m));
        }
    }
}

/// docs/spec.md's table of metrics names exactly the build's metrics (the
/// spec's table and the checkers'), each once, with its unit and description.
#[test]
fn the_docs_table_of_metrics_is_this_table() {
    let checkers = checker::declared();
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/spec.md");
    let docs = std::fs::read_to_string(path).expect("docs/spec.md");
    let section = docs.split("\n### Metrics\n").nth(1).expect("a `### Metrics` section in docs/spec.md");
    let rows = section.lines().skip_while(|l| !l.starts_with('|')).take_while(|l| l.starts_with('|')).skip(2);
    let mut documented = Vec::new();
    for row in rows {
        let cells: Vec<&str> = row.trim_matches('|').split(" | ").map(str::trim).collect();
        let [names, unit, meaning, _args] = cells[..] else { panic!("docs/spec.md: not 4 cells: {row}") };
        // `p999` (also `p99.9`), `denied_window(FAULT)`, `count(STATUS, …)`: the names in backticks.
        for name in names.split('`').skip(1).step_by(2) {
            let name = name.split('(').next().unwrap_or_default();
            let m =
                GateMetric::named(name, checkers).unwrap_or_else(|| panic!("docs/spec.md names `{name}`, no metric"));
            assert_eq!((m.unit.name(), m.description), (unit, meaning), "docs/spec.md on `{name}`");
            documented.push(name);
        }
    }
    // The docs group rows as a reader looks for them (the checkers' counts
    // of what they judged share one row), so the order is theirs.
    let mut all: Vec<&str> =
        metrics::all(checkers).flat_map(|m| std::iter::once(&m.name).chain(m.aliases)).copied().collect();
    documented.sort_unstable();
    all.sort_unstable();
    assert_eq!(documented, all, "docs/spec.md's table of metrics against the spec's table and the checkers' rows");
}
