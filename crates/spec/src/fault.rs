//! Faults as a spec writes them, and what the spec language knows of the
//! fault actions a build registers.
//!
//! A fault is `name`, `at`, `target`, `action`, `heal_after` and the
//! action's own fields beside them ([`FaultSpec`]). The language does not
//! list the actions: each backend that applies faults (the process and
//! docker providers, a kind's own API) owns one typed struct per action
//! ([`Action`]: its fields, their checks, its JSON Schema, whether it
//! heals) and registers it as [`Registered<A>`], which validation sees as a
//! [`FaultType`]. The build's catalog ([`crate::Catalog`]) hands over the
//! registered types; validation holds every fault to them: the action is
//! one some backend registers, each field one an action of that name takes,
//! and the target's own backend (its kind's, else its provider's) takes the
//! action with these fields aimed where they are. The backends that apply
//! them live above this crate (faultline-kind's `fault` module).

use std::marker::PhantomData;

use faultline_model::faults::Restart;
use faultline_model::units::Dur;
use schemars::JsonSchema;
use serde::de::{DeserializeOwned, Error as _, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::selector::Selector;
use crate::target::TargetSpec;

/// An action's own fields as the spec wrote them.
pub type Fields = serde_json::Map<String, serde_json::Value>;

/// The fields every fault has, whatever its action.
const COMMON: [&str; 5] = ["name", "at", "action", "target", "heal_after"];

/// One scheduled fault.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultSpec {
    /// Names it in results, the report and gates (`denied_window(NAME)`).
    pub name: String,
    /// Offset into the measured window.
    pub at: Dur,
    /// What it hits: a target of one server by its name, or a selector of a
    /// target's members (`kv.primary`, `kv.replicas`, `kv.any`, `kv.member[1]`,
    /// `kv-2`, `kv.sentinels[0]`).
    pub target: String,
    /// The registered action's name (`kill`, `pause`, `stepdown`, …).
    pub action: String,
    /// Undo the fault after this long (kill and stop: start; pause:
    /// unpause; …); without it, the fault is undone at the end of the cell.
    /// Only actions that leave something to undo take it.
    pub heal_after: Option<Dur>,
    /// The action's own fields, which the backend that applies it parses
    /// into its typed struct (validation already did, once).
    pub fields: Fields,
}

/// Where a fault is aimed, for the checks an action makes of it.
pub struct Site<'a> {
    /// The target's name in the spec.
    pub target_name: &'a str,
    pub target: &'a TargetSpec,
    /// The members it selects, for docker targets (`kv.primary`).
    pub selector: Option<&'a Selector>,
}

/// One fault action of one backend, typed: its fields are the struct's
/// (serde with `deny_unknown_fields`, so the schema is exact), its checks
/// [`Action::check`]. A backend registers it as `&Registered::<A>::NEW`.
pub trait Action: DeserializeOwned + JsonSchema + Send + Sync + 'static {
    /// The name a spec's `action:` writes.
    const NAME: &'static str;
    /// Whether applying it leaves something to undo (so it takes `heal_after`).
    const HEALS: bool = false;
    /// Whether it acts on the disk under the target's data, so the target
    /// runs on the fault filesystem (faultline-faultfs).
    const ON_FAULT_FILESYSTEM: bool = false;
    /// What it asks of its fields beyond their types, and of where it is
    /// aimed: the field at fault (`""`: the fault as a whole; `target`) and
    /// what to write instead.
    fn check(&self, site: &Site) -> Result<(), (&'static str, String)> {
        let _ = site;
        Ok(())
    }
    /// How the server goes down when the action itself takes it down and
    /// starts it again on its own data (a `restart`): the fault is then a
    /// row of the crash-recovery matrix, also when it fails. A fault whose
    /// undo restarts the server (a healed `kill`) says so when it heals.
    fn restarts(&self) -> Option<Restart> {
        None
    }
    /// What it asks of the fault filesystem under its target, beyond
    /// being on it ([`Action::ON_FAULT_FILESYSTEM`]).
    fn disk_use(&self) -> DiskUse {
        DiskUse::default()
    }
}

