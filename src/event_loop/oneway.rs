//! Fire-and-forget delivery of encoded frames to other servers, from one thread of its own
//! with its own mio poll: connecting may take as long as its timeout, which the loop must never
//! wait for. It knows nothing of what the frames say; failures are logged, never retried.
//!
//! A connection per target is kept open a while and reused, as Java's remoting client does:
//! rocketmq-rust 1.0 brokers abandon a request whose connection closed mid-way. Connects and
//! writes are non-blocking, each target with its own deadline and its own bounded queue, so a
//! target that swallows connection attempts delays only its own frames: another target's
//! frame goes out at once. A target's frames keep their order. Everything is bounded: the
//! targets known at once, the frames queued per target and the connects in flight.
//! A host name (rather than an IP) is looked up on a resolver thread, started at the first.

use crossbeam_channel::{bounded, Receiver, Sender, TryRecvError, TrySendError};
use log::{debug, warn};
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token, Waker};
use slab::Slab;
use std::collections::{HashMap, VecDeque};
use std::io::{self, ErrorKind, Read, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long an unused connection stays open.
const LINGER: Duration = Duration::from_secs(30);
/// Targets known at once (open, connecting or with frames waiting); beyond, an idle one is
/// forgotten, else the new target's frame is dropped.
const MAX_TARGETS: usize = 4_096;
/// Frames waiting per target; beyond, the oldest not yet started is dropped (the newest
/// notice is the one that counts).
const TARGET_QUEUE: usize = 16;
/// Connects in flight at once (one descriptor each); other targets wait their turn in order,
/// and targets whose last connect failed hold at most half of them.
const MAX_CONNECTING: usize = 1_024;
const WAKER: Token = Token(usize::MAX);
/// Host names waiting for the resolver thread; beyond, a new one's frames are dropped.
const RESOLVE_QUEUE: usize = 64;

/// One frame for several targets (`host:port`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Oneway {
    /// What the frame is, for the log.
    pub what: &'static str,
    pub targets: Vec<String>,
    pub frame: Vec<u8>,
}

struct Delivery {
    what: &'static str,
    target: String,
    frame: Arc<[u8]>,
}

/// Hands frames to the thread; it ends, once its queued frames are sent or failed, when this
/// is dropped.
pub struct OnewaySender {
    queue: Option<Sender<Delivery>>,
    waker: Arc<Waker>,
}

impl OnewaySender {
    /// Queues the frame for each target; Err when the thread's queue was full (or the thread
    /// gone) and the frame dropped for a target.
    pub fn try_send(&self, message: Oneway) -> Result<(), TrySendError<()>> {
        let Some(queue) = &self.queue else {
            return Err(TrySendError::Disconnected(()));
        };
        let frame: Arc<[u8]> = message.frame.into();
        let mut result = Ok(());
        for target in message.targets {
            let delivery = Delivery {
                what: message.what,
                target,
                frame: frame.clone(),
            };
            result = match queue.try_send(delivery) {
                Ok(()) => result,
                Err(TrySendError::Full(_)) => Err(TrySendError::Full(())),
                Err(TrySendError::Disconnected(_)) => Err(TrySendError::Disconnected(())),
            };
        }
        let _ = self.waker.wake();
        result
    }
}

impl Drop for OnewaySender {
    fn drop(&mut self) {
        self.queue = None;
        let _ = self.waker.wake();
    }
}

/// Starts the thread: `capacity` frames queued between the loop and it, `timeout` for each
/// target's connect and for each frame's write.
pub fn spawn_sender(
    name: &str,
    capacity: usize,
    timeout: Duration,
) -> io::Result<(OnewaySender, JoinHandle<()>)> {
    let (tx, rx) = bounded(capacity.max(1));
    let mut sender = Deliverer::new(rx, timeout)?;
    let waker = sender.waker.clone();
    let handle = std::thread::Builder::new()
        .name(name.to_string())
        .spawn(move || sender.run())?;
    Ok((
        OnewaySender {
            queue: Some(tx),
            waker,
        },
        handle,
    ))
}

