//! `rmq-bench canned`: a server that does no work. It answers every request frame with the
//! same SUCCESS reply (only the opaque differs), in the request's header codec, on one mio
//! thread. Running a workload against it shows the load generator's own ceiling on this
//! machine: if `rmq-bench route` reaches far more ops/s here than against a name server, the
//! name server, not the tool, set the number.

use crate::wire::scan_head;
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};
use rmq_namesrv::remoting::command::{encode_frame, Header, SerializeType};
use slab::Slab;
use std::io::{self, Read, Write};
use std::net::SocketAddr;

const LISTENER: Token = Token(usize::MAX - 1);

struct Peer {
    stream: TcpStream,
    inb: Vec<u8>,
    start: usize,
    end: usize,
    out: Vec<u8>,
    out_pos: usize,
}

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

/// Serves until the process is killed. Prints `canned listening on ADDR` first.
pub fn serve(listen: &str, body_bytes: usize) -> io::Result<()> {
    let addr: SocketAddr = listen
        .parse()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{listen}: {e}")))?;
    let mut listener = TcpListener::bind(addr)?;
    println!("canned listening on {}", listener.local_addr()?);
    let replies = Replies::new(body_bytes);
    let mut poll = Poll::new()?;
    poll.registry()
        .register(&mut listener, LISTENER, Interest::READABLE)?;
    let mut peers: Slab<Peer> = Slab::new();
    let mut events = Events::with_capacity(1024);
    loop {
        if let Err(e) = poll.poll(&mut events, None) {
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        for event in events.iter() {
            if event.token() == LISTENER {
                loop {
                    match listener.accept() {
                        Ok((mut stream, _)) => {
                            let _ = stream.set_nodelay(true);
                            let entry = peers.vacant_entry();
                            poll.registry().register(
                                &mut stream,
                                Token(entry.key()),
                                Interest::READABLE | Interest::WRITABLE,
                            )?;
                            entry.insert(Peer {
                                stream,
                                inb: vec![0; 128 * 1024],
                                start: 0,
                                end: 0,
                                out: Vec::with_capacity(64 * 1024),
                                out_pos: 0,
                            });
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => {
                            eprintln!("canned: accept: {e}");
                            break;
                        }
                    }
                }
                continue;
            }
            let key = event.token().0;
            let Some(peer) = peers.get_mut(key) else {
                continue;
            };
            let alive = serve_peer(peer, &replies);
            if !alive {
                let mut p = peers.remove(key);
                let _ = poll.registry().deregister(&mut p.stream);
            }
        }
    }
}

/// Reads what is there, answers every whole frame, writes. False when the peer is gone.
fn serve_peer(p: &mut Peer, replies: &Replies) -> bool {
    loop {
        if p.inb.len() - p.end < 16 * 1024 {
            p.inb.copy_within(p.start..p.end, 0);
            p.end -= p.start;
            p.start = 0;
            if p.inb.len() - p.end < 16 * 1024 {
                let n = p.inb.len() * 2;
                p.inb.resize(n, 0);
            }
        }
        let space = p.inb.len() - p.end;
        let short = match p.stream.read(&mut p.inb[p.end..]) {
            Ok(0) => return false,
            Ok(n) => {
                p.end += n;
                // A short read emptied the socket (see engine.rs): answer and stop reading.
                n < space
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return false,
        };
        while p.end - p.start >= 4 {
            let b = &p.inb[p.start..p.end];
            let len = u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize;
            if b.len() < 4 + len {
                break;
            }
            let frame = &b[4..4 + len];
            let binary = frame.first().is_some_and(|t| *t == 1);
            let Some(head) = scan_head(frame) else {
                return false;
            };
            p.start += 4 + len;
            if head.flag & 2 == 0 {
                replies.write(&mut p.out, binary, head.opaque);
            }
        }
        if p.start == p.end {
            p.start = 0;
            p.end = 0;
        }
        if short {
            break;
        }
    }
    while p.out_pos < p.out.len() {
        match p.stream.write(&p.out[p.out_pos..]) {
            Ok(0) => return false,
            Ok(n) => p.out_pos += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
    p.out.clear();
    p.out_pos = 0;
    true
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
