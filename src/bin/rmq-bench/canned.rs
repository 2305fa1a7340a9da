//! `rmq-bench canned`: a server that does no work. It answers every request frame with the
//! same SUCCESS reply (only the opaque differs), in the request's header codec, on the name
//! server's own event loop (`rmq_namesrv::event_loop`), so only the request handling is
//! missing. Running a workload against it shows the ceiling of the load generator and the loop
//! together on this machine: if `rmq-bench route` reaches far more ops/s here than against a
//! name server, the name server's request handling, not the tool or the loop, set the number.

use crate::wire::scan_head;
use bytes::{Bytes, BytesMut};
use rmq_namesrv::event_loop::{ConnId, Ctx, EventLoop, Handler, Limits, ListenerTag, Next};
use rmq_namesrv::remoting::command::{encode_frame, Header, SerializeType};
use rmq_namesrv::remoting::frame::{self, FrameError};
use std::io;
use std::net::SocketAddr;

/// The two reply frames, split around the opaque so that a reply is two copies and a
/// handful of digits.
struct Replies {
    /// JSON: bytes before the opaque digits and after them (length prefix patched per reply).
    json_head: Vec<u8>,
    json_tail: Vec<u8>,
    /// ROCKETMQ binary: whole frame, opaque at offset 13.
    binary: Vec<u8>,
}

impl Replies {
    fn new(body_bytes: usize) -> Replies {
        let body = vec![b'x'; body_bytes];
        let header = Header {
            code: 0,
            language: "JAVA",
            version: 479,
            opaque: 0,
            flag: 1,
            remark: None,
        };
        let mut json = Vec::new();
        let no_ext: [(&str, &str); 0] = [];
        encode_frame(&mut json, SerializeType::Json, &header, Some(no_ext), &body);
        let needle = b"\"opaque\":0";
        let at = json
            .windows(needle.len())
            .position(|w| w == needle)
            .map_or(json.len(), |p| p + needle.len() - 1);
        let json_tail = json.split_off(at + 1);
        json.truncate(at);
        let mut binary = Vec::new();
        encode_frame(
            &mut binary,
            SerializeType::RocketMq,
            &header,
            Some(no_ext),
            &body,
        );
        Replies {
            json_head: json,
            json_tail,
            binary,
        }
    }

    fn write(&self, out: &mut Vec<u8>, binary: bool, opaque: i32) {
        if binary {
            let start = out.len();
            out.extend_from_slice(&self.binary);
            out[start + 13..start + 17].copy_from_slice(&opaque.to_be_bytes());
            return;
        }
        let start = out.len();
        out.extend_from_slice(&self.json_head);
        let mut digits = [0u8; 11];
        let mut n = i64::from(opaque).unsigned_abs();
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        if opaque < 0 {
            i -= 1;
            digits[i] = b'-';
        }
        let digits_len = digits.len() - i;
        out.extend_from_slice(&digits[i..]);
        out.extend_from_slice(&self.json_tail);
        // Frame length and header length both grew by the digits written in place of "0".
        let grow = digits_len - 1;
        let patch = |out: &mut Vec<u8>, at: usize, mask: u32| {
            let v = u32::from_be_bytes([out[at], out[at + 1], out[at + 2], out[at + 3]]);
            let nv = (v & !mask) | ((v & mask) + grow as u32);
            out[at..at + 4].copy_from_slice(&nv.to_be_bytes());
        };
        patch(out, start, u32::MAX);
        patch(out, start + 4, 0x00FF_FFFF);
    }
}

/// The loop's handler: every request frame gets the canned reply.
struct Canned {
    replies: Replies,
}

impl Handler for Canned {
    type Conn = ();
    type FrameError = FrameError;

    fn cut_frame(&self, buf: &mut BytesMut) -> Result<Option<Bytes>, FrameError> {
        frame::next_frame(buf, u32::MAX)
    }

    fn on_frame(&mut self, ctx: &mut Ctx<()>, conn: ConnId, frame: Bytes) -> Next {
        let Some(head) = scan_head(&frame) else {
            return Next::Close;
        };
        if head.flag & 2 == 0 {
            if let Some(out) = ctx.write_buf(conn) {
                let binary = frame.first().is_some_and(|t| *t == 1);
                self.replies.write(out, binary, head.opaque);
            }
        }
        Next::Continue
    }
}

/// Serves until the process is killed. Prints `canned listening on ADDR` first.
pub fn serve(listen: &str, body_bytes: usize) -> io::Result<()> {
    let addr: SocketAddr = listen
        .parse()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{listen}: {e}")))?;
    // A load generator's peers read what they are sent: no backpressure, no idle closes.
    let limits = Limits {
        write_high_water: 1 << 30,
        write_hard_cap: usize::MAX,
        ..Limits::default()
    };
    let mut event_loop = EventLoop::new(limits)?;
    let bound = event_loop.listen(addr, ListenerTag(0))?;
    println!("canned listening on {bound}");
    let replies = Replies::new(body_bytes);
    event_loop.run(Canned { replies })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use rmq_namesrv::remoting::command::{DecodeLimits, RemotingCommand};

    #[test]
    fn canned_replies_decode_with_the_request_opaque() {
        let r = Replies::new(5);
        for binary in [false, true] {
            for opaque in [0, 7, -3, 1_000_000_042, i32::MIN, i32::MAX] {
                let mut out = Vec::new();
                r.write(&mut out, binary, opaque);
                let len = u32::from_be_bytes([out[0], out[1], out[2], out[3]]) as usize;
                assert_eq!(len + 4, out.len());
                let cmd = RemotingCommand::decode(
                    Bytes::copy_from_slice(&out[4..]),
                    &DecodeLimits::default(),
                )
                .unwrap();
                assert_eq!(cmd.opaque, opaque);
                assert_eq!(cmd.code, 0);
                assert!(cmd.is_response());
                assert_eq!(&cmd.body[..], b"xxxxx");
            }
        }
    }
}
