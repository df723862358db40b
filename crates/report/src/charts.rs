//! Charts beside report.md, as SVG files drawn with plotters: per group of
//! cells, throughput and latency over the window of each variant and repeat
//! with each fault's window shaded; per group that compares variants, each
//! variant's latency percentiles; per capacity search, its knee (what each
//! offered rate got, the SLO's limits and the capacity found); per scenario, the throughput ratios with
//! their intervals against the parity band. The report links them. Labels
//! get the room their text needs, so none runs into another.

use std::path::Path;

use anyhow::Context;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde::Serialize;

use faultline_model::compare::Group;
use faultline_model::results::{CellResult, Comparison, Results};

/// One chart written: what it shows, and its file name in the chart folder.
#[derive(Debug, Clone, Serialize)]
pub struct Chart {
    /// `timeline`, `percentiles`, `knee` or `ratios`.
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
            if cells.iter().any(|x| x.capacity.is_some()) {
                let file = unique_name(&mut used, &format!("knee-{}", slug(&label)));
                let title = format!("{label}: capacity search, what each offered rate got");
                charts.push(Chart { kind: "knee", of: label.clone(), title, file });
            }
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
            let measure = if c.capacity.is_empty() { "throughput" } else { "capacity" };
            let title = format!("{}: {measure} ratio to the baseline, 95% interval", c.scenario);
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
            "knee" => knee(&chart.title, &measured_in(results, &chart.of)),
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
    if faultline_model::input_file::read(path, faultline_model::input_file::MAX_TEXT_BYTES)
        .is_ok_and(|old| old == bytes)
    {
        return Ok(());
    }
    std::fs::write(path, bytes).with_context(|| format!("cannot write {}", path.display()))
}

type DrawResult<T> = Result<T, Box<dyn std::error::Error>>;

/// How wide `text` is drawn at `size` px, taken generously (0.6 em a
/// character; sans-serif averages about 0.5): what the layout leaves room for.
pub fn text_width(text: &str, size: f64) -> f64 {
    text.chars().count() as f64 * size * 0.6
}

/// Each cell's colour: one per variant (in order of first appearance), so
/// the repeats of a variant read as one thing and the variants apart.
fn variant_colors(cells: &[&CellResult]) -> Vec<RGBColor> {
    let mut variants: Vec<&str> = Vec::new();
    cells
        .iter()
        .map(|c| {
            let i = variants.iter().position(|v| *v == c.variant()).unwrap_or_else(|| {
                variants.push(c.variant());
                variants.len() - 1
            });
            PALETTE[i % PALETTE.len()]
        })
        .collect()
}

/// The legend entry of a cell: its variant, on the first cell of it only.
fn first_of_variant(cells: &[&CellResult], i: usize) -> Option<String> {
    let variant = cells[i].variant();
    let repeats = cells.iter().filter(|c| c.variant() == variant).count();
    let first = cells.iter().position(|c| c.variant() == variant) == Some(i);
    first.then(|| match repeats {
        1 => variant.to_string(),
        n => format!("{variant} ({n} repeats)"),
    })
}

