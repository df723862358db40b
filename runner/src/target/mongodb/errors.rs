//! Classifies the driver's errors: which class a failure counts under, its
//! label (the server's code name, e.g. `NotWritablePrimary`,
//! `MaxTimeMSExpired`, `InterruptedDueToReplStateChange`; client-side
//! `ServerSelectionTimeout`, `network`, `PoolCleared`), and whether a failed
//! write may still have been applied — the checkers hold such a write as
//! Jepsen does, as one that may or may not have happened.

use mongodb::error::{Error, ErrorKind, WriteFailure};

use crate::metrics::ErrorClass;
use crate::target::{Applied, DriverError};

/// Server errors that mean the write was refused before it was acted on:
/// the member was not (or no longer) primary, or the document exists.
const REFUSED_BEFORE_ACTING: &[&str] =
    &["NotWritablePrimary", "NotPrimaryNoSecondaryOk", "NotPrimaryOrSecondary", "DuplicateKey", "PrimarySteppedDown"];

/// `write`: the op changes data, so "may have been applied" matters.
pub fn classify(error: &Error, write: bool) -> DriverError {
    let maybe = if write { Applied::Maybe } else { Applied::No };
    let server = |code: &str, message: &str, applied: Applied| DriverError {
        class: ErrorClass::Server,
        applied,
        code: Some(if code.is_empty() { "unnamed".into() } else { code.to_string() }),
        message: message.to_string(),
    };
    let client = |class: ErrorClass, code: &str, applied: Applied| DriverError {
        class,
        applied,
        code: Some(code.into()),
        message: first_line(&error.to_string()),
    };
    match error.kind.as_ref() {
        ErrorKind::Command(c) => {
            let applied = if REFUSED_BEFORE_ACTING.contains(&c.code_name.as_str()) { Applied::No } else { maybe };
            server(&c.code_name, &c.message, applied)
        }
        // Applied on the primary, not yet acknowledged by enough members.
        ErrorKind::Write(WriteFailure::WriteConcernError(w)) => server(&w.code_name, &w.message, maybe),
        ErrorKind::Write(WriteFailure::WriteError(w)) => {
            let name = w.code_name.clone().unwrap_or_else(|| format!("code {}", w.code));
            let applied = if REFUSED_BEFORE_ACTING.contains(&name.as_str()) { Applied::No } else { maybe };
            server(&name, &w.message, applied)
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

/// Driver messages can run over many lines; the first says what happened.
fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or_default().chars().take(300).collect()
}
