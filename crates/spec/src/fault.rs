//! Faults as a spec writes them: each action carries the fields it takes
//! (`signal` belongs to kill and restart, `command` to exec, …), and the
//! fault backends say which actions a target takes. The YAML keeps every
//! field beside `name`, `at`, `action` and `target`; a field the action does
//! not take is refused where it stands, with the actions that take it.
//!
//! Backends: the process and docker providers are spec-level kinds, so their
//! [`FaultBackend`]s live here ([`ProcessFaults`], [`DockerFaults`]) and the
//! runner's fault/process.rs and faultline-docker's fault.rs apply what they declare; a
//! target kind's own faults (MongoDB's stepdown) come from its catalog entry,
//! [`crate::KindInfo::faults`], and its driver applies them.

use std::collections::BTreeMap;

use faultline_model::units::Dur;
use schemars::JsonSchema;
use serde::de::{Error as _, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

use crate::model::ProviderKind;

/// One scheduled fault.
#[derive(Debug, Clone, Serialize)]
pub struct FaultSpec {
    /// Names it in results, the report and gates (`denied_window(NAME)`).
    pub name: String,
    /// Offset into the measured window.
    pub at: Dur,
    /// What it hits: a process target's name, or a docker target's selector
    /// (`kv.primary`, `kv.replicas`, `kv.member[1]`, `kv-2`, `kv.sentinels[0]`).
    pub target: String,
    /// What it does, with the fields that belong to that action.
    #[serde(flatten)]
    pub action: FaultAction,
}

/// A fault's action and its own fields, written beside `name`, `at` and
/// `target` (`action: kill`, `signal: SIGTERM`, `heal_after: 1s`).
/// `heal_after` undoes the fault after that long (kill and stop: start;
/// pause: unpause; disconnect: reconnect; isolate: rejoin; freeze: thaw);
/// without it, the fault is undone at the end of the cell.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(tag = "action", rename_all = "lowercase", deny_unknown_fields)]
pub enum FaultAction {
    /// Send a signal to the server (a process target's process group, a
    /// container's main process).
    Kill {
        /// The signal (default SIGKILL): SIGKILL, SIGTERM, SIGINT.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signal: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        heal_after: Option<Dur>,
    },
    Stop {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        heal_after: Option<Dur>,
    },
    Start,
    /// A kill and a start, confirmed by the kind's readiness probe.
    Restart {
        /// Process targets: SIGKILL (a crash, the default) or SIGTERM (a
        /// clean restart). A docker restart takes none.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signal: Option<String>,
    },
    Pause {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        heal_after: Option<Dur>,
    },
    Unpause,
    Disconnect {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        heal_after: Option<Dur>,
    },
    Reconnect,
    /// Cut a member off from its peers while clients still reach it.
    Isolate {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        heal_after: Option<Dur>,
    },
    Rejoin,
    /// Run a command in each selected container; its output is recorded.
    Exec {
        /// The command and its arguments, e.g. `[redis-cli, info]`.
        command: Vec<String>,
    },
    /// Switch the primary through the target's Sentinels.
    Failover {
        /// Stop writes on the primary and let every replica catch up before
        /// switching, and demote the old primary the moment the new one is
        /// promoted, so nothing acknowledged is lost (default: a plain
        /// `SENTINEL FAILOVER`).
        #[serde(default)]
        coordinated: bool,
    },
    /// MongoDB: `replSetStepDown` on the primary, confirmed by the role change.
    Stepdown {
        /// How long the old primary may not stand for election again (default 60s).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        seconds: Option<Dur>,
        /// How long the primary waits for a secondary to catch up before it
        /// steps down (default 10s).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        catch_up: Option<Dur>,
        /// Step down even when no secondary has caught up (a lone member has none).
        #[serde(default)]
        force: bool,
    },
    /// MongoDB: `replSetFreeze` on a member, so it does not stand for election.
    Freeze {
        /// How long the member may not stand (default 60s; `0s` thaws).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        seconds: Option<Dur>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        heal_after: Option<Dur>,
    },
    /// MongoDB: `replSetStepUp` on a member, which calls an election it wins
    /// if it can (with a partition, a second primary).
    Stepup,
}

/// Which action a fault is, without its fields: what backends declare they
/// support and what results.json records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FaultKind {
    Kill,
    Stop,
    Start,
    Restart,
    Pause,
    Unpause,
    Disconnect,
    Reconnect,
    Isolate,
    Rejoin,
    Exec,
    Failover,
    Stepdown,
    Freeze,
    Stepup,
}

