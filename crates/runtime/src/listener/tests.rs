//! The listener over real sockets on 127.0.0.1, with short clocks. Timing assertions are only
//! generous bounds: a lower bound the server cannot beat (it must not close before its deadline)
//! and an upper bound far above the deadline (a loaded machine is slow, never early).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::routing::{get, post};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

use super::*;

/// Far above any deadline in these tests: only a server that never closes fails it.
const BOUND: Duration = Duration::from_secs(30);

/// A response far larger than what the socket buffers of 127.0.0.1 take while nobody reads.
const BIG: usize = 64 * 1024 * 1024;

fn config() -> ListenerConfig {
    ListenerConfig {
        max_connections: 16,
        header_read_timeout: Duration::from_millis(500),
        body_read_timeout: Duration::from_millis(500),
        write_timeout: Duration::from_millis(500),
        idle_timeout: Duration::from_secs(5),
        max_header_bytes: 16 * 1024,
        max_request_body_bytes: 1024 * 1024,
        max_inflight_body_bytes: 8 * 1024 * 1024,
        http2_max_concurrent_streams: None,
    }
}

fn router() -> Router {
    Router::new()
        .route("/ok", get(|| async { "ok\n" }))
        .route(
            "/echo",
            post(|body: Bytes| async move { format!("{}\n", body.len()) }),
        )
        .route("/big", get(|| async { vec![b'x'; BIG] }))
}

struct Server {
    address: SocketAddr,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Server {
    async fn start(config: ListenerConfig) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(serve(
            listener,
            Transport::Plain,
            router(),
            config,
            shutdown.clone(),
        ));
        Server {
            address,
            shutdown,
            task,
        }
    }

    async fn connect(&self) -> TcpStream {
        TcpStream::connect(self.address).await.unwrap()
    }

    async fn stop(self) {
        self.shutdown.cancel();
        tokio::time::timeout(DRAIN + BOUND, self.task)
            .await
            .expect("the listener stops after its drain")
            .unwrap();
    }
}

