//! The parts of a target that only `provider: docker` uses: the image,
//! members, companions, limits and readiness, as written; their checks are
//! validate/docker.rs's. Documented in docs/spec.md ("docker targets").

use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use faultline_model::units::{Dur, Size};

/// Most members or companions of one group faultline starts.
pub const MAX_CONTAINERS: u32 = 16;

/// Group names a selector uses for roles; a companion group may not take them.
pub const RESERVED_GROUPS: [&str; 6] = ["primary", "replicas", "members", "member", "all", "any"];

/// A group of extra containers next to a target's members, e.g. Sentinels.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CompanionSpec {
    /// How many containers the group has.
    #[serde(default = "default_count")]
    pub count: u32,
    /// The image (default: the target's).
    #[serde(default)]
    pub image: Option<String>,
    /// The program to run (default: the kind's server, e.g. `redis-server`).
    #[serde(default)]
    pub command: Option<String>,
    /// Its arguments; `{primary_ip}`, `{primary_host}`, `{port}`, `{index}`,
    /// `{name}`, `{quorum}` and `{count}` are replaced.
    #[serde(default)]
    pub args: Vec<String>,
    /// The port it serves on, for clients that need to reach it (e.g. 26379).
    #[serde(default)]
    pub port: Option<u16>,
    #[serde(default)]
    pub env: IndexMap<String, String>,
    #[serde(default)]
    pub memory: Option<Size>,
    #[serde(default)]
    pub cpus: Option<f64>,
    #[serde(default)]
    pub tmpfs: Vec<String>,
    #[serde(default)]
    pub ready: Option<ReadySpec>,
}

fn default_count() -> u32 {
    1
}

/// How clients find the primary: by asking a companion group of Sentinels.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DiscoverySpec {
    /// The companion group whose containers are the Sentinels (it needs a `port`).
    pub sentinels: String,
    /// The master name the Sentinels monitor (`sentinel monitor NAME …`).
    #[serde(default = "default_master")]
    pub master: String,
}

fn default_master() -> String {
    "mymaster".into()
}

/// When a container counts as ready: exactly one of `command`, `port`, `log`.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadySpec {
    /// Run inside the container until it exits with 0: a list (run as is) or
    /// a string (run with `sh -c`).
    #[serde(default)]
    pub command: Option<CommandLine>,
    /// A TCP port that must accept a connection from the host.
    #[serde(default)]
    pub port: Option<u16>,
    /// Text that must appear in the container's output.
    #[serde(default)]
    pub log: Option<String>,
    /// How long to wait (default: the target's `ready_timeout`).
    #[serde(default)]
    pub timeout: Option<Dur>,
}

/// A command: `[prog, arg, …]`, or one string for `sh -c`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum CommandLine {
    Argv(Vec<String>),
    Shell(String),
}

impl CommandLine {
    pub fn argv(&self) -> Vec<String> {
        match self {
            CommandLine::Argv(v) => v.clone(),
            CommandLine::Shell(s) => vec!["sh".into(), "-c".into(), s.clone()],
        }
    }
}

impl<'de> Deserialize<'de> for CommandLine {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = CommandLine;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a command: a list such as [redis-cli, ping], or a string for `sh -c`")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<CommandLine, E> {
                Ok(CommandLine::Shell(v.to_string()))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, seq: A) -> Result<CommandLine, A::Error> {
                Vec::<String>::deserialize(serde::de::value::SeqAccessDeserializer::new(seq)).map(CommandLine::Argv)
            }
        }
        d.deserialize_any(V)
    }
}

/// `/data:size=64m` → (`/data`, `size=64m`).
pub fn split_tmpfs(entry: &str) -> (String, String) {
    match entry.split_once(':') {
        Some((path, options)) => (path.to_string(), options.to_string()),
        None => (entry.to_string(), String::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tmpfs_entries_split_at_the_first_colon() {
        assert_eq!(split_tmpfs("/data:size=64m,mode=1777"), ("/data".into(), "size=64m,mode=1777".into()));
        assert_eq!(split_tmpfs("/data"), ("/data".into(), String::new()));
    }
}
