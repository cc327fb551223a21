//! TLS for the fakes: a test certificate authority of its own (never
//! Eagle's), servers' certificates from it, and an `axum` listener that
//! answers TLS with one of them, so a fake API can stand for an HTTPS host
//! on 127.0.0.1.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// A certificate authority for test servers.
pub struct TestCa {
    issuer: Issuer<'static, KeyPair>,
    pub cert: CertificateDer<'static>,
    pem: String,
}

impl TestCa {
    pub fn new() -> TestCa {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::default();
        params
            .distinguished_name
            .push(DnType::CommonName, "a test CA (not Eagle's)");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign];
        let cert = params.self_signed(&key).unwrap();
        TestCa {
            pem: cert.pem(),
            cert: cert.der().clone(),
            issuer: Issuer::new(params, key),
        }
    }

    /// Writes the authority's certificate (PEM) to `path`.
    pub fn write_pem(&self, path: &Path) {
        std::fs::write(path, &self.pem).unwrap();
    }

    /// A server configuration with a certificate for `names`.
    pub fn server(&self, names: &[&str]) -> Arc<rustls::ServerConfig> {
        let key = KeyPair::generate().unwrap();
        let mut params =
            CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .unwrap();
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        let der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert.der().clone()], der)
        .unwrap();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Arc::new(config)
    }

    /// A client configuration trusting only `roots`.
    pub fn client(roots: &[&CertificateDer<'static>]) -> Arc<rustls::ClientConfig> {
        let mut store = rustls::RootCertStore::empty();
        for root in roots {
            store.add((*root).clone()).unwrap();
        }
        let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(store)
        .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Arc::new(config)
    }
}

/// A TCP listener on 127.0.0.1 whose connections are answered with TLS,
/// for `axum::serve`.
pub struct TlsListener {
    tcp: TcpListener,
    acceptor: TlsAcceptor,
}

impl TlsListener {
    pub async fn bind(config: Arc<rustls::ServerConfig>) -> TlsListener {
        TlsListener {
            tcp: TcpListener::bind("127.0.0.1:0").await.unwrap(),
            acceptor: TlsAcceptor::from(config),
        }
    }

    pub fn port(&self) -> u16 {
        self.tcp.local_addr().unwrap().port()
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Ok((tcp, addr)) = self.tcp.accept().await else {
                continue;
            };
            // A client that stalls its handshake holds up the next one for
            // a moment only.
            let accept = self.acceptor.accept(tcp);
            if let Ok(Ok(tls)) = tokio::time::timeout(Duration::from_secs(5), accept).await {
                return (tls, addr);
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}
