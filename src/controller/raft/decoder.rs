//! Reads the leader's snapshots off the loop. A follower hands a snapshot message to this
//! thread, which reads its data into a [`ControllerState`] (100,000 broker sets: hundreds of
//! ms in a release build, seconds in a debug one); the loop steps the message into Raft once
//! the state is ready and swaps it in. One snapshot at a time: another arriving meanwhile is
//! dropped (the leader sends it again). Large things the loop replaces (the tables, the write
//! leases' records, a previous snapshot's data) are freed here too: freeing 100,000 broker
//! sets took 0.3-1.4 s in a release build.

use super::storage::{Persistence, Wake};
use crate::controller::snapshot;
use crate::controller::state::ControllerState;
use crossbeam_channel::{unbounded, Receiver, Sender};
use raft::eraftpb::Message;
use std::io;
use std::sync::Arc;

/// A snapshot message from peer `from`, and the state its data holds or why it does not read.
pub struct Decoded {
    pub from: u64,
    pub msg: Message,
    pub state: Result<ControllerState, String>,
}

enum Job {
    Decode(u64, Message),
    Discard(Box<dyn Send>),
}

pub struct SnapshotDecoder {
    /// Dropping it ends the thread (after the snapshot it is reading).
    jobs: Sender<Job>,
    results: Receiver<Decoded>,
    /// Manual persistence (deterministic tests): jobs run when results are asked for.
    manual: Option<(Receiver<Job>, Sender<Decoded>)>,
    busy: bool,
}

impl SnapshotDecoder {
    /// With a thread that wakes the loop after each snapshot, as the log writer does.
    pub fn start(persistence: &Persistence) -> io::Result<SnapshotDecoder> {
        let (jobs, job_rx) = unbounded();
        let (done, results) = unbounded();
        let manual = match persistence {
            Persistence::Manual => Some((job_rx, done)),
            Persistence::Thread(waker) => {
                let waker = waker.clone();
                std::thread::Builder::new()
                    .name("controller-snapshot-decoder".into())
                    .spawn(move || run(job_rx, done, waker))?;
                None
            }
        };
        Ok(SnapshotDecoder {
            jobs,
            results,
            manual,
            busy: false,
        })
    }

    pub fn is_busy(&self) -> bool {
        self.busy
    }

    pub fn decode(&mut self, from: u64, msg: Message) {
        self.busy = self.jobs.send(Job::Decode(from, msg)).is_ok();
    }

    /// Frees `garbage` on the thread.
    pub fn discard(&self, garbage: Box<dyn Send>) {
        let _ = self.jobs.send(Job::Discard(garbage));
    }

    pub fn try_result(&mut self) -> Option<Decoded> {
        if let Some((jobs, done)) = &self.manual {
            jobs.try_iter().filter_map(decode).for_each(|d| {
                let _ = done.send(d);
            });
        }
        let decoded = self.results.try_recv().ok()?;
        self.busy = false;
        Some(decoded)
    }
}

fn run(jobs: Receiver<Job>, done: Sender<Decoded>, waker: Option<Arc<dyn Wake>>) {
    for decoded in jobs.iter().filter_map(decode) {
        if done.send(decoded).is_err() {
            return;
        }
        if let Some(waker) = &waker {
            waker.wake();
        }
    }
}

fn decode(job: Job) -> Option<Decoded> {
    let (from, msg) = match job {
        Job::Decode(from, msg) => (from, msg),
        Job::Discard(garbage) => {
            drop(garbage);
            return None;
        }
    };
    let snap = msg.get_snapshot();
    let index = snap.get_metadata().index;
    let state = match snapshot::decode(&snap.data) {
        Ok((at, state)) if at == index => Ok(state),
        Ok((at, _)) => Err(format!("holds state as of {at} but says {index}")),
        Err(e) => Err(format!("does not decode: {e}")),
    };
    Some(Decoded { from, msg, state })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::event::Event;
    use raft::eraftpb::{MessageType, Snapshot};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::{Duration, Instant};

    fn message(index: u64, data: Vec<u8>) -> Message {
        let mut msg = Message::default();
        msg.set_msg_type(MessageType::MsgSnapshot);
        let mut snapshot = Snapshot {
            data: data.into(),
            ..Default::default()
        };
        snapshot.mut_metadata().index = index;
        msg.set_snapshot(snapshot);
        msg
    }

    fn state() -> ControllerState {
        let mut state = ControllerState::default();
        state.apply(&Event::ApplyBrokerId {
            cluster_name: Some("c".into()),
            broker_name: "a".into(),
            broker_address: "h:1".into(),
            new_broker_id: 1,
            register_check_code: "h:1;1".into(),
        });
        state
    }

    #[test]
    fn a_snapshot_is_read_into_its_state_and_a_bad_one_says_why() {
        let mut decoder = SnapshotDecoder::start(&Persistence::Manual).unwrap();
        decoder.decode(2, message(7, snapshot::encode(7, &state())));
        assert!(decoder.is_busy());
        let read = decoder.try_result().unwrap();
        assert_eq!((read.from, read.state), (2, Ok(state())));
        assert!(!decoder.is_busy());
        decoder.decode(2, message(8, snapshot::encode(7, &state())));
        let why = decoder.try_result().unwrap().state.unwrap_err();
        assert!(why.contains("as of 7 but says 8"), "{why}");
        decoder.decode(2, message(8, b"junk".to_vec()));
        let why = decoder.try_result().unwrap().state.unwrap_err();
        assert!(why.starts_with("does not decode"), "{why}");
        decoder.discard(Box::new(state()));
        assert!(decoder.try_result().is_none(), "freed, nothing to report");
    }

    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(&self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn the_thread_wakes_the_loop_when_a_snapshot_is_read() {
        let wakes = Arc::new(Count(AtomicUsize::new(0)));
        let waker: Arc<dyn Wake> = wakes.clone();
        let mut decoder = SnapshotDecoder::start(&Persistence::Thread(Some(waker))).unwrap();
        decoder.discard(Box::new(state()));
        decoder.decode(3, message(7, snapshot::encode(7, &state())));
        let deadline = Instant::now() + Duration::from_secs(10);
        while wakes.0.load(Ordering::SeqCst) == 0 {
            assert!(Instant::now() < deadline, "read in time");
            std::thread::sleep(Duration::from_millis(1));
        }
        let read = decoder.try_result().expect("the snapshot read");
        assert_eq!((read.from, read.state), (3, Ok(state())));
        assert_eq!(
            wakes.0.load(Ordering::SeqCst),
            1,
            "once, for the snapshot only"
        );
    }
}
