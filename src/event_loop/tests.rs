//! The loop on its own, over real TCP, with a tiny handler: frames are a 4-byte big-endian
//! length and a payload, echoed back, except a few words that exercise holds, closes and
//! timers.

use super::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::AtomicBool;
use std::thread::JoinHandle;

const INTERACTIVE: ListenerTag = ListenerTag(0);
const BULK: ListenerTag = ListenerTag(1);
const TICK: TimerId = TimerId(7);

impl ConnId {
    /// A connection id for unit tests of the handlers (slot `key`, first generation).
    pub(crate) const fn for_test(key: usize) -> ConnId {
        ConnId { key, generation: 0 }
    }
}

/// What the handler saw, for the test thread to poll.
#[derive(Default)]
struct Probe {
    frames: AtomicUsize,
    closes: AtomicUsize,
    stale_after_close: AtomicUsize,
    bulk_waiting: AtomicUsize,
    refused: AtomicUsize,
    buffered: AtomicUsize,
    buffered_peak: AtomicUsize,
    /// Whether a large partial frame was ever left unread because the buffer budget was spent.
    parked_reads: AtomicUsize,
    closed_over_budget: AtomicUsize,
    frame_timeouts: AtomicUsize,
    accept_failures: AtomicUsize,
    bytes_in: AtomicUsize,
    /// The most bytes read in one turn (from one `before_sleep` to the next).
    max_turn_read: AtomicUsize,
    /// Payloads of the frames handled, in order.
    order: std::sync::Mutex<Vec<Vec<u8>>>,
    stopping: AtomicBool,
    admit_bulk: AtomicBool,
    release_held: AtomicBool,
    /// Outbound: where `before_sleep` connects to (then writes a frame at once).
    connect_to: std::sync::Mutex<Option<SocketAddr>>,
    close_outbound: AtomicBool,
    connected_ok: AtomicUsize,
    connect_errors: AtomicUsize,
    outbound_closes: AtomicUsize,
    /// Frames received on the outbound connection (not echoed).
    outbound_frames: std::sync::Mutex<Vec<Vec<u8>>>,
    accepts: AtomicUsize,
    turn_accepts: AtomicUsize,
    /// The most connections accepted in one turn.
    max_turn_accepts: AtomicUsize,
    /// A "stall" frame holds the loop thread until the test sets `release_stall`.
    stalled: AtomicBool,
    release_stall: AtomicBool,
    turn_work: AtomicUsize,
    /// The most "work" frames (300 µs each) handled in one turn.
    max_turn_work: AtomicUsize,
}

struct Echo {
    probe: Arc<Probe>,
    held: Vec<ConnId>,
    ticking: Option<ConnId>,
    outbound: Option<ConnId>,
}

impl Echo {
    /// The test thread's requests about the outbound connection.
    fn outbound_requests(&mut self, ctx: &mut Ctx<()>) {
        let target = self.probe.connect_to.lock().unwrap().take();
        if let Some(addr) = target {
            match ctx.connect(addr, ()) {
                Ok(id) => {
                    self.outbound = Some(id);
                    // Written before the connection is established: it waits, then goes out.
                    reply(ctx, id, b"hello from outbound");
                }
                Err(_) => {
                    self.probe.connect_errors.fetch_add(1, Ordering::SeqCst);
                }
            }
        }
        if self.probe.close_outbound.swap(false, Ordering::SeqCst) {
            if let Some(id) = self.outbound {
                ctx.close(id, "test");
            }
        }
    }
}

fn reply(ctx: &mut Ctx<()>, conn: ConnId, payload: &[u8]) {
    if let Some(out) = ctx.write_buf(conn) {
        out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        out.extend_from_slice(payload);
    }
}

impl Handler for Echo {
    type Conn = ();
    type FrameError = String;

    fn cut_frame(&self, buf: &mut BytesMut) -> Result<Option<Bytes>, String> {
        if buf.len() < 4 {
            return Ok(None);
        }
        let len = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
        if len > 1 << 20 {
            return Err(format!("frame of {len} bytes"));
        }
        if buf.len() < 4 + len {
            return Ok(None);
        }
        let _ = buf.split_to(4);
        Ok(Some(buf.split_to(len).freeze()))
    }

    fn on_accept(&mut self, _: &mut Ctx<()>, _: ConnId, listener: ListenerTag) -> ReadClass {
        self.probe.accepts.fetch_add(1, Ordering::SeqCst);
        self.probe.turn_accepts.fetch_add(1, Ordering::SeqCst);
        if listener == BULK {
            ReadClass::Bulk
        } else {
            ReadClass::Interactive
        }
    }

