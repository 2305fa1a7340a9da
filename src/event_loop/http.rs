//! The second framing a listener may choose ([`super::EventLoop::listen_http`]): an HTTP/1.x
//! request head, the bytes up to the blank line, handed to [`super::Handler::on_frame`] as one
//! frame. Bounded like any frame; what the head asks is the handler's to parse and answer.

use bytes::{Bytes, BytesMut};

/// A request head no longer than this (browsers and Prometheus send well under 1 KiB).
pub(super) const MAX_HEAD: usize = 8 * 1024;

/// The answer to a longer head, before the connection is closed.
pub(super) const HEAD_TOO_LARGE: &[u8] = b"HTTP/1.1 431 Request Header Fields Too Large\r\n\
Content-Length: 0\r\nConnection: close\r\n\r\n";

/// The head `buf` begins (with its CRLFCRLF), `Ok(None)` while incomplete, `Err` past
/// [`MAX_HEAD`].
pub(super) fn cut_head(buf: &mut BytesMut) -> Result<Option<Bytes>, ()> {
    let scan = &buf[..buf.len().min(MAX_HEAD)];
    match scan.windows(4).position(|w| w == b"\r\n\r\n") {
        Some(at) => Ok(Some(buf.split_to(at + 4).freeze())),
        None if buf.len() >= MAX_HEAD => Err(()),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_head_is_cut_at_its_blank_line_and_a_long_one_refused() {
        let mut buf = BytesMut::from(&b"GET /metrics HTTP/1.1\r\nHost: x\r\n"[..]);
        assert_eq!(cut_head(&mut buf), Ok(None));
        buf.extend_from_slice(b"\r\nGET /");
        let head = cut_head(&mut buf).unwrap().unwrap();
        assert_eq!(&head[..], b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!(&buf[..], b"GET /");
        let mut long = BytesMut::from(&vec![b'a'; MAX_HEAD][..]);
        assert_eq!(cut_head(&mut long), Err(()));
    }
}
