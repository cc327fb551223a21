//! Eagle's certificate authority, one per deployment: what the egress
//! proxy signs a host's certificate with when it reads a worker's requests
//! to that host (the model API, a host limited to some methods). Workers
//! trust it through the bundle files a runner gives them; nothing else
//! does.
//!
//! Only its private key is kept, in `<data dir>/egress-ca/ca.key` (0600,
//! in a 0700 directory, under the data directory no worker can see). The
//! certificate is made again from the key at every start: its name, serial
//! and validity follow from the key alone, so every process of the
//! deployment presents the same authority. Two processes starting at once
//! agree on one key: it is written aside and linked into place, and the
//! one that finds a key there already uses that one.
//!
//! A host's certificate (ECDSA P-256, valid for a month) is made the first
//! time a worker reaches it and kept in memory for a week.

use std::collections::HashMap;
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};
use rustls::ServerConfig;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use super::head::Host;

/// Where the key is kept, under the data directory.
pub const DIR: &str = "egress-ca";
const KEY_FILE: &str = "ca.key";
/// How long a host's certificate is used before a new one is made.
const LEAF_REUSE: Duration = Duration::from_secs(7 * 24 * 3600);
/// How long a host's certificate is valid (past its reuse, so one in use
/// never expires under a worker).
const LEAF_DAYS: u64 = 30;
/// The most hosts' certificates kept at once (a wildcard pattern lets a
/// worker name ever new hosts).
const MAX_LEAVES: usize = 1024;

/// The certificate authority and the hosts' certificates it made.
pub struct Authority {
    issuer: Issuer<'static, KeyPair>,
    cert: CertificateDer<'static>,
    leaves: Mutex<HashMap<Host, (Instant, Arc<ServerConfig>)>>,
}

impl std::fmt::Debug for Authority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authority").finish_non_exhaustive()
    }
}

