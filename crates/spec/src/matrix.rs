//! `matrix:` on a scenario: named dimensions with values, e.g.
//! `{fsync: [always, everysec], depth: [1, 16]}`. The scenario runs once per
//! combination (a *point*), with every `{fsync}` and `{depth}` in the fields
//! it uses — its targets, workloads and profiles, and its own fields —
//! replaced by that point's values.
//!
//! The substitution is textual, on the spec after `${param}` substitution,
//! and each point's text is parsed and validated like any spec: so a
//! placeholder works in any field (`closed: 1x{depth}`, `--appendfsync
//! {fsync}`), unquoted even inside `[...]`, and a point whose values make a
//! field invalid is a located error naming the point. Placeholders are
//! checked first, on the YAML tree: one that no dimension of a scenario
//! using the field defines, and a dimension that none of the scenario's
//! fields uses, are located errors.
//!
//! `{port}`, `{pid}`, `{uri}`, `{target_dir}` and `{run_dir}` (and docker
//! members' `{member}`, `{index}`, `{name}`, `{primary_host}`,
//! `{primary_ip}`, `{quorum}`) are not dimensions: faultline fills them in
//! when it starts a target or runs a probe.

use crate::problem::Problem;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_yaml_ng::Value;

use super::Spec;

/// Placeholders faultline fills in at run time, never matrix dimensions:
/// a target's and a probe's own, and docker members' and companions'.
pub const RUNTIME_PLACEHOLDERS: [&str; 12] = [
    "port",
    "peer_port",
    "pid",
    "uri",
    "target_dir",
    "run_dir",
    "member",
    "index",
    "name",
    "primary_host",
    "primary_ip",
    "quorum",
];

/// The most points one scenario's matrix may have.
pub const MAX_POINTS: usize = 1_000;

/// A scenario's dimensions, each with its values, as written.
pub type MatrixSpec = IndexMap<String, Vec<MatrixValue>>;

/// One value of a dimension: a string, number or boolean, used as text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct MatrixValue(pub String);

impl<'de> Deserialize<'de> for MatrixValue {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Value::deserialize(d)? {
            Value::String(s) => Ok(MatrixValue(s)),
            Value::Number(n) => Ok(MatrixValue(n.to_string())),
            Value::Bool(b) => Ok(MatrixValue(b.to_string())),
            _ => Err(serde::de::Error::custom("a matrix value is a string, number or boolean")),
        }
    }
}

impl JsonSchema for MatrixValue {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "MatrixValue".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({"type": ["string", "number", "boolean"]})
    }
}

/// What the other targets of a scenario do while one variant's cell runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Isolation {
    /// They stay up, without load.
    #[default]
    Idle,
    /// Process targets are frozen (SIGSTOP) for the cell and thawed after it.
    Stop,
    /// Each target runs only for its own cells: started before, stopped after.
    OwnCells,
}

impl Isolation {
    pub fn as_str(self) -> &'static str {
        match self {
            Isolation::Idle => "idle",
            Isolation::Stop => "stop",
            Isolation::OwnCells => "own-cells",
        }
    }
}

/// One combination of a scenario's dimensions, and the spec with its values
/// substituted (the other scenarios' dimensions take their first values).
#[derive(Debug)]
pub struct Point {
    pub values: IndexMap<String, String>,
    pub spec: Spec,
}

impl Point {
    /// `fsync=always,depth=1`: how labels, directories and the report name it.
    pub fn label(values: &IndexMap<String, String>) -> String {
        values.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
    }
}

/// Every scenario's points, and which dimensions each target's fields use
/// (a target runs once per combination of those).
#[derive(Debug, Default)]
pub struct Expanded {
    pub points: HashMap<String, Vec<Arc<Point>>>,
    pub target_dims: HashMap<String, Vec<String>>,
}

