//! What a model call through the egress proxy costs: `cargo bench --bench model`.
//!
//! A fake of the Messages API over TLS on 127.0.0.1 (its certificate from
//! a test authority) answers `POST /v1/messages` with 2.4 KB of server-sent
//! events. Each call is measured from the request's first byte to the
//! answer's last, 2,000 times (p50, p99), three ways:
//!
//! * direct: the client speaks TLS to the fake;
//! * tunnelled: through a worker's egress proxy as before the model key
//!   stayed with Eagle (`CONNECT`, the client's TLS passed through);
//! * read: through the proxy as now, which answers the client's TLS with
//!   Eagle's authority, checks the call and its placeholder key, puts the
//!   real key in and sends it on over TLS of its own.
//!
//! Each way twice: calls on one kept-alive connection (what Claude Code
//! does), and a fresh connection per call (the handshakes included). The
//! proxy is reached on its Unix socket, as the sandbox's bridge reaches
//! it; the bridge's own hop is not included.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use eagle::confine::egress::authority::Authority;
use eagle::confine::egress::model::{KeyHeader, ModelGate, PLACEHOLDER};
use eagle::confine::egress::{self, Egress, EgressLimits, Interception};
use eagle::profile::{DatabaseUrl, HostPattern};
use eagle::store::Store;
use http_body_util::{BodyExt as _, Full};
use hyper::body::{Bytes, Incoming};
use hyper_util::rt::TokioIo;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UnixStream};

const CALLS: usize = 2_000;
const WARM_UP: usize = 50;
const REAL_KEY: &str = "sk-ant-bench-real-key";
/// The answer: this event, so many times (2.4 KB).
const EVENT: &str = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"0123456789abcdef\"}}\n\n";
const EVENTS: usize = 20;

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize].as_secs_f64() * 1e3
}

fn report(what: &str, mut samples: Vec<Duration>) -> (f64, f64) {
    samples.sort();
    let (p50, p99) = (percentile(&samples, 0.5), percentile(&samples, 0.99));
    println!("{what:<44} p50 {p50:>7.3} ms   p99 {p99:>7.3} ms");
    (p50, p99)
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A test authority: its certificate, and a server configuration for `localhost`.
fn test_authority() -> (CertificateDer<'static>, Arc<rustls::ServerConfig>) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca = rcgen::CertificateParams::default();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign];
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca, ca_key);
    let key = rcgen::KeyPair::generate().unwrap();
    let leaf = rcgen::CertificateParams::new(vec!["localhost".to_string()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    let der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![leaf.der().clone()], der)
        .unwrap();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    (ca_cert.der().clone(), Arc::new(config))
}

fn client_config(root: &CertificateDer<'static>) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(root.clone()).unwrap();
    let mut config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(config)
}

/// The fake Messages API: its events for a call with the real key.
async fn fake_model(config: Arc<rustls::ServerConfig>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let events: Bytes = EVENT.repeat(EVENTS).into();
    tokio::spawn(async move {
        let acceptor = tokio_rustls::TlsAcceptor::from(config);
        while let Ok((tcp, _)) = listener.accept().await {
            let _ = tcp.set_nodelay(true);
            let acceptor = acceptor.clone();
            let events = events.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service =
                    hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
                        let events = events.clone();
                        async move {
                            let keyed = request
                                .headers()
                                .get("x-api-key")
                                .is_some_and(|k| k == REAL_KEY);
                            let _ = request.into_body().collect().await;
                            let mut response = hyper::Response::new(Full::new(if keyed {
                                events
                            } else {
                                Bytes::from_static(b"no key")
                            }));
                            if !keyed {
                                *response.status_mut() = hyper::StatusCode::UNAUTHORIZED;
                            }
                            response
                                .headers_mut()
                                .insert("content-type", "text/event-stream".parse().unwrap());
                            Ok::<_, std::convert::Infallible>(response)
                        }
                    });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    port
}

trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

type Client = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

/// A connection to the model: straight to it, or through the proxy at
/// `proxy`; TLS trusting `root` either way.
async fn open(proxy: Option<&Path>, port: u16, root: &CertificateDer<'static>) -> Client {
    let stream: Box<dyn Stream> = match proxy {
        None => {
            let tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
            tcp.set_nodelay(true).unwrap();
            Box::new(tcp)
        }
        Some(path) => {
            let mut unix = UnixStream::connect(path).await.unwrap();
            unix.write_all(format!("CONNECT localhost:{port} HTTP/1.1\r\n\r\n").as_bytes())
                .await
                .unwrap();
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") {
                unix.read_exact(&mut byte).await.unwrap();
                head.push(byte[0]);
            }
            assert!(head.starts_with(b"HTTP/1.1 200"), "{head:?}");
            Box::new(unix)
        }
    };
    let tls = tokio_rustls::TlsConnector::from(client_config(root))
        .connect(ServerName::try_from("localhost").unwrap(), stream)
        .await
        .unwrap();
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .unwrap();
    tokio::spawn(connection);
    sender
}

async fn call(client: &mut Client, port: u16, key: &str) {
    client.ready().await.unwrap();
    let request = hyper::Request::post("/v1/messages?beta=true")
        .header("host", format!("localhost:{port}"))
        .header("x-api-key", key)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from_static(
            b"{\"model\":\"claude\",\"max_tokens\":100,\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}",
        )))
        .unwrap();
    let response = client.send_request(request).await.unwrap();
    assert_eq!(response.status(), 200);
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(body.len(), EVENT.len() * EVENTS);
}

