//! `--agents LAUNCHER:N` as the CLI reads it: which launcher starts the
//! run's agents (engine/agent/launch.rs) and how many.

use faultline_engine::agent::launch::{Launcher, MAX_AGENTS};

/// `local:4`, `swarm:4`, `wait:4`.
pub fn parse(text: &str) -> Result<Launcher, String> {
    let usage = "give LAUNCHER:N, e.g. local:4 (agent processes on this machine), swarm:4 (a Docker Swarm \
                 service) or wait:4 (agents you start)";
    let (kind, n) = text.split_once(':').ok_or_else(|| format!("`{text}`: {usage}"))?;
    let n: u32 = n.parse().map_err(|_| format!("`{text}`: `{n}` is not a number of agents; {usage}"))?;
    if !(1..=MAX_AGENTS).contains(&n) {
        return Err(format!("`{text}`: between 1 and {MAX_AGENTS} agents"));
    }
    match kind {
        "local" => Ok(Launcher::Local(n)),
        "swarm" => Ok(Launcher::Swarm(n)),
        "wait" => Ok(Launcher::Wait(n)),
        other => Err(format!("`{text}`: no launcher `{other}`; {usage}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launchers_parse_with_their_count() {
        assert_eq!(parse("local:4"), Ok(Launcher::Local(4)));
        assert_eq!(parse("wait:2"), Ok(Launcher::Wait(2)));
        assert!(parse("local").unwrap_err().contains("LAUNCHER:N"));
        assert!(parse("local:x").unwrap_err().contains("not a number"));
        assert!(parse("local:0").unwrap_err().contains("between 1 and 256"));
        assert_eq!(parse("swarm:4"), Ok(Launcher::Swarm(4)));
        assert!(parse("k8s:2").unwrap_err().contains("no launcher `k8s`"));
    }
}
