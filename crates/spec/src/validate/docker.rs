//! What makes a `provider: docker` target sound (docker.rs holds its parts).

use indexmap::IndexMap;

use crate::docker::{CommandLine, DiscoverySpec, ReadySpec, MAX_CONTAINERS, RESERVED_GROUPS};
use crate::problem::Problem;
use crate::target::TargetSpec;
use faultline_model::units::Size;

/// Checks a `provider: docker` target.
pub fn validate(at: &str, name: &str, t: &TargetSpec) -> Result<(), Problem> {
    if !is_host_label(name) {
        return Err((
            at.into(),
            format!(
                "a docker target's name becomes its containers' host names: use lower-case letters, digits and `-` \
                 (not at the ends), e.g. `kv`, not `{name}`"
            ),
        ));
    }
    if t.uri.is_some() {
        return Err((
            format!("{at}.uri"),
            "applies only to provider: external (docker targets get addresses from Docker)".into(),
        ));
    }
    match &t.image {
        None => {
            return Err((
                at.into(),
                "provider: docker needs `image`, e.g. faultline/redis:bookworm (build it with fixtures/images/build.sh redis)"
                    .into(),
            ))
        }
        Some(i) if i.trim().is_empty() => return Err((format!("{at}.image"), "must not be empty".into())),
        Some(_) => {}
    }
    if t.port == Some(0) {
        return Err((format!("{at}.port"), "must be a port from 1 to 65535".into()));
    }
    limits(at, &t.env, t.memory, t.cpus, &t.tmpfs)?;
    if let Some(r) = &t.ready {
        ready(&format!("{at}.ready"), r)?;
    }
    for (group, c) in &t.companions {
        let cat = format!("{at}.companions.{group}");
        if RESERVED_GROUPS.contains(&group.as_str()) {
            return Err((
                cat,
                format!(
                    "`{group}` is a role in selectors (`{name}.{group}`); name the group something else (reserved: {})",
                    RESERVED_GROUPS.join(", ")
                ),
            ));
        }
        if !is_host_label(group) {
            return Err((
                cat,
                format!(
                    "a companion group's name is part of its containers' host names (`{name}-{group}-0`): use \
                     lower-case letters, digits and `-` (not at the ends)"
                ),
            ));
        }
        if c.count == 0 || c.count > MAX_CONTAINERS {
            return Err((format!("{cat}.count"), format!("must be from 1 to {MAX_CONTAINERS}")));
        }
        if c.image.as_ref().is_some_and(|i| i.trim().is_empty()) {
            return Err((format!("{cat}.image"), "must not be empty".into()));
        }
        if c.port == Some(0) {
            return Err((format!("{cat}.port"), "must be a port from 1 to 65535".into()));
        }
        limits(&cat, &c.env, c.memory, c.cpus, &c.tmpfs)?;
        if let Some(r) = &c.ready {
            ready(&format!("{cat}.ready"), r)?;
        }
    }
    if let Some(d) = &t.discovery {
        discovery(&format!("{at}.discovery"), t, d)?;
    }
    Ok(())
}

fn discovery(at: &str, t: &TargetSpec, d: &DiscoverySpec) -> Result<(), Problem> {
    let Some(group) = t.companions.get(&d.sentinels) else {
        let known: Vec<&str> = t.companions.keys().map(String::as_str).collect();
        let known = if known.is_empty() { "none".to_string() } else { known.join(", ") };
        return Err((
            format!("{at}.sentinels"),
            format!("`{}` is not a companion group of this target (defined: {known})", d.sentinels),
        ));
    };
    if group.port.is_none() {
        return Err((
            format!("{at}.sentinels"),
            format!(
                "the Sentinels are asked at their `port`: give companion group `{}` one, e.g. `port: 26379`",
                d.sentinels
            ),
        ));
    }
    let m = &d.master;
    if m.is_empty() || m.contains(['/', '?', '#', ',']) || m.contains(char::is_whitespace) {
        return Err((
            format!("{at}.master"),
            "write the master name the Sentinels monitor (`sentinel monitor NAME …`), without spaces, `/`, `,`, `?` \
             or `#`"
                .into(),
        ));
    }
    Ok(())
}

