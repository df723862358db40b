//! The spec language: YAML text → typed, validated [`Spec`], its matrix
//! points, and the [`plan`] of cells a run goes through; the gate grammar
//! and its table of metrics ([`gate`]) and fault selectors ([`selector`])
//! are part of the language.
//!
//! It knows target kinds and checkers only through a [`Catalog`] the
//! caller passes in (the CLI registers the kinds it was built with, and
//! faultline-check its checkers), so the language and its
//! checks build and test without any database driver, runtime or Docker:
//! `cargo test -p faultline-spec`. Errors name the file, line, column and
//! field (see [`locate`]).

pub mod arrivals;
pub mod capacity;
pub mod catalog;
pub mod checkers;
mod credentials;
pub mod docker;
pub mod fault;
pub mod gate;
pub mod host;
pub mod kind_info;
pub mod limits;
pub mod locate;
pub mod matrix;
pub mod memory;
pub mod metric;
pub mod model;
pub mod options;
pub mod plan;
pub mod probe;
pub mod problem;
pub mod schema;
pub mod selector;
pub mod target;
pub mod validate;

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use catalog::Catalog;
pub use checkers::CheckerInfo;
pub use fault::{Action, FaultSpec, FaultType, Registered};
pub use kind_info::KindInfo;
pub use memory::KindCost;
pub use model::*;
pub use target::{ProviderKind, TargetSpec};

/// A problem with a spec, located in its file.
#[derive(Debug)]
pub struct SpecError {
    pub file: PathBuf,
    pub line: Option<usize>,
    pub column: Option<usize>,
    /// Dotted path of the offending field, e.g. `scenarios[0].target`.
    pub field: Option<String>,
    pub message: String,
}

impl SpecError {
    /// An error in `file` at a line and column, when known.
    fn at(file: &Path, place: Option<(usize, usize)>, field: Option<String>, message: String) -> Self {
        let (line, column) = place.unzip();
        SpecError { file: file.to_path_buf(), line, column, field, message }
    }
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
            if let Some(col) = self.column {
                write!(f, ":{col}")?;
            }
        }
        write!(f, ": ")?;
        if let Some(field) = &self.field {
            write!(f, "field `{field}`: ")?;
        }
        write!(f, "{}", self.message)
    }
}

impl std::error::Error for SpecError {}

/// A spec together with the text it was parsed from (after `${param}`
/// substitution), kept so the run directory can hold the spec as run.
#[derive(Debug, Clone)]
pub struct LoadedSpec {
    pub spec: Spec,
    pub resolved_text: String,
    /// Each scenario's matrix points, with their own specs.
    pub matrix: Arc<matrix::Expanded>,
    /// What [`validate::warnings`] found (it asks the checkers, which the
    /// catalog given to [`parse`] holds).
    warnings: Vec<problem::Problem>,
}

impl LoadedSpec {
    /// What [`validate::warnings`] found, located in the spec file at `path`.
    pub fn warnings(&self, path: &Path) -> Vec<SpecError> {
        self.warnings
            .iter()
            .cloned()
            .map(|(field, message)| {
                let (line, column) = locate::locate(&self.resolved_text, &locate::parse_path(&field)).unzip();
                SpecError { file: path.to_path_buf(), line, column, field: Some(field), message }
            })
            .collect()
    }
}

/// Reads, substitutes params, parses and validates a spec file.
pub fn load(path: &Path, overrides: &[(String, String)], catalog: &dyn Catalog) -> Result<LoadedSpec, SpecError> {
    let err_at = |at: Option<(usize, usize)>, message: String| SpecError::at(path, at, None, message);
    // One byte past the limit is enough to know it is too large; a huge file
    // (or /dev/zero) is never read whole.
    let mut bytes = Vec::new();
    faultline_model::input_file::open(path)
        .and_then(|f| {
            std::io::Read::read_to_end(&mut std::io::Read::take(f, limits::MAX_SPEC_BYTES as u64 + 1), &mut bytes)
        })
        .map_err(|e| err_at(None, format!("cannot read the spec: {e}")))?;
    let too_large = bytes.len() > limits::MAX_SPEC_BYTES;
    let text = match String::from_utf8(bytes) {
        Ok(text) if !too_large => text,
        Ok(text) => {
            return Err(err_at(
                Some(limits::line_and_column(&text, limits::MAX_SPEC_BYTES)),
                limits::too_large_message(),
            ))
        }
        Err(e) => {
            let text = String::from_utf8_lossy(e.as_bytes());
            if too_large {
                return Err(err_at(
                    Some(limits::line_and_column(&text, limits::MAX_SPEC_BYTES)),
                    limits::too_large_message(),
                ));
            }
            let at = limits::line_and_column(&text, e.utf8_error().valid_up_to());
            return Err(err_at(Some(at), "not UTF-8 text: a spec is YAML in UTF-8".into()));
        }
    };
    parse(path, &text, overrides, catalog)
}

