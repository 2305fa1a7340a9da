//! One connection: its socket, its read buffer (frames are cut from the front), its write
//! buffer (a `Vec<u8>` with a flush position, so a handler encodes straight into it), the
//! shared bodies queued ahead of it (a large cached answer is sent, never copied) and the
//! flags the loop schedules it by. This module moves bytes; the loop decides when to read, stop
//! reading and close. Buffers grow with the bytes that arrive, and are released once empty, so
//! idle connections do not keep a large request's capacity. Once a sixteenth of a frame's
//! announced length is in, the buffer takes the whole length at once: a large frame is copied
//! at most once (a small prefix), never in steps that each copy all of it.
//!
//! A connection holding no bytes reads into the loop's [`ReadArena`], whose allocation its
//! frames share: most reads cost no copy and no allocation; a partial frame left over is copied
//! out (a slow peer never holds the arena). A scratch array plus a copy cost steady
//! registrations a quarter of their rate (`benches/scripts/ab.sh OUT 5 "canned ns-a ns-b"
//! steady`).
//!
//! A connection on a TLS listener reads and writes through its [`Tls`] state; one without it
//! pays a check for `None` per read and write call, never per byte.

use super::tls::Tls;
use super::{ListenerTag, ReadClass};
use bytes::{Bytes, BytesMut};
use log::warn;
use mio::net::TcpStream;
use mio::{Interest, Registry, Token};
use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::mem::MaybeUninit;
use std::net::SocketAddr;

/// Spare room of a read buffer below which it grows before a read, and the least it grows by.
pub(super) const MIN_ROOM: usize = 4 * 1024;

/// Size of a fresh arena, and the room below which it is renewed before it is lent.
const ARENA_SIZE: usize = 64 * 1024;
const ARENA_RENEW_BELOW: usize = 32 * 1024;

/// Arena allocations alive at a time (held by queued frames): 2 MiB.
const MAX_ARENAS: usize = 32;

/// Bytes already flushed from the front of a write buffer past which, when they make up half
/// of it, the rest is moved to the front (a slow reader must not pin all it was sent).
const COMPACT_AFTER: usize = 64 * 1024;

pub(super) const CONNECT_TIMEOUT_MS: u64 = 3_000;

/// Why a connection is not read while the buffer budget is spent (see `budget`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Parked {
    No,
    Read,
    Write,
}

pub(super) struct Connection<C> {
    pub stream: TcpStream,
    pub peer: SocketAddr,
    /// `None` for an outbound connection.
    pub listener: Option<ListenerTag>,
    /// An outbound connection not yet established: when its connect times out.
    pub connect_deadline_ms: Option<u64>,
    pub generation: u64,
    pub read_buf: BytesMut,
    /// The whole length of the frame `read_buf` begins, once its header told (else 0).
    pub frame_len: usize,
    /// `read_buf` is the loop's read arena, lent.
    read_buf_in_arena: bool,
    /// Replies not yet written: the bodies queued (each from its offset), then
    /// `write_buf[written..]`.
    pub write_buf: Vec<u8>,
    written: usize,
    queued: VecDeque<(Bytes, usize)>,
    /// The whole length of the bodies queued.
    queued_len: usize,
    pub accounted: usize,
    /// When the last whole frame was cut (or the connection opened).
    pub last_frame_ms: u64,
    /// When the first byte of the partial frame in `read_buf` arrived, while it is being read.
    pub frame_started_ms: Option<u64>,
    pub last_write_ms: u64,
    /// The bucket of this connection's live deadline entry (0 = none).
    pub deadline_bucket: u64,
    pub served: bool,
    pub parked: Parked,
    pub class: ReadClass,
    pub read_paused: bool,
    pub held: bool,
    pub write_interest: bool,
    /// The peer sent EOF; close once everything owed to it is written.
    pub peer_closed: bool,
    pub in_line: bool,
    pub dirty: bool,
    /// `None` without TLS, and once a permissive listener's peer turned out to speak plain.
    pub tls: Option<Tls>,
    pub data: C,
}

