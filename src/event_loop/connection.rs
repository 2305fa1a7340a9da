//! One connection: its socket, its read buffer (bytes arrive at the back, frames are cut from
//! the front) and its write buffer (replies appended by the handler, flushed as the socket
//! takes them), plus the few flags the loop schedules it by. This module only moves bytes and
//! reports what happened; the loop decides when to read, when to stop reading and when to close.
//!
//! The write buffer is a plain `Vec<u8>` with a flush position, so that a handler encodes its
//! reply straight into it (no copy) and the loop lends a warm buffer from a small pool to a
//! connection that has nothing pending (no allocation per reply, no memory held by idle peers).
//!
//! A read buffer is likewise released once its frames were handled, into a small pool when
//! no frame still holds its allocation, and lent to the next connection read: a broker's
//! 21 KB registration or a client's batch of requests does not cost a fresh allocation (and
//! its growth) on every turn.
//!
//! Both buffers grow with the bytes that actually arrive or are written, never with what a peer
//! announces: a frame header claiming 16 MiB reserves nothing. What a connection holds (the
//! capacity of both buffers) is what the loop's buffer budget counts ([`Connection::footprint`]).

use super::{ListenerTag, ReadClass};
use bytes::BytesMut;
use mio::net::TcpStream;
use std::io::{self, Read, Write};
use std::net::SocketAddr;

/// Bytes already flushed from the front of a write buffer past which, when they make up half
/// of it, the rest is moved to the front (a peer reading slowly must not pin all it was sent).
const COMPACT_AFTER: usize = 64 * 1024;

/// Whether `buf` (empty) has its whole allocation back, of at most `max` bytes: an empty view
/// past the frames cut from it, asked for one byte more than it shows, moves back to the start
/// of its allocation (exposing all of it) only if nothing else shares that allocation any more.
/// Never allocates.
fn reclaim_whole(buf: &mut BytesMut, max: usize) -> bool {
    if !buf.is_empty() {
        return false;
    }
    let wanted = buf.capacity() + 1;
    buf.try_reclaim(wanted) && buf.capacity() <= max
}

/// Why a connection is not read while the loop's buffer budget is spent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Parked {
    No,
    /// It holds a large partial frame: read again when the budget has room (it waits in the
    /// loop's parked line).
    Read,
    /// It holds many unsent reply bytes: its next frames wait until it has read them.
    Write,
}