/// Reads until the server closes; returns what arrived and how long it took from `since`.
/// Panics when the server has not closed within [`BOUND`].
async fn until_closed(stream: &mut TcpStream, since: Instant) -> (Vec<u8>, Duration) {
    let mut received = Vec::new();
    let read = tokio::time::timeout(BOUND, async {
        let mut buf = vec![0; 64 * 1024];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => received.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    assert!(read.is_ok(), "the server did not close the connection");
    (received, since.elapsed())
}

/// Sends `request` and reads one response's head and `Content-Length` body.
async fn exchange(stream: &mut TcpStream, request: &str) -> String {
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut received = Vec::new();
    let mut buf = vec![0; 4096];
    let response = tokio::time::timeout(BOUND, async {
        loop {
            let n = stream.read(&mut buf).await.unwrap();
            assert!(n > 0, "closed before a full response: {received:?}");
            received.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&received).into_owned();
            if let Some((head, body)) = text.split_once("\r\n\r\n") {
                let length = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length: "))
                    .map_or(0, |v| v.trim().parse::<usize>().unwrap());
                if body.len() >= length {
                    return text;
                }
            }
        }
    })
    .await;
    response.expect("a response")
}

#[tokio::test]
async fn a_normal_request_answers() {
    let server = Server::start(config()).await;
    let mut stream = server.connect().await;
    let response = exchange(&mut stream, "GET /ok HTTP/1.1\r\nhost: x\r\n\r\n").await;
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(response.ends_with("ok\n"), "{response}");
    let response = exchange(
        &mut stream,
        "POST /echo HTTP/1.1\r\nhost: x\r\ncontent-length: 5\r\n\r\nhello",
    )
    .await;
    assert!(response.ends_with("\r\n\r\n5\n"), "{response}");
    server.stop().await;
}

#[tokio::test]
async fn a_client_that_sends_nothing_is_closed_after_the_header_timeout() {
    let server = Server::start(config()).await;
    let began = Instant::now();
    let mut stream = server.connect().await;
    let (received, took) = until_closed(&mut stream, began).await;
    assert!(received.is_empty(), "{received:?}");
    assert!(took >= Duration::from_millis(400), "closed early: {took:?}");
    server.stop().await;
}

#[tokio::test]
async fn half_a_request_line_is_closed_after_the_header_timeout() {
    let server = Server::start(config()).await;
    let began = Instant::now();
    let mut stream = server.connect().await;
    stream.write_all(b"GET /o").await.unwrap();
    let (received, took) = until_closed(&mut stream, began).await;
    assert!(
        received.is_empty(),
        "{}",
        String::from_utf8_lossy(&received)
    );
    assert!(took >= Duration::from_millis(400), "closed early: {took:?}");
    server.stop().await;
}

#[tokio::test]
async fn headers_trickled_after_a_first_request_are_closed_after_the_header_timeout() {
    let server = Server::start(config()).await;
    let mut stream = server.connect().await;
    let response = exchange(&mut stream, "GET /ok HTTP/1.1\r\nhost: x\r\n\r\n").await;
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    // The next request starts but its headers never end: the header clock, not the (longer)
    // idle clock, applies.
    let began = Instant::now();
    stream.write_all(b"GET /ok HTTP/1.1\r\nho").await.unwrap();
    let (received, took) = until_closed(&mut stream, began).await;
    assert!(
        received.is_empty(),
        "{}",
        String::from_utf8_lossy(&received)
    );
    assert!(
        took < Duration::from_secs(5),
        "idle clock applied: {took:?}"
    );
    server.stop().await;
}

#[tokio::test]
async fn a_stalled_body_is_closed_after_the_body_timeout() {
    let server = Server::start(config()).await;
    let mut stream = server.connect().await;
    let began = Instant::now();
    stream
        .write_all(b"POST /echo HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\n\r\n0123456789")
        .await
        .unwrap();
    let (received, took) = until_closed(&mut stream, began).await;
    let text = String::from_utf8_lossy(&received);
    assert!(text.starts_with("HTTP/1.1 400"), "{text}");
    assert!(took >= Duration::from_millis(400), "closed early: {took:?}");
    server.stop().await;
}

#[tokio::test]
async fn a_declared_oversized_body_is_refused_before_it_is_read() {
    let server = Server::start(config()).await;
    let mut stream = server.connect().await;
    let began = Instant::now();
    stream
        .write_all(b"POST /echo HTTP/1.1\r\nhost: x\r\ncontent-length: 2097152\r\n\r\n")
        .await
        .unwrap();
    let (received, _) = until_closed(&mut stream, began).await;
    let text = String::from_utf8_lossy(&received);
    assert!(text.starts_with("HTTP/1.1 413"), "{text}");
    server.stop().await;
}

#[tokio::test]
async fn a_kept_alive_connection_waits_the_idle_timeout_not_the_header_timeout() {
    let server = Server::start(config()).await;
    let mut stream = server.connect().await;
    let request = "GET /ok HTTP/1.1\r\nhost: x\r\n\r\n";
    assert!(
        exchange(&mut stream, request)
            .await
            .starts_with("HTTP/1.1 200")
    );
    // Twice the header-read timeout of silence, well inside the idle timeout (5 s).
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        exchange(&mut stream, request)
            .await
            .starts_with("HTTP/1.1 200")
    );
    let began = Instant::now();
    let (received, took) = until_closed(&mut stream, began).await;
    assert!(received.is_empty());
    assert!(
        took >= Duration::from_secs(4),
        "closed before idle: {took:?}"
    );
    server.stop().await;
}

