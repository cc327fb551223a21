//! The proxy's own TLS toward a host whose requests it reads: it trusts
//! the system's roots (as the worker did before its requests were read)
//! and the certificates of a private model gateway the profile names
//! (`[runner.sandbox] model_ca_file`), nothing else.

use std::sync::{Arc, OnceLock};

use rustls::ClientConfig;
use rustls::pki_types::CertificateDer;

/// The system's trusted roots, read once (`rustls-native-certs`: the
/// distribution's bundle, or `SSL_CERT_FILE` / `SSL_CERT_DIR`).
pub fn system_roots() -> &'static [CertificateDer<'static>] {
    static ROOTS: OnceLock<Vec<CertificateDer<'static>>> = OnceLock::new();
    ROOTS.get_or_init(|| {
        let found = rustls_native_certs::load_native_certs();
        if found.certs.is_empty() {
            tracing::warn!(
                errors = ?found.errors,
                "egress: no trusted roots found on this system; only model_ca_file is trusted"
            );
        }
        found.certs
    })
}

/// The client configuration of the proxy's upstream TLS: the system's
/// roots and `extra`, HTTP/1.1 only.
pub fn client_config(extra: &[CertificateDer<'static>]) -> Result<Arc<ClientConfig>, String> {
    let mut roots = rustls::RootCertStore::empty();
    let (_, unusable) = roots.add_parsable_certificates(system_roots().iter().cloned());
    if unusable > 0 {
        tracing::debug!(unusable, "egress: some system roots are not usable");
    }
    for cert in extra {
        roots
            .add(cert.clone())
            .map_err(|e| format!("a model_ca_file certificate is not usable: {e}"))?;
    }
    let mut config =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}
