//! Fault targets inside a target of several members, as a spec writes
//! them: by role (`kv.primary`, `kv.replicas`, `kv.any`, `kv.member[1]`,
//! `kv.sentinels[0]`) or by a member's name (`kv-1`, `kv-sentinels-2`),
//! checked against the spec's targets that have members (docker targets,
//! and process targets of a kind whose members share a host). Resolving a
//! role to a member happens at run time, by asking the servers
//! (`faultline_kind::topology::resolve`).

use crate::{ProviderKind, Spec};

/// What a selector picks within a target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selector {
    /// The member(s) that say they are primary now.
    Primary,
    /// The members that say they are replicas now.
    Replicas,
    /// Every member.
    Members,
    /// Member i by position (`member[i]`, or its name `kv-i`).
    Member(usize),
    /// One member, whatever its role, chosen by the spec's seed and the
    /// fault's name ([`pick`]).
    Any,
    /// Every container of a companion group.
    Group(String),
    /// Container i of a companion group (`sentinels[i]`, or `kv-sentinels-i`).
    GroupMember(String, usize),
}

/// A selector and the target it applies to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    pub target: String,
    pub selector: Selector,
}

impl std::fmt::Display for Selection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let t = &self.target;
        match &self.selector {
            Selector::Primary => write!(f, "{t}.primary"),
            Selector::Replicas => write!(f, "{t}.replicas"),
            Selector::Members => write!(f, "{t}.members"),
            Selector::Member(i) => write!(f, "{t}.member[{i}]"),
            Selector::Any => write!(f, "{t}.any"),
            Selector::Group(g) => write!(f, "{t}.{g}"),
            Selector::GroupMember(g, i) => write!(f, "{t}.{g}[{i}]"),
        }
    }
}

/// Which member `kv.any` picks for the fault named `fault` (FNV-1a of the
/// spec's seed and the name): the same one on every run of the spec.
pub fn pick(seed: u64, fault: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in seed.to_le_bytes().iter().chain(fault.as_bytes()) {
        hash = (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// Whether `t` has members a selector can name: a docker target's
/// containers, or a process target of several members side by side
/// (its `members` is filled at load for kinds whose members share a host).
pub fn has_members(t: &crate::TargetSpec) -> bool {
    match t.provider {
        ProviderKind::Docker => true,
        ProviderKind::Process => t.members.is_some(),
        ProviderKind::External => false,
    }
}

/// The member name of member `index` of `target`.
pub fn member_name(target: &str, index: usize) -> String {
    format!("{target}-{index}")
}

/// The name of container `index` of a companion group.
pub fn companion_name(target: &str, group: &str, index: usize) -> String {
    format!("{target}-{group}-{index}")
}

/// Parses `kv.primary` (or `kv.leader`), `kv.replicas` (or `kv.secondaries`,
/// `kv.followers`), `kv.members`, `kv.member[1]`, `kv.any`,
/// `kv.sentinels`, `kv.sentinels[2]`, or a member's name (`kv-1`,
/// `kv-sentinels-2`), and checks it against the spec's targets that have
/// members. The error is a message for a spec error at the selector's field.
pub fn parse_selector(text: &str, spec: &Spec) -> Result<Selection, String> {
    let text = text.trim();
    let with_members: Vec<&String> = spec.targets.iter().filter(|(_, t)| has_members(t)).map(|(n, _)| n).collect();
    let Some((target, rest)) = text.split_once('.') else {
        // A bare name: find the container it names.
        for name in &with_members {
            let t = &spec.targets[*name];
            for i in 0..t.members.unwrap_or(1) as usize {
                if member_name(name, i) == text {
                    return Ok(Selection { target: name.to_string(), selector: Selector::Member(i) });
                }
            }
            for (group, c) in &t.companions {
                for i in 0..c.count as usize {
                    if companion_name(name, group, i) == text {
                        return Ok(Selection {
                            target: name.to_string(),
                            selector: Selector::GroupMember(group.clone(), i),
                        });
                    }
                }
            }
        }
        return Err(format!(
            "`{text}` names no container: write TARGET.primary, TARGET.replicas, TARGET.members, TARGET.member[i], \
             TARGET.GROUP[i] or a container's name such as `kv-1`"
        ));
    };
    let Some(t) = spec.targets.get(target) else {
        let known: Vec<&str> = spec.targets.keys().map(String::as_str).collect();
        return Err(format!("`{text}`: no target named `{target}` (defined: {})", known.join(", ")));
    };
    if !has_members(t) {
        return Err(format!("`{text}`: target `{target}` runs one server, so it has no members to select"));
    }
    let (word, index) = match rest.split_once('[') {
        Some((w, i)) => {
            let i = i
                .strip_suffix(']')
                .and_then(|i| i.trim().parse::<usize>().ok())
                .ok_or_else(|| format!("`{text}`: write an index as `[0]`, `[1]`, …"))?;
            (w, Some(i))
        }
        None => (rest, None),
    };
    let members = t.members.unwrap_or(1) as usize;
    let selector = match (word, index) {
        // Raft (etcd) calls them the leader and its followers.
        ("primary" | "leader", None) => Selector::Primary,
        // MongoDB calls them secondaries.
        ("replicas" | "secondaries" | "followers", None) => Selector::Replicas,
        ("members", None) => Selector::Members,
        ("any", None) => Selector::Any,
        ("member", Some(i)) if i < members => Selector::Member(i),
        ("member", Some(i)) => {
            return Err(format!("`{text}`: target `{target}` has {members} member(s), numbered from 0; no member {i}"))
        }
        (g, i) if t.companions.contains_key(g) => match i {
            None => Selector::Group(g.to_string()),
            Some(i) if i < t.companions[g].count as usize => Selector::GroupMember(g.to_string(), i),
            Some(i) => {
                return Err(format!(
                    "`{text}`: companion group `{g}` has {} container(s), numbered from 0; no {i}",
                    t.companions[g].count
                ))
            }
        },
        _ => {
            let mut known =
                vec!["primary", "leader", "replicas", "secondaries", "followers", "members", "member[i]", "any"];
            known.extend(t.companions.keys().map(String::as_str));
            return Err(format!(
                "`{text}`: `{rest}` is not a role or group of `{target}` (known: {})",
                known.join(", ")
            ));
        }
    };
    Ok(Selection { target: target.to_string(), selector })
}