impl FaultKind {
    pub const ALL: [FaultKind; 15] = [
        FaultKind::Kill,
        FaultKind::Stop,
        FaultKind::Start,
        FaultKind::Restart,
        FaultKind::Pause,
        FaultKind::Unpause,
        FaultKind::Disconnect,
        FaultKind::Reconnect,
        FaultKind::Isolate,
        FaultKind::Rejoin,
        FaultKind::Exec,
        FaultKind::Failover,
        FaultKind::Stepdown,
        FaultKind::Freeze,
        FaultKind::Stepup,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            FaultKind::Kill => "kill",
            FaultKind::Stop => "stop",
            FaultKind::Start => "start",
            FaultKind::Restart => "restart",
            FaultKind::Pause => "pause",
            FaultKind::Unpause => "unpause",
            FaultKind::Disconnect => "disconnect",
            FaultKind::Reconnect => "reconnect",
            FaultKind::Isolate => "isolate",
            FaultKind::Rejoin => "rejoin",
            FaultKind::Exec => "exec",
            FaultKind::Failover => "failover",
            FaultKind::Stepdown => "stepdown",
            FaultKind::Freeze => "freeze",
            FaultKind::Stepup => "stepup",
        }
    }

    /// The fields the action takes besides `name`, `at`, `action` and
    /// `target`: its variant's fields in [`FaultAction`] (a test holds the
    /// two together).
    pub fn fields(self) -> &'static [&'static str] {
        match self {
            FaultKind::Kill => &["signal", "heal_after"],
            FaultKind::Restart => &["signal"],
            FaultKind::Stop | FaultKind::Pause | FaultKind::Disconnect | FaultKind::Isolate => &["heal_after"],
            FaultKind::Exec => &["command"],
            FaultKind::Failover => &["coordinated"],
            FaultKind::Stepdown => &["seconds", "catch_up", "force"],
            FaultKind::Freeze => &["seconds", "heal_after"],
            FaultKind::Start | FaultKind::Unpause | FaultKind::Reconnect | FaultKind::Rejoin | FaultKind::Stepup => &[],
        }
    }

    /// Whether the action leaves something to undo (and so takes
    /// `heal_after`). A `restart` undoes itself: it is a kill and a start.
    pub fn heals(self) -> bool {
        self.fields().contains(&"heal_after")
    }

    /// `kill, stop and pause`: actions as a sentence lists them.
    pub fn listed(kinds: &[FaultKind]) -> String {
        let names: Vec<&str> = kinds.iter().map(|k| k.as_str()).collect();
        match names.split_last() {
            None => "none".into(),
            Some((last, [])) => last.to_string(),
            Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        }
    }
}

impl FaultAction {
    pub fn kind(&self) -> FaultKind {
        match self {
            FaultAction::Kill { .. } => FaultKind::Kill,
            FaultAction::Stop { .. } => FaultKind::Stop,
            FaultAction::Start => FaultKind::Start,
            FaultAction::Restart { .. } => FaultKind::Restart,
            FaultAction::Pause { .. } => FaultKind::Pause,
            FaultAction::Unpause => FaultKind::Unpause,
            FaultAction::Disconnect { .. } => FaultKind::Disconnect,
            FaultAction::Reconnect => FaultKind::Reconnect,
            FaultAction::Isolate { .. } => FaultKind::Isolate,
            FaultAction::Rejoin => FaultKind::Rejoin,
            FaultAction::Exec { .. } => FaultKind::Exec,
            FaultAction::Failover { .. } => FaultKind::Failover,
            FaultAction::Stepdown { .. } => FaultKind::Stepdown,
            FaultAction::Freeze { .. } => FaultKind::Freeze,
            FaultAction::Stepup => FaultKind::Stepup,
        }
    }