/// Each scenario's dimensions as the tree holds them, in scenario order
/// (empty for a scenario without a matrix).
pub fn read(tree: &Value) -> Result<Vec<IndexMap<String, Vec<String>>>, Problem> {
    let Some(scenarios) = tree.get("scenarios").and_then(Value::as_sequence) else { return Ok(Vec::new()) };
    let mut all = Vec::new();
    for (i, scenario) in scenarios.iter().enumerate() {
        let mut dims = IndexMap::new();
        if let Some(matrix) = scenario.get("matrix") {
            let at = format!("scenarios[{i}].matrix");
            let map = matrix.as_mapping().ok_or_else(|| {
                (at.clone(), "must map dimension names to lists of values, e.g. {fsync: [always, everysec]}".into())
            })?;
            let mut points = 1usize;
            for (key, values) in map {
                let name = key.as_str().unwrap_or_default().to_string();
                let field = format!("{at}.{name}");
                if !is_identifier(&name) {
                    return Err((
                        at,
                        format!("dimension name `{name}` must be letters, digits and `_`, not starting with a digit"),
                    ));
                }
                if RUNTIME_PLACEHOLDERS.contains(&name.as_str()) {
                    return Err((
                        field,
                        format!("`{{{name}}}` is filled in by faultline; name the dimension otherwise"),
                    ));
                }
                let list = values
                    .as_sequence()
                    .ok_or_else(|| (field.clone(), format!("must be a list of values, e.g. `{name}: [a, b]`")))?;
                if list.is_empty() {
                    return Err((field, "needs at least one value".into()));
                }
                let mut texts: Vec<String> = Vec::new();
                for (j, v) in list.iter().enumerate() {
                    let text = match v {
                        Value::String(s) => s.clone(),
                        Value::Number(n) => n.to_string(),
                        Value::Bool(b) => b.to_string(),
                        _ => {
                            return Err((
                                format!("{field}[{j}]"),
                                "a matrix value is a string, number or boolean".into(),
                            ))
                        }
                    };
                    if text.contains(['\n', '\r']) {
                        return Err((format!("{field}[{j}]"), "a matrix value must fit on one line".into()));
                    }
                    if texts.contains(&text) {
                        return Err((format!("{field}[{j}]"), format!("`{text}` is listed twice")));
                    }
                    texts.push(text);
                }
                points = points.saturating_mul(texts.len());
                if points > MAX_POINTS {
                    return Err((at, format!("has more than {MAX_POINTS} combinations")));
                }
                dims.insert(name, texts);
            }
        }
        all.push(dims);
    }
    Ok(all)
}

fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A `{name}` in the tree: where, and which name.
#[derive(Debug, Clone)]
struct Placeholder {
    path: String,
    name: String,
}