    fn on_frame(&mut self, ctx: &mut Ctx<()>, conn: ConnId, frame: Bytes) -> Next {
        if ctx.get(conn).is_some_and(|c| c.listener.is_none()) {
            self.probe
                .outbound_frames
                .lock()
                .unwrap()
                .push(frame.to_vec());
            return Next::Continue;
        }
        self.probe.frames.fetch_add(1, Ordering::SeqCst);
        self.probe.order.lock().unwrap().push(frame.to_vec());
        match &frame[..] {
            b"hold" => {
                self.held.push(conn);
                Next::Hold
            }
            b"close" => Next::Close,
            // A small request for a large reply.
            b"big" => {
                reply(ctx, conn, &[b'B'; 200_000]);
                Next::Continue
            }
            // A 3 MB reply whose body is shared, queued behind its length word.
            b"shared" => {
                let body = Bytes::from(vec![b'S'; 3 << 20]);
                let head = |out: &mut Vec<u8>| out.extend_from_slice(&(3u32 << 20).to_be_bytes());
                ctx.write_with_body(conn, head, body);
                Next::Continue
            }
            // The loop busy elsewhere (what a long turn looks like to the listeners).
            b"stall" => {
                self.probe.stalled.store(true, Ordering::SeqCst);
                while !self.probe.release_stall.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(1));
                }
                reply(ctx, conn, b"stall");
                Next::Continue
            }
            // A frame whose handling costs 300 µs of the loop.
            b"work" => {
                std::thread::sleep(Duration::from_micros(300));
                self.probe.turn_work.fetch_add(1, Ordering::SeqCst);
                reply(ctx, conn, b"work");
                Next::Continue
            }
            b"timer" => {
                self.ticking = Some(conn);
                ctx.set_timer(TICK, ctx.now_ms());
                Next::Continue
            }
            payload => {
                reply(ctx, conn, payload);
                Next::Continue
            }
        }
    }

    fn on_connected(&mut self, ctx: &mut Ctx<()>, conn: ConnId, result: io::Result<()>) {
        assert_eq!(Some(conn), self.outbound);
        match result {
            Ok(()) => {
                assert!(ctx
                    .get(conn)
                    .is_some_and(|c| c.connect_deadline_ms.is_none()));
                self.probe.connected_ok.fetch_add(1, Ordering::SeqCst)
            }
            Err(_) => self.probe.connect_errors.fetch_add(1, Ordering::SeqCst),
        };
    }

    fn on_close(&mut self, ctx: &mut Ctx<()>, conn: ConnId, _: ()) {
        if Some(conn) == self.outbound {
            self.probe.outbound_closes.fetch_add(1, Ordering::SeqCst);
        }
        self.probe.closes.fetch_add(1, Ordering::SeqCst);
        if ctx.write_buf(conn).is_none() && ctx.peer(conn).is_none() {
            self.probe.stale_after_close.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn on_timer(&mut self, ctx: &mut Ctx<()>, timer: TimerId) {
        if let (TICK, Some(conn)) = (timer, self.ticking) {
            reply(ctx, conn, b"tick");
        }
    }

    fn may_read_bulk(&self) -> bool {
        self.probe.admit_bulk.load(Ordering::SeqCst)
    }

    fn before_sleep(&mut self, ctx: &mut Ctx<()>) -> bool {
        self.outbound_requests(ctx);
        let p = &self.probe;
        p.bulk_waiting.store(ctx.bulk_line.len(), Ordering::SeqCst);
        let stats = ctx.stats();
        p.refused.store(stats.refused as usize, Ordering::SeqCst);
        p.buffered.store(stats.buffered_bytes, Ordering::SeqCst);
        let read =
            stats.bytes_in as usize - p.bytes_in.swap(stats.bytes_in as usize, Ordering::SeqCst);
        p.max_turn_read.fetch_max(read, Ordering::SeqCst);
        let accepted = p.turn_accepts.swap(0, Ordering::SeqCst);
        p.max_turn_accepts.fetch_max(accepted, Ordering::SeqCst);
        let worked = p.turn_work.swap(0, Ordering::SeqCst);
        p.max_turn_work.fetch_max(worked, Ordering::SeqCst);
        p.buffered_peak
            .fetch_max(stats.buffered_bytes, Ordering::SeqCst);
        p.parked_reads.fetch_max(ctx.parked.len(), Ordering::SeqCst);
        p.closed_over_budget
            .store(stats.closed_over_budget as usize, Ordering::SeqCst);
        p.frame_timeouts
            .store(stats.frame_timeouts as usize, Ordering::SeqCst);
        p.accept_failures
            .store(stats.accept_failures as usize, Ordering::SeqCst);
        p.stopping.store(ctx.is_stopping(), Ordering::SeqCst);
        if p.release_held.load(Ordering::SeqCst) {
            for conn in self.held.drain(..) {
                reply(ctx, conn, b"held-done");
                ctx.release(conn);
            }
        }
        // Work in flight while something is held (keeps a drain waiting for it).
        !self.held.is_empty()
    }
}

struct Running {
    interactive: SocketAddr,
    bulk: SocketAddr,
    stop: StopHandle,
    waker: LoopWaker,
    probe: Arc<Probe>,
    thread: JoinHandle<io::Result<Echo>>,
}

fn start(limits: Limits) -> Running {
    let mut lp: EventLoop<Echo> = EventLoop::new(limits).unwrap();
    let any = "127.0.0.1:0".parse().unwrap();
    let interactive = lp.listen(any, INTERACTIVE).unwrap();
    let bulk = lp.listen(any, BULK).unwrap();
    let probe = Arc::new(Probe::default());
    probe.admit_bulk.store(true, Ordering::SeqCst);
    let echo = Echo {
        probe: probe.clone(),
        held: Vec::new(),
        ticking: None,
        outbound: None,
    };
    let (stop, waker) = (lp.stop_handle(), lp.waker());
    let thread = std::thread::spawn(move || lp.run(echo));
    Running {
        interactive,
        bulk,
        stop,
        waker,
        probe,
        thread,
    }
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

fn frame(payload: &[u8]) -> Vec<u8> {
    let mut f = (payload.len() as u32).to_be_bytes().to_vec();
    f.extend_from_slice(payload);
    f
}

/// The next frame's payload, or None at EOF.
fn read_frame(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut len = [0u8; 4];
    match s.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return None,
        Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return None,
        Err(e) => panic!("read: {e}"),
    }
    let mut payload = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut payload).unwrap();
    Some(payload)
}

