//! The bad-spec corpus: every file in tests/bad_specs/ holds one mistake and,
//! in its leading comments, the line and message the error must name.

use crate::support::*;

#[test]
fn every_bad_spec_gets_a_located_clear_error() {
    let dir = repo().join("tests/bad_specs");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 20, "the corpus has only {} specs", files.len());
    let mut failures = Vec::new();
    for path in &files {
        let text = std::fs::read_to_string(path).unwrap();
        let expect = |key: &str| {
            text.lines().find_map(|l| l.strip_prefix(&format!("# expect-{key}: ")).map(|v| v.trim().to_string()))
        };
        let line = expect("line").unwrap_or_else(|| panic!("{} has no `# expect-line:`", path.display()));
        let message = expect("message").unwrap_or_else(|| panic!("{} has no `# expect-message:`", path.display()));
        let out = faultline().arg("validate").arg(path).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let located = format!("{}:{line}:", path.display());
        let mut problems = Vec::new();
        if out.status.code() != Some(3) {
            problems.push(format!("exit {:?}, not 3", out.status.code()));
        }
        // file:line:column:, the column a number from 1.
        let column = stderr.split(&located).nth(1).and_then(|rest| rest.split(':').next()).map(str::to_string);
        match (column.as_deref().map(str::parse::<u32>), expect("column")) {
            (None, _) => problems.push(format!("does not name line {line}")),
            (Some(Ok(c)), Some(want)) if c.to_string() != want => {
                problems.push(format!("names column {c}, not {want}"))
            }
            (Some(Ok(c)), _) if c >= 1 => {}
            (Some(_), _) => problems.push(format!("names no column after line {line}")),
        }
        if !stderr.contains(&message) {
            problems.push(format!("lacks {message:?}"));
        }
        if let Some(field) = expect("field") {
            if !stderr.contains(&format!("field `{field}`")) {
                problems.push(format!("does not name field `{field}`"));
            }
        }
        if stderr.contains("panicked") {
            problems.push("panicked".into());
        }
        if !problems.is_empty() {
            failures.push(format!("{}: {} — got: {}", path.display(), problems.join(", "), stderr.trim()));
        }
    }
    assert!(failures.is_empty(), "{} of {} bad specs:\n{}", failures.len(), files.len(), failures.join("\n"));
}
