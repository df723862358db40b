//! Expands a spec into the ordered list of cells to run — scenario × matrix
//! point × repeat × profile × variant — before anything starts, so
//! `--dry-run` can print it.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use indexmap::IndexMap;

use crate::matrix::Point;
use crate::{LoadedSpec, Spec};
use faultline_model::labels::matrix_suffix;
use faultline_model::units::format_duration;

#[derive(Debug, Clone, Default)]
pub struct PlanOptions {
    pub quick: bool,
    /// Run only these scenarios.
    pub only: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct Plan {
    pub cells: Vec<Cell>,
    /// Why this run covers less than the whole spec (e.g. `--quick`); a
    /// subset can never PASS.
    pub subset_reasons: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct Cell {
    pub scenario: String,
    pub profile: String,
    /// The target for this variant (scenarios with several targets compare them).
    pub target: String,
    pub workload: String,
    /// What tells this cell's variant from the scenario's others: its target,
    /// or its workload in a scenario that compares workloads.
    pub variant: String,
    /// 1-based.
    pub repeat: u32,
    pub timing: CellTiming,
    /// The scenario's matrix point this cell runs (None without a matrix).
    pub point: Option<Arc<Point>>,
    /// Names the running target this cell drives: the target, with the
    /// values of the dimensions its fields use (`a[fsync=always]`). Cells
    /// of one instance share one server.
    pub instance: String,
}

#[derive(Debug, Clone, Copy)]
pub struct CellTiming {
    pub warmup: Duration,
    pub duration: Duration,
    pub deadline: Duration,
    pub hang_after: Duration,
    pub over_deadline_after: Duration,
    /// What the scenario's fault times (`at`, `heal_after`) are multiplied
    /// by: 1, unless `--quick`'s window would leave a fault out (its `at`
    /// at or past the quick window's end); then the quick window over the
    /// scenario's own, so every fault keeps its place in the window.
    pub fault_scale: f64,
    /// What a staged profile's stage lengths are multiplied by: 1, or
    /// under `--quick` the quick window over the stages' length, so the
    /// stages fill the quick window.
    pub stage_scale: f64,
    /// How many windows the cell runs: 1, or a capacity search's most
    /// steps when no confirmation fails (for the plan's length).
    pub windows: u32,
}

impl CellTiming {
    /// A scenario's faults as this cell schedules them (see `fault_scale`).
    pub fn scaled_faults(&self, faults: &[crate::FaultSpec]) -> Vec<crate::FaultSpec> {
        let scale = |d: Duration| Duration::from_secs_f64(d.as_secs_f64() * self.fault_scale);
        faults
            .iter()
            .map(|f| {
                let mut f = f.clone();
                f.at.0 = scale(f.at.0);
                if let Some(heal_after) = f.heal_after.as_mut() {
                    heal_after.0 = scale(heal_after.0);
                }
                f
            })
            .collect()
    }

    /// Warm-up and measured window together. Spec durations are at most a
    /// year each, but the sums still saturate rather than trust that.
    pub fn load_time(&self) -> Duration {
        self.warmup.saturating_add(self.duration).saturating_mul(self.windows)
    }
}

impl Cell {
    pub fn label(&self) -> String {
        format!("{}{}/{}/{}#{}", self.scenario, matrix_suffix(self.matrix()), self.profile, self.variant, self.repeat)
    }

    /// The matrix point's values (empty without a matrix).
    pub fn matrix(&self) -> &IndexMap<String, String> {
        static NONE: std::sync::OnceLock<IndexMap<String, String>> = std::sync::OnceLock::new();
        self.point.as_ref().map(|p| &p.values).unwrap_or_else(|| NONE.get_or_init(IndexMap::new))
    }

    /// The spec as this cell runs it: its matrix point's, or the campaign's.
    pub fn spec<'a>(&'a self, campaign: &'a Spec) -> &'a Spec {
        self.point.as_ref().map_or(campaign, |p| &p.spec)
    }

    /// A capacity search's step: this cell with its profile's open-loop
    /// rate set to `rate` (its matrix point's values and labels kept).
    pub fn at_rate(&self, campaign: &Spec, rate: f64) -> Cell {
        let mut spec = self.spec(campaign).clone();
        if let Some(open) = spec.profiles.get_mut(&self.profile).and_then(|p| p.open.as_mut()) {
            open.rate = Some(rate);
        }
        let point = Point { values: self.matrix().clone(), spec };
        Cell { point: Some(Arc::new(point)), timing: CellTiming { windows: 1, ..self.timing }, ..self.clone() }
    }

    /// Seeds this cell's op streams. The target is left out, so the variants
    /// of one repeat send the very same ops; `--only` does not change them.
    pub fn stream_salt(&self) -> u64 {
        // FNV-1a: stable across Rust versions, unlike the std hashers.
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for byte in format!("{}\0{}\0{}", self.scenario, self.profile, self.repeat).bytes() {
            hash = (hash ^ byte as u64).wrapping_mul(0x0100_0000_01b3);
        }
        hash
    }
}

pub fn build(loaded: &LoadedSpec, options: &PlanOptions) -> Result<Plan, String> {
    let spec = &loaded.spec;
    for name in &options.only {
        if !spec.scenarios.iter().any(|s| &s.name == name) {
            let known: Vec<&str> = spec.scenarios.iter().map(|s| s.name.as_str()).collect();
            return Err(format!("--only {name}: no such scenario (the spec has: {})", known.join(", ")));
        }
    }
    let mut subset_reasons = Vec::new();
    if options.quick {
        subset_reasons.push("--quick ran shortened timings".to_string());
    }
    let chosen = spec.scenarios.iter().filter(|s| options.only.contains(&s.name)).count();
    if !options.only.is_empty() && chosen < spec.scenarios.len() {
        subset_reasons.push(format!("--only ran {chosen} of {} scenarios", spec.scenarios.len()));
    }
    let mut cells = Vec::new();
    for (index, campaign_scenario) in spec.scenarios.iter().enumerate() {
        if !options.only.is_empty() && !options.only.contains(&campaign_scenario.name) {
            continue;
        }
        let points: Vec<Option<Arc<Point>>> = match loaded.matrix.points.get(&campaign_scenario.name) {
            Some(points) => points.iter().cloned().map(Some).collect(),
            None => vec![None],
        };
        // One point after the other, so each target configuration starts
        // once; within a point, the repeats alternate the variants. A point
        // may fill in the scenario's own fields (its profiles, its timing).
        for point in points {
            let scenario = point.as_ref().map_or(campaign_scenario, |p| &p.spec.scenarios[index]);
            let base = &spec.timing;
            let over = scenario.timing.clone().unwrap_or_default();
            let full_duration = over.duration.unwrap_or(base.duration).0;
            let (warmup, duration, repeats) = if options.quick {
                (base.quick.warmup.0, base.quick.duration.0, base.quick.repeats)
            } else {
                (
                    over.warmup.unwrap_or(base.warmup).0,
                    over.duration.unwrap_or(base.duration).0,
                    over.repeats.unwrap_or(base.repeats),
                )
            };
            let timing = CellTiming {
                warmup,
                duration,
                deadline: over.deadline.unwrap_or(base.deadline).0,
                hang_after: base.hang_after.0,
                over_deadline_after: base.over_deadline_after.0,
                fault_scale: match scenario.faults.iter().any(|f| f.at.0 >= duration) {
                    true => duration.as_secs_f64() / full_duration.as_secs_f64().max(1e-9),
                    false => 1.0,
                },
                stage_scale: 1.0,
                windows: 1,
            };
            // A capacity search's steps are its windows, each `step` long.
            let timing = match &scenario.capacity {
                Some(c) => CellTiming {
                    duration: if options.quick { duration } else { c.step.map_or(duration, |d| d.0) },
                    windows: c.planned_steps(),
                    ..timing
                },
                None => timing,
            };
            let variants = scenario.variants();
            for repeat in 1..=repeats {
                for profile in &scenario.profiles {
                    // Alternate the variants' order each repeat (A B, then B A) so a
                    // drifting host does not always favour the one that runs first.
                    let mut order = variants.clone();
                    let shift = (repeat as usize - 1) % order.len();
                    order.rotate_left(shift);
                    for (target, workload) in order {
                        // Refused as soon as it is too many, so a huge matrix
                        // is never built in memory first.
                        if cells.len() as u64 >= crate::limits::MAX_CELLS {
                            return Err(too_many_cells(&campaign_scenario.name));
                        }
                        let instance = instance_name(loaded, &scenario.name, &target, point.as_deref());
                        let profile_spec = &point.as_ref().map_or(spec, |p| &p.spec).profiles[profile];
                        let timing = staged_timing(timing, profile_spec, options.quick);
                        cells.push(Cell {
                            scenario: scenario.name.clone(),
                            profile: profile.clone(),
                            variant: scenario.variant_name(&target, &workload),
                            target,
                            workload,
                            repeat,
                            timing,
                            point: point.clone(),
                            instance,
                        });
                    }
                }
            }
        }
    }
    Ok(Plan { cells, subset_reasons })
}

/// A staged profile's measured window is its stages' length; under
/// `--quick` it is the quick window, the stages (and the faults placed in
/// them) scaled to fill it.
fn staged_timing(timing: CellTiming, profile: &crate::ProfileSpec, quick: bool) -> CellTiming {
    let Some(length) = profile.stages_length() else { return timing };
    match quick {
        true => {
            let scale = timing.duration.as_secs_f64() / length.as_secs_f64().max(1e-9);
            CellTiming { stage_scale: scale, fault_scale: scale, ..timing }
        }
        false => CellTiming { duration: length, fault_scale: 1.0, ..timing },
    }
}

fn too_many_cells(scenario: &str) -> String {
    format!(
        "the plan would hold more than {} cells (scenarios x matrix points x repeats x profiles x variants; \
         it passed the limit in scenario `{scenario}`): fewer matrix values, repeats or profiles, or --only",
        crate::limits::MAX_CELLS
    )
}

/// The target, with the values of the matrix dimensions its own fields use
/// and the scenario (a target without them is shared by every scenario).
fn instance_name(loaded: &LoadedSpec, scenario: &str, target: &str, point: Option<&Point>) -> String {
    let used = loaded.matrix.target_dims.get(target);
    let values: IndexMap<String, String> = point
        .map(|p| {
            p.values
                .iter()
                .filter(|(k, _)| used.is_some_and(|u| u.contains(k)))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default();
    match values.is_empty() {
        true => target.to_string(),
        false => format!("{target}{}@{scenario}", matrix_suffix(&values)),
    }
}

impl Plan {
    pub fn total_time(&self) -> Duration {
        load_time(&self.cells)
    }

    /// The load time of the cells after the `i`th (0-based), for the progress line.
    pub fn time_after(&self, i: usize) -> Duration {
        load_time(self.cells.get(i + 1..).unwrap_or_default())
    }

    /// The plan as `--dry-run` prints it.
    pub fn describe(&self, spec: &Spec, catalog: &dyn crate::Catalog) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "plan for `{}`: {} cells, about {} of load",
            spec.name,
            self.cells.len(),
            format_duration(self.total_time())
        );
        for reason in &self.subset_reasons {
            let _ = writeln!(out, "  note: {reason} (the verdict will be INCOMPLETE)");
        }
        for (i, c) in self.cells.iter().enumerate() {
            let shape = c.spec(spec).profiles[&c.profile].shape();
            let searched = match c.timing.windows > 1 {
                true => format!(", a capacity search of about {} steps", c.timing.windows),
                false => String::new(),
            };
            let _ = writeln!(
                out,
                "  {:>3}. {:<40} {:<24} workload {:<12} warm-up {}, measure {}, deadline {}{searched}",
                i + 1,
                c.label(),
                shape,
                c.workload,
                format_duration(c.timing.warmup),
                format_duration(c.timing.duration),
                format_duration(c.timing.deadline),
            );
        }
        // With a matrix, what each instance starts as (its values filled in).
        let mut shown: Vec<&str> = Vec::new();
        for c in self.cells.iter().filter(|c| c.point.is_some()) {
            if shown.contains(&c.instance.as_str()) {
                continue;
            }
            if shown.is_empty() {
                let _ = writeln!(out, "targets of the matrix points:");
            }
            shown.push(&c.instance);
            let t = &c.spec(spec).targets[&c.target];
            let default = catalog.kind(&t.kind, None).map(|d| d.default_command()).unwrap_or("?");
            let command = t.command.as_deref().unwrap_or(default);
            let line =
                faultline_model::command_line::shown(std::iter::once(command).chain(t.args.iter().map(String::as_str)));
            let _ = writeln!(out, "  {:<40} {line}", c.instance);
        }
        out
    }
}

fn load_time(cells: &[Cell]) -> Duration {
    cells.iter().fold(Duration::ZERO, |sum, c| sum.saturating_add(c.timing.load_time()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(yaml: &str) -> LoadedSpec {
        crate::parse(std::path::Path::new("t.yaml"), yaml, &[], &crate::catalog::plain::Plain).unwrap()
    }

    const TWO_TARGETS: &str = "name: ab\ntargets:\n  a: {kind: redis, provider: external, uri: 'redis://127.0.0.1:1'}\n  b: {kind: redis, provider: external, uri: 'redis://127.0.0.1:2'}\nworkloads:\n  w: {ops: {get: 1}}\nprofiles:\n  p: {closed: 1x1}\n  q: {closed: 2x2}\ntiming: {repeats: 2, duration: 3s}\nscenarios:\n  - {name: s, target: [a, b], workload: w, profiles: [p, q]}\n  - {name: t, target: a, workload: w, profiles: [p]}\n";

    #[test]
    fn expands_repeats_profiles_and_alternates_variants() {
        let plan = build(&spec(TWO_TARGETS), &PlanOptions::default()).unwrap();
        let labels: Vec<String> = plan.cells.iter().map(Cell::label).collect();
        assert_eq!(
            labels,
            [
                "s/p/a#1", "s/p/b#1", "s/q/a#1", "s/q/b#1", "s/p/b#2", "s/p/a#2", "s/q/b#2", "s/q/a#2", "t/p/a#1",
                "t/p/a#2"
            ]
        );
        assert!(plan.subset_reasons.is_empty());
        assert_eq!(plan.total_time(), Duration::from_secs(40));
    }

    #[test]
    fn a_matrix_runs_each_point_with_its_values_and_alternated_variants() {
        let text = TWO_TARGETS
            .replace(
                "b: {kind: redis, provider: external, uri: 'redis://127.0.0.1:2'}",
                "b: {kind: redis, provider: process, args: [--appendfsync, '{fsync}']}",
            )
            .replace("q: {closed: 2x2}", "q: {closed: '2x{depth}'}")
            .replace("profiles: [p, q]}", "profiles: [q], matrix: {fsync: [always, everysec], depth: [1, 16]}}");
        let loaded = spec(&text);
        let plan = build(&loaded, &PlanOptions::default()).unwrap();
        let labels: Vec<String> = plan.cells.iter().filter(|c| c.scenario == "s").map(Cell::label).collect();
        assert_eq!(labels.len(), 16, "{labels:?}");
        assert_eq!(
            labels[..4],
            [
                "s[fsync=always,depth=1]/q/a#1",
                "s[fsync=always,depth=1]/q/b#1",
                "s[fsync=always,depth=1]/q/b#2",
                "s[fsync=always,depth=1]/q/a#2"
            ]
        );
        assert_eq!(labels[15], "s[fsync=everysec,depth=16]/q/a#2");
        // Each cell runs its point's spec: the profile and the target's args filled in.
        let last = plan.cells.iter().rfind(|c| c.scenario == "s" && c.target == "b").unwrap();
        assert_eq!(last.spec(&loaded.spec).profiles["q"].load().to_string(), "closed 2x16");
        assert_eq!(last.spec(&loaded.spec).targets["b"].args, ["--appendfsync", "everysec"]);
        // `b` uses only fsync: one server per fsync value, in this scenario; `a` uses none.
        assert_eq!(last.instance, "b[fsync=everysec]@s");
        assert_eq!(plan.cells[0].instance, "a");
        let described = plan.describe(&loaded.spec, &crate::catalog::plain::Plain);
        assert!(described.contains("b[fsync=always]@s"), "{described}");
        // The test catalog serves every kind with `true`.
        assert!(described.contains("true --appendfsync everysec"), "{described}");
    }

    #[test]
    fn a_staged_profile_measures_its_stages() {
        let text = TWO_TARGETS.replace("q: {closed: 2x2}", "q: {open: {stages: [{to: 50, over: 2s}, {hold: 3s}]}}");
        let loaded = spec(&text);
        let plan = build(&loaded, &PlanOptions::default()).unwrap();
        let timing = |plan: &Plan, profile: &str| plan.cells.iter().find(|c| c.profile == profile).unwrap().timing;
        assert_eq!(timing(&plan, "p").duration, Duration::from_secs(3));
        assert_eq!((timing(&plan, "q").duration, timing(&plan, "q").stage_scale), (Duration::from_secs(5), 1.0));
        assert_eq!(loaded.spec.profiles["q"].load().to_string(), "open 2 stages up to 50/s over 4x64");
        let closed = TWO_TARGETS
            .replace("q: {closed: 2x2}", "q: {closed: {stages: [{clients: 1, hold: 1s}, {clients: 3, hold: 1s}]}}");
        let closed = build(&spec(&closed), &PlanOptions::default()).unwrap();
        assert_eq!(timing(&closed, "q").duration, Duration::from_secs(2));
        let q = &spec(&TWO_TARGETS.replace(
            "q: {closed: 2x2}",
            "q: {closed: {stages: [{clients: 1, hold: 1s}, {clients: 3, hold: 1s}], in_flight: 4}}",
        ))
        .spec
        .profiles["q"];
        assert_eq!((q.shape(), q.load().to_string()), ("closed 2 stages up to 3x4".into(), "closed 3x4".into()));
        let spans = q.stage_spans(0.5);
        assert_eq!(
            (spans[1].name.as_str(), spans[1].from_s, spans[1].to_s, spans[1].clients),
            ("stage2", 0.5, 1.0, Some(3))
        );
        // --quick: the 2 s quick window, the stages scaled to fill it.
        let quick = build(&loaded, &PlanOptions { quick: true, only: vec![] }).unwrap();
        assert_eq!((timing(&quick, "q").duration, timing(&quick, "q").stage_scale), (Duration::from_secs(2), 0.4));
    }

    #[test]
    fn quick_moves_a_fault_it_would_leave_out_to_its_place_in_the_window() {
        let yaml = "name: q\ntargets:\n  t: {kind: redis, provider: process}\nworkloads:\n  w: {ops: {get: 1}}\n\
                    profiles:\n  p: {closed: 1x1}\ntiming: {duration: 8s}\nscenarios:\n\
                    \x20 - {name: late, target: t, workload: w, profiles: [p],\n\
                    \x20    faults: [{name: f, at: 2s, action: pause, target: t, heal_after: 2s}, {name: g, at: 7s, action: kill, target: t}]}\n\
                    \x20 - {name: early, target: t, workload: w, profiles: [p],\n\
                    \x20    faults: [{name: f, at: 1s, action: pause, target: t, heal_after: 4s}]}\n";
        let loaded = spec(yaml);
        let full = build(&loaded, &PlanOptions { quick: false, only: vec![] }).unwrap();
        let quick = build(&loaded, &PlanOptions { quick: true, only: vec![] }).unwrap();
        let faults = |plan: &Plan, i: usize| {
            let cell = &plan.cells[i];
            let scenario = loaded.spec.scenarios.iter().find(|s| s.name == cell.scenario).unwrap();
            cell.timing
                .scaled_faults(&scenario.faults)
                .iter()
                .map(|f| (f.at.0, f.heal_after.map(|d| d.0)))
                .collect::<Vec<_>>()
        };
        let s = Duration::from_millis;
        assert_eq!(faults(&full, 0), [(s(2000), Some(s(2000))), (s(7000), None)]);
        // The quick window is 2 s: 2 s and 7 s of 8 s are at 0.5 s and 1.75 s of it.
        assert_eq!(faults(&quick, 0), [(s(500), Some(s(500))), (s(1750), None)]);
        // Inside the quick window already: as written.
        assert_eq!(faults(&quick, 1), [(s(1000), Some(s(4000)))]);
    }

    #[test]
    fn a_capacity_search_plans_its_steps_at_the_searched_rate() {
        let text = TWO_TARGETS.replace("q: {closed: 2x2}", "q: {open: {connections: 2, in_flight: 8}}").replace(
            "- {name: t, target: a, workload: w, profiles: [p]}",
            "- {name: t, target: a, workload: w, profiles: [q], capacity: {rate: {from: 1000, to: 64000}, slo: 'errors == 0', step: 2s}}",
        );
        let text = text.replace("profiles: [p, q]}", "profiles: [p]}");
        let loaded = spec(&text);
        let plan = build(&loaded, &PlanOptions::default()).unwrap();
        let cell = plan.cells.iter().find(|c| c.scenario == "t").unwrap();
        // 1k to 64k doubling is 7 rates; one factor of 2 bisected to 5% is
        // 4 steps; one confirmation; the first failure and about half the
        // bisections retried once (3).
        assert_eq!((cell.timing.duration, cell.timing.windows), (Duration::from_secs(2), 15));
        let step = cell.at_rate(&loaded.spec, 5660.0);
        assert_eq!(step.spec(&loaded.spec).profiles["q"].load().to_string(), "open 5660/s over 2x8");
        assert_eq!((step.label(), step.timing.windows), (cell.label(), 1));
        assert!(plan
            .describe(&loaded.spec, &crate::catalog::plain::Plain)
            .contains("capacity search of about 15 steps"));
    }

    #[test]
    fn quick_and_only_are_subsets() {
        let plan = build(&spec(TWO_TARGETS), &PlanOptions { quick: true, only: vec!["t".into()] }).unwrap();
        assert_eq!(plan.cells.len(), 1);
        assert_eq!(plan.cells[0].timing.duration, Duration::from_secs(2));
        assert_eq!(plan.subset_reasons.len(), 2);
        let err = build(&spec(TWO_TARGETS), &PlanOptions { quick: false, only: vec!["x".into()] }).unwrap_err();
        assert!(err.contains("no such scenario"), "{err}");
    }
}