    pub fn as_str(&self) -> &'static str {
        self.kind().as_str()
    }

    /// When to undo the fault, for the actions that take `heal_after`.
    pub fn heal_after(&self) -> Option<Dur> {
        match *self {
            FaultAction::Kill { heal_after, .. }
            | FaultAction::Stop { heal_after }
            | FaultAction::Pause { heal_after }
            | FaultAction::Disconnect { heal_after }
            | FaultAction::Isolate { heal_after }
            | FaultAction::Freeze { heal_after, .. } => heal_after,
            _ => None,
        }
    }

    /// The given `heal_after`, to scale (`--quick`).
    pub fn heal_after_mut(&mut self) -> Option<&mut Dur> {
        match self {
            FaultAction::Kill { heal_after, .. }
            | FaultAction::Stop { heal_after }
            | FaultAction::Pause { heal_after }
            | FaultAction::Disconnect { heal_after }
            | FaultAction::Isolate { heal_after }
            | FaultAction::Freeze { heal_after, .. } => heal_after.as_mut(),
            _ => None,
        }
    }

    /// The signal a kill or restart names (None: the default, SIGKILL).
    pub fn signal(&self) -> Option<&str> {
        match self {
            FaultAction::Kill { signal, .. } | FaultAction::Restart { signal } => signal.as_deref(),
            _ => None,
        }
    }
}

/// What validation knows of a fault backend: the actions it applies and
/// what it asks of an action's fields beyond their types.
pub trait FaultBackend: Sync {
    /// How errors name its targets: `process` in "process targets take …".
    fn name(&self) -> &'static str;
    fn supports(&self) -> &'static [FaultKind];
    /// A field of a supported action this backend cannot apply as given:
    /// the field and what to write instead.
    fn check(&self, action: &FaultAction) -> Result<(), (&'static str, String)> {
        let _ = action;
        Ok(())
    }
}

/// Signals to a process target's process group (crates/engine/src/fault/process.rs).
pub struct ProcessFaults;

impl FaultBackend for ProcessFaults {
    fn name(&self) -> &'static str {
        "process"
    }
    fn supports(&self) -> &'static [FaultKind] {
        &[FaultKind::Kill, FaultKind::Stop, FaultKind::Pause, FaultKind::Restart]
    }
    fn check(&self, action: &FaultAction) -> Result<(), (&'static str, String)> {
        match action {
            FaultAction::Restart { signal: Some(s) } if !matches!(s.trim_start_matches("SIG"), "KILL" | "TERM") => {
                Err(("signal", "a restart takes SIGKILL (a crash, the default) or SIGTERM (a clean restart)".into()))
            }
            _ => Ok(()),
        }
    }
}

/// Confirmed operations on containers and their network
/// (faultline-docker, crates/docker/src/fault.rs).
pub struct DockerFaults;

impl FaultBackend for DockerFaults {
    fn name(&self) -> &'static str {
        "docker"
    }
    fn supports(&self) -> &'static [FaultKind] {
        &[
            FaultKind::Kill,
            FaultKind::Stop,
            FaultKind::Start,
            FaultKind::Restart,
            FaultKind::Pause,
            FaultKind::Unpause,
            FaultKind::Disconnect,
            FaultKind::Reconnect,
            FaultKind::Isolate,
            FaultKind::Rejoin,
            FaultKind::Exec,
            FaultKind::Failover,
        ]
    }
    fn check(&self, action: &FaultAction) -> Result<(), (&'static str, String)> {
        match action {
            FaultAction::Restart { signal: Some(_) } => Err((
                "signal",
                "a docker restart stops the container with SIGTERM and a grace period: drop `signal`, or use kill with heal_after"
                    .into(),
            )),
            _ => Ok(()),
        }
    }
}

impl ProviderKind {
    /// The faults the provider applies itself; an external target has none
    /// (it gets only its kind's own).
    pub fn faults(self) -> Option<&'static dyn FaultBackend> {
        match self {
            ProviderKind::Process => Some(&ProcessFaults),
            ProviderKind::Docker => Some(&DockerFaults),
            ProviderKind::External => None,
        }
    }

    /// Whether some provider applies `kind` (else it is a kind's own fault).
    pub fn any_applies(kind: FaultKind) -> bool {
        [ProviderKind::Process, ProviderKind::Docker]
            .into_iter()
            .filter_map(ProviderKind::faults)
            .any(|b| b.supports().contains(&kind))
    }
}