/// Failure lines logged per interval; the rest are counted in one line.
const WARN_LINES: u32 = 10;
const WARN_INTERVAL: Duration = Duration::from_secs(10);

struct Target {
    addr: String,
    frames: VecDeque<(&'static str, Arc<[u8]>)>,
    /// Bytes of the front frame already written.
    written: usize,
    stream: Option<TcpStream>,
    /// False while the connect is in flight.
    connected: bool,
    /// The connection carried a frame before: if it fails, the peer closed it meanwhile and
    /// the frame gets one new connection.
    reused: bool,
    /// When the connect in flight, or the write of the front frame, has failed.
    deadline: Option<Instant>,
    /// In a line for a connect slot.
    waiting: bool,
    /// Its last connect failed or timed out: it waits in the suspects' line.
    suspect: bool,
    /// The address, once known (an IP and port at once, a host name from the resolver).
    resolved: Option<SocketAddr>,
    resolving: bool,
    last_used: Instant,
}

struct Deliverer {
    poll: Poll,
    deliveries: Receiver<Delivery>,
    timeout: Duration,
    targets: Slab<Target>,
    by_addr: HashMap<String, usize>,
    slots: ConnectSlots,
    /// False once the `OnewaySender` is gone: the thread ends when its frames are out.
    open: bool,
    warned: (Instant, u32),
    waker: Arc<Waker>,
    /// Host names go to a thread of their own, so a slow lookup holds back only other names.
    resolver: Option<Resolver>,
}

struct Resolver {
    requests: Sender<(usize, String)>,
    results: Receiver<(usize, String, io::Result<SocketAddr>)>,
}

impl Deliverer {
    fn new(deliveries: Receiver<Delivery>, timeout: Duration) -> io::Result<Deliverer> {
        let poll = Poll::new()?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
        Ok(Deliverer {
            poll,
            deliveries,
            timeout,
            targets: Slab::new(),
            by_addr: HashMap::new(),
            slots: ConnectSlots {
                max: MAX_CONNECTING,
                ..ConnectSlots::default()
            },
            open: true,
            warned: (Instant::now(), 0),
            waker,
            resolver: None,
        })
    }

    fn run(&mut self) {
        let mut events = Events::with_capacity(256);
        loop {
            self.take_deliveries();
            self.take_resolutions();
            if !self.open && self.targets.iter().all(|(_, t)| t.frames.is_empty()) {
                return;
            }
            self.start_connects();
            let now = Instant::now();
            let wait = self
                .targets
                .iter()
                .filter_map(|(_, t)| t.deadline)
                .min()
                .map_or(Duration::from_secs(1), |d| d.saturating_duration_since(now))
                .min(Duration::from_secs(1));
            if let Err(e) = self.poll.poll(&mut events, Some(wait)) {
                if e.kind() != ErrorKind::Interrupted {
                    warn!("oneway sender stopped: poll failed: {e}");
                    return;
                }
            }
            for event in events.iter() {
                if event.token() != WAKER && self.targets.contains(event.token().0) {
                    self.on_ready(event.token().0);
                }
            }
            self.expire(Instant::now());
        }
    }

    fn take_deliveries(&mut self) {
        while self.open {
            match self.deliveries.try_recv() {
                Ok(d) => self.enqueue(d),
                Err(TryRecvError::Empty) => return,
                Err(TryRecvError::Disconnected) => self.open = false,
            }
        }
    }

