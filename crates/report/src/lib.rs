//! The report: renders results.json as Markdown with minijinja (the default
//! template in reports/templates/, or the spec's own), with its SVG charts
//! ([`charts`]), as a section of another document (`report --into`,
//! [`section`]), as JUnit XML ([`junit`]) and as a CI step summary
//! ([`step_summary`]).
//!
//! It reads the results model (faultline-model) and nothing else of
//! faultline's: no spec, no engine, no runtime. Everything a report shows
//! is in results.json, so `faultline report` renders a finished run exactly
//! as the run itself did, and these tests work from committed results
//! (fixtures/results/). Text that is easier to build in Rust than in a
//! template ([`blocks`]) is handed to every template ready-made.

pub mod blocks;
pub mod charts;
pub mod junit;
pub mod section;
pub mod step_summary;

use std::path::{Path, PathBuf};

use anyhow::Context;
use minijinja::{context, Environment, Value};
use serde::Serialize;

use faultline_model::format::{format_ratio, thousands};
use faultline_model::results::{format_interval, format_word, CellResult, Results, Word};
use faultline_model::stats::LatencyStats;

pub const DEFAULT_TEMPLATE: &str = include_str!("../../../reports/templates/default.md.j2");
/// What `report --into` writes unless a template is chosen: the campaign as
/// a section of a longer document.
pub const SECTION_TEMPLATE: &str = include_str!("../../../reports/templates/section.md.j2");
/// The comparison tables, rendered on their own and given to every
/// template as `comparison_tables`.
const COMPARISONS_PARTIAL: &str = include_str!("../../../reports/templates/comparisons.md.j2");

/// One latency table: a scenario × profile, all targets and repeats.
#[derive(Serialize)]
struct Table<'a> {
    /// The group's label, `scenario/profile`, which its timeline chart names.
    group: String,
    scenario: &'a str,
    /// The matrix point, `[fsync=always,depth=1]`, or empty.
    matrix: String,
    profile: &'a str,
    shape: &'a str,
    rows: Vec<Row<'a>>,
    cells: Vec<&'a CellResult>,
    /// Cells with a role timeline: each member's role, one letter a second.
    roles: Vec<RoleTimeline<'a>>,
    /// Per fault, when its lost writes were acknowledged against the spans
    /// a demoted primary was still primary.
    lost_writes: Vec<String>,
    /// Cells of a capacity search: what each found, and its steps.
    capacities: Vec<CapacityRow<'a>>,
}