/// What a fault asks of the fault filesystem under its target.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct DiskUse {
    /// It answers each write the server makes as it makes it (a full disk
    /// refusing it, a failing or slow write): every write must reach the
    /// layer, rather than wait in the kernel's page cache.
    pub each_write: bool,
    /// It may undo creations, removals and renames that no fsync of their
    /// directory made durable: the layer keeps them until one does.
    pub strict_names: bool,
}

impl DiskUse {
    /// What either asks.
    pub fn and(self, other: DiskUse) -> DiskUse {
        DiskUse {
            each_write: self.each_write || other.each_write,
            strict_names: self.strict_names || other.strict_names,
        }
    }
}

/// What validation knows of a registered action: [`Registered<A>`] for
/// every [`Action`]; the backends' own registries hand these out.
pub trait FaultType: Sync {
    fn name(&self) -> &'static str;
    fn heals(&self) -> bool;
    fn on_fault_filesystem(&self) -> bool;
    /// The fields it takes besides the common ones.
    fn fields(&self) -> Vec<String>;
    /// The fields parsed as its struct and checked where the fault is aimed.
    fn check(&self, fields: &Fields, site: &Site) -> Result<(), (String, String)>;
    /// The JSON Schema of its own fields (an object).
    fn schema(&self, generator: &mut schemars::SchemaGenerator) -> schemars::Schema;
    /// [`Action::restarts`] of the action these fields make (None when they do not parse).
    fn restarts(&self, fields: &Fields) -> Option<Restart>;
    /// [`Action::disk_use`] of the action these fields make.
    fn disk_use(&self, fields: &Fields) -> DiskUse;
}

/// An [`Action`] registered with its backend.
pub struct Registered<A>(PhantomData<fn() -> A>);

impl<A> Registered<A> {
    pub const NEW: Self = Registered(PhantomData);
}

impl<A: Action> Registered<A> {
    /// The fields as `A`; the error names the field (`""`: the whole fault).
    pub fn parse(&self, fields: &Fields) -> Result<A, (String, String)> {
        let value = serde_json::Value::Object(fields.clone());
        serde_path_to_error::deserialize(&value).map_err(|e| {
            let path = e.path().to_string();
            (if path == "." { String::new() } else { path }, e.into_inner().to_string())
        })
    }
}

impl<A: Action> FaultType for Registered<A> {
    fn name(&self) -> &'static str {
        A::NAME
    }
    fn heals(&self) -> bool {
        A::HEALS
    }
    fn on_fault_filesystem(&self) -> bool {
        A::ON_FAULT_FILESYSTEM
    }
    fn fields(&self) -> Vec<String> {
        let schema = schemars::SchemaGenerator::default().into_root_schema_for::<A>();
        let properties = schema.get("properties").and_then(|p| p.as_object());
        properties.map(|p| p.keys().cloned().collect()).unwrap_or_default()
    }
    fn check(&self, fields: &Fields, site: &Site) -> Result<(), (String, String)> {
        let action = self.parse(fields)?;
        action.check(site).map_err(|(field, message)| (field.to_string(), message))
    }
    fn schema(&self, generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        A::json_schema(generator)
    }
    fn restarts(&self, fields: &Fields) -> Option<Restart> {
        self.parse(fields).ok()?.restarts()
    }
    fn disk_use(&self, fields: &Fields) -> DiskUse {
        self.parse(fields).map(|a| a.disk_use()).unwrap_or_default()
    }
}

/// `kill, stop and pause`: names as a sentence lists them, each once.
pub fn listed<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    let mut once: Vec<&str> = Vec::new();
    for name in names {
        if !once.contains(&name) {
            once.push(name);
        }
    }
    match once.split_last() {
        None => "none".into(),
        Some((last, [])) => last.to_string(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
    }
}

