//! A blocking remoting client for the tools and tests: one connection (plain or TLS), a
//! timeout per call.

pub mod api;
pub mod nameserver_set;
pub mod tls;

pub use api::ClientError;
pub use nameserver_set::{NameServerSet, Strategy};
pub use tls::{TlsConnector, TlsOptions};

use crate::remoting::codes::{version, FLAG_ONEWAY};
use crate::remoting::command::{
    encode_frame, DecodeLimits, Header, RemotingCommand, SerializeType,
};
use crate::remoting::frame;
use crate::request::{Encoded, Request};
use bytes::BytesMut;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};
use tls::Stream;

/// Largest response frame the client accepts.
const CLIENT_FRAME_MAX: u32 = 64 << 20;

pub struct Client {
    stream: Stream,
    peer: SocketAddr,
    timeout: Duration,
    next_opaque: i32,
    read_buf: BytesMut,
    pub serialize_type: SerializeType,
    pub language: String,
    /// Decides the route dialect (docs/protocol.md §6.1).
    pub version: i32,
}

fn timeout_error(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, format!("timed out {what}"))
}

impl Client {
    /// Connects to `addr` (`host:port`) within `timeout`; the same timeout bounds each call.
    pub fn connect(addr: &str, timeout: Duration) -> io::Result<Client> {
        Client::connect_with(addr, timeout, None)
    }

    /// [`Client::connect`], over TLS when `tls` is given (the handshake within `timeout` too).
    pub fn connect_with(
        addr: &str,
        timeout: Duration,
        tls: Option<&TlsConnector>,
    ) -> io::Result<Client> {
        let mut last_err = io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("no address for {addr}"),
        );
        for sa in addr.to_socket_addrs()? {
            match TcpStream::connect_timeout(&sa, timeout) {
                Ok(tcp) => {
                    tcp.set_nodelay(true)?;
                    let stream = match tls {
                        None => Stream::Plain(tcp),
                        Some(tls) => tls.stream(addr, tcp, timeout)?,
                    };
                    return Ok(Client {
                        stream,
                        peer: sa,
                        timeout,
                        next_opaque: 1,
                        read_buf: BytesMut::with_capacity(8192),
                        serialize_type: SerializeType::Json,
                        language: "JAVA".to_string(),
                        version: version::CURRENT,
                    });
                }
                Err(e) => last_err = e,
            }
        }
        Err(last_err)
    }

    pub fn peer(&self) -> SocketAddr {
        self.peer
    }

    /// This end of the connection (the address the server sees).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.stream.tcp().local_addr()
    }

    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    /// A request frame with the next opaque (returned with it).
    pub fn encode<'e>(
        &mut self,
        code: i32,
        flag: i32,
        ext: impl IntoIterator<Item = (&'e str, &'e str)>,
        body: &[u8],
    ) -> (i32, Vec<u8>) {
        let opaque = self.next_opaque;
        self.next_opaque = self.next_opaque.wrapping_add(1);
        let mut out = Vec::with_capacity(128 + body.len());
        let header = Header {
            code,
            language: &self.language,
            version: self.version,
            opaque,
            flag,
            remark: None,
        };
        encode_frame(&mut out, self.serialize_type, &header, Some(ext), body);
        (opaque, out)
    }

    /// Sends a typed request, written at this client's `version`, and waits for its answer.
    pub fn send(&mut self, request: &Request<'_>) -> io::Result<RemotingCommand> {
        self.request_encoded(&request.encode(self.version))
    }

    /// Sends an encoded request (to a name server or a controller) and waits for its answer.
    pub fn request_encoded(&mut self, request: &Encoded<'_>) -> io::Result<RemotingCommand> {
        self.call(request.code, request.pairs(), &request.body)
    }

    /// Sends an encoded request oneway (no answer expected), as brokers send heartbeats.
    pub fn oneway_encoded(&mut self, request: &Encoded<'_>) -> io::Result<()> {
        let (_, frame) = self.encode(request.code, FLAG_ONEWAY, request.pairs(), &request.body);
        self.send_raw(&frame)
    }

    /// Sends a request given by code and raw ext pairs and waits for its answer.
    pub fn request(
        &mut self,
        code: i32,
        ext: &[(&str, &str)],
        body: &[u8],
    ) -> io::Result<RemotingCommand> {
        self.call(code, ext.iter().copied(), body)
    }

    fn call<'e>(
        &mut self,
        code: i32,
        ext: impl IntoIterator<Item = (&'e str, &'e str)>,
        body: &[u8],
    ) -> io::Result<RemotingCommand> {
        let (opaque, frame) = self.encode(code, 0, ext, body);
        self.send_raw(&frame)?;
        self.read_response(opaque)
    }

    /// Writes raw bytes (tests use this for malformed frames).
    pub fn send_raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.tcp().set_write_timeout(Some(self.timeout))?;
        self.stream.write_all(bytes)
    }

    /// Reads frames until the one with `opaque` arrives (others are dropped).
    pub fn read_response(&mut self, opaque: i32) -> io::Result<RemotingCommand> {
        let invalid = |e: String| io::Error::new(io::ErrorKind::InvalidData, e);
        let limits = DecodeLimits {
            max_header_len: 16 << 20,
            max_ext_fields: 65536,
            ..DecodeLimits::default()
        };
        let deadline = Instant::now() + self.timeout;
        loop {
            let frame = frame::next_frame(&mut self.read_buf, CLIENT_FRAME_MAX);
            if let Some(f) = frame.map_err(|e| invalid(e.to_string()))? {
                let cmd =
                    RemotingCommand::decode(f, &limits).map_err(|e| invalid(e.to_string()))?;
                if cmd.opaque == opaque && cmd.is_response() {
                    return Ok(cmd);
                }
                continue;
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(timeout_error("waiting for a response"));
            }
            self.stream.tcp().set_read_timeout(Some(deadline - now))?;
            let mut chunk = [0u8; 16 * 1024];
            match self.stream.read(&mut chunk) {
                Ok(0) => {
                    let closed = "connection closed by the name server";
                    return Err(io::Error::new(io::ErrorKind::UnexpectedEof, closed));
                }
                Ok(n) => self.read_buf.extend_from_slice(&chunk[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    return Err(timeout_error("waiting for a response"))
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}
