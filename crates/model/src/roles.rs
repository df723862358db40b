//! Who was primary when, as results.json records it: each member's role
//! changes over a cell's window, and what follows from them alone: the
//! spans a demoted primary still answered as primary
//! ([`demoted_primaries`]), the spans with no primary ([`no_primary_spans`]),
//! which reads a member answered while it was not primary ([`judge_reads`])
//! and the per-second timeline the report draws ([`per_second`]). The
//! sampling that sees the changes, and which member answered each read, are
//! the engine's.

use serde::{Deserialize, Serialize};

/// A member's role from `at_s` (seconds into the measured window) on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoleChange {
    /// The sample that saw the new role.
    pub at_s: f64,
    /// The sample before it, which still saw the old role (equal to `at_s`
    /// for the first sample): the change happened in between.
    #[serde(default)]
    pub previous_sample_s: f64,
    pub member: String,
    /// `primary`, `replica`, `replica (link down)`, `unreachable`, or what
    /// the server said.
    pub role: String,
}

/// A span in which a member still said it was primary while another member,
/// promoted after it, was primary too: a demoted primary that may go on
/// acknowledging writes its successor never receives. Seconds into the
/// measured window; the edges are widened to the samples around them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DemotedPrimary {
    pub member: String,
    /// The member promoted after it.
    pub successor: String,
    /// Earliest the span can have begun: the last sample before it was seen.
    pub from_s: f64,
    /// The first sample that saw it.
    pub seen_s: f64,
    /// Latest it can have ended: the first sample that no longer saw it, or
    /// the end of the window.
    pub to_s: f64,
    /// Still so at the end of the window: it lasted past `to_s`, until the
    /// Sentinels or the cell's end changed it.
    #[serde(default)]
    pub open_at_end: bool,
}

impl DemotedPrimary {
    /// Whether `t_s` (seconds into the window) falls inside the span.
    pub fn contains(&self, t_s: f64) -> bool {
        t_s >= self.from_s && (self.open_at_end || t_s <= self.to_s)
    }
}

/// The spans in which some member said `primary` while another member whose
/// primacy began later said so too (or last said so, if it is unreachable
/// for a sample). A member that was primary, turned unreachable and came back
/// primary (paused, killed and restarted) keeps its old, earlier primacy: it
/// is the stale one, not the member promoted while it was away. Two members
/// already primary at the first sample (a split left by an earlier cell)
/// give no span: which of them is stale is not known.
pub fn demoted_primaries(changes: &[RoleChange], window_s: f64) -> Vec<DemotedPrimary> {
    #[derive(Default, Clone)]
    struct State<'a> {
        now: Option<&'a str>,
        /// The last role other than unreachable.
        known: Option<&'a str>,
        primary_since: f64,
    }
    let mut members: Vec<&str> = Vec::new();
    for c in changes {
        if !members.contains(&c.member.as_str()) {
            members.push(&c.member);
        }
    }
    let mut state: Vec<State> = vec![State::default(); members.len()];
    // (member, successor, from_s, seen_s) of each span still open.
    let mut open: Vec<(usize, usize, f64, f64)> = Vec::new();
    let mut spans = Vec::new();
    let mut i = 0;
    while i < changes.len() {
        // One sample's changes share its time.
        let (at_s, previous_s) = (changes[i].at_s, changes[i].previous_sample_s);
        while i < changes.len() && changes[i].at_s == at_s {
            let c = &changes[i];
            let m = members.iter().position(|n| *n == c.member).expect("collected above");
            let s = &mut state[m];
            if c.role == "primary" && s.known != Some("primary") {
                s.primary_since = at_s;
            }
            s.now = Some(&c.role);
            if c.role != "unreachable" {
                s.known = Some(&c.role);
            }
            i += 1;
        }
        // Who is a demoted primary after this sample, and of whom.
        let demoted: Vec<(usize, usize)> = (0..members.len())
            .filter(|&m| state[m].now == Some("primary"))
            .filter_map(|m| {
                (0..members.len())
                    .filter(|&n| {
                        n != m && state[n].known == Some("primary") && state[n].primary_since > state[m].primary_since
                    })
                    .max_by(|&a, &b| state[a].primary_since.total_cmp(&state[b].primary_since))
                    .map(|n| (m, n))
            })
            .collect();
        open.retain(|&(m, n, from_s, seen_s)| {
            let goes_on = demoted.contains(&(m, n));
            if !goes_on {
                spans.push(span(&members, (m, n), (from_s, seen_s, at_s), false));
            }
            goes_on
        });
        for (m, n) in demoted {
            if !open.iter().any(|o| (o.0, o.1) == (m, n)) {
                open.push((m, n, previous_s, at_s));
            }
        }
    }
    for (m, n, from_s, seen_s) in open {
        spans.push(span(&members, (m, n), (from_s, seen_s, window_s.max(seen_s)), true));
    }
    spans.sort_by(|a, b| a.from_s.total_cmp(&b.from_s));
    spans
}

