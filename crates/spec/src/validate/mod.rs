//! Checks a parsed spec for what types alone cannot say: references between
//! sections, value ranges, and fields that only apply to some variants.
//! A capacity search's rules are capacity.rs's, a docker target's docker.rs's.

mod capacity;
mod docker;

use std::collections::HashSet;

use crate::catalog::Catalog;
use crate::checkers::{CheckerInfo, UnmetAt};
use crate::fault::{listed, FaultType};
use crate::kind_info::KindInfo;
use crate::limits::{MAX_CELLS, MAX_CONNECTIONS, MAX_IN_FLIGHT, MAX_OPEN_RATE, MAX_REPEATS, MAX_ROUNDS, MIN_OPEN_RATE};
use crate::model::*;
use crate::problem::Problem;
use crate::target::{ProviderKind, TargetSpec};
use faultline_model::ops::OpKind;
use faultline_model::units::Dur;

pub fn validate(spec: &Spec, catalog: &dyn Catalog) -> Result<(), Problem> {
    if spec.name.trim().is_empty() {
        return Err(("name".into(), "must not be empty".into()));
    }
    for (name, target) in &spec.targets {
        validate_target(&format!("targets.{name}"), name, target, catalog)?;
    }
    for (name, workload) in &spec.workloads {
        validate_workload(&format!("workloads.{name}"), workload)?;
    }
    for (name, profile) in &spec.profiles {
        let at = format!("profiles.{name}");
        match (&profile.closed, &profile.open) {
            (Some(_), Some(_)) => return Err((at, "give either `closed` or `open`, not both".into())),
            (None, None) => return Err((at, "needs `closed: CxI` (e.g. 3x32) or `open: {rate: N}`".into())),
            (None, Some(open)) => validate_open(&format!("{at}.open"), open, searched_only(spec, name))?,
            (Some(ClosedSpec::Stages(closed)), None) => validate_closed_stages(&format!("{at}.closed"), closed)?,
            (Some(ClosedSpec::Shape(_)), None) => {}
        }
    }
    validate_timing("timing", &spec.timing)?;
    validate_checker_names(spec, catalog)?;
    validate_scenarios(spec, catalog)?;
    validate_checkers(spec, catalog)?;
    if let Some(band) = spec.report.parity {
        if !(0.0..1.0).contains(&band) {
            return Err((
                "report.parity".into(),
                "must be a share from 0 to 1, e.g. 0.05 for ratios within ±5% to count as parity".into(),
            ));
        }
    }
    for (name, gate) in &spec.gates {
        let at = format!("gates.{name}");
        match &gate.rule {
            GateRule::Expr(text) => {
                let expr = crate::gate::parse(text, catalog.checkers()).map_err(|e| (at.clone(), e))?;
                if let Some(fault) = expr
                    .faults()
                    .into_iter()
                    .find(|f| !spec.scenarios.iter().any(|sc| sc.faults.iter().any(|x| &x.name == f)))
                {
                    return Err((at.clone(), format!("no scenario has a fault named `{fault}`")));
                }
                let named = |c: &str| {
                    spec.checkers
                        .iter()
                        .chain(spec.scenarios.iter().flat_map(|s| s.checkers.iter().flatten()))
                        .any(|k| k.as_str() == c)
                };
                if let Some(missing) = expr.checkers().into_iter().find(|c| !named(c)) {
                    return Err((at.clone(), format!("needs the `{missing}` checker: add it to `checkers:`")));
                }
                let searched = |sc: &&ScenarioSpec| gate.scenario.as_ref().is_none_or(|s| s == &sc.name);
                if expr.reads(crate::metric::Reads::Capacity)
                    && !spec.scenarios.iter().filter(searched).any(|sc| sc.capacity.is_some())
                {
                    return Err((
                        at.clone(),
                        "reads `capacity`, but no scenario it covers searches for it: add `capacity:` to the scenario, or name one that has it with `scenario:`".into(),
                    ));
                }
                if let Some(stage) = expr.stages().into_iter().find(|name| !stage_named(spec, gate, name)) {
                    return Err((at.clone(), unknown_stage(spec, gate, &stage)));
                }
                let covered =
                    || spec.scenarios.iter().filter(|sc| gate.scenario.as_ref().is_none_or(|s| s == &sc.name));
                // A scenario it names that does not exist is said below.
                let covers_any = covered().next().is_some();
                if covers_any && expr.reads(crate::metric::Reads::Fanout) && !covered().any(|sc| fans_out(spec, sc)) {
                    return Err((
                        at.clone(),
                        "reads what fan-out subscribers received, but no scenario it covers fans out: give its workload a `fanout:` section with `publish` ops, or name the scenario that has one with `scenario:`".into(),
                    ));
                }
                if let Some((op, sent)) = op_never_sent(spec, &expr.ops(), covered()).filter(|_| covers_any) {
                    return Err((
                        at.clone(),
                        format!(
                            "reads `{}` ops, but no scenario it covers sends any (their workloads send {sent}): \
                             name an op kind they send, or the scenario that sends it with `scenario:`",
                            op.as_str()
                        ),
                    ));
                }
                for (target, baseline) in expr.ratio_pairs() {
                    validate_ratio_pair(spec, &at, gate.scenario.as_deref(), &target, &baseline)?;
                }
            }
            GateRule::Plugin(p) => validate_plugin(&at, p)?,
        }
        if let Some(s) = &gate.scenario {
            if !spec.scenarios.iter().any(|sc| &sc.name == s) {
                let names: Vec<String> = spec.scenarios.iter().map(|sc| sc.name.clone()).collect();
                return Err((format!("{at}.scenario"), undefined("scenario", s, names.iter())));
            }
        }
        if let Some(p) = &gate.profile {
            if !spec.profiles.contains_key(p) {
                return Err((format!("{at}.profile"), undefined("profile", p, spec.profiles.keys())));
            }
        }
    }
    Ok(())
}

/// Whether a workload of the scenario fans out (or is not known here: a
/// matrix placeholder, left to the run).
fn fans_out(spec: &Spec, scenario: &ScenarioSpec) -> bool {
    scenario.workload.names().iter().any(|name| spec.workloads.get(name).is_none_or(|w| w.fanout.is_some()))
}

/// An op kind in `ops` (a gate's or an SLO's `p99(del)`) that can never be
/// measured, as no workload of the `scenarios` it covers sends it, with the
/// op kinds they do send (`get, set`). None when each is sent, or when a
/// scenario's workload is not known here (a matrix placeholder), which is
/// then left to the run.
pub(crate) fn op_never_sent<'a>(
    spec: &Spec,
    ops: &[OpKind],
    scenarios: impl Iterator<Item = &'a ScenarioSpec>,
) -> Option<(OpKind, String)> {
    let mut sent: Vec<OpKind> = Vec::new();
    for sc in scenarios {
        for name in sc.workload.names() {
            let w = spec.workloads.get(&name)?;
            sent.extend(w.ops.iter().filter(|(_, weight)| **weight > 0.0).map(|(k, _)| *k));
        }
    }
    let missing = ops.iter().find(|op| !sent.contains(op))?;
    sent.sort_by_key(|k| k.index());
    sent.dedup();
    let sent: Vec<&str> = sent.iter().map(|k| k.as_str()).collect();
    Some((*missing, if sent.is_empty() { "nothing".to_string() } else { sent.join(", ") }))
}

