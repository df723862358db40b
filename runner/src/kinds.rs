//! The one place target kinds are registered. Each kind is a crate of its
//! own (crates/kinds/: redis, mongodb, dynamodb) implementing
//! `faultline_kind::TargetDriver` (and, for members in containers,
//! `faultline_kind::topology::TopologyKind`) that declares its [`Kind`];
//! a new kind is that crate plus its entry in [`KINDS`] (and a cargo
//! feature when it brings a heavy driver: then the entry says what the
//! build holds without it). The list is the CLI's because its cargo
//! features choose it; the engine is handed it as [`CATALOG`]. A kind's
//! `options:` are parsed into the kind's own typed struct (so errors name
//! the field), checked, and turned into the kind's driver; the same struct
//! describes them in `faultline schema` (faultline_spec::schema asks the
//! catalog). A scenario's `options:` overlay its target's, key by key, so
//! one campaign can compare, say, read concerns on the same servers.

use faultline_kind::registry::{Kinds, Listed};

/// Every kind faultline has, held or left out of this build. MongoDB,
/// DynamoDB and etcd bring their drivers (the MongoDB driver, the AWS SDK,
/// tonic), which a Redis-only build leaves out with their cargo features; a
/// spec naming one then gets the feature to build with.
const KINDS: &[Listed] = &[
    Listed::Held(faultline_kind_redis::KIND),
    #[cfg(feature = "mongodb")]
    Listed::Held(faultline_kind_mongodb::KIND),
    #[cfg(not(feature = "mongodb"))]
    Listed::LeftOut("mongodb"),
    #[cfg(feature = "dynamodb")]
    Listed::Held(faultline_kind_dynamodb::KIND),
    #[cfg(not(feature = "dynamodb"))]
    Listed::LeftOut("dynamodb"),
    #[cfg(feature = "etcd")]
    Listed::Held(faultline_kind_etcd::KIND),
    #[cfg(not(feature = "etcd"))]
    Listed::LeftOut("etcd"),
];

/// The one catalog: every spec is loaded against it, and the engine and
/// teardown find kinds in it.
pub static CATALOG: Kinds = Kinds {
    kinds: KINDS,
    checkers: faultline_check::checker::declared,
    provider_faults: faultline_engine::fault::provider_faults,
};

#[cfg(test)]
mod tests {
    use super::*;
    use faultline_model::ops::TargetKind;
    use faultline_spec::options::overlay;
    use serde_json::json;

    #[test]
    fn a_scenario_overlays_its_targets_options_key_by_key() {
        let target = json!({"read_concern": "linearizable", "write_concern": {"w": "majority", "j": true}});
        let scenario = json!({"read_concern": "majority", "write_concern": {"j": false}});
        let merged = overlay(Some(&target), Some(&scenario)).unwrap();
        assert_eq!(merged, json!({"read_concern": "majority", "write_concern": {"w": "majority", "j": false}}));
    }

    #[test]
    fn a_kind_this_build_lacks_says_how_to_get_it() {
        let redis_only = Kinds {
            kinds: &[Listed::Held(faultline_kind_redis::KIND), Listed::LeftOut("dynamodb")],
            checkers: faultline_check::checker::declared,
            provider_faults: faultline_engine::fault::provider_faults,
        };
        let message = redis_only.find(&TargetKind::new("dynamodb")).err().unwrap();
        assert!(message.contains("--features dynamodb") && message.contains("holds redis"), "{message}");
        let message = CATALOG.find(&TargetKind::new("cassandra")).err().unwrap();
        assert!(message.starts_with("`cassandra` is not a target kind faultline knows: use one of redis"), "{message}");
        assert!(CATALOG.find(&TargetKind::new("redis")).is_ok());
    }

    /// Every kind this build holds is in the schema's `kind`, and each
    /// kind's own options reach it (MongoDB's read concern, DynamoDB's table).
    #[test]
    fn the_schema_names_each_kind_and_its_options() {
        let schema = faultline_spec::schema::of(&CATALOG);
        let target = &schema["$defs"]["TargetSpec"];
        let kinds: Vec<_> = target["properties"]["kind"]["enum"].as_array().unwrap().iter().collect();
        assert_eq!(kinds.len(), CATALOG.held().count());
        let rules = target["allOf"].as_array().unwrap();
        assert_eq!(rules.len(), CATALOG.held().count());
        let text = serde_json::to_string(&schema).unwrap();
        #[cfg(feature = "mongodb")]
        assert!(text.contains("read_concern") && text.contains("\"const\":\"mongodb\""), "{text}");
        #[cfg(feature = "dynamodb")]
        assert!(text.contains("settle") && text.contains("\"const\":\"dynamodb\""), "{text}");
        assert!(text.contains("ca_file") && text.contains("\"const\":\"redis\""), "{text}");
        let checkers = &schema["$defs"]["ScenarioSpec"]["properties"]["checkers"]["items"]["enum"];
        assert_eq!(checkers, &schema["properties"]["checkers"]["items"]["enum"]);
        assert!(checkers.as_array().unwrap().contains(&json!("hot-key")), "{checkers}");
        // Every registered fault action, each with its own fields beside the common ones.
        let faults = schema["$defs"]["FaultSpec"]["oneOf"].as_array().unwrap();
        let action = |name: &str| faults.iter().find(|f| f["properties"]["action"]["const"] == name).unwrap();
        assert!(action("pause")["properties"]["heal_after"].is_object());
        assert!(
            action("exec")["properties"]["command"].is_object() && action("exec")["properties"]["heal_after"].is_null()
        );
        assert!(action("failover")["properties"]["coordinated"].is_object());
        #[cfg(feature = "mongodb")]
        assert!(action("stepdown")["properties"]["catch_up"].is_object());
        let duration = action("pause")["properties"]["heal_after"]["$ref"].as_str().unwrap();
        assert!(schema.pointer(&duration.replace("#/", "/")).is_some(), "{duration} is defined");
    }

    #[cfg(feature = "mongodb")]
    #[test]
    fn option_errors_name_the_field() {
        let bad = json!({"read_concern": "strong"});
        let (field, message) = CATALOG.driver(&TargetKind::new("mongodb"), Some(&bad)).err().unwrap();
        assert_eq!(field, "read_concern");
        assert!(message.contains("linearizable"), "{message}");
        let (field, _) =
            CATALOG.driver(&TargetKind::new("mongodb"), Some(&json!({"write_concern": {"w": "all"}}))).err().unwrap();
        assert_eq!(field, "write_concern.w");
        let (field, message) =
            CATALOG.driver(&TargetKind::new("redis"), Some(&json!({"read_concern": "majority"}))).err().unwrap();
        assert_eq!(field, "read_concern");
        assert!(message.starts_with("unknown field `read_concern`, expected one of `ca_file`"), "{message}");
        let (field, message) =
            CATALOG.driver(&TargetKind::new("redis"), Some(&json!({"cert_file": "c.pem"}))).err().unwrap();
        assert_eq!((field.as_str(), message.as_str()), ("cert_file", "needs its private key in `key_file`"));
        let (field, message) =
            CATALOG.driver(&TargetKind::new("redis"), Some(&json!({"ca_file": "/nonexistent/ca.pem"}))).err().unwrap();
        assert_eq!(field, "ca_file");
        assert!(message.starts_with("cannot read /nonexistent/ca.pem"), "{message}");
    }
}