/// Parses and validates a spec's text; `path` names it in errors.
pub fn parse(
    path: &Path,
    text: &str,
    overrides: &[(String, String)],
    catalog: &dyn Catalog,
) -> Result<LoadedSpec, SpecError> {
    let err_at = |line: Option<usize>, column: Option<usize>, field: Option<String>, message: String| SpecError {
        file: path.to_path_buf(),
        line,
        column,
        field,
        message,
    };

    // Pass 0: size and nesting, before a parser spends quadratic time on them.
    let masked = mask_references(text);
    limits::check(&masked).map_err(|(line, column, m)| err_at(Some(line), Some(column), None, m))?;

    // Pass 1: the untyped tree, for syntax errors and the params block. The
    // `${name}` references are not resolved yet and `{`/`}` would read as YAML
    // flow syntax, so they stand in as a plain scalar here.
    let tree: serde_yaml_ng::Value = serde_yaml_ng::from_str(&masked).map_err(|e| {
        let (mut line, mut column) = e.location().map(|l| (l.line(), l.column())).unzip();
        let mut message = strip_location(&e.to_string());
        if line.and_then(|l| text.lines().nth(l.saturating_sub(1))).is_some_and(|l| l.contains('\t')) {
            message.push_str(" (this line has a tab; YAML indents with spaces only)");
        }
        if message.starts_with("mapping values are not allowed") {
            if let Some(hint) = line.and_then(|l| text.lines().nth(l.saturating_sub(1))).and_then(quote_hint) {
                message.push_str(&hint);
            }
        }
        // The parser notices an unclosed bracket only where it gives up;
        // point at the bracket instead.
        for (open, close) in [('[', ']'), ('{', '}')] {
            if message.contains(&format!("expected ',' or '{close}'")) {
                if let Some(opened) = line.and_then(|l| unclosed_opener(text, l, open, close)) {
                    message = format!("this `{open}` is never closed ({message} on line {})", line.unwrap_or(0));
                    (line, column) = (Some(opened.0), Some(opened.1));
                }
            }
        }
        // Some errors come without a place (a flow collection cut off at the
        // end reads as "more than one document"); the other parser's is exact.
        if line.is_none() {
            if let Some((l, c, m)) = locate::syntax_error(text) {
                (line, column, message) = (Some(l), Some(c), m);
            } else if let Some((l, c)) = locate::second_document(text) {
                (line, column) = (Some(l), Some(c));
                message = "a spec is one YAML document, and a second one starts here".into();
            }
        }
        // Duplicate keys are reported at the enclosing mapping; find the repeat.
        if let Some(key) = quoted_after(&message, "duplicate entry with key ") {
            if let Some(repeat) = second_occurrence(text, &key) {
                (line, column) = (Some(repeat.0), Some(repeat.1));
            }
        }
        err_at(line, column, None, message)
    })?;
    // Errors found from here on are located with yaml-rust2, which is
    // stricter than serde_yaml_ng in places (a flow collection continued at
    // column 0, a `#` right after `}`): text it cannot read is refused here,
    // where its own error names the place.
    if let Some((line, column, m)) = locate::syntax_error(&masked) {
        return Err(err_at(Some(line), Some(column), None, format!("{m} (YAML syntax)")));
    }
    if !tree.is_mapping() {
        // An empty document (only comments, say) has no node to point at.
        let (line, column) = locate::locate(&masked, &[]).unwrap_or((1, 1));
        let message = match tree.is_null() {
            true => "the spec is empty: a spec is a YAML mapping with at least name, targets, workloads, profiles and scenarios",
            false => "a spec is a YAML mapping with at least name, targets, workloads, profiles and scenarios",
        };
        return Err(err_at(Some(line), Some(column), None, message.into()));
    }
    let params = resolve_params(&tree, overrides).map_err(|(field, m)| {
        let (line, column) = locate::locate(&masked, &locate::parse_path(&field)).unzip();
        err_at(line, column, Some(field), m)
    })?;

    // Pass 2: substitute `${name}` textually so line numbers survive.
    let resolved_text =
        substitute_params(text, &params).map_err(|(line, column, m)| err_at(Some(line), Some(column), None, m))?;
    // A param's value can nest, or be used many times over.
    limits::check(&resolved_text).map_err(|(line, column, m)| {
        err_at(Some(line), Some(column), None, format!("after substituting the params, {m}"))
    })?;
    // The substituted values must keep the text readable to both parsers.
    if let Some((line, column, m)) = locate::syntax_error(&resolved_text) {
        return Err(err_at(Some(line), Some(column), None, format!("{m} (YAML syntax)")));
    }

    // Pass 3: the matrix dimensions, and every `{placeholder}` checked
    // against the scenarios that use its field.
    // Text the typed parse would refuse has no matrix to read: it reports it.
    let tree: serde_yaml_ng::Value = serde_yaml_ng::from_str(&resolved_text).unwrap_or(serde_yaml_ng::Value::Null);
    credentials::remember_spec(&tree);
    let located = |(field, message): (String, String)| {
        let (line, column) = locate::locate(&resolved_text, &locate::parse_path(&field)).unzip();
        err_at(line, column, Some(field), message)
    };
    let dims = matrix::read(&tree).map_err(located)?;
    let target_dims = matrix::check(&tree, &dims).map_err(located)?;

    // Pass 4: the typed spec, with every dimension at its first value, and
    // one per point of each scenario's matrix.
    let first = matrix::first_values(&dims);
    let spec = typed(path, &matrix::fill(&resolved_text, &first), &params, None, catalog)?;
    let mut expanded = matrix::Expanded { points: HashMap::new(), target_dims };
    for (scenario, dims) in spec.scenarios.iter().zip(&dims).filter(|(_, d)| !d.is_empty()) {
        let mut points = Vec::new();
        for values in matrix::combinations(dims) {
            let mut all = first.clone();
            all.extend(values.clone());
            let at = format!("scenario `{}` at {}", scenario.name, matrix::Point::label(&values));
            let spec = typed(path, &matrix::fill(&resolved_text, &all), &params, Some(&at), catalog)?;
            points.push(Arc::new(matrix::Point { values, spec }));
        }
        expanded.points.insert(scenario.name.clone(), points);
    }
    // The plan's cell limit, over every matrix point (each point's own
    // validation counts one): `validate` refuses what `run` would.
    let mut cells = 0u64;
    for (i, scenario) in spec.scenarios.iter().enumerate() {
        let (added, field) = match expanded.points.get(&scenario.name) {
            Some(points) => (
                points
                    .iter()
                    .map(|p| validate::cells_of(&p.spec, &p.spec.scenarios[i]))
                    .fold(0u64, u64::saturating_add),
                format!("scenarios[{i}].matrix"),
            ),
            None => (validate::cells_of(&spec, scenario), format!("scenarios[{i}]")),
        };
        cells = cells.saturating_add(added);
        if cells > limits::MAX_CELLS {
            return Err(located((
                field,
                format!(
                    "the plan would hold more than {} cells (scenarios x matrix points x repeats x profiles x variants): fewer matrix values, repeats or profiles",
                    limits::MAX_CELLS
                ),
            )));
        }
    }
    let warnings = validate::warnings(&spec, catalog);
    Ok(LoadedSpec { spec, resolved_text, matrix: Arc::new(expanded), warnings })
}