/// What a spec may ask but will get nothing from: a checker its workload
/// gives nothing to judge (no read for stale-read, no write for
/// lost-write). A warning, not an error: the run is what it is, and a gate
/// on such a checker is INCOMPLETE, never a pass.
pub fn warnings(spec: &Spec, catalog: &dyn Catalog) -> Vec<Problem> {
    let mut out: Vec<Problem> = Vec::new();
    // A capacity search runs no checkers.
    for (i, s) in spec.scenarios.iter().enumerate().filter(|(_, s)| s.capacity.is_none()) {
        let (checkers, at) = match &s.checkers {
            Some(c) => (c, format!("scenarios[{i}].checkers")),
            None => (&spec.checkers, "checkers".to_string()),
        };
        for (j, name) in checkers.iter().enumerate() {
            let Ok(checker) = crate::checkers::find(catalog.checkers(), name.as_str()) else { continue };
            for name in s.workload.names() {
                let Some(w) = spec.workloads.get(&name) else { continue };
                let sends = |k: OpKind| w.ops.get(&k).is_some_and(|weight| *weight > 0.0);
                if let Some(why) = checker.lacks(&sends) {
                    out.push((
                        format!("{at}[{j}]"),
                        format!(
                            "`{}` will judge nothing in scenario `{}`: {why} (workload `{name}`); a gate on it will be INCOMPLETE",
                            checker.name(),
                            s.name
                        ),
                    ));
                }
            }
        }
    }
    out
}

/// A ratio gate names two variants of a scenario it covers, one of them the
/// scenario's first (the baseline every ratio is taken against).
fn validate_ratio_pair(
    spec: &Spec,
    at: &str,
    scenario: Option<&str>,
    target: &str,
    baseline: &str,
) -> Result<(), Problem> {
    let mut seen: Vec<String> = Vec::new();
    for sc in spec.scenarios.iter().filter(|sc| scenario.is_none_or(|s| s == sc.name)) {
        let variants: Vec<String> = sc.variants().iter().map(|(t, w)| sc.variant_name(t, w)).collect();
        let has = |v: &str| variants.iter().any(|x| x == v);
        if has(target) && has(baseline) {
            if variants[0] == baseline || variants[0] == target {
                return Ok(());
            }
            return Err((
                at.into(),
                format!(
                    "ratios are taken against a scenario's first variant: scenario `{}` compares against `{}`, \
                     so write ratio(…, {target}/{}) or ratio(…, {baseline}/{})",
                    sc.name, variants[0], variants[0], variants[0]
                ),
            ));
        }
        for v in variants {
            if !seen.contains(&v) {
                seen.push(v);
            }
        }
    }
    Err((
        at.into(),
        format!(
            "no scenario{} has both `{target}` and `{baseline}` as variants (they are: {})",
            scenario.map(|s| format!(" named `{s}`")).unwrap_or_default(),
            if seen.is_empty() { "none".to_string() } else { seen.join(", ") }
        ),
    ))
}

fn validate_target(at: &str, name: &str, t: &TargetSpec, catalog: &dyn Catalog) -> Result<(), Problem> {
    catalog.known(&t.kind).map_err(|e| (format!("{at}.kind"), e))?;
    if t.provider != ProviderKind::Docker {
        if let Some(field) = docker::docker_only_fields(t) {
            return Err((format!("{at}.{field}"), "applies only to provider: docker".into()));
        }
    }
    if let Some(m) = t.members {
        docker::member_count(at, m)?;
        let takes = match t.provider {
            ProviderKind::Docker => true,
            ProviderKind::Process => catalog.shared_host_members(&t.kind).is_some(),
            ProviderKind::External => false,
        };
        if !takes {
            let message = match t.provider {
                ProviderKind::Process => format!(
                    "applies only to provider: docker for `{}` targets (a `{}` process target is one server)",
                    t.kind, t.kind
                ),
                _ => "applies only to provider: docker, and to process targets of kinds whose members share a host \
                      (etcd): an external target is its URI"
                    .into(),
            };
            return Err((format!("{at}.members"), message));
        }
    }
    match t.provider {
        ProviderKind::Docker if !catalog.runs_in_containers(&t.kind) => {
            return Err((
                format!("{at}.provider"),
                format!("`{}` targets run in no container: use provider process or external", t.kind),
            ))
        }
        ProviderKind::Docker => docker::validate(at, name, t)?,
        ProviderKind::Process => {
            if t.uri.is_some() {
                return Err((
                    format!("{at}.uri"),
                    "applies only to provider: external (process targets get a free port)".into(),
                ));
            }
            // The program must exist before anything starts: a missing one
            // would cost the ready_timeout after earlier cells ran.
            match &t.command {
                Some(command) => crate::host::check_program(command).map_err(|e| (format!("{at}.command"), e))?,
                None => {
                    let default = kind_info(t, catalog)?.default_command();
                    crate::host::check_program(default)
                        .map_err(|e| (at.to_string(), format!("the default server of this kind: {e}")))?
                }
            }
        }
        ProviderKind::External => {
            let Some(uri) = &t.uri else {
                return Err((at.into(), "provider: external needs `uri`, e.g. redis://127.0.0.1:6379".into()));
            };
            kind_info(t, catalog)?
                .check_uri(uri)
                .map_err(|e| (format!("{at}.uri"), format!("`{}` {e}", faultline_model::redact::text(uri))))?;
            if t.command.is_some() {
                return Err((format!("{at}.command"), "applies only to provider: process".into()));
            }
            if !t.args.is_empty() {
                return Err((format!("{at}.args"), "applies only to provider: process".into()));
            }
        }
    }
    if t.ready_timeout.0.is_zero() {
        return Err((format!("{at}.ready_timeout"), "must be longer than 0s".into()));
    }
    if t.fault_filesystem {
        if t.provider == ProviderKind::External {
            return Err((format!("{at}.fault_filesystem"), "applies only to providers process and docker".into()));
        }
        crate::host::check_fault_filesystem().map_err(|e| (format!("{at}.fault_filesystem"), e))?;
    }
    validate_options(&format!("{at}.options"), t, t.options.as_ref(), catalog)
}

/// The kind's driver with its default options (what a URI or a program
/// check needs); options are checked on their own.
fn kind_info(t: &TargetSpec, catalog: &dyn Catalog) -> Result<std::sync::Arc<dyn KindInfo>, Problem> {
    catalog.kind(&t.kind, None)
}

/// A kind's options, parsed by the kind itself: the error names the field.
fn validate_options(
    at: &str,
    t: &TargetSpec,
    options: Option<&serde_json::Value>,
    catalog: &dyn Catalog,
) -> Result<(), Problem> {
    match catalog.kind(&t.kind, options) {
        Ok(info) => info.check_options_for(t.uri.as_deref()).map_err(|(field, e)| (format!("{at}.{field}"), e)),
        Err((field, e)) if field.is_empty() => Err((at.into(), e)),
        Err((field, e)) => Err((format!("{at}.{field}"), e)),
    }
}

fn validate_plugin(at: &str, p: &PluginRef) -> Result<(), Problem> {
    if !p.plugin.ends_with(".wasm") {
        return Err((format!("{at}.plugin"), "names a WebAssembly component, a `.wasm` file".into()));
    }
    if p.deadline.is_some_and(|d| d.0.is_zero()) {
        return Err((format!("{at}.deadline"), "must be above 0".into()));
    }
    if p.memory.is_some_and(|m| m.0 < 1 << 20 || m.0 > 4 << 30) {
        return Err((format!("{at}.memory"), "must be between 1MiB and 4GiB".into()));
    }
    Ok(())
}