    fn enqueue(&mut self, d: Delivery) {
        let key = match self.by_addr.get(&d.target) {
            Some(&key) => key,
            None => match self.add_target(&d.target) {
                Some(key) => key,
                None => {
                    let why = format!("{MAX_TARGETS} other targets are busy");
                    return self.failed(d.what, &d.target, &why);
                }
            },
        };
        let t = &mut self.targets[key];
        if t.frames.len() >= TARGET_QUEUE {
            // The front frame may be half written: it stays.
            if let Some((what, _)) = t.frames.remove(usize::from(t.written > 0)) {
                let addr = t.addr.clone();
                self.failed(what, &addr, "newer frames wait behind it");
            }
        }
        self.targets[key].frames.push_back((d.what, d.frame));
        self.pump(key);
    }

    /// A new target, forgetting an idle one (the longest unused) when the table is full.
    fn add_target(&mut self, addr: &str) -> Option<usize> {
        if self.targets.len() >= MAX_TARGETS {
            let idle = self
                .targets
                .iter()
                .filter(|(_, t)| t.frames.is_empty())
                .min_by_key(|(_, t)| t.last_used)
                .map(|(key, _)| key)?;
            self.forget(idle);
        }
        let key = self.targets.insert(Target {
            addr: addr.to_string(),
            frames: VecDeque::new(),
            written: 0,
            stream: None,
            connected: false,
            reused: false,
            deadline: None,
            waiting: false,
            suspect: false,
            resolved: addr.parse().ok(),
            resolving: false,
            last_used: Instant::now(),
        });
        self.by_addr.insert(addr.to_string(), key);
        Some(key)
    }

    fn forget(&mut self, key: usize) {
        self.close(key);
        let t = self.targets.remove(key);
        self.by_addr.remove(&t.addr);
    }

