//! TLS for `rediss://` targets, on rustls. One client config per target,
//! built from its options, serves every connection faultline opens to the
//! server — the load's own RESP connections and the `redis` crate's
//! connections for probes, final reads and roles (handed the TLS stream) —
//! so all of them trust, and present, the same certificates.
//!
//! Trust: the system's roots by default, the CA in `ca_file`, or with
//! `insecure` any certificate (self-signed test servers whose CA you do not
//! have; the handshake is still checked against the certificate's key). A
//! client certificate (`cert_file` + `key_file`) is presented when given.

use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use crate::options::RedisOptions;
use faultline_kind::tls::AnyCertificate;
use faultline_kind::Refused;

/// The TLS a target's connections use.
#[derive(Clone)]
pub struct Tls {
    connector: TlsConnector,
}

impl Tls {
    /// The config `options` describe; an error names the option at fault.
    pub fn new(options: &RedisOptions) -> Result<Tls, (String, String)> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| (String::new(), format!("TLS: {e}")))?;
        let builder = match (&options.ca_file, options.insecure) {
            (_, true) => builder.dangerous().with_custom_certificate_verifier(Arc::new(AnyCertificate(provider))),
            (Some(path), false) => {
                let mut roots = rustls::RootCertStore::empty();
                for cert in certificates(path).map_err(|e| ("ca_file".to_string(), e))? {
                    roots.add(cert).map_err(|e| ("ca_file".to_string(), format!("{path}: {e}")))?;
                }
                builder.with_root_certificates(roots)
            }
            (None, false) => {
                let mut roots = rustls::RootCertStore::empty();
                let found = rustls_native_certs::load_native_certs();
                let (added, _) = roots.add_parsable_certificates(found.certs);
                if added == 0 {
                    return Err((
                        "ca_file".into(),
                        "this machine has no CA certificates to trust (install ca-certificates), so give the server's CA in `ca_file` or set `insecure: true`".into(),
                    ));
                }
                builder.with_root_certificates(roots)
            }
        };
        let config = match (&options.cert_file, &options.key_file) {
            (Some(cert), Some(key)) => {
                let chain = certificates(cert).map_err(|e| ("cert_file".to_string(), e))?;
                let key = PrivateKeyDer::from_pem_file(key)
                    .map_err(|e| ("key_file".to_string(), format!("{key}: no private key read ({e})")))?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|e| ("cert_file".to_string(), format!("{cert}: {e}")))?
            }
            _ => builder.with_no_client_auth(),
        };
        Ok(Tls { connector: TlsConnector::from(Arc::new(config)) })
    }

    /// `tcp`, after a TLS handshake with the server named `host` (a DNS name
    /// or an IP address, checked against the certificate unless `insecure`).
    pub async fn wrap(&self, tcp: TcpStream, host: &str) -> anyhow::Result<TlsStream<TcpStream>> {
        let name = ServerName::try_from(host.to_string())
            .map_err(|_| anyhow::anyhow!("`{host}` is not a name or address TLS can check a certificate against"))?;
        self.connector.connect(name, tcp).await.map_err(|e| io_error(e, &format!("TLS handshake with {host} failed")))
    }
}

/// Whether the server at `host:port` answers a TLS ClientHello as TLS
/// does (its certificate unchecked): told from its first bytes, so a
/// `redis://` URI that points at a TLS port says so at once instead of
/// retrying until the ready timeout.
pub async fn speaks_tls(host: &str, port: u16) -> bool {
    let attempt = async {
        let tcp = TcpStream::connect((host, port)).await.ok()?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .ok()?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
            .with_no_client_auth();
        let name = ServerName::try_from(host.to_string()).ok()?;
        Some(match TlsConnector::from(Arc::new(config)).connect(name, tcp).await {
            Ok(_) => true,
            // It answered in TLS records (an alert: it wants a client
            // certificate, or other versions), not in RESP.
            Err(e) => rustls_error(&e).is_some_and(|r| !matches!(r, rustls::Error::InvalidMessage(_))),
        })
    };
    tokio::time::timeout(std::time::Duration::from_millis(1500), attempt).await.ok().flatten().unwrap_or(false)
}