/// The typed model of a spec's text, validated; `point` names the matrix
/// point the text was filled in for, in errors.
fn typed(
    path: &Path,
    resolved_text: &str,
    params: &indexmap::IndexMap<String, serde_json::Value>,
    point: Option<&str>,
    catalog: &dyn Catalog,
) -> Result<Spec, SpecError> {
    let err_at = |line: Option<usize>, column: Option<usize>, field: Option<String>, message: String| SpecError {
        file: path.to_path_buf(),
        line,
        column,
        field,
        message: match point {
            Some(p) => format!("{message} (in {p})"),
            None => message,
        },
    };
    // The typed model, with the failing field's path.
    let deserializer = serde_yaml_ng::Deserializer::from_str(resolved_text);
    let mut spec: Spec = serde_path_to_error::deserialize(deserializer).map_err(|e| {
        let inner_message = strip_location(&e.inner().to_string());
        // A map key that failed (an unknown op kind, say) shows as `?`: name it.
        let raw_path = e.path().to_string();
        let field = match (raw_path.strip_suffix(".?"), quoted_after(&inner_message, "unknown variant ")) {
            (Some(parent), Some(key)) => format!("{parent}.{key}"),
            (Some(parent), None) => parent.to_string(),
            (None, _) => raw_path,
        };
        let message = inner_message;
        let inner = e.into_inner();
        // serde_yaml_ng places errors raised while converting a value (a bad
        // duration) at the start of the enclosing mapping; the field's own
        // position is better, except for unknown fields, which have none.
        let exact = (!message.starts_with("unknown field"))
            .then(|| locate::locate_exact(resolved_text, &locate::parse_path(&field)))
            .flatten();
        let (line, column) = match (exact, inner.location()) {
            (Some((l, c)), _) => (Some(l), Some(c)),
            (None, Some(l)) => (Some(l.line()), Some(l.column())),
            (None, None) => locate::locate(resolved_text, &locate::parse_path(&field)).unzip(),
        };
        let field = (field != "." && !field.is_empty()).then_some(field);
        err_at(line, column, field, message)
    })?;
    spec.params = params.clone();
    // A process target of a kind whose members share a host starts its
    // kind's number of them unless told: selectors, the plan and the
    // results all read this one count.
    for t in spec.targets.values_mut() {
        if t.provider == ProviderKind::Process && t.members.is_none() {
            t.members = catalog.shared_host_members(&t.kind);
        }
    }

    // Cross-references and value ranges.
    validate::validate(&spec, catalog).map_err(|(field, message)| {
        let (line, column) = locate::locate(resolved_text, &locate::parse_path(&field)).unzip();
        err_at(line, column, Some(field), message)
    })?;

    // Plugin files, relative to the spec.
    let base = path.parent().unwrap_or(Path::new("."));
    for (field, plugin) in spec.plugins() {
        let file = base.join(&plugin.plugin);
        if !file.is_file() {
            let (line, column) = locate::locate(resolved_text, &locate::parse_path(&field)).unzip();
            let message = format!("no such file: {} (paths are relative to the spec's folder)", file.display());
            return Err(err_at(line, column, Some(field), message));
        }
    }

    Ok(spec)
}

