//! `faultline compare RUN_A RUN_B`: two runs of one spec (the parent commit
//! and the candidate, say) side by side. Per cell (group and variant): each
//! run's numbers, B / A with a bootstrap interval over the repeats, and a
//! verdict — regression or improvement only when the interval lies wholly
//! beyond the threshold, within_noise otherwise — so CI can block a change
//! on a regression the repeats are sure of.

use std::path::{Path, PathBuf};

use anyhow::bail;
use serde::Serialize;

use super::{bootstrap, ratio, variant_stats, Group, Measure, Pairing, RepeatValues};
use crate::report::{format_interval, format_ratio, thousands};
use crate::results::{Ratio, Results, VariantStats};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    Regression,
    WithinNoise,
    Improvement,
}

impl Change {
    fn as_str(self) -> &'static str {
        match self {
            Change::Regression => "**regression**",
            Change::WithinNoise => "within_noise",
            Change::Improvement => "improvement",
        }
    }
}

#[derive(Debug, Serialize)]
pub struct RunSide {
    pub dir: String,
    pub id: String,
    pub started: String,
    pub params: indexmap::IndexMap<String, serde_json::Value>,
}

#[derive(Debug, Serialize)]
pub struct CellChange {
    /// The group, `scenario[point]/profile`.
    pub cell: String,
    pub variant: String,
    pub a: VariantStats,
    pub b: VariantStats,
    /// B / A.
    pub throughput: Ratio,
    pub p50: Ratio,
    pub p99: Ratio,
    pub verdict: Change,
    /// Why the verdict rests on less than an interval.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct RunsComparison {
    pub spec: String,
    pub a: RunSide,
    pub b: RunSide,
    /// Throughput changes within ± this share are noise, e.g. 0.05.
    pub threshold: f64,
    pub cells: Vec<CellChange>,
    /// Cells that completed in one run only.
    pub only_in_a: Vec<String>,
    pub only_in_b: Vec<String>,
    pub regressions: usize,
    pub improvements: usize,
}

fn read(dir: &Path) -> anyhow::Result<Results> {
    let path = dir.join("results.json");
    if !path.is_file() {
        bail!("{} is not a run directory: it has no results.json", dir.display());
    }
    Results::read(&path)
}

/// (group, variant) → its completed repeats, in the run's order.
fn cells(results: &Results) -> Vec<((Group, String), Vec<RepeatValues>)> {
    let mut out: Vec<((Group, String), Vec<RepeatValues>)> = Vec::new();
    for c in &results.cells {
        let Some(values) = RepeatValues::of(c) else { continue };
        let key = (Group::of(c), c.variant().to_string());
        match out.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => v.push(values),
            None => out.push((key, vec![values])),
        }
    }
    out
}

fn label((group, variant): &(Group, String)) -> String {
    format!("{} {variant}", group.label())
}

pub fn compare(dir_a: &Path, dir_b: &Path, threshold: f64) -> anyhow::Result<RunsComparison> {
    let (a, b) = (read(dir_a)?, read(dir_b)?);
    if a.run.name != b.run.name {
        bail!(
            "{} ran spec `{}` and {} ran spec `{}`: compare two runs of the same spec",
            dir_a.display(),
            a.run.name,
            dir_b.display(),
            b.run.name
        );
    }
    let (cells_a, cells_b) = (cells(&a), cells(&b));
    let only = |x: &[((Group, String), Vec<RepeatValues>)], y: &[((Group, String), Vec<RepeatValues>)]| {
        x.iter().filter(|(k, _)| !y.iter().any(|(o, _)| o == k)).map(|(k, _)| label(k)).collect::<Vec<_>>()
    };
    let (only_in_a, only_in_b) = (only(&cells_a, &cells_b), only(&cells_b, &cells_a));
    let seed = a.run.seed ^ b.run.seed.rotate_left(17);
    let mut changes = Vec::new();
    for (key, ra) in &cells_a {
        let Some((_, rb)) = cells_b.iter().find(|(k, _)| k == key) else { continue };
        let s = bootstrap::seed_for(seed, &label(key));
        let throughput = ratio(Measure::Throughput, ra, rb, Pairing::None, s);
        let (verdict, note) = match (throughput.interval, throughput.value) {
            (Some(i), _) => (
                match bootstrap::place(i, threshold) {
                    bootstrap::Placement::Below => Change::Regression,
                    bootstrap::Placement::Above => Change::Improvement,
                    _ => Change::WithinNoise,
                },
                None,
            ),
            (None, Some(v)) => (
                if v < 1.0 - threshold {
                    Change::Regression
                } else if v > 1.0 + threshold {
                    Change::Improvement
                } else {
                    Change::WithinNoise
                },
                Some("fewer than two repeats in a run: judged on the ratio alone, without an interval".to_string()),
            ),
            (None, None) => (Change::WithinNoise, Some("run A measured no throughput to divide by".to_string())),
        };
        changes.push(CellChange {
            cell: key.0.label(),
            variant: key.1.clone(),
            a: variant_stats(ra),
            b: variant_stats(rb),
            p50: ratio(Measure::P50, ra, rb, Pairing::None, s),
            p99: ratio(Measure::P99, ra, rb, Pairing::None, s),
            throughput,
            verdict,
            note,
        });
    }
    if changes.is_empty() {
        bail!(
            "no cell completed in both runs ({} has: {}; {} has: {})",
            dir_a.display(),
            list(&cells_a.iter().map(|(k, _)| label(k)).collect::<Vec<_>>()),
            dir_b.display(),
            list(&cells_b.iter().map(|(k, _)| label(k)).collect::<Vec<_>>())
        );
    }
    let side = |dir: &Path, r: &Results| RunSide {
        dir: dir.display().to_string(),
        id: r.run.id.clone(),
        started: r.run.started.clone(),
        params: r.run.params.clone(),
    };
    Ok(RunsComparison {
        spec: a.run.name.clone(),
        a: side(dir_a, &a),
        b: side(dir_b, &b),
        threshold,
        regressions: changes.iter().filter(|c| c.verdict == Change::Regression).count(),
        improvements: changes.iter().filter(|c| c.verdict == Change::Improvement).count(),
        cells: changes,
        only_in_a,
        only_in_b,
    })
}

