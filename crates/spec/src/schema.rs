//! The spec's JSON Schema as a build knows it (`faultline schema`): the
//! shape serde and schemars derive from the model, with what the model
//! leaves open filled from the catalog's registrations: `kind` is one of
//! the kinds the build holds and each kind's `options` are described by its
//! own typed options (the model keeps them as plain YAML since it does not
//! know the kinds), `checkers` name the registered checkers, and a fault is
//! one of the registered actions with its own fields.

use crate::{Catalog, Spec};

/// The whole spec's schema for the build whose registrations `catalog` holds.
pub fn of(catalog: &dyn Catalog) -> serde_json::Value {
    let mut generator = schemars::SchemaGenerator::default();
    let kinds = catalog.names();
    let options: Vec<_> = kinds
        .iter()
        .map(|kind| {
            let schema = match catalog.options_schema(kind, &mut generator) {
                Some(schema) => schema.to_value(),
                None => serde_json::json!({"type": ["object", "null"], "maxProperties": 0}),
            };
            serde_json::json!({"if": {"properties": {"kind": {"const": kind}}}, "then": {"properties": {"options": schema}}})
        })
        .collect();
    let faults = crate::fault::schema_of(&catalog.every_fault(), &mut generator);
    let checkers: Vec<&str> = catalog.checkers().iter().map(|c| c.name()).collect();
    let mut root = generator.into_root_schema_for::<Spec>().to_value();
    let defs = &mut root["$defs"];
    defs["TargetSpec"]["properties"]["kind"]["enum"] = kinds.into();
    defs["TargetSpec"]["allOf"] = options.into();
    defs["FaultSpec"] = faults;
    defs["ScenarioSpec"]["properties"]["checkers"]["items"]["enum"] = checkers.clone().into();
    root["properties"]["checkers"]["items"]["enum"] = checkers.into();
    root
}
