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
    use super::super::{ConnId, Ctx, EventLoop, Handler, Limits, ListenerTag, Next};
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpStream;

    /// Answers each head with itself as the body, then closes.
    struct EchoHeads;

    impl Handler for EchoHeads {
        type Conn = ();
        type FrameError = String;

        fn cut_frame(&self, _: &mut BytesMut) -> Result<Option<Bytes>, String> {
            Err("only the HTTP listener is used".into())
        }

        fn on_frame(&mut self, ctx: &mut Ctx<()>, conn: ConnId, head: Bytes) -> Next {
            if let Some(out) = ctx.write_buf(conn) {
                let status = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", head.len());
                out.extend_from_slice(status.as_bytes());
                out.extend_from_slice(&head);
            }
            ctx.close_when_flushed(conn);
            Next::Hold
        }
    }

    fn exchange(addr: std::net::SocketAddr, request: &[u8]) -> Vec<u8> {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        let _ = s.write_all(request);
        let mut answer = Vec::new();
        let _ = s.read_to_end(&mut answer);
        answer
    }

    #[test]
    fn an_http_listener_hands_over_one_head_answers_and_closes() {
        let mut lp: EventLoop<EchoHeads> = EventLoop::new(Limits::default()).unwrap();
        let addr = lp
            .listen_http("127.0.0.1:0".parse().unwrap(), ListenerTag(3))
            .unwrap();
        let stop = lp.stop_handle();
        let thread = std::thread::spawn(move || lp.run(EchoHeads));
        // A second request on the same connection is not read: the first answer closes it.
        let answer = exchange(addr, b"GET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\n\r\n");
        let head = b"GET /a HTTP/1.1\r\n\r\n";
        let expected = [
            format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", head.len()).as_bytes(),
            head,
        ]
        .concat();
        assert_eq!(answer, expected);
        let answer = exchange(addr, &[b'a'; MAX_HEAD + 100]);
        assert_eq!(answer, HEAD_TOO_LARGE);
        stop.stop();
        thread.join().unwrap().unwrap();
    }

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