fn list(items: &[String]) -> String {
    match items.is_empty() {
        true => "no completed cell".into(),
        false => items.join(", "),
    }
}

pub fn markdown(c: &RunsComparison) -> String {
    let pct = |v: f64| format!("{}%", (v * 1000.0).round() / 10.0);
    let mut md = format!(
        "## faultline compare: {}\n\nA: `{}` ({}) → B: `{}` ({})\n\n",
        c.spec, c.a.dir, c.a.started, c.b.dir, c.b.started
    );
    md.push_str(&format!(
        "Throughput of B over A per cell (mean of each run's completed repeats) with a 95% bootstrap interval over the repeats: a regression or an improvement only when the interval lies wholly beyond ±{}.\n\n",
        pct(c.threshold)
    ));
    md.push_str("| Cell | Variant | A ops/s (repeats) | B ops/s (repeats) | B / A | 95% interval | p50 A → B ms | p99 A → B ms | Verdict |\n");
    md.push_str("|---|---|---|---|---|---|---|---|---|\n");
    let ms = |v: Option<f64>| v.map_or_else(|| "–".to_string(), |v| format!("{v:.2}"));
    for cell in &c.cells {
        md.push_str(&format!(
            "| {} | {} | {} ({}) | {} ({}) | {} | {} | {} → {} | {} → {} | {}{} |\n",
            cell.cell.replace('|', "\\|"),
            cell.variant.replace('|', "\\|"),
            thousands(cell.a.mean_throughput.round() as u64),
            cell.a.repeats,
            thousands(cell.b.mean_throughput.round() as u64),
            cell.b.repeats,
            format_ratio(cell.throughput.value),
            format_interval(cell.throughput.interval),
            ms(cell.a.p50_ms),
            ms(cell.b.p50_ms),
            ms(cell.a.p99_ms),
            ms(cell.b.p99_ms),
            cell.verdict.as_str(),
            if cell.note.is_some() { " (1 repeat)" } else { "" }
        ));
    }
    let noise = c.cells.len() - c.regressions - c.improvements;
    md.push_str(&format!(
        "\n{} regression{}, {} improvement{}, {noise} within noise.\n",
        c.regressions,
        if c.regressions == 1 { "" } else { "s" },
        c.improvements,
        if c.improvements == 1 { "" } else { "s" }
    ));
    if !c.only_in_a.is_empty() {
        md.push_str(&format!("\nCompleted only in A (not compared): {}.\n", c.only_in_a.join(", ")));
    }
    if !c.only_in_b.is_empty() {
        md.push_str(&format!("\nCompleted only in B (not compared): {}.\n", c.only_in_b.join(", ")));
    }
    md
}

/// What `faultline compare` prints and writes: Markdown on stdout, JSON to
/// `json` if given; exit 1 on a regression, 3 on bad input.
pub fn command(a: &Path, b: &Path, threshold: f64, json: Option<PathBuf>) -> u8 {
    if !(0.0..1.0).contains(&threshold) {
        eprintln!("error: --threshold must be a share from 0 to 1, e.g. 0.05 for ±5%");
        return crate::EXIT_USAGE;
    }
    let compared = match compare(a, b, threshold) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e:#}");
            return crate::EXIT_USAGE;
        }
    };
    crate::stdout::print(&markdown(&compared));
    if let Some(path) = json {
        let text = serde_json::to_string_pretty(&compared).expect("the comparison serializes");
        if let Err(e) = std::fs::write(&path, text + "\n") {
            eprintln!("error: cannot write {}: {e}", path.display());
            return crate::EXIT_USAGE;
        }
    }
    u8::from(compared.regressions > 0)
}
