//! Renders results.json as Markdown with minijinja: the default template in
//! reports/templates/, or the spec's own.

use std::path::Path;

use anyhow::Context;
use minijinja::{context, Environment, Value};
use serde::Serialize;

use crate::metrics::LatencyStats;
use crate::results::{CellResult, Results};

pub const DEFAULT_TEMPLATE: &str = include_str!("../../reports/templates/default.md.j2");

/// One latency table: a scenario × profile, all targets and repeats.
#[derive(Serialize)]
struct Table<'a> {
    scenario: &'a str,
    profile: &'a str,
    shape: &'a str,
    rows: Vec<Row<'a>>,
    cells: Vec<&'a CellResult>,
    /// Cells with a role timeline: each member's role, one letter a second.
    roles: Vec<RoleTimeline<'a>>,
    /// Per fault, when its lost writes were acknowledged against the spans
    /// a demoted primary was still primary.
    lost_writes: Vec<String>,
}

#[derive(Serialize)]
struct RoleTimeline<'a> {
    variant: &'a str,
    repeat: u32,
    members: Vec<(String, String)>,
}

#[derive(Serialize)]
struct Row<'a> {
    target: &'a str,
    repeat: u32,
    op: &'a str,
    throughput: f64,
    latency: Option<LatencyStats>,
    errors: u64,
    over_deadline: u64,
}

fn tables(results: &Results) -> Vec<Table<'_>> {
    let mut tables: Vec<Table> = Vec::new();
    for cell in &results.cells {
        let index = match tables.iter().position(|t| t.scenario == cell.scenario && t.profile == cell.profile) {
            Some(i) => i,
            None => {
                tables.push(Table {
                    scenario: &cell.scenario,
                    profile: &cell.profile,
                    shape: &cell.shape,
                    rows: vec![],
                    cells: vec![],
                    roles: vec![],
                    lost_writes: vec![],
                });
                tables.len() - 1
            }
        };
        let table = &mut tables[index];
        table.cells.push(cell);
        if !cell.roles.is_empty() {
            table.roles.push(RoleTimeline {
                variant: cell.variant(),
                repeat: cell.repeat,
                members: crate::metrics::roles::per_second(&cell.roles, cell.measured_s),
            });
        }
        for f in &cell.faults {
            if let Some(line) = crate::checker::lost_write_times::describe(f) {
                table.lost_writes.push(format!("{} #{} fault {}: {line}", cell.variant(), cell.repeat, f.name));
            }
        }
        if let Some(stats) = &cell.stats {
            for (op, s) in &stats.per_op {
                table.rows.push(Row {
                    target: cell.variant(),
                    repeat: cell.repeat,
                    op,
                    throughput: s.throughput,
                    latency: s.latency_ms,
                    errors: s.failed,
                    over_deadline: s.over_deadline,
                });
            }
        }
    }
    for t in &mut tables {
        t.rows.sort_by(|a, b| (a.target, a.repeat).cmp(&(b.target, b.repeat)));
        t.cells.sort_by(|a, b| (a.variant(), a.repeat).cmp(&(b.variant(), b.repeat)));
    }
    tables
}

/// Reads and parses a template, so a broken one is reported before a run
/// rather than after it.
pub fn check_template(path: &Path) -> anyhow::Result<()> {
    environment(Some(path)).map(|_| ())
}

fn environment(template_path: Option<&Path>) -> anyhow::Result<(Environment<'static>, String)> {
    let source = match template_path {
        Some(p) => {
            std::fs::read_to_string(p).with_context(|| format!("cannot read report template {}", p.display()))?
        }
        None => DEFAULT_TEMPLATE.to_string(),
    };
    let name = template_path.map(|p| p.display().to_string()).unwrap_or_else(|| "default.md.j2".into());
    let mut env = Environment::new();
    env.set_trim_blocks(true);
    env.add_filter("ms", |v: f64| format!("{v:.2}"));
    env.add_filter("num", |v: f64| thousands(v.round() as u64));
    env.add_filter("sparkline", |v: Vec<f64>| sparkline(&v));
    // Text from plugins goes into table cells: keep it on one line, and
    // its pipes from ending the cell.
    env.add_filter("cell", |v: String| v.replace('|', "\\|").replace(['\n', '\r'], " "));
    env.add_template_owned(name.clone(), source).with_context(|| format!("report template {name} does not parse"))?;
    Ok((env, name))
}

pub fn render(results: &Results, template_path: Option<&Path>, title: Option<&str>) -> anyhow::Result<String> {
    let (env, name) = environment(template_path)?;
    let template = env.get_template(&name)?;
    let title = title.map(str::to_string).unwrap_or_else(|| format!("faultline: {}", results.run.name));
    template
        .render(context! {
            title,
            run => Value::from_serialize(&results.run),
            verdict => results.verdict.as_str(),
            verdict_reasons => results.verdict_reasons,
            gates => Value::from_serialize(&results.gates),
            targets => Value::from_serialize(&results.targets),
            cells => Value::from_serialize(&results.cells),
            tables => Value::from_serialize(tables(results)),
            comparisons => Value::from_serialize(&results.comparisons),
            errors => results.errors,
        })
        .with_context(|| format!("report template {name} failed to render"))
}

pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Values as ▁▂▃▄▅▆▇█, scaled from 0 to the largest value.
pub fn sparkline(values: &[f64]) -> String {
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let max = values.iter().cloned().fold(0.0, f64::max);
    values
        .iter()
        .map(|v| if max <= 0.0 { BARS[0] } else { BARS[((v / max) * 7.0).round().clamp(0.0, 7.0) as usize] })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helpers_format_for_markdown() {
        assert_eq!(thousands(1234567), "1,234,567");
        assert_eq!(thousands(999), "999");
        assert_eq!(sparkline(&[0.0, 5.0, 10.0]), "▁▅█");
        assert_eq!(sparkline(&[0.0, 0.0]), "▁▁");
    }
}
