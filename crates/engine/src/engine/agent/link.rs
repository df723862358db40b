//! The agent link's security: every coordinator↔agent connection is TLS 1.3
//! in which both ends prove they hold the run's key before either sends a
//! frame. A peer without the key learns the coordinator's public key and
//! nothing else (no version, no spec, no target password) and cannot join;
//! frames cannot be replayed into another connection (fresh traffic keys
//! per connection) nor within one (records are numbered).
//!
//! Why raw public keys derived from one per-run key (RFC 7250) rather than
//! X.509 client certificates: a team deploying agents on Kubernetes then
//! mounts one opaque Secret of 64 hex characters into the Job, with no CA
//! to run or rotate, no certificate expiry to fall foul of pods' clocks,
//! and no certificate name tied to how the pods reach the coordinator. Both
//! ends derive an Ed25519 identity each from the key (HMAC-SHA256 with a
//! label per end) and pin the other end's public key; rustls has no
//! external-PSK mode, so this is how a shared secret becomes a TLS check.
//! ring, rustls and tokio-rustls are already in every build (the Redis
//! kind's TLS): the link adds no crate. What it does not do: tell key
//! holders apart (every holder is equally trusted, and agents name
//! themselves) — docs/agents.md#security.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use ring::hmac;
use ring::rand::SecureRandom;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivatePkcs8KeyDer, ServerName, SubjectPublicKeyInfoDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::sign::CertifiedKey;
use rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme};

/// The environment variables an agent takes its key from: a file's path
/// (a mounted Secret), or the key itself (what `local` agents are given).
pub const KEY_FILE_ENV: &str = "FAULTLINE_AGENT_KEY_FILE";
pub const KEY_ENV: &str = "FAULTLINE_AGENT_KEY";

/// The name an agent asks for: never checked (the coordinator's key is).
const SERVER_NAME: &str = "faultline-coordinator";

/// A run's link key: 32 random bytes, written as 64 hex characters. Never
/// printed, never put on a command line (/proc/PID/cmdline is readable by
/// every user), zeroed when dropped.
pub struct LinkKey([u8; 32]);

impl std::fmt::Debug for LinkKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LinkKey(..)")
    }
}

impl Drop for LinkKey {
    fn drop(&mut self) {
        for b in &mut self.0 {
            // SAFETY: a plain write to a byte this value owns; volatile so
            // the compiler keeps it although the value dies here.
            unsafe { std::ptr::write_volatile(b, 0) };
        }
    }
}

/// Which end of the link an identity is for.
#[derive(Clone, Copy)]
enum End {
    Coordinator,
    Agent,
}

impl LinkKey {
    /// A new key from the system's random source.
    pub fn generate() -> anyhow::Result<LinkKey> {
        let mut bytes = [0u8; 32];
        ring::rand::SystemRandom::new()
            .fill(&mut bytes)
            .map_err(|_| anyhow::anyhow!("the system's random source failed"))?;
        Ok(LinkKey(bytes))
    }