/// The fields `fault` wrote, held to the actions of its name among every
/// registered one (`every`): the field (`""` for the fault, `action`, or
/// the field's name) and what is wrong.
pub(crate) fn check_written(fault: &FaultSpec, every: &[&'static dyn FaultType]) -> Result<(), (String, String)> {
    let action = fault.action.as_str();
    let same: Vec<&dyn FaultType> = every.iter().copied().filter(|t| t.name() == action).collect();
    if same.is_empty() {
        let known = listed(every.iter().map(|t| t.name()));
        return Err(("action".into(), format!("`{action}` is not a fault faultline knows: use one of {known}")));
    }
    if fault.heal_after.is_some() && !same.iter().any(|t| t.heals()) {
        let takers = listed(every.iter().filter(|t| t.heals()).map(|t| t.name()));
        return Err((
            "heal_after".into(),
            format!("`{action}` leaves nothing to heal; heal_after applies only to action: {takers}"),
        ));
    }
    for field in fault.fields.keys() {
        if same.iter().any(|t| t.fields().contains(field)) {
            continue;
        }
        let takers: Vec<&str> =
            every.iter().filter(|t| t.fields().contains(field)).map(|t| t.name()).collect::<Vec<_>>();
        let message = match takers.is_empty() {
            true => {
                let mut all: Vec<String> = COMMON.iter().map(|c| c.to_string()).collect();
                for t in every {
                    all.extend(t.fields().into_iter().filter(|f| !all.contains(f)).collect::<Vec<_>>());
                }
                let all: Vec<String> = all.iter().map(|f| format!("`{f}`")).collect();
                format!("unknown field `{field}`, expected one of {}", all.join(", "))
            }
            false => format!("applies only to action: {}, not {action}", listed(takers)),
        };
        return Err((field.clone(), message));
    }
    Ok(())
}

/// The common fields first, then the action's own, as written.
impl Serialize for FaultSpec {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("name", &self.name)?;
        map.serialize_entry("at", &self.at)?;
        map.serialize_entry("target", &self.target)?;
        map.serialize_entry("action", &self.action)?;
        if let Some(heal_after) = &self.heal_after {
            map.serialize_entry("heal_after", heal_after)?;
        }
        for (field, value) in &self.fields {
            map.serialize_entry(field, value)?;
        }
        map.end()
    }
}

/// By hand: the action's fields stand beside the common ones and are kept
/// as written, for validation to hold to the registered actions.
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
                let (mut name, mut at, mut action, mut target) = (None, None, None, None);
                let mut heal_after: Option<Option<Dur>> = None;
                let mut fields = Fields::new();
                while let Some(field) = map.next_key::<String>()? {
                    match field.as_str() {
                        "name" => once!(name, "name"),
                        "at" => once!(at, "at"),
                        "action" => once!(action, "action"),
                        "target" => once!(target, "target"),
                        "heal_after" => once!(heal_after, "heal_after"),
                        _ => {
                            let value: serde_json::Value = map.next_value()?;
                            fields.insert(field, value);
                        }
                    }
                }
                Ok(FaultSpec {
                    name: name.ok_or_else(|| A::Error::missing_field("name"))?,
                    at: at.ok_or_else(|| A::Error::missing_field("at"))?,
                    action: action.ok_or_else(|| A::Error::missing_field("action"))?,
                    target: target.ok_or_else(|| A::Error::missing_field("target"))?,
                    heal_after: heal_after.flatten(),
                    fields,
                })
            }
        }
        d.deserialize_map(FaultVisitor)
    }
}

/// The common fields and any other: the build's registered actions, each
/// with its own fields, are in `faultline schema` ([`schema_of`]).
impl JsonSchema for FaultSpec {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "FaultSpec".into()
    }
    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let mut schema = schemars::json_schema!({
            "type": "object",
            "description": "One scheduled fault: name, at, target, and the action with its own fields",
            "required": ["name", "at", "action", "target"],
        });
        schema.insert("properties".into(), common_properties(generator).into());
        schema
    }
}

