//! The spec language: YAML text → typed, validated [`Spec`].

pub mod locate;
pub mod model;
pub mod units;
mod validate;

use std::fmt;
use std::path::{Path, PathBuf};

pub use model::*;

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
}

/// Reads, substitutes params, parses and validates a spec file.
pub fn load(path: &Path, overrides: &[(String, String)]) -> Result<LoadedSpec, SpecError> {
    let text = std::fs::read_to_string(path).map_err(|e| SpecError {
        file: path.to_path_buf(),
        line: None,
        column: None,
        field: None,
        message: format!("cannot read the spec: {e}"),
    })?;
    parse(path, &text, overrides)
}

pub fn parse(path: &Path, text: &str, overrides: &[(String, String)]) -> Result<LoadedSpec, SpecError> {
    let err_at = |line: Option<usize>, column: Option<usize>, field: Option<String>, message: String| SpecError {
        file: path.to_path_buf(),
        line,
        column,
        field,
        message,
    };

    // Pass 1: the untyped tree, for syntax errors and the params block. The
    // `${name}` references are not resolved yet and `{`/`}` would read as YAML
    // flow syntax, so they stand in as a plain scalar here.
    let tree: serde_yaml_ng::Value = serde_yaml_ng::from_str(&mask_references(text)).map_err(|e| {
        let loc = e.location();
        err_at(
            loc.as_ref().map(|l| l.line()),
            loc.as_ref().map(|l| l.column()),
            None,
            strip_location(&e.to_string()),
        )
    })?;
    if !tree.is_mapping() {
        return Err(err_at(
            Some(1),
            Some(1),
            None,
            "a spec is a YAML mapping with at least name, targets, workloads, profiles and scenarios".into(),
        ));
    }
    let params = resolve_params(&tree, overrides).map_err(|m| {
        let (line, column) = locate::locate(text, &locate::parse_path("params")).unzip();
        err_at(line, column, Some("params".into()), m)
    })?;

    // Pass 2: substitute `${name}` textually so line numbers survive.
    let resolved_text = substitute_params(text, &params).map_err(|(line, column, m)| {
        err_at(Some(line), Some(column), None, m)
    })?;

    // Pass 3: the typed model, with the failing field's path.
    let deserializer = serde_yaml_ng::Deserializer::from_str(&resolved_text);
    let mut spec: Spec = serde_path_to_error::deserialize(deserializer).map_err(|e| {
        let field = e.path().to_string();
        let inner = e.into_inner();
        let loc = inner.location();
        let (line, column) = match loc {
            Some(l) => (Some(l.line()), Some(l.column())),
            None => locate::locate(&resolved_text, &locate::parse_path(&field)).unzip(),
        };
        let field = (field != "." && !field.is_empty()).then_some(field);
        err_at(line, column, field, strip_location(&inner.to_string()))
    })?;
    spec.params = params;

    // Pass 4: cross-references and value ranges.
    validate::validate(&spec).map_err(|(field, message)| {
        let (line, column) = locate::locate(&resolved_text, &locate::parse_path(&field)).unzip();
        err_at(line, column, Some(field), message)
    })?;

    Ok(LoadedSpec {
        spec,
        resolved_text,
    })
}

/// serde_yaml_ng puts the path in front and "at line L column C" behind; we
/// print both up front already.
fn strip_location(message: &str) -> String {
    let message = match message.find(" at line ") {
        Some(i) => &message[..i],
        None => message,
    };
    match message.split_once(": ") {
        Some((path, rest)) if !path.contains(' ') => rest.to_string(),
        _ => message.to_string(),
    }
}

fn resolve_params(
    tree: &serde_yaml_ng::Value,
    overrides: &[(String, String)],
) -> Result<indexmap::IndexMap<String, serde_json::Value>, String> {
    let mut params = indexmap::IndexMap::new();
    if let Some(block) = tree.get("params") {
        let map = block
            .as_mapping()
            .ok_or("params must be a mapping of names to values")?;
        for (k, v) in map {
            let name = k.as_str().ok_or("param names must be strings")?;
            let value: serde_json::Value = serde_json::to_value(v).map_err(|e| e.to_string())?;
            if value.is_object() || value.is_array() {
                return Err(format!("param `{name}` must be a single value (number, string, duration)"));
            }
            params.insert(name.to_string(), value);
        }
    }
    for (name, raw) in overrides {
        if !params.contains_key(name) {
            let known: Vec<&str> = params.keys().map(String::as_str).collect();
            return Err(format!(
                "--set {name}: the spec has no param `{name}` (it declares: {})",
                if known.is_empty() { "none".to_string() } else { known.join(", ") }
            ));
        }
        let value: serde_json::Value = serde_yaml_ng::from_str(raw).unwrap_or(serde_json::Value::String(raw.clone()));
        params.insert(name.clone(), value);
    }
    Ok(params)
}

fn mask_references(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        match rest[start..].find(['}', '\n']) {
            Some(end) if rest.as_bytes()[start + end] == b'}' => {
                out.push('0');
                rest = &rest[start + end + 1..];
            }
            // Unclosed: leave it for substitution to report with its line.
            _ => {
                out.push_str("${");
                rest = &rest[start + 2..];
            }
        }
    }
    out.push_str(rest);
    out
}

fn substitute_params(
    text: &str,
    params: &indexmap::IndexMap<String, serde_json::Value>,
) -> Result<String, (usize, usize, String)> {
    let mut out = String::with_capacity(text.len());
    for (line_no, line) in text.split_inclusive('\n').enumerate() {
        let mut rest = line;
        while let Some(start) = rest.find("${") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            let column = line.len() - rest.len() + start + 1;
            let end = after
                .find('}')
                .ok_or((line_no + 1, column, "unclosed `${`: write `${name}`".to_string()))?;
            let name = after[..end].trim();
            let value = params.get(name).ok_or_else(|| {
                (
                    line_no + 1,
                    column,
                    format!("`${{{name}}}` names no param; declare it under `params:`"),
                )
            })?;
            match value {
                serde_json::Value::String(s) => out.push_str(s),
                other => out.push_str(&other.to_string()),
            }
            rest = &after[end + 1..];
        }
        out.push_str(rest);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_substitute_and_overrides_win() {
        let text = "params:\n  d: 3s\nname: x\n";
        let params = resolve_params(
            &serde_yaml_ng::from_str(text).unwrap(),
            &[("d".into(), "7s".into())],
        )
        .unwrap();
        assert_eq!(substitute_params("duration: ${d}\n", &params).unwrap(), "duration: 7s\n");
        let err = substitute_params("x: ${nope}\n", &params).unwrap_err();
        assert_eq!((err.0, err.1), (1, 4));
    }

    #[test]
    fn unknown_override_names_the_declared_params() {
        let tree = serde_yaml_ng::from_str("params: {a: 1}\n").unwrap();
        let err = resolve_params(&tree, &[("b".into(), "2".into())]).unwrap_err();
        assert!(err.contains("no param `b`") && err.contains("a"), "{err}");
    }
}
