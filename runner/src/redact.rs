//! Keeps credentials out of everything a run writes or shows: the spec copy,
//! run.log, results.json, report.md, JUnit, the step summary, the console and
//! error messages. Two rules, applied where text leaves faultline: the
//! password in a URI's user info (`redis://:PW@…`, `mongodb://user:PW@…`, or
//! user info without a password, often a token) is replaced, wherever a URI
//! appears; and every credential the spec holds (a value under a key such as
//! `password`, `secret_access_key` or `session_token`, a server argument after
//! a flag such as `--requirepass`, a URI's password) and the AWS secrets in
//! the environment are replaced wherever they appear, also inside files the
//! servers wrote into the run directory (`sweep`).

use std::borrow::Cow;
use std::path::Path;
use std::sync::RwLock;

/// What stands in for a credential. Plain text (not `***`, which YAML reads
/// as an alias), so a redacted spec copy still parses.
pub const MARK: &str = "REDACTED";

/// Shorter values are redacted only where they are a URI's password: replacing
/// every `ab` in a report would destroy it and hide nothing.
const MIN_LITERAL: usize = 4;

/// Files larger than this in the run directory are not swept (a server's data
/// files; the text faultline writes is redacted as it is written).
const MAX_SWEPT_BYTES: u64 = 64 << 20;

/// The credentials of every spec loaded by this process, longest first.
static SECRETS: RwLock<Vec<String>> = RwLock::new(Vec::new());

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

fn remember(found: Vec<String>) {
    let mut secrets = SECRETS.write().unwrap_or_else(|e| e.into_inner());
    for s in found {
        if s.len() >= MIN_LITERAL && s != MARK && !secrets.contains(&s) {
            secrets.push(s);
        }
    }
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
}

/// Whether a key or flag names a credential (`password`, `requirepass`,
/// `--masterauth`, `secret_access_key`, `session_token`, `MONGO_PASSWORD`).
fn names_credential(name: &str) -> bool {
    let name = name.trim_start_matches('-').to_ascii_lowercase();
    ["password", "passwd", "secret", "token", "apikey", "api_key", "api-key", "private_key", "privatekey"]
        .iter()
        .any(|w| name.contains(w))
        || name.ends_with("pass")
        || name.ends_with("auth")
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

/// The word after a credential flag, and the value of `--flag=value`.
fn after_flags(words: impl Iterator<Item = String>, found: &mut Vec<String>) {
    let mut take_next = false;
    for word in words {
        if take_next {
            found.push(word.clone());
        }
        take_next = word.starts_with('-') && names_credential(&word)
            || matches!(word.to_ascii_lowercase().as_str(), "requirepass" | "masterauth");
        if let Some((flag, value)) = word.split_once('=') {
            if names_credential(flag) && !value.is_empty() {
                found.push(value.to_string());
            }
        }
    }
}

/// Where a URI's user info starts and ends (the `…` in `scheme://…@host`).
fn user_info_span(text: &str, scheme_end: usize) -> Option<(usize, usize)> {
    let start = scheme_end + 3;
    let rest = &text[start..];
    let authority_len =
        rest.find(|c: char| c.is_whitespace() || "/?#\"'`<>\\()[]{}|".contains(c)).unwrap_or(rest.len());
    let at = rest[..authority_len].rfind('@')?;
    (at > 0).then_some((start, start + at))
}

/// The password of the first URI in `text` (or its whole user info when it
/// has no `:`).
fn uri_password(text: &str) -> Option<&str> {
    let scheme_end = text.find("://")?;
    let (start, end) = user_info_span(text, scheme_end)?;
    let info = &text[start..end];
    Some(info.split_once(':').map_or(info, |(_, password)| password)).filter(|p| !p.is_empty())
}

/// `input` with every credential replaced by [`MARK`].
pub fn text(input: &str) -> Cow<'_, str> {
    let mut out = Cow::Borrowed(input);
    // URIs' user info, found from the end so earlier offsets stay valid.
    let schemes: Vec<usize> = input.match_indices("://").map(|(i, _)| i).collect();
    for &scheme_end in schemes.iter().rev() {
        let Some((start, end)) = user_info_span(input, scheme_end) else { continue };
        let info = &input[start..end];
        let kept = match info.split_once(':') {
            Some((user, password)) if password != MARK => format!("{user}:{MARK}"),
            None if info != MARK => MARK.to_string(),
            _ => continue,
        };
        out.to_mut().replace_range(start..end, &kept);
    }
    let secrets = SECRETS.read().unwrap_or_else(|e| e.into_inner());
    for secret in secrets.iter() {
        // As written, and as JSON escapes it inside a string.
        let quoted = serde_json::to_string(secret).unwrap_or_default();
        let escaped = quoted.strip_prefix('"').and_then(|q| q.strip_suffix('"')).unwrap_or(secret);
        for form in [secret.as_str(), escaped] {
            if out.contains(form) {
                out = Cow::Owned(out.replace(form, MARK));
            }
        }
    }
    out
}

/// Redacts every file under `dir` (but its recorded histories, which hold
/// only generated keys and values): the servers' logs and whatever else they
/// wrote there.
pub fn sweep(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(kind) = entry.file_type() else { continue };
        if kind.is_dir() && entry.file_name() != "history" {
            sweep(&path);
        } else if kind.is_file() && entry.metadata().is_ok_and(|m| m.len() <= MAX_SWEPT_BYTES) {
            let Ok(bytes) = std::fs::read(&path) else { continue };
            let redacted = match std::str::from_utf8(&bytes) {
                Ok(t) => match text(t) {
                    Cow::Borrowed(_) => continue,
                    Cow::Owned(t) => t.into_bytes(),
                },
                Err(_) => match bytes_without_secrets(&bytes) {
                    Some(b) => b,
                    None => continue,
                },
            };
            let _ = std::fs::write(&path, redacted);
        }
    }
}

/// A binary file with the credentials overwritten, if it holds any.
fn bytes_without_secrets(bytes: &[u8]) -> Option<Vec<u8>> {
    let secrets = SECRETS.read().unwrap_or_else(|e| e.into_inner());
    let mut out = bytes.to_vec();
    let mut changed = false;
    for secret in secrets.iter().map(String::as_bytes) {
        let mut i = 0;
        while let Some(at) = out[i..].windows(secret.len()).position(|w| w == secret) {
            // Same length, so offsets in the file do not move.
            out[i + at..i + at + secret.len()].fill(b'*');
            i += at + secret.len();
            changed = true;
        }
    }
    changed.then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_uris_password_is_replaced_and_its_user_kept() {
        assert_eq!(text("at redis://:pw@127.0.0.1:6379/0 up"), "at redis://:REDACTED@127.0.0.1:6379/0 up");
        assert_eq!(text("\"mongodb://alice:pw@h1,h2/?x=1\""), "\"mongodb://alice:REDACTED@h1,h2/?x=1\"");
        assert_eq!(text("https://tok@example.com/a@b"), "https://REDACTED@example.com/a@b");
        assert_eq!(text("http://127.0.0.1:8000/ and a@b"), "http://127.0.0.1:8000/ and a@b");
        let once = text("redis://u:p@h").into_owned();
        assert_eq!(text(&once), once);
    }

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
        assert_eq!(bytes_without_secrets(b"\0tok-pw-5\0").unwrap(), b"\0********\0");
    }
}
