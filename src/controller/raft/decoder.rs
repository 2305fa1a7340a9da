//! Reads the leader's snapshots off the loop. A follower hands a snapshot message to this
//! thread, which reads its data into a [`ControllerState`] (100,000 broker sets: hundreds of
//! ms in a release build, seconds in a debug one); the loop steps the message into Raft once
//! the state is ready and swaps it in. One snapshot at a time: another arriving meanwhile is
//! dropped (the leader sends it again). States the loop replaces are dropped here too: freeing
//! 100,000 broker sets is milliseconds of work.

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
    Discard(ControllerState),
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

    /// Frees `state` on the thread.
    pub fn discard(&self, state: ControllerState) {
        let _ = self.jobs.send(Job::Discard(state));
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
        Job::Discard(state) => {
            drop(state);
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