fn wait_until(mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(Instant::now() < deadline, "condition not reached in 10 s");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn echo_round_trip(addr: SocketAddr, payload: &[u8]) {
    let mut s = connect(addr);
    s.write_all(&frame(payload)).unwrap();
    assert_eq!(read_frame(&mut s).as_deref(), Some(payload));
}

#[test]
fn pipelined_frames_are_answered_in_order_on_every_listener() {
    let lp = start(Limits::default());
    for addr in [lp.interactive, lp.bulk] {
        let mut s = connect(addr);
        let mut bytes = Vec::new();
        for word in [&b"one"[..], b"two", b"three"] {
            bytes.extend(frame(word));
        }
        s.write_all(&bytes).unwrap();
        for word in [&b"one"[..], b"two", b"three"] {
            assert_eq!(read_frame(&mut s).as_deref(), Some(word));
        }
    }
    lp.stop.stop();
    lp.thread.join().unwrap().unwrap();
}

#[test]
fn frames_split_anywhere_between_reads_come_back_whole() {
    let lp = start(Limits::default());
    let sizes = [10usize, 3_000, 50_000, 20, 70_000, 5, 64 * 1024];
    let payloads: Vec<Vec<u8>> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| (0..n).map(|j| (j * 7 + i) as u8).collect())
        .collect();
    let mut stream = Vec::new();
    let mut ends = Vec::new();
    for p in &payloads {
        stream.extend(frame(p));
        ends.push(stream.len());
    }
    // Each write stops inside a frame (in its length prefix or in its payload); the echoes of
    // the frames it completed are read back before the next write, so the server has read
    // (and holds) the partial frame that follows them.
    let mut cuts: Vec<usize> = ends.iter().flat_map(|&e| [e + 2, e + 3_001]).collect();
    cuts.retain(|&c| c < stream.len());
    cuts.push(stream.len());
    cuts.sort_unstable();
    cuts.dedup();
    for addr in [lp.interactive, lp.bulk] {
        let mut s = connect(addr);
        let (mut from, mut echoed) = (0, 0);
        for &cut in &cuts {
            s.write_all(&stream[from..cut]).unwrap();
            from = cut;
            while echoed < ends.len() && ends[echoed] <= cut {
                let back = read_frame(&mut s).unwrap();
                assert!(back == payloads[echoed], "frame {echoed} came back changed");
                echoed += 1;
            }
        }
        assert_eq!(echoed, payloads.len());
    }
    stop(lp);
}

#[test]
fn a_held_connection_keeps_its_later_frames_until_released() {
    let lp = start(Limits::default());
    let mut s = connect(lp.interactive);
    let mut bytes = frame(b"hold");
    bytes.extend(frame(b"after"));
    s.write_all(&bytes).unwrap();
    wait_until(|| lp.probe.frames.load(Ordering::SeqCst) == 1);
    lp.probe.release_held.store(true, Ordering::SeqCst);
    lp.waker.wake();
    // Had "after" been handled before the release, its echo would come first.
    assert_eq!(read_frame(&mut s).as_deref(), Some(&b"held-done"[..]));
    assert_eq!(read_frame(&mut s).as_deref(), Some(&b"after"[..]));
    lp.stop.stop();
    lp.thread.join().unwrap().unwrap();
}

