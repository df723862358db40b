//! Who was primary when: during a cell with faults on a docker target, every
//! member is asked its role a few times a second, and each change is kept.
//! The report turns the changes into a per-second failover timeline (the
//! MongoDB seed's), and they tell e.g. whether a demoted primary went on
//! taking writes while another member was already primary: [`demoted_primaries`]
//! finds those spans, with edges as wide as the sampling leaves them.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::target::topology::Role;
use crate::topology::Topology;

/// How often every member is asked.
const EVERY: Duration = Duration::from_millis(250);

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

pub async fn watch(
    topology: Arc<Topology>,
    measure_from: Instant,
    stop_at: Instant,
    cancel: CancellationToken,
) -> Vec<RoleChange> {
    let mut changes: Vec<RoleChange> = Vec::new();
    let mut current: Vec<Option<String>> = vec![None; topology.members.len()];
    let mut previous_sample_s: Option<f64> = None;
    let mut tick = tokio::time::interval_at(measure_from, EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = cancel.cancelled() => break,
        }
        let asked_at = Instant::now();
        if asked_at >= stop_at {
            break;
        }
        // A member that does not answer within two sampling periods (paused,
        // cut off, stalled) reads as unreachable for this sample; the outer
        // bound covers the docker lookups around the asks. Ctrl-C and the end
        // of the window do not wait for an ask in progress.
        let ask = tokio::time::timeout(EVERY * 10, topology.roles_within(EVERY * 2));
        let roles = tokio::select! {
            r = ask => match r {
                Ok(r) => r,
                Err(_) => continue,
            },
            _ = cancel.cancelled() => break,
            _ = tokio::time::sleep_until(stop_at) => break,
        };
        let at_s = asked_at.saturating_duration_since(measure_from).as_secs_f64();
        let previous_s = previous_sample_s.replace(at_s).unwrap_or(at_s);
        for (i, (member, role)) in roles.into_iter().enumerate() {
            let role = match role {
                Ok(r) => name(&r),
                Err(_) => "unreachable".to_string(),
            };
            if current[i].as_ref() != Some(&role) {
                changes.push(RoleChange {
                    at_s,
                    previous_sample_s: previous_s,
                    member: member.name.clone(),
                    role: role.clone(),
                });
                current[i] = Some(role);
            }
        }
    }
    changes
}

fn name(role: &Role) -> String {
    match role {
        Role::Primary => "primary".into(),
        Role::Replica { linked: true } => "replica".into(),
        Role::Replica { linked: false } => "replica (link down)".into(),
        Role::Other(s) => s.clone(),
    }
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