fn common_properties(generator: &mut schemars::SchemaGenerator) -> serde_json::Map<String, serde_json::Value> {
    let described = |mut s: schemars::Schema, about: &str| {
        s.insert("description".into(), about.into());
        s.to_value()
    };
    let duration = generator.subschema_for::<Dur>();
    [
        ("name", schemars::json_schema!({"type": "string", "description": "Names it in results, the report and gates (`denied_window(NAME)`)."}).to_value()),
        ("at", described(duration.clone(), "Offset into the measured window.")),
        ("target", schemars::json_schema!({"type": "string", "description": "A target of one server by its name, or a selector of a target's members (`kv.primary`, `kv.replicas`, `kv.any`, `kv.member[1]`, `kv-2`, `kv.sentinels[0]`)."}).to_value()),
        ("heal_after", described(duration, "Undo the fault after this long; without it, at the end of the cell.")),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// A fault as the build's actions (`every`, each name once) allow it: one
/// object schema per action, its own fields beside the common ones.
pub fn schema_of(every: &[&'static dyn FaultType], generator: &mut schemars::SchemaGenerator) -> serde_json::Value {
    let mut variants = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for t in every {
        if seen.contains(&t.name()) {
            continue;
        }
        seen.push(t.name());
        let own = t.schema(generator).to_value();
        let mut properties = common_properties(generator);
        if !t.heals() {
            properties.remove("heal_after");
        }
        properties.insert("action".into(), serde_json::json!({"const": t.name()}));
        if let Some(fields) = own.get("properties").and_then(|p| p.as_object()) {
            properties.extend(fields.clone());
        }
        let mut required = vec![serde_json::json!("name"), "at".into(), "action".into(), "target".into()];
        required.extend(own.get("required").and_then(|r| r.as_array()).cloned().unwrap_or_default());
        let mut variant = serde_json::json!({"type": "object", "properties": properties, "required": required,
                                             "additionalProperties": false});
        if let Some(about) = own.get("description") {
            variant["description"] = about.clone();
        }
        variants.push(variant);
    }
    serde_json::json!({"description": "One scheduled fault: name, at, target, and the action with its own fields",
                       "oneOf": variants})
}

#[cfg(test)]
pub(crate) mod testing {
    //! Actions that exist only in this crate's tests, registered the way a
    //! backend registers its own: the spec language knows nothing of them
    //! but what [`FaultType`] tells.
    use super::*;

    /// Like a provider's kill: a signal, and it heals.
    #[derive(Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    pub struct Kill {
        #[allow(dead_code)]
        pub signal: Option<String>,
    }
    impl Action for Kill {
        const NAME: &'static str = "kill";
        const HEALS: bool = true;
    }

    /// Like a provider's restart, refusing signals it cannot send.
    #[derive(Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    pub struct Restarting {
        pub signal: Option<String>,
    }
    impl Action for Restarting {
        const NAME: &'static str = "restart";
        fn check(&self, _: &Site) -> Result<(), (&'static str, String)> {
            match self.signal.as_deref() {
                Some(s) if s != "SIGTERM" => Err(("signal", "a restart takes SIGKILL or SIGTERM".into())),
                _ => Ok(()),
            }
        }
    }

    /// Like a provider's pause: no fields; it heals.
    #[derive(Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    pub struct Pause {}
    impl Action for Pause {
        const NAME: &'static str = "pause";
        const HEALS: bool = true;
    }

    /// Like docker's isolate: no fields; it heals.
    #[derive(Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    pub struct Isolate {}
    impl Action for Isolate {
        const NAME: &'static str = "isolate";
        const HEALS: bool = true;
    }

    /// Like a kind's own fault (MongoDB's stepdown).
    #[derive(Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    pub struct Stepdown {
        #[allow(dead_code)]
        pub seconds: Option<Dur>,
        #[allow(dead_code)]
        #[serde(default)]
        pub force: bool,
    }
    impl Action for Stepdown {
        const NAME: &'static str = "stepdown";
    }

    pub static PROCESS: [&dyn FaultType; 3] =
        [&Registered::<Kill>::NEW, &Registered::<Restarting>::NEW, &Registered::<Pause>::NEW];
    pub static DOCKER: [&dyn FaultType; 2] = [&Registered::<Kill>::NEW, &Registered::<Isolate>::NEW];
    pub static OWN: [&dyn FaultType; 1] = [&Registered::<Stepdown>::NEW];
}

#[cfg(test)]
mod tests {
    use super::testing::*;
    use super::*;

    fn fault(yaml: &str) -> FaultSpec {
        serde_yaml_ng::from_str(yaml).unwrap_or_else(|e| panic!("{yaml}: {e}"))
    }

