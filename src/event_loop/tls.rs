//! TLS between a connection's socket and its buffers (feature `tls`). A listener given a
//! [`TlsAcceptor`] ([`super::Ctx::set_tls`]) hands each new connection the acceptor as it is at
//! that moment: swapping it (a certificate reload) changes new connections only.
//!
//! The first byte decides what a connection speaks: 0x16 opens a TLS handshake record (a
//! ClientHello), anything else is a plain frame, read as usual in permissive mode (the state is
//! dropped and the plain path runs as on a listener without TLS) and refused when enforcing.
//! The loop reads plaintext through [`Tls::read`] and writes through [`Tls::write`]; encrypted
//! bytes wait in `out` (counted as unsent, like any reply) until the socket takes them.

use super::ListenerTag;
use bytes::BytesMut;
use mio::net::TcpStream;
use rustls::{ServerConfig, ServerConnection};
use std::io::{self, BufRead, Write};
use std::sync::Arc;

/// The content type of a TLS record carrying handshake messages: a ClientHello's first byte.
const HANDSHAKE_RECORD: u8 = 0x16;

/// Plaintext handed to rustls at a time: one TLS record's worth.
const RECORD: usize = 16 * 1024;

/// Encrypted bytes one read takes in while no plaintext comes out: the largest handshake
/// message rustls accepts (64 KiB) and a record. Past it the read stops as if the socket were
/// drained: a peer sending records that carry no data waits for its next bytes.
const RAW_PER_READ: usize = 80 * 1024;

/// How a listener's connections speak TLS.
#[derive(Clone)]
pub struct TlsAcceptor {
    pub config: Arc<ServerConfig>,
    /// Plain connections are refused (`enforcing`), else read as plain (`permissive`).
    pub enforcing: bool,
}

/// A connection's TLS state (a session is boxed: a permissive listener's plain peers never
/// allocate one).
pub(super) enum Tls {
    /// No byte seen yet.
    Sniffing(TlsAcceptor),
    Session(Box<Session>),
}

pub(super) struct Session {
    conn: ServerConnection,
    /// Encrypted bytes (handshake messages, alerts, records) not yet written; `sent` of them
    /// are out.
    out: Vec<u8>,
    sent: usize,
    /// Encrypted bytes read since plaintext last came out (or the handshake ended): what
    /// rustls may hold of a handshake or a record in part, counted in the buffer budget.
    held_in: usize,
}

/// A refusal the loop logs (rate limited per peer address) before it closes the connection.
fn refused(reason: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("TLS: {reason}"))
}

impl Tls {
    /// The state a new connection of `listener` starts with, if that listener speaks TLS.
    pub(super) fn for_listener(
        acceptors: &[(ListenerTag, TlsAcceptor)],
        listener: ListenerTag,
    ) -> Option<Tls> {
        let (_, acceptor) = acceptors.iter().find(|(tag, _)| *tag == listener)?;
        Some(Tls::Sniffing(acceptor.clone()))
    }

    /// Past the handshake: reading it costs no more than decrypting.
    pub(super) fn established(&self) -> bool {
        matches!(self, Tls::Session(s) if !s.conn.is_handshaking())
    }

    /// A handshake has begun and is not done: it runs on the frame clock (the slowloris limit).
    pub(super) fn mid_handshake(&self) -> bool {
        matches!(self, Tls::Session(s) if s.conn.is_handshaking())
    }

    /// Encrypted bytes waiting for the socket.
    pub(super) fn unsent(&self) -> usize {
        match self {
            Tls::Session(s) => s.out.len() - s.sent,
            Tls::Sniffing(_) => 0,
        }
    }

    pub(super) fn footprint(&self) -> usize {
        match self {
            Tls::Session(s) => s.out.capacity() + s.held_in,
            Tls::Sniffing(_) => 0,
        }
    }