#[derive(Serialize)]
struct CapacityRow<'a> {
    variant: &'a str,
    repeat: u32,
    /// `48,000/s`, `at least 48,000/s (client-bound)`.
    reading: String,
    search: &'a faultline_model::capacity::CapacitySearch,
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
        let matrix = faultline_model::labels::matrix_suffix(&cell.matrix);
        let index = match tables
            .iter()
            .position(|t| t.scenario == cell.scenario && t.matrix == matrix && t.profile == cell.profile)
        {
            Some(i) => i,
            None => {
                tables.push(Table {
                    group: faultline_model::compare::Group::of(cell).label(),
                    scenario: &cell.scenario,
                    matrix,
                    profile: &cell.profile,
                    shape: &cell.shape,
                    rows: vec![],
                    cells: vec![],
                    roles: vec![],
                    lost_writes: vec![],
                    capacities: vec![],
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
                members: faultline_model::roles::per_second(&cell.roles, cell.measured_s),
            });
        }
        if let Some(search) = &cell.capacity {
            table.capacities.push(CapacityRow {
                variant: cell.variant(),
                repeat: cell.repeat,
                reading: search.reading(),
                search,
            });
        }
        for f in &cell.faults {
            if let Some(line) = blocks::lost_writes(f) {
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
        t.capacities.sort_by(|a, b| (a.variant, a.repeat).cmp(&(b.variant, b.repeat)));
    }
    tables
}

/// Reads and parses a template, so a broken one is reported before a run
/// rather than after it.
pub fn check_template(path: &Path) -> anyhow::Result<()> {
    environment(Template::File(path)).map(|_| ())
}

/// Which template renders a report.
#[derive(Clone, Copy)]
pub enum Template<'a> {
    /// The full report (report.md).
    Default,
    /// The campaign as a section of a longer document.
    Section,
    File(&'a Path),
}

fn environment(template: Template) -> anyhow::Result<(Environment<'static>, String)> {
    let (name, source) = match template {
        Template::File(p) => (
            p.display().to_string(),
            faultline_model::input_file::read_to_string(p, faultline_model::input_file::MAX_TEXT_BYTES)
                .with_context(|| format!("cannot read report template {}", p.display()))?,
        ),
        Template::Default => ("default.md.j2".to_string(), DEFAULT_TEMPLATE.to_string()),
        Template::Section => ("section.md.j2".to_string(), SECTION_TEMPLATE.to_string()),
    };
    let mut env = Environment::new();
    env.add_filter("ratio", |v: Option<f64>| format_ratio(v));
    env.add_filter("interval", |v: Value| {
        format_interval(serde_json::from_value(serde_json::to_value(&v).unwrap_or_default()).ok())
    });
    env.add_filter("point", |v: Value| {
        let point: indexmap::IndexMap<String, String> =
            serde_json::from_value(serde_json::to_value(&v).unwrap_or_default()).unwrap_or_default();
        faultline_model::labels::matrix_suffix(&point)
    });
    env.add_filter("word", |v: Option<String>| match v.as_deref() {
        Some("WIN") => format_word(Some(Word::Win)),
        Some("LOSS") => format_word(Some(Word::Loss)),
        Some("parity") => format_word(Some(Word::Parity)),
        _ => format_word(None),
    });
    env.set_trim_blocks(true);
    env.add_template("comparisons.md.j2", COMPARISONS_PARTIAL).expect("the built-in tables parse");
    env.add_filter("ms", |v: f64| format!("{v:.2}"));
    env.add_filter("num", |v: f64| thousands(v.round() as u64));
    env.add_filter("sparkline", |v: Vec<f64>| sparkline(&v));
    // Text from plugins goes into table cells: keep it on one line, and
    // its pipes from ending the cell.
    env.add_filter("cell", |v: String| v.replace('|', "\\|").replace(['\n', '\r'], " "));
    env.add_template_owned(name.clone(), source).with_context(|| format!("report template {name} does not parse"))?;
    Ok((env, name))
}

/// A report's charts, and the folder its links point into (relative to
/// the report).
pub struct ChartLinks<'a> {
    pub charts: &'a [charts::Chart],
    pub dir: &'a str,
}

pub fn render(
    results: &Results,
    template: Template,
    title: Option<&str>,
    charts: ChartLinks,
) -> anyhow::Result<String> {
    let (env, name) = environment(template)?;
    let template = env.get_template(&name)?;
    // Rendered apart and handed over as text, so any template can show them.
    let comparison_tables = match results.comparisons.is_empty() {
        true => String::new(),
        false => env
            .get_template("comparisons.md.j2")?
            .render(context! { comparisons => Value::from_serialize(&results.comparisons) })
            .context("the comparison tables failed to render")?,
    };
    let title = title.map(str::to_string).unwrap_or_else(|| format!("faultline: {}", results.run.name));
    template
        .render(context! {
            title,
            run => Value::from_serialize(&results.run),
            verdict => results.verdict.as_str(),
            verdict_reasons => results.verdict_reasons,
            gates => Value::from_serialize(&results.gates),
            targets => Value::from_serialize(&results.targets),
            servers => Value::from_serialize(servers(&results.targets)),
            cells => Value::from_serialize(&results.cells),
            tables => Value::from_serialize(tables(results)),
            comparisons => Value::from_serialize(&results.comparisons),
            comparison_tables,
            errors => results.errors,
            charts => Value::from_serialize(charts.charts),
            chart_dir => charts.dir,
            manifest => Value::from_serialize(&results.manifest),
            crash_recovery => blocks::crash_recovery(&results.crash_recovery),
            probes => blocks::probes(&results.cells, &results.targets),
            provenance => blocks::provenance(results),
        })
        .with_context(|| format!("report template {name} failed to render"))
}

/// Each server the run drove, once, with the targets that ran it: a
/// matrix starts a target once per point, and a line naming the same
/// server for each would say one thing fifteen times.
#[derive(Serialize)]
struct ServerTargets<'r> {
    server: &'r str,
    targets: Vec<&'r str>,
}