impl Authority {
    /// The deployment's authority, its key read from `data_dir` or made
    /// there the first time.
    pub fn load_or_create(data_dir: &Path) -> Result<Authority, String> {
        let dir = data_dir.join(DIR);
        let fail = |what: &str, path: &Path, e: &dyn std::fmt::Display| {
            format!("{what} {}: {e}", path.display())
        };
        std::fs::create_dir_all(&dir).map_err(|e| fail("cannot create", &dir, &e))?;
        crate::ground::host::chmod(&dir, 0o700).map_err(|e| fail("cannot protect", &dir, &e))?;
        let path = dir.join(KEY_FILE);
        let pem = match std::fs::read_to_string(&path) {
            Ok(pem) => pem,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                create_key(&path).map_err(|e| fail("cannot write", &path, &e))?
            }
            Err(e) => return Err(fail("cannot read", &path, &e)),
        };
        crate::ground::host::chmod(&path, 0o600).map_err(|e| fail("cannot protect", &path, &e))?;
        let key = KeyPair::from_pem(&pem).map_err(|e| {
            fail(
                "not a private key (remove it, and Eagle makes a new authority):",
                &path,
                &e,
            )
        })?;
        Authority::of_key(key).map_err(|e| format!("cannot make the egress authority: {e}"))
    }

    fn of_key(key: KeyPair) -> Result<Authority, rcgen::Error> {
        let params = ca_params(&key);
        let cert = params.self_signed(&key)?.der().clone();
        Ok(Authority {
            issuer: Issuer::new(params, key),
            cert,
            leaves: Mutex::new(HashMap::new()),
        })
    }

    /// A fresh authority that is kept nowhere (tests, benchmarks).
    pub fn ephemeral() -> Result<Authority, String> {
        let key = KeyPair::generate().map_err(|e| e.to_string())?;
        Authority::of_key(key).map_err(|e| e.to_string())
    }

    /// The authority's certificate, DER.
    pub fn cert_der(&self) -> &CertificateDer<'static> {
        &self.cert
    }

    /// The authority's certificate, PEM (what `NODE_EXTRA_CA_CERTS` names).
    pub fn cert_pem(&self) -> String {
        pem("CERTIFICATE", &self.cert)
    }

    /// The system's roots and this authority, PEM: the bundle that
    /// `SSL_CERT_FILE`, `REQUESTS_CA_BUNDLE` and `CURL_CA_BUNDLE` name, so
    /// a worker trusts every host it trusted before, and Eagle's proxy.
    pub fn bundle_pem(&self) -> String {
        let mut out = String::new();
        for root in super::upstream::system_roots() {
            out.push_str(&pem("CERTIFICATE", root));
        }
        out.push_str(&self.cert_pem());
        out
    }

    /// A TLS server configuration presenting a certificate for `host`
    /// (made now, or the one made for it this week).
    pub fn server_config(&self, host: &Host) -> Result<Arc<ServerConfig>, String> {
        let mut leaves = self.leaves.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((made, config)) = leaves.get(host)
            && made.elapsed() < LEAF_REUSE
        {
            return Ok(Arc::clone(config));
        }
        let config = Arc::new(self.make_config(host)?);
        if leaves.len() >= MAX_LEAVES {
            leaves.clear();
        }
        leaves.insert(host.clone(), (Instant::now(), Arc::clone(&config)));
        Ok(config)
    }

    fn make_config(&self, host: &Host) -> Result<ServerConfig, String> {
        let fail = |e: &dyn std::fmt::Display| format!("cannot make a certificate for {host}: {e}");
        let key = KeyPair::generate().map_err(|e| fail(&e))?;
        let mut params = CertificateParams::default();
        let mut name = DistinguishedName::new();
        name.push(DnType::CommonName, host.to_string());
        params.distinguished_name = name;
        params.subject_alt_names = vec![match host {
            Host::Ip(ip) => SanType::IpAddress(*ip),
            Host::Name(name) => SanType::DnsName(name.clone().try_into().map_err(|e| fail(&e))?),
        }];
        use chrono::Datelike as _;
        let midnight =
            |d: chrono::NaiveDate| rcgen::date_time_ymd(d.year(), d.month() as u8, d.day() as u8);
        let today = chrono::Utc::now().date_naive();
        params.not_before = midnight(today - chrono::Days::new(1));
        params.not_after = midnight(today + chrono::Days::new(LEAF_DAYS));
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        let cert = params.signed_by(&key, &self.issuer).map_err(|e| fail(&e))?;
        let der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let mut config =
            ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .map_err(|e| fail(&e))?
                .with_no_client_auth()
                .with_single_cert(vec![cert.der().clone(), self.cert.clone()], der)
                .map_err(|e| fail(&e))?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(config)
    }
}

/// The authority's own certificate: its name and serial follow from its
/// key, its validity is fixed, so it is the same wherever it is made.
fn ca_params(key: &KeyPair) -> CertificateParams {
    let mut params = CertificateParams::default();
    let id = params.key_identifier(key);
    let mut name = DistinguishedName::new();
    name.push(DnType::OrganizationName, "Eagle");
    name.push(
        DnType::CommonName,
        format!(
            "Eagle egress proxy {}",
            crate::ground::text::hex(&id[..id.len().min(6)])
        ),
    );
    params.distinguished_name = name;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    params.not_before = rcgen::date_time_ymd(2025, 1, 1);
    params.not_after = rcgen::date_time_ymd(2125, 1, 1);
    params
}

/// Makes a key and puts it at `path` unless another process did first;
/// either way returns the key at `path`.
fn create_key(path: &Path) -> std::io::Result<String> {
    let key = KeyPair::generate().map_err(std::io::Error::other)?;
    let pem = key.serialize_pem();
    let aside = PathBuf::from(format!("{}.{}", path.display(), std::process::id()));
    let _ = std::fs::remove_file(&aside);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&aside)?;
    file.write_all(pem.as_bytes())?;
    file.sync_all()?;
    drop(file);
    let linked = std::fs::hard_link(&aside, path);
    let _ = std::fs::remove_file(&aside);
    match linked {
        Ok(()) => Ok(pem),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => std::fs::read_to_string(path),
        Err(e) => Err(e),
    }
}