fn span(
    members: &[&str],
    (m, n): (usize, usize),
    (from_s, seen_s, to_s): (f64, f64, f64),
    open_at_end: bool,
) -> DemotedPrimary {
    DemotedPrimary { member: members[m].into(), successor: members[n].into(), from_s, seen_s, to_s, open_at_end }
}

/// A stretch in which every member answered and none said it was primary,
/// seconds into the window, from the first sample that saw it to the last
/// sample that still did: a conservative span (no primary was seen at any
/// sample inside it; a primacy shorter than the sampling could hide between two).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NoPrimarySpan {
    pub from_s: f64,
    pub to_s: f64,
    /// Each member's role in it, e.g. `db: replica (link down)`.
    pub roles: String,
}

/// The spans in which every member's last answer was a role other than
/// primary (an unreachable member may still be primary: it ends a span).
/// `last_sample_s`: when the sampling last looked, which ends a span still open.
pub fn no_primary_spans(changes: &[RoleChange], last_sample_s: f64) -> Vec<NoPrimarySpan> {
    let mut members: Vec<(&str, &str)> = Vec::new();
    let mut spans = Vec::new();
    let mut open: Option<(f64, String)> = None;
    let mut i = 0;
    while i < changes.len() {
        let (at_s, previous_s) = (changes[i].at_s, changes[i].previous_sample_s);
        while i < changes.len() && changes[i].at_s == at_s {
            let c = &changes[i];
            match members.iter_mut().find(|(m, _)| *m == c.member) {
                Some(m) => m.1 = &c.role,
                None => members.push((&c.member, &c.role)),
            }
            i += 1;
        }
        let none_primary = members.iter().all(|(_, r)| *r != "primary" && *r != "unreachable");
        let roles = members.iter().map(|(m, r)| format!("{m}: {r}")).collect::<Vec<_>>().join(", ");
        match (&open, none_primary) {
            (None, true) => open = Some((at_s, roles)),
            (Some(_), false) => {
                let (from_s, roles) = open.take().expect("open");
                spans.push(NoPrimarySpan { from_s, to_s: previous_s, roles });
            }
            // Still no primary, each member perhaps in another such role.
            (Some(_), true) | (None, false) => {}
        }
    }
    if let Some((from_s, roles)) = open {
        spans.push(NoPrimarySpan { from_s, to_s: last_sample_s.max(from_s), roles });
    }
    spans
}

/// Reads under a read concern that needs the primary, judged against the
/// role timeline ([`judge_reads`]): a read that names the member that
/// answered it is judged by that member's own role, the others by whether
/// any member was primary at all.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NonPrimaryReads {
    /// The read concern the cell's reads were under, e.g. `linearizable`.
    pub read_concern: String,
    /// Whether it requires the primary to answer; when not, nothing is judged.
    pub requires_primary: bool,
    /// Which rule judged the reads (results.json before attribution: `timeline_only`).
    #[serde(default)]
    pub rule: ReadRuleUsed,
    /// Successful reads judged (every one the cell recorded).
    pub judged: u64,
    /// Of those, reads that named the member that answered them (its
    /// address on the role timeline), judged by that member's role.
    #[serde(default)]
    pub attributed: u64,
    /// Of `judged`, answered by a member that was not primary: by the
    /// member's own role where the read names it, else while no member was
    /// primary.
    pub count: u64,
    /// Of `count`, answered by a member that still said it was primary after
    /// another member had been promoted (a demoted primary).
    #[serde(default)]
    pub demoted: u64,
    /// When no member was primary.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub spans: Vec<NoPrimarySpan>,
    /// The first few of them, e.g. `get answered 3.412 s into the window by
    /// db-1 (took 1.20 ms) while it was replica (sampled 3.25–3.50 s)`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub examples: Vec<String>,
}

