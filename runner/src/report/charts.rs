//! Charts beside report.md, as SVG files drawn with plotters: per group of
//! cells, throughput and latency per second of each variant and repeat with
//! each fault's window shaded; per group that compares variants, each
//! variant's latency percentiles; per scenario, the throughput ratios with
//! their intervals against the parity band. The report links them.

use std::path::Path;

use anyhow::Context;
use plotters::prelude::*;
use serde::Serialize;

use crate::comparison::Group;
use crate::results::{CellResult, Comparison, Results};

/// One chart written: what it shows, and its file name in the chart folder.
#[derive(Debug, Clone, Serialize)]
pub struct Chart {
    /// `timeline`, `percentiles` or `ratios`.
    pub kind: &'static str,
    /// The group (`scenario/profile`) of a timeline or percentile chart, the
    /// scenario of a ratio chart.
    pub of: String,
    pub title: String,
    pub file: String,
}

const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

/// The charts a run has, in report order, with their file names: a
/// timeline per group of cells that measured something, a percentile chart
/// per such group with more than one variant, a ratio chart per scenario
/// with comparisons.
pub fn plan(results: &Results) -> Vec<Chart> {
    let mut charts = Vec::new();
    let mut used: Vec<String> = Vec::new();
    let mut groups: Vec<String> = Vec::new();
    for c in results.cells.iter().filter(|c| c.stats.is_some()) {
        let label = Group::of(c).label();
        if !groups.contains(&label) {
            let file = unique_name(&mut used, &format!("timeline-{}", slug(&label)));
            let title = format!("{label}: throughput and latency per second");
            charts.push(Chart { kind: "timeline", of: label.clone(), title, file });
            let cells = measured_in(results, &label);
            if cells.iter().any(|x| x.variant() != cells[0].variant()) {
                let file = unique_name(&mut used, &format!("percentiles-{}", slug(&label)));
                let title = format!("{label}: latency percentiles of each variant");
                charts.push(Chart { kind: "percentiles", of: label.clone(), title, file });
            }
            groups.push(label);
        }
    }
    let mut scenarios: Vec<&str> = Vec::new();
    for c in &results.comparisons {
        if !scenarios.contains(&c.scenario.as_str()) {
            scenarios.push(&c.scenario);
            let file = unique_name(&mut used, &format!("ratios-{}", slug(&c.scenario)));
            let title = format!("{}: throughput ratio to the baseline, 95% interval", c.scenario);
            charts.push(Chart { kind: "ratios", of: c.scenario.clone(), title, file });
        }
    }
    charts
}

/// Draws every chart of a run into `dir` (created if needed) and returns
/// them as [`plan`] names them. The same results draw the same bytes, and a
/// file that already holds them is left alone.
pub fn draw_all(results: &Results, dir: &Path) -> anyhow::Result<Vec<Chart>> {
    let charts = plan(results);
    if charts.is_empty() {
        return Ok(charts);
    }
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    for chart in &charts {
        let svg = match chart.kind {
            "timeline" => timeline(&chart.title, &measured_in(results, &chart.of)),
            "percentiles" => percentiles(&chart.title, &measured_in(results, &chart.of)),
            _ => {
                let rows: Vec<&Comparison> = results.comparisons.iter().filter(|c| c.scenario == chart.of).collect();
                ratios(&chart.title, &rows)
            }
        }
        .map_err(|e| anyhow::anyhow!("cannot draw the chart {}: {e}", chart.title))?;
        write_if_changed(&dir.join(&chart.file), svg.as_bytes())?;
    }
    Ok(charts)
}

/// The cells of group `label` that measured something.
fn measured_in<'r>(results: &'r Results, label: &str) -> Vec<&'r CellResult> {
    results.cells.iter().filter(|c| c.stats.is_some() && Group::of(c).label() == label).collect()
}

/// File-name-safe text: letters, digits, `-`, `_`, `=` and `.`.
fn slug(text: &str) -> String {
    text.chars().map(|c| if c.is_ascii_alphanumeric() || "-_=.".contains(c) { c } else { '-' }).collect()
}

fn unique_name(used: &mut Vec<String>, stem: &str) -> String {
    let mut name = format!("{stem}.svg");
    let mut n = 2;
    while used.contains(&name) {
        name = format!("{stem}-{n}.svg");
        n += 1;
    }
    used.push(name.clone());
    name
}

/// Leaves a file whose bytes are already right untouched (its time too).
pub fn write_if_changed(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    if crate::input_file::read(path, crate::input_file::MAX_TEXT_BYTES).is_ok_and(|old| old == bytes) {
        return Ok(());
    }
    std::fs::write(path, bytes).with_context(|| format!("cannot write {}", path.display()))
}

type DrawResult<T> = Result<T, Box<dyn std::error::Error>>;