fn servers(targets: &[faultline_model::results::TargetInfo]) -> Vec<ServerTargets<'_>> {
    let mut out: Vec<ServerTargets> = Vec::new();
    for t in targets {
        match out.iter_mut().find(|s| s.server == t.server) {
            Some(s) if s.targets.contains(&t.name.as_str()) => {}
            Some(s) => s.targets.push(&t.name),
            None => out.push(ServerTargets { server: &t.server, targets: vec![&t.name] }),
        }
    }
    out
}

/// report.md and its charts (in `charts/`) in a run directory.
pub fn write_run_report(
    results: &Results,
    run_dir: &Path,
    template: Option<&Path>,
    title: Option<&str>,
) -> anyhow::Result<PathBuf> {
    let drawn = charts::draw_all(results, &run_dir.join("charts"))?;
    let template = template.map_or(Template::Default, Template::File);
    let markdown = render(results, template, title, ChartLinks { charts: &drawn, dir: "charts" })?;
    let path = run_dir.join("report.md");
    std::fs::write(&path, faultline_model::redact::text(&markdown).as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}

/// `report --into FILE --section NAME`: the section written into FILE, its
/// charts into a folder beside it. Every check comes before the first
/// write, so bad input leaves the file and the folder as they were. A
/// section the file lacks is added only when it has no other or `new`
/// says so ([`section::splice`]). Returns whether the file changed.
pub fn write_section(
    results: &Results,
    document: &Path,
    (name, new): (&str, bool),
    template: Option<&Path>,
    title: Option<&str>,
) -> anyhow::Result<bool> {
    section::check_name(name).map_err(anyhow::Error::msg)?;
    let destination = section::Destination::open(document)?;
    let (folder, relative) = section::chart_folder(&destination.path, name);
    if folder.exists() && !folder.is_dir() {
        anyhow::bail!("{} is in the way of the section's charts: it is not a folder", folder.display());
    }
    // Rendered first with the charts it will have, so a template error
    // stops before anything is written.
    let planned = charts::plan(results);
    let template = template.map_or(Template::Section, Template::File);
    let markdown = render(results, template, title, ChartLinks { charts: &planned, dir: &relative })?;
    let markdown = faultline_model::redact::text(&markdown);
    let text = section::splice(&destination.text, name, &markdown, new)
        .map_err(|e| anyhow::anyhow!("{}: {e}; the file was not changed", destination.path.display()))?;
    let drawn = charts::draw_all(results, &folder)?;
    debug_assert_eq!(drawn.len(), planned.len());
    destination.replace(&text)
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

    /// One fixture of fixtures/results/ (index.json): a shipped spec's
    /// synthetic results, full or `--quick`, filling every section of the
    /// report, and the spec's own template. The runner writes them.
    #[derive(serde::Deserialize)]
    struct Fixture {
        spec: String,
        quick: bool,
        results: String,
        template: Option<String>,
    }

    fn repository() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
    }

    fn fixtures() -> Vec<(Fixture, Results)> {
        let dir = repository().join("fixtures/results");
        let index: Vec<Fixture> =
            serde_json::from_str(&std::fs::read_to_string(dir.join("index.json")).unwrap()).unwrap();
        assert!(index.len() >= 10, "{} fixtures", index.len());
        index
            .into_iter()
            .map(|f| {
                let text = std::fs::read_to_string(dir.join(&f.results)).unwrap();
                let results: Results = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", f.results));
                (f, results)
            })
            .collect()
    }

    /// Every shipped spec's report, rendered from results that fill every
    /// section (faults, an unrecovered target, roles, checks with witnesses,
    /// error examples, an under-sent open loop, plugin criteria) and no
    /// description, is valid Markdown: each table parses as one, with as
    /// many cells in each row as in its header, and each bullet is its own
    /// list item.
    #[test]
    fn every_shipped_spec_renders_valid_markdown() {
        for (fixture, results) in fixtures().into_iter().filter(|(f, _)| !f.quick) {
            let path = &fixture.spec;
            let planned = charts::plan(&results);
            assert!(!planned.is_empty());
            let text =
                render(&results, Template::Default, None, ChartLinks { charts: &planned, dir: "charts" }).unwrap();
            let expected = expected_items(&results);
            if let Err(e) = markdown::check(&text, &expected) {
                panic!("{path}: {e}\n\n{text}");
            }
            // A scenario with several variants has its ratios, and a chart of them.
            let comparing = !results.comparisons.is_empty();
            assert_eq!(comparing, text.contains("| Throughput | Paired median | 95% interval |"), "{path}");
            for chart in &planned {
                assert!(text.contains(&format!("](charts/{})", chart.file)), "{path}: {}", chart.file);
            }
            let section =
                render(&results, Template::Section, None, ChartLinks { charts: &planned, dir: "s-charts" }).unwrap();
            if let Err(e) = markdown::check(&section, &[]) {
                panic!("{path} as a section: {e}\n\n{section}");
            }
            // The spec's own template, and every template shows the provenance.
            let mut rendered = vec![("default", text), ("section", section)];
            if let Some(own) = &fixture.template {
                let file = repository().join(own);
                let links = ChartLinks { charts: &planned, dir: "charts" };
                let text = render(&results, Template::File(&file), None, links).unwrap();
                if let Err(e) = markdown::check(&text, &[]) {
                    panic!("{path} with {own}: {e}\n\n{text}");
                }
                rendered.push(("its own", text));
            }
            for (which, text) in rendered {
                let row = "| Target `kv` | redis 7.0.15 (redis via process, redis://127.0.0.1:1); `/usr/bin/redis-server` sha256 0123456789abcdef; args `--save a\\|b` |";
                assert!(text.contains(row), "{path} {which}: no target row\n{text}");
                assert!(text.contains("| Host | "), "{path} {which}: no host row");
            }
        }
    }

    /// A hot-key check that judged no key reads NOTHING JUDGED in the
    /// DynamoDB template, as the default template says it, never as a pass
    /// ("OK (0 in 0 keys)").
    #[test]
    fn the_dynamodb_template_says_when_the_hot_key_check_judged_nothing() {
        let (fixture, mut results) =
            fixtures().into_iter().find(|(f, _)| f.results == "synthetic-dynamodb-hot-key.json").unwrap();
        let hot = results.cells[0].checks.iter_mut().find(|k| k.checker == "hot-key").unwrap();
        (hot.status, hot.checked, hot.violations) = (faultline_model::checks::CheckStatus::Ok, 0, 0);
        hot.witnesses.clear();
        let planned = charts::plan(&results);
        let links = || ChartLinks { charts: &planned, dir: "charts" };
        let own = repository().join(fixture.template.unwrap());
        let text = render(&results, Template::File(&own), None, links()).unwrap();
        let row = text.lines().find(|l| l.starts_with("| transactions | 32 writers |")).unwrap();
        assert!(row.contains("| NOTHING JUDGED (0 keys"), "{row}");
        assert!(!text.contains("OK (0 in 0 keys"), "{text}");
        let default = render(&results, Template::Default, None, links()).unwrap();
        assert!(default.contains("| hot-key | 0 "), "{default}");
        assert!(default.contains("NOTHING JUDGED"), "{default}");
    }

    /// Every chart of every shipped spec, full and `--quick`, drawn from
    /// results that fill it: no two labels overlap (each text's extent taken
    /// from the SVG: position, anchor, baseline, size, rotation), and a
    /// percentile chart has a colour per variant, not per repeat.
    #[test]
    fn every_shipped_spec_draws_charts_whose_labels_do_not_overlap() {
        for (fixture, results) in fixtures() {
            let path = &fixture.results;
            let dir = tempfile::tempdir().unwrap();
            for chart in charts::draw_all(&results, dir.path()).unwrap() {
                let svg = std::fs::read_to_string(dir.path().join(&chart.file)).unwrap();
                let boxes = charts::svg_text::boxes(&svg);
                assert!(!boxes.is_empty(), "{}", chart.file);
                for (i, a) in boxes.iter().enumerate() {
                    for b in &boxes[i + 1..] {
                        assert!(
                            !a.overlaps(b),
                            "{path}: {}: `{}` runs into `{}`: {a:?} {b:?}",
                            chart.file,
                            a.text,
                            b.text
                        );
                    }
                }
                if chart.kind == "percentiles" {
                    let mut variants: Vec<&str> = results
                        .cells
                        .iter()
                        .filter(|c| c.stats.is_some() && faultline_model::compare::Group::of(c).label() == chart.of)
                        .map(|c| c.variant())
                        .collect();
                    variants.dedup();
                    variants.sort();
                    variants.dedup();
                    let mut colours: Vec<&str> = svg
                        .split("<polyline")
                        .skip(1)
                        .filter(|l| l.contains("stroke-width=\"2\""))
                        .filter_map(|l| l.split("stroke=\"").nth(1)?.split('"').next())
                        .filter(|c| *c != "#000000")
                        .collect();
                    colours.sort();
                    colours.dedup();
                    assert_eq!(colours.len(), variants.len(), "{}: {variants:?} {colours:?}", chart.file);
                }
            }
        }
    }

    /// How many list items the report must have, by what they begin with.
    fn expected_items(results: &Results) -> Vec<(&'static str, usize)> {
        let measured = results.cells.iter().filter(|c| c.stats.is_some()).count();
        let not_run = results.cells.len() - measured;
        let witnesses = results.cells.iter().flat_map(|c| &c.checks).map(|k| k.witnesses.len()).sum();
        let members = results.cells.iter().filter(|c| !c.roles.is_empty() && c.stats.is_some()).count() * 2;
        let judged_reads = results.cells.iter().filter(|c| c.non_primary_reads.is_some() && c.stats.is_some()).count();
        let fault_errors = results.cells.iter().filter(|c| c.stats.is_some()).map(|c| c.faults.len()).sum();
        vec![
            ("ops/s over the window", measured),
            (" failed:", not_run),
            ("witness: ", witnesses),
            (" role: ", members),
            ("fault error (", fault_errors),
            ("5 lost writes, acknowledged between", fault_errors),
            ("reads answered by a member that was not primary", judged_reads),
        ]
    }

    /// A Markdown checker for the report: tables and list items as a
    /// CommonMark (GFM tables) parser reads them.
    mod markdown {
        use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};

        pub fn check(text: &str, expected_items: &[(&str, usize)]) -> Result<(), String> {
            // Source tables: runs of lines that start with `|`.
            let lines: Vec<&str> = text.lines().collect();
            let mut blocks: Vec<Vec<&str>> = Vec::new();
            for (i, line) in lines.iter().enumerate() {
                if line.starts_with('|') {
                    match i > 0 && lines[i - 1].starts_with('|') {
                        true => blocks.last_mut().unwrap().push(line),
                        false => blocks.push(vec![line]),
                    }
                }
            }
            for block in &blocks {
                let cells = |l: &str| l.replace("\\|", "").matches('|').count();
                let header = cells(block[0]);
                if let Some(bad) = block.iter().find(|l| cells(l) != header) {
                    return Err(format!("a table row has other cells than its header `{}`: `{bad}`", block[0]));
                }
                if block.len() < 2 || !block[1].starts_with("|---") {
                    return Err(format!("a table without its delimiter row: `{}`", block[0]));
                }
            }
            let mut tables = 0;
            let mut items: Vec<String> = Vec::new();
            let mut in_item = false;
            for event in Parser::new_ext(text, Options::ENABLE_TABLES) {
                match event {
                    Event::Start(Tag::Table(_)) => tables += 1,
                    Event::Start(Tag::Item) => {
                        items.push(String::new());
                        in_item = true;
                    }
                    Event::End(TagEnd::Item) => in_item = false,
                    Event::Text(t) | Event::Code(t) if in_item => items.last_mut().unwrap().push_str(&t),
                    _ => {}
                }
            }
            if tables != blocks.len() {
                return Err(format!(
                    "{} tables in the text, {tables} parsed: one is glued to other text",
                    blocks.len()
                ));
            }
            for (marker, want) in expected_items {
                let found = items.iter().filter(|i| i.contains(marker)).count();
                if found != *want {
                    return Err(format!("{found} list items with `{marker}`, expected {want}: {items:#?}"));
                }
            }
            Ok(())
        }
    }
}
