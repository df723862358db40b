//! The spec's JSON Schema as a build knows it (`faultline schema`): the
//! shape serde and schemars derive from the model, with what the model
//! leaves open filled from the catalog's registrations: `kind` is one of
//! the kinds the build holds and each kind's `options` are described by its
//! own typed options (the model keeps them as plain YAML since it does not
//! know the kinds), `checkers` name the registered checkers, and a fault is
//! one of the registered actions with its own fields.

use serde_json::{json, Value};

use crate::{Catalog, Spec};

/// The whole spec's schema for the build whose registrations `catalog` holds.
pub fn of(catalog: &dyn Catalog) -> Value {
    let mut generator = schemars::SchemaGenerator::default();
    let kinds = catalog.names();
    let options: Vec<Value> = kinds
        .iter()
        .map(|kind| {
            let schema = match catalog.options_schema(kind, &mut generator) {
                Some(schema) => schema.to_value(),
                None => json!({"type": ["object", "null"], "maxProperties": 0}),
            };
            json!({"if": {"properties": {"kind": {"const": kind}}}, "then": {"properties": {"options": schema}}})
        })
        .collect();
    let faults = crate::fault::schema_of(&catalog.every_fault(), &mut generator);
    let checkers: Vec<&str> = catalog.checkers().iter().map(|c| c.name()).collect();
    let mut root = generator.into_root_schema_for::<Spec>().to_value();
    at(&mut root, "/$defs/TargetSpec/properties/kind")["enum"] = kinds.into();
    at(&mut root, "/$defs/TargetSpec")["allOf"] = options.into();
    *at(&mut root, "/$defs/FaultSpec") = faults;
    for checker_list in ["/properties/checkers/items", "/$defs/ScenarioSpec/properties/checkers/items"] {
        at(&mut root, checker_list)["enum"] = checkers.clone().into();
    }
    root
}

/// The part of the derived schema at `pointer`, which the model's types
/// define: a renamed type or field fails here, never silently adds a part.
fn at<'a>(root: &'a mut Value, pointer: &str) -> &'a mut Value {
    root.pointer_mut(pointer).unwrap_or_else(|| panic!("the spec's derived schema has no {pointer}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::plain::Plain;

    /// Every `$ref` names a definition the schema holds, and the parts the
    /// catalog fills are where the model's types put them.
    #[test]
    fn the_catalog_fills_the_derived_schema_and_every_reference_resolves() {
        let schema = of(&Plain);
        fn refs<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
            match v {
                Value::Object(m) => {
                    out.extend(m.get("$ref").and_then(Value::as_str));
                    m.values().for_each(|v| refs(v, out));
                }
                Value::Array(a) => a.iter().for_each(|v| refs(v, out)),
                _ => {}
            }
        }
        let mut found = Vec::new();
        refs(&schema, &mut found);
        assert!(!found.is_empty());
        for r in found {
            let pointer = r.strip_prefix('#').unwrap_or_else(|| panic!("{r} is local"));
            assert!(schema.pointer(pointer).is_some(), "{r} resolves");
        }
        let target = &schema["$defs"]["TargetSpec"];
        assert_eq!(target["properties"]["kind"]["enum"], json!(["redis", "mongodb", "dynamodb"]));
        assert_eq!(target["allOf"].as_array().map(Vec::len), Some(3));
        let faults = schema["$defs"]["FaultSpec"]["oneOf"].as_array().unwrap();
        let every = Plain.every_fault();
        assert!(!faults.is_empty() && faults.len() <= every.len(), "one schema per action");
        // A checker's name, as the model types it, and one of the registered ones.
        let checkers = &schema["properties"]["checkers"]["items"];
        let named = checkers["$ref"].as_str().and_then(|r| schema.pointer(r.trim_start_matches('#')));
        assert_eq!(named.unwrap_or(checkers)["type"], "string", "{checkers}");
        assert!(checkers["enum"].as_array().is_some_and(|c| !c.is_empty()));
        assert_eq!(checkers, &schema["$defs"]["ScenarioSpec"]["properties"]["checkers"]["items"]);
    }
}
