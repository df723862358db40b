//! Who was primary when: during a cell with faults on a docker target, every
//! member is asked its role a few times a second, and each change is kept.
//! The report turns the changes into a per-second failover timeline (the
//! MongoDB seed's), and they tell e.g. whether a demoted primary went on
//! taking writes while another member was already primary.

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
    pub at_s: f64,
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
        for (i, (member, role)) in roles.into_iter().enumerate() {
            let role = match role {
                Ok(r) => name(&r),
                Err(_) => "unreachable".to_string(),
            };
            if current[i].as_ref() != Some(&role) {
                changes.push(RoleChange { at_s, member: member.name.clone(), role: role.clone() });
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
        RoleChange { at_s, member: member.into(), role: role.into() }
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