    /// Plaintext into `buf`'s spare room (at most `max` bytes; `buf` has room), as a socket
    /// read: `Ok(Some(0))` at the end, `WouldBlock` until more comes. `Ok(None)`: a plain peer
    /// on a permissive listener, whose bytes are still in the socket.
    pub(super) fn read(
        &mut self,
        stream: &mut TcpStream,
        buf: &mut BytesMut,
        max: usize,
    ) -> io::Result<Option<usize>> {
        if let Tls::Sniffing(acceptor) = self {
            let mut first = [0u8; 1];
            if stream.peek(&mut first)? == 0 {
                return Ok(Some(0));
            }
            if first[0] != HANDSHAKE_RECORD {
                if acceptor.enforcing {
                    return Err(refused(
                        "plain (non-TLS) bytes on a port with tls.server.mode=enforcing",
                    ));
                }
                return Ok(None);
            }
            let conn = ServerConnection::new(Arc::clone(&acceptor.config)).map_err(refused)?;
            *self = Tls::Session(Box::new(Session {
                conn,
                out: Vec::new(),
                sent: 0,
                held_in: 0,
            }));
        }
        match self {
            Tls::Session(session) => session.read(stream, buf, max).map(Some),
            Tls::Sniffing(_) => Err(io::ErrorKind::WouldBlock.into()),
        }
    }

    /// Encrypts up to a record of `plain` once the records before it are out; the bytes of
    /// `plain` taken, as a socket write.
    pub(super) fn write(&mut self, stream: &mut TcpStream, plain: &[u8]) -> io::Result<usize> {
        let Tls::Session(session) = self else {
            return Err(io::ErrorKind::WouldBlock.into());
        };
        session.send(stream)?;
        let n = session
            .conn
            .writer()
            .write(&plain[..plain.len().min(RECORD)])?;
        session.collect_output();
        match session.send(stream) {
            Err(e) if e.kind() != io::ErrorKind::WouldBlock => Err(e),
            _ => Ok(n),
        }
    }

    /// Writes what waits in `out` (handshake messages when no reply does).
    pub(super) fn send(&mut self, stream: &mut TcpStream) -> io::Result<()> {
        match self {
            Tls::Session(session) => session.send(stream),
            Tls::Sniffing(_) => Ok(()),
        }
    }
}

impl Session {
    fn read(
        &mut self,
        stream: &mut TcpStream,
        buf: &mut BytesMut,
        max: usize,
    ) -> io::Result<usize> {
        let mut raw = 0;
        loop {
            let mut reader = self.conn.reader();
            let taken = match reader.fill_buf() {
                // Empty: the peer's close_notify.
                Ok(plain) => {
                    let n = plain.len().min(max).min(buf.capacity() - buf.len());
                    buf.extend_from_slice(&plain[..n]);
                    Some(n)
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => None,
                Err(e) => return Err(e),
            };
            if let Some(n) = taken {
                reader.consume(n);
                self.held_in = 0;
                return Ok(n);
            }
            if raw >= RAW_PER_READ {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let n = self.conn.read_tls(stream)?;
            if n == 0 {
                return Ok(0);
            }
            raw += n;
            self.held_in += n;
            let handshaking = self.conn.is_handshaking();
            let processed = self.conn.process_new_packets().map(|_| ());
            if handshaking && !self.conn.is_handshaking() {
                self.held_in = 0;
            }
            // Handshake messages, or the alert that tells the peer why.
            self.collect_output();
            if let Err(e) = processed {
                let _ = self.send(stream);
                return Err(refused(e));
            }
        }
    }

    fn collect_output(&mut self) {
        while self.conn.wants_write() {
            // Into a Vec: cannot fail.
            if self.conn.write_tls(&mut self.out).is_err() {
                return;
            }
        }
    }

    fn send(&mut self, stream: &mut TcpStream) -> io::Result<()> {
        while self.sent < self.out.len() {
            match stream.write(&self.out[self.sent..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => self.sent += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        // An idle connection keeps no encrypted bytes' capacity.
        self.out = Vec::new();
        self.sent = 0;
        Ok(())
    }
}
