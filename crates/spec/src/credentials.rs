//! Finds the credentials a spec holds, by key, flag and URI, in its resolved
//! YAML tree, and hands them to `faultline_model::redact`, which keeps them
//! out of everything a run writes or shows.

use faultline_model::redact::{after_flags, names_credential, remember, uri_password};

/// Remembers the credentials a spec (its resolved YAML tree) holds, and those
/// the AWS environment variables hold.
pub fn remember_spec(tree: &serde_yaml_ng::Value) {
    let mut found = Vec::new();
    collect(tree, false, &mut found);
    for var in ["AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"] {
        found.extend(std::env::var(var).ok());
    }
    remember(found);
}

/// `secret`: the value sits under a key that names a credential.
fn collect(value: &serde_yaml_ng::Value, secret: bool, found: &mut Vec<String>) {
    use serde_yaml_ng::Value;
    match value {
        Value::String(s) => {
            if secret {
                found.push(s.clone());
            }
            found.extend(uri_password(s).map(str::to_string));
            after_flags(s.split_whitespace().map(str::to_string), found);
        }
        Value::Number(n) if secret => found.push(n.to_string()),
        Value::Sequence(items) => {
            for item in items {
                collect(item, secret, found);
            }
            // Server arguments: the one after `--requirepass` is a password.
            let words = items.iter().filter_map(Value::as_str).flat_map(|s| s.split_whitespace()).map(str::to_string);
            after_flags(words, found);
        }
        Value::Mapping(map) => {
            for (k, v) in map {
                collect(v, secret || k.as_str().is_some_and(names_credential), found);
            }
        }
        Value::Tagged(tagged) => collect(&tagged.value, secret, found),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use faultline_model::redact::text;

    #[test]
    fn credentials_in_a_spec_are_found_by_key_flag_and_uri() {
        let tree: serde_yaml_ng::Value = serde_yaml_ng::from_str(
            "targets:\n  a: {uri: 'redis://:uri-pw-1@h:1', args: [--requirepass, arg-pw-2, '--masterauth=arg-pw-3']}\n  \
             b: {options: {credentials: {access_key_id: AKID, secret_access_key: key-pw-4, session_token: tok-pw-5}}}\n  \
             c: {env: {MONGO_INITDB_ROOT_PASSWORD: env-pw-6}, args: ['requirepass conf-pw-7']}\n  \
             d: {options: {read_concern: majority, authMechanism: SCRAM-SHA-256}}\n",
        )
        .unwrap();
        let mut found = Vec::new();
        collect(&tree, false, &mut found);
        for pw in ["uri-pw-1", "arg-pw-2", "arg-pw-3", "key-pw-4", "tok-pw-5", "env-pw-6", "conf-pw-7"] {
            assert!(found.iter().any(|f| f == pw), "{pw} not found in {found:?}");
        }
        for kept in ["AKID", "majority", "SCRAM-SHA-256", "h:1"] {
            assert!(!found.iter().any(|f| f == kept), "{kept} taken for a credential: {found:?}");
        }
        remember(found);
        assert_eq!(text("args: --requirepass arg-pw-2"), "args: --requirepass REDACTED");
        assert_eq!(text(r#"{"k": "a\"key-pw-4"}"#), r#"{"k": "a\"REDACTED"}"#);
    }
}
