//! One client connection: its socket, read buffer (bytes arrive, frames are cut from the
//! front) and write buffer (responses appended, flushed as the socket allows). The loop
//! decides when to read and when to stop reading (backpressure); this module only moves
//! bytes and reports what happened.

use bytes::{Buf, BytesMut};
use mio::net::TcpStream;
use std::io::{self, Read, Write};
use std::net::SocketAddr;

pub struct Connection {
    stream: TcpStream,
    pub peer: SocketAddr,
    pub read_buf: BytesMut,
    pub write_buf: BytesMut,
    pub last_active_ms: u64,
    /// Distinguishes this connection from a later one reusing its slab slot.
    pub generation: u64,
    /// Backpressure: the peer is not reading its responses, so we stop reading requests.
    pub read_paused: bool,
    /// Whether WRITABLE interest is registered.
    pub write_interest: bool,
    /// The peer sent EOF; close once everything owed to it is written.
    pub peer_closed: bool,
    /// A REGISTER_BROKER from this connection waits in the loop's registration queue; its
    /// later frames are held back until it is answered.
    pub registration_queued: bool,
    /// A broker, or a new peer not yet known to be a client: its reads are scheduled after
    /// clients' reads and wait for room in the registration queue. Cleared when the first
    /// request is a client's; set for good by a REGISTER_BROKER.
    pub broker_like: bool,
    /// Whether a request has been decoded on this connection yet.
    pub seen_request: bool,
    /// In the loop's line of broker connections waiting to be read.
    pub read_deferred: bool,
}

/// Outcome of draining the socket; the numbers are bytes read.
pub enum ReadResult {
    WouldBlock(usize),
    BudgetExhausted(usize),
    Closed(usize),
    Error(io::Error),
}

/// Outcome of writing the buffer; the numbers are bytes written.
pub enum FlushResult {
    Done(usize),
    Partial(usize),
    Error(io::Error),
}

impl Connection {
    pub fn new(stream: TcpStream, peer: SocketAddr, now_ms: u64, generation: u64) -> Self {
        Connection {
            stream,
            peer,
            read_buf: BytesMut::new(),
            write_buf: BytesMut::new(),
            last_active_ms: now_ms,
            generation,
            read_paused: false,
            write_interest: false,
            peer_closed: false,
            registration_queued: false,
            broker_like: true,
            seen_request: false,
            read_deferred: false,
        }
    }

    /// Releases the read buffer once every frame in it was handled: a thousand idle broker
    /// connections must not each keep the capacity of their last registration.
    pub fn release_idle_read_buffer(&mut self) {
        // Checked by emptiness, not capacity: after the last frame was split off, an empty
        // buffer with no spare capacity still shares (and pins) the whole allocation.
        if self.read_buf.is_empty() {
            self.read_buf = BytesMut::new();
        }
    }

    pub fn stream_mut(&mut self) -> &mut TcpStream {
        &mut self.stream
    }

    /// Reads until the socket would block, the peer closes, or `budget` bytes were read.
    pub fn read_available(&mut self, scratch: &mut [u8], budget: usize) -> ReadResult {
        let mut total = 0;
        loop {
            if total >= budget {
                return ReadResult::BudgetExhausted(total);
            }
            match self.stream.read(scratch) {
                Ok(0) => return ReadResult::Closed(total),
                Ok(n) => {
                    self.read_buf.extend_from_slice(&scratch[..n]);
                    total += n;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    return ReadResult::WouldBlock(total)
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return ReadResult::Error(e),
            }
        }
    }

    /// Writes as much of the write buffer as the socket takes.
    pub fn flush(&mut self) -> FlushResult {
        let mut total = 0;
        while !self.write_buf.is_empty() {
            match self.stream.write(&self.write_buf) {
                Ok(0) => {
                    return FlushResult::Error(io::Error::new(
                        io::ErrorKind::WriteZero,
                        "socket accepted no bytes",
                    ))
                }
                Ok(n) => {
                    self.write_buf.advance(n);
                    total += n;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    return FlushResult::Partial(total)
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return FlushResult::Error(e),
            }
        }
        // Give the now empty buffer's memory back so idle peers cost nothing (its spare
        // capacity says nothing about the allocation the consumed bytes still pin).
        self.write_buf = BytesMut::new();
        FlushResult::Done(total)
    }
}