/// Calls on one connection, then calls on a fresh connection each.
async fn measure(
    label: &str,
    proxy: Option<&Path>,
    port: u16,
    root: &CertificateDer<'static>,
    key: &str,
) -> [(f64, f64); 2] {
    let mut client = open(proxy, port, root).await;
    let mut kept = Vec::with_capacity(CALLS);
    for i in 0..CALLS + WARM_UP {
        let start = Instant::now();
        call(&mut client, port, key).await;
        if i >= WARM_UP {
            kept.push(start.elapsed());
        }
    }
    drop(client);
    let kept = report(&format!("{label}, kept-alive"), kept);
    let mut fresh = Vec::with_capacity(CALLS);
    for i in 0..CALLS + WARM_UP {
        let start = Instant::now();
        let mut client = open(proxy, port, root).await;
        call(&mut client, port, key).await;
        if i >= WARM_UP {
            fresh.push(start.elapsed());
        }
    }
    let fresh = report(&format!("{label}, fresh connection"), fresh);
    [kept, fresh]
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let dir = tempfile::Builder::new()
            .prefix("mdb")
            .tempdir_in("/tmp")
            .unwrap();
        let url = format!(
            "sqlite://{}?mode=rwc",
            dir.path().join("eagle.db").display()
        );
        let store = Store::open(&DatabaseUrl::new(url)).await.unwrap();
        let (test_root, server) = test_authority();
        let port = fake_model(server).await;
        let allow = Arc::new(vec![HostPattern::parse(&format!("localhost:{port}")).unwrap()]);
        let serve = |name: &str, interception: Option<Arc<Interception>>, model: Option<Arc<ModelGate>>| {
            egress::bind(&dir.path().join(name), None)
                .unwrap()
                .serve(Egress {
                    client: eagle::confine::egress::Client::Run(1),
                    store: store.clone(),
                    allow: allow.clone(),
                    limits: EgressLimits::default(),
                    interception,
                    model,
                })
        };
        let tunnel = serve("tunnel", None, None);
        let interception = Arc::new(Interception {
            authority: Arc::new(Authority::ephemeral().unwrap()),
            upstream: egress::upstream::client_config(std::slice::from_ref(&test_root)).unwrap(),
        });
        let eagle_root = interception.authority.cert_der().clone();
        let gate = ModelGate::new(
            &url::Url::parse(&format!("https://localhost:{port}")).unwrap(),
            eagle::executor::runner::CLAUDE_CALLS,
            KeyHeader::ApiKey,
            &secrecy::SecretString::from(REAL_KEY),
        )
        .unwrap();
        let read = serve("read", Some(interception), Some(Arc::new(gate)));

        let direct = measure("direct", None, port, &test_root, REAL_KEY).await;
        let tunnelled = measure("tunnelled (before)", Some(tunnel.path()), port, &test_root, REAL_KEY).await;
        let through = measure("read, key set by the proxy", Some(read.path()), port, &eagle_root, PLACEHOLDER).await;
        for (i, what) in ["kept-alive", "fresh connection"].iter().enumerate() {
            println!(
                "{what:<17} read against direct: {:+.3} ms p50, {:+.3} ms p99; against tunnelled: {:+.3} ms p50, {:+.3} ms p99",
                through[i].0 - direct[i].0,
                through[i].1 - direct[i].1,
                through[i].0 - tunnelled[i].0,
                through[i].1 - tunnelled[i].1,
            );
        }
        tunnel.stop().await;
        read.stop().await;
    });
}