/// Lent to one connection at a time; empty while lent.
#[derive(Default)]
pub(super) struct ReadArena {
    buf: BytesMut,
    /// One empty handle at the end of each arena allocation alive: the only handle left once
    /// every frame cut from it and the arena itself are gone, which tells a free allocation.
    allocations: Vec<BytesMut>,
}

impl ReadArena {
    /// An empty buffer if no arena can be had.
    fn lend(&mut self, max: usize) -> BytesMut {
        debug_assert!(self.buf.is_empty());
        if self.buf.capacity() < ARENA_RENEW_BELOW.min(max) {
            self.renew();
        }
        std::mem::take(&mut self.buf)
    }

    /// An allocation no frame holds any more (other free ones are dropped), else a fresh one
    /// unless [`MAX_ARENAS`] are held.
    fn renew(&mut self) {
        self.buf = BytesMut::new();
        let mut free = None;
        self.allocations.retain_mut(|end| {
            // Succeeds only for the allocation's last handle: it then spans all of it.
            if !end.try_reclaim(ARENA_SIZE) {
                return true;
            }
            if free.is_none() {
                free = Some(std::mem::take(end));
            }
            false
        });
        let mut next = match free {
            Some(buf) => buf,
            None if self.allocations.len() < MAX_ARENAS => BytesMut::with_capacity(ARENA_SIZE),
            None => return,
        };
        self.allocations.push(next.split_off(next.capacity()));
        self.buf = next;
    }
}

pub(super) fn interest(writable: bool) -> Interest {
    if writable {
        Interest::READABLE | Interest::WRITABLE
    } else {
        Interest::READABLE
    }
}

/// Reads at most `max` bytes into `buf`'s spare room.
fn read_into_spare(stream: &mut TcpStream, buf: &mut BytesMut, max: usize) -> io::Result<usize> {
    let spare = buf.spare_capacity_mut();
    let want = spare.len().min(max);
    let spare: *mut [MaybeUninit<u8>] = &mut spare[..want];
    // SAFETY: `want` bytes of `buf`'s allocation, owned by `buf` and borrowed here alone. They
    // may be uninitialised, which a `&mut [u8]` must not expose to a reader of it; the one
    // user is `TcpStream::read` (mio's, which is std's), which hands the pointer to recv(2):
    // the kernel only writes into it, nothing reads it (std's own `read_buf` for sockets
    // reads into uninitialised memory the same way). Safe Rust has no stable way to read a
    // socket into spare capacity; zeroing it first is a write of every byte per read.
    let dst = unsafe { &mut *(spare as *mut [u8]) };
    let n = stream.read(dst)?;
    assert!(
        n <= want,
        "read reported more bytes than it was given room for"
    );
    // SAFETY: the first `n` bytes of the spare room were written by the read just above, and
    // `n <= want <=` the spare room, so the new length is within the capacity.
    unsafe { buf.set_len(buf.len() + n) };
    Ok(n)
}

/// Through the connection's TLS state if it has one; a plain peer found on a permissive
/// listener is read as plain from then on.
fn read_into(
    stream: &mut TcpStream,
    tls: &mut Option<Tls>,
    buf: &mut BytesMut,
    max: usize,
) -> io::Result<usize> {
    if let Some(state) = tls {
        match state.read(stream, buf, max)? {
            Some(n) => return Ok(n),
            None => *tls = None,
        }
    }
    read_into_spare(stream, buf, max)
}

fn write_from(stream: &mut TcpStream, tls: &mut Option<Tls>, bytes: &[u8]) -> io::Result<usize> {
    match tls {
        Some(state) => state.write(stream, bytes),
        None => stream.write(bytes),
    }
}