fn validate_workload(at: &str, w: &WorkloadSpec) -> Result<(), Problem> {
    if let Some(shape) = &w.shape {
        validate_plugin(&format!("{at}.shape"), shape)?;
        if w.keys.distribution != KeyDistribution::Uniform {
            return Err((
                format!("{at}.keys.distribution"),
                "the shape plugin picks the keys: drop `distribution`".into(),
            ));
        }
    }
    if w.ops.is_empty() {
        return Err((format!("{at}.ops"), "needs at least one op kind with a weight, e.g. {get: 80, set: 20}".into()));
    }
    for (op, weight) in &w.ops {
        if !(weight.is_finite() && *weight >= 0.0) {
            return Err((format!("{at}.ops.{}", op.as_str()), "weights must be numbers >= 0".into()));
        }
    }
    let total: f64 = w.ops.values().sum();
    if total <= 0.0 {
        return Err((format!("{at}.ops"), "at least one weight must be above 0".into()));
    }
    if !total.is_finite() {
        return Err((format!("{at}.ops"), "the weights are too large to add up: use smaller numbers".into()));
    }
    validate_fanout(at, w)?;
    let k = &w.keys;
    if k.count == 0 {
        return Err((format!("{at}.keys.count"), "must be at least 1".into()));
    }
    if k.distribution == KeyDistribution::Rounds && k.count > MAX_ROUNDS {
        return Err((
            format!("{at}.keys.count"),
            format!("is the number of contention rounds with distribution: rounds, at most {MAX_ROUNDS}"),
        ));
    }
    let only_for = |field: &str, present: bool, dist: &str| -> Result<(), Problem> {
        if present && k.distribution != dist_of(dist) {
            return Err((format!("{at}.keys.{field}"), format!("applies only to distribution: {dist}")));
        }
        Ok(())
    };
    only_for("exponent", k.exponent.is_some(), "zipfian")?;
    only_for("hot_fraction", k.hot_fraction.is_some(), "hotset")?;
    only_for("hot_op_fraction", k.hot_op_fraction.is_some(), "hotset")?;
    if let Some(e) = k.exponent {
        if !(e.is_finite() && e > 0.0) {
            return Err((format!("{at}.keys.exponent"), "must be a number above 0 (0.99 is usual)".into()));
        }
    }
    for (field, v) in [("hot_fraction", k.hot_fraction), ("hot_op_fraction", k.hot_op_fraction)] {
        if let Some(v) = v {
            if !(v > 0.0 && v <= 1.0) {
                return Err((format!("{at}.keys.{field}"), "must be a fraction in (0, 1]".into()));
            }
        }
    }
    if let ValueSizeSpec::Range { min, max } = &w.value_size {
        if min.0 > max.0 {
            return Err((format!("{at}.value_size"), format!("min ({}B) is larger than max ({}B)", min.0, max.0)));
        }
    }
    let max = match &w.value_size {
        ValueSizeSpec::Fixed(s) => s.0,
        ValueSizeSpec::Range { max, .. } => max.0,
    };
    if max > 64 << 20 {
        return Err((format!("{at}.value_size"), "values above 64MiB are not supported".into()));
    }
    Ok(())
}

/// The most subscribers a fan-out workload opens: each is a connection
/// and a task of its own.
pub const MAX_SUBSCRIBERS: u32 = 4096;

/// The smallest message: its header (publisher, sequence number, send time).
pub const MIN_MESSAGE_SIZE: u64 = 32;

/// `publish` and `fanout` come together: the ops publish to the channels the
/// subscribers take.
fn validate_fanout(at: &str, w: &WorkloadSpec) -> Result<(), Problem> {
    let publishes = w.ops.get(&OpKind::Publish).is_some_and(|weight| *weight > 0.0);
    let Some(f) = &w.fanout else {
        if w.ops.contains_key(&OpKind::Publish) {
            return Err((
                format!("{at}.ops.publish"),
                "publishes to the channels of a `fanout` section, which this workload lacks: add e.g. `fanout: {channels: 4, subscribers: 64}`".into(),
            ));
        }
        return Ok(());
    };
    let at = format!("{at}.fanout");
    if !publishes {
        return Err((
            at,
            "needs `publish` in `ops` with a weight above 0: the subscribers count what is published".into(),
        ));
    }
    if w.shape.is_some() {
        return Err((at, "is not for a shape plugin's workload: the built-in generator numbers the messages".into()));
    }
    if f.subscribers == 0 || f.subscribers > MAX_SUBSCRIBERS {
        return Err((format!("{at}.subscribers"), format!("must be from 1 to {MAX_SUBSCRIBERS}")));
    }
    if f.channels == 0 || f.channels > f.subscribers {
        return Err((
            format!("{at}.channels"),
            format!(
                "must be from 1 to the number of subscribers ({}): subscriber i takes channel i mod channels, and a channel nobody takes measures nothing",
                f.subscribers
            ),
        ));
    }
    if f.message_size.0 < MIN_MESSAGE_SIZE || f.message_size.0 > 64 << 20 {
        return Err((
            format!("{at}.message_size"),
            format!("must be from {MIN_MESSAGE_SIZE}B (the message's header) to 64MiB"),
        ));
    }
    if let Some(p) = &f.pause {
        if p.subscribers == 0 || p.subscribers > f.subscribers {
            return Err((
                format!("{at}.pause.subscribers"),
                format!("must be from 1 to the number of subscribers ({})", f.subscribers),
            ));
        }
        if p.pause_for.0.is_zero() {
            return Err((format!("{at}.pause.for"), "must be above 0".into()));
        }
    }
    Ok(())
}

fn dist_of(name: &str) -> KeyDistribution {
    match name {
        "zipfian" => KeyDistribution::Zipfian,
        "hotset" => KeyDistribution::Hotset,
        "sequential" => KeyDistribution::Sequential,
        "rounds" => KeyDistribution::Rounds,
        _ => KeyDistribution::Uniform,
    }
}

/// Every checker a spec names is one the build holds, named once per list.
fn validate_checker_names(spec: &Spec, catalog: &dyn Catalog) -> Result<(), Problem> {
    let lists = std::iter::once(("checkers".to_string(), &spec.checkers)).chain(
        spec.scenarios
            .iter()
            .enumerate()
            .filter_map(|(i, s)| Some((format!("scenarios[{i}].checkers"), s.checkers.as_ref()?))),
    );
    for (at, list) in lists {
        let mut seen = HashSet::new();
        for (j, c) in list.iter().enumerate() {
            crate::checkers::find(catalog.checkers(), c.as_str()).map_err(|e| (format!("{at}[{j}]"), e))?;
            if !seen.insert(c) {
                return Err((format!("{at}[{j}]"), format!("`{c}` is listed twice")));
            }
        }
    }
    Ok(())
}

/// The build's checkers a scenario runs (names already validated).
fn checkers_of(spec: &Spec, s: &ScenarioSpec, catalog: &dyn Catalog) -> Vec<&'static dyn CheckerInfo> {
    let names = s.checkers.as_ref().unwrap_or(&spec.checkers);
    names.iter().filter_map(|c| crate::checkers::find(catalog.checkers(), c.as_str()).ok()).collect()
}

