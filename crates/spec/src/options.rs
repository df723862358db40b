//! A target kind's `options:` as the spec holds them (untyped until the
//! kind parses them), and how a scenario's options overlay its target's.

/// A problem with a kind's options: the field under `options` (dotted, may
/// be empty for the whole map) and what is wrong.
pub type OptionsError = (String, String);

/// `scenario`'s options over `target`'s: maps merge key by key (deeply),
/// anything else is replaced.
pub fn overlay(target: Option<&serde_json::Value>, scenario: Option<&serde_json::Value>) -> Option<serde_json::Value> {
    fn merge(base: &mut serde_json::Value, over: &serde_json::Value) {
        match (base, over) {
            (serde_json::Value::Object(b), serde_json::Value::Object(o)) => {
                for (k, v) in o {
                    match b.get_mut(k) {
                        Some(existing) => merge(existing, v),
                        None => {
                            b.insert(k.clone(), v.clone());
                        }
                    }
                }
            }
            (b, o) => *b = o.clone(),
        }
    }
    match (target, scenario) {
        (None, None) => None,
        (Some(t), None) => Some(t.clone()),
        (None, Some(s)) => Some(s.clone()),
        (Some(t), Some(s)) => {
            let mut merged = t.clone();
            merge(&mut merged, s);
            Some(merged)
        }
    }
}
