//! The metrics listener's side of HTTP/1.x: a request head (cut by the event loop) is
//! answered `GET /metrics` with the exposition, anything else with its status; every answer
//! ends the connection (`Connection: close`).

/// What a request head asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asked {
    Metrics,
    /// Not a request line of HTTP/1.x.
    BadRequest,
    NotFound,
    MethodNotAllowed,
}

pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

pub fn read_head(head: &[u8]) -> Asked {
    let line = head.split(|&b| b == b'\r').next().unwrap_or_default();
    let mut parts = line.split(|&b| b == b' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Asked::BadRequest;
    };
    if !version.starts_with(b"HTTP/1.") || method.is_empty() || !target.starts_with(b"/") {
        return Asked::BadRequest;
    }
    let path = target.split(|&b| b == b'?').next().unwrap_or_default();
    match (method, path) {
        (b"GET", b"/metrics") => Asked::Metrics,
        (_, b"/metrics") => Asked::MethodNotAllowed,
        _ => Asked::NotFound,
    }
}

/// The whole answer: status line, headers and `body` (empty but for [`Asked::Metrics`]).
pub fn write_answer(asked: Asked, body: &[u8], out: &mut Vec<u8>) {
    let (status, extra) = match asked {
        Asked::Metrics => ("200 OK", ""),
        Asked::BadRequest => ("400 Bad Request", ""),
        Asked::NotFound => ("404 Not Found", ""),
        Asked::MethodNotAllowed => ("405 Method Not Allowed", "Allow: GET\r\n"),
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {CONTENT_TYPE}\r\nContent-Length: {}\r\n{extra}Connection: close\r\n\r\n",
        body.len()
    );
    out.extend_from_slice(head.as_bytes());
    out.extend_from_slice(body);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_get_of_the_metrics_path_is_served() {
        assert_eq!(
            read_head(b"GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n"),
            Asked::Metrics
        );
        assert_eq!(
            read_head(b"GET /metrics?x=1 HTTP/1.0\r\n\r\n"),
            Asked::Metrics
        );
        assert_eq!(
            read_head(b"POST /metrics HTTP/1.1\r\n\r\n"),
            Asked::MethodNotAllowed
        );
        assert_eq!(read_head(b"GET / HTTP/1.1\r\n\r\n"), Asked::NotFound);
        assert_eq!(read_head(b"GET /metrics\r\n\r\n"), Asked::BadRequest);
        assert_eq!(read_head(b"\x00\x00\x00\x10abc\r\n\r\n"), Asked::BadRequest);
        assert_eq!(read_head(b"GET /metrics SPDY/3\r\n\r\n"), Asked::BadRequest);
    }
}
