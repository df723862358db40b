//! Fuzzes the spec parser in-process: the shipped specs and the bad-spec
//! corpus, mutated by a seeded mutator (byte flips, absurd numbers and
//! durations, deep nesting, truncation, lines dropped or repeated), go
//! through what `validate` and `run --dry-run` do. No input may panic, and
//! every error must name a line and column. 137 of 12,940 fuzzed specs once
//! panicked; the inputs that did are in tests/bad_specs/13x-*.yaml.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::plan::{self, PlanOptions};
use crate::spec::SpecError;
use faultline_kind::workload::Workload;

/// Cases per run (about a second in release); `FAULTLINE_FUZZ_CASES` and
/// `FAULTLINE_FUZZ_SEED` run more, or others, by hand.
const CASES: usize = 20_000;

fn from_env(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Numbers that broke, or could break, a cast or a conversion.
const ABSURD_NUMBERS: &[&str] = &[
    "99999999999999999999999",
    "10000000000000000000",
    "9223372036854775807",
    "18446744073709551616",
    "4294967295",
    "65536",
    "1e-30",
    "1e308",
    "1e400",
    "-1",
    "0",
    "0.0",
    "-0",
    ".nan",
    ".inf",
    "-.inf",
    "0.000000001",
    "1.5.5",
];

/// Units glued to absurd numbers.
const UNITS: &[&str] = &["h", "s", "ms", "ns", "m", "GiB", "B", "", "x1", "x99999999999"];

/// Fragments that change YAML's structure.
const FRAGMENTS: &[&str] =
    &["[", "]", "{", "}", ":", ": ", ",", "- ", "#", "\"", "'", "\n", "\t", "${", "&a", "*a", "!!", "|", "? "];

fn corpus() -> Vec<(PathBuf, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for dir in ["specs", "tests/bad_specs"] {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(root.join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
            .collect();
        paths.sort();
        files.extend(paths.into_iter().map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            (p, text)
        }));
    }
    assert!(files.len() > 100, "the corpus has only {} files", files.len());
    files
}

fn pick<'a>(rng: &mut impl Rng, from: &[&'a str]) -> &'a str {
    from[rng.random_range(0..from.len())]
}