/// serde puts an error raised once the map is read on the map, not on one
/// of its fields, and the action that refuses a field may come after it.
/// So the message starts `fault field `NAME`: `, and [`crate::parse`] moves
/// the field into the error's path (with [`refused_field`]).
const REFUSED: &str = "fault field `";

fn refused(field: &str, kind: FaultKind) -> String {
    let takers: Vec<FaultKind> = FaultKind::ALL.into_iter().filter(|k| k.fields().contains(&field)).collect();
    let takers = FaultKind::listed(&takers);
    match field {
        "heal_after" => format!(
            "{REFUSED}{field}`: `{}` leaves nothing to heal; heal_after applies only to action: {takers}",
            kind.as_str()
        ),
        _ => format!("{REFUSED}{field}`: applies only to action: {takers}, not {}", kind.as_str()),
    }
}

/// The field a fault's error names and the rest of the message, for an
/// error [`refused`] made.
pub(crate) fn refused_field(message: &str) -> Option<(&str, &str)> {
    message.strip_prefix(REFUSED)?.split_once("`: ")
}

/// The fields a fault's map may hold, in the order errors list them.
#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "snake_case")]
enum Field {
    Name,
    At,
    Action,
    Target,
    Signal,
    Command,
    Coordinated,
    Seconds,
    CatchUp,
    Force,
    HealAfter,
}

const FIELDS: &[&str] = &[
    "name",
    "at",
    "action",
    "target",
    "signal",
    "command",
    "coordinated",
    "seconds",
    "catch_up",
    "force",
    "heal_after",
];

/// The action's own fields as the map gave them, each `Some` when written.
#[derive(Default)]
struct Given {
    signal: Option<Option<String>>,
    command: Option<Vec<String>>,
    coordinated: Option<bool>,
    seconds: Option<Option<Dur>>,
    catch_up: Option<Option<Dur>>,
    force: Option<bool>,
    heal_after: Option<Option<Dur>>,
}

impl Given {
    fn written(&self) -> impl Iterator<Item = &'static str> + '_ {
        [
            ("signal", self.signal.is_some()),
            ("command", self.command.is_some()),
            ("coordinated", self.coordinated.is_some()),
            ("seconds", self.seconds.is_some()),
            ("catch_up", self.catch_up.is_some()),
            ("force", self.force.is_some()),
            ("heal_after", self.heal_after.is_some()),
        ]
        .into_iter()
        .filter_map(|(field, written)| written.then_some(field))
    }

    /// The action, once every written field is one `kind` takes.
    fn into_action<E: serde::de::Error>(self, kind: FaultKind) -> Result<FaultAction, E> {
        if let Some(field) = self.written().find(|f| !kind.fields().contains(f)) {
            return Err(E::custom(refused(field, kind)));
        }
        let (signal, heal_after) = (self.signal.flatten(), self.heal_after.flatten());
        let (seconds, catch_up) = (self.seconds.flatten(), self.catch_up.flatten());
        Ok(match kind {
            FaultKind::Kill => FaultAction::Kill { signal, heal_after },
            FaultKind::Stop => FaultAction::Stop { heal_after },
            FaultKind::Start => FaultAction::Start,
            FaultKind::Restart => FaultAction::Restart { signal },
            FaultKind::Pause => FaultAction::Pause { heal_after },
            FaultKind::Unpause => FaultAction::Unpause,
            FaultKind::Disconnect => FaultAction::Disconnect { heal_after },
            FaultKind::Reconnect => FaultAction::Reconnect,
            FaultKind::Isolate => FaultAction::Isolate { heal_after },
            FaultKind::Rejoin => FaultAction::Rejoin,
            FaultKind::Exec => match self.command {
                Some(command) if !command.is_empty() => FaultAction::Exec { command },
                _ => return Err(E::custom("action: exec needs `command`, e.g. [redis-cli, info]")),
            },
            FaultKind::Failover => FaultAction::Failover { coordinated: self.coordinated.unwrap_or(false) },
            FaultKind::Stepdown => FaultAction::Stepdown { seconds, catch_up, force: self.force.unwrap_or(false) },
            FaultKind::Freeze => FaultAction::Freeze { seconds, heal_after },
            FaultKind::Stepup => FaultAction::Stepup,
        })
    }
}