/// Two panels over the measured window: successful ops per second (an open
/// loop's asked rate dashed beneath), and the
/// p99 (solid; at most 25% high, see `TimelinePoint::p99_ms`) and max (dots)
/// latency of each timeline bucket (a second, or 100 ms in windows of 5 s
/// or less); faults shaded from their request to their heal (or the
/// window's end); a staged profile's stage boundaries dotted, each stage
/// named. A colour per variant.
fn timeline(title: &str, cells: &[&CellResult]) -> DrawResult<String> {
    let seconds = cells.iter().map(|c| c.measured_s.max(0.1)).fold(0.1, f64::max);
    let points = |c: &CellResult| c.stats.as_ref().map(|s| s.timeline.clone()).unwrap_or_default();
    let step = |c: &CellResult| c.stats.as_ref().map_or(1.0, |s| s.timeline_step_s.max(1e-3));
    let per_second = |c: &CellResult, ok: u64| ok as f64 / step(c);
    let max_ops = cells
        .iter()
        .flat_map(|c| points(c).into_iter().map(move |p| per_second(c, p.ok).max(p.target_rate.unwrap_or(0.0))))
        .fold(1.0, f64::max)
        * 1.1;
    let max_ms = cells.iter().flat_map(|c| points(c)).map(|p| p.max_ms).fold(0.1, f64::max) * 1.1;
    let colors = variant_colors(cells);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (960, 560)).into_drawing_area();
        root.fill(&WHITE)?;
        let titled = root.titled(title, ("sans-serif", 18))?;
        let (top, bottom) = titled.split_vertically(260);
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
        // Each fault's name at the top of its window, a row lower when it
        // would run into a name already placed.
        let mut placed: Vec<(f64, f64, i32)> = Vec::new();
        for (name, start, end) in &windows {
            let (start, end) = (*start, *end);
            let shade = RGBAColor(214, 39, 40, 0.12).filled();
            ops.draw_series(std::iter::once(Rectangle::new([(start, 0.0), (end, max_ops)], shade)))?;
            latency.draw_series(std::iter::once(Rectangle::new([(start, 0.001), (end, max_ms)], shade)))?;
            let (x, y) = ops.backend_coord(&(start, max_ops));
            let (from, to) = (x as f64 + 2.0, x as f64 + 2.0 + text_width(name, 12.0));
            let row = (0..)
                .find(|r| !placed.iter().any(|(a, b, pr)| pr == r && from < *b + 4.0 && *a < to + 4.0))
                .unwrap_or(0);
            placed.push((from, to, row));
            root.draw(&Text::new(
                name.clone(),
                (from as i32, y + 3 + row * 15),
                ("sans-serif", 12).into_font().color(&RGBColor(150, 20, 20)),
            ))?;
        }
        // A staged profile's stages, once (every cell of a group runs the
        // same profile): a dotted line where each begins, its name below.
        let stages = cells.iter().find_map(|c| c.stats.as_ref().filter(|s| !s.stages.is_empty()));
        for stage in stages.map(|s| s.stages.as_slice()).unwrap_or_default() {
            let grey = BLACK.mix(0.35).stroke_width(1);
            if stage.from_s > 0.0 {
                ops.draw_series(DashedLineSeries::new(vec![(stage.from_s, 0.0), (stage.from_s, max_ops)], 2, 3, grey))?;
                latency.draw_series(DashedLineSeries::new(
                    vec![(stage.from_s, 0.001), (stage.from_s, max_ms)],
                    2,
                    3,
                    grey,
                ))?;
            }
            let (x, y) = ops.backend_coord(&(stage.from_s, 0.0));
            root.draw(&Text::new(
                stage.name.clone(),
                (x + 3, y - 14),
                ("sans-serif", 11).into_font().color(&BLACK.mix(0.6)),
            ))?;
        }
        // An open loop's asked rate, once: black dashes under the achieved
        // lines, and dashed in the legend too.
        if let Some(cell) = cells.iter().find(|c| points(c).iter().any(|p| p.target_rate.is_some())) {
            let half = step(cell) / 2.0;
            let asked: Vec<(f64, f64)> =
                points(cell).iter().filter_map(|p| Some((p.t + half, p.target_rate?))).collect();
            ops.draw_series(DashedLineSeries::new(asked, 6, 4, BLACK.mix(0.6).stroke_width(1)))?
                .label("asked rate")
                .legend(|(x, y)| {
                    let dash = BLACK.mix(0.6).stroke_width(1);
                    EmptyElement::at((x, y))
                        + PathElement::new(vec![(0, 0), (6, 0)], dash)
                        + PathElement::new(vec![(10, 0), (16, 0)], dash)
                });
        }
        for (i, cell) in cells.iter().enumerate() {
            let color = colors[i];
            let series = points(cell);
            let half = step(cell) / 2.0;
            // Each bucket's value sits at its middle.
            let line = ops.draw_series(LineSeries::new(
                series.iter().map(|p| (p.t + half, per_second(cell, p.ok))),
                color.stroke_width(2),
            ))?;
            if let Some(label) = first_of_variant(cells, i) {
                line.label(label)
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
            }
            let with_ok: Vec<_> = series.iter().filter(|p| p.ok > 0).collect();
            latency.draw_series(LineSeries::new(
                with_ok.iter().map(|p| (p.t + half, p.p99_ms.unwrap_or(p.mean_ms).max(0.001))),
                color.stroke_width(2),
            ))?;
            latency.draw_series(
                with_ok.iter().map(|p| Circle::new((p.t + half, p.max_ms.max(0.001)), 2, color.filled())),
            )?;
        }
        ops.configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()?;
        root.present()?;
    }
    Ok(svg)
}