/// `der` as a PEM block of `label`.
pub(super) fn pem(label: &str, der: &[u8]) -> String {
    use base64::Engine as _;
    let text = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in text.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(line).unwrap_or_default());
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    /// A TLS handshake of a client trusting only `ca` with `server`, as
    /// `name`: the bytes the server received, or why it failed.
    async fn handshake(
        ca: &CertificateDer<'static>,
        server: Arc<ServerConfig>,
        name: &str,
    ) -> Result<Vec<u8>, String> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(ca.clone()).unwrap();
        let mut client = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
        client.alpn_protocols = vec![b"http/1.1".to_vec()];
        let (a, b) = tokio::io::duplex(64 * 1024);
        let name = rustls::pki_types::ServerName::try_from(name.to_string()).unwrap();
        let accept = async move {
            let mut tls = tokio_rustls::TlsAcceptor::from(server)
                .accept(b)
                .await
                .map_err(|e| e.to_string())?;
            let mut got = Vec::new();
            tls.read_to_end(&mut got).await.map_err(|e| e.to_string())?;
            tls.shutdown().await.map_err(|e| e.to_string())?;
            Ok::<_, String>(got)
        };
        let connect = async move {
            let mut tls = tokio_rustls::TlsConnector::from(Arc::new(client))
                .connect(name, a)
                .await
                .map_err(|e| e.to_string())?;
            tls.write_all(b"hello").await.map_err(|e| e.to_string())?;
            tls.shutdown().await.map_err(|e| e.to_string())?;
            // Until the server is done too.
            let mut rest = Vec::new();
            tls.read_to_end(&mut rest)
                .await
                .map_err(|e| e.to_string())?;
            Ok::<_, String>(())
        };
        let (got, sent) = tokio::join!(accept, connect);
        sent?;
        got
    }

    #[tokio::test]
    async fn the_key_is_kept_private_and_the_same_authority_comes_back() {
        let dir = tempfile::tempdir().unwrap();
        let first = Authority::load_or_create(dir.path()).unwrap();
        let key = dir.path().join(DIR).join(KEY_FILE);
        use std::os::unix::fs::PermissionsExt as _;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&key), 0o600);
        assert_eq!(mode(&dir.path().join(DIR)), 0o700);
        // Made again from the kept key: a host's certificate from the one
        // verifies against the other's certificate.
        let again = Authority::load_or_create(dir.path()).unwrap();
        let host = Host::Name("api.example.com".into());
        let config = again.server_config(&host).unwrap();
        assert!(Arc::ptr_eq(&config, &again.server_config(&host).unwrap()));
        assert_eq!(
            handshake(first.cert_der(), Arc::clone(&config), "api.example.com").await,
            Ok(b"hello".to_vec())
        );
        // Not for another name; not for a client that trusts another authority.
        assert!(
            handshake(first.cert_der(), Arc::clone(&config), "evil.example.com")
                .await
                .is_err()
        );
        let other = Authority::ephemeral().unwrap();
        assert!(
            handshake(other.cert_der(), config, "api.example.com")
                .await
                .is_err()
        );
        // An address gets a certificate for itself.
        let ip = Host::Ip("127.0.0.1".parse().unwrap());
        assert_eq!(
            handshake(
                first.cert_der(),
                first.server_config(&ip).unwrap(),
                "127.0.0.1"
            )
            .await,
            Ok(b"hello".to_vec())
        );
        assert!(
            first
                .cert_pem()
                .starts_with("-----BEGIN CERTIFICATE-----\n")
        );
        assert!(again.bundle_pem().ends_with(&again.cert_pem()));
        // A damaged key is named, never shown.
        std::fs::write(&key, "not a key").unwrap();
        let why = Authority::load_or_create(dir.path()).unwrap_err();
        assert!(why.contains("not a private key"), "{why}");
    }

    #[test]
    fn two_processes_agree_on_one_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(KEY_FILE);
        let first = create_key(&path).unwrap();
        assert_eq!(create_key(&path).unwrap(), first);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