/// By hand: the action's fields stand beside `name`, `at` and `target`,
/// and `#[serde(flatten)]` cannot be combined with `deny_unknown_fields`.
impl<'de> Deserialize<'de> for FaultSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct FaultVisitor;
        impl<'de> Visitor<'de> for FaultVisitor {
            type Value = FaultSpec;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a fault: a map with name, at, action, target and the action's own fields")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<FaultSpec, A::Error> {
                // Each field once (the YAML parser refuses a repeated key before this).
                macro_rules! once {
                    ($slot:expr, $field:literal) => {
                        if $slot.replace(map.next_value()?).is_some() {
                            return Err(A::Error::duplicate_field($field));
                        }
                    };
                }
                let (mut name, mut at, mut kind, mut target) = (None, None, None, None);
                let mut given = Given::default();
                while let Some(field) = map.next_key::<Field>()? {
                    match field {
                        Field::Name => once!(name, "name"),
                        Field::At => once!(at, "at"),
                        Field::Action => once!(kind, "action"),
                        Field::Target => once!(target, "target"),
                        Field::Signal => once!(given.signal, "signal"),
                        Field::Command => once!(given.command, "command"),
                        Field::Coordinated => once!(given.coordinated, "coordinated"),
                        Field::Seconds => once!(given.seconds, "seconds"),
                        Field::CatchUp => once!(given.catch_up, "catch_up"),
                        Field::Force => once!(given.force, "force"),
                        Field::HealAfter => once!(given.heal_after, "heal_after"),
                    }
                }
                let name: String = name.ok_or_else(|| A::Error::missing_field("name"))?;
                let at: Dur = at.ok_or_else(|| A::Error::missing_field("at"))?;
                let kind: FaultKind = kind.ok_or_else(|| A::Error::missing_field("action"))?;
                let target: String = target.ok_or_else(|| A::Error::missing_field("target"))?;
                Ok(FaultSpec { name, at, target, action: given.into_action(kind)? })
            }
        }
        d.deserialize_struct("FaultSpec", FIELDS, FaultVisitor)
    }
}