#[tokio::test]
async fn a_client_that_does_not_read_its_response_is_closed_after_the_write_timeout() {
    let server = Server::start(config()).await;
    let mut stream = server.connect().await;
    stream
        .write_all(b"GET /big HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    // Far past the write timeout before reading anything: what fits in the socket buffers
    // arrives, then the connection ends.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (received, _) = until_closed(&mut stream, Instant::now()).await;
    assert!(
        received.starts_with(b"HTTP/1.1 200"),
        "{:?}",
        &received[..received.len().min(40)]
    );
    assert!(received.len() < BIG, "the whole response was written");
    server.stop().await;
}

/// Long clocks: nothing in the cap tests is closed by a clock.
fn capped(max_connections: usize) -> ListenerConfig {
    ListenerConfig {
        max_connections,
        header_read_timeout: Duration::from_secs(60),
        body_read_timeout: Duration::from_secs(60),
        write_timeout: Duration::from_secs(60),
        idle_timeout: Duration::from_secs(60),
        ..config()
    }
}

#[tokio::test]
async fn the_connection_cap_holds() {
    let server = Server::start(capped(2)).await;
    // Two clients take both places with a request each whose body is still coming.
    let mut busy = Vec::new();
    for _ in 0..2 {
        let mut stream = server.connect().await;
        stream
            .write_all(b"POST /echo HTTP/1.1\r\nhost: x\r\nconnection: close\r\ncontent-length: 4\r\n\r\nab")
            .await
            .unwrap();
        busy.push(stream);
    }
    // Three more with a request each: none is served while the two hold their places.
    let mut waiting = Vec::new();
    for _ in 0..3 {
        let mut stream = server.connect().await;
        stream
            .write_all(b"GET /ok HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
            .await
            .unwrap();
        waiting.push(stream);
    }
    let mut byte = [0; 1];
    let early = tokio::time::timeout(Duration::from_secs(1), waiting[0].read(&mut byte)).await;
    assert!(early.is_err(), "served past the cap: {early:?}");
    // One request completes and its connection closes: the waiting clients are served, one at
    // a time, through the place it frees.
    let mut first = busy.remove(0);
    first.write_all(b"cd").await.unwrap();
    let (received, _) = until_closed(&mut first, Instant::now()).await;
    assert!(String::from_utf8_lossy(&received).ends_with("\r\n\r\n4\n"));
    for mut stream in waiting {
        let (received, _) = until_closed(&mut stream, Instant::now()).await;
        let text = String::from_utf8_lossy(&received);
        assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    }
    // (The other body is never finished: hang up rather than wait for the drain.)
    drop(busy);
    server.stop().await;
}

#[tokio::test]
async fn at_the_cap_a_new_connection_displaces_the_oldest_silent_one() {
    let server = Server::start(capped(2)).await;
    // Two silent clients take both places, the first one first.
    let mut oldest = server.connect().await;
    let mut younger = server.connect().await;
    // A real client is served at once: the oldest silent connection makes room for it.
    let mut client = server.connect().await;
    let response = exchange(
        &mut client,
        "GET /ok HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
    )
    .await;
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    let (received, took) = until_closed(&mut oldest, Instant::now()).await;
    assert!(received.is_empty());
    assert!(took < Duration::from_secs(30), "{took:?}");
    // The younger one keeps its place (its header clock, 60 s, is far away).
    let mut byte = [0; 1];
    let kept = tokio::time::timeout(Duration::from_millis(500), younger.read(&mut byte)).await;
    assert!(
        kept.is_err(),
        "the younger silent connection was closed too: {kept:?}"
    );
    server.stop().await;
}

#[tokio::test]
async fn at_the_cap_a_new_connection_displaces_the_longest_idle_one() {
    let server = Server::start(capped(2)).await;
    let request = "GET /ok HTTP/1.1\r\nhost: x\r\n\r\n";
    // Two kept-alive clients, each after one request, take both places; the first one has been
    // idle longer.
    let mut longest = server.connect().await;
    assert!(
        exchange(&mut longest, request)
            .await
            .starts_with("HTTP/1.1 200")
    );
    let mut shorter = server.connect().await;
    assert!(
        exchange(&mut shorter, request)
            .await
            .starts_with("HTTP/1.1 200")
    );
    // A third client is served at once: the connection idle longest makes room.
    let mut client = server.connect().await;
    assert!(
        exchange(&mut client, request)
            .await
            .starts_with("HTTP/1.1 200")
    );
    let (received, _) = until_closed(&mut longest, Instant::now()).await;
    assert!(received.is_empty());
    // The other one is still served on its connection.
    assert!(
        exchange(&mut shorter, request)
            .await
            .starts_with("HTTP/1.1 200")
    );
    server.stop().await;
}

#[tokio::test]
async fn shutdown_closes_idle_connections_and_returns() {
    let server = Server::start(ListenerConfig {
        idle_timeout: Duration::from_secs(60),
        ..config()
    })
    .await;
    let mut stream = server.connect().await;
    assert!(
        exchange(&mut stream, "GET /ok HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .starts_with("HTTP/1.1 200")
    );
    let began = Instant::now();
    server.shutdown.cancel();
    let (_, took) = until_closed(&mut stream, began).await;
    assert!(
        took < DRAIN,
        "an idle connection waited for the drain: {took:?}"
    );
    server.stop().await;
}