#[test]
fn bulk_connections_wait_in_line_while_the_handler_has_no_room() {
    let lp = start(Limits::default());
    lp.probe.admit_bulk.store(false, Ordering::SeqCst);
    let mut bulk = connect(lp.bulk);
    bulk.write_all(&frame(b"bulk")).unwrap();
    wait_until(|| lp.probe.bulk_waiting.load(Ordering::SeqCst) == 1);
    assert_eq!(lp.probe.frames.load(Ordering::SeqCst), 0);
    // Interactive connections are served meanwhile.
    echo_round_trip(lp.interactive, b"client");
    assert_eq!(lp.probe.bulk_waiting.load(Ordering::SeqCst), 1);
    lp.probe.admit_bulk.store(true, Ordering::SeqCst);
    lp.waker.wake();
    assert_eq!(read_frame(&mut bulk).as_deref(), Some(&b"bulk"[..]));
    lp.stop.stop();
    lp.thread.join().unwrap().unwrap();
}

#[test]
fn a_closed_connection_is_reported_once_and_its_id_goes_stale() {
    let lp = start(Limits::default());
    let mut s = connect(lp.interactive);
    s.write_all(&frame(b"close")).unwrap();
    assert_eq!(read_frame(&mut s), None);
    wait_until(|| lp.probe.closes.load(Ordering::SeqCst) == 1);
    assert_eq!(lp.probe.stale_after_close.load(Ordering::SeqCst), 1);
    // A peer that goes away is reported too.
    drop(connect(lp.interactive));
    wait_until(|| lp.probe.closes.load(Ordering::SeqCst) == 2);
    lp.stop.stop();
    lp.thread.join().unwrap().unwrap();
    assert_eq!(lp.probe.closes.load(Ordering::SeqCst), 2);
}

#[test]
fn a_bad_frame_closes_only_its_connection() {
    let lp = start(Limits::default());
    let mut good = connect(lp.interactive);
    let mut bad = connect(lp.interactive);
    bad.write_all(&(2u32 << 20).to_be_bytes()).unwrap();
    assert_eq!(read_frame(&mut bad), None);
    good.write_all(&frame(b"still here")).unwrap();
    assert_eq!(read_frame(&mut good).as_deref(), Some(&b"still here"[..]));
    lp.stop.stop();
    lp.thread.join().unwrap().unwrap();
}

#[test]
fn named_timers_fire_through_on_timer() {
    let lp = start(Limits::default());
    let mut s = connect(lp.interactive);
    s.write_all(&frame(b"timer")).unwrap();
    assert_eq!(read_frame(&mut s).as_deref(), Some(&b"tick"[..]));
    lp.stop.stop();
    lp.thread.join().unwrap().unwrap();
}

#[test]
fn connections_beyond_the_limit_are_refused() {
    let lp = start(Limits {
        max_connections: 1,
        ..Limits::default()
    });
    let mut first = connect(lp.interactive);
    first.write_all(&frame(b"first")).unwrap();
    assert_eq!(read_frame(&mut first).as_deref(), Some(&b"first"[..]));
    let mut second = connect(lp.interactive);
    assert_eq!(read_frame(&mut second), None);
    wait_until(|| lp.probe.refused.load(Ordering::SeqCst) == 1);
    lp.stop.stop();
    lp.thread.join().unwrap().unwrap();
}

#[test]
fn a_stop_closes_the_listeners_and_lets_work_in_flight_answer_before_run_returns() {
    // A drain timeout far beyond the test, so that only the answer ends the drain.
    let lp = start(Limits {
        drain_timeout: Duration::from_secs(600),
        ..Limits::default()
    });
    let mut s = connect(lp.interactive);
    s.write_all(&frame(b"hold")).unwrap();
    wait_until(|| lp.probe.frames.load(Ordering::SeqCst) == 1);
    lp.stop.stop();
    wait_until(|| lp.probe.stopping.load(Ordering::SeqCst));
    // No longer accepting, but the held request is still to be answered.
    assert!(TcpStream::connect(lp.interactive).is_err());
    assert!(!lp.thread.is_finished());
    lp.probe.release_held.store(true, Ordering::SeqCst);
    assert_eq!(read_frame(&mut s).as_deref(), Some(&b"held-done"[..]));
    assert_eq!(read_frame(&mut s), None);
    let echo = lp.thread.join().unwrap().unwrap();
    assert!(echo.held.is_empty());
}