    /// 64 hex characters (surrounding whitespace ignored).
    pub fn from_hex(text: &str) -> Result<LinkKey, String> {
        let text = text.trim();
        let bad = || "an agent key is 64 hex characters (make one with `faultline agents key`)".to_string();
        if text.len() != 64 || !text.is_ascii() {
            return Err(bad());
        }
        let mut bytes = [0u8; 32];
        for (i, byte) in bytes.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
        }
        Ok(LinkKey(bytes))
    }

    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The key in `path`: a regular file of a few lines at most (a FIFO, a
    /// device or a large file is refused before it is read).
    pub fn read_file(path: &Path) -> anyhow::Result<LinkKey> {
        let text = crate::input_file::read_to_string(path, 4 << 10)
            .with_context(|| format!("cannot read the agent key {}", path.display()))?;
        LinkKey::from_hex(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
    }

    /// A warning when others than its owner may read the key file at `path`.
    pub fn shared_warning(path: &Path) -> Option<String> {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(path).is_ok_and(|meta| meta.permissions().mode() & 0o077 != 0).then(|| {
            format!(
                "{} can be read by other users: `chmod 600` it (whoever holds the key can join runs)",
                path.display()
            )
        })
    }

    /// An agent's key: from `key_file` when given, else from its
    /// environment ([`KEY_FILE_ENV`], else [`KEY_ENV`]). Both variables are
    /// removed either way, so nothing the agent starts inherits them. None
    /// when there is no key anywhere.
    pub fn for_agent(key_file: Option<&Path>) -> anyhow::Result<Option<LinkKey>> {
        let file = std::env::var_os(KEY_FILE_ENV);
        let hex = std::env::var(KEY_ENV).ok();
        // Called before the agent starts a thread (its runtime comes
        // after), so nothing reads the environment meanwhile.
        std::env::remove_var(KEY_FILE_ENV);
        std::env::remove_var(KEY_ENV);
        match (key_file, file, hex) {
            (Some(path), _, _) => LinkKey::read_file(path).map(Some),
            (None, Some(path), _) => LinkKey::read_file(Path::new(&path)).map(Some),
            (None, None, Some(hex)) => LinkKey::from_hex(&hex).map(Some).map_err(|e| anyhow::anyhow!("{KEY_ENV}: {e}")),
            (None, None, None) => Ok(None),
        }
    }

    /// One end's Ed25519 identity: its seed is HMAC-SHA256(key, label), so
    /// both ends derive both identities and nothing about the key shows.
    fn identity(&self, end: End) -> anyhow::Result<Arc<CertifiedKey>> {
        let label: &[u8] = match end {
            End::Coordinator => b"faultline agent link v1 coordinator",
            End::Agent => b"faultline agent link v1 agent",
        };
        let seed = hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, &self.0), label);
        // PKCS#8 v1 of an Ed25519 key is a fixed prefix and the seed.
        const PREFIX: [u8; 16] =
            [0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20];
        let mut pkcs8 = PREFIX.to_vec();
        pkcs8.extend_from_slice(seed.as_ref());
        let signing = rustls::crypto::ring::sign::any_eddsa_type(&PrivatePkcs8KeyDer::from(pkcs8))
            .context("deriving the link's key")?;
        let spki = signing.public_key().context("the link key's public half")?.to_vec();
        Ok(Arc::new(CertifiedKey::new(vec![CertificateDer::from(spki)], signing)))
    }

    fn public_key(&self, end: End) -> anyhow::Result<Vec<u8>> {
        Ok(self.identity(end)?.cert[0].to_vec())
    }
}

