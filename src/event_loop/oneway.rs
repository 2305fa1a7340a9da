//! Fire-and-forget delivery of encoded frames to other servers, on a thread of its own:
//! connecting to an address may take as long as its timeout, which the loop must never wait
//! for. Each message is delivered to each of its targets over a fresh connection, with a
//! timeout per attempt; failures are logged, never retried. It knows nothing of what the
//! frames say.

use crossbeam_channel::{bounded, Receiver, Sender};
use log::{debug, warn};
use std::io::{self, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::thread::JoinHandle;
use std::time::Duration;

/// One frame for several targets (`host:port`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Oneway {
    /// What the frame is, for the log.
    pub what: &'static str,
    pub targets: Vec<String>,
    pub frame: Vec<u8>,
}

/// Starts the sender thread; it ends when every sender is dropped. A full queue (`capacity`
/// messages) is the sender's to report.
pub fn spawn_sender(
    name: &str,
    capacity: usize,
    timeout: Duration,
) -> io::Result<(Sender<Oneway>, JoinHandle<()>)> {
    let (tx, rx) = bounded(capacity.max(1));
    let thread = std::thread::Builder::new()
        .name(name.to_string())
        .spawn(move || run(rx, timeout))?;
    Ok((tx, thread))
}

fn run(messages: Receiver<Oneway>, timeout: Duration) {
    for message in messages.iter() {
        for target in &message.targets {
            match send(target, &message.frame, timeout) {
                Ok(()) => debug!("sent {} to {target}", message.what),
                Err(e) => warn!("{} to {target} failed: {e}", message.what),
            }
        }
    }
}

fn send(target: &str, frame: &[u8], timeout: Duration) -> io::Result<()> {
    let addr = target
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| io::Error::other("unresolvable address"))?;
    let mut stream = TcpStream::connect_timeout(&addr, timeout)?;
    stream.set_write_timeout(Some(timeout))?;
    stream.write_all(frame)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::TcpListener;

    #[test]
    fn each_target_receives_the_frame_and_a_dead_one_does_not_stop_the_rest() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let live = listener.local_addr().unwrap().to_string();
        let dead = {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().to_string()
        };
        let (tx, thread) = spawn_sender("test-oneway", 4, Duration::from_millis(300)).unwrap();
        tx.send(Oneway {
            what: "test frame",
            targets: vec![dead, live],
            frame: b"hello".to_vec(),
        })
        .unwrap();
        let (mut s, _) = listener.accept().unwrap();
        let mut got = Vec::new();
        s.read_to_end(&mut got).unwrap();
        assert_eq!(got, b"hello");
        drop(tx);
        thread.join().unwrap();
    }
}
