//! `insecure: true`: an HTTPS client that accepts whatever certificate the
//! server shows, for self-signed test servers whose CA the user does not
//! have. The smithy client the SDK ships has no such switch (its TLS
//! settings take trust roots only), so this is a small HTTP connector of our
//! own on the same parts (hyper, rustls on ring), plugged in where the SDK
//! takes one. The handshake's signatures are still verified against the
//! certificate's key; only the certificate's chain and name are not, which
//! is what "insecure" promises and no more.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use aws_smithy_runtime_api::client::http::{
    http_client_fn, HttpConnector, HttpConnectorFuture, SharedHttpClient, SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::HttpRequest;
use aws_smithy_runtime_api::client::result::ConnectorError;
use aws_smithy_runtime_api::http::Response;
use aws_smithy_types::body::SdkBody;
use faultline_kind::tls::AnyCertificate;
use hyper_util::client::legacy::connect::HttpConnector as TcpConnector;
use hyper_util::client::legacy::Client;

/// The SDK's HTTP client for `insecure: true`: one connection pool per SDK
/// client, made with the first call's timeouts (they are the spec's, the
/// same for every call).
pub fn http_client() -> SharedHttpClient {
    let made: Arc<OnceLock<SharedHttpConnector>> = Arc::default();
    http_client_fn(move |settings, _| {
        made.get_or_init(|| {
            SharedHttpConnector::new(Insecure::new(settings.connect_timeout(), settings.read_timeout()))
        })
        .clone()
    })
}

#[derive(Debug)]
struct Insecure {
    client: Client<hyper_rustls::HttpsConnector<TcpConnector>, SdkBody>,
    read_timeout: Option<Duration>,
}

impl Insecure {
    fn new(connect_timeout: Option<Duration>, read_timeout: Option<Duration>) -> Insecure {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let tls = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .expect("ring supports the default TLS versions")
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
            .with_no_client_auth();
        let mut tcp = TcpConnector::new();
        tcp.enforce_http(false);
        tcp.set_nodelay(true);
        tcp.set_connect_timeout(connect_timeout);
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(tcp);
        let client = Client::builder(hyper_util::rt::TokioExecutor::new()).build(https);
        Insecure { client, read_timeout }
    }
}

impl HttpConnector for Insecure {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let request = match request.try_into_http1x() {
            Ok(request) => request,
            Err(e) => return HttpConnectorFuture::ready(Err(ConnectorError::user(e.into()))),
        };
        let sent = self.client.request(request);
        let read_timeout = self.read_timeout;
        HttpConnectorFuture::new(async move {
            let answered = match read_timeout {
                Some(limit) => {
                    tokio::time::timeout(limit, sent).await.map_err(|e| ConnectorError::timeout(e.into()))?
                }
                None => sent.await,
            };
            let response = answered.map_err(|e| match e.is_connect() {
                true => ConnectorError::io(e.into()),
                false => ConnectorError::other(e.into(), None),
            })?;
            Response::try_from(response.map(SdkBody::from_body_1_x)).map_err(|e| ConnectorError::other(e.into(), None))
        })
    }
}