/// Two panels over the measured window: successful ops per second, and the
/// p99 (solid; at most 25% high, see `TimelinePoint::p99_ms`) and max (dots)
/// latency of each second; faults shaded from their request to their heal
/// (or the window's end).
fn timeline(title: &str, cells: &[&CellResult]) -> DrawResult<String> {
    let seconds = cells.iter().map(|c| c.measured_s.ceil().max(1.0)).fold(1.0, f64::max);
    let points = |c: &CellResult| c.stats.as_ref().map(|s| s.timeline.clone()).unwrap_or_default();
    let max_ops = cells.iter().flat_map(|c| points(c)).map(|p| p.ok as f64).fold(1.0, f64::max) * 1.1;
    let max_ms = cells.iter().flat_map(|c| points(c)).map(|p| p.max_ms).fold(0.1, f64::max) * 1.1;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (960, 560)).into_drawing_area();
        root.fill(&WHITE)?;
        let root = root.titled(title, ("sans-serif", 18))?;
        let (top, bottom) = root.split_vertically(260);
        let mut ops = ChartBuilder::on(&top)
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..seconds, 0.0..max_ops)?;
        ops.configure_mesh()
            .x_desc("seconds into the measured window")
            .y_desc("ok ops/s")
            .y_label_formatter(&|v| format!("{v:.0}"))
            .draw()?;
        let mut latency = ChartBuilder::on(&bottom)
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..seconds, (0.001..max_ms).log_scale())?;
        latency.configure_mesh().x_desc("seconds into the measured window").y_desc("ms (p99 —, max ···)").draw()?;
        // Every repeat schedules the same faults: each distinct window once.
        let mut windows: Vec<(String, f64, f64)> = Vec::new();
        for f in cells.iter().flat_map(|c| &c.faults) {
            let end = f.healed_s.unwrap_or(seconds).max(f.requested_s);
            let same =
                |w: &(String, f64, f64)| w.0 == f.name && (w.1 - f.requested_s).abs() < 0.1 && (w.2 - end).abs() < 0.1;
            if !windows.iter().any(same) {
                windows.push((f.name.clone(), f.requested_s, end));
            }
        }
        {
            for (name, start, end) in &windows {
                let (start, end) = (*start, *end);
                let shade = RGBAColor(214, 39, 40, 0.12).filled();
                ops.draw_series(std::iter::once(Rectangle::new([(start, 0.0), (end, max_ops)], shade)))?;
                latency.draw_series(std::iter::once(Rectangle::new([(start, 0.001), (end, max_ms)], shade)))?;
                ops.draw_series(std::iter::once(Text::new(
                    name.clone(),
                    (start, max_ops * 0.97),
                    ("sans-serif", 12).into_font().color(&RGBColor(150, 20, 20)),
                )))?;
            }
        }
        for (i, cell) in cells.iter().enumerate() {
            let color = PALETTE[i % PALETTE.len()];
            let series = points(cell);
            // Each second's value sits at its middle.
            ops.draw_series(LineSeries::new(
                series.iter().map(|p| (p.t as f64 + 0.5, p.ok as f64)),
                color.stroke_width(2),
            ))?
            .label(format!("{} #{}", cell.variant(), cell.repeat))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
            let with_ok: Vec<_> = series.iter().filter(|p| p.ok > 0).collect();
            latency.draw_series(LineSeries::new(
                with_ok.iter().map(|p| (p.t as f64 + 0.5, p.p99_ms.unwrap_or(p.mean_ms).max(0.001))),
                color.stroke_width(2),
            ))?;
            latency.draw_series(
                with_ok.iter().map(|p| Circle::new((p.t as f64 + 0.5, p.max_ms.max(0.001)), 2, color.filled())),
            )?;
        }
        ops.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).draw()?;
        root.present()?;
    }
    Ok(svg)
}