/// Checkers judge keys whose values name their write: an op kind a checker
/// cannot follow would change keys behind its back, and values need room
/// for the name.
fn validate_checkers(spec: &Spec, catalog: &dyn Catalog) -> Result<(), Problem> {
    let checked = spec.scenarios.iter().filter(|s| !s.checkers.as_ref().unwrap_or(&spec.checkers).is_empty());
    for (scenario, name) in checked.flat_map(|s| s.workload.names().into_iter().map(move |n| (s, n))) {
        let w = &spec.workloads[&name];
        let at = format!("workloads.{name}");
        let checkers = checkers_of(spec, scenario, catalog);
        let sent = w.ops.iter().filter(|(_, weight)| **weight > 0.0).map(|(op, _)| *op);
        for op in sent {
            if let Some(why) = checkers.iter().find_map(|c| c.refuses(op)) {
                return Err((
                    format!("{at}.ops.{}", op.as_str()),
                    format!("{why}; `{}` would change keys behind its back", op.as_str()),
                ));
            }
        }
        let min = match &w.value_size {
            ValueSizeSpec::Fixed(s) => s.0,
            ValueSizeSpec::Range { min, .. } => min.0,
        };
        if (min as usize) < faultline_model::value::VALUE_HEADER_MAX {
            return Err((
                format!("{at}.value_size"),
                format!(
                    "with checkers, values need at least {}B to name their write",
                    faultline_model::value::VALUE_HEADER_MAX
                ),
            ));
        }
    }
    Ok(())
}

/// Whether only capacity searches run profile `name`: the search sets its
/// rate, so it needs none of its own.
fn searched_only(spec: &Spec, name: &str) -> bool {
    let mut running = spec.scenarios.iter().filter(|s| s.profiles.iter().any(|p| p == name)).peekable();
    running.peek().is_some() && running.all(|s| s.capacity.is_some())
}

fn validate_open(at: &str, open: &OpenSpec, searched: bool) -> Result<(), Problem> {
    let stages = match (open.rate, &open.stages) {
        (None, None) if searched => &[][..],
        (Some(_), Some(_)) => {
            return Err((
                format!("{at}.stages"),
                "give either `rate` (a constant rate) or `stages` (a rate that ramps and holds), not both".into(),
            ))
        }
        (None, None) => {
            return Err((
                at.into(),
                "needs `rate: N` (ops per second) or `stages`, e.g. `stages: [{to: 5000, over: 30s}, {hold: 1m}]` (only a profile that nothing but capacity searches run may leave both out: the search sets its rate)"
                    .into(),
            ))
        }
        (Some(rate), None) => {
            if !(rate.is_finite() && rate > 0.0) {
                return Err((format!("{at}.rate"), "must be a positive number of ops per second".into()));
            }
            if !(MIN_OPEN_RATE..=MAX_OPEN_RATE).contains(&rate) {
                return Err((
                    format!("{at}.rate"),
                    "must be from 0.0000116 (one op a day) to 1000000000 ops per second (one a nanosecond)".into(),
                ));
            }
            if open.from.is_some() {
                return Err((
                    format!("{at}.from"),
                    "is the rate `stages` start from: a constant `rate` has none".into(),
                ));
            }
            &[][..]
        }
        (None, Some(stages)) => stages.as_slice(),
    };
    let staged_rate = |field: String, rate: f64| match rate.is_finite() && (0.0..=MAX_OPEN_RATE).contains(&rate) {
        true => Ok(()),
        false => Err((field, "must be a rate from 0 to 1000000000 ops per second".to_string())),
    };
    if let Some(from) = open.from {
        staged_rate(format!("{at}.from"), from)?;
    }
    if open.rate.is_none() && stages.is_empty() && !searched {
        return Err((format!("{at}.stages"), "needs at least one stage".into()));
    }
    for (i, stage) in stages.iter().enumerate() {
        let at = format!("{at}.stages[{i}]");
        let positive = |field: &str, d: Dur| match d.0.is_zero() {
            true => Err((format!("{at}.{field}"), "must be longer than 0s".to_string())),
            false => Ok(()),
        };
        match (stage.to, stage.over, stage.hold) {
            (Some(to), Some(over), None) => {
                staged_rate(format!("{at}.to"), to)?;
                positive("over", over)?;
            }
            (None, None, Some(hold)) => positive("hold", hold)?,
            (_, _, Some(_)) => {
                return Err((
                    format!("{at}.hold"),
                    "a stage ramps (`{to: RATE, over: DURATION}`) or holds (`{hold: DURATION}`), not both".into(),
                ))
            }
            (Some(_), None, None) => {
                return Err((at, "a ramp needs `over: DURATION`, how long it takes to reach `to`".into()))
            }
            (None, Some(_), None) => return Err((at, "a ramp needs `to: RATE`, the rate it ends at".into())),
            (None, None, None) => {
                return Err((
                    at,
                    "needs `to` and `over` (a ramp, e.g. `{to: 5000, over: 30s}`) or `hold: DURATION`".into(),
                ))
            }
        }
    }
    stage_names(at, stages.iter().map(|s| s.name.as_deref()))?;
    if open.rate.is_none() && open.peak_rate() <= 0.0 && !searched {
        return Err((format!("{at}.stages"), "every stage's rate is 0: the stages never ask for an op".into()));
    }
    if open.connections == 0 || open.in_flight == 0 {
        return Err((at.into(), "connections and in_flight must be at least 1".into()));
    }
    if open.connections > MAX_CONNECTIONS {
        return Err((format!("{at}.connections"), format!("must be at most {MAX_CONNECTIONS}")));
    }
    if open.in_flight > MAX_IN_FLIGHT {
        return Err((format!("{at}.in_flight"), format!("must be at most {MAX_IN_FLIGHT}")));
    }
    if !(0.0..=1.0).contains(&open.min_sent) {
        return Err((format!("{at}.min_sent"), "must be a share of the schedule from 0 to 1, e.g. 0.99".into()));
    }
    Ok(())
}

/// The profiles a gate covers: the one it names, or all.
fn gate_profiles<'a>(spec: &'a Spec, gate: &'a GateSpec) -> impl Iterator<Item = (&'a String, &'a ProfileSpec)> {
    spec.profiles.iter().filter(move |(name, _)| gate.profile.as_ref().is_none_or(|p| p == *name))
}

/// Whether a profile the gate covers has a stage `name`.
fn stage_named(spec: &Spec, gate: &GateSpec, name: &str) -> bool {
    gate_profiles(spec, gate).any(|(_, p)| p.stage_names().iter().any(|s| s == name))
}

fn unknown_stage(spec: &Spec, gate: &GateSpec, name: &str) -> String {
    let mut known: Vec<String> = Vec::new();
    for (_, p) in gate_profiles(spec, gate) {
        for stage in p.stage_names() {
            if !known.contains(&stage) {
                known.push(stage);
            }
        }
    }
    match (&gate.profile, known.is_empty()) {
        (Some(p), true) => format!("names stage `{name}`, but profile `{p}` has no stages"),
        (None, true) => format!("names stage `{name}`, but no profile has stages (`stages: [...]`)"),
        (Some(p), false) => {
            format!("names stage `{name}`, which profile `{p}` does not have (its stages: {})", known.join(", "))
        }
        (None, false) => format!("names stage `{name}`, which no profile has (known stages: {})", known.join(", ")),
    }
}