/// A certificate's name as webpki writes it in a name mismatch
/// (`DnsName("db.example")`, `IpAddress(10.0.0.5)`), as a URI takes it.
fn presented_name(written: &str) -> Option<&str> {
    let dns = written.strip_prefix("DnsName(\"").and_then(|n| n.strip_suffix("\")"));
    dns.or_else(|| written.strip_prefix("IpAddress(").and_then(|n| n.strip_suffix(')')))
}

/// Whether the server at `host:port` answers a plain `PING` in RESP (a
/// status or an error line): a `rediss://` URI that points at a plain port.
pub async fn speaks_plain_resp(host: &str, port: u16) -> bool {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let attempt = async {
        let mut tcp = TcpStream::connect((host, port)).await.ok()?;
        tcp.write_all(b"PING\r\n").await.ok()?;
        let mut first = [0u8; 1];
        tcp.read_exact(&mut first).await.ok()?;
        Some(matches!(first[0], b'+' | b'-'))
    };
    tokio::time::timeout(std::time::Duration::from_secs(3), attempt).await.ok().flatten().unwrap_or(false)
}

fn rustls_error(e: &std::io::Error) -> Option<&rustls::Error> {
    e.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>())
}

/// An I/O error on a TLS connection, with `what` failed. Certificates that do
/// not match will not match on a retry, so those are [`Refused`] (readiness
/// gives up at once, with the fix); under TLS 1.3 a server's refusal of the
/// client's certificate arrives as an alert after the handshake, on the
/// first read, so that is looked for on every I/O error, not only the
/// handshake's.
pub fn io_error(e: std::io::Error, what: &str) -> anyhow::Error {
    let said = format!("{what}: {e}");
    match rustls_error(&e) {
        Some(rustls::Error::InvalidCertificate(rustls::CertificateError::NotValidForNameContext {
            expected,
            presented,
        })) => {
            let dialled = expected.to_str();
            let presented: Vec<&str> = presented.iter().filter_map(|n| presented_name(n)).collect();
            let names = presented.join(", ");
            let first = presented.first().copied().unwrap_or("a name it holds");
            anyhow::Error::new(Refused(format!(
                "{said}: the server's certificate is for {names}, not `{dialled}`: dial `{first}` in the URI (or give the server a certificate naming `{dialled}`; `insecure: true` for a test server)"
            )))
        }
        // Not TLS at all: a plain RESP server answered the ClientHello.
        Some(rustls::Error::InvalidMessage(_)) => anyhow::Error::new(Refused(format!(
            "{said}: the server did not answer in TLS; if this port serves plain RESP, use `redis://` (not `rediss://`), or the server's TLS port"
        ))),
        Some(rustls::Error::InvalidCertificate(_)) => anyhow::Error::new(Refused(format!(
            "{said}: give the CA that signed the server's certificate in `ca_file` (or `insecure: true` for a test server)"
        ))),
        Some(rustls::Error::AlertReceived(_)) => anyhow::Error::new(Refused(format!(
            "{said}: the server refused this client (does it require a client certificate, `cert_file` and `key_file`?)"
        ))),
        _ => anyhow::anyhow!(said),
    }
}

/// The certificates in a PEM file, at least one.
fn certificates(path: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let found = CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("cannot read {path}: {e}"))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{path}: {e}"))?;
    match found.is_empty() {
        true => Err(format!("{path} holds no PEM certificate")),
        false => Ok(found),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_certificates_names_read_as_a_uri_takes_them() {
        assert_eq!(presented_name("DnsName(\"db.example\")"), Some("db.example"));
        assert_eq!(presented_name("IpAddress(127.0.0.1)"), Some("127.0.0.1"));
        assert_eq!(presented_name("DirectoryName"), None);
    }
}
