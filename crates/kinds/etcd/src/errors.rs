//! Classifies etcd's errors: which class a failure counts under, its label
//! (etcd's own words after `etcdserver: `, e.g. `no leader`, `request timed
//! out`, `leader changed`; gRPC's code otherwise) and whether a failed
//! write may still have been applied. etcd answers "request timed out"
//! after it proposed the write, which may commit later: such a write is
//! held as Jepsen does, one that may or may not have happened.

use etcd_client::Error;
use tonic::Code;

use faultline_kind::{Applied, DriverError};
use faultline_model::stats::ErrorClass;

/// etcd's refusals that come before the write is proposed.
const REFUSED_BEFORE_PROPOSING: &[&str] = &["no leader", "not capable", "too many requests", "key exists"];

/// `write`: the op changes data, so "may have been applied" matters.
pub fn classify(error: &Error, write: bool) -> DriverError {
    let maybe = if write { Applied::Maybe } else { Applied::No };
    let Error::GRpcStatus(status) = error else {
        // The transport could not carry the call (no connection).
        return DriverError {
            class: ErrorClass::Connection,
            applied: Applied::No,
            code: Some("transport".into()),
            message: error.to_string(),
        };
    };
    let message = status.message();
    if let Some(said) = message.strip_prefix("etcdserver: ") {
        let applied = if REFUSED_BEFORE_PROPOSING.iter().any(|r| said.starts_with(r)) { Applied::No } else { maybe };
        let class = if said.contains("timed out") { ErrorClass::Deadline } else { ErrorClass::Server };
        return DriverError { class, applied, code: Some(said.to_string()), message: message.to_string() };
    }
    let (class, applied) = match status.code() {
        Code::DeadlineExceeded => (ErrorClass::Deadline, maybe),
        // Refused before it reached the server: nothing was sent.
        Code::Unavailable if message.contains("connect") => (ErrorClass::Connection, Applied::No),
        Code::Unavailable | Code::Cancelled | Code::Unknown => (ErrorClass::Connection, maybe),
        _ => (ErrorClass::Server, maybe),
    };
    DriverError { class, applied, code: Some(format!("{:?}", status.code())), message: message.to_string() }
}

/// One line for an error: etcd's own words where it gave some.
pub fn explain(error: &Error) -> String {
    match error {
        Error::GRpcStatus(status) => format!("{:?}: {}", status.code(), status.message()),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: Code, message: &str) -> Error {
        Error::GRpcStatus(tonic::Status::new(code, message))
    }

    #[test]
    fn etcds_own_words_label_the_failure() {
        let timed_out = classify(&status(Code::Unavailable, "etcdserver: request timed out"), true);
        assert_eq!((timed_out.class, timed_out.applied), (ErrorClass::Deadline, Applied::Maybe));
        assert_eq!(timed_out.code.as_deref(), Some("request timed out"));
        let no_leader = classify(&status(Code::Unavailable, "etcdserver: no leader"), true);
        assert_eq!((no_leader.class, no_leader.applied), (ErrorClass::Server, Applied::No));
        let deadline = classify(&status(Code::DeadlineExceeded, "deadline"), true);
        assert_eq!((deadline.class, deadline.applied), (ErrorClass::Deadline, Applied::Maybe));
        let read = classify(&status(Code::DeadlineExceeded, "deadline"), false);
        assert_eq!(read.applied, Applied::No);
        let refused = classify(&status(Code::Unavailable, "tcp connect error: Connection refused"), true);
        assert_eq!((refused.class, refused.applied), (ErrorClass::Connection, Applied::No));
    }
}
