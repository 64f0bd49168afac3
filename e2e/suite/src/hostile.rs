//! Prometheus servers a tenant might name: one that answers (the operator's, or a well-behaved
//! tenant's), one that answers hundreds of megabytes, one that accepts and never answers (a
//! blackhole), each counting the connections it gets and recording the queries it is asked, so a
//! test can prove what was (not) sent and measure the cadence of one autoscaler's queries.
//!
//! Plain HTTP/1.1 on loopback, written on raw TCP so that nothing here buffers an answer: the
//! huge one streams its body in 64 KiB pieces of a valid vector, with a marker string a test looks
//! for in every message a tenant can read (it must never be echoed).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// Text inside every huge answer's series labels; a message that contains it echoes the body.
pub const MARKER: &str = "EXFILTRATED-BY-TENANT";

/// How a [`HostileServer`] answers.
#[derive(Clone, Copy, Debug)]
pub enum Behaviour {
    /// A vector of one sample with this value, for every query.
    Answer(f64),
    /// A `200` with a valid vector of about this many bytes, chunked (no Content-Length).
    Huge(usize),
    /// Accepts the connection and reads the request, then never answers.
    Silent,
}

/// A query as the server received it.
#[derive(Clone, Debug)]
pub struct Asked {
    /// When the request line arrived.
    pub at: Instant,
    /// The `query` parameter, decoded.
    pub query: String,
}

/// A running server; it stops when dropped.
pub struct HostileServer {
    address: SocketAddr,
    connections: Arc<AtomicUsize>,
    asked: Arc<Mutex<Vec<Asked>>>,
    task: JoinHandle<()>,
}

impl HostileServer {
    /// Starts a server on a loopback port.
    pub async fn start(behaviour: Behaviour) -> anyhow::Result<HostileServer> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let connections = Arc::new(AtomicUsize::new(0));
        let asked = Arc::new(Mutex::new(Vec::new()));
        let (count, log) = (connections.clone(), asked.clone());
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(serve(stream, behaviour, log.clone()));
            }
        });
        Ok(HostileServer {
            address,
            connections,
            asked,
            task,
        })
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    /// Every query received so far, in order.
    pub fn asked(&self) -> Vec<Asked> {
        self.asked
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

impl Drop for HostileServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(mut stream: TcpStream, behaviour: Behaviour, asked: Arc<Mutex<Vec<Asked>>>) {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 64 * 1024 {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let text = String::from_utf8_lossy(&head);
    let target = text.split_whitespace().nth(1).unwrap_or_default();
    let query = target
        .split_once('?')
        .map(|(_, q)| q)
        .unwrap_or_default()
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(k, _)| *k == "query")
        .map(|(_, v)| decode(v))
        .unwrap_or_default();
    asked
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push(Asked {
            at: Instant::now(),
            query,
        });
    match behaviour {
        Behaviour::Answer(value) => {
            let body = format!(
                r#"{{"status":"success","data":{{"resultType":"vector","result":[{{"metric":{{}},"value":[1700000000,"{value}"]}}]}}}}"#
            );
            let reply = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(reply.as_bytes()).await;
        }
        Behaviour::Huge(bytes) => {
            let _ = huge(&mut stream, bytes).await;
        }
        Behaviour::Silent => {
            // Hold the connection open, reading whatever else comes, until the client gives up.
            while matches!(stream.read(&mut buf).await, Ok(n) if n > 0) {}
        }
    }
}

/// A chunked `200` whose body is a valid vector of about `bytes` bytes.
async fn huge(stream: &mut TcpStream, bytes: usize) -> std::io::Result<()> {
    stream
        .write_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n",
        )
        .await?;
    let sample =
        format!(r#"{{"metric":{{"pod":"{MARKER}"}},"value":[1700000000,"1"]}},"#).into_bytes();
    let mut piece = br#"{"status":"success","data":{"resultType":"vector","result":["#.to_vec();
    let mut sent = 0;
    while sent < bytes {
        while piece.len() < 64 * 1024 {
            piece.extend_from_slice(&sample);
        }
        stream
            .write_all(format!("{:x}\r\n", piece.len()).as_bytes())
            .await?;
        stream.write_all(&piece).await?;
        stream.write_all(b"\r\n").await?;
        sent += piece.len();
        piece.clear();
    }
    let tail = br#"{"metric":{},"value":[1700000000,"1"]}]}}"#;
    stream
        .write_all(format!("{:x}\r\n", tail.len()).as_bytes())
        .await?;
    stream.write_all(tail).await?;
    stream.write_all(b"\r\n0\r\n\r\n").await
}

/// `application/x-www-form-urlencoded` decoding of one value.
fn decode(v: &str) -> String {
    form_urlencoded::parse(format!("q={v}").as_bytes())
        .next()
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default()
}