/// A capacity search's knee, against the offered rate (log scale): above,
/// ops sent and succeeded per second beside the offered rate itself
/// (dashed: what a target that keeps up would do), a strip only when every
/// step kept up (it would draw the diagonal alone); below, each step's p50
/// (dashed) and p99 (solid) with the SLO's latency limits in red. A
/// vertical line marks each search's capacity. A colour per search (each
/// repeat its own, labelled with what it found); steps that failed the
/// SLO are hollow.
fn knee(title: &str, cells: &[&CellResult]) -> DrawResult<String> {
    let searched: Vec<(usize, &faultline_model::capacity::CapacitySearch)> =
        cells.iter().enumerate().filter_map(|(i, c)| Some((i, c.capacity.as_ref()?))).collect();
    let steps = || searched.iter().flat_map(|(_, s)| &s.steps);
    let kept_up = |s: &faultline_model::capacity::CapacityStep| {
        (s.achieved_rate - s.rate).abs() <= 0.02 * s.rate && (s.throughput - s.rate).abs() <= 0.02 * s.rate
    };
    let diagonal = steps().all(kept_up);
    let low = steps().map(|s| s.rate).fold(f64::INFINITY, f64::min).clamp(1e-3, 1e9) / 1.3;
    let high = steps().map(|s| s.rate.max(s.achieved_rate)).fold(low * 2.0, f64::max) * 1.3;
    // Every search of a group has the same SLO: each limit once.
    let mut limits: Vec<&faultline_model::capacity::SloLimit> = Vec::new();
    for limit in searched.iter().flat_map(|(_, s)| &s.slo_limits) {
        if !limits.iter().any(|l| l.metric == limit.metric && l.ms == limit.ms) {
            limits.push(limit);
        }
    }
    let latencies = steps().flat_map(|s| s.p50_ms.into_iter().chain(s.p99_ms)).chain(limits.iter().map(|l| l.ms));
    let (ms_low, ms_high) = latencies.fold((f64::INFINITY, 0.0f64), |(a, b), v| (a.min(v), b.max(v)));
    let (ms_low, ms_high) = match ms_high > 0.0 {
        true => ((ms_low / 2.0).max(0.001), ms_high * 2.0),
        false => (0.001, 1.0),
    };
    // Repeats of one variant side by side: each its own colour.
    let repeated =
        searched.iter().any(|(i, _)| cells.iter().filter(|c| c.variant() == cells[*i].variant()).count() > 1);
    let colors: Vec<RGBColor> = match repeated {
        true => {
            let mut by_search = vec![PALETTE[0]; cells.len()];
            for (n, (i, _)) in searched.iter().enumerate() {
                by_search[*i] = PALETTE[n % PALETTE.len()];
            }
            by_search
        }
        false => variant_colors(cells),
    };
    let rate = |v: &f64| match *v >= 1000.0 {
        true => format!("{:.0}k", v / 1000.0),
        false => format!("{v:.0}"),
    };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (960, 620)).into_drawing_area();
        root.fill(&WHITE)?;
        let titled = root.titled(title, ("sans-serif", 18))?;
        // Every step kept up: the ops panel would be the diagonal alone, so
        // it shrinks to a strip (the legend's) and latency takes the room.
        let (top, bottom) = titled.split_vertically(if diagonal { 150 } else { 290 });
        let mut ops = ChartBuilder::on(&top)
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(70)
            .build_cartesian_2d((low..high).log_scale().with_key_points(rate_ticks(low, high)), 0.0..high)?;
        ops.configure_mesh()
            .x_desc("offered ops/s")
            .y_desc("ops/s (sent ○, ok ●)")
            .x_label_formatter(&rate)
            .y_label_formatter(&rate)
            .draw()?;
        let mut latency =
            ChartBuilder::on(&bottom).margin(10).x_label_area_size(30).y_label_area_size(70).build_cartesian_2d(
                (low..high).log_scale().with_key_points(rate_ticks(low, high)),
                (ms_low..ms_high).log_scale(),
            )?;
        latency
            .configure_mesh()
            .x_desc("offered ops/s")
            .y_desc("ms (p99 —, p50 - -)")
            .x_label_formatter(&rate)
            .draw()?;
        // The offered rate itself, a straight line bent by the log x axis.
        let offered: Vec<(f64, f64)> =
            (0..=48).map(|k| low * (high / low).powf(k as f64 / 48.0)).map(|r| (r, r)).collect();
        ops.draw_series(DashedLineSeries::new(offered, 6, 4, BLACK.mix(0.5).stroke_width(1)))?
            .label("offered")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], BLACK.mix(0.5).stroke_width(1)));
        let red = RGBColor(214, 39, 40);
        // Each limit's words above its line, after those of a limit at
        // about the same height.
        let mut placed: Vec<(i32, f64)> = Vec::new();
        for limit in &limits {
            latency.draw_series(DashedLineSeries::new(
                vec![(low, limit.ms), (high, limit.ms)],
                8,
                4,
                red.stroke_width(2),
            ))?;
            let (x, y) = latency.backend_coord(&(low, limit.ms));
            let text = format!("SLO {} {}ms", limit.metric, faultline_model::format::format_decimal(limit.ms));
            let from = placed
                .iter()
                .filter(|(py, _)| (py - y).abs() < 16)
                .map(|(_, right)| *right + 10.0)
                .fold(x as f64 + 6.0, f64::max);
            placed.push((y, from + text_width(&text, 12.0)));
            root.draw(&Text::new(text, (from as i32, y - 16), ("sans-serif", 12).into_font().color(&red)))?;
        }
        for (i, search) in &searched {
            let color = colors[*i];
            let mut by_rate: Vec<&faultline_model::capacity::CapacityStep> = search.steps.iter().collect();
            by_rate.sort_by(|a, b| a.rate.total_cmp(&b.rate));
            let line = ops
                .draw_series(LineSeries::new(by_rate.iter().map(|s| (s.rate, s.throughput)), color.stroke_width(2)))?;
            let label = match repeated {
                true => Some(format!("{} #{}: {}", cells[*i].variant(), cells[*i].repeat, search.reading())),
                false => first_of_variant(cells, *i),
            };
            if let Some(label) = label {
                line.label(label)
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
            }
            let dot = |s: &&faultline_model::capacity::CapacityStep, at: (f64, f64)| match s.met {
                true => Circle::new(at, 4, color.filled()),
                false => Circle::new(at, 4, color.stroke_width(2)),
            };
            ops.draw_series(by_rate.iter().map(|s| dot(s, (s.rate, s.throughput))))?;
            ops.draw_series(by_rate.iter().map(|s| Circle::new((s.rate, s.achieved_rate), 3, color.stroke_width(1))))?;
            let p99: Vec<(f64, f64)> = by_rate.iter().filter_map(|s| Some((s.rate, s.p99_ms?.max(ms_low)))).collect();
            let p50: Vec<(f64, f64)> = by_rate.iter().filter_map(|s| Some((s.rate, s.p50_ms?.max(ms_low)))).collect();
            latency.draw_series(LineSeries::new(p99, color.stroke_width(2)))?;
            latency.draw_series(DashedLineSeries::new(p50, 5, 4, color.stroke_width(1)))?;
            latency.draw_series(by_rate.iter().filter_map(|s| Some(dot(s, (s.rate, s.p99_ms?.max(ms_low))))))?;
            if let Some(capacity) = search.capacity.filter(|c| *c > 0.0) {
                ops.draw_series(LineSeries::new(
                    vec![(capacity, 0.0), (capacity, high)],
                    color.mix(0.7).stroke_width(1),
                ))?;
                latency.draw_series(LineSeries::new(
                    vec![(capacity, ms_low), (capacity, ms_high)],
                    color.mix(0.7).stroke_width(1),
                ))?;
            }
        }
        ops.configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()?;
        root.present()?;
    }
    Ok(svg)
}