/// Gives `buf` (a partial frame of `frame_len` bytes, 0 if unknown) room for at most `max`
/// more bytes: as much again as it holds, at least [`MIN_ROOM`], or all the frame lacks once it
/// holds a sixteenth of it; in place when its own allocation has room (never for the arena).
fn grow(buf: &mut BytesMut, max: usize, in_arena: bool, frame_len: usize) {
    let missing = frame_len.saturating_sub(buf.len());
    let additional = if missing > 0 && buf.len() >= frame_len / 16 {
        missing
    } else {
        buf.len().max(MIN_ROOM).min(max)
    };
    if !in_arena && buf.try_reclaim(additional) {
        return;
    }
    let mut grown = BytesMut::with_capacity(buf.len() + additional);
    grown.extend_from_slice(buf);
    *buf = grown;
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
            connect_deadline_ms: listener.is_none().then_some(now_ms + CONNECT_TIMEOUT_MS),
            generation,
            read_buf: BytesMut::new(),
            frame_len: 0,
            read_buf_in_arena: false,
            write_buf: Vec::new(),
            written: 0,
            queued: VecDeque::new(),
            queued_len: 0,
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
            write_interest: listener.is_none(),
            peer_closed: false,
            in_line: false,
            dirty: false,
            tls: None,
            data,
        }
    }

    pub fn unsent(&self) -> usize {
        let buffered =
            self.write_buf.len() - self.written + self.tls.as_ref().map_or(0, Tls::unsent);
        if self.queued.is_empty() {
            return buffered;
        }
        buffered
            + self
                .queued
                .iter()
                .map(|(b, at)| b.len() - at)
                .sum::<usize>()
    }

    /// A queued body counts whole for each connection holding it.
    pub fn footprint(&self) -> usize {
        let tls = self.tls.as_ref().map_or(0, Tls::footprint);
        self.read_buf.capacity() + self.write_buf.capacity() + self.queued_len + tls
    }

    /// Reading it may run handshake steps (CPU work the loop bounds per turn).
    pub fn handshaking(&self) -> bool {
        self.tls.as_ref().is_some_and(|tls| !tls.established())
    }

    /// The slowloris limit runs while a frame, or a TLS handshake, is partly in.
    pub fn mid_frame(&self) -> bool {
        !self.read_buf.is_empty() || self.tls.as_ref().is_some_and(Tls::mid_handshake)
    }

    /// `body` goes out after what the write buffer holds (copied out first: small replies),
    /// shared, not copied.
    pub fn queue_body(&mut self, body: Bytes) {
        if self.written < self.write_buf.len() {
            let before = Bytes::copy_from_slice(&self.write_buf[self.written..]);
            self.queued_len += before.len();
            self.queued.push_back((before, 0));
        }
        self.write_buf.clear();
        self.written = 0;
        if !body.is_empty() {
            self.queued_len += body.len();
            self.queued.push_back((body, 0));
        }
    }

    pub fn blocked(&self) -> bool {
        self.read_paused || self.held || self.parked != Parked::No
    }

    /// WRITABLE interest exactly while reply bytes wait.
    pub fn update_interest(&mut self, registry: &Registry, key: usize) {
        let writable = self.unsent() > 0;
        if writable != self.write_interest {
            self.write_interest = writable;
            if let Err(e) = registry.reregister(&mut self.stream, Token(key), interest(writable)) {
                warn!("reregister failed: {e}");
            }
        }
    }

    pub fn borrow_arena(&mut self, arena: &mut ReadArena, max: usize) {
        if self.read_buf.is_empty() && !self.read_buf_in_arena {
            self.read_buf = arena.lend(max);
            self.read_buf_in_arena = true;
        }
    }

    /// Once every frame was handled; after a large frame, a partial one is copied out so that
    /// it does not pin the large frame's allocation.
    pub fn release_read_buffer(&mut self, arena: &mut ReadArena, cut_large_frame: bool) {
        if std::mem::take(&mut self.read_buf_in_arena) {
            let own = BytesMut::from(&self.read_buf[..]);
            // No frame holds those bytes: the arena may read over them.
            self.read_buf.clear();
            arena.buf = std::mem::replace(&mut self.read_buf, own);
            return;
        }
        // Checked by emptiness, not capacity: after the last frame was split off, an empty
        // buffer with no spare capacity still shares (and pins) the whole allocation.
        if self.read_buf.is_empty() {
            self.read_buf = BytesMut::new();
        } else if cut_large_frame {
            self.read_buf = BytesMut::from(&self.read_buf[..]);
        }
    }

    /// Reads until the socket would block, the peer closes, `budget` bytes were read or a whole
    /// frame fills the buffer (it is cut before more is read); returns the bytes read and
    /// whether it stopped before the socket was drained.
    pub fn read_available(&mut self, budget: usize) -> io::Result<(usize, bool)> {
        let mut total = 0;
        while total < budget {
            match self.read_once(budget - total) {
                Ok(None) => break,
                Ok(Some(0)) => {
                    self.peer_closed = true;
                    return Ok((total, false));
                }
                Ok(Some(n)) => total += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok((total, false)),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        Ok((total, true))
    }

    /// `None`: a whole frame is in and there is no room left for more without a copy.
    fn read_once(&mut self, max: usize) -> io::Result<Option<usize>> {
        let len = self.read_buf.len();
        let missing = self.frame_len.saturating_sub(len);
        let want = if missing > 0 { missing } else { MIN_ROOM };
        if self.read_buf.capacity() - len < want.min(max).min(MIN_ROOM) {
            if self.frame_len > 0 && missing == 0 {
                return Ok(None);
            }
            grow(
                &mut self.read_buf,
                max,
                self.read_buf_in_arena,
                self.frame_len,
            );
            // A lent arena that grew out of it stays with the frames cut from it.
            self.read_buf_in_arena = false;
        }
        read_into(&mut self.stream, &mut self.tls, &mut self.read_buf, max).map(Some)
    }

    /// Up to `limit` bytes: a socket closed with unread input makes the kernel send a reset.
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

    /// Writes until the socket would block or `max` bytes went out.
    pub fn flush(&mut self, max: usize) -> io::Result<usize> {
        if let Some(tls) = &mut self.tls {
            match tls.send(&mut self.stream) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(0),
                result => result?,
            }
        }
        let mut total = 0;
        while total < max {
            let bytes = match self.queued.front() {
                Some((body, at)) => &body[*at..],
                None if self.written < self.write_buf.len() => &self.write_buf[self.written..],
                None => break,
            };
            let chunk = &bytes[..bytes.len().min(max - total)];
            match write_from(&mut self.stream, &mut self.tls, chunk) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    total += n;
                    match self.queued.front_mut() {
                        Some((body, at)) if *at + n == body.len() => {
                            self.queued_len -= body.len();
                            self.queued.pop_front();
                        }
                        Some((_, at)) => *at += n,
                        None => self.written += n,
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
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
        Ok(total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use std::net::{TcpListener, TcpStream as StdStream};

    impl ReadArena {
        fn room(&self) -> usize {
            self.buf.capacity()
        }
    }

    /// A connection over loopback (the server side, non-blocking) and the peer's socket.
    fn pair() -> (Connection<()>, StdStream) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let peer = StdStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, addr) = listener.accept().unwrap();
        server.set_nonblocking(true).unwrap();
        let conn = Connection::new(TcpStream::from_std(server), addr, None, 0, 0, ());
        (conn, peer)
    }

    /// Reads with `budget` until at least one byte came (the peer's bytes may take a moment
    /// to arrive), as the loop does: the arena lent first; the bytes read and whether the
    /// budget stopped it.
    fn read_some(conn: &mut Connection<()>, arena: &mut ReadArena, budget: usize) -> (usize, bool) {
        // Polled until they come, within a bound no healthy machine reaches.
        let give_up = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while std::time::Instant::now() < give_up {
            conn.borrow_arena(arena, budget);
            match conn.read_available(budget) {
                Ok((0, false)) if !conn.peer_closed => std::thread::yield_now(),
                Ok(read) => return read,
                Err(e) => panic!("read: {e}"),
            }
        }
        panic!("the peer's bytes never arrived");
    }

    /// Reads until `conn` holds `len` bytes, with no budget to speak of.
    fn read_up_to(conn: &mut Connection<()>, arena: &mut ReadArena, len: usize) {
        while conn.read_buf.len() < len {
            read_some(conn, arena, 1 << 20);
        }
        assert_eq!(conn.read_buf.len(), len, "more bytes than were sent");
    }

    fn bytes(len: usize, seed: u8) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31) ^ seed)
            .collect()
    }

    #[test]
    fn reads_never_take_more_than_the_budget_and_keep_every_byte_in_order() {
        let (mut conn, mut peer) = pair();
        let mut arena = ReadArena::default();
        let sent = bytes(100_000, 1);
        peer.write_all(&sent).unwrap();
        assert_eq!(read_some(&mut conn, &mut arena, 1), (1, true));
        let (n, stopped) = read_some(&mut conn, &mut arena, 2_999);
        assert!(n <= 2_999 && conn.read_buf.len() == 1 + n);
        assert!(stopped || n < 2_999);
        // Past the arena's room: the buffer grows out of it.
        read_up_to(&mut conn, &mut arena, sent.len());
        assert_eq!(&conn.read_buf[..], &sent[..]);
        drop(peer);
        loop {
            match conn.read_available(1 << 20) {
                Ok((0, false)) if conn.peer_closed => break,
                Ok((0, false)) => std::thread::yield_now(),
                _ => panic!("no more bytes were sent"),
            }
        }
        assert_eq!(&conn.read_buf[..], &sent[..], "a close changes nothing");
    }

    #[test]
    fn frames_read_into_the_arena_share_it_and_the_next_connection_reads_on_after_them() {
        let (mut conn, mut peer) = pair();
        let (mut other, mut other_peer) = pair();
        let mut arena = ReadArena::default();
        peer.write_all(&bytes(3_000, 2)).unwrap();
        read_up_to(&mut conn, &mut arena, 3_000);
        let start = conn.read_buf.as_ptr();
        assert_eq!(
            conn.read_buf.capacity(),
            ARENA_SIZE,
            "read at the arena's front"
        );
        let frame = conn.read_buf.split_to(3_000).freeze();
        conn.release_read_buffer(&mut arena, false);
        assert_eq!(conn.read_buf.capacity(), 0, "the arena went back");
        assert_eq!(arena.room(), ARENA_SIZE - 3_000);
        // The frame still holds the front; the next read goes on after it.
        other_peer.write_all(&bytes(5_000, 3)).unwrap();
        read_up_to(&mut other, &mut arena, 5_000);
        assert_eq!(other.read_buf.as_ptr(), start.wrapping_add(3_000));
        assert_eq!(&frame[..], &bytes(3_000, 2)[..]);
        assert_eq!(&other.read_buf[..], &bytes(5_000, 3)[..]);
    }

    #[test]
    fn a_partial_frame_leaves_the_arena_and_grows_by_at_most_what_it_holds() {
        let (mut conn, mut peer) = pair();
        let mut arena = ReadArena::default();
        let sent = bytes(20_000, 4);
        peer.write_all(&sent[..9_000]).unwrap();
        read_up_to(&mut conn, &mut arena, 9_000);
        let frame = conn.read_buf.split_to(1_000).freeze();
        conn.release_read_buffer(&mut arena, false);
        assert_eq!(conn.read_buf.capacity(), 8_000, "copied out, exactly");
        assert_eq!(
            arena.room(),
            ARENA_SIZE - 1_000,
            "read on over the partial frame"
        );
        drop(frame);
        peer.write_all(&sent[9_000..]).unwrap();
        read_up_to(&mut conn, &mut arena, 19_000);
        assert_eq!(&conn.read_buf[..], &sent[1_000..]);
        // 8,000 held: room for as much again, then 16,000 held: as much again.
        assert!(
            conn.read_buf.capacity() <= 32_000,
            "{}",
            conn.read_buf.capacity()
        );
        assert_eq!(
            arena.room(),
            ARENA_SIZE - 1_000,
            "the arena was not lent again"
        );
        // A budget smaller than the doubling caps the growth.
        let mut own = BytesMut::from(&sent[..10_000]);
        grow(&mut own, 100, false, 0);
        assert_eq!(own.capacity(), 10_100);
        assert_eq!(&own[..], &sent[..10_000]);
    }

    #[test]
    fn a_large_frame_takes_its_whole_length_once_a_sixteenth_is_in_and_is_cut_before_more() {
        let (mut conn, mut peer) = pair();
        let mut arena = ReadArena::default();
        let sent = bytes(1 << 20, 7);
        peer.write_all(&sent[..100_000]).unwrap();
        read_up_to(&mut conn, &mut arena, 100_000);
        conn.frame_len = 1_000_000;
        peer.write_all(&sent[100_000..]).unwrap();
        read_up_to(&mut conn, &mut arena, 1_000_000);
        assert_eq!(conn.read_buf.capacity(), 1_000_000, "sized once, exactly");
        // The frame is whole: nothing more is read (it would need a copy) until it is cut.
        assert_eq!(conn.read_available(1 << 20).unwrap(), (0, true));
        assert_eq!(&conn.read_buf[..], &sent[..1_000_000]);
    }

    #[test]
    fn a_connection_that_grew_out_of_the_arena_does_not_give_it_back() {
        let (mut conn, mut peer) = pair();
        let mut arena = ReadArena::default();
        peer.write_all(&bytes(80_000, 5)).unwrap();
        read_up_to(&mut conn, &mut arena, 80_000);
        assert!(!conn.read_buf_in_arena);
        conn.release_read_buffer(&mut arena, false);
        assert_eq!(conn.read_buf.len(), 80_000, "its own buffer, kept");
        assert_eq!(arena.room(), 0, "left with the bytes it held");
        // The next lend takes a fresh allocation.
        let (mut other, mut other_peer) = pair();
        other_peer.write_all(&bytes(10, 6)).unwrap();
        read_up_to(&mut other, &mut arena, 10);
        assert_eq!(other.read_buf.capacity(), ARENA_SIZE);
    }

    /// Reads `len` fresh bytes into `conn` (holding none) and cuts them as one frame.
    fn read_frame(
        conn: &mut Connection<()>,
        peer: &mut StdStream,
        arena: &mut ReadArena,
        len: usize,
    ) -> (Bytes, *const u8) {
        peer.write_all(&bytes(len, len as u8)).unwrap();
        read_up_to(conn, arena, len);
        let at = conn.read_buf.as_ptr();
        let frame = conn.read_buf.split_to(len).freeze();
        conn.release_read_buffer(arena, false);
        assert_eq!(&frame[..], &bytes(len, len as u8)[..]);
        (frame, at)
    }

    #[test]
    fn the_arena_starts_over_in_place_once_no_frame_cut_from_it_is_left() {
        let (mut conn, mut peer) = pair();
        let mut arena = ReadArena::default();
        let (frame, first) = read_frame(&mut conn, &mut peer, &mut arena, 40_000);
        // Its room is below the renewal mark; while a frame holds it, a new arena is taken.
        let (small, second) = read_frame(&mut conn, &mut peer, &mut arena, 100);
        assert_ne!(second, first);
        assert_eq!(arena.allocations.len(), 2);
        drop((frame, small));
        // Filled past the mark again: the first allocation free, it starts over at its front;
        // the second one, free too, is let go.
        let _ = read_frame(&mut conn, &mut peer, &mut arena, 40_000);
        let (_, third) = read_frame(&mut conn, &mut peer, &mut arena, 10);
        assert_eq!(third, first);
        assert_eq!(arena.allocations.len(), 1);
    }

    #[test]
    fn arenas_held_by_frames_are_bounded_and_past_the_bound_reads_copy() {
        let (mut conn, mut peer) = pair();
        let mut arena = ReadArena::default();
        // Each frame leaves its arena below the renewal mark and holds it.
        let mut held: Vec<Bytes> = (0..MAX_ARENAS)
            .map(|_| read_frame(&mut conn, &mut peer, &mut arena, 40_000).0)
            .collect();
        assert_eq!(arena.allocations.len(), MAX_ARENAS);
        peer.write_all(&bytes(10_000, 1)).unwrap();
        read_up_to(&mut conn, &mut arena, 10_000);
        assert!(
            !conn.read_buf_in_arena,
            "no arena to lend: a buffer of its own"
        );
        assert!(conn.read_buf.capacity() <= 16 * 1024);
        assert_eq!(&conn.read_buf[..], &bytes(10_000, 1)[..]);
        assert_eq!(arena.allocations.len(), MAX_ARENAS);
        let _ = conn.read_buf.split_to(10_000);
        conn.release_read_buffer(&mut arena, false);
        // One frame let go: its allocation is lent again.
        let freed = held.swap_remove(5).as_ptr();
        let (_, at) = read_frame(&mut conn, &mut peer, &mut arena, 100);
        assert_eq!(at, freed);
    }

    /// Reads from the (blocking) peer until `len` bytes came.
    fn receive(peer: &mut StdStream, len: usize) -> Vec<u8> {
        let mut got = vec![0; len];
        peer.read_exact(&mut got).unwrap();
        got
    }

    #[test]
    fn queued_bodies_go_out_in_order_between_small_replies_and_count_while_held() {
        let (mut conn, mut peer) = pair();
        let body = Bytes::from(bytes(8 << 20, 9));
        conn.write_buf.extend_from_slice(b"head-1");
        conn.queue_body(body.clone());
        conn.write_buf.extend_from_slice(b"head-2");
        conn.queue_body(body.clone());
        conn.queue_body(Bytes::new());
        conn.write_buf.extend_from_slice(b"tail");
        let whole = 2 * body.len() + 16;
        assert_eq!(conn.unsent(), whole);
        assert!(conn.footprint() >= 2 * body.len(), "each hold counts whole");
        // Written while the peer reads: partial writes resume where they stopped.
        let reader = std::thread::spawn(move || receive(&mut peer, whole));
        let mut sent = 0;
        while conn.unsent() > 0 {
            let before = conn.unsent();
            let n = conn.flush(1 << 20).unwrap();
            assert!(n <= 1 << 20, "a flush wrote {n} bytes");
            sent += n;
            assert_eq!(conn.unsent(), whole - sent);
            if conn.unsent() == before {
                std::thread::yield_now();
            }
        }
        let got = reader.join().unwrap();
        let mut expected = b"head-1".to_vec();
        expected.extend_from_slice(&body);
        expected.extend_from_slice(b"head-2");
        expected.extend_from_slice(&body);
        expected.extend_from_slice(b"tail");
        assert!(got == expected, "bytes out of order");
        assert!(conn.queued.is_empty());
        assert!(conn.footprint() < 1 << 20, "the bodies were let go");
        assert_eq!(Bytes::clone(&body).len(), 8 << 20, "shared, never changed");
    }

    #[test]
    fn a_body_queued_behind_a_half_written_buffer_keeps_the_unsent_part_first() {
        let (mut conn, mut peer) = pair();
        conn.write_buf.extend_from_slice(b"abcdef");
        conn.written = 2;
        conn.queue_body(Bytes::from_static(b"BODY"));
        assert_eq!(conn.unsent(), 8);
        conn.flush(8).unwrap();
        assert_eq!(receive(&mut peer, 8), b"cdefBODY");
    }
}
