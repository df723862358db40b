//! Who was primary when: during a cell with faults on a target of several
//! members (containers, or a kind's processes side by side), every
//! member is asked its role a few times a second, and each change is kept
//! as a [`RoleChange`]. A target of one server (a process or external
//! MongoDB) has its one server sampled the same way, and so are cells whose
//! reads only the primary may answer (MongoDB's linearizable), faults or
//! not. Each sample also notes every member's address (`host:port`), so a
//! read whose driver names the address that answered it is judged by that
//! member's own role. What the changes tell (demoted primaries that went on
//! taking writes, spans without a primary, reads a non-primary answered) is
//! the model's `faultline_model::roles`; the sampling is here, in the
//! engine, because it asks the running members through their kind.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use faultline_kind::topology::{self, MemberSet, TopologyKind};
use faultline_model::roles::{Role, RoleChange};

/// How often every member is asked.
const EVERY: Duration = Duration::from_millis(250);

/// Whose roles are sampled.
pub enum Watched {
    /// A target's members, whichever provider started them.
    Members(Arc<dyn MemberSet>),
    /// The one server of a target, asked through its kind; `address` is the
    /// `host:port` its driver names it by, when the kind's driver names one.
    Server { name: String, uri: String, address: Option<String>, kind: Arc<dyn TopologyKind> },
}

impl Watched {
    fn len(&self) -> usize {
        match self {
            Watched::Members(set) => set.names().len(),
            Watched::Server { .. } => 1,
        }
    }

    /// Each member's name, address and role now.
    async fn roles_within(&self, limit: Duration) -> Vec<(String, Option<String>, anyhow::Result<Role>)> {
        match self {
            Watched::Members(set) => {
                let roles = topology::roles_within(set.as_ref(), limit).await;
                roles.into_iter().map(|m| (m.name, m.address, m.role)).collect()
            }
            Watched::Server { name, uri, address, kind } => {
                let role = kind.roles(std::slice::from_ref(uri), limit).await.pop();
                vec![(name.clone(), address.clone(), role.unwrap_or_else(|| Err(anyhow::anyhow!("not asked"))))]
            }
        }
    }
}

/// What the sampling saw: the role changes, and when the last sample was
/// taken (seconds into the window; the roles held from the last change until then).
#[derive(Debug, Default)]
pub struct Sampled {
    pub changes: Vec<RoleChange>,
    pub last_sample_s: f64,
    /// (address, member) for every address a member was asked at (a
    /// container's can change when it is reconnected).
    pub addresses: Vec<(String, String)>,
}

pub async fn watch(watched: Watched, measure_from: Instant, stop_at: Instant, cancel: CancellationToken) -> Sampled {
    let mut changes: Vec<RoleChange> = Vec::new();
    let mut addresses: Vec<(String, String)> = Vec::new();
    let mut current: Vec<Option<String>> = vec![None; watched.len()];
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
        let ask = tokio::time::timeout(EVERY * 10, watched.roles_within(EVERY * 2));
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
        for (i, (member, address, role)) in roles.into_iter().enumerate() {
            if let Some(a) = address.filter(|a| !addresses.iter().any(|(seen, m)| seen == a && *m == member)) {
                addresses.push((a, member.clone()));
            }
            let role = match role {
                Ok(r) => name(&r),
                Err(_) => "unreachable".to_string(),
            };
            if current[i].as_ref() != Some(&role) {
                changes.push(RoleChange { at_s, previous_sample_s: previous_s, member, role: role.clone() });
                current[i] = Some(role);
            }
        }
    }
    Sampled { changes, last_sample_s: previous_sample_s.unwrap_or(0.0), addresses }
}

fn name(role: &Role) -> String {
    match role {
        Role::Primary => "primary".into(),
        Role::Replica { linked: true } => "replica".into(),
        Role::Replica { linked: false } => "replica (link down)".into(),
        Role::Other(s) => s.clone(),
    }
}
