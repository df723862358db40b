//! What a checker's verdict looks like in results.json: the checkers a spec
//! can name and what each judges, a check's result with its witnesses,
//! how an index caught up ([`IndexLag`]) and where lost writes fall
//! against the demoted-primary spans ([`LostWritesAround`]). The checkers
//! themselves live in the runner's `checker` module.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::ops::OpKind;
use crate::roles::DemotedPrimary;

/// The checkers a spec can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum CheckerName {
    /// A read that started after a write to its key was acknowledged must not
    /// return an older value.
    StaleReadAfterAck,
    /// After the run, every acknowledged write is in the final state or
    /// superseded by a later write.
    LostAcknowledgedWrite,
    /// Each key's final value is exactly one write's whole value.
    FinalState,
    /// The history of each key is linearizable (gets and puts).
    Linearizability,
    /// Many writers on one key: the old images the writes returned form one
    /// serial chain ending at the stored item, which is one write's whole
    /// item with exactly one matching index entry.
    HotKey,
}

impl CheckerName {
    pub fn as_str(self) -> &'static str {
        match self {
            CheckerName::StaleReadAfterAck => "stale-read-after-ack",
            CheckerName::LostAcknowledgedWrite => "lost-acknowledged-write",
            CheckerName::FinalState => "final-state",
            CheckerName::Linearizability => "linearizability",
            CheckerName::HotKey => "hot-key",
        }
    }

    /// What the checker's `checked` counts: the things that could have
    /// shown a violation. None of them judged, and the checker has passed
    /// nothing (a register history without reads is trivially linearizable).
    pub fn judges(self) -> &'static str {
        match self {
            CheckerName::StaleReadAfterAck => "reads after an acknowledged write to their key",
            CheckerName::LostAcknowledgedWrite => "acknowledged writes",
            CheckerName::FinalState => "stored values",
            CheckerName::Linearizability => "reads of written keys",
            CheckerName::HotKey => "written keys",
        }
    }

    /// Whether a workload that sends these op kinds can give the checker
    /// anything to judge, and if not, what it lacks.
    pub fn lacks(self, sends: impl Fn(OpKind) -> bool) -> Option<&'static str> {
        let writes = sends(OpKind::Set);
        let reads = sends(OpKind::Get);
        match self {
            CheckerName::StaleReadAfterAck | CheckerName::Linearizability if !reads => {
                Some("the workload sends no get, so there is no read to judge")
            }
            CheckerName::StaleReadAfterAck | CheckerName::Linearizability if !writes => {
                Some("the workload sends no set, so no read can be judged against a write")
            }
            CheckerName::LostAcknowledgedWrite | CheckerName::FinalState if !writes => {
                Some("the workload sends no set, so there is no write to judge")
            }
            CheckerName::HotKey
                if !OpKind::ALL.iter().any(|k| (k.writes_value() || *k == OpKind::Del) && sends(*k)) =>
            {
                Some("the workload sends no write, so there is no key to judge")
            }
            _ => None,
        }
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
    /// How many it judged of what it judges ([`CheckerName::judges`]):
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
    pub fn unknown(name: CheckerName, note: String) -> CheckResult {
        CheckResult {
            checker: name.as_str().into(),
            status: CheckStatus::Unknown,
            checked: 0,
            judged: name.judges().into(),
            violations: 0,
            witnesses: vec![],
            note,
            index: None,
        }
    }

    pub fn counted(name: CheckerName, checked: u64, violations: u64, witnesses: Vec<String>) -> CheckResult {
        let status = if violations == 0 { CheckStatus::Ok } else { CheckStatus::Violated };
        CheckResult {
            checker: name.as_str().into(),
            status,
            checked,
            judged: name.judges().into(),
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