/// A closed loop in steps: each step's clients and length.
fn validate_closed_stages(at: &str, closed: &ClosedStages) -> Result<(), Problem> {
    if closed.stages.is_empty() {
        return Err((format!("{at}.stages"), "needs at least one stage, e.g. `{clients: 4, hold: 30s}`".into()));
    }
    if !(1..=MAX_IN_FLIGHT).contains(&closed.in_flight) {
        return Err((format!("{at}.in_flight"), format!("must be from 1 to {MAX_IN_FLIGHT}")));
    }
    for (i, stage) in closed.stages.iter().enumerate() {
        if !(1..=MAX_CONNECTIONS).contains(&stage.clients) {
            return Err((format!("{at}.stages[{i}].clients"), format!("must be from 1 to {MAX_CONNECTIONS}")));
        }
        if stage.hold.0.is_zero() {
            return Err((format!("{at}.stages[{i}].hold"), "must be longer than 0s".into()));
        }
    }
    stage_names(at, closed.stages.iter().map(|s| s.name.as_deref()))
}

/// Stage names as gates write them (one word of the gate language), each
/// once; a stage without one is `stage` and its 1-based place.
fn stage_names<'a>(at: &str, names: impl Iterator<Item = Option<&'a str>>) -> Result<(), Problem> {
    let mut seen = HashSet::new();
    for (i, name) in names.enumerate() {
        let name = name.map_or_else(|| format!("stage{}", i + 1), str::to_string);
        let word = name.starts_with(|c: char| c.is_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.'));
        if !word {
            return Err((
                format!("{at}.stages[{i}].name"),
                format!("`{name}` is not a stage name: letters, digits, `_`, `-` and `.`, starting with a letter"),
            ));
        }
        if !seen.insert(name.clone()) {
            return Err((format!("{at}.stages[{i}].name"), format!("two stages are named `{name}`")));
        }
    }
    Ok(())
}

/// A staged profile's window is its stages' length: a scenario's own
/// `duration` must agree, and its faults must fall inside.
fn validate_stages_window(s: &ScenarioSpec, at: &str, p: &str, profile: &ProfileSpec) -> Result<(), Problem> {
    let Some(length) = profile.stages_length() else { return Ok(()) };
    let length = Dur(length);
    if let Some(duration) = s.timing.as_ref().and_then(|t| t.duration).filter(|d| *d != length) {
        return Err((
            format!("{at}.timing.duration"),
            format!(
                "is {duration}, but profile `{p}` runs stages of {length} in all, which are its measured window: drop `duration` or make it {length}"
            ),
        ));
    }
    if let Some((i, f)) = s.faults.iter().enumerate().find(|(_, f)| f.at >= length) {
        return Err((
            format!("{at}.faults[{i}].at"),
            format!("is not inside the {length} of profile `{p}`'s stages (its measured window), at `{}`", f.name),
        ));
    }
    Ok(())
}

fn validate_timing(at: &str, t: &TimingSpec) -> Result<(), Problem> {
    if t.duration.0.is_zero() {
        return Err((format!("{at}.duration"), "must be longer than 0s".into()));
    }
    if t.repeats == 0 {
        return Err((format!("{at}.repeats"), "must be at least 1".into()));
    }
    if t.repeats > MAX_REPEATS {
        return Err((format!("{at}.repeats"), format!("must be at most {MAX_REPEATS}")));
    }
    if t.deadline.0.is_zero() {
        return Err((format!("{at}.deadline"), "must be longer than 0s".into()));
    }
    if t.over_deadline_after.0.is_zero() || t.over_deadline_after >= t.hang_after {
        return Err((
            format!("{at}.over_deadline_after"),
            format!("must be above 0s and below hang_after ({})", t.hang_after),
        ));
    }
    if t.quick.duration.0.is_zero() || t.quick.repeats == 0 {
        return Err((format!("{at}.quick"), "duration must be longer than 0s and repeats at least 1".into()));
    }
    if t.quick.repeats > MAX_REPEATS {
        return Err((format!("{at}.quick.repeats"), format!("must be at most {MAX_REPEATS}")));
    }
    Ok(())
}

/// The cells scenario `s` of `spec` adds to the plan at one matrix point:
/// repeats x profiles x variants, with `--quick`'s repeats if they are more.
pub fn cells_of(spec: &Spec, s: &ScenarioSpec) -> u64 {
    let repeats =
        s.timing.as_ref().and_then(|t| t.repeats).unwrap_or(spec.timing.repeats).max(spec.timing.quick.repeats);
    (repeats as u64).saturating_mul(s.profiles.len() as u64).saturating_mul(s.variants().len() as u64)
}

/// Every cell of scenario `s` with profile `p` must fit in this machine's
/// memory (spec/memory.rs); the profile's shape is where it is refused.
fn fits_in_memory(
    spec: &Spec,
    s: &ScenarioSpec,
    p: &str,
    profile: &ProfileSpec,
    workloads: &[String],
    catalog: &dyn Catalog,
) -> Result<(), Problem> {
    let Some(budget) = super::memory::budget() else { return Ok(()) };
    let field = match profile.load() {
        Load::Closed(_) => format!("profiles.{p}.closed"),
        Load::Open(_) => format!("profiles.{p}.open"),
    };
    for name in workloads {
        let workload = &spec.workloads[name];
        for t in s.target.names() {
            let Ok(kind) = catalog.kind(&spec.targets[&t].kind, None) else { continue };
            let stages = profile.stage_names().len() as u64;
            let need = super::memory::need(profile.load(), stages, workload, kind.cost());
            if let Some(why) = super::memory::refusal(&need, budget) {
                return Err((
                    field,
                    format!("profile `{p}` ({}) with workload `{name}` in scenario `{}` {why}", profile.load(), s.name),
                ));
            }
        }
    }
    Ok(())
}

fn validate_scenarios(spec: &Spec, catalog: &dyn Catalog) -> Result<(), Problem> {
    if spec.scenarios.is_empty() {
        return Err(("scenarios".into(), "needs at least one scenario".into()));
    }
    let mut seen = HashSet::new();
    let mut cells = 0u64;
    for (i, s) in spec.scenarios.iter().enumerate() {
        let at = format!("scenarios[{i}]");
        if s.name.trim().is_empty() {
            return Err((format!("{at}.name"), "must not be empty".into()));
        }
        if !seen.insert(s.name.as_str()) {
            return Err((format!("{at}.name"), format!("another scenario is already named `{}`", s.name)));
        }
        let targets = s.target.names();
        if targets.is_empty() {
            return Err((format!("{at}.target"), "names no target".into()));
        }
        for (j, t) in targets.iter().enumerate() {
            if !spec.targets.contains_key(t) {
                let field = match s.target {
                    OneOrMany::One(_) => format!("{at}.target"),
                    OneOrMany::Many(_) => format!("{at}.target[{j}]"),
                };
                return Err((field, undefined("target", t, spec.targets.keys())));
            }
        }
        if let Some(j) = (1..targets.len()).find(|&j| targets[..j].contains(&targets[j])) {
            return Err((format!("{at}.target[{j}]"), format!("`{}` is listed twice", targets[j])));
        }
        let workloads = s.workload.names();
        if workloads.is_empty() {
            return Err((format!("{at}.workload"), "names no workload".into()));
        }
        if let Some(j) = (1..workloads.len()).find(|&j| workloads[..j].contains(&workloads[j])) {
            return Err((format!("{at}.workload[{j}]"), format!("`{}` is listed twice", workloads[j])));
        }
        if workloads.len() > 1 && targets.len() > 1 {
            return Err((
                format!("{at}.workload"),
                "a scenario compares several targets or several workloads, not both".into(),
            ));
        }
        for (j, name) in workloads.iter().enumerate() {
            let field = match s.workload {
                OneOrMany::One(_) => format!("{at}.workload"),
                OneOrMany::Many(_) => format!("{at}.workload[{j}]"),
            };
            let Some(workload) = spec.workloads.get(name) else {
                return Err((field, undefined("workload", name, spec.workloads.keys())));
            };
            for t in &targets {
                let target = &spec.targets[t];
                let options = crate::options::overlay(target.options.as_ref(), s.options.as_ref());
                if s.options.is_some() {
                    validate_options(&format!("{at}.options"), target, options.as_ref(), catalog)?;
                }
                let driver =
                    catalog.kind(&target.kind, options.as_ref()).map_err(|(f, e)| (format!("{at}.options.{f}"), e))?;
                if let Some(unmet) =
                    checkers_of(spec, s, catalog).iter().find_map(|c| c.requires(t, target.kind.as_str(), &*driver))
                {
                    let field = match unmet.field {
                        UnmetAt::Options => format!("{at}.options"),
                        UnmetAt::Checkers => format!("{at}.checkers"),
                    };
                    return Err((field, unmet.message));
                }
                if let Some(op) = workload.ops.keys().find(|op| !driver.supports(**op)) {
                    if *op == OpKind::Publish {
                        return Err((
                            field,
                            format!(
                                "workload `{name}` publishes to subscribers (`publish`, `fanout`), which target `{t}` ({}) does not support: publish/subscribe fan-out runs against redis targets",
                                target.kind
                            ),
                        ));
                    }
                    return Err((
                        field,
                        format!(
                            "workload `{name}` uses `{}`, which target `{t}` ({}) does not support",
                            op.as_str(),
                            target.kind
                        ),
                    ));
                }
            }
        }
        if s.profiles.is_empty() {
            return Err((format!("{at}.profiles"), "needs at least one profile".into()));
        }
        for (j, p) in s.profiles.iter().enumerate() {
            let Some(profile) = spec.profiles.get(p) else {
                return Err((format!("{at}.profiles[{j}]"), undefined("profile", p, spec.profiles.keys())));
            };
            let rounds = workloads.iter().find(|w| {
                spec.workloads.get(w.as_str()).is_some_and(|w| w.keys.distribution == KeyDistribution::Rounds)
            });
            if let (Some(w), Load::Open(_)) = (rounds, profile.load()) {
                return Err((
                    format!("{at}.profiles[{j}]"),
                    format!("workload `{w}` runs contention rounds (distribution: rounds), which a closed loop drives: profile `{p}` is an open loop"),
                ));
            }
            if let (Some(w), Some(ClosedSpec::Stages(_))) = (rounds, &profile.closed) {
                return Err((
                    format!("{at}.profiles[{j}]"),
                    format!("workload `{w}` runs contention rounds (distribution: rounds), which need every client from the start: profile `{p}` adds clients in stages"),
                ));
            }
            fits_in_memory(spec, s, p, profile, &workloads, catalog)?;
            validate_stages_window(s, &at, p, profile)?;
        }
        validate_faults(spec, s, &at, catalog)?;
        capacity::validate(spec, s, &at, catalog)?;
        cells = cells.saturating_add(cells_of(spec, s));
        if cells > MAX_CELLS {
            return Err((
                at,
                format!("the plan would hold more than {MAX_CELLS} cells (scenarios x repeats x profiles x variants)"),
            ));
        }
        if let Some(t) = &s.timing {
            if t.duration.is_some_and(|d| d.0.is_zero()) {
                return Err((format!("{at}.timing.duration"), "must be longer than 0s".into()));
            }
            if t.repeats == Some(0) {
                return Err((format!("{at}.timing.repeats"), "must be at least 1".into()));
            }
            if t.repeats.is_some_and(|r| r > MAX_REPEATS) {
                return Err((format!("{at}.timing.repeats"), format!("must be at most {MAX_REPEATS}")));
            }
            if t.deadline.is_some_and(|d| d.0.is_zero()) {
                return Err((format!("{at}.timing.deadline"), "must be longer than 0s".into()));
            }
        }
    }
    Ok(())
}

/// A scenario's faults: names, times, and a target that takes the action:
/// its fields are ones the action takes ([`crate::fault::check_written`]),
/// its target's backend (the kind's own faults, else the provider's)
/// registers it, and that backend's type accepts the fields aimed there.
fn validate_faults(spec: &Spec, s: &ScenarioSpec, at: &str, catalog: &dyn Catalog) -> Result<(), Problem> {
    let duration = s.timing.as_ref().and_then(|t| t.duration).unwrap_or(spec.timing.duration);
    let unstaged = s.profiles.iter().any(|p| spec.profiles.get(p).is_some_and(|p| p.stages_length().is_none()));
    let targets = s.target.names();
    let every = catalog.every_fault();
    let mut names = HashSet::new();
    for (i, f) in s.faults.iter().enumerate() {
        let at = format!("{at}.faults[{i}]");
        let within = |(field, message): (String, String)| match field.is_empty() {
            true => (at.clone(), message),
            false => (format!("{at}.{field}"), message),
        };
        if f.name.trim().is_empty() || !names.insert(f.name.as_str()) {
            return Err((format!("{at}.name"), format!("fault names must be unique and not empty (`{}`)", f.name)));
        }
        crate::fault::check_written(f, &every).map_err(within)?;
        // A staged profile's window is its stages' (validate_stages_window).
        if f.at >= duration && unstaged {
            return Err((format!("{at}.at"), format!("is not inside the {duration} measured window")));
        }
        // The fault must hit one of the scenario's own targets.
        let field = format!("{at}.target");
        let (target, selection) = match spec.targets.get(f.target.as_str()) {
            Some(_) => (f.target.clone(), None),
            None => match crate::selector::parse_selector(&f.target, spec) {
                Ok(sel) => (sel.target.clone(), Some(sel)),
                Err(e) => return Err((field, e)),
            },
        };
        if !targets.contains(&target) {
            return Err((field, format!("`{}` is not a target of scenario `{}`", f.target, s.name)));
        }
        let t = &spec.targets[&target];
        let several = t.provider == ProviderKind::Process && t.members.is_some_and(|m| m > 1);
        if (t.provider == ProviderKind::Docker || several) && selection.is_none() {
            return Err((
                field,
                format!("name the members of `{target}`, e.g. `{target}.primary` or `{target}.member[0]`"),
            ));
        }
        let site =
            crate::fault::Site { target_name: &target, target: t, selector: selection.as_ref().map(|s| &s.selector) };
        let own = catalog.kind_faults(&t.kind);
        let provider = catalog.provider_faults(t.provider);
        // A kind's own faults are commands to its server, which any provider
        // takes; the others are the provider's to apply.
        match own.iter().chain(provider.iter()).find(|ty| ty.name() == f.action) {
            Some(ty) => ty.check(&f.fields, &site).map_err(within)?,
            None => {
                // First what is wrong with the fields as the action's, then
                // that this target does not take it.
                let checked: Vec<_> =
                    every.iter().filter(|ty| ty.name() == f.action).map(|ty| ty.check(&f.fields, &site)).collect();
                if let Some(Err(first)) = checked.first().filter(|_| checked.iter().all(Result::is_err)) {
                    return Err(within(first.clone()));
                }
                let any_provider = [ProviderKind::Process, ProviderKind::Docker]
                    .into_iter()
                    .any(|p| catalog.provider_faults(p).iter().any(|ty| ty.name() == f.action));
                return Err(not_taken(&at, &target, t, &f.action, &own, &provider, any_provider));
            }
        }
    }
    Ok(())
}

/// Why `target` does not take `action`, which no backend of its kind
/// (`own`) or provider (`provider`) registers; `any_provider`: whether
/// some provider registers it at all.
fn not_taken(
    at: &str,
    target: &str,
    t: &TargetSpec,
    action: &str,
    own: &[&'static dyn FaultType],
    provider: &[&'static dyn FaultType],
    any_provider: bool,
) -> Problem {
    let kind_name = t.kind.as_str();
    let own_names = || listed(own.iter().map(|ty| ty.name()));
    if !any_provider {
        return (format!("{at}.action"), format!("`{action}` is not a fault of {kind_name} targets (`{target}`)"));
    }
    if t.provider == ProviderKind::External {
        let own_ones = match own {
            [] => format!(", and {kind_name} has none"),
            _ => format!(" ({kind_name}'s: {})", own_names()),
        };
        return (
            format!("{at}.target"),
            format!("`{target}` is external: faultline can only send it its kind's own faults{own_ones}"),
        );
    }
    let own_ones = match own {
        [] => String::new(),
        _ => format!(" (and {kind_name}'s own: {})", own_names()),
    };
    let takes = listed(provider.iter().map(|ty| ty.name()));
    (format!("{at}.action"), format!("{} targets take {takes}{own_ones}", t.provider.as_str()))
}

fn undefined<'a>(what: &str, name: &str, known: impl Iterator<Item = &'a String>) -> String {
    let known: Vec<&str> = known.map(String::as_str).collect();
    format!(
        "no {what} named `{name}` (defined: {})",
        if known.is_empty() { "none".to_string() } else { known.join(", ") }
    )
}

#[cfg(test)]
mod stage_tests {
    /// A spec with profile `p: {open: OPEN}` (and `extra` after the
    /// scenario's profiles line): its error, if any.
    fn error(open: &str, extra: &str, gates: &str) -> Option<crate::SpecError> {
        let text = format!(
            "name: x\ntargets:\n  t: {{kind: redis, provider: process}}\nworkloads:\n  w: {{ops: {{get: 1}}}}\n\
             profiles:\n  p: {{open: {open}}}\n  c: {{closed: 1x1}}\nscenarios:\n  - name: s\n    target: t\n\
             \x20   workload: w\n    profiles: [p, c]\n{extra}gates:{}",
            if gates.is_empty() { " {}\n".to_string() } else { format!("\n{gates}") }
        );
        crate::parse(std::path::Path::new("t.yaml"), &text, &[], &crate::catalog::plain::Plain).err()
    }

    #[test]
    fn stages_are_checked_where_they_stand() {
        let ok = "{stages: [{to: 500, over: 2s}, {name: peak, hold: 2s}, {to: 0, over: 1s}]}";
        assert!(error(ok, "", "  g: \"p99(get, stage: peak) < 10ms and unsent(stage: stage1) == 0\"\n").is_none());
        for (open, field, why) in [
            ("{rate: 5, stages: [{hold: 1s}]}", "profiles.p.open.stages", "not both"),
            ("{connections: 2}", "profiles.p.open", "needs `rate: N`"),
            ("{rate: 5, from: 2}", "profiles.p.open.from", "a constant `rate` has none"),
            ("{stages: []}", "profiles.p.open.stages", "at least one stage"),
            ("{stages: [{to: 5, over: 1s, hold: 2s}]}", "profiles.p.open.stages[0].hold", "not both"),
            ("{stages: [{hold: 1s}, {to: 5}]}", "profiles.p.open.stages[1]", "needs `over: DURATION`"),
            ("{stages: [{over: 1s}]}", "profiles.p.open.stages[0]", "needs `to: RATE`"),
            ("{stages: [{name: a}]}", "profiles.p.open.stages[0]", "a ramp, e.g."),
            ("{stages: [{to: -1, over: 1s}]}", "profiles.p.open.stages[0].to", "from 0 to 1000000000"),
            ("{stages: [{to: 5, over: 0s}]}", "profiles.p.open.stages[0].over", "longer than 0s"),
            ("{stages: [{to: 5, over: 1s}, {name: stage1, hold: 1s}]}", "profiles.p.open.stages[1].name", "two stages"),
            ("{stages: [{name: '9 lives', hold: 1s}]}", "profiles.p.open.stages[0].name", "not a stage name"),
            ("{stages: [{hold: 1s}, {to: 0, over: 1s}]}", "profiles.p.open.stages", "never ask for an op"),
            ("{from: -3, stages: [{hold: 1s}]}", "profiles.p.open.from", "from 0 to 1000000000"),
        ] {
            let e = error(open, "", "").unwrap_or_else(|| panic!("{open}: no error"));
            assert_eq!(e.field.as_deref(), Some(field), "{open}: {e}");
            assert!(e.message.contains(why), "{open}: {e}");
            assert_eq!(e.line, Some(7), "{open}: {e}");
        }
        // A stray field of a stage is serde's, located on its line.
        let e = error("{stages: [{to: 5, ovr: 1s}]}", "", "").unwrap();
        assert!(e.message.contains("unknown field `ovr`") && e.line == Some(7), "{e}");
    }

    /// A spec whose profile `c` is `{closed: CLOSED}`: its error, if any.
    fn closed_error(closed: &str, gates: &str) -> Option<crate::SpecError> {
        let text = format!(
            "name: x\ntargets:\n  t: {{kind: redis, provider: process}}\nworkloads:\n  w: {{ops: {{get: 1}}}}\n\
             profiles:\n  c: {{closed: {closed}}}\nscenarios:\n  - {{name: s, target: t, workload: w, profiles: [c]}}\n\
             gates: {{{gates}}}\n"
        );
        crate::parse(std::path::Path::new("t.yaml"), &text, &[], &crate::catalog::plain::Plain).err()
    }

    #[test]
    fn a_closed_loop_adds_clients_in_steps() {
        let ok = "{stages: [{clients: 1, hold: 1s}, {name: busy, clients: 4, hold: 2s}], in_flight: 8}";
        assert!(closed_error(ok, "g: \"p99(get, stage: busy) < 1s\"").is_none());
        let e = closed_error(ok, "g: \"p99(get, stage: stage2) < 1s\"").unwrap();
        assert!(e.message.contains("known stages: stage1, busy"), "{e}");
        for (closed, field, why) in [
            ("{stages: []}", "profiles.c.closed.stages", "at least one stage"),
            ("{stages: [{clients: 0, hold: 1s}]}", "profiles.c.closed.stages[0].clients", "from 1 to 10000"),
            ("{stages: [{clients: 2, hold: 0s}]}", "profiles.c.closed.stages[0].hold", "longer than 0s"),
            ("{stages: [{clients: 2, hold: 1s}], in_flight: 0}", "profiles.c.closed.in_flight", "from 1 to 10000"),
            (
                "{stages: [{clients: 2, hold: 1s, name: a}, {clients: 3, hold: 1s, name: a}]}",
                "profiles.c.closed.stages[1].name",
                "two stages",
            ),
        ] {
            let e = closed_error(closed, "").unwrap_or_else(|| panic!("{closed}: no error"));
            assert_eq!(e.field.as_deref(), Some(field), "{closed}: {e}");
            assert!(e.message.contains(why), "{closed}: {e}");
        }
        // A stage without its hold is serde's, and a bad shape keeps its own words.
        let e = closed_error("{stages: [{clients: 2}]}", "").unwrap();
        assert!(e.message.contains("missing field `hold`"), "{e}");
        let e = closed_error("3*32", "").unwrap();
        assert!(e.message.contains("invalid closed-loop shape `3*32`"), "{e}");
    }

    #[test]
    fn the_window_is_the_stages_length() {
        let open = "{stages: [{to: 500, over: 2s}, {hold: 2s}]}";
        let e = error(open, "    timing: {duration: 10s}\n", "").unwrap();
        assert_eq!(e.field.as_deref(), Some("scenarios[0].timing.duration"), "{e}");
        assert!(e.message.contains("runs stages of 4s in all"), "{e}");
        assert!(error(open, "    timing: {duration: 4s}\n", "").is_none());
        let e = error(open, "    faults: [{name: f, at: 5s, action: pause, target: t}]\n", "").unwrap();
        assert_eq!(e.field.as_deref(), Some("scenarios[0].faults[0].at"), "{e}");
    }

    /// A fault in a staged scenario is placed in the stages, whatever
    /// `timing.duration` (which the stages replace) says.
    #[test]
    fn a_fault_falls_inside_the_stages() {
        let text = "name: x\ntargets:\n  t: {kind: redis, provider: process}\nworkloads:\n  w: {ops: {get: 1}}\n\
                    profiles:\n  p: {open: {stages: [{to: 100, over: 20s}]}}\ntiming: {duration: 2s}\nscenarios:\n\
                    \x20 - {name: s, target: t, workload: w, profiles: [p],\n\
                    \x20    faults: [{name: f, at: 10s, action: pause, target: t, heal_after: 1s}]}\n";
        let plain = crate::catalog::plain::Plain;
        let loaded = crate::parse(std::path::Path::new("t.yaml"), text, &[], &plain).unwrap();
        // --quick scales the stages to its 2 s, and the fault with them.
        let quick = crate::plan::build(&loaded, &crate::plan::PlanOptions { quick: true, only: vec![] }).unwrap();
        let faults = quick.cells[0].timing.scaled_faults(&loaded.spec.scenarios[0].faults);
        assert_eq!(faults[0].at.0, std::time::Duration::from_secs(1));
        let late = text.replace("at: 10s", "at: 20s");
        let e = crate::parse(std::path::Path::new("t.yaml"), &late, &[], &plain).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("scenarios[0].faults[0].at"), "{e}");
    }

    #[test]
    fn a_gate_names_a_stage_some_profile_has() {
        let open = "{stages: [{name: ramp, to: 500, over: 2s}, {name: peak, hold: 2s}]}";
        let e = error(open, "", "  g: \"p99(get, stage: top) < 10ms\"\n").unwrap();
        assert_eq!((e.field.as_deref(), e.line), (Some("gates.g"), Some(15)), "{e}");
        assert!(e.message.contains("stage `top`, which no profile has (known stages: ramp, peak)"), "{e}");
        let e = error(open, "", "  g: {expr: \"max(stage: peak) < 1s\", profile: c}\n").unwrap();
        assert!(e.message.contains("profile `c` has no stages"), "{e}");
        assert!(error(open, "", "  g: {expr: \"achieved_rate(stage: peak) > 1\", profile: p}\n").is_none());
    }
}

#[cfg(test)]
mod fault_tests {
    //! Faults held to the actions the catalog's backends register (here the
    //! test actions of crate::fault::testing: process kill and restart,
    //! docker kill and isolate, mongodb's own stepdown).
    use crate::catalog::plain::Plain;

    /// A spec whose one scenario has `fault` (block lines, indented 6) on
    /// target `t` of `target`: the error, if any.
    fn spec_error(target: &str, fault: &str) -> Option<crate::SpecError> {
        let text = format!(
            "name: x\ntargets:\n  t: {target}\nworkloads:\n  w: {{ops: {{get: 1}}}}\nprofiles:\n  p: {{closed: 1x1}}\n\
             scenarios:\n  - name: s\n    target: t\n    workload: w\n    profiles: [p]\n    faults:\n{fault}"
        );
        crate::parse(std::path::Path::new("t.yaml"), &text, &[], &Plain).err()
    }

    const PROCESS: &str = "{kind: redis, provider: process}";
    const OWN_PROCESS: &str = "{kind: mongodb, provider: process}";
    const EXTERNAL: &str = "{kind: mongodb, provider: external, uri: 'mongodb://127.0.0.1:1'}";

    #[test]
    fn a_refused_field_is_located_where_it_stands() {
        let e = spec_error(
            PROCESS,
            "      - name: f\n        signal: SIGTERM\n        action: isolate\n        at: 1s\n        target: t\n",
        )
        .unwrap();
        assert_eq!((e.line, e.column), (Some(15), Some(17)), "{e}");
        assert_eq!(e.field.as_deref(), Some("scenarios[0].faults[0].signal"));
        assert_eq!(e.message, "applies only to action: kill and restart, not isolate");
        let e = spec_error(PROCESS, "      - {name: f, at: 1s, action: kill, target: t, heal_after: 2 s}\n").unwrap();
        assert_eq!(e.field.as_deref(), Some("scenarios[0].faults[0].heal_after"), "{e}");
    }

    #[test]
    fn the_backends_decide_which_target_takes_which_action() {
        let fault = |action: &str| format!("      - {{name: f, at: 1s, action: {action}, target: t}}\n");
        let e = spec_error(PROCESS, &fault("isolate")).unwrap();
        assert_eq!(e.field.as_deref(), Some("scenarios[0].faults[0].action"));
        assert_eq!(e.message, "process targets take kill, restart and pause");
        let e = spec_error(PROCESS, &fault("stepdown")).unwrap();
        assert_eq!(e.message, "`stepdown` is not a fault of redis targets (`t`)");
        let e = spec_error(OWN_PROCESS, &fault("isolate")).unwrap();
        assert_eq!(e.message, "process targets take kill, restart and pause (and mongodb's own: stepdown)");
        assert!(spec_error(OWN_PROCESS, &fault("stepdown")).is_none());
        assert!(spec_error(EXTERNAL, &fault("stepdown")).is_none());
        let e = spec_error(EXTERNAL, &fault("kill")).unwrap();
        assert_eq!(e.field.as_deref(), Some("scenarios[0].faults[0].target"));
        assert_eq!(
            e.message,
            "`t` is external: faultline can only send it its kind's own faults (mongodb's: stepdown)"
        );
        // The target's own backend checks the fields: its restart refuses SIGHUP.
        let e = spec_error(PROCESS, "      - {name: f, at: 1s, action: restart, target: t, signal: SIGHUP}\n").unwrap();
        assert_eq!(e.field.as_deref(), Some("scenarios[0].faults[0].signal"));
        assert_eq!(e.message, "a restart takes SIGKILL or SIGTERM");
        // Fields wrong for the action come before "this target does not take it".
        let e = spec_error(PROCESS, "      - {name: f, at: 1s, action: stepdown, target: t, seconds: soon}\n").unwrap();
        assert_eq!(e.field.as_deref(), Some("scenarios[0].faults[0].seconds"), "{e}");
    }
}
