//! The options a `kind: redis` target takes (under `options:`): how its
//! `rediss://` connections trust the server and who they say they are.
//! Credentials and the database stay in the URI
//! (`rediss://USER:PASSWORD@HOST:PORT/DB`), as every Redis client has them.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RedisOptions {
    /// A PEM file of the CA that signed a `rediss://` server's certificate
    /// (a private CA, a self-signed server); the system's roots otherwise.
    #[serde(default)]
    pub ca_file: Option<String>,
    /// A PEM client certificate (chain) to present, for servers that
    /// require one (`tls-auth-clients yes`); with `key_file`.
    #[serde(default)]
    pub cert_file: Option<String>,
    /// The PEM private key of `cert_file`.
    #[serde(default)]
    pub key_file: Option<String>,
    /// Accept any certificate a `rediss://` server shows (self-signed test
    /// servers whose CA you do not have). The handshake is still checked
    /// against the certificate's key; who issued it and for which name is
    /// not. Default false.
    #[serde(default)]
    pub insecure: bool,
}

impl RedisOptions {
    /// Combinations that cannot work, as (field, why).
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        if self.insecure && self.ca_file.is_some() {
            return Err((
                "insecure",
                "accepts any certificate, so ca_file would not be used: keep one of the two".into(),
            ));
        }
        match (&self.cert_file, &self.key_file) {
            (Some(_), None) => Err(("cert_file", "needs its private key in `key_file`".into())),
            (None, Some(_)) => Err(("key_file", "needs its certificate in `cert_file`".into())),
            _ => Ok(()),
        }
    }

    /// The first TLS setting given, if any (the config is then built, and
    /// its files read, when the spec is loaded rather than at first connect).
    pub fn tls_field(&self) -> Option<&'static str> {
        [
            ("ca_file", self.ca_file.is_some()),
            ("cert_file", self.cert_file.is_some()),
            ("key_file", self.key_file.is_some()),
            ("insecure", self.insecure),
        ]
        .into_iter()
        .find_map(|(field, given)| given.then_some(field))
    }
}