/// One object schema per action (FaultAction's), each with the fields
/// every fault has.
impl JsonSchema for FaultSpec {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "FaultSpec".into()
    }
    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let mut schema = FaultAction::json_schema(generator);
        let common: BTreeMap<&str, serde_json::Value> = [
            ("name", schemars::json_schema!({"type": "string", "description": "Names it in results, the report and gates (`denied_window(NAME)`)."})),
            ("at", {
                let mut at = generator.subschema_for::<Dur>();
                at.insert("description".into(), "Offset into the measured window.".into());
                at
            }),
            ("target", schemars::json_schema!({"type": "string", "description": "A process target's name, or a docker target's selector (`kv.primary`, `kv.replicas`, `kv.member[1]`, `kv-2`, `kv.sentinels[0]`)."})),
        ]
        .into_iter()
        .map(|(k, s)| (k, s.to_value()))
        .collect();
        let variants = schema.get_mut("oneOf").and_then(|v| v.as_array_mut()).expect("FaultAction is a tagged enum");
        for variant in variants {
            let properties = variant["properties"].as_object_mut().expect("each action is an object");
            for (field, s) in &common {
                properties.insert(field.to_string(), s.clone());
            }
            let required = variant["required"].as_array_mut().expect("the tag is required");
            required.extend(common.keys().map(|k| serde_json::Value::from(*k)));
        }
        schema.insert(
            "description".into(),
            "One scheduled fault: name, at, target, and the action with its own fields".into(),
        );
        schema
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fault(yaml: &str) -> Result<FaultSpec, String> {
        serde_yaml_ng::from_str(yaml).map_err(|e| e.to_string())
    }

    /// `FaultKind::fields` is what each variant holds: an action given every
    /// field it takes writes back exactly those.
    #[test]
    fn each_action_takes_the_fields_its_variant_holds() {
        let value = |field: &str| match field {
            "signal" => "SIGTERM",
            "command" => "[redis-cli, info]",
            "coordinated" | "force" => "true",
            _ => "2s",
        };
        for kind in FaultKind::ALL {
            let own: String = kind.fields().iter().map(|f| format!(", {f}: {}", value(f))).collect();
            let yaml = format!("{{name: f, at: 1s, action: {}, target: t{own}}}", kind.as_str());
            let parsed = fault(&yaml).unwrap_or_else(|e| panic!("{yaml}: {e}"));
            assert_eq!(parsed.action.kind(), kind);
            let written = serde_json::to_value(&parsed).unwrap();
            let mut keys: Vec<&str> = written.as_object().unwrap().keys().map(String::as_str).collect();
            let mut want = [&["name", "at", "target", "action"][..], kind.fields()].concat();
            keys.sort();
            want.sort();
            assert_eq!(keys, want, "{}", kind.as_str());
            assert_eq!(kind.heals(), parsed.action.heal_after().is_some(), "{}", kind.as_str());
        }
    }

    #[test]
    fn a_field_of_another_action_is_refused_wherever_it_stands() {
        for yaml in [
            "{name: f, at: 1s, action: pause, target: t, signal: SIGTERM}",
            "{name: f, signal: SIGTERM, at: 1s, action: pause, target: t}",
        ] {
            let e = fault(yaml).unwrap_err();
            assert!(e.starts_with("fault field `signal`: applies only to action: kill and restart, not pause"), "{e}");
        }
        let e = fault("{name: f, at: 1s, action: restart, target: t, heal_after: 1s}").unwrap_err();
        assert!(e.contains("`restart` leaves nothing to heal"), "{e}");
        assert!(e.contains("kill, stop, pause, disconnect, isolate and freeze"), "{e}");
        assert_eq!(refused_field("fault field `force`: applies only"), Some(("force", "applies only")));
        let e = fault("{name: f, at: 1s, action: exec, target: t, command: []}").unwrap_err();
        assert!(e.contains("action: exec needs `command`"), "{e}");
        let e = fault("{name: f, at: 1s, target: t}").unwrap_err();
        assert!(e.contains("missing field `action`"), "{e}");
        let e = fault("{name: f, at: 1s, action: kill, target: t, sigal: x}").unwrap_err();
        assert!(e.contains("unknown field `sigal`, expected one of `name`, `at`, `action`, `target`, `signal`"), "{e}");
    }

    #[test]
    fn the_schema_holds_each_action_with_the_common_fields() {
        let schema = schemars::schema_for!(FaultSpec).to_value();
        let variants = schema["oneOf"].as_array().unwrap();
        assert_eq!(variants.len(), FaultKind::ALL.len());
        for v in variants {
            let required = v["required"].as_array().unwrap();
            for field in ["name", "at", "action", "target"] {
                assert!(required.iter().any(|r| r == field), "{v}");
            }
            assert_eq!(v["additionalProperties"], false, "{v}");
        }
    }

    /// A catalog whose kinds send their servers stepdown, freeze and
    /// stepup (as MongoDB does) and are otherwise the plain test kind.
    struct OwnFaults;

    impl crate::KindInfo for OwnFaults {
        fn default_command(&self) -> &'static str {
            "true"
        }
        fn check_uri(&self, _uri: &str) -> Result<(), String> {
            Ok(())
        }
        fn supports(&self, _op: faultline_model::ops::OpKind) -> bool {
            true
        }
        fn faults(&self) -> &'static [FaultKind] {
            &[FaultKind::Stepdown, FaultKind::Freeze, FaultKind::Stepup]
        }
        fn cost(&self) -> crate::KindCost {
            crate::KindCost { connection: 32 << 10, slot: 256 }
        }
    }

    impl crate::Catalog for OwnFaults {
        fn checkers(&self) -> &[&'static dyn crate::CheckerInfo] {
            &[]
        }
        fn names(&self) -> Vec<&'static str> {
            vec!["redis", "mongodb"]
        }
        fn kind(
            &self,
            _kind: &faultline_model::ops::TargetKind,
            _options: Option<&serde_json::Value>,
        ) -> Result<std::sync::Arc<dyn crate::KindInfo>, crate::options::OptionsError> {
            Ok(std::sync::Arc::new(OwnFaults))
        }
    }

    /// A spec whose one scenario has `fault` (block lines, indented 6) on
    /// target `t` of `target`: the error, if any.
    fn spec_error(target: &str, fault: &str, catalog: &dyn crate::Catalog) -> Option<crate::SpecError> {
        let text = format!(
            "name: x\ntargets:\n  t: {target}\nworkloads:\n  w: {{ops: {{get: 1}}}}\nprofiles:\n  p: {{closed: 1x1}}\n\
             scenarios:\n  - name: s\n    target: t\n    workload: w\n    profiles: [p]\n    faults:\n{fault}"
        );
        crate::parse(std::path::Path::new("t.yaml"), &text, &[], catalog).err()
    }

    const PROCESS: &str = "{kind: redis, provider: process}";
    const EXTERNAL: &str = "{kind: mongodb, provider: external, uri: 'mongodb://127.0.0.1:1'}";

    #[test]
    fn a_refused_field_is_located_where_it_stands() {
        let plain = crate::catalog::plain::Plain;
        let e = spec_error(
            PROCESS,
            "      - name: f\n        signal: SIGTERM\n        action: pause\n        at: 1s\n        target: t\n",
            &plain,
        )
        .unwrap();
        assert_eq!((e.line, e.column), (Some(15), Some(17)), "{e}");
        assert_eq!(e.field.as_deref(), Some("scenarios[0].faults[0].signal"));
        assert_eq!(e.message, "applies only to action: kill and restart, not pause");
        let e =
            spec_error(PROCESS, "      - {name: f, at: 1s, action: kill, target: t, command: [x]}\n", &plain).unwrap();
        assert_eq!(e.field.as_deref(), Some("scenarios[0].faults[0].command"));
        assert_eq!(e.line, Some(14));
        assert!(e.message.starts_with("applies only to action: exec"), "{e}");
        let e = spec_error(PROCESS, "      - {name: f, at: 1s, action: kill, target: t, heal_after: 2 s}\n", &plain)
            .unwrap();
        assert_eq!(e.field.as_deref(), Some("scenarios[0].faults[0].heal_after"), "{e}");
    }

    #[test]
    fn the_backends_decide_which_target_takes_which_action() {
        let plain = crate::catalog::plain::Plain;
        let fault = |action: &str| format!("      - {{name: f, at: 1s, action: {action}, target: t}}\n");
        let e = spec_error(PROCESS, &fault("isolate"), &plain).unwrap();
        assert_eq!(e.field.as_deref(), Some("scenarios[0].faults[0].action"));
        assert_eq!(e.message, "process targets take kill, stop, pause and restart");
        let e = spec_error(PROCESS, &fault("stepdown"), &plain).unwrap();
        assert_eq!(e.message, "`stepdown` is not a fault of redis targets (`t`)");
        let e = spec_error(PROCESS, &fault("isolate"), &OwnFaults).unwrap();
        assert_eq!(
            e.message,
            "process targets take kill, stop, pause and restart (and redis's own: stepdown, freeze and stepup)"
        );
        assert!(spec_error(PROCESS, &fault("stepdown"), &OwnFaults).is_none());
        assert!(spec_error(EXTERNAL, &fault("stepup"), &OwnFaults).is_none());
        let e = spec_error(EXTERNAL, &fault("kill"), &OwnFaults).unwrap();
        assert_eq!(e.field.as_deref(), Some("scenarios[0].faults[0].target"));
        assert_eq!(e.message, "`t` is external: faultline can only send it its kind's own faults (mongodb's: stepdown, freeze and stepup)");
        let e = spec_error(PROCESS, "      - {name: f, at: 1s, action: restart, target: t, signal: SIGHUP}\n", &plain)
            .unwrap();
        assert_eq!(e.field.as_deref(), Some("scenarios[0].faults[0].signal"));
        assert!(e.message.starts_with("a restart takes SIGKILL"), "{e}");
    }
}