/// Every `{identifier}` in a string of the tree, and every unquoted
/// `{dimension}` (which YAML reads as a one-key mapping without a value).
fn placeholders(tree: &Value, dims: &[&String]) -> Vec<Placeholder> {
    fn walk(v: &Value, path: &str, dims: &[&String], out: &mut Vec<Placeholder>) {
        match v {
            Value::String(s) => {
                for name in names_in(s) {
                    out.push(Placeholder { path: path.to_string(), name });
                }
            }
            Value::Sequence(items) => {
                for (i, item) in items.iter().enumerate() {
                    walk(item, &format!("{path}[{i}]"), dims, out);
                }
            }
            Value::Mapping(map) => {
                if let (1, Some((Value::String(key), Value::Null))) = (map.len(), map.iter().next()) {
                    if dims.contains(&key) {
                        out.push(Placeholder { path: path.to_string(), name: key.clone() });
                        return;
                    }
                }
                for (k, item) in map {
                    let key = k.as_str().map(str::to_string).unwrap_or_else(|| format!("{k:?}"));
                    let child = if path.is_empty() { key } else { format!("{path}.{key}") };
                    walk(item, &child, dims, out);
                }
            }
            Value::Tagged(t) => walk(&t.value, path, dims, out),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(tree, "", dims, &mut out);
    out
}

/// The identifiers written as `{name}` in `text` (not `${name}`).
pub fn names_in(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = text;
    let mut offset = 0;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        let preceded_by_dollar = offset + open > 0 && text.as_bytes()[offset + open - 1] == b'$';
        if let Some(close) = after.find('}') {
            let name = &after[..close];
            if !preceded_by_dollar && is_identifier(name) {
                names.push(name.to_string());
            }
        }
        offset += open + 1;
        rest = after;
    }
    names
}

/// Replaces each `{name}` of `values` in `text`, outside comments. The
/// replaced text is parsed again, so line numbers stay those of the spec.
pub fn fill(text: &str, values: &IndexMap<String, String>) -> String {
    if values.is_empty() {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let (code, comment) = line.split_at(super::comment_start(line));
        out.push_str(&fill_str(code, values));
        out.push_str(comment);
    }
    out
}

/// Replaces each `{name}` of `values` in one string (a target's argument,
/// a probe's command).
pub fn fill_str(text: &str, values: &IndexMap<String, String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        let replaced = after.find('}').and_then(|close| {
            let value = values.get(&after[..close])?;
            let dollar = open > 0 && rest.as_bytes()[open - 1] == b'$';
            (!dollar).then_some((close, value))
        });
        match replaced {
            Some((close, value)) => {
                out.push_str(&rest[..open]);
                out.push_str(value);
                rest = &after[close + 1..];
            }
            None => {
                out.push_str(&rest[..open + 1]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Names a scenario uses, read from the tree (the typed parse reports the
/// malformed ones).
struct Uses {
    targets: Vec<String>,
    workloads: Vec<String>,
    profiles: Vec<String>,
}

fn uses(scenario: &Value) -> Uses {
    let names = |field: &str| -> Vec<String> {
        match scenario.get(field) {
            Some(Value::String(s)) => vec![s.clone()],
            Some(Value::Sequence(items)) => items.iter().filter_map(|v| v.as_str().map(str::to_string)).collect(),
            _ => Vec::new(),
        }
    };
    Uses { targets: names("target"), workloads: names("workload"), profiles: names("profiles") }
}

/// Which scenarios use the field at `path` (a target, workload or profile
/// they name, or their own fields), and whether faultline's own
/// placeholders are filled in there.
fn owners(path: &str, scenarios: &[Uses]) -> (Option<Vec<usize>>, bool) {
    let section = |prefix: &str| -> Option<String> {
        let rest = path.strip_prefix(prefix)?;
        Some(rest.split(['.', '[']).next().unwrap_or_default().to_string())
    };
    let using = |pick: fn(&Uses) -> &Vec<String>, name: &str| -> Vec<usize> {
        (0..scenarios.len()).filter(|&i| pick(&scenarios[i]).iter().any(|n| n == name)).collect()
    };
    if let Some(name) = section("targets.") {
        return (Some(using(|u| &u.targets, &name)), true);
    }
    if let Some(name) = section("workloads.") {
        return (Some(using(|u| &u.workloads, &name)), false);
    }
    if let Some(name) = section("profiles.") {
        return (Some(using(|u| &u.profiles, &name)), false);
    }
    if let Some(rest) = path.strip_prefix("scenarios[") {
        let index: Option<usize> = rest.split(']').next().and_then(|i| i.parse().ok());
        let field = rest.split_once("].").map(|(_, f)| f).unwrap_or_default();
        if field.starts_with("matrix") {
            return (Some(Vec::new()), false);
        }
        return (Some(index.into_iter().collect()), field.starts_with("probes"));
    }
    (None, false)
}

/// Checks every placeholder against the dimensions of the scenarios that use
/// its field, and every dimension for a field that uses it. Returns which
/// dimensions each target's fields use.
pub fn check(tree: &Value, dims: &[IndexMap<String, Vec<String>>]) -> Result<HashMap<String, Vec<String>>, Problem> {
    let scenarios: Vec<Uses> = match tree.get("scenarios").and_then(Value::as_sequence) {
        Some(list) => list.iter().map(uses).collect(),
        None => Vec::new(),
    };
    let defined: Vec<&String> = {
        let mut seen = HashSet::new();
        dims.iter().flat_map(|d| d.keys()).filter(|k| seen.insert(*k)).collect()
    };
    let faultline_fills = RUNTIME_PLACEHOLDERS[..5].iter().map(|p| format!("{{{p}}}")).collect::<Vec<_>>().join(", ")
        + " and docker members' own";
    let mut used: Vec<HashSet<&str>> = vec![HashSet::new(); dims.len()];
    let mut target_dims: HashMap<String, Vec<String>> = HashMap::new();
    let found = placeholders(tree, &defined);
    for p in &found {
        let name = p.name.as_str();
        let is_dim = defined.iter().any(|d| *d == name);
        // Key prefixes and other free text may hold braces: only dimensions count there.
        if p.path.starts_with("workloads.") && !is_dim && !RUNTIME_PLACEHOLDERS.contains(&name) {
            continue;
        }
        // Cells, results and gates name a scenario the same at every point.
        if is_dim && p.path.starts_with("scenarios[") && p.path.ends_with("].name") {
            return Err((p.path.clone(), "a scenario's name is the same at every point of its matrix: name the point's values in the dimensions, not here".into()));
        }
        let runtime = RUNTIME_PLACEHOLDERS.contains(&name);
        let (owners, runtime_here) = owners(&p.path, &scenarios);
        let Some(owners) = owners else {
            // A placeholder in a campaign-wide field (a gate, the timing)
            // would need one value for every scenario.
            if defined.iter().any(|d| *d == name) {
                return Err((
                    p.path.clone(),
                    format!("`{{{name}}}` is filled in only in targets, workloads, profiles and scenarios"),
                ));
            }
            continue;
        };
        if runtime {
            if !runtime_here {
                return Err((
                    p.path.clone(),
                    format!("`{{{name}}}` is filled in only in a target's command, args and env, and in probes"),
                ));
            }
            continue;
        }
        if let Some(target) = p.path.strip_prefix("targets.").and_then(|r| r.split(['.', '[']).next()) {
            let entry = target_dims.entry(target.to_string()).or_default();
            if !entry.iter().any(|d| d == name) {
                entry.push(name.to_string());
            }
        }
        if owners.is_empty() && defined.iter().any(|d| *d == name) {
            // Unused by every scenario: it only has to parse.
            continue;
        }
        for &s in &owners {
            match dims.get(s).filter(|d| d.contains_key(name)) {
                Some(_) => {
                    used[s].insert(name);
                }
                None => {
                    let scenario = scenario_name(tree, s);
                    let has: Vec<&str> =
                        dims.get(s).map(|d| d.keys().map(String::as_str).collect()).unwrap_or_default();
                    let message = match defined.is_empty() {
                        true => format!(
                            "`{{{name}}}` names no matrix dimension: no scenario has a `matrix:` (faultline fills in {faultline_fills})"
                        ),
                        false if has.is_empty() => format!(
                            "`{{{name}}}` is not filled in for scenario `{scenario}`, which has no `matrix:` (faultline fills in {faultline_fills})"
                        ),
                        false => format!(
                            "`{{{name}}}` is not a dimension of scenario `{scenario}`'s matrix (it has: {}; faultline fills in {faultline_fills})",
                            has.join(", ")
                        ),
                    };
                    return Err((p.path.clone(), message));
                }
            }
        }
        if owners.is_empty() && !defined.iter().any(|d| *d == name) {
            return Err((
                p.path.clone(),
                format!("`{{{name}}}` names no matrix dimension (faultline fills in {faultline_fills})"),
            ));
        }
    }
    for (s, dims) in dims.iter().enumerate() {
        if let Some(unused) = dims.keys().find(|d| !used[s].contains(d.as_str())) {
            return Err((
                format!("scenarios[{s}].matrix.{unused}"),
                format!(
                    "no field of this scenario (its targets, workloads, profiles or its own fields) uses `{{{unused}}}`: write `{{{unused}}}` where its values go, or drop the dimension"
                ),
            ));
        }
    }
    Ok(target_dims)
}

fn scenario_name(tree: &Value, index: usize) -> String {
    tree.get("scenarios")
        .and_then(|s| s.get(index))
        .and_then(|s| s.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("?")
        .to_string()
}

/// Every combination of `dims`, the last dimension varying fastest.
pub fn combinations(dims: &IndexMap<String, Vec<String>>) -> Vec<IndexMap<String, String>> {
    let mut all = vec![IndexMap::new()];
    for (name, values) in dims {
        all = all
            .into_iter()
            .flat_map(|point: IndexMap<String, String>| {
                values.iter().map(move |v| {
                    let mut next = point.clone();
                    next.insert(name.clone(), v.clone());
                    next
                })
            })
            .collect();
    }
    all
}

/// Each dimension's first value, over all scenarios: what fills the
/// placeholders of fields a point does not use, so its text still parses.
pub fn first_values(dims: &[IndexMap<String, Vec<String>>]) -> IndexMap<String, String> {
    let mut first = IndexMap::new();
    for d in dims {
        for (name, values) in d {
            first.entry(name.clone()).or_insert_with(|| values[0].clone());
        }
    }
    first
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(text: &str) -> Value {
        serde_yaml_ng::from_str(text).unwrap()
    }

    const SPEC: &str = "targets:\n  a: {kind: redis, provider: process, args: [--appendfsync, {fsync}, --dir, '{target_dir}']}\n  b: {kind: redis, provider: process}\nprofiles:\n  p: {closed: '1x{depth}'}\nscenarios:\n  - {name: s, target: [a, b], workload: w, profiles: [p], matrix: {fsync: [always, everysec], depth: [1, 16]}}\n";

    #[test]
    fn finds_placeholders_and_the_dimensions_each_target_uses() {
        let t = tree(SPEC);
        let dims = read(&t).unwrap();
        assert_eq!(dims[0]["depth"], ["1", "16"]);
        let target_dims = check(&t, &dims).unwrap();
        assert_eq!(target_dims["a"], ["fsync"]);
        assert!(!target_dims.contains_key("b"));
        let points = combinations(&dims[0]);
        let labels: Vec<String> = points.iter().map(Point::label).collect();
        assert_eq!(
            labels,
            ["fsync=always,depth=1", "fsync=always,depth=16", "fsync=everysec,depth=1", "fsync=everysec,depth=16"]
        );
    }

    #[test]
    fn unused_dimensions_and_undefined_placeholders_are_located() {
        let unused = SPEC.replace("depth: [1, 16]", "depth: [1, 16], size: [1]");
        let t = tree(&unused);
        let (field, message) = check(&t, &read(&t).unwrap()).unwrap_err();
        assert_eq!(field, "scenarios[0].matrix.size");
        assert!(message.contains("uses `{size}`"), "{message}");

        let undefined = SPEC.replace("1x{depth}", "{clients}x{depth}");
        let t = tree(&undefined);
        let (field, message) = check(&t, &read(&t).unwrap()).unwrap_err();
        assert_eq!(field, "profiles.p.closed");
        assert!(message.contains("`{clients}` is not a dimension of scenario `s`'s matrix"), "{message}");

        let runtime_in_profile = SPEC.replace("1x{depth}", "{port}x{depth}");
        let t = tree(&runtime_in_profile);
        let (field, message) = check(&t, &read(&t).unwrap()).unwrap_err();
        assert_eq!(field, "profiles.p.closed");
        assert!(message.contains("only in a target's"), "{message}");
    }

    #[test]
    fn fill_replaces_dimensions_only_outside_comments() {
        let values: IndexMap<String, String> = [("fsync".to_string(), "always".to_string())].into_iter().collect();
        assert_eq!(
            fill("args: [x, {fsync}, '{port}', ${fsync}] # {fsync}\n", &values),
            "args: [x, always, '{port}', ${fsync}] # {fsync}\n"
        );
        assert_eq!(names_in("a {b} ${c} {d e} {f}"), ["b", "f"]);
    }
}
