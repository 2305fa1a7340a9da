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

/// What the handler saw, for the test thread to poll.
#[derive(Default)]
struct Probe {
    frames: AtomicUsize,
    closes: AtomicUsize,
    stale_after_close: AtomicUsize,
    bulk_waiting: AtomicUsize,
    refused: AtomicUsize,
    stopping: AtomicBool,
    admit_bulk: AtomicBool,
    release_held: AtomicBool,
}

struct Echo {
    probe: Arc<Probe>,
    held: Vec<ConnId>,
    ticking: Option<ConnId>,
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
        if listener == BULK {
            ReadClass::Bulk
        } else {
            ReadClass::Interactive
        }
    }

    fn on_frame(&mut self, ctx: &mut Ctx<()>, conn: ConnId, frame: Bytes) -> Next {
        self.probe.frames.fetch_add(1, Ordering::SeqCst);
        match &frame[..] {
            b"hold" => {
                self.held.push(conn);
                Next::Hold
            }
            b"close" => Next::Close,
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

    fn on_close(&mut self, ctx: &mut Ctx<()>, conn: ConnId, _: ()) {
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
        let p = &self.probe;
        p.bulk_waiting.store(ctx.bulk_waiting(), Ordering::SeqCst);
        p.refused
            .store(ctx.stats().refused as usize, Ordering::SeqCst);
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
