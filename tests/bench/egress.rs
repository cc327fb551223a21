//! The egress proxy's cost: `cargo bench --bench egress`.
//!
//! Against a TCP server on 127.0.0.1, each measured directly and through a
//! worker's egress proxy (its Unix socket, as the sandbox's bridge reaches
//! it; the bridge's own hop is not included):
//!
//! * a fresh request: connect (and `CONNECT`), send 100 bytes, read a
//!   100-byte answer, close: what one HTTPS request without keep-alive
//!   costs before TLS; 2,000 times, p50 and p99;
//! * a round trip of 100 bytes in an open tunnel; 10,000 times, p50 and p99;
//! * a bulk download of 512 MiB: MiB/s.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use eagle::confine::egress::{self, Egress, EgressLimits};
use eagle::profile::{DatabaseUrl, HostPattern};
use eagle::store::Store;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UnixStream};

const FRESH: usize = 2_000;
const ROUND_TRIPS: usize = 10_000;
const BULK: u64 = 512 << 20;
const MESSAGE: usize = 100;

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize].as_secs_f64() * 1e6
}

fn report(what: &str, mut samples: Vec<Duration>) {
    samples.sort();
    println!(
        "{what:<40} p50 {:>8.1} µs   p99 {:>8.1} µs",
        percentile(&samples, 0.5),
        percentile(&samples, 0.99)
    );
}

/// Answers every 100 bytes with 100 bytes; a first byte `B` asks for the bulk.
async fn server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let _ = stream.set_nodelay(true);
            tokio::spawn(async move {
                let mut buf = [0u8; MESSAGE];
                while stream.read_exact(&mut buf).await.is_ok() {
                    if buf[0] == b'B' {
                        let chunk = vec![7u8; 256 * 1024];
                        let mut left = BULK;
                        while left > 0 {
                            let n = left.min(chunk.len() as u64) as usize;
                            if stream.write_all(&chunk[..n]).await.is_err() {
                                return;
                            }
                            left -= n as u64;
                        }
                        return;
                    }
                    if stream.write_all(&buf).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    port
}

trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

async fn open(proxy: Option<&Path>, port: u16) -> Box<dyn Stream> {
    match proxy {
        None => {
            let stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
            stream.set_nodelay(true).unwrap();
            Box::new(stream)
        }
        Some(path) => {
            let mut stream = UnixStream::connect(path).await.unwrap();
            stream
                .write_all(format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n").as_bytes())
                .await
                .unwrap();
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") {
                stream.read_exact(&mut byte).await.unwrap();
                head.push(byte[0]);
            }
            assert!(head.starts_with(b"HTTP/1.1 200"), "{head:?}");
            Box::new(stream)
        }
    }
}

async fn round_trip(stream: &mut Box<dyn Stream>) {
    let mut buf = [b'r'; MESSAGE];
    stream.write_all(&buf).await.unwrap();
    stream.read_exact(&mut buf).await.unwrap();
}

async fn measure(label: &str, proxy: Option<&Path>, port: u16) {
    let mut fresh = Vec::with_capacity(FRESH);
    for i in 0..FRESH + 50 {
        let start = Instant::now();
        let mut stream = open(proxy, port).await;
        round_trip(&mut stream).await;
        drop(stream);
        if i >= 50 {
            fresh.push(start.elapsed());
        }
    }
    report(&format!("fresh request, {label}"), fresh);

    let mut stream = open(proxy, port).await;
    let mut trips = Vec::with_capacity(ROUND_TRIPS);
    for i in 0..ROUND_TRIPS + 100 {
        let start = Instant::now();
        round_trip(&mut stream).await;
        if i >= 100 {
            trips.push(start.elapsed());
        }
    }
    report(&format!("round trip in an open tunnel, {label}"), trips);
    drop(stream);

    let mut stream = open(proxy, port).await;
    let mut ask = [0u8; MESSAGE];
    ask[0] = b'B';
    let start = Instant::now();
    stream.write_all(&ask).await.unwrap();
    let mut buf = vec![0u8; 256 * 1024];
    let mut got = 0u64;
    while got < BULK {
        let n = stream.read(&mut buf).await.unwrap();
        assert!(n > 0, "the bulk ended early");
        got += n as u64;
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{:<40} {:>8.0} MiB/s",
        format!("bulk download, {label}"),
        (BULK >> 20) as f64 / secs
    );
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let dir = tempfile::Builder::new()
            .prefix("egb")
            .tempdir_in("/tmp")
            .unwrap();
        let url = format!(
            "sqlite://{}?mode=rwc",
            dir.path().join("eagle.db").display()
        );
        let store = Store::open(&DatabaseUrl::new(url)).await.unwrap();
        let port = server().await;
        let allow = vec![HostPattern::parse(&format!("127.0.0.1:{port}")).unwrap()];
        let proxy = egress::bind(&dir.path().join("egress"), None)
            .unwrap()
            .serve(Egress {
                client: eagle::confine::egress::Client::Run(1),
                store,
                allow: Arc::new(allow),
                limits: EgressLimits::default(),
                interception: None,
                model: None,
            });
        measure("direct", None, port).await;
        measure("through the proxy", Some(proxy.path()), port).await;
        proxy.stop().await;
    });
}