/// A target's `members`, on any provider that takes them.
pub fn member_count(at: &str, members: u32) -> Result<(), Problem> {
    match members {
        1..=MAX_CONTAINERS => Ok(()),
        _ => Err((format!("{at}.members"), format!("must be from 1 to {MAX_CONTAINERS}"))),
    }
}

/// The fields only docker targets have, for the error on other providers.
pub fn docker_only_fields(t: &TargetSpec) -> Option<&'static str> {
    [
        ("image", t.image.is_some()),
        ("port", t.port.is_some()),
        ("env", !t.env.is_empty()),
        ("memory", t.memory.is_some()),
        ("cpus", t.cpus.is_some()),
        ("tmpfs", !t.tmpfs.is_empty()),
        ("ready", t.ready.is_some()),
        ("companions", !t.companions.is_empty()),
        ("discovery", t.discovery.is_some()),
    ]
    .into_iter()
    .find(|(_, present)| *present)
    .map(|(field, _)| field)
}

fn limits(
    at: &str,
    env: &IndexMap<String, String>,
    memory: Option<Size>,
    cpus: Option<f64>,
    tmpfs: &[String],
) -> Result<(), Problem> {
    for key in env.keys() {
        if key.is_empty() || key.contains('=') || key.contains(char::is_whitespace) {
            return Err((format!("{at}.env"), format!("`{key}` is not a variable name")));
        }
    }
    if let Some(m) = memory {
        if m.0 < 6 << 20 {
            return Err((format!("{at}.memory"), "Docker needs at least 6MiB".into()));
        }
    }
    if let Some(c) = cpus {
        if !(c.is_finite() && c > 0.0 && c <= 1024.0) {
            return Err((format!("{at}.cpus"), "must be a number of CPUs above 0, e.g. 0.5 or 2".into()));
        }
    }
    for (i, t) in tmpfs.iter().enumerate() {
        if !t.starts_with('/') {
            return Err((
                format!("{at}.tmpfs[{i}]"),
                "write an absolute path, optionally with options: /data:size=64m".into(),
            ));
        }
    }
    Ok(())
}

fn ready(at: &str, r: &ReadySpec) -> Result<(), Problem> {
    let given = [r.command.is_some(), r.port.is_some(), r.log.is_some()].iter().filter(|g| **g).count();
    if given != 1 {
        return Err((at.into(), "give exactly one of `command`, `port` and `log`".into()));
    }
    if let Some(CommandLine::Argv(v)) = &r.command {
        if v.is_empty() || v[0].trim().is_empty() {
            return Err((format!("{at}.command"), "must name a program".into()));
        }
    }
    if let Some(CommandLine::Shell(s)) = &r.command {
        if s.trim().is_empty() {
            return Err((format!("{at}.command"), "must not be empty".into()));
        }
    }
    if r.port == Some(0) {
        return Err((format!("{at}.port"), "must be a port from 1 to 65535".into()));
    }
    if r.log.as_ref().is_some_and(|l| l.is_empty()) {
        return Err((format!("{at}.log"), "must not be empty".into()));
    }
    if r.timeout.is_some_and(|t| t.0.is_zero()) {
        return Err((format!("{at}.timeout"), "must be longer than 0s".into()));
    }
    Ok(())
}

/// A DNS label: lower-case letters, digits and `-`, not at the ends.
fn is_host_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 40
        && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_labels() {
        assert!(is_host_label("kv") && is_host_label("kv-2") && is_host_label("a1"));
        assert!(!is_host_label("Kv") && !is_host_label("kv_2") && !is_host_label("-kv") && !is_host_label(""));
    }
}
