//! Fire-and-forget delivery of encoded frames to other servers, on threads of their own:
//! connecting may take as long as its timeout, which the loop must never wait for. It knows
//! nothing of what the frames say; failures are logged, never queued again.
//!
//! A connection per target is kept open a while and reused, as Java's remoting client does:
//! rocketmq-rust 1.0 brokers abandon a request whose connection closed mid-way. A target's
//! frames always go to the same thread (by a hash of its address), so they keep their order,
//! and a target that does not answer a connect delays only the targets hashed to its thread.

use crossbeam_channel::{bounded, Receiver, RecvTimeoutError, Sender, TrySendError};
use log::{debug, warn};
use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::io::{self, ErrorKind, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long an unused connection stays open.
const LINGER: Duration = Duration::from_secs(30);
/// Connections kept open at most, per thread (beyond, the oldest is closed).
const MAX_OPEN: usize = 256;

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
    frame: Vec<u8>,
}

/// Hands frames to the threads; they end when it is dropped.
pub struct OnewaySender {
    queues: Vec<Sender<Delivery>>,
}

impl OnewaySender {
    /// Queues the frame for each target; Err when a target's queue was full (or its thread
    /// gone) and the frame dropped for it.
    pub fn try_send(&self, message: Oneway) -> Result<(), TrySendError<()>> {
        let mut result = Ok(());
        for target in message.targets {
            let mut hasher = DefaultHasher::new();
            target.hash(&mut hasher);
            let i = (hasher.finish() % self.queues.len() as u64) as usize;
            let delivery = Delivery {
                what: message.what,
                target,
                frame: message.frame.clone(),
            };
            result = match self.queues[i].try_send(delivery) {
                Ok(()) => result,
                Err(TrySendError::Full(_)) => Err(TrySendError::Full(())),
                Err(TrySendError::Disconnected(_)) => Err(TrySendError::Disconnected(())),
            };
        }
        result
    }
}

/// Starts `threads` threads (`capacity` frames queued in all), `timeout` per connect and write.
pub fn spawn_sender(
    name: &str,
    threads: usize,
    capacity: usize,
    timeout: Duration,
) -> io::Result<(OnewaySender, Vec<JoinHandle<()>>)> {
    let threads = threads.max(1);
    let mut queues = Vec::with_capacity(threads);
    let mut handles = Vec::with_capacity(threads);
    for i in 0..threads {
        let (tx, rx) = bounded((capacity / threads).max(1));
        queues.push(tx);
        handles.push(
            std::thread::Builder::new()
                .name(format!("{name}-{i}"))
                .spawn(move || run(rx, timeout))?,
        );
    }
    Ok((OnewaySender { queues }, handles))
}

struct Open {
    stream: TcpStream,
    last_used: Instant,
}

fn run(deliveries: Receiver<Delivery>, timeout: Duration) {
    let mut open: HashMap<String, Open> = HashMap::new();
    loop {
        match deliveries.recv_timeout(Duration::from_secs(1)) {
            Ok(d) => match deliver(&mut open, &d, timeout) {
                Ok(()) => debug!("sent {} to {}", d.what, d.target),
                Err(e) => warn!("{} to {} failed: {e}", d.what, d.target),
            },
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        open.retain(|_, c| c.last_used.elapsed() < LINGER);
    }
}

/// Writes on the cached connection when it is still open, else on a new one.
fn deliver(open: &mut HashMap<String, Open>, d: &Delivery, timeout: Duration) -> io::Result<()> {
    if let Some(mut conn) = open.remove(&d.target) {
        if still_open(&mut conn.stream) && conn.stream.write_all(&d.frame).is_ok() {
            conn.last_used = Instant::now();
            open.insert(d.target.clone(), conn);
            return Ok(());
        }
    }
    let mut stream = connect(&d.target, timeout)?;
    stream.write_all(&d.frame)?;
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
        d.target.clone(),
        Open {
            stream,
            last_used: Instant::now(),
        },
    );
    Ok(())
}

fn connect(target: &str, timeout: Duration) -> io::Result<TcpStream> {
    let addr = target
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| io::Error::other("unresolvable address"))?;
    let stream = TcpStream::connect_timeout(&addr, timeout)?;
    stream.set_write_timeout(Some(timeout))?;
    let _ = stream.set_nodelay(true);
    Ok(stream)
}

/// False when the peer closed the connection (or it failed); nothing comes back on a oneway
/// request, so anything readable is drained and ignored.
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

    /// A listener playing the broker, its address, and a started sender.
    fn broker_and_sender() -> (TcpListener, String, OnewaySender, Vec<JoinHandle<()>>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let target = listener.local_addr().unwrap().to_string();
        let (tx, threads) = spawn_sender("test-oneway", 4, 64, Duration::from_secs(3)).unwrap();
        (listener, target, tx, threads)
    }

    fn send(tx: &OnewaySender, targets: &[&str], frame: &[u8]) {
        tx.try_send(Oneway {
            what: "test frame",
            targets: targets.iter().map(|t| t.to_string()).collect(),
            frame: frame.to_vec(),
        })
        .unwrap();
    }

    /// Drops the sender and waits for its threads to end.
    fn stop(tx: OnewaySender, threads: Vec<JoinHandle<()>>) {
        drop(tx);
        for t in threads {
            t.join().unwrap();
        }
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
}