/// The rule that judged a cell's reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReadRuleUsed {
    /// No read named its member: each was judged by whether any member was
    /// primary (a kind whose driver does not say who answered).
    #[default]
    TimelineOnly,
    /// Every read named the member that answered it.
    Attributed,
    /// Some reads named their member and some did not (an address the
    /// role timeline has no member for).
    Mixed,
}

impl ReadRuleUsed {
    pub fn as_str(self) -> &'static str {
        match self {
            ReadRuleUsed::TimelineOnly => "timeline only",
            ReadRuleUsed::Attributed => "attributed",
            ReadRuleUsed::Mixed => "mixed",
        }
    }
}

/// One successful read, as the engine kept it: sent at `start_s`, answered
/// by `end_s` (seconds into the window, the end rounded up to the
/// millisecond the samples keep) and by `member` when the driver said which
/// member answered and the role timeline names that member.
#[derive(Debug, Clone, Copy)]
pub struct Read<'a> {
    pub start_s: f64,
    pub end_s: f64,
    /// When it was answered, as the examples say it.
    pub answered_s: f64,
    pub latency_ms: f64,
    pub member: Option<&'a str>,
}

/// How many flagged reads the results give as examples.
const EXAMPLES: usize = 3;

/// Judges `reads` under `read_concern` against the role changes
/// (`last_sample_s`: when the sampling last looked; `window_s`: the window's
/// length). A read that names its member is flagged when it was sent and
/// answered wholly inside a stretch in which every sample of that member saw
/// it in a role other than primary (replica, replica with its link down, or
/// what else it said; an unreachable sample says nothing of its role: the
/// member answered the read, so it may have been primary), or inside a span
/// in which it still said primary after another member's promotion, between
/// the first sample that saw both and the last that still did. A read without
/// its member is flagged when answered wholly inside a span with no primary.
/// Every edge is a sample that saw the role, so a flagged read is certain and
/// a read across an unsampled change is not flagged.
pub fn judge_reads<'a>(
    read_concern: &str,
    requires_primary: bool,
    reads: impl Iterator<Item = Read<'a>>,
    changes: &[RoleChange],
    last_sample_s: f64,
    window_s: f64,
) -> NonPrimaryReads {
    let spans = no_primary_spans(changes, last_sample_s);
    let mut judged = NonPrimaryReads {
        read_concern: read_concern.to_string(),
        requires_primary,
        rule: ReadRuleUsed::TimelineOnly,
        judged: 0,
        attributed: 0,
        count: 0,
        demoted: 0,
        spans: Vec::new(),
        examples: Vec::new(),
    };
    if !requires_primary {
        judged.spans = spans;
        return judged;
    }
    let runs = not_primary_runs(changes, last_sample_s);
    let demoted: Vec<(DemotedPrimary, f64)> = demoted_primaries(changes, window_s)
        .into_iter()
        .map(|d| {
            // The last sample that still saw it: the one before the sample
            // that no longer did, or the last sample of all.
            let last_seen_s = match d.open_at_end {
                true => last_sample_s,
                false => changes.iter().find(|c| c.at_s == d.to_s).map_or(d.seen_s, |c| c.previous_sample_s),
            };
            (d, last_seen_s)
        })
        .collect();
    let on_timeline = |m: &str| changes.iter().any(|c| c.member == m);
    // Why a read was counted: the member's stretch in another role, its
    // span as a demoted primary, or the span with no primary (indices).
    enum Why {
        NotPrimary(usize),
        Demoted(usize),
        NoPrimary(usize),
    }
    // (the read, why) of each read counted; the examples are worded last.
    let mut counted: Vec<(Read, Why)> = Vec::new();
    for read in reads {
        judged.judged += 1;
        let inside = |from: f64, to: f64| read.start_s >= from && read.end_s <= to;
        let why = match read.member.filter(|m| on_timeline(m)) {
            Some(member) => {
                judged.attributed += 1;
                let not_primary = runs.iter().position(|r| r.member == member && inside(r.from_s, r.to_s));
                let stale = || demoted.iter().position(|(d, last)| d.member == member && inside(d.seen_s, *last));
                not_primary.map(Why::NotPrimary).or_else(|| stale().map(Why::Demoted))
            }
            None => spans.iter().position(|s| inside(s.from_s, s.to_s)).map(Why::NoPrimary),
        };
        if let Some(why) = why {
            judged.count += 1;
            judged.demoted += u64::from(matches!(why, Why::Demoted(_)));
            counted.push((read, why));
        }
    }
    counted.sort_by(|a, b| a.0.answered_s.total_cmp(&b.0.answered_s));
    judged.examples = counted
        .iter()
        .take(EXAMPLES)
        .map(|(read, why)| {
            let (at, took) = (read.answered_s, read.latency_ms);
            let by = read.member.unwrap_or_default();
            match *why {
                Why::NotPrimary(i) => format!(
                    "get answered {at:.3} s into the window by {by} (took {took:.2} ms) while it was {} (sampled {:.2}–{:.2} s)",
                    runs[i].roles, runs[i].from_s, runs[i].to_s
                ),
                Why::Demoted(i) => format!(
                    "get answered {at:.3} s into the window by {by} (took {took:.2} ms) while it was a demoted primary: {} promoted by {:.2} s, {by} still primary until {:.2} s",
                    demoted[i].0.successor, demoted[i].0.seen_s, demoted[i].1
                ),
                Why::NoPrimary(i) => format!(
                    "get answered {at:.3} s into the window (took {took:.2} ms) while no member was primary ({}, sampled {:.2}–{:.2} s)",
                    spans[i].roles, spans[i].from_s, spans[i].to_s
                ),
            }
        })
        .collect();
    judged.rule = match (judged.attributed, judged.judged - judged.attributed) {
        (0, _) => ReadRuleUsed::TimelineOnly,
        (_, 0) => ReadRuleUsed::Attributed,
        _ => ReadRuleUsed::Mixed,
    };
    judged.spans = spans;
    judged
}

