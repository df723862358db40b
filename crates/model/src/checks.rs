//! What a checker's verdict looks like in results.json: a checker's name,
//! a check's result with its witnesses, how an index caught up
//! ([`IndexLag`]) and where lost writes fall against the demoted-primary
//! spans ([`LostWritesAround`]). The checkers themselves, and what each
//! judges and requires, live in faultline-check's registry.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::roles::DemotedPrimary;

/// A checker by the name a spec writes (`stale-read-after-ack`,
/// `hot-key`): checkers register themselves with the check crate's
/// registry, which the spec's validation asks whether a name is one this
/// build holds, so the vocabulary is not a closed list here.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Deserialize, Serialize, JsonSchema)]
#[serde(transparent)]
pub struct CheckerName(String);

impl CheckerName {
    pub fn new(name: impl Into<String>) -> Self {
        CheckerName(name.into())
    }
    /// The name a spec writes.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for CheckerName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CheckStatus {
    /// Checked, no violation.
    Ok,
    Violated,
    /// Could not be decided (budget ran out, history unreadable); never a pass.
    Unknown,
}

/// One checker's result for one cell.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CheckResult {
    pub checker: String,
    pub status: CheckStatus,
    /// How many it judged of what it judges (`judged`):
    /// with none, a gate on its violations is unmeasured, never a pass.
    pub checked: u64,
    /// What `checked` counts, in words.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub judged: String,
    pub violations: u64,
    /// The first violations, with times in ms since the cell started.
    pub witnesses: Vec<String>,
    #[serde(skip_serializing_if = "String::is_empty", default)]
    pub note: String,
    /// The hot-key checker on a table with an index: how the index caught
    /// up with the items (lag), apart from entries still wrong (violations).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub index: Option<IndexLag>,
}

impl CheckResult {
    /// Checker `name`, which judges what `judges` says, could not decide.
    pub fn unknown(name: &str, judges: &str, note: String) -> CheckResult {
        CheckResult {
            checker: name.into(),
            status: CheckStatus::Unknown,
            checked: 0,
            judged: judges.into(),
            violations: 0,
            witnesses: vec![],
            note,
            index: None,
        }
    }

    /// Checker `name` judged `checked` of what `judges` says and found
    /// `violations`.
    pub fn counted(name: &str, judges: &str, checked: u64, violations: u64, witnesses: Vec<String>) -> CheckResult {
        let status = if violations == 0 { CheckStatus::Ok } else { CheckStatus::Violated };
        CheckResult {
            checker: name.into(),
            status,
            checked,
            judged: judges.into(),
            violations,
            witnesses,
            note: String::new(),
            index: None,
        }
    }
}

/// How a table's index caught up with the items the cell left: entries
/// that agreed only when read again (the index is updated after the table)
/// are lag; entries still wrong when the settle window ended are
/// violations, counted with the others.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IndexLag {
    /// Keys whose index entries were judged.
    pub entries: u64,
    /// Of those, the ones that agreed with their item only on a later read.
    pub settled_late: u64,
    /// The longest a late one took to agree, from its first read, in ms.
    pub longest_settle_ms: f64,
    /// Entries still wrong when the window ended.
    pub still_wrong: u64,
    /// The settle window (`table.index.settle`), in ms.
    pub window_ms: f64,
}

impl IndexLag {
    pub fn describe(&self) -> String {
        let secs = |ms: f64| crate::units::format_duration(Duration::from_secs_f64(ms / 1e3));
        let late = match self.settled_late {
            0 => "none lagged".to_string(),
            n => format!(
                "{n} lagged (matched their item late, longest after {}: lag, not loss)",
                secs(self.longest_settle_ms)
            ),
        };
        format!(
            "index: {} entries, {late}, {} still wrong after the {} settle window",
            self.entries,
            self.still_wrong,
            secs(self.window_ms)
        )
    }
}

/// How many of some writes, and the first and last of their
/// acknowledgements (seconds into the measured window; negative: during the
/// warm-up).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub count: u64,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub first_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub last_s: Option<f64>,
}

impl Spread {
    pub fn of(times_s: impl Iterator<Item = f64>) -> Spread {
        times_s.fold(Spread::default(), |s, t| Spread {
            count: s.count + 1,
            first_s: Some(s.first_s.map_or(t, |f| f.min(t))),
            last_s: Some(s.last_s.map_or(t, |l| l.max(t))),
        })
    }
}

/// One fault's share of the cell's lost writes: those acknowledged from its
/// request until the next fault's (the first fault also takes those before
/// it), and the demoted-primary spans first seen in that stretch.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LostWritesAround {
    pub lost: Spread,
    pub demoted_primaries: Vec<DemotedWrites>,
    /// This fault's lost writes acknowledged outside every demoted-primary span.
    pub outside_demoted: Spread,
}

/// A demoted-primary span with what was acknowledged in it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DemotedWrites {
    #[serde(flatten)]
    pub span: DemotedPrimary,
    /// Writes acknowledged (by any member) inside the span.
    pub acked_writes: u64,
    /// Lost writes acknowledged inside the span.
    pub lost: Spread,
}