    /// Writes what it can of the target's frames, or asks for a connection.
    fn pump(&mut self, key: usize) {
        loop {
            let t = &mut self.targets[key];
            if t.frames.is_empty() || t.waiting || (t.stream.is_some() && !t.connected) {
                return;
            }
            let Some(stream) = t.stream.as_mut() else {
                t.waiting = true;
                return self.slots.wait(key, t.suspect);
            };
            if t.written == 0 && t.reused && !still_open(stream) {
                self.close(key);
                continue;
            }
            let frame = t.frames[0].1.clone();
            match stream.write(&frame[t.written..]) {
                Ok(n) if n > 0 => {
                    t.written += n;
                    if t.written == frame.len() {
                        let (what, _) = t.frames.pop_front().unwrap_or(("", frame));
                        debug!("sent {what} to {}", t.addr);
                        (t.written, t.reused, t.deadline) = (0, true, None);
                        t.last_used = Instant::now();
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    t.deadline
                        .get_or_insert_with(|| Instant::now() + self.timeout);
                    return;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                result => {
                    let e = result.err().unwrap_or_else(|| ErrorKind::WriteZero.into());
                    self.write_failed(key, &e);
                }
            }
        }
    }

    /// A broken connection: the front frame gets a new one if this one was reused (the peer
    /// closed it while idle), else it is dropped.
    fn write_failed(&mut self, key: usize, e: &io::Error) {
        let t = &mut self.targets[key];
        let retry = t.reused && t.written == 0;
        let front = t.frames.front().map(|(what, _)| *what);
        let addr = t.addr.clone();
        self.close(key);
        if !retry {
            self.targets[key].frames.pop_front();
            if let Some(what) = front {
                self.failed(what, &addr, &e.to_string());
            }
        }
    }

    /// Gives connect slots to waiting targets, in the order they asked.
    fn start_connects(&mut self) {
        while let Some(key) = self.slots.next() {
            let Some(t) = self.targets.get_mut(key) else {
                continue;
            };
            t.waiting = false;
            if t.frames.is_empty() || t.stream.is_some() {
                continue;
            }
            let Some(addr) = t.resolved else {
                self.resolve(key);
                continue;
            };
            let mut stream = match TcpStream::connect(addr) {
                Ok(stream) => stream,
                Err(e) => {
                    self.drop_frames(key, &e.to_string());
                    continue;
                }
            };
            let interest = Interest::READABLE | Interest::WRITABLE;
            if let Err(e) = self
                .poll
                .registry()
                .register(&mut stream, Token(key), interest)
            {
                self.drop_frames(key, &e.to_string());
                continue;
            }
            let _ = stream.set_nodelay(true);
            let t = &mut self.targets[key];
            (t.stream, t.connected, t.reused) = (Some(stream), false, false);
            t.deadline = Some(Instant::now() + self.timeout);
            self.slots.taken(t.suspect);
        }
    }

    /// Asks the resolver thread for the target's address; it comes back through
    /// `take_resolutions`.
    fn resolve(&mut self, key: usize) {
        if self.targets[key].resolving {
            return;
        }
        if self.resolver.is_none() {
            match spawn_resolver(self.waker.clone()) {
                Ok(resolver) => self.resolver = Some(resolver),
                Err(e) => return self.drop_frames(key, &format!("no resolver thread: {e}")),
            }
        }
        let t = &mut self.targets[key];
        let asked = (self.resolver.as_ref()).is_some_and(|r| {
            let request = (key, t.addr.clone());
            r.requests.try_send(request).is_ok()
        });
        t.resolving = asked;
        if !asked {
            self.drop_frames(key, "too many host names wait for the resolver");
        }
    }

    fn take_resolutions(&mut self) {
        let Some(resolver) = &self.resolver else {
            return;
        };
        let results: Vec<_> = resolver.results.try_iter().collect();
        for (key, addr, result) in results {
            let Some(t) = self.targets.get_mut(key) else {
                continue;
            };
            if t.addr != addr || !t.resolving {
                continue;
            }
            t.resolving = false;
            match result {
                Ok(resolved) => {
                    t.resolved = Some(resolved);
                    self.pump(key);
                }
                Err(e) => self.drop_frames(key, &e.to_string()),
            }
        }
    }

    fn on_ready(&mut self, key: usize) {
        let t = &mut self.targets[key];
        let Some(stream) = t.stream.as_mut() else {
            return;
        };
        if !t.connected {
            match stream.take_error().and_then(|e| e.map_or(Ok(()), Err)) {
                Err(e) => return self.drop_frames(key, &e.to_string()),
                Ok(()) if stream.peer_addr().is_err() => return, // not yet
                Ok(()) => {
                    (t.connected, t.deadline) = (true, None);
                    self.slots.freed(t.suspect);
                    t.suspect = false;
                }
            }
        } else if t.frames.is_empty() && !still_open(stream) {
            return self.close(key);
        }
        self.pump(key);
    }

    /// Connects and writes past their deadline fail; connections unused for `LINGER` close.
    fn expire(&mut self, now: Instant) {
        let keys: Vec<usize> = self.targets.iter().map(|(key, _)| key).collect();
        for key in keys {
            let t = &self.targets[key];
            if t.deadline.is_some_and(|d| d <= now) {
                let why = match t.connected {
                    true => "write timed out",
                    false => "connect timed out",
                };
                self.drop_frames(key, why);
            } else if t.frames.is_empty() && now - t.last_used >= LINGER {
                self.forget(key);
            }
        }
    }

    /// The target cannot be reached now: its connection closes and its frames are dropped.
    fn drop_frames(&mut self, key: usize, why: &str) {
        self.close(key);
        let t = &mut self.targets[key];
        t.suspect |= !t.connected;
        let frames: Vec<_> = t.frames.drain(..).collect();
        let addr = t.addr.clone();
        for (what, _) in frames {
            self.failed(what, &addr, why);
        }
    }

    fn close(&mut self, key: usize) {
        let t = &mut self.targets[key];
        if let Some(mut stream) = t.stream.take() {
            let _ = self.poll.registry().deregister(&mut stream);
            if !t.connected {
                self.slots.freed(t.suspect);
            }
        }
        (t.connected, t.written, t.deadline) = (false, 0, None);
        t.last_used = Instant::now();
    }

    /// A warning per failure, at most `WARN_LINES` per interval, then one with the count.
    fn failed(&mut self, what: &str, target: &str, why: &str) {
        let (since, lines) = &mut self.warned;
        if since.elapsed() >= WARN_INTERVAL {
            if *lines > WARN_LINES {
                warn!(
                    "{} more oneway frames failed, not logged one by one",
                    *lines - WARN_LINES
                );
            }
            (*since, *lines) = (Instant::now(), 0);
        }
        *lines += 1;
        if *lines <= WARN_LINES {
            warn!("{what} to {target} failed: {why}");
        }
    }
}

/// Connect slots for the targets, in two lines: a target not known to fail takes any free
/// slot, one whose last connect failed only one of the first half, so that unreachable
/// addresses never keep a reachable broker waiting for theirs to time out.
#[derive(Default)]
struct ConnectSlots {
    line: VecDeque<usize>,
    suspects: VecDeque<usize>,
    in_flight: usize,
    suspects_in_flight: usize,
    max: usize,
}

impl ConnectSlots {
    fn wait(&mut self, key: usize, suspect: bool) {
        match suspect {
            true => self.suspects.push_back(key),
            false => self.line.push_back(key),
        }
    }

    /// The next target to connect, while a slot is free for it.
    fn next(&mut self) -> Option<usize> {
        if self.in_flight >= self.max {
            return None;
        }
        if let Some(key) = self.line.pop_front() {
            return Some(key);
        }
        if self.suspects_in_flight < (self.max / 2).max(1) {
            return self.suspects.pop_front();
        }
        None
    }

    fn taken(&mut self, suspect: bool) {
        self.in_flight += 1;
        self.suspects_in_flight += usize::from(suspect);
    }

    fn freed(&mut self, suspect: bool) {
        self.in_flight -= 1;
        self.suspects_in_flight -= usize::from(suspect);
    }
}

/// The resolver thread, named after the sender's; it ends with the sender.
fn spawn_resolver(waker: Arc<Waker>) -> io::Result<Resolver> {
    let (requests, inbox) = bounded::<(usize, String)>(RESOLVE_QUEUE);
    let (outbox, results) = crossbeam_channel::unbounded();
    let name = std::thread::current()
        .name()
        .unwrap_or("oneway")
        .to_string();
    std::thread::Builder::new()
        .name(format!("{name}-resolver"))
        .spawn(move || {
            for (key, addr) in inbox {
                let result = (addr.to_socket_addrs()).and_then(|mut all| {
                    all.next()
                        .ok_or_else(|| io::Error::other("unresolvable address"))
                });
                if outbox.send((key, addr, result)).is_err() {
                    return;
                }
                let _ = waker.wake();
            }
        })?;
    Ok(Resolver { requests, results })
}

/// False when the peer closed the connection (or it failed); nothing comes back on a oneway
/// request, so anything readable is drained and ignored.
fn still_open(stream: &mut TcpStream) -> bool {
    let mut scratch = [0u8; 512];
    loop {
        match stream.read(&mut scratch) {
            Ok(0) => return false,
            Ok(_) => continue,
            Err(e) if e.kind() == ErrorKind::WouldBlock => return true,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn read_exactly(s: &mut std::net::TcpStream, n: usize) -> Vec<u8> {
        let mut buf = vec![0u8; n];
        s.read_exact(&mut buf).unwrap();
        buf
    }

    /// A listener playing the broker, its address, and a started sender.
    fn broker_and_sender() -> (TcpListener, String, OnewaySender, JoinHandle<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let target = listener.local_addr().unwrap().to_string();
        let (tx, thread) = spawn_sender("test-oneway", 64, Duration::from_secs(3)).unwrap();
        (listener, target, tx, thread)
    }

    fn send(tx: &OnewaySender, targets: &[&str], frame: &[u8]) {
        tx.try_send(Oneway {
            what: "test frame",
            targets: targets.iter().map(|t| t.to_string()).collect(),
            frame: frame.to_vec(),
        })
        .unwrap();
    }

    /// Drops the sender and waits for its thread to end.
    fn stop(tx: OnewaySender, thread: JoinHandle<()>) {
        drop(tx);
        thread.join().unwrap();
    }

    /// A listener whose accept queue is full, so that a connect gets no answer (Linux drops
    /// the SYN), and the connection filling it.
    pub(crate) fn swallowing_listener() -> (TcpListener, std::net::TcpStream, String) {
        use std::os::fd::AsRawFd;
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        // SAFETY: listen(2) on a socket this function owns; it only shrinks its backlog.
        assert_eq!(unsafe { libc::listen(listener.as_raw_fd(), 0) }, 0);
        let addr = listener.local_addr().unwrap();
        let filler = std::net::TcpStream::connect(addr).unwrap();
        (listener, filler, addr.to_string())
    }

    #[test]
    fn each_target_receives_the_frame_and_a_dead_one_does_not_stop_the_rest() {
        let (listener, live, tx, threads) = broker_and_sender();
        let dead = {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().to_string()
        };
        send(&tx, &[&dead, &live], b"hello");
        let (mut s, _) = listener.accept().unwrap();
        assert_eq!(read_exactly(&mut s, 5), b"hello");
        stop(tx, threads);
    }

    #[test]
    fn frames_to_one_broker_share_a_connection_that_stays_open() {
        let (listener, target, tx, threads) = broker_and_sender();
        send(&tx, &[&target], b"one");
        let (mut s, _) = listener.accept().unwrap();
        assert_eq!(read_exactly(&mut s, 3), b"one");
        send(&tx, &[&target], b"two");
        assert_eq!(read_exactly(&mut s, 3), b"two", "the same connection");
        // Still open: nothing closes it while the sender lives.
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let mut byte = [0u8; 1];
        assert!(
            matches!(s.read(&mut byte), Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::TimedOut)
        );
        stop(tx, threads);
    }

    #[test]
    fn a_connection_the_broker_closed_is_replaced() {
        let (listener, target, tx, threads) = broker_and_sender();
        send(&tx, &[&target], b"one");
        let (mut first, _) = listener.accept().unwrap();
        assert_eq!(read_exactly(&mut first, 3), b"one");
        // The broker restarted. A write may still land in the old socket before its close is
        // seen: send again until the broker gets a new connection (each notice is the
        // latest, as the controller's outbox keeps only the newest per broker).
        drop(first);
        listener.set_nonblocking(true).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut second = loop {
            assert!(Instant::now() < deadline, "no new connection");
            send(&tx, &[&target], b"two");
            match listener.accept() {
                Ok((s, _)) => break s,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                Err(e) => panic!("accept: {e}"),
            }
        };
        second.set_nonblocking(false).unwrap();
        assert_eq!(read_exactly(&mut second, 3), b"two");
        stop(tx, threads);
    }

    #[test]
    fn a_target_that_swallows_connects_delays_only_its_own_frames() {
        let (listener, live, tx, thread) = broker_and_sender();
        let (_swallower, _filler, swallowing) = swallowing_listener();
        let refused = std::net::TcpStream::connect_timeout(
            &swallowing.parse().unwrap(),
            Duration::from_millis(200),
        );
        assert!(refused.is_err(), "the accept queue is full");
        let started = Instant::now();
        send(&tx, &[&swallowing, &swallowing, &live], b"hello");
        let (mut s, _) = listener.accept().unwrap();
        assert_eq!(read_exactly(&mut s, 5), b"hello");
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{:?}",
            started.elapsed()
        );
        send(&tx, &[&swallowing, &live], b"again");
        assert_eq!(read_exactly(&mut s, 5), b"again");
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{:?}",
            started.elapsed()
        );
        stop(tx, thread);
    }

    #[test]
    fn frames_waiting_for_a_target_are_bounded_and_the_newest_kept() {
        let (_swallower, _filler, swallowing) = swallowing_listener();
        let (_tx, rx) = bounded(1);
        let mut deliverer = Deliverer::new(rx, Duration::from_secs(3)).unwrap();
        for i in 0..TARGET_QUEUE + 5 {
            deliverer.enqueue(Delivery {
                what: "test frame",
                target: swallowing.clone(),
                frame: vec![i as u8].into(),
            });
            deliverer.start_connects();
        }
        let t = &deliverer.targets[deliverer.by_addr[&swallowing]];
        let kept: Vec<u8> = t.frames.iter().map(|(_, f)| f[0]).collect();
        assert_eq!(kept, (5..TARGET_QUEUE as u8 + 5).collect::<Vec<_>>());
        assert_eq!(
            deliverer.slots.in_flight, 1,
            "one connect in flight for the target"
        );
        deliverer.expire(Instant::now() + Duration::from_secs(4));
        let t = &deliverer.targets[deliverer.by_addr[&swallowing]];
        assert!(
            t.frames.is_empty() && t.stream.is_none(),
            "dropped at the deadline"
        );
        assert_eq!(deliverer.slots.in_flight, 0);
        assert!(deliverer.targets[deliverer.by_addr[&swallowing]].suspect);
    }

    #[test]
    fn frames_to_one_target_keep_their_order() {
        let (listener, target, tx, thread) = broker_and_sender();
        for i in 0..10u8 {
            send(&tx, &[&target], &[i]);
        }
        let (mut s, _) = listener.accept().unwrap();
        assert_eq!(read_exactly(&mut s, 10), (0..10).collect::<Vec<u8>>());
        stop(tx, thread);
    }

    #[test]
    fn targets_whose_connect_failed_hold_at_most_half_of_the_connect_slots() {
        let swallowing: Vec<_> = (0..3).map(|_| swallowing_listener()).collect();
        let live = TcpListener::bind("127.0.0.1:0").unwrap();
        let live = live.local_addr().unwrap().to_string();
        let (_tx, rx) = bounded(1);
        let mut deliverer = Deliverer::new(rx, Duration::from_secs(3)).unwrap();
        deliverer.slots.max = 4;
        let frame = |target: &str| Delivery {
            what: "test frame",
            target: target.to_string(),
            frame: b"x".to_vec().into(),
        };
        for (_, _, addr) in &swallowing {
            deliverer.enqueue(frame(addr));
        }
        deliverer.start_connects();
        assert_eq!(deliverer.slots.in_flight, 3);
        deliverer.expire(Instant::now() + Duration::from_secs(4));
        for (_, _, addr) in &swallowing {
            deliverer.enqueue(frame(addr));
        }
        deliverer.start_connects();
        assert_eq!(deliverer.slots.suspects_in_flight, 2, "the third waits");
        deliverer.enqueue(frame(&live));
        deliverer.start_connects();
        let t = &deliverer.targets[deliverer.by_addr[&live]];
        assert!(
            t.stream.is_some(),
            "a free slot is left for a target not known to fail"
        );
        assert_eq!(deliverer.slots.in_flight, 3);
    }

    #[test]
    fn a_target_named_by_host_name_is_resolved_and_reached() {
        // Where `localhost` resolves first (127.0.0.1 or ::1), as the sender takes the first.
        let listener = TcpListener::bind("localhost:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let (tx, thread) = spawn_sender("test-oneway", 64, Duration::from_secs(3)).unwrap();
        send(&tx, &[&format!("localhost:{port}")], b"named");
        let (mut s, _) = listener.accept().unwrap();
        assert_eq!(read_exactly(&mut s, 5), b"named");
        stop(tx, thread);
    }
}