#[test]
fn a_second_stop_gives_up_the_drain() {
    let lp = start(Limits::default());
    let mut s = connect(lp.interactive);
    s.write_all(&frame(b"hold")).unwrap();
    wait_until(|| lp.probe.frames.load(Ordering::SeqCst) == 1);
    lp.stop.stop();
    wait_until(|| lp.probe.stopping.load(Ordering::SeqCst));
    lp.stop.stop();
    let echo = lp.thread.join().unwrap().unwrap();
    assert_eq!(echo.held.len(), 1, "the held request was never answered");
    assert_eq!(read_frame(&mut s), None);
}

// ------------------------------------------------------------------ what peers can hold

/// A client bound to a chosen loopback address (127.0.0.x), so that tests can be several
/// peers as far as per-address rules go (the controller's peer-link tests use it too).
pub(crate) fn connect_from(source: [u8; 4], addr: SocketAddr) -> TcpStream {
    crate::test_support::connect_from(source, &addr.to_string()).expect("connect")
}

/// Whether the server closed the connection (EOF or reset) rather than answering.
fn refused(s: &mut TcpStream) -> bool {
    let _ = s.write_all(&frame(b"anyone?"));
    read_frame(s).is_none()
}

fn stop(lp: Running) {
    lp.stop.stop();
    lp.thread.join().unwrap().unwrap();
}

#[test]
fn a_frame_begun_must_complete_within_the_frame_timeout() {
    let lp = start(Limits {
        frame_timeout_ms: 1000,
        ..Limits::default()
    });
    let mut stuck = connect(lp.interactive);
    let mut slow = connect(lp.interactive);
    stuck.write_all(&frame(b"never finished")[..6]).unwrap();
    // A frame completed within the limit, in two parts, is answered.
    let whole = frame(b"in two parts");
    slow.write_all(&whole[..5]).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    slow.write_all(&whole[5..]).unwrap();
    assert_eq!(read_frame(&mut slow).as_deref(), Some(&b"in two parts"[..]));
    assert_eq!(read_frame(&mut stuck), None);
    wait_until(|| lp.probe.frame_timeouts.load(Ordering::SeqCst) == 1);
    echo_round_trip(lp.interactive, b"still serving");
    stop(lp);
}

