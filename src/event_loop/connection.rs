//! One connection: its socket, its read buffer (bytes arrive at the back, frames are cut from
//! the front) and its write buffer (replies appended by the handler, flushed as the socket
//! takes them), plus the few flags the loop schedules it by. This module only moves bytes and
//! reports what happened; the loop decides when to read, when to stop reading and when to close.
//!
//! The write buffer is a plain `Vec<u8>` with a flush position, so that a handler encodes its
//! reply straight into it (no copy) and the loop lends a warm buffer from a small pool to a
//! connection that has nothing pending (no allocation per reply, no memory held by idle peers).

use super::{ListenerTag, ReadClass};
use bytes::BytesMut;
use mio::net::TcpStream;
use std::io::{self, Read, Write};
use std::net::SocketAddr;

/// Bytes already flushed from the front of a write buffer past which, when they make up half
/// of it, the rest is moved to the front (a peer reading slowly must not pin all it was sent).
const COMPACT_AFTER: usize = 64 * 1024;

pub(super) struct Connection<C> {
    stream: TcpStream,
    pub peer: SocketAddr,
    /// The listener it came in on.
    pub listener: ListenerTag,
    /// Distinguishes this connection from a later one reusing its slab slot.
    pub generation: u64,
    pub read_buf: BytesMut,
    /// Replies not yet written: `write_buf[written..]`.
    pub write_buf: Vec<u8>,
    written: usize,
    pub last_active_ms: u64,
    pub class: ReadClass,
    /// Backpressure: the peer is not reading its replies, so its requests are not read either.
    pub read_paused: bool,
    /// The handler holds this connection's next frames until it releases it.
    pub held: bool,
    /// Whether WRITABLE interest is registered.
    pub write_interest: bool,
    /// The peer sent EOF; close once everything owed to it is written.
    pub peer_closed: bool,
    /// In the loop's line of bulk connections waiting to be read.
    pub in_line: bool,
    /// In the loop's list of connections to flush after the current callback.
    pub dirty: bool,
    /// The application's own state for this connection.
    pub data: C,
}

/// Outcome of draining the socket; the numbers are bytes read.
pub(super) enum ReadResult {
    WouldBlock(usize),
    BudgetExhausted(usize),
    Closed(usize),
    Error(io::Error),
}

/// Outcome of writing the buffer; the numbers are bytes written.
pub(super) enum FlushResult {
    Written(usize),
    Error(io::Error),
}

impl<C> Connection<C> {
    pub fn new(
        stream: TcpStream,
        peer: SocketAddr,
        listener: ListenerTag,
        generation: u64,
        now_ms: u64,
        data: C,
    ) -> Self {
        Connection {
            stream,
            peer,
            listener,
            generation,
            read_buf: BytesMut::new(),
            write_buf: Vec::new(),
            written: 0,
            last_active_ms: now_ms,
            class: ReadClass::Interactive,
            read_paused: false,
            held: false,
            write_interest: false,
            peer_closed: false,
            in_line: false,
            dirty: false,
            data,
        }
    }

    pub fn stream_mut(&mut self) -> &mut TcpStream {
        &mut self.stream
    }

    /// Reply bytes not yet written to the socket.
    pub fn unsent(&self) -> usize {
        self.write_buf.len() - self.written
    }

    /// Releases the read buffer once every frame in it was handled: a thousand idle broker
    /// connections must not each keep the capacity of their last large request.
    pub fn release_idle_read_buffer(&mut self) {
        // Checked by emptiness, not capacity: after the last frame was split off, an empty
        // buffer with no spare capacity still shares (and pins) the whole allocation.
        if self.read_buf.is_empty() {
            self.read_buf = BytesMut::new();
        }
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

    /// Writes as much of the write buffer as the socket takes. When everything was written
    /// the buffer is left empty (its allocation is the caller's to keep or pool).
    pub fn flush(&mut self) -> FlushResult {
        let mut total = 0;
        while self.written < self.write_buf.len() {
            match self.stream.write(&self.write_buf[self.written..]) {
                Ok(0) => {
                    return FlushResult::Error(io::Error::new(
                        io::ErrorKind::WriteZero,
                        "socket accepted no bytes",
                    ))
                }
                Ok(n) => {
                    self.written += n;
                    total += n;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return FlushResult::Error(e),
            }
        }
        if self.written == self.write_buf.len() {
            self.write_buf.clear();
            self.written = 0;
        } else if self.written >= COMPACT_AFTER && self.written * 2 >= self.write_buf.len() {
            self.write_buf.drain(..self.written);
            self.written = 0;
        }
        FlushResult::Written(total)
    }

    /// Takes the (empty) write buffer's allocation away, for the loop's pool.
    pub fn take_empty_write_buf(&mut self) -> Vec<u8> {
        debug_assert!(self.write_buf.is_empty());
        std::mem::take(&mut self.write_buf)
    }
}
