//! The one place target kinds are registered: each kind's `options:` are
//! parsed into its own typed struct (so errors name the field), checked,
//! and turned into the kind's driver. A scenario's `options:` overlay its
//! target's, key by key, so one campaign can compare, say, read concerns on
//! the same servers.

use std::sync::Arc;

use serde::de::DeserializeOwned;

use super::dynamodb::{DynamoDriver, DynamoOptions};
use super::mongodb::{MongoDriver, MongoOptions};
use super::redis::RedisDriver;
use super::TargetDriver;
use crate::spec::TargetKind;

pub use faultline_spec::options::{overlay, OptionsError};

/// The kinds this build holds, for the spec loader.
pub struct Kinds;

/// The one catalog: every spec is loaded against it.
pub static CATALOG: Kinds = Kinds;

impl faultline_spec::Catalog for Kinds {
    fn kind(
        &self,
        kind: TargetKind,
        options: Option<&serde_json::Value>,
    ) -> Result<Arc<dyn faultline_spec::KindInfo>, OptionsError> {
        driver(kind, options).map(|d| d as Arc<dyn faultline_spec::KindInfo>)
    }
}

/// The driver for `kind` with `options` (the target's, overlaid by a
/// scenario's when it has some).
pub fn driver(kind: TargetKind, options: Option<&serde_json::Value>) -> Result<Arc<dyn TargetDriver>, OptionsError> {
    Ok(match kind {
        TargetKind::Redis => {
            no_options(kind, options)?;
            Arc::new(RedisDriver)
        }
        TargetKind::Mongodb => {
            let options: MongoOptions = parse(options)?;
            options.check().map_err(|(field, e)| (field.to_string(), e))?;
            Arc::new(MongoDriver { options })
        }
        TargetKind::Dynamodb => {
            let options: DynamoOptions = parse(options)?;
            options.check().map_err(|(field, e)| (field.to_string(), e))?;
            Arc::new(DynamoDriver::new(options))
        }
    })
}

fn parse<T: DeserializeOwned>(options: Option<&serde_json::Value>) -> Result<T, OptionsError> {
    let empty = serde_json::Value::Object(Default::default());
    let value = options.unwrap_or(&empty);
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." { String::new() } else { path };
        (field, e.into_inner().to_string())
    })
}

fn no_options(kind: TargetKind, options: Option<&serde_json::Value>) -> Result<(), OptionsError> {
    match options {
        Some(serde_json::Value::Object(m)) if !m.is_empty() => {
            let first = m.keys().next().expect("not empty").clone();
            Err((first, format!("{} targets take no options", kind.as_str())))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_scenario_overlays_its_targets_options_key_by_key() {
        let target = json!({"read_concern": "linearizable", "write_concern": {"w": "majority", "j": true}});
        let scenario = json!({"read_concern": "majority", "write_concern": {"j": false}});
        let merged = overlay(Some(&target), Some(&scenario)).unwrap();
        assert_eq!(merged, json!({"read_concern": "majority", "write_concern": {"w": "majority", "j": false}}));
    }

    #[test]
    fn option_errors_name_the_field() {
        let bad = json!({"read_concern": "strong"});
        let (field, message) = driver(TargetKind::Mongodb, Some(&bad)).err().unwrap();
        assert_eq!(field, "read_concern");
        assert!(message.contains("linearizable"), "{message}");
        let (field, _) = driver(TargetKind::Mongodb, Some(&json!({"write_concern": {"w": "all"}}))).err().unwrap();
        assert_eq!(field, "write_concern.w");
        let (field, message) = driver(TargetKind::Redis, Some(&json!({"read_concern": "majority"}))).err().unwrap();
        assert_eq!((field.as_str(), message.as_str()), ("read_concern", "redis targets take no options"));
    }
}
