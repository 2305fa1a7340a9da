//! The threads that send 1008 NOTIFY_BROKER_ROLE_CHANGED to brokers, off the loop. Unlike
//! the sender of 905 (`event_loop::oneway`), a connection per broker is kept open a while and
//! reused, as Java's remoting client does: rocketmq-rust 1.0 brokers abandon a request whose
//! connection closed mid-way. A broker's notices always go to the same thread (by a hash of its
//! address), so they keep their order, and a broker that does not answer a connect delays only
//! the brokers hashed to its thread.

use crossbeam_channel::{bounded, Receiver, RecvTimeoutError, Sender, TrySendError};
use log::{debug, warn};
use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::io::{self, ErrorKind, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Java's `invokeOneway(brokerAddr, request, 3000)`: the connect and write timeout.
const TIMEOUT: Duration = Duration::from_secs(3);
/// How long an unused connection stays open.
const LINGER: Duration = Duration::from_secs(30);
/// Connections kept open at most, per thread (beyond, the oldest is closed).
const MAX_OPEN: usize = 256;
const THREADS: usize = 4;

pub(in crate::server) struct Notice {
    pub target: String,
    pub frame: Vec<u8>,
}

pub(in crate::server) struct Notifier {
    queues: Vec<Sender<Notice>>,
}

impl Notifier {
    pub(in crate::server) fn try_send(&self, notice: Notice) -> Result<(), TrySendError<Notice>> {
        let mut hasher = DefaultHasher::new();
        notice.target.hash(&mut hasher);
        let i = (hasher.finish() % self.queues.len() as u64) as usize;
        self.queues[i].try_send(notice)
    }
}

/// `capacity` notices queued in all; the threads end with the `Notifier`.
pub(in crate::server) fn spawn(capacity: usize) -> io::Result<(Notifier, Vec<JoinHandle<()>>)> {
    let mut queues = Vec::with_capacity(THREADS);
    let mut threads = Vec::with_capacity(THREADS);
    for i in 0..THREADS {
        let (tx, rx) = bounded((capacity / THREADS).max(1));
        queues.push(tx);
        threads.push(
            std::thread::Builder::new()
                .name(format!("controller-notify-{i}"))
                .spawn(move || run(rx))?,
        );
    }
    Ok((Notifier { queues }, threads))
}

struct Open {
    stream: TcpStream,
    last_used: Instant,
}

fn run(notices: Receiver<Notice>) {
    let mut open: HashMap<String, Open> = HashMap::new();
    loop {
        match notices.recv_timeout(Duration::from_secs(1)) {
            Ok(notice) => match deliver(&mut open, &notice) {
                Ok(()) => debug!("sent NOTIFY_BROKER_ROLE_CHANGED to {}", notice.target),
                Err(e) => warn!(
                    "NOTIFY_BROKER_ROLE_CHANGED to {} failed: {e}",
                    notice.target
                ),
            },
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        open.retain(|_, c| c.last_used.elapsed() < LINGER);
    }
}

/// Writes on the cached connection when it is still open, else on a new one.
fn deliver(open: &mut HashMap<String, Open>, notice: &Notice) -> io::Result<()> {
    if let Some(mut conn) = open.remove(&notice.target) {
        if still_open(&mut conn.stream) && conn.stream.write_all(&notice.frame).is_ok() {
            conn.last_used = Instant::now();
            open.insert(notice.target.clone(), conn);
            return Ok(());
        }
    }
    let mut stream = connect(&notice.target)?;
    stream.write_all(&notice.frame)?;
    if open.len() >= MAX_OPEN {
        let oldest = open
            .iter()
            .min_by_key(|(_, c)| c.last_used)
            .map(|(k, _)| k.clone());
        if let Some(k) = oldest {
            open.remove(&k);
        }
    }
    open.insert(
        notice.target.clone(),
        Open {
            stream,
            last_used: Instant::now(),
        },
    );
    Ok(())
}

fn connect(target: &str) -> io::Result<TcpStream> {
    let addr = target
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| io::Error::other("unresolvable address"))?;
    let stream = TcpStream::connect_timeout(&addr, TIMEOUT)?;
    stream.set_write_timeout(Some(TIMEOUT))?;
    let _ = stream.set_nodelay(true);
    Ok(stream)
}

/// False when the broker closed the connection (or it failed); brokers send nothing back on a
/// oneway request, so anything readable is drained and ignored.
fn still_open(stream: &mut TcpStream) -> bool {
    if stream.set_nonblocking(true).is_err() {
        return false;
    }
    let mut scratch = [0u8; 512];
    let open = loop {
        match stream.read(&mut scratch) {
            Ok(0) => break false,
            Ok(_) => continue,
            Err(e) if e.kind() == ErrorKind::WouldBlock => break true,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => break false,
        }
    };
    open && stream.set_nonblocking(false).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn read_exactly(s: &mut TcpStream, n: usize) -> Vec<u8> {
        let mut buf = vec![0u8; n];
        s.read_exact(&mut buf).unwrap();
        buf
    }

    /// A listener playing the broker, its address, and a started notifier.
    fn broker_and_notifier() -> (TcpListener, String, Notifier, Vec<JoinHandle<()>>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let target = listener.local_addr().unwrap().to_string();
        let (tx, threads) = spawn(64).unwrap();
        (listener, target, tx, threads)
    }

    fn notify(tx: &Notifier, target: &str, frame: &[u8]) {
        tx.try_send(Notice {
            target: target.to_owned(),
            frame: frame.to_vec(),
        })
        .unwrap();
    }

    /// Drops the notifier and waits for its threads to end.
    fn stop(tx: Notifier, threads: Vec<JoinHandle<()>>) {
        drop(tx);
        for t in threads {
            t.join().unwrap();
        }
    }

    #[test]
    fn frames_to_one_broker_share_a_connection_that_stays_open() {
        let (listener, target, tx, threads) = broker_and_notifier();
        notify(&tx, &target, b"one");
        let (mut s, _) = listener.accept().unwrap();
        assert_eq!(read_exactly(&mut s, 3), b"one");
        notify(&tx, &target, b"two");
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
        let (listener, target, tx, threads) = broker_and_notifier();
        notify(&tx, &target, b"one");
        let (mut first, _) = listener.accept().unwrap();
        assert_eq!(read_exactly(&mut first, 3), b"one");
        // The broker restarted. A write may still land in the old socket before its close is
        // seen: notify again until the broker gets a new connection (each notice is the
        // latest, as the controller's outbox keeps only the newest per broker).
        drop(first);
        listener.set_nonblocking(true).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut second = loop {
            assert!(Instant::now() < deadline, "no new connection");
            notify(&tx, &target, b"two");
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
}