/// A byte position on a character boundary.
fn position(rng: &mut impl Rng, text: &str) -> usize {
    let mut at = rng.random_range(0..=text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn mutate(rng: &mut impl Rng, text: &str) -> String {
    let mut text = text.to_string();
    for _ in 0..rng.random_range(1..=3) {
        match rng.random_range(0..7) {
            // Replace a number (and any unit after it) with an absurd one.
            0 | 1 => {
                let starts: Vec<usize> = text
                    .char_indices()
                    .filter(|(i, c)| c.is_ascii_digit() && !text[..*i].ends_with(|p: char| p.is_ascii_digit()))
                    .map(|(i, _)| i)
                    .collect();
                if let Some(&start) = starts.get(rng.random_range(0..starts.len().max(1))) {
                    let end = text[start..]
                        .find(|c: char| !c.is_ascii_alphanumeric() && c != '.')
                        .map_or(text.len(), |e| start + e);
                    let keep_unit = rng.random_bool(0.5);
                    let unit_start = text[start..end].find(|c: char| c.is_alphabetic()).map_or(end, |u| start + u);
                    let unit = if keep_unit { text[unit_start..end].to_string() } else { pick(rng, UNITS).to_string() };
                    text.replace_range(start..end, &format!("{}{unit}", pick(rng, ABSURD_NUMBERS)));
                }
            }
            // Insert a structural fragment.
            2 => {
                let at = position(rng, &text);
                text.insert_str(at, pick(rng, FRAGMENTS));
            }
            // Nest deeply at one place.
            3 => {
                let at = position(rng, &text);
                let n = [63, 64, 65, 300, 20_000][rng.random_range(0..5)];
                let (open, close) = if rng.random_bool(0.5) { ("[", "]") } else { ("{a: ", "}") };
                let closing = if rng.random_bool(0.5) { close.repeat(n) } else { String::new() };
                text.insert_str(at, &format!("{}1{closing}", open.repeat(n)));
            }
            // Truncate.
            4 => {
                let at = position(rng, &text);
                text.truncate(at);
            }
            // Drop or repeat a line.
            5 => {
                let lines: Vec<&str> = text.split_inclusive('\n').collect();
                if !lines.is_empty() {
                    let i = rng.random_range(0..lines.len());
                    let repeat = if rng.random_bool(0.5) { 0 } else { rng.random_range(2..50) };
                    let changed: String = lines
                        .iter()
                        .enumerate()
                        .map(|(j, l)| if j == i { l.repeat(repeat) } else { l.to_string() })
                        .collect();
                    text = changed;
                }
            }
            // Flip a byte to another ASCII character.
            _ => {
                let at = position(rng, &text);
                let end = text[at..].chars().next().map_or(at, |c| at + c.len_utf8());
                let c = rng.random_range(0x20u8..0x7f) as char;
                text.replace_range(at..end, &c.to_string());
            }
        }
    }
    text
}

/// What `validate` and `run --dry-run` do with a spec, plus the workloads'
/// first ops: the error if it is refused.
fn exercise(path: &Path, text: &str) -> Result<(), SpecError> {
    let loaded = crate::spec::parse(path, text, &[], &crate::kinds::CATALOG)?;
    for quick in [false, true] {
        if let Ok(plan) = plan::build(&loaded, &PlanOptions { quick, only: vec![] }) {
            plan.describe(&loaded.spec, &crate::kinds::CATALOG);
            for i in 0..plan.cells.len().min(3) {
                plan.time_after(i);
            }
        }
    }
    // The engine paces an open loop by its schedule's due times.
    for profile in loaded.spec.profiles.values() {
        if let Some(open) = &profile.open {
            let arrivals = open.arrivals(std::time::Duration::from_secs(1), 1.0);
            for s in (0..3).filter_map(|k| arrivals.due_s(k)) {
                let _ = std::time::Duration::from_secs_f64(s);
            }
        }
    }
    for spec in loaded.spec.workloads.values().filter(|w| w.shape.is_none()) {
        let workload = Arc::new(Workload::new(spec, loaded.spec.seed, 1));
        let mut ops = workload.stream(0, 2, 1, 7, Some((0, 0)));
        for _ in 0..50 {
            if let Some(op) = ops.next_op() {
                let (mut key, mut value) = (Vec::new(), Vec::new());
                workload.put_key(op.kind, op.key, &mut key);
                workload.put_value(&op, &mut value);
            }
        }
    }
    Ok(())
}

fn shown(text: &str) -> String {
    format!("--- input ---\n{}\n---", text.chars().take(2_000).collect::<String>())
}

#[test]
fn mutated_specs_never_panic_and_every_error_is_located() {
    let files = corpus();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(from_env("FAULTLINE_FUZZ_SEED", 12));
    let count = from_env("FAULTLINE_FUZZ_CASES", CASES as u64) as usize;
    let mut problems = Vec::new();
    // The corpus itself first: the crashing inputs are in it.
    let cases = files.iter().map(|(path, text)| (path.clone(), text.clone())).chain((0..count).map(|_| {
        let (path, text) = &files[rng.random_range(0..files.len())];
        (path.clone(), mutate(&mut rng, text))
    }));
    for (case, (path, text)) in cases.enumerate() {
        match catch_unwind(AssertUnwindSafe(|| exercise(&path, &text))) {
            Ok(Ok(())) => {}
            Ok(Err(e)) if e.line.is_some() && e.column.is_some() => {}
            Ok(Err(e)) => problems.push(format!("case {case}: unlocated error: {e}\n{}", shown(&text))),
            Err(panic) => {
                let why = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                let shown: String = text.chars().take(2_000).collect();
                problems
                    .push(format!("case {case} ({}): panicked: {why}\n--- input ---\n{shown}\n---", path.display()));
            }
        }
        if problems.len() >= 5 {
            break;
        }
    }
    assert!(problems.is_empty(), "{} problems:\n{}", problems.len(), problems.join("\n"));
}
