//! A bench connection's byte stream: the mio socket itself, or (`--tls`) a rustls session
//! driven over it without blocking. The engine reads and writes plaintext through it either
//! way; on the plain path each call goes straight to the socket.
//!
//! The TLS handshake is done blocking before the socket joins the poll, so the engine never
//! waits on one. Afterwards a read takes what the socket holds until it would block (the
//! engine treats a short read as "socket empty", as with plain TCP), and a write hands the
//! session plaintext only once the ciphertext of the last one left; ciphertext the socket
//! did not take yet goes on the next writable event ([`Write::flush`]).

use crate::args::Options;
use mio::event::Source;
use mio::net::TcpStream;
use mio::{Interest, Registry, Token};
use rmq_namesrv::client::tls::NO_VERIFY_WARNING;
use rmq_namesrv::client::TlsConnector;
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::time::Duration;

/// How `--tls` connections are made: the connector, and each server's address as `-n` gave it
/// (its host is what the certificate must name; the IP when the list has no entry).
pub struct Tls {
    pub connector: TlsConnector,
    pub names: Vec<(SocketAddr, String)>,
}

/// The [`Tls`] of `--tls` (None without it) for the servers of `-n`, resolved to `addrs`.
pub fn tls(o: &Options, addrs: &[SocketAddr]) -> Result<Option<Tls>, String> {
    let Some(options) = &o.tls else {
        return Ok(None);
    };
    let connector = options.connector()?;
    if options.trust.is_none() {
        eprintln!("rmq-bench: {NO_VERIFY_WARNING}");
    }
    let names = addrs.iter().copied().zip(o.namesrv.iter().cloned());
    Ok(Some(Tls {
        connector,
        names: names.collect(),
    }))
}

pub enum Transport {
    Plain(TcpStream),
    #[cfg(feature = "tls")]
    Tls(Box<TlsStream>),
}

impl Transport {
    /// `tcp` (connected, blocking) made non-blocking, after a handshake when `tls` is given.
    pub fn open(
        tcp: std::net::TcpStream,
        addr: SocketAddr,
        tls: Option<&Tls>,
        timeout: Duration,
    ) -> io::Result<Transport> {
        let Some(tls) = tls else {
            tcp.set_nonblocking(true)?;
            return Ok(Transport::Plain(TcpStream::from_std(tcp)));
        };
        let name = tls.names.iter().find(|(a, _)| *a == addr);
        let host = name.map_or_else(|| addr.to_string(), |(_, host)| host.clone());
        tls_open(&tls.connector, &host, tcp, timeout)
    }

    fn tcp(&mut self) -> &mut TcpStream {
        match self {
            Transport::Plain(tcp) => tcp,
            #[cfg(feature = "tls")]
            Transport::Tls(t) => &mut t.tcp,
        }
    }
}

#[cfg(not(feature = "tls"))]
fn tls_open(
    connector: &TlsConnector,
    _: &str,
    _: std::net::TcpStream,
    _: Duration,
) -> io::Result<Transport> {
    match *connector {}
}

#[cfg(feature = "tls")]
fn tls_open(
    connector: &TlsConnector,
    host: &str,
    mut tcp: std::net::TcpStream,
    timeout: Duration,
) -> io::Result<Transport> {
    let session = connector.handshake(host, &mut tcp, timeout)?;
    tcp.set_nonblocking(true)?;
    let tcp = TcpStream::from_std(tcp);
    Ok(Transport::Tls(Box::new(TlsStream { session, tcp })))
}

impl Read for Transport {
    #[inline]
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Transport::Plain(tcp) => tcp.read(buf),
            #[cfg(feature = "tls")]
            Transport::Tls(t) => t.read(buf),
        }
    }
}

impl Write for Transport {
    #[inline]
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Transport::Plain(tcp) => tcp.write(buf),
            #[cfg(feature = "tls")]
            Transport::Tls(t) => t.write(buf),
        }
    }

    #[inline]
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Transport::Plain(_) => Ok(()),
            #[cfg(feature = "tls")]
            Transport::Tls(t) => t.send_pending(),
        }
    }
}

impl Source for Transport {
    fn register(&mut self, r: &Registry, token: Token, interest: Interest) -> io::Result<()> {
        self.tcp().register(r, token, interest)
    }

    fn reregister(&mut self, r: &Registry, token: Token, interest: Interest) -> io::Result<()> {
        self.tcp().reregister(r, token, interest)
    }

    fn deregister(&mut self, registry: &Registry) -> io::Result<()> {
        self.tcp().deregister(registry)
    }
}

#[cfg(feature = "tls")]
pub struct TlsStream {
    session: rustls::ClientConnection,
    tcp: TcpStream,
}

#[cfg(feature = "tls")]
impl TlsStream {
    /// Writes the session's ciphertext; WouldBlock when the socket does not take all of it.
    fn send_pending(&mut self) -> io::Result<()> {
        while self.session.wants_write() {
            self.session.write_tls(&mut self.tcp)?;
        }
        Ok(())
    }

    /// Plaintext into `buf` until it is full or the socket would block (then a short count),
    /// 0 at the end of the stream.
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut n = 0;
        loop {
            match self.session.reader().read(&mut buf[n..]) {
                Ok(0) if n < buf.len() => return Ok(n), // close_notify
                Ok(k) => n += k,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return if n > 0 { Ok(n) } else { Err(e) },
            }
            if n == buf.len() {
                return Ok(n);
            }
            match self.session.read_tls(&mut self.tcp) {
                Ok(0) => return Ok(n),
                Ok(_) => {}
                // What came before would-block (or a failure, met again on the next read).
                Err(_) if n > 0 => return Ok(n),
                Err(e) => return Err(e),
            }
            let processed = self.session.process_new_packets();
            processed.map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
            // Alerts or key updates the session answers: what the socket does not take now
            // goes with the next write or writable event.
            match self.send_pending() {
                Err(e) if e.kind() != io::ErrorKind::WouldBlock => return Err(e),
                _ => {}
            }
        }
    }

    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.send_pending()?;
        let n = self.session.writer().write(buf)?;
        match self.send_pending() {
            Err(e) if e.kind() != io::ErrorKind::WouldBlock => Err(e),
            _ => Ok(n),
        }
    }
}
