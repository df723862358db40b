//! Classifies the SDK's errors into the seed's status classes: the HTTP
//! status and the error type (`400 ConditionalCheckFailedException`, `503
//! ServiceUnavailable`), or the client's own `timeout` and `network`, and
//! whether a failed write may still have been applied. A 4xx is a refusal
//! and a 503 a shed (neither applied, as the API's contract says); a 500, a
//! timeout or a broken connection on a write may have been applied, which
//! the checkers hold as an unknown outcome.

use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};

use faultline_kind::{cause, Applied, DriverError};
use faultline_model::stats::ErrorClass;

/// The error types a DynamoDB API answers with 400 when it does not accept
/// the caller (an unknown key, a bad signature, a missing or expired token,
/// a policy that denies it): waiting will not change the answer.
const CREDENTIALS_REFUSED: &[&str] = &[
    "UnrecognizedClientException",
    "InvalidSignatureException",
    "IncompleteSignatureException",
    "MissingAuthenticationToken",
    "MissingAuthenticationTokenException",
    "InvalidClientTokenId",
    "SignatureDoesNotMatch",
    "ExpiredToken",
    "ExpiredTokenException",
    "AccessDeniedException",
    "AuthFailure",
];

/// Whether an answer says the caller's credentials are refused: any 401 or
/// 403, and a 400 of one of [`CREDENTIALS_REFUSED`] (the service and servers
/// speaking its API answer those with 400).
pub fn refuses_credentials(status: u16, code: Option<&str>) -> bool {
    // `com.amazon.coral.service#UnrecognizedClientException` names its type last.
    let code = code.map(|c| c.rsplit('#').next().unwrap_or(c));
    matches!(status, 401 | 403) || status == 400 && code.is_some_and(|c| CREDENTIALS_REFUSED.contains(&c))
}

/// One sentence for a failed call: the server's status, type and words; a
/// redirect and where to; or why the server was not reached, with the fix.
pub fn explain<E>(error: &SdkError<E, HttpResponse>) -> String
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    if let Some(raw) = error.raw_response() {
        let status = raw.status().as_u16();
        if (300..400).contains(&status) {
            return match raw.headers().get("location") {
                Some(to) => format!("the endpoint redirects ({status}) to {to}: use that URI"),
                None => format!("the endpoint answers {status} (a redirect) without saying where to"),
            };
        }
        if matches!(error, SdkError::ServiceError(_)) {
            let said = classify(error, false);
            return format!("{}: {}", said.code.unwrap_or_default(), said.message);
        }
    }
    cause::sentence(&cause::chain(error))
}

/// `write`: the call changes data, so "may have been applied" matters.
pub fn classify<E>(error: &SdkError<E, HttpResponse>, write: bool) -> DriverError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    let maybe = if write { Applied::Maybe } else { Applied::No };
    match error {
        SdkError::ServiceError(context) => {
            let status = context.raw().status().as_u16();
            let err = context.err();
            // An error the SDK could not name (a server's own error page):
            // its body is the only account of what happened.
            let body = context.raw().body().bytes().map(|b| String::from_utf8_lossy(b).into_owned());
            // An XML error page (an IAM-style refusal of the credentials, as
            // moto's auth and some gateways send) names its code and message.
            let xml = |tag: &str| body.as_deref().and_then(|b| xml_element(b, tag));
            let code = err.code().map(str::to_string).or_else(|| xml("Code"));
            let message =
                err.message().map(str::to_string).or_else(|| xml("Message")).or(body.filter(|b| !b.trim().is_empty()));
            server(status, code.as_deref(), message.as_deref(), write)
        }
        SdkError::ResponseError(context) => {
            // A response the SDK could not read: the server acted or not.
            let status = context.raw().status().as_u16();
            DriverError {
                class: ErrorClass::Server,
                applied: maybe,
                code: Some("UnreadableResponse".into()),
                message: format!("HTTP {status}: {}", explain(error)),
            }
        }
        SdkError::TimeoutError(_) => DriverError {
            class: ErrorClass::Deadline,
            applied: maybe,
            code: Some("timeout".into()),
            message: "the SDK's timeout passed before the response".into(),
        },
        SdkError::DispatchFailure(failure) => {
            let (class, code) = match failure.as_connector_error() {
                Some(c) if c.is_timeout() => (ErrorClass::Deadline, "timeout"),
                _ => (ErrorClass::Connection, "network"),
            };
            DriverError { class, applied: maybe, code: Some(code.into()), message: explain(error) }
        }
        // Never sent (a request the SDK could not build or sign).
        _ => DriverError {
            class: ErrorClass::Server,
            applied: Applied::No,
            code: Some("client".into()),
            message: explain(error),
        },
    }
}

/// A service error: its status and type name, applied or not by the status.
pub fn server(status: u16, code: Option<&str>, message: Option<&str>, write: bool) -> DriverError {
    let applied = match status {
        // A shed: the API's "retry it" answer, not acted on.
        503 => Applied::No,
        500..=599 if write => Applied::Maybe,
        _ => Applied::No,
    };
    let code = code.unwrap_or("UnknownError");
    DriverError {
        class: ErrorClass::Server,
        applied,
        code: Some(format!("{status} {code}")),
        message: message.map_or_else(|| code.to_string(), first_line),
    }
}

/// The text of the first `<tag>…</tag>` in an XML error page.
fn xml_element(body: &str, tag: &str) -> Option<String> {
    let start = body.find(&format!("<{tag}>"))? + tag.len() + 2;
    let len = body[start..].find(&format!("</{tag}>"))?;
    Some(body[start..start + len].trim().to_string()).filter(|t| !t.is_empty())
}

/// SDK messages and error pages can run over many lines; the first that
/// says something says what happened.
fn first_line(text: &str) -> String {
    text.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or_default().chars().take(300).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sheds_and_refusals_are_not_applied_a_500_on_a_write_may_be() {
        let shed = server(503, Some("ServiceUnavailable"), Some("slow down"), true);
        assert_eq!((shed.applied, shed.code.as_deref()), (Applied::No, Some("503 ServiceUnavailable")));
        assert_eq!(server(400, Some("ConditionalCheckFailedException"), None, true).applied, Applied::No);
        assert_eq!(server(500, Some("InternalServerError"), None, true).applied, Applied::Maybe);
        assert_eq!(server(500, Some("InternalServerError"), None, false).applied, Applied::No);
    }

    #[test]
    fn an_xml_error_page_names_its_code_and_message() {
        let page = "<?xml version=\"1.0\"?>\n<ErrorResponse><Errors><Error><Code>InvalidClientTokenId</Code>\
                    <Message>The security token included in the request is invalid.</Message></Error></Errors></ErrorResponse>";
        assert_eq!(xml_element(page, "Code").as_deref(), Some("InvalidClientTokenId"));
        assert_eq!(
            xml_element(page, "Message").as_deref(),
            Some("The security token included in the request is invalid.")
        );
        assert_eq!(xml_element("<Code></Code>", "Code"), None);
        assert_eq!(xml_element("no page", "Code"), None);
    }
}