#[test]
fn idle_time_counts_from_the_last_whole_frame_not_from_trickled_bytes() {
    let lp = start(Limits {
        idle_ms: 1000,
        ..Limits::default()
    });
    let mut s = connect(lp.interactive);
    let mut w = s.try_clone().unwrap();
    let trickle = std::thread::spawn(move || {
        // One byte of a 64-byte frame every 200 ms: bytes keep coming, no frame ever ends.
        let bytes = frame(&[b'x'; 60]);
        for b in bytes.iter().take(60) {
            if w.write_all(std::slice::from_ref(b)).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    });
    assert_eq!(read_frame(&mut s), None, "closed as idle while trickling");
    trickle.join().unwrap();
    stop(lp);
}

#[test]
fn one_address_may_hold_at_most_the_per_address_limit() {
    let lp = start(Limits {
        max_per_address: 2,
        ..Limits::default()
    });
    let mut first = connect_from([127, 0, 0, 2], lp.interactive);
    let mut second = connect_from([127, 0, 0, 2], lp.interactive);
    for s in [&mut first, &mut second] {
        s.write_all(&frame(b"mine")).unwrap();
        assert_eq!(read_frame(s).as_deref(), Some(&b"mine"[..]));
    }
    assert!(refused(&mut connect_from([127, 0, 0, 2], lp.interactive)));
    // Another address is not affected.
    let mut other = connect_from([127, 0, 0, 3], lp.interactive);
    other.write_all(&frame(b"other")).unwrap();
    assert_eq!(read_frame(&mut other).as_deref(), Some(&b"other"[..]));
    // The probe is updated in before_sleep, possibly after the echo went out in the same turn.
    wait_until(|| lp.probe.refused.load(Ordering::SeqCst) == 1);
    assert_eq!(lp.probe.refused.load(Ordering::SeqCst), 1);
    stop(lp);
}

#[test]
fn the_reserved_slots_take_only_addresses_that_completed_a_frame_recently() {
    let lp = start(Limits {
        max_connections: 3,
        reserved_for_recent: 1,
        ..Limits::default()
    });
    // A working client completes a request and goes away.
    let mut worker = connect_from([127, 0, 0, 3], lp.interactive);
    worker.write_all(&frame(b"work")).unwrap();
    assert_eq!(read_frame(&mut worker).as_deref(), Some(&b"work"[..]));
    drop(worker);
    wait_until(|| lp.probe.closes.load(Ordering::SeqCst) == 1);
    // Newcomers that never finish a request take the general slots, then are refused.
    let _a = connect_from([127, 0, 0, 2], lp.interactive);
    let _b = connect_from([127, 0, 0, 2], lp.interactive);
    assert!(refused(&mut connect_from([127, 0, 0, 4], lp.interactive)));
    // The working client still gets in.
    let mut back = connect_from([127, 0, 0, 3], lp.interactive);
    back.write_all(&frame(b"back")).unwrap();
    assert_eq!(read_frame(&mut back).as_deref(), Some(&b"back"[..]));
    stop(lp);
}

/// Writes the first `send` bytes of a frame announcing `len` payload bytes, as far as the
/// socket takes them within a second (the server may not be reading).
fn send_partial(s: &mut TcpStream, len: usize, send: usize) {
    s.set_write_timeout(Some(Duration::from_secs(1))).unwrap();
    let mut bytes = (len as u32).to_be_bytes().to_vec();
    bytes.resize(send, b'p');
    let _ = s.write_all(&bytes);
}

#[test]
fn large_partial_frames_wait_for_the_buffer_budget_while_small_requests_are_served() {
    const BUDGET: usize = 1 << 20;
    let lp = start(Limits {
        max_buffered: BUDGET,
        ..Limits::default()
    });
    let mut attackers: Vec<TcpStream> = (0..8).map(|_| connect(lp.interactive)).collect();
    for a in attackers.iter_mut() {
        send_partial(a, 1_000_000, 400_000);
    }
    wait_until(|| lp.probe.parked_reads.load(Ordering::SeqCst) > 0);
    echo_round_trip(lp.interactive, b"small request");
    // The budget, plus the one frame read past it (the lane), plus small reads.
    let peak = lp.probe.buffered_peak.load(Ordering::SeqCst);
    assert!(peak <= 2 * BUDGET + 1_000_000, "peak {peak}");
    drop(attackers);
    wait_until(|| lp.probe.buffered.load(Ordering::SeqCst) == 0);
    stop(lp);
}

/// Sends one frame of `payload` from a thread and reads the echo; true when it came back whole.
fn echo_large(addr: SocketAddr, payload: Vec<u8>) -> JoinHandle<bool> {
    std::thread::spawn(move || {
        let mut s = connect(addr);
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut w = s.try_clone().unwrap();
        let bytes = frame(&payload);
        let writer = std::thread::spawn(move || w.write_all(&bytes).is_ok());
        let echoed = read_frame(&mut s).is_some_and(|p| p == payload);
        writer.join().unwrap() && echoed
    })
}

#[test]
fn large_frames_beyond_the_budget_together_all_complete_one_at_a_time() {
    const BUDGET: usize = 1 << 20;
    let lp = start(Limits {
        max_buffered: BUDGET,
        frame_timeout_ms: 10_000,
        ..Limits::default()
    });
    // Four 900 KB frames at once: more than three times the budget. Without one frame being
    // read past the spent budget (the lane), all four would wait for each other for good.
    let senders: Vec<_> = (0..4u8)
        .map(|i| echo_large(lp.interactive, vec![b'a' + i; 900_000]))
        .collect();
    for s in senders {
        assert!(s.join().unwrap(), "a large frame was not echoed whole");
    }
    assert_eq!(lp.probe.frame_timeouts.load(Ordering::SeqCst), 0);
    stop(lp);
}

#[test]
fn stalled_partial_frames_time_out_and_give_the_budget_back() {
    const BUDGET: usize = 1 << 20;
    let lp = start(Limits {
        max_buffered: BUDGET,
        frame_timeout_ms: 1000,
        ..Limits::default()
    });
    let mut stalled: Vec<TcpStream> = (0..3).map(|_| connect(lp.interactive)).collect();
    for s in stalled.iter_mut() {
        send_partial(s, 1_000_000, 600_000);
    }
    wait_until(|| lp.probe.parked_reads.load(Ordering::SeqCst) > 0);
    wait_until(|| lp.probe.frame_timeouts.load(Ordering::SeqCst) == 3);
    wait_until(|| lp.probe.buffered.load(Ordering::SeqCst) == 0);
    for s in stalled.iter_mut() {
        assert_eq!(read_frame(s), None);
    }
    // Not under attack any more: a large frame goes through.
    assert!(echo_large(lp.interactive, vec![b'L'; 900_000])
        .join()
        .unwrap());
    stop(lp);
}

#[test]
fn peers_not_reading_their_replies_are_closed_when_the_budget_is_spent() {
    const BUDGET: usize = 1 << 20;
    let lp = start(Limits {
        max_buffered: BUDGET,
        ..Limits::default()
    });
    // Each asks for far more than the kernel's socket buffers hold, and never reads.
    let request: Vec<u8> = (0..100).flat_map(|_| frame(&[b'r'; 64 * 1024])).collect();
    let writers: Vec<_> = (0..6)
        .map(|_| {
            let mut s = connect(lp.interactive);
            let request = request.clone();
            std::thread::spawn(move || {
                s.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
                let _ = s.write_all(&request);
                s
            })
        })
        .collect();
    wait_until(|| lp.probe.closed_over_budget.load(Ordering::SeqCst) > 0);
    echo_round_trip(lp.interactive, b"small request");
    let peers: Vec<TcpStream> = writers.into_iter().map(|w| w.join().unwrap()).collect();
    wait_until(|| lp.probe.buffered.load(Ordering::SeqCst) <= BUDGET);
    drop(peers);
    wait_until(|| lp.probe.buffered.load(Ordering::SeqCst) == 0);
    stop(lp);
}

#[test]
fn a_peer_asking_for_many_large_replies_does_not_hold_the_turn() {
    let lp = start(Limits::default());
    lp.probe.admit_bulk.store(false, Ordering::SeqCst);
    // Twenty small requests for 200 KB replies, then, on another connection, a small request:
    // both wait in the bulk line, then are read in that order.
    let mut greedy = connect(lp.bulk);
    let bigs: Vec<u8> = (0..20).flat_map(|_| frame(b"big")).collect();
    greedy.write_all(&bigs).unwrap();
    wait_until(|| lp.probe.bulk_waiting.load(Ordering::SeqCst) == 1);
    let mut small = connect(lp.bulk);
    small.write_all(&frame(b"small")).unwrap();
    wait_until(|| lp.probe.bulk_waiting.load(Ordering::SeqCst) == 2);
    lp.probe.admit_bulk.store(true, Ordering::SeqCst);
    lp.waker.wake();
    assert_eq!(read_frame(&mut small).as_deref(), Some(&b"small"[..]));
    for _ in 0..20 {
        assert!(read_frame(&mut greedy).is_some_and(|r| r.len() == 200_000));
    }
    // The small request was handled after the greedy peer's first replies (256 KB worth), not
    // after all twenty.
    let order = lp.probe.order.lock().unwrap().clone();
    let at = order.iter().position(|f| f == b"small").unwrap();
    assert!(at <= 2, "the small request came {}th", at + 1);
    stop(lp);
}

#[test]
fn shared_replies_go_out_whole_and_in_order_between_copied_ones() {
    let lp = start(Limits::default());
    let mut peer = connect(lp.interactive);
    let asks: Vec<u8> = [&b"a"[..], b"shared", b"b", b"shared", b"c"]
        .iter()
        .flat_map(|f| frame(f))
        .collect();
    peer.write_all(&asks).unwrap();
    let shared = vec![b'S'; 3 << 20];
    for want in [&b"a"[..], &shared, b"b", &shared, b"c"] {
        assert!(read_frame(&mut peer).is_some_and(|r| r == want));
    }
    stop(lp);
}

#[test]
fn an_outbound_connection_to_a_listener_of_the_same_loop_carries_frames_both_ways() {
    let lp = start(Limits::default());
    *lp.probe.connect_to.lock().unwrap() = Some(lp.interactive);
    lp.waker.wake();
    // The frame written while connecting reached the listener's side, whose echo came back.
    wait_until(|| {
        lp.probe.outbound_frames.lock().unwrap().as_slice() == [b"hello from outbound".to_vec()]
    });
    assert_eq!(lp.probe.connected_ok.load(Ordering::SeqCst), 1);
    assert_eq!(lp.probe.frames.load(Ordering::SeqCst), 1);
    lp.probe.close_outbound.store(true, Ordering::SeqCst);
    lp.waker.wake();
    // Both ends are reported closed: the outbound one by the close, the accepted one by EOF.
    wait_until(|| lp.probe.closes.load(Ordering::SeqCst) == 2);
    lp.stop.stop();
    lp.thread.join().unwrap().unwrap();
    assert_eq!(lp.probe.outbound_closes.load(Ordering::SeqCst), 1);
    assert_eq!(lp.probe.closes.load(Ordering::SeqCst), 2);
    assert_eq!(lp.probe.connect_errors.load(Ordering::SeqCst), 0);
}

#[test]
fn a_refused_connect_is_reported_then_closed_once() {
    let lp = start(Limits::default());
    let closed_port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    *lp.probe.connect_to.lock().unwrap() = Some(closed_port);
    lp.waker.wake();
    wait_until(|| lp.probe.outbound_closes.load(Ordering::SeqCst) == 1);
    lp.stop.stop();
    lp.thread.join().unwrap().unwrap();
    assert_eq!(lp.probe.connect_errors.load(Ordering::SeqCst), 1);
    assert_eq!(lp.probe.connected_ok.load(Ordering::SeqCst), 0);
    assert_eq!(lp.probe.outbound_closes.load(Ordering::SeqCst), 1);
    assert!(lp.probe.outbound_frames.lock().unwrap().is_empty());
}

#[test]
fn one_turn_reads_at_most_four_read_budgets_from_all_connections_together() {
    let lp = start(Limits::default());
    lp.probe.admit_bulk.store(false, Ordering::SeqCst);
    // 32 peers each send what their socket takes of a 1 MiB frame, waiting in the bulk line.
    let mut partial = (1u32 << 20).to_be_bytes().to_vec();
    partial.resize(512 * 1024, 7);
    let mut written = 0;
    let peers: Vec<TcpStream> = (0..32)
        .map(|i| {
            let mut s = connect(lp.bulk);
            s.set_nonblocking(true).unwrap();
            let mut at = 0;
            while let Ok(n @ 1..) = s.write(&partial[at..]) {
                at += n;
            }
            written += at;
            wait_until(|| lp.probe.bulk_waiting.load(Ordering::SeqCst) == i + 1);
            s
        })
        .collect();
    let before = lp.probe.bytes_in.load(Ordering::SeqCst);
    lp.probe.max_turn_read.store(0, Ordering::SeqCst);
    // Let in at once: all 32 are read in the same turn.
    lp.probe.admit_bulk.store(true, Ordering::SeqCst);
    lp.waker.wake();
    wait_until(|| lp.probe.bytes_in.load(Ordering::SeqCst) >= before + written);
    let most = lp.probe.max_turn_read.load(Ordering::SeqCst);
    // Four read budgets, and a small read's worth for each connection (see `budget`).
    assert!(
        most <= (1 << 20) + 32 * budget::SMALL_READ,
        "{most} bytes in one turn"
    );
    drop(peers);
    lp.stop.stop();
    lp.thread.join().unwrap().unwrap();
}

/// Holds the loop thread in a "stall" frame (until [`unstall`]); returns its connection.
fn stall(r: &Running) -> TcpStream {
    let mut staller = connect(r.interactive);
    staller.write_all(&frame(b"stall")).unwrap();
    wait_until(|| r.probe.stalled.load(Ordering::SeqCst));
    staller
}

fn unstall(r: &Running, staller: &mut TcpStream) {
    r.probe.release_stall.store(true, Ordering::SeqCst);
    assert_eq!(read_frame(staller).as_deref(), Some(&b"stall"[..]));
}

#[test]
fn a_connection_storm_is_accepted_a_bounded_number_per_turn() {
    let r = start(Limits::default());
    let mut staller = stall(&r);
    // All of them wait in the listener's queue while the loop is busy.
    let storm = 5 * ACCEPTS_PER_TURN + 7;
    let mut clients: Vec<TcpStream> = (0..storm).map(|_| connect(r.interactive)).collect();
    unstall(&r, &mut staller);
    wait_until(|| r.probe.accepts.load(Ordering::SeqCst) == storm + 1);
    let most = r.probe.max_turn_accepts.load(Ordering::SeqCst);
    assert!(
        most <= ACCEPTS_PER_TURN,
        "{most} connections accepted in one turn"
    );
    for (i, c) in clients.iter_mut().enumerate() {
        let payload = format!("client {i}");
        c.write_all(&frame(payload.as_bytes())).unwrap();
        assert_eq!(read_frame(c).as_deref(), Some(payload.as_bytes()));
    }
    r.stop.stop();
    r.thread.join().unwrap().unwrap();
}

#[test]
fn bulk_frames_arriving_together_take_about_a_millisecond_of_each_turn() {
    let r = start(Limits::default());
    let mut staller = stall(&r);
    let mut peers: Vec<TcpStream> = (0..20).map(|_| connect(r.bulk)).collect();
    for p in &mut peers {
        p.write_all(&frame(b"work")).unwrap();
    }
    unstall(&r, &mut staller);
    for p in &mut peers {
        assert_eq!(read_frame(p).as_deref(), Some(&b"work"[..]));
    }
    // The last turn's count is taken at its end.
    wait_until(|| r.probe.turn_work.load(Ordering::SeqCst) == 0);
    // 1 ms of bulk work per turn: the fourth 300 us frame is the last that can start.
    let most = r.probe.max_turn_work.load(Ordering::SeqCst);
    assert!(
        (1..=4).contains(&most),
        "{most} bulk frames handled in one turn"
    );
    r.stop.stop();
    r.thread.join().unwrap().unwrap();
}