/// serde_yaml_ng puts the path in front and "at line L column C" behind; we
/// print both up front already. Rust type names become words.
fn strip_location(message: &str) -> String {
    let message = match message.find(" at line ") {
        Some(i) => &message[..i],
        None => message,
    };
    let message = match message.split_once(": ") {
        Some((path, rest)) if !path.contains(' ') => rest,
        _ => message,
    };
    message
        .replace("expected u64", "expected a whole number >= 0")
        .replace("expected u32", "expected a whole number >= 0")
        .replace("expected f64", "expected a number")
}

/// The params with `--set` applied; errors carry the field they are about.
fn resolve_params(
    tree: &serde_yaml_ng::Value,
    overrides: &[(String, String)],
) -> Result<indexmap::IndexMap<String, serde_json::Value>, (String, String)> {
    let mut params = indexmap::IndexMap::new();
    let at = |field: &str, message: String| (field.to_string(), message);
    if let Some(block) = tree.get("params") {
        let map = block.as_mapping().ok_or_else(|| at("params", "must be a mapping of names to values".into()))?;
        for (k, v) in map {
            let name = k.as_str().ok_or_else(|| at("params", "param names must be strings".into()))?;
            let field = format!("params.{name}");
            let value: serde_json::Value = serde_json::to_value(v).map_err(|e| at(&field, e.to_string()))?;
            if value.is_object() || value.is_array() {
                return Err(at(&field, format!("param `{name}` must be a single value (number, string, duration)")));
            }
            params.insert(name.to_string(), value);
        }
    }
    for (name, raw) in overrides {
        if !params.contains_key(name) {
            let known: Vec<&str> = params.keys().map(String::as_str).collect();
            return Err(at(
                "params",
                format!(
                    "--set {name}: the spec has no param `{name}` (it declares: {})",
                    if known.is_empty() { "none".to_string() } else { known.join(", ") }
                ),
            ));
        }
        let value: serde_json::Value = serde_yaml_ng::from_str(raw).unwrap_or(serde_json::Value::String(raw.clone()));
        params.insert(name.clone(), value);
    }
    Ok(params)
}

/// For a `key: value` line whose value holds `: ` (a window gate such as
/// `p99(get, after: frozen) < 50ms`), the hint to quote the value.
fn quote_hint(line: &str) -> Option<String> {
    let code = line[..comment_start(line)].trim_end();
    let (key, value) = code.split_once(": ")?;
    let value = value.trim();
    if !value.contains(": ") || value.starts_with(['"', '\'', '{', '[']) {
        return None;
    }
    let quoted = match value.contains('"') {
        true => format!("'{}'", value.replace('\'', "''")),
        false => format!("\"{value}\""),
    };
    let key = key.trim().trim_start_matches("- ");
    Some(format!(" (the value of `{key}` holds `: `, which YAML reads as another key: quote it, `{key}: {quoted}`)"))
}