/// Ticks of a log-scale rate axis: 1, 2 and 5 times the powers of ten in
/// the range (plotters' own may name one rate twice at the range's end).
fn rate_ticks(low: f64, high: f64) -> Vec<f64> {
    let first = low.log10().floor() as i32;
    let last = high.log10().ceil() as i32;
    (first..=last)
        .flat_map(|e| [1.0, 2.0, 5.0].map(|m| m * 10f64.powi(e)))
        .filter(|v| (low..=high).contains(v))
        .collect()
}

/// Latency at p50, p95, p99, p99.9 and max, a line per cell in its
/// variant's colour (the worst op kind at each percentile, as the gates
/// take it), on a log scale: where the variants part is where their tails
/// differ, and a variant's repeats show how much its own tail varies.
fn percentiles(title: &str, cells: &[&CellResult]) -> DrawResult<String> {
    const NAMES: [&str; 5] = ["p50", "p95", "p99", "p99.9", "max"];
    let values = |c: &CellResult| -> Option<[f64; 5]> {
        let stats = c.stats.as_ref()?;
        let kinds: Vec<_> = stats.per_op.values().filter_map(|o| o.latency_ms.as_ref()).collect();
        if kinds.is_empty() {
            return None;
        }
        let worst =
            |f: fn(&faultline_model::stats::LatencyStats) -> f64| kinds.iter().map(|l| f(l)).fold(0.0, f64::max);
        Some([worst(|l| l.p50), worst(|l| l.p95), worst(|l| l.p99), worst(|l| l.p999), worst(|l| l.max)])
    };
    let colors = variant_colors(cells);
    let lines: Vec<(usize, [f64; 5])> = cells.iter().enumerate().filter_map(|(i, c)| Some((i, values(c)?))).collect();
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
        for (i, v) in &lines {
            let color = colors[*i];
            let line = chart.draw_series(LineSeries::new(
                v.iter().enumerate().map(|(x, y)| (x as f64, *y)),
                color.stroke_width(2),
            ))?;
            if let Some(label) = first_of_variant(cells, *i) {
                line.label(label)
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
            }
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

/// The lines under each bar of a ratio chart: its matrix point's values
/// (`always, 1`, wrapped), then its profile and its candidate where the
/// scenario has several; and what the lines are, for the axis.
fn bar_labels(rows: &[&Comparison]) -> (Vec<Vec<String>>, String) {
    let profiles = rows.iter().any(|c| c.profile != rows[0].profile);
    let candidates = rows.iter().any(|c| c.target != rows[0].target);
    let dims: Vec<&str> = rows.first().map(|c| c.matrix.keys().map(String::as_str).collect()).unwrap_or_default();
    let labels = rows
        .iter()
        .map(|c| {
            let values: Vec<&str> = c.matrix.values().map(String::as_str).collect();
            let mut lines = wrap(&values, 24);
            if profiles || lines.is_empty() {
                lines.push(c.profile.clone());
            }
            if candidates {
                lines.push(format!("{} / {}", c.target, c.baseline));
            }
            lines
        })
        .collect();
    let mut axis = Vec::new();
    if !dims.is_empty() {
        axis.push(dims.join(", "));
    }
    if profiles || dims.is_empty() {
        axis.push("profile".to_string());
    }
    match rows.first() {
        Some(c) if !candidates => axis.push(format!("{} / {}", c.target, c.baseline)),
        _ => axis.push("candidate / baseline".to_string()),
    }
    (labels, axis.join(" · "))
}

/// `parts` joined with `, ` into lines of at most `width` characters (a
/// longer part keeps a line of its own).
fn wrap(parts: &[&str], width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for part in parts {
        match lines.last_mut() {
            Some(line) if line.chars().count() + 2 + part.chars().count() <= width => {
                line.push_str(", ");
                line.push_str(part);
            }
            Some(line) => {
                line.push(',');
                lines.push(part.to_string());
            }
            None => lines.push(part.to_string()),
        }
    }
    lines
}

/// A bar per comparison at its throughput ratio (its capacity ratio in a
/// capacity search's scenario) with the ratio printed on
/// it, whiskers over its interval, the line at 1.0 and the parity band
/// shaded; under each bar, its matrix point (and profile or candidate where
/// those differ), wrapped, and as much room per bar as its longest line.
fn ratios(title: &str, rows: &[&Comparison]) -> DrawResult<String> {
    // A capacity search's scenario compares capacities; any other, throughputs.
    let shown = |c: &Comparison| if c.capacity.is_empty() { c.throughput } else { c.capacity };
    const FONT: f64 = 12.0;
    const LINE: i32 = 15;
    let band = rows.first().map_or(0.0, |c| c.parity_band);
    let top = rows
        .iter()
        .flat_map(|c| [shown(c).value, shown(c).interval.map(|i| i.high)])
        .flatten()
        .fold(1.0 + band, f64::max)
        * 1.2;
    let n = rows.len().max(1);
    let (labels, axis) = bar_labels(rows);
    let ratio_text = |c: &Comparison| shown(c).value.map(|v| format!("{v:.2}x"));
    let slot = labels
        .iter()
        .flatten()
        .cloned()
        .chain(rows.iter().filter_map(|c| ratio_text(c)))
        .map(|t| text_width(&t, FONT))
        .fold(48.0, f64::max)
        + 16.0;
    let lines = labels.iter().map(Vec::len).max().unwrap_or(1) as i32;
    let (left, margin) = (60.0, 10.0);
    let width = (left + 2.0 * margin + slot * n as f64)
        .max(text_width(title, 18.0) + 40.0)
        .max(text_width(&axis, FONT) + left + 40.0)
        .max(480.0)
        .ceil() as u32;
    let label_area = (12 + lines * LINE + 26) as u32;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (width, 360 + label_area)).into_drawing_area();
        root.fill(&WHITE)?;
        let titled = root.titled(title, ("sans-serif", 18))?;
        let mut chart = ChartBuilder::on(&titled)
            .margin(margin as u32)
            .x_label_area_size(label_area)
            .y_label_area_size(left as u32)
            .build_cartesian_2d(0.0..n as f64, 0.0..top)?;
        // Each bar is named under it by the lines drawn below, not by ticks.
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .x_label_formatter(&|_| String::new())
            .x_desc(axis.as_str())
            .y_desc("candidate / baseline")
            .draw()?;
        chart.draw_series(std::iter::once(Rectangle::new(
            [(0.0, 1.0 - band), (n as f64, 1.0 + band)],
            RGBAColor(127, 127, 127, 0.15).filled(),
        )))?;
        chart
            .draw_series(std::iter::once(PathElement::new(vec![(0.0, 1.0), (n as f64, 1.0)], BLACK.stroke_width(1))))?;
        let font = TextStyle::from(("sans-serif", FONT).into_font());
        let centred_below = font.pos(Pos::new(HPos::Center, VPos::Top));
        let centred_above = font.pos(Pos::new(HPos::Center, VPos::Bottom));
        for (i, c) in rows.iter().enumerate() {
            let x = i as f64;
            let color = match c.word {
                Some(faultline_model::results::Word::Win) => PALETTE[2],
                Some(faultline_model::results::Word::Loss) => PALETTE[3],
                _ => PALETTE[0],
            };
            if let Some(v) = shown(c).value {
                chart.draw_series(std::iter::once(Rectangle::new(
                    [(x + 0.25, 0.0), (x + 0.75, v)],
                    color.mix(0.7).filled(),
                )))?;
            }
            if let Some(iv) = shown(c).interval {
                let whisker = BLACK.stroke_width(2);
                chart.draw_series([
                    PathElement::new(vec![(x + 0.5, iv.low), (x + 0.5, iv.high)], whisker),
                    PathElement::new(vec![(x + 0.42, iv.low), (x + 0.58, iv.low)], whisker),
                    PathElement::new(vec![(x + 0.42, iv.high), (x + 0.58, iv.high)], whisker),
                ])?;
            }
            if let (Some(text), Some(v)) = (ratio_text(c), shown(c).value) {
                let above = shown(c).interval.map_or(v, |iv| iv.high.max(v));
                let (px, py) = chart.backend_coord(&(x + 0.5, above));
                root.draw(&Text::new(text, (px, py - 4), centred_above.clone()))?;
            }
            let (px, py) = chart.backend_coord(&(x + 0.5, 0.0));
            for (k, line) in labels[i].iter().enumerate() {
                root.draw(&Text::new(line.clone(), (px, py + 8 + k as i32 * LINE), centred_below.clone()))?;
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

/// The extents of an SVG's text elements, as a reader's eye takes them:
/// for tests that check labels do not run into each other.
#[cfg(test)]
pub mod svg_text {
    #[derive(Debug)]
    pub struct TextBox {
        pub text: String,
        pub left: f64,
        pub top: f64,
        pub right: f64,
        pub bottom: f64,
    }

    impl TextBox {
        /// Whether the two overlap by more than a pixel each way.
        pub fn overlaps(&self, o: &TextBox) -> bool {
            self.left + 1.0 < o.right
                && o.left + 1.0 < self.right
                && self.top + 1.0 < o.bottom
                && o.top + 1.0 < self.bottom
        }
    }

    fn attr(tag: &str, name: &str) -> Option<String> {
        let at = tag.find(&format!(" {name}=\""))? + name.len() + 3;
        Some(tag[at..at + tag[at..].find('"')?].to_string())
    }

    fn unescape(text: &str) -> String {
        text.replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .replace("&#39;", "'")
            .replace("&amp;", "&")
    }

    /// Every non-empty `<text>`: its box from x, y, font-size, text-anchor,
    /// the baseline shift (`dy`) and a `rotate(a, x, y)` transform.
    pub fn boxes(svg: &str) -> Vec<TextBox> {
        let mut out = Vec::new();
        let mut rest = svg;
        while let Some(start) = rest.find("<text") {
            let tag_end = start + rest[start..].find('>').expect("a closed tag");
            let tag = &rest[start..tag_end];
            let close = tag_end + rest[tag_end..].find("</text>").expect("a closed text");
            let text = unescape(&rest[tag_end + 1..close]);
            rest = &rest[close..];
            if text.trim().is_empty() {
                continue;
            }
            let num = |name: &str| attr(tag, name).and_then(|v| v.trim_end_matches("px").parse::<f64>().ok());
            let (x, y, size) = (num("x").unwrap_or(0.0), num("y").unwrap_or(0.0), num("font-size").unwrap_or(12.0));
            let width = super::text_width(&text, size);
            let (left, right) = match attr(tag, "text-anchor").as_deref() {
                Some("middle") => (x - width / 2.0, x + width / 2.0),
                Some("end") => (x - width, x),
                _ => (x, x + width),
            };
            // plotters: dy 0.76em hangs the text below y, 0.5ex centres it, none sits it on y.
            let (top, bottom) = match attr(tag, "dy").as_deref() {
                Some(d) if d.ends_with("em") => (y, y + size),
                Some(d) if d.ends_with("ex") => (y - size / 2.0, y + size / 2.0),
                _ => (y - size, y),
            };
            let mut b = TextBox { text, left, top, right, bottom };
            if let Some(t) = attr(tag, "transform").filter(|t| t.starts_with("rotate(")) {
                let args: Vec<f64> =
                    t["rotate(".len()..t.len() - 1].split(',').filter_map(|v| v.trim().parse().ok()).collect();
                let (a, cx, cy) =
                    (args[0].to_radians(), args.get(1).copied().unwrap_or(0.0), args.get(2).copied().unwrap_or(0.0));
                let turn = |(px, py): (f64, f64)| {
                    let (dx, dy) = (px - cx, py - cy);
                    (cx + dx * a.cos() - dy * a.sin(), cy + dx * a.sin() + dy * a.cos())
                };
                let corners = [(b.left, b.top), (b.right, b.top), (b.left, b.bottom), (b.right, b.bottom)].map(turn);
                b.left = corners.iter().map(|c| c.0).fold(f64::MAX, f64::min);
                b.right = corners.iter().map(|c| c.0).fold(f64::MIN, f64::max);
                b.top = corners.iter().map(|c| c.1).fold(f64::MAX, f64::min);
                b.bottom = corners.iter().map(|c| c.1).fold(f64::MIN, f64::max);
            }
            out.push(b);
        }
        out
    }
}
