//! Keeps credentials out of everything a run writes or shows: the spec copy,
//! run.log, results.json, report.md, JUnit, the step summary, the console and
//! error messages. Two rules, applied where text leaves faultline: the
//! password in a URI's user info (`redis://:PW@…`, `mongodb://user:PW@…`, or
//! user info without a password, often a token) is replaced, wherever a URI
//! appears; and every credential the spec holds (a value under a key such as
//! `password`, `secret_access_key` or `session_token`, a server argument after
//! a flag such as `--requirepass`, a URI's password) and the AWS secrets in
//! the environment are replaced wherever they appear, also inside files the
//! servers wrote into the run directory (`sweep`). Finding a spec's
//! credentials in its YAML is the spec loader's; it calls [`remember`].

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

/// Adds credentials to those [`text`] replaces (shorter ones only as URI
/// passwords).
pub fn remember(found: Vec<String>) {
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
pub fn names_credential(name: &str) -> bool {
    let name = name.trim_start_matches('-').to_ascii_lowercase();
    ["password", "passwd", "secret", "token", "apikey", "api_key", "api-key", "private_key", "privatekey"]
        .iter()
        .any(|w| name.contains(w))
        || name.ends_with("pass")
        || name.ends_with("auth")
}

/// The word after a credential flag, and the value of `--flag=value`.
pub fn after_flags(words: impl Iterator<Item = String>, found: &mut Vec<String>) {
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
pub fn uri_password(text: &str) -> Option<&str> {
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
    fn remembered_credentials_are_replaced_in_text_json_and_binary() {
        let mut found = Vec::new();
        after_flags(
            ["--requirepass", "flag-pw-1", "--masterauth=flag-pw-2", "--port", "6379"].map(String::from).into_iter(),
            &mut found,
        );
        assert_eq!(found, ["flag-pw-1", "flag-pw-2"]);
        remember(vec!["key-pw-3".into(), "ab".into()]);
        remember(found);
        assert_eq!(text("args: --requirepass flag-pw-1"), "args: --requirepass REDACTED");
        assert_eq!(text(r#"{"k": "a\"key-pw-3"}"#), r#"{"k": "a\"REDACTED"}"#);
        assert_eq!(text("ab stays"), "ab stays", "too short to replace outside a URI");
        assert_eq!(bytes_without_secrets(b"\0flag-pw-2\0").unwrap(), b"\0*********\0");
    }
}