/// The text between the quotes (or backticks) that follow `prefix`.
fn quoted_after(message: &str, prefix: &str) -> Option<String> {
    let rest = &message[message.find(prefix)? + prefix.len()..];
    let quote = rest.chars().next().filter(|c| *c == '"' || *c == '`')?;
    let rest = &rest[1..];
    Some(rest[..rest.find(quote)?].to_string())
}

/// Line and column (1-based) of the bracket left open before `error_line`.
fn unclosed_opener(text: &str, error_line: usize, open: char, close: char) -> Option<(usize, usize)> {
    let lines: Vec<&str> = text.lines().take(error_line).collect();
    let mut balance = 0i32;
    for (i, line) in lines.iter().enumerate().rev() {
        let code = &line[..comment_start(line)];
        for (col, c) in code.char_indices().rev() {
            if c == close {
                balance -= 1;
            } else if c == open {
                balance += 1;
                if balance > 0 {
                    return Some((i + 1, col + 1));
                }
            }
        }
    }
    None
}

/// Line and column of the second `key:` at the indentation of the first.
fn second_occurrence(text: &str, key: &str) -> Option<(usize, usize)> {
    let mut indent = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if trimmed.strip_prefix(key).is_some_and(|r| r.starts_with(':')) {
            let this = line.len() - trimmed.len();
            match indent {
                None => indent = Some(this),
                Some(first) if first == this => return Some((i + 1, this + 1)),
                Some(_) => {}
            }
        }
    }
    None
}

/// Where a line's YAML comment starts: a `#` at the start or after a space,
/// outside quotes. `${…}` in comments is left alone.
fn comment_start(line: &str) -> usize {
    let (mut single, mut double) = (false, false);
    let mut previous = ' ';
    for (i, c) in line.char_indices() {
        match c {
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            '#' if !single && !double && previous.is_whitespace() => return i,
            _ => {}
        }
        previous = c;
    }
    line.len()
}

fn mask_references(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let (code, comment) = line.split_at(comment_start(line));
        let mut rest = code;
        while let Some(start) = rest.find("${") {
            out.push_str(&rest[..start]);
            match rest[start..].find('}') {
                Some(end) => {
                    out.push('0');
                    rest = &rest[start + end + 1..];
                }
                // Unclosed: leave it for substitution to report with its line.
                None => {
                    out.push_str("${");
                    rest = &rest[start + 2..];
                }
            }
        }
        out.push_str(rest);
        out.push_str(comment);
    }
    out
}

fn substitute_params(
    text: &str,
    params: &indexmap::IndexMap<String, serde_json::Value>,
) -> Result<String, (usize, usize, String)> {
    let mut out = String::with_capacity(text.len());
    for (line_no, line) in text.split_inclusive('\n').enumerate() {
        let (code, comment) = line.split_at(comment_start(line));
        let mut rest = code;
        while let Some(start) = rest.find("${") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            let column = line.len() - rest.len() + start + 1;
            let end = after.find('}').ok_or((line_no + 1, column, "unclosed `${`: write `${name}`".to_string()))?;
            let name = after[..end].trim();
            let value = params.get(name).ok_or_else(|| {
                (line_no + 1, column, format!("`${{{name}}}` names no param; declare it under `params:`"))
            })?;
            match value {
                serde_json::Value::String(s) => out.push_str(s),
                other => out.push_str(&other.to_string()),
            }
            rest = &after[end + 1..];
        }
        out.push_str(rest);
        out.push_str(comment);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_substitute_and_overrides_win() {
        let text = "params:\n  d: 3s\nname: x\n";
        let params = resolve_params(&serde_yaml_ng::from_str(text).unwrap(), &[("d".into(), "7s".into())]).unwrap();
        assert_eq!(substitute_params("duration: ${d}\n", &params).unwrap(), "duration: 7s\n");
        let err = substitute_params("x: ${nope}\n", &params).unwrap_err();
        assert_eq!((err.0, err.1), (1, 4));
        let commented = "x: 1 # was ${old}\ny: '#${d}'\n";
        assert_eq!(substitute_params(commented, &params).unwrap(), "x: 1 # was ${old}\ny: '#7s'\n");
    }

    #[test]
    fn unknown_override_names_the_declared_params() {
        let tree = serde_yaml_ng::from_str("params: {a: 1}\n").unwrap();
        let (field, err) = resolve_params(&tree, &[("b".into(), "2".into())]).unwrap_err();
        assert_eq!(field, "params");
        assert!(err.contains("no param `b`") && err.contains("a"), "{err}");
    }
}
