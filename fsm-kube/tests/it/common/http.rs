//! A raw HTTP/1.1 client for the web view's tests: the request exactly as
//! written (any `Host`, any header), the answer's status, headers and body.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// An answer: status code, headers (lowercase names), body.
pub struct Answer {
    pub status: u16,
    pub headers: BTreeMap<String, String>,
    pub body: String,
}

/// The status code and headers (lowercase names) of an answer's head.
pub fn parse_head(head: &str) -> (u16, BTreeMap<String, String>) {
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    (status, headers)
}

/// `GET path` with `headers` (`Host` among them), answered within 20 s.
pub async fn get_with(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> Answer {
    let head: String = headers
        .iter()
        .map(|(name, value)| format!("{name}: {value}\r\n"))
        .collect();
    let asked = async {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream
            .write_all(format!("GET {path} HTTP/1.1\r\n{head}Connection: close\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await.unwrap();
        String::from_utf8_lossy(&answer).into_owned()
    };
    let answer = tokio::time::timeout(Duration::from_secs(20), asked)
        .await
        .unwrap_or_else(|_| panic!("GET {path} ({head:?}) held for 20 s"));
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let (status, headers) = parse_head(head);
    Answer {
        status,
        headers,
        body: body.to_owned(),
    }
}
