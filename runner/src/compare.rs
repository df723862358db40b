//! Ratios between the variants of a scenario (e.g. a candidate against Redis:
//! "0.91x"), from the means over their alternated repeats.

use crate::results::{CellResult, CellStatus, Comparison};
use crate::spec::Spec;

pub fn compare(spec: &Spec, cells: &[CellResult]) -> Vec<Comparison> {
    let mut out = Vec::new();
    // One comparison per scenario, matrix point and profile.
    let mut groups: Vec<(&str, &indexmap::IndexMap<String, String>, &str)> = Vec::new();
    for c in cells {
        if !groups.contains(&(&c.scenario, &c.matrix, &c.profile)) {
            groups.push((&c.scenario, &c.matrix, &c.profile));
        }
    }
    for (scenario, matrix, profile) in groups {
        let group: Vec<&CellResult> = cells
            .iter()
            .filter(|c| {
                c.scenario == scenario
                    && &c.matrix == matrix
                    && c.profile == profile
                    && c.status == CellStatus::Completed
            })
            .collect();
        // The baseline is the scenario's first variant, as the spec lists them.
        let Some(scenario_spec) = spec.scenarios.iter().find(|s| s.name == scenario) else { continue };
        let variants: Vec<String> =
            scenario_spec.variants().iter().map(|(t, w)| scenario_spec.variant_name(t, w)).collect();
        let Some(baseline) = variants.first().map(String::as_str) else { continue };
        if !group.iter().any(|c| c.variant() == baseline) {
            continue;
        }
        let summary = |t: &str| {
            let runs: Vec<&&CellResult> = group.iter().filter(|c| c.variant() == t).collect();
            let n = runs.len() as f64;
            let throughput = runs.iter().filter_map(|c| c.stats.as_ref()).map(|s| s.throughput).sum::<f64>() / n;
            let p99 = runs
                .iter()
                .filter_map(|c| c.stats.as_ref())
                .flat_map(|s| s.per_op.values().filter_map(|o| o.latency_ms.map(|l| l.p99)))
                .fold(None, |acc: Option<f64>, v| Some(acc.map_or(v, |a| a.max(v))));
            (throughput, p99, runs.len() as u32)
        };
        let (base_tp, base_p99, _) = summary(baseline);
        for t in variants.iter().map(String::as_str).filter(|t| *t != baseline) {
            let (tp, p99, repeats) = summary(t);
            if repeats == 0 {
                continue;
            }
            out.push(Comparison {
                scenario: scenario.to_string(),
                matrix: matrix.clone(),
                profile: profile.to_string(),
                baseline: baseline.to_string(),
                target: t.to_string(),
                throughput_ratio: (base_tp > 0.0).then(|| tp / base_tp),
                p99_ratio: match (p99, base_p99) {
                    (Some(a), Some(b)) if b > 0.0 => Some(a / b),
                    _ => None,
                },
                repeats,
            });
        }
    }
    out
}