pub(super) struct Connection<C> {
    stream: TcpStream,
    pub peer: SocketAddr,
    /// The listener it came in on; `None` for a connection the application opened
    /// ([`super::Ctx::connect`]).
    pub listener: Option<ListenerTag>,
    /// An outbound connection not yet established: when its connect attempt times out.
    pub connect_deadline_ms: Option<u64>,
    /// Distinguishes this connection from a later one reusing its slab slot.
    pub generation: u64,
    pub read_buf: BytesMut,
    /// Replies not yet written: `write_buf[written..]`.
    pub write_buf: Vec<u8>,
    written: usize,
    /// Bytes of both buffers as last counted in the loop's budget.
    pub accounted: usize,
    /// When the last whole frame was cut (or the connection accepted): idle time counts from
    /// here, so a peer trickling bytes of a frame it never finishes is still idle.
    pub last_frame_ms: u64,
    /// When the first byte of the partial frame in `read_buf` arrived, if one is in progress
    /// and being read (not while held or paused by the loop).
    pub frame_started_ms: Option<u64>,
    /// When the socket last took reply bytes, or had nothing left to take.
    pub last_write_ms: u64,
    /// The deadline bucket of this connection's live entry in the loop's timeouts (0 = none).
    pub deadline_bucket: u64,
    /// Whether a whole frame has been cut on this connection yet.
    pub served: bool,
    pub parked: Parked,
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
        listener: Option<ListenerTag>,
        generation: u64,
        now_ms: u64,
        data: C,
    ) -> Self {
        Connection {
            stream,
            peer,
            listener,
            connect_deadline_ms: None,
            generation,
            read_buf: BytesMut::new(),
            write_buf: Vec::new(),
            written: 0,
            accounted: 0,
            last_frame_ms: now_ms,
            frame_started_ms: None,
            last_write_ms: now_ms,
            deadline_bucket: 0,
            served: false,
            parked: Parked::No,
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

    /// Memory held by the buffers (their capacity), what the loop's budget counts.
    pub fn footprint(&self) -> usize {
        self.read_buf.capacity() + self.write_buf.capacity()
    }

    /// Releases the read buffer once every frame in it was handled: a thousand idle broker
    /// connections must not each keep the capacity of their last large request. After a large
    /// frame was cut, a few bytes of the next one are copied out so that they do not pin the
    /// large frame's allocation (a view into it) once the frame itself is dropped.
    pub fn release_idle_read_buffer(&mut self, cut_large_frame: bool) {
        // Checked by emptiness, not capacity: after the last frame was split off, an empty
        // buffer with no spare capacity still shares (and pins) the whole allocation.
        if self.read_buf.is_empty() {
            self.read_buf = BytesMut::new();
        } else if cut_large_frame {
            self.read_buf = BytesMut::from(&self.read_buf[..]);
        }
    }

    /// Takes the empty read buffer away for the loop's pool when its allocation can serve
    /// the next connection: no frame cut from it is still held anywhere, and it is at most
    /// `max` bytes. Otherwise the buffer stays (and is released as usual).
    pub fn take_reusable_read_buf(&mut self, max: usize) -> Option<BytesMut> {
        reclaim_whole(&mut self.read_buf, max).then(|| std::mem::take(&mut self.read_buf))
    }

    /// Reads until the socket would block, the peer closes, or `budget` bytes were read (never
    /// more: each read asks the socket for at most what is left of the budget).
    pub fn read_available(&mut self, scratch: &mut [u8], budget: usize) -> ReadResult {
        let mut total = 0;
        loop {
            if total >= budget {
                return ReadResult::BudgetExhausted(total);
            }
            let want = scratch.len().min(budget - total);
            match self.stream.read(&mut scratch[..want]) {
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

    /// Reads and drops what the peer sent and was not read, up to `limit` bytes: a socket
    /// closed with unread input makes the kernel send a reset, and a peer whose request was
    /// never read (at the stop) should see a clean close instead.
    pub fn discard_input(&mut self, scratch: &mut [u8], limit: usize) {
        let mut total = 0;
        while total < limit {
            match self.stream.read(scratch) {
                Ok(0) => return,
                Ok(n) => total += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return,
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
            // What is left of a large reply should not keep the whole reply's capacity.
            if self.write_buf.capacity() > 4 * self.write_buf.len() {
                self.write_buf.shrink_to(2 * self.write_buf.len());
            }
        }
        FlushResult::Written(total)
    }

    /// Takes the (empty) write buffer's allocation away, for the loop's pool.
    pub fn take_empty_write_buf(&mut self) -> Vec<u8> {
        debug_assert!(self.write_buf.is_empty());
        std::mem::take(&mut self.write_buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_buffer_is_reusable_only_once_its_frames_are_gone_and_if_small() {
        let mut buf = BytesMut::new();
        assert!(!reclaim_whole(&mut buf, 1 << 16), "nothing to reuse");
        buf.extend_from_slice(&[7u8; 3000]);
        let frame = buf.split_to(3000).freeze();
        assert!(!reclaim_whole(&mut buf, 1 << 16), "a frame still holds it");
        drop(frame);
        assert!(reclaim_whole(&mut buf, 1 << 16));
        assert!(buf.capacity() >= 3000 && buf.is_empty());
        let before = buf.as_ptr();
        buf.extend_from_slice(&[1u8; 2000]);
        assert_eq!(buf.as_ptr(), before, "reused, not reallocated");
        let frame = buf.split_to(2000);
        drop(frame);
        assert!(!reclaim_whole(&mut buf, 1000), "larger than the pool keeps");
        buf.extend_from_slice(b"x");
        assert!(!reclaim_whole(&mut buf, 1 << 16), "holds a partial frame");
    }
}