/// A fresh random number: a cell's nonce (wire.rs `ArmOrder::arm`).
pub fn nonce() -> u64 {
    let mut bytes = [0u8; 8];
    // The system's random source does not fail on Linux once booted; a
    // nonce of zeros would still be one the agents must echo.
    let _ = ring::rand::SystemRandom::new().fill(&mut bytes);
    u64::from_le_bytes(bytes)
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The coordinator's side: presents its identity, demands the agent's.
pub fn acceptor(key: &LinkKey) -> anyhow::Result<tokio_rustls::TlsAcceptor> {
    let provider = provider();
    let pinned = Arc::new(Pinned { public_key: key.public_key(End::Agent)?, provider: Arc::clone(&provider) });
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .context("TLS 1.3")?
        .with_client_cert_verifier(pinned)
        .with_cert_resolver(Arc::new(rustls::server::AlwaysResolvesServerRawPublicKeys::new(
            key.identity(End::Coordinator)?,
        )));
    // Every connection is a full handshake: nothing of one outlives it.
    config.send_tls13_tickets = 0;
    config.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

/// The agent's side: presents its identity, demands the coordinator's.
pub fn connector(key: &LinkKey) -> anyhow::Result<tokio_rustls::TlsConnector> {
    let provider = provider();
    let pinned = Arc::new(Pinned { public_key: key.public_key(End::Coordinator)?, provider: Arc::clone(&provider) });
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .context("TLS 1.3")?
        .dangerous()
        .with_custom_certificate_verifier(pinned)
        .with_client_cert_resolver(Arc::new(rustls::client::AlwaysResolvesClientRawPublicKeys::new(
            key.identity(End::Agent)?,
        )));
    config.resumption = rustls::client::Resumption::disabled();
    config.enable_sni = false;
    Ok(tokio_rustls::TlsConnector::from(Arc::new(config)))
}

/// The name the agent dials the coordinator by, inside TLS.
pub fn server_name() -> ServerName<'static> {
    ServerName::try_from(SERVER_NAME).expect("a valid DNS name")
}

/// Accepts exactly one raw public key: the other end's, derived from the
/// run's key. The handshake's signature is checked against it.
#[derive(Debug)]
struct Pinned {
    public_key: Vec<u8>,
    provider: Arc<CryptoProvider>,
}

impl Pinned {
    fn check(&self, presented: &CertificateDer<'_>) -> Result<(), rustls::Error> {
        match presented.as_ref() == self.public_key.as_slice() {
            true => Ok(()),
            false => Err(rustls::Error::InvalidCertificate(rustls::CertificateError::ApplicationVerificationFailure)),
        }
    }

    fn signed(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature_with_raw_key(
            message,
            &SubjectPublicKeyInfoDer::from(cert.as_ref()),
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }
}

/// TLS 1.2 is never offered; a peer that tries it is refused.
fn no_tls12() -> Result<HandshakeSignatureValid, rustls::Error> {
    Err(rustls::Error::PeerIncompatible(rustls::PeerIncompatible::Tls12NotOffered))
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.check(end_entity).map(|()| ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        no_tls12()
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.signed(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        vec![SignatureScheme::ED25519]
    }

    fn requires_raw_public_keys(&self) -> bool {
        true
    }
}

impl ClientCertVerifier for Pinned {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        self.check(end_entity).map(|()| ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        no_tls12()
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.signed(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        vec![SignatureScheme::ED25519]
    }

    fn requires_raw_public_keys(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Dials `listener` as an agent holding `key`; what it read, or why not.
    async fn dial(address: std::net::SocketAddr, key: &LinkKey) -> Result<Vec<u8>, String> {
        let tcp = tokio::net::TcpStream::connect(address).await.map_err(|e| e.to_string())?;
        let mut tls = connector(key).unwrap().connect(server_name(), tcp).await.map_err(|e| e.to_string())?;
        tls.write_all(b"hello").await.map_err(|e| e.to_string())?;
        let mut got = Vec::new();
        tls.read_to_end(&mut got).await.map_err(|e| e.to_string())?;
        Ok(got)
    }

    /// The same key on both ends talks; another key on either end does not,
    /// and the side without it learns nothing of what the other would say.
    #[tokio::test]
    async fn only_holders_of_the_run_key_complete_the_handshake() {
        let key = LinkKey::from_hex(&"ab".repeat(32)).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let acceptor = acceptor(&key).unwrap();
        let server = tokio::spawn(async move {
            let mut outcomes = Vec::new();
            for _ in 0..2 {
                let (tcp, _) = listener.accept().await.unwrap();
                outcomes.push(match acceptor.accept(tcp).await {
                    Ok(mut tls) => {
                        let mut hello = [0u8; 5];
                        tls.read_exact(&mut hello).await.unwrap();
                        tls.write_all(b"the secret spec").await.unwrap();
                        tls.shutdown().await.unwrap();
                        Ok(hello.to_vec())
                    }
                    Err(e) => Err(e.to_string()),
                });
            }
            outcomes
        });
        assert_eq!(dial(address, &key).await.unwrap(), b"the secret spec");
        let stranger = LinkKey::generate().unwrap();
        let refused = dial(address, &stranger).await.unwrap_err();
        assert!(!refused.contains("secret"), "{refused}");
        let outcomes = server.await.unwrap();
        assert_eq!(outcomes[0].as_deref(), Ok(&b"hello"[..]));
        assert!(outcomes[1].is_err(), "a stranger's handshake was accepted");
    }

    #[test]
    fn keys_are_64_hex_characters_and_never_printed() {
        let key = LinkKey::generate().unwrap();
        assert_eq!(LinkKey::from_hex(&format!(" {}\n", key.to_hex())).unwrap().0, key.0);
        assert!(LinkKey::from_hex("abc").unwrap_err().contains("64 hex characters"));
        assert!(LinkKey::from_hex(&"zz".repeat(32)).is_err());
        assert_eq!(format!("{key:?}"), "LinkKey(..)");
        assert_ne!(key.public_key(End::Agent).unwrap(), key.public_key(End::Coordinator).unwrap());
        // A key file is read only when it is small: a key and a newline.
        let dir = tempfile::tempdir().unwrap();
        let (good, huge) = (dir.path().join("agent.key"), dir.path().join("huge.key"));
        std::fs::write(&good, format!("{}\n", key.to_hex())).unwrap();
        std::fs::write(&huge, vec![b'a'; 1 << 20]).unwrap();
        assert_eq!(LinkKey::read_file(&good).unwrap().0, key.0);
        assert!(format!("{:#}", LinkKey::read_file(&huge).unwrap_err()).contains("larger than"));
    }
}
