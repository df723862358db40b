//! Turns a client library's error (the AWS SDK's, the MongoDB driver's) into
//! one sentence with the cause and the fix, instead of its `Debug` dump of
//! several KB: an untrusted certificate, TLS spoken to a plain endpoint or
//! plain HTTP to a TLS one, nothing listening, a name that does not resolve.
//! Anything else is said by the innermost cause's first line.

/// The longest an error line gets; a cause is said well before this.
const MAX_CHARS: usize = 300;

/// How the sentences that name a TLS mismatch begin: see [`is_final`].
const UNTRUSTED: &str = "certificate not trusted";
const NOT_TLS: &str = "the endpoint does not answer TLS";

/// Whether a sentence from [`sentence`] names a cause no later attempt can
/// change: a certificate the client does not trust, or TLS spoken to an
/// endpoint that does not speak it. A readiness wait ends at once on these
/// (measured: a DynamoDB endpoint with an untrusted certificate held the
/// run for its whole 20 s `ready_timeout` before saying so). A refused
/// connection or a closed one is not final: a server that is starting says
/// the same.
pub fn is_final(sentence: &str) -> bool {
    sentence.contains(UNTRUSTED) || sentence.contains(NOT_TLS)
}

/// One sentence for an error given as its chain of causes, outermost first.
pub fn sentence(chain: &[String]) -> String {
    let all = chain.join(": ").to_ascii_lowercase();
    let has = |words: &[&str]| words.iter().any(|w| all.contains(w));
    if has(&[
        "invalid peer certificate",
        "unknownissuer",
        "certificate verify failed",
        "notvalidforname",
        "certexpired",
    ]) {
        let detail = ["UnknownIssuer", "NotValidForName", "Expired", "BadSignature"]
            .iter()
            .find(|d| all.contains(&d.to_ascii_lowercase()))
            .map(|d| format!(" ({d})"))
            .unwrap_or_default();
        return format!(
            "{UNTRUSTED}{detail}: set options.ca_file to the PEM of the CA that signed it, or options.insecure: true for a test server"
        );
    }
    // What a TLS client meets when the other end does not speak TLS.
    if has(&["invalidcontenttype", "corrupt message", "wrong version number", "invalidmessage"]) {
        return format!("{NOT_TLS}: use an http:// URI (or turn TLS off in the URI)");
    }
    if has(&["connection refused"]) {
        return "connection refused: nothing listens at the URI's host and port; start the server or fix the URI"
            .into();
    }
    if has(&["dns error", "failed to lookup address", "name or service not known", "no such host"]) {
        return "the URI's host name does not resolve: fix the host in the URI".into();
    }
    if has(&["connection closed before message completed", "incomplete message", "connection reset"]) {
        return "the endpoint closed the connection without an answer: if it serves TLS and the URI says http://, use https://".into();
    }
    let innermost = chain.iter().rev().map(|c| c.trim()).find(|c| !c.is_empty()).unwrap_or_default();
    first_line(innermost)
}

/// The chain of an error's causes, outermost first, each as its `Display`.
pub fn chain(error: &(dyn std::error::Error + 'static)) -> Vec<String> {
    let mut out = vec![error.to_string()];
    let mut next = error.source();
    while let Some(e) = next {
        out.push(e.to_string());
        next = e.source();
    }
    out
}

fn first_line(text: &str) -> String {
    text.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or_default().chars().take(MAX_CHARS).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn said(chain: &[&str]) -> String {
        sentence(&chain.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn common_causes_are_one_sentence_with_the_fix() {
        let cert = said(&["dispatch failure", "io error", "invalid peer certificate: UnknownIssuer"]);
        assert_eq!(
            cert,
            "certificate not trusted (UnknownIssuer): set options.ca_file to the PEM of the CA that signed it, or options.insecure: true for a test server"
        );
        assert!(said(&["received corrupt message of type InvalidContentType"]).contains("use an http:// URI"));
        assert!(said(&["io error", "Connection refused (os error 111)"]).starts_with("connection refused"));
        assert!(said(&["connection closed before message completed"]).contains("use https://"));
        assert_eq!(said(&["outer", "the innermost\nsecond line"]), "the innermost");
    }

    #[test]
    fn only_a_tls_mismatch_is_final() {
        assert!(is_final(&said(&["invalid peer certificate: UnknownIssuer"])));
        assert!(is_final(&said(&["received corrupt message of type InvalidContentType"])));
        assert!(!is_final(&said(&["io error", "Connection refused (os error 111)"])));
        assert!(!is_final(&said(&["connection closed before message completed"])));
        assert!(!is_final(&said(&["something else"])));
    }
}