/// A stretch in which every sample of `member` saw it answer in a role other
/// than primary, from the first such sample to the last.
#[derive(Debug, Clone, PartialEq)]
struct NotPrimaryRun<'a> {
    member: &'a str,
    from_s: f64,
    to_s: f64,
    /// The roles it said, e.g. `replica (link down)`, or `replica, then replica (link down)`.
    roles: String,
}

/// Each member's stretches of answered roles other than primary; one
/// ends at the last sample before its member said primary or did not
/// answer, or at the last sample of all.
fn not_primary_runs(changes: &[RoleChange], last_sample_s: f64) -> Vec<NotPrimaryRun<'_>> {
    let mut runs = Vec::new();
    let mut open: Vec<NotPrimaryRun> = Vec::new();
    for c in changes {
        let ended = open.iter().position(|r| r.member == c.member);
        let not_primary = c.role != "primary" && c.role != "unreachable";
        match (ended, not_primary) {
            // Another role that is not primary: the stretch goes on.
            (Some(i), true) => open[i].roles = format!("{}, then {}", open[i].roles, c.role),
            (Some(i), false) => {
                let mut run = open.swap_remove(i);
                run.to_s = c.previous_sample_s;
                runs.push(run);
            }
            (None, true) => {
                open.push(NotPrimaryRun { member: &c.member, from_s: c.at_s, to_s: c.at_s, roles: c.role.clone() })
            }
            (None, false) => {}
        }
    }
    for mut run in open {
        run.to_s = last_sample_s.max(run.from_s);
        runs.push(run);
    }
    runs
}

