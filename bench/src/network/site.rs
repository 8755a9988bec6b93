//! The site the network benchmark downloads from: plain HTTP/1.1 on 127.0.0.1, one request per
//! connection, its bodies held in memory (`/big`, and `/small`, 1 MB).

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;

use anyhow::{Context, Result};

/// The size of `/small`.
pub const SMALL: usize = 1_000_000;

/// The site, serving until the benchmark ends.
pub struct Site {
    port: u16,
}

impl Site {
    /// Serves `/big` (`big` bytes) and `/small`.
    pub fn start(big: usize) -> Result<Site> {
        let listener = TcpListener::bind("127.0.0.1:0").context("binding the site")?;
        let port = listener.local_addr().context("the site's port")?.port();
        let big: Arc<Vec<u8>> = Arc::new((0..big).map(|n| (n % 251) as u8).collect());
        let small: Arc<Vec<u8>> = Arc::new(big.iter().copied().take(SMALL).collect());
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (big, small) = (Arc::clone(&big), Arc::clone(&small));
                std::thread::spawn(move || answer(stream, &big, &small));
            }
        });
        Ok(Site { port })
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.port
    }
}

fn answer(stream: TcpStream, big: &[u8], small: &[u8]) {
    let Ok(reader) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(reader);
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    let mut header = String::new();
    while reader.read_line(&mut header).is_ok_and(|n| n > 0) && header != "\r\n" {
        header.clear();
    }
    let body = if line.contains(" /big ") { big } else { small };
    let mut writer = stream;
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = writer.write_all(head.as_bytes());
    let _ = writer.write_all(body);
}
