//! Fault targets inside a multi-container target, as a spec writes them:
//! by role (`kv.primary`, `kv.replicas`, `kv.member[1]`, `kv.sentinels[0]`)
//! or by a container's name (`kv-1`, `kv-sentinels-2`), checked against
//! the spec's docker targets. Resolving a role to a container happens at
//! run time, by asking the servers (the runner's topology).

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
            Selector::Group(g) => write!(f, "{t}.{g}"),
            Selector::GroupMember(g, i) => write!(f, "{t}.{g}[{i}]"),
        }
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
/// `kv.followers`), `kv.members`, `kv.member[1]`,
/// `kv.sentinels`, `kv.sentinels[2]`, or a container's name (`kv-1`,
/// `kv-sentinels-2`), and checks it against the spec's docker targets. The
/// error is a message for a spec error at the selector's field.
pub fn parse_selector(text: &str, spec: &Spec) -> Result<Selection, String> {
    let text = text.trim();
    let docker_targets: Vec<&String> =
        spec.targets.iter().filter(|(_, t)| t.provider == ProviderKind::Docker).map(|(n, _)| n).collect();
    let Some((target, rest)) = text.split_once('.') else {
        // A bare name: find the container it names.
        for name in &docker_targets {
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
    if t.provider != ProviderKind::Docker {
        return Err(format!("`{text}`: target `{target}` is not a docker target, so it has no members to select"));
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
            let mut known = vec!["primary", "leader", "replicas", "secondaries", "followers", "members", "member[i]"];
            known.extend(t.companions.keys().map(String::as_str));
            return Err(format!(
                "`{text}`: `{rest}` is not a role or group of `{target}` (known: {})",
                known.join(", ")
            ));
        }
    };
    Ok(Selection { target: target.to_string(), selector })
}