/// One line per member, one letter per second of the window: the role it
/// had for most of that second (P primary, R replica, r replica with its
/// link down, x unreachable, ? anything else), e.g. `PPPxxxRRRR`.
pub fn per_second(changes: &[RoleChange], window_s: f64) -> Vec<(String, String)> {
    let mut members: Vec<&str> = Vec::new();
    for c in changes {
        if !members.contains(&c.member.as_str()) {
            members.push(&c.member);
        }
    }
    let seconds = window_s.ceil() as usize;
    members
        .into_iter()
        .map(|m| {
            let mine: Vec<&RoleChange> = changes.iter().filter(|c| c.member == m).collect();
            let line = (0..seconds)
                .map(|s| {
                    // The role in force at the middle of the second.
                    let t = s as f64 + 0.5;
                    let role = mine.iter().rev().find(|c| c.at_s <= t).or(mine.first()).map(|c| c.role.as_str());
                    match role {
                        Some("primary") => 'P',
                        Some("replica") => 'R',
                        Some("replica (link down)") => 'r',
                        Some("unreachable") => 'x',
                        _ => '?',
                    }
                })
                .collect();
            (m.to_string(), line)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(at_s: f64, member: &str, role: &str) -> RoleChange {
        RoleChange { at_s, previous_sample_s: (at_s - 0.25).max(0.0), member: member.into(), role: role.into() }
    }

    #[test]
    fn a_primary_still_primary_after_another_was_promoted_is_a_demoted_primary() {
        // A graceful failover: kv-2 promoted at 11.0 s, kv-0 demoted at 14.9 s.
        let graceful = [
            change(0.0, "kv-0", "primary"),
            change(0.0, "kv-1", "replica"),
            change(0.0, "kv-2", "replica"),
            change(11.0, "kv-2", "primary"),
            change(14.5, "kv-1", "replica (link down)"),
            change(14.9, "kv-0", "replica"),
        ];
        let spans = demoted_primaries(&graceful, 15.0);
        let expected = DemotedPrimary {
            member: "kv-0".into(),
            successor: "kv-2".into(),
            from_s: 10.75,
            seen_s: 11.0,
            to_s: 14.9,
            open_at_end: false,
        };
        assert_eq!(spans, std::slice::from_ref(&expected));
        assert!(expected.contains(10.75) && expected.contains(14.9) && !expected.contains(14.91));
        // Never demoted within the window: the span runs past its end.
        let open = DemotedPrimary { to_s: 15.0, open_at_end: true, ..expected };
        assert_eq!(demoted_primaries(&graceful[..4], 15.0), std::slice::from_ref(&open));
        assert!(open.contains(15.2), "acknowledged after the window by ops it was still waiting for");
        // A killed primary restarted as an empty primary is the stale one,
        // though it said `primary` last; a frozen primary that thaws with no
        // one promoted meanwhile is no one's demoted primary.
        let killed = [
            change(0.0, "kv-0", "primary"),
            change(0.0, "kv-1", "replica"),
            change(10.0, "kv-0", "unreachable"),
            change(12.5, "kv-1", "primary"),
            change(13.0, "kv-1", "unreachable"),
            change(13.25, "kv-1", "primary"),
            change(14.0, "kv-0", "primary"),
            change(16.0, "kv-0", "replica"),
        ];
        let spans = demoted_primaries(&killed, 20.0);
        assert_eq!(spans.len(), 1, "{spans:?}");
        assert_eq!((spans[0].member.as_str(), spans[0].successor.as_str()), ("kv-0", "kv-1"));
        assert_eq!((spans[0].from_s, spans[0].to_s), (13.75, 16.0));
        let frozen =
            [change(0.0, "kv-0", "primary"), change(3.5, "kv-0", "unreachable"), change(4.5, "kv-0", "primary")];
        assert!(demoted_primaries(&frozen, 10.0).is_empty());
    }

    #[test]
    fn no_primary_spans_run_between_the_samples_that_saw_none() {
        // A one-member set steps down at ~2 s and is primary again at ~5.25 s.
        let changes =
            [change(0.0, "db", "primary"), change(2.25, "db", "replica (link down)"), change(5.25, "db", "primary")];
        let spans = no_primary_spans(&changes, 9.75);
        assert_eq!(spans, [NoPrimarySpan { from_s: 2.25, to_s: 5.0, roles: "db: replica (link down)".into() }]);
        // Never primary again: open until the last sample.
        assert_eq!(no_primary_spans(&changes[..2], 9.75)[0].to_s, 9.75);
        // An unreachable member may still be primary: no span while it is.
        let set = [
            change(0.0, "m0", "primary"),
            change(0.0, "m1", "replica"),
            change(3.0, "m0", "unreachable"),
            change(3.0, "m1", "replica (link down)"),
            change(4.0, "m0", "replica"),
            change(6.0, "m1", "primary"),
        ];
        let spans = no_primary_spans(&set, 8.0);
        assert_eq!(spans.len(), 1, "{spans:?}");
        assert_eq!((spans[0].from_s, spans[0].to_s), (4.0, 5.75));
    }

    fn read(start_s: f64, end_s: f64, member: Option<&str>) -> Read<'_> {
        Read { start_s, end_s, answered_s: end_s, latency_ms: (end_s - start_s) * 1e3, member }
    }

    #[test]
    fn a_read_is_judged_by_the_role_of_the_member_that_answered_it() {
        // db-0 primary; db-1 replica; db-1 promoted at 5.0 s while db-0
        // still says primary until 7.0 s (a dual primary); db-0 then replica.
        let changes = [
            change(0.0, "db-0", "primary"),
            change(0.0, "db-1", "replica"),
            change(5.0, "db-1", "primary"),
            change(7.0, "db-0", "replica"),
            change(8.0, "db-0", "unreachable"),
        ];
        let reads = [
            read(1.0, 1.1, Some("db-0")), // the primary: not flagged
            read(2.0, 2.1, Some("db-1")), // a replica: flagged
            read(4.9, 5.1, Some("db-1")), // across db-1's promotion: its role is not known throughout
            read(5.5, 5.6, Some("db-0")), // db-0 after db-1's promotion: a demoted primary
            read(5.5, 5.6, Some("db-1")), // the new primary: not flagged
            read(7.2, 7.3, Some("db-0")), // db-0 a replica now: flagged
            read(8.5, 8.6, Some("db-0")), // unreachable to the sampler: its role is unknown
            read(2.0, 2.1, None),         // no member named, and db-0 was primary: not flagged
            read(2.0, 2.1, Some("db-9")), // an address the timeline has no member for: the same
        ];
        let judged = judge_reads("linearizable", true, reads.into_iter(), &changes, 9.75, 10.0);
        assert_eq!((judged.judged, judged.attributed, judged.count, judged.demoted), (9, 7, 3, 1), "{judged:?}");
        assert_eq!(judged.rule, ReadRuleUsed::Mixed);
        assert_eq!(
            judged.examples,
            [
                "get answered 2.100 s into the window by db-1 (took 100.00 ms) while it was replica (sampled 0.00–4.75 s)",
                "get answered 5.600 s into the window by db-0 (took 100.00 ms) while it was a demoted primary: db-1 promoted by 5.00 s, db-0 still primary until 6.75 s",
                "get answered 7.300 s into the window by db-0 (took 100.00 ms) while it was replica (sampled 7.00–7.75 s)",
            ]
        );
        // Nothing attributed: a one-member set stepped down, judged by the
        // spans with no primary alone.
        let one =
            [change(0.0, "db", "primary"), change(2.25, "db", "replica (link down)"), change(5.25, "db", "primary")];
        let judged = judge_reads("linearizable", true, [read(3.0, 3.1, None)].into_iter(), &one, 9.75, 10.0);
        assert_eq!((judged.rule, judged.count, judged.attributed), (ReadRuleUsed::TimelineOnly, 1, 0));
        assert!(
            judged.examples[0].ends_with("while no member was primary (db: replica (link down), sampled 2.25–5.00 s)")
        );
        // The same read named by its member: the member's own role judges it.
        let judged = judge_reads("linearizable", true, [read(3.0, 3.1, Some("db"))].into_iter(), &one, 9.75, 10.0);
        assert_eq!((judged.rule, judged.count, judged.attributed), (ReadRuleUsed::Attributed, 1, 1));
        // A read concern that does not need the primary judges nothing.
        let judged = judge_reads("majority", false, [read(3.0, 3.1, Some("db"))].into_iter(), &one, 9.75, 10.0);
        assert_eq!((judged.judged, judged.count, judged.spans.len()), (0, 0, 1));
    }

    #[test]
    fn results_before_attribution_still_read() {
        let old = r#"{"read_concern":"linearizable","requires_primary":true,"judged":10,"count":2}"#;
        let reads: NonPrimaryReads = serde_json::from_str(old).unwrap();
        assert_eq!((reads.rule, reads.attributed, reads.demoted), (ReadRuleUsed::TimelineOnly, 0, 0));
    }

    #[test]
    fn changes_become_one_letter_per_second() {
        let changes = [
            change(0.0, "kv-0", "primary"),
            change(0.0, "kv-1", "replica"),
            change(2.1, "kv-0", "unreachable"),
            change(3.3, "kv-1", "primary"),
            change(4.2, "kv-0", "replica (link down)"),
            change(5.0, "kv-0", "replica"),
        ];
        let lines = per_second(&changes, 6.0);
        assert_eq!(lines, [("kv-0".to_string(), "PPxxrR".to_string()), ("kv-1".to_string(), "RRRPPP".to_string())]);
    }
}

/// A member's role, as the member itself reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// Accepts writes.
    Primary,
    /// Follows a primary; `linked` when its replication link is up.
    Replica { linked: bool },
    /// Anything else the server said (e.g. a Sentinel, an arbiter).
    Other(String),
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Role::Primary => write!(f, "primary"),
            Role::Replica { linked: true } => write!(f, "replica (link up)"),
            Role::Replica { linked: false } => write!(f, "replica (link down)"),
            Role::Other(s) => write!(f, "{s}"),
        }
    }
}