    fn every() -> Vec<&'static dyn FaultType> {
        DOCKER.iter().chain(PROCESS.iter()).chain(OWN.iter()).copied().collect()
    }

    #[test]
    fn a_fault_keeps_the_common_fields_and_the_actions_own_as_written() {
        let f = fault("{name: f, at: 1s, action: kill, target: t, heal_after: 2s, signal: SIGTERM}");
        assert_eq!((f.action.as_str(), f.heal_after.map(|d| d.0.as_secs())), ("kill", Some(2)));
        assert_eq!(f.fields.get("signal"), Some(&serde_json::json!("SIGTERM")));
        let written = serde_json::to_value(&f).unwrap();
        let back: FaultSpec = serde_json::from_value(written).unwrap();
        assert_eq!(back, f);
        let e = serde_yaml_ng::from_str::<FaultSpec>("{name: f, at: 1s, target: t}").unwrap_err();
        assert!(e.to_string().contains("missing field `action`"), "{e}");
    }

    #[test]
    fn written_fields_are_held_to_the_registered_actions() {
        let every = every();
        let check = |yaml: &str| check_written(&fault(yaml), &every);
        assert!(check("{name: f, at: 1s, action: kill, target: t, signal: SIGTERM, heal_after: 1s}").is_ok());
        let (field, message) = check("{name: f, signal: SIGTERM, at: 1s, action: isolate, target: t}").unwrap_err();
        assert_eq!(
            (field.as_str(), message.as_str()),
            ("signal", "applies only to action: kill and restart, not isolate")
        );
        let (field, message) = check("{name: f, at: 1s, action: restart, target: t, heal_after: 1s}").unwrap_err();
        assert_eq!(field, "heal_after");
        assert_eq!(
            message,
            "`restart` leaves nothing to heal; heal_after applies only to action: kill, isolate and pause"
        );
        let (field, message) = check("{name: f, at: 1s, action: kill, target: t, sigal: x}").unwrap_err();
        assert_eq!(field, "sigal");
        assert!(message.starts_with("unknown field `sigal`, expected one of `name`, `at`, `action`"), "{message}");
        assert!(message.contains("`signal`") && message.contains("`force`"), "{message}");
        let (field, message) = check("{name: f, at: 1s, action: explode, target: t}").unwrap_err();
        assert_eq!(field, "action");
        assert_eq!(
            message,
            "`explode` is not a fault faultline knows: use one of kill, isolate, restart, pause and stepdown"
        );
    }

    #[test]
    fn a_registered_type_parses_and_checks_its_own_fields() {
        let target: TargetSpec = serde_yaml_ng::from_str("{kind: redis, provider: process}").unwrap();
        let site = Site { target_name: "t", target: &target, selector: None };
        let restart = &Registered::<Restarting>::NEW;
        let fields = |yaml: &str| fault(yaml).fields;
        assert!(restart
            .check(&fields("{name: f, at: 1s, action: restart, target: t, signal: SIGTERM}"), &site)
            .is_ok());
        let (field, message) =
            restart.check(&fields("{name: f, at: 1s, action: restart, target: t, signal: SIGHUP}"), &site).unwrap_err();
        assert_eq!((field.as_str(), message.as_str()), ("signal", "a restart takes SIGKILL or SIGTERM"));
        let stepdown = &Registered::<Stepdown>::NEW;
        let (field, message) = stepdown
            .check(&fields("{name: f, at: 1s, action: stepdown, target: t, seconds: soon}"), &site)
            .unwrap_err();
        assert_eq!(field, "seconds");
        assert!(!message.is_empty());
        assert_eq!(stepdown.fields(), vec!["force".to_string(), "seconds".to_string()]);
    }

    #[test]
    fn the_schema_holds_each_action_once_with_the_common_fields() {
        let mut generator = schemars::SchemaGenerator::default();
        let schema = schema_of(&every(), &mut generator);
        let variants = schema["oneOf"].as_array().unwrap();
        let names: Vec<&str> = variants.iter().map(|v| v["properties"]["action"]["const"].as_str().unwrap()).collect();
        assert_eq!(names, ["kill", "isolate", "restart", "pause", "stepdown"]);
        for v in variants {
            for field in ["name", "at", "action", "target"] {
                assert!(v["required"].as_array().unwrap().iter().any(|r| r == field), "{v}");
            }
            assert_eq!(v["additionalProperties"], false, "{v}");
        }
        assert!(
            variants[0]["properties"].get("heal_after").is_some() && variants[0]["properties"].get("signal").is_some()
        );
        assert!(variants[2]["properties"].get("heal_after").is_none());
    }
}
