//! Classifies the driver's errors: which class a failure counts under, its
//! label (the server's code name, e.g. `NotWritablePrimary`,
//! `MaxTimeMSExpired`, `InterruptedDueToReplStateChange`; client-side
//! `ServerSelectionTimeout`, `network`, `PoolCleared`), and whether a failed
//! write may still have been applied — the checkers hold such a write as
//! Jepsen does, as one that may or may not have happened.

use mongodb::error::{Error, ErrorKind, WriteFailure};

use faultline_kind::{cause, Applied, DriverError};
use faultline_model::stats::ErrorClass;

/// Server errors that mean the write was refused before it was acted on:
/// the member was not (or no longer) primary, or the document exists.
const REFUSED_BEFORE_ACTING: &[&str] =
    &["NotWritablePrimary", "NotPrimaryNoSecondaryOk", "NotPrimaryOrSecondary", "DuplicateKey", "PrimarySteppedDown"];

/// Code names of the codes a server may send without one (write errors
/// often carry only the number).
const CODE_NAMES: &[(i32, &str)] = &[
    (50, "MaxTimeMSExpired"),
    (64, "WriteConcernFailed"),
    (91, "ShutdownInProgress"),
    (189, "PrimarySteppedDown"),
    (262, "ExceededTimeLimit"),
    (10107, "NotWritablePrimary"),
    (11000, "DuplicateKey"),
    (11600, "InterruptedAtShutdown"),
    (11602, "InterruptedDueToReplStateChange"),
    (13435, "NotPrimaryNoSecondaryOk"),
    (13436, "NotPrimaryOrSecondary"),
];

/// The server's name for `code`: the one it sent, else the known one.
fn code_name(code: i32, sent: Option<&str>) -> String {
    match sent.filter(|n| !n.is_empty()) {
        Some(name) => name.to_string(),
        None => {
            CODE_NAMES.iter().find(|(c, _)| *c == code).map_or_else(|| format!("code {code}"), |(_, n)| n.to_string())
        }
    }
}

/// `write`: the op changes data, so "may have been applied" matters.
pub fn classify(error: &Error, write: bool) -> DriverError {
    let maybe = if write { Applied::Maybe } else { Applied::No };
    let server = |code: String, message: &str, applied: Applied| DriverError {
        class: ErrorClass::Server,
        applied,
        code: Some(code),
        message: message.to_string(),
    };
    let client = |class: ErrorClass, code: &str, applied: Applied| DriverError {
        class,
        applied,
        code: Some(code.into()),
        message: explain(error),
    };
    match error.kind.as_ref() {
        ErrorKind::Command(c) => {
            let name = code_name(c.code, Some(&c.code_name));
            let applied = if REFUSED_BEFORE_ACTING.contains(&name.as_str()) { Applied::No } else { maybe };
            server(name, &c.message, applied)
        }
        // Applied on the primary, not yet acknowledged by enough members.
        ErrorKind::Write(WriteFailure::WriteConcernError(w)) => {
            server(code_name(w.code, Some(&w.code_name)), &w.message, maybe)
        }
        ErrorKind::Write(WriteFailure::WriteError(w)) => {
            let name = code_name(w.code, w.code_name.as_deref());
            let applied = if REFUSED_BEFORE_ACTING.contains(&name.as_str()) { Applied::No } else { maybe };
            server(name, &w.message, applied)
        }
        // No server was suitable: nothing was sent.
        ErrorKind::ServerSelection { .. } => client(ErrorClass::Connection, "ServerSelectionTimeout", Applied::No),
        ErrorKind::ConnectionPoolCleared { .. } => client(ErrorClass::Connection, "PoolCleared", maybe),
        ErrorKind::Io(e) if e.kind() == std::io::ErrorKind::TimedOut => {
            client(ErrorClass::Deadline, "network timeout", maybe)
        }
        ErrorKind::Io(_) => client(ErrorClass::Connection, "network", maybe),
        ErrorKind::Authentication { .. } => client(ErrorClass::Server, "Authentication", Applied::No),
        _ => client(ErrorClass::Server, "driver", maybe),
    }
}

/// One sentence for a driver error: a server's refusal as its code name and
/// message (decoded, never the reply's bytes), else the cause of not reaching
/// it, with the fix, instead of the driver's `Kind: …, labels: {…}` dump
/// with the whole topology in it.
pub fn explain(error: &Error) -> String {
    match error.kind.as_ref() {
        ErrorKind::Command(c) => format!("{} ({}): {}", code_name(c.code, Some(&c.code_name)), c.code, c.message),
        ErrorKind::Write(WriteFailure::WriteError(w)) => {
            format!("{} ({}): {}", code_name(w.code, w.code_name.as_deref()), w.code, w.message)
        }
        ErrorKind::Write(WriteFailure::WriteConcernError(w)) => {
            format!("{} ({}): {}", code_name(w.code, Some(&w.code_name)), w.code, w.message)
        }
        ErrorKind::ServerSelection { message, .. } => selection_failed(message),
        _ => cause::sentence(&cause::chain(error).iter().map(|c| strip_driver_wrapping(c)).collect::<Vec<_>>()),
    }
}

/// The server refused the credentials (a wrong user or password, an
/// unknown mechanism): no later probe can succeed, so readiness ends at once.
pub fn refuses_credentials(error: &Error) -> bool {
    match error.kind.as_ref() {
        ErrorKind::Authentication { .. } => true,
        // 18 AuthenticationFailed, 13 Unauthorized.
        ErrorKind::Command(c) => matches!(c.code, 13 | 18),
        // An authentication failure while connecting ends up in the dump.
        ErrorKind::ServerSelection { message, .. } => {
            message.contains("Authentication") || message.contains("AuthenticationFailed")
        }
        _ => false,
    }
}

/// The driver's topology dump names each server's last error: that is the cause.
fn selection_failed(dump: &str) -> String {
    let last = dump.rsplit("Error: ").next().unwrap_or(dump);
    format!("no server could be selected: {}", cause::sentence(&[strip_driver_wrapping(last)]))
}

/// `Kind: I/O error: refused, labels: {}` → `I/O error: refused`.
fn strip_driver_wrapping(text: &str) -> String {
    let text = text.trim().trim_start_matches("Kind: ");
    let text = text.split(", labels: ").next().unwrap_or(text);
    text.trim_end_matches([' ', '}', ']', ',']).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_sent_without_a_name_get_the_servers_name_for_them() {
        assert_eq!(code_name(11000, None), "DuplicateKey");
        assert_eq!(code_name(10107, Some("")), "NotWritablePrimary");
        assert_eq!(code_name(10107, Some("NotMaster")), "NotMaster");
        assert_eq!(code_name(4242, None), "code 4242");
    }

    #[test]
    fn a_server_selection_failure_says_the_servers_own_error() {
        let dump = "Server selection timeout: No available servers. Topology: { Type: Unknown, Servers: [ { Address: 127.0.0.1:1, Type: Unknown, Error: Kind: I/O error: Connection refused (os error 111), labels: {} } ] }";
        let said = selection_failed(dump);
        assert!(said.starts_with("no server could be selected: connection refused"), "{said}");
    }
}