/// Latency at p50, p95, p99, p99.9 and max, a line per variant and repeat
/// (the worst op kind at each percentile, as the gates take it), on a log
/// scale: where the variants part is where their tails differ.
fn percentiles(title: &str, cells: &[&CellResult]) -> DrawResult<String> {
    const NAMES: [&str; 5] = ["p50", "p95", "p99", "p99.9", "max"];
    let values = |c: &CellResult| -> Option<[f64; 5]> {
        let stats = c.stats.as_ref()?;
        let kinds: Vec<_> = stats.per_op.values().filter_map(|o| o.latency_ms.as_ref()).collect();
        if kinds.is_empty() {
            return None;
        }
        let worst = |f: fn(&crate::metrics::LatencyStats) -> f64| kinds.iter().map(|l| f(l)).fold(0.0, f64::max);
        Some([worst(|l| l.p50), worst(|l| l.p95), worst(|l| l.p99), worst(|l| l.p999), worst(|l| l.max)])
    };
    let lines: Vec<(String, [f64; 5])> =
        cells.iter().filter_map(|c| Some((format!("{} #{}", c.variant(), c.repeat), values(c)?))).collect();
    let top = lines.iter().flat_map(|(_, v)| v.iter().copied()).fold(0.1, f64::max) * 1.5;
    let bottom = lines.iter().flat_map(|(_, v)| v.iter().copied()).fold(top, f64::min).max(0.001) / 1.5;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (720, 420)).into_drawing_area();
        root.fill(&WHITE)?;
        let root = root.titled(title, ("sans-serif", 18))?;
        let mut chart = ChartBuilder::on(&root)
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(70)
            .build_cartesian_2d(-0.3..4.3, (bottom..top).log_scale())?;
        chart
            .configure_mesh()
            .x_labels(5)
            .x_label_formatter(&|x: &f64| NAMES.get(x.round() as usize).copied().unwrap_or("").to_string())
            .y_desc("latency of successful ops, ms")
            .draw()?;
        for (i, (label, v)) in lines.iter().enumerate() {
            let color = PALETTE[i % PALETTE.len()];
            chart
                .draw_series(LineSeries::new(v.iter().enumerate().map(|(x, y)| (x as f64, *y)), color.stroke_width(2)))?
                .label(label.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
            chart.draw_series(v.iter().enumerate().map(|(x, y)| Circle::new((x as f64, *y), 3, color.filled())))?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()?;
        root.present()?;
    }
    Ok(svg)
}

/// A bar per variant and group at its throughput ratio, whiskers over its
/// interval, the line at 1.0 and the parity band shaded.
fn ratios(title: &str, rows: &[&Comparison]) -> DrawResult<String> {
    let band = rows.first().map_or(0.0, |c| c.parity_band);
    let top = rows
        .iter()
        .flat_map(|c| [c.throughput.value, c.throughput.interval.map(|i| i.high)])
        .flatten()
        .fold(1.0 + band, f64::max)
        * 1.15;
    let n = rows.len().max(1) as f64;
    let label = |c: &Comparison| {
        let group = Group { scenario: String::new(), matrix: c.matrix.clone(), profile: c.profile.clone() };
        format!("{} {}", group.label().trim_start_matches('/'), c.target)
    };
    let labels: Vec<String> = rows.iter().map(|c| label(c)).collect();
    let mut svg = String::new();
    {
        let width = (240 + 110 * rows.len()).clamp(480, 1600) as u32;
        let root = SVGBackend::with_string(&mut svg, (width, 420)).into_drawing_area();
        root.fill(&WHITE)?;
        let root = root.titled(title, ("sans-serif", 18))?;
        let mut chart = ChartBuilder::on(&root)
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..n, 0.0..top)?;
        // Each bar is named by the text on it, not by the axis.
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .x_label_formatter(&|_| String::new())
            .y_desc("candidate / baseline")
            .draw()?;
        chart.draw_series(std::iter::once(Rectangle::new(
            [(0.0, 1.0 - band), (n, 1.0 + band)],
            RGBAColor(127, 127, 127, 0.15).filled(),
        )))?;
        chart.draw_series(std::iter::once(PathElement::new(vec![(0.0, 1.0), (n, 1.0)], BLACK.stroke_width(1))))?;
        for (i, c) in rows.iter().enumerate() {
            let x = i as f64;
            let color = match c.word {
                Some(crate::results::Word::Win) => PALETTE[2],
                Some(crate::results::Word::Loss) => PALETTE[3],
                _ => PALETTE[0],
            };
            if let Some(v) = c.throughput.value {
                chart.draw_series(std::iter::once(Rectangle::new(
                    [(x + 0.25, 0.0), (x + 0.75, v)],
                    color.mix(0.7).filled(),
                )))?;
                chart.draw_series([
                    Text::new(labels[i].clone(), (x + 0.05, top * 0.96), ("sans-serif", 13).into_font()),
                    Text::new(format!("{v:.2}x"), (x + 0.05, top * 0.91), ("sans-serif", 13).into_font()),
                ])?;
            }
            if let Some(iv) = c.throughput.interval {
                let whisker = BLACK.stroke_width(2);
                chart.draw_series([
                    PathElement::new(vec![(x + 0.5, iv.low), (x + 0.5, iv.high)], whisker),
                    PathElement::new(vec![(x + 0.42, iv.low), (x + 0.58, iv.low)], whisker),
                    PathElement::new(vec![(x + 0.42, iv.high), (x + 0.58, iv.high)], whisker),
                ])?;
            }
        }
        root.present()?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_safe_and_distinct() {
        assert_eq!(slug("s[fsync=always,depth=1]/p 1"), "s-fsync=always-depth=1--p-1");
        let mut used = vec![];
        assert_eq!(unique_name(&mut used, "a"), "a.svg");
        assert_eq!(unique_name(&mut used, "a"), "a-2.svg");
    }
}
