//! A minimal FastCGI client: the PHP tests talk to php-fpm's pools
//! themselves, as a web server would.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

const FCGI_BEGIN_REQUEST: u8 = 1;
const FCGI_END_REQUEST: u8 = 3;
const FCGI_PARAMS: u8 = 4;
const FCGI_STDIN: u8 = 5;
const FCGI_STDOUT: u8 = 6;
const FCGI_STDERR: u8 = 7;

fn fcgi_record(out: &mut Vec<u8>, kind: u8, id: u16, content: &[u8]) {
    assert!(content.len() <= 0xffff);
    let pad = (8 - content.len() % 8) % 8;
    out.extend_from_slice(&[
        1,
        kind,
        (id >> 8) as u8,
        id as u8,
        (content.len() >> 8) as u8,
        content.len() as u8,
        pad as u8,
        0,
    ]);
    out.extend_from_slice(content);
    out.extend(std::iter::repeat_n(0u8, pad));
}

fn fcgi_len(out: &mut Vec<u8>, n: usize) {
    if n < 128 {
        out.push(n as u8);
    } else {
        out.extend_from_slice(&((n as u32) | 0x8000_0000).to_be_bytes());
    }
}

/// The answer to one request: the STDOUT stream (headers and body) and the
/// STDERR stream.
pub(crate) struct Response {
    pub stdout: String,
    pub stderr: String,
    pub app_status: u32,
}

impl Response {
    pub(crate) fn body(&self) -> &str {
        self.stdout
            .split_once("\r\n\r\n")
            .map(|(_, b)| b)
            .unwrap_or(&self.stdout)
    }
}

/// Sends one GET request for `script` to 127.0.0.1:`port` and reads the
/// answer until END_REQUEST.
pub(crate) fn fcgi_get(
    port: u16,
    script: &Path,
    uri: &str,
    query: &str,
) -> Result<Response, String> {
    fcgi_get_as(
        port,
        script,
        uri,
        query,
        uri.split('?').next().unwrap_or(uri),
    )
}

/// `fcgi_get` with SCRIPT_NAME given apart from REQUEST_URI (a front
/// controller: `/index.php` serving `/api/report`).
pub(crate) fn fcgi_get_as(
    port: u16,
    script: &Path,
    uri: &str,
    query: &str,
    script_name: &str,
) -> Result<Response, String> {
    let mut s =
        TcpStream::connect(("127.0.0.1", port)).map_err(|e| format!("connect to {port}: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let id = 1u16;
    let mut req = Vec::new();
    // role 1 = responder, flags 0 (close the connection after the request).
    fcgi_record(&mut req, FCGI_BEGIN_REQUEST, id, &[0, 1, 0, 0, 0, 0, 0, 0]);
    let script_s = script.to_str().unwrap();
    let docroot = script.parent().unwrap().to_str().unwrap();
    let params: Vec<(&str, &str)> = vec![
        ("GATEWAY_INTERFACE", "CGI/1.1"),
        ("SERVER_SOFTWARE", "heaplive-test"),
        ("SERVER_PROTOCOL", "HTTP/1.1"),
        ("SERVER_NAME", "localhost"),
        ("SERVER_ADDR", "127.0.0.1"),
        ("SERVER_PORT", "80"),
        ("REMOTE_ADDR", "127.0.0.1"),
        ("REMOTE_PORT", "40000"),
        ("REQUEST_METHOD", "GET"),
        ("REQUEST_URI", uri),
        ("SCRIPT_NAME", script_name),
        ("SCRIPT_FILENAME", script_s),
        ("DOCUMENT_ROOT", docroot),
        ("QUERY_STRING", query),
        ("CONTENT_LENGTH", "0"),
    ];
    let mut p = Vec::new();
    for (k, v) in params {
        fcgi_len(&mut p, k.len());
        fcgi_len(&mut p, v.len());
        p.extend_from_slice(k.as_bytes());
        p.extend_from_slice(v.as_bytes());
    }
    fcgi_record(&mut req, FCGI_PARAMS, id, &p);
    fcgi_record(&mut req, FCGI_PARAMS, id, &[]);
    fcgi_record(&mut req, FCGI_STDIN, id, &[]);
    s.write_all(&req).map_err(|e| format!("send: {e}"))?;

    let mut out = Vec::new();
    let mut err = Vec::new();
    loop {
        let mut h = [0u8; 8];
        s.read_exact(&mut h).map_err(|e| {
            format!(
                "read a record header: {e} (stdout so far: {:?}, stderr so far: {:?})",
                String::from_utf8_lossy(&out),
                String::from_utf8_lossy(&err)
            )
        })?;
        let len = u16::from_be_bytes([h[4], h[5]]) as usize;
        let mut c = vec![0u8; len + h[6] as usize];
        s.read_exact(&mut c)
            .map_err(|e| format!("read a record: {e}"))?;
        c.truncate(len);
        match h[1] {
            FCGI_STDOUT => out.extend_from_slice(&c),
            FCGI_STDERR => err.extend_from_slice(&c),
            FCGI_END_REQUEST => {
                let app_status = if c.len() >= 4 {
                    u32::from_be_bytes([c[0], c[1], c[2], c[3]])
                } else {
                    0
                };
                return Ok(Response {
                    stdout: String::from_utf8_lossy(&out).into_owned(),
                    stderr: String::from_utf8_lossy(&err).into_owned(),
                    app_status,
                });
            }
            other => return Err(format!("unexpected FastCGI record type {other}")),
        }
    }
}
