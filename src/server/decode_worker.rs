//! The decode worker: a thread beside the loop that hashes and decodes large REGISTER_BROKER
//! bodies, so that no single registration holds the loop (a 16 MiB JSON body takes 100+ ms
//! to decode, a zlib bomb tens of ms to inflate, a 16 MiB body tens of ms just to hash).
//!
//! The loop keeps everything that touches the tables: it decides by size what comes here
//! (small bodies never do: no thread hop for the common case), checks whether a hashed body
//! is unchanged (then it is applied without decoding, as on the loop), and applies what comes
//! back. The worker only runs pure functions of the request
//! ([`processor::hash_registration`], [`processor::decode_registration`]) with the limits the
//! loop handed over, and frees applied bodies (thousands of strings each). Large
//! REGISTER_TOPIC_IN_NAMESRV bodies (a TopicRouteData: 15 MB take 200 ms) are decoded and
//! checked here too, and answered by the loop. Results come back
//! through a channel and the loop's waker; the registration's connection stays held
//! meanwhile, so its replies keep their order.

use crate::event_loop::{ConnId, LoopWaker};
use crate::processor::{self, BodyChecks, BodyWork};
use crate::remoting::command::RemotingCommand;
use crate::request::NameLimits;
use crate::route::model::{DecodeScratch, RegisterBody};
use crate::route::table::BodyFingerprint;
use crossbeam_channel::{unbounded, Receiver, Sender};
use log::error;
use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::thread::JoinHandle;

/// What the loop hands over.
pub enum Job {
    /// Hash the body (it is too large to hash on the loop).
    Hash {
        conn: ConnId,
        cmd: RemotingCommand,
        checks: BodyChecks,
    },
    /// Check and decode a changed body.
    Decode {
        conn: ConnId,
        cmd: RemotingCommand,
        fingerprint: BodyFingerprint,
        checks: BodyChecks,
    },
    /// Decode and check a REGISTER_TOPIC_IN_NAMESRV body.
    Route {
        conn: ConnId,
        cmd: RemotingCommand,
        names: NameLimits,
    },
    /// Free bodies the loop has applied.
    Free(Vec<RegisterBody>),
}

impl Job {
    /// Body bytes the job holds.
    pub fn bytes(&self) -> usize {
        match self {
            Job::Hash { cmd, .. } | Job::Decode { cmd, .. } | Job::Route { cmd, .. } => {
                cmd.body.len()
            }
            Job::Free(_) => 0,
        }
    }
}

/// A registration coming back, with what the worker found out about its body.
pub struct Finished {
    pub conn: ConnId,
    pub cmd: RemotingCommand,
    pub work: BodyWork,
}

/// The loop's end of the worker.
pub struct DecodeWorker {
    jobs: Option<Sender<Job>>,
    finished: Receiver<Finished>,
    thread: Option<JoinHandle<()>>,
    /// Requests handed over and not yet taken back, and their body bytes.
    in_flight: usize,
    bytes_in_flight: usize,
}

impl DecodeWorker {
    /// Starts the thread; it wakes the loop when a registration is ready.
    pub fn spawn(name: &str, waker: LoopWaker) -> io::Result<DecodeWorker> {
        // Unbounded: the server bounds what it hands over (registration queue bytes).
        let (jobs, job_rx) = unbounded();
        let (done_tx, finished) = unbounded();
        let thread = std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || run(job_rx, done_tx, waker))?;
        Ok(DecodeWorker {
            jobs: Some(jobs),
            finished,
            thread: Some(thread),
            in_flight: 0,
            bytes_in_flight: 0,
        })
    }

    /// Hands a job over; gives it back when the thread is gone (it ended after a panic), for
    /// the loop to handle itself.
    pub fn submit(&mut self, job: Job) -> Option<Job> {
        let counts = !matches!(job, Job::Free(_));
        let bytes = job.bytes();
        let Some(jobs) = self.jobs.as_ref() else {
            return Some(job);
        };
        match jobs.send(job) {
            Ok(()) => {
                self.in_flight += usize::from(counts);
                self.bytes_in_flight += bytes;
                None
            }
            Err(e) => Some(e.into_inner()),
        }
    }

    /// A registration the worker is done with, if any.
    pub fn try_take(&mut self) -> Option<Finished> {
        let finished = self.finished.try_recv().ok()?;
        self.in_flight -= 1;
        self.bytes_in_flight -= finished.cmd.body.len();
        Some(finished)
    }

    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    pub fn bytes_in_flight(&self) -> usize {
        self.bytes_in_flight
    }

    /// Ends the thread once it has finished what it holds.
    pub fn shutdown(mut self) {
        self.jobs = None;
        if let Some(thread) = self.thread.take() {
            if thread.join().is_err() {
                error!("the decode worker panicked");
            }
        }
    }
}

fn run(jobs: Receiver<Job>, finished: Sender<Finished>, waker: LoopWaker) {
    // Its duplicate-key set is kept; its string pool stays empty: the bodies the loop hands
    // back are freed, not pooled (they are the large ones, and a pool of their strings
    // would pin heap pages the loop's trims could otherwise return).
    let mut scratch = DecodeScratch::default();
    while let Ok(job) = jobs.recv() {
        let Some(done) = work(job, &mut scratch) else {
            continue;
        };
        if finished.send(done).is_err() {
            return;
        }
        waker.wake();
    }
}

/// One job. A panic (a bug, never expected) in a decoder fails that registration only.
fn work(job: Job, scratch: &mut DecodeScratch) -> Option<Finished> {
    match job {
        Job::Free(bodies) => {
            drop(bodies);
            None
        }
        Job::Route { conn, cmd, names } => {
            let work = catch_unwind(AssertUnwindSafe(|| {
                processor::decode_route_body(&cmd, &names)
            }))
            .unwrap_or_else(|_| {
                error!("BUG: decoding a TopicRouteData body panicked; refusing that request");
                BodyWork::RouteDecoded(Err(crate::request::ParseError::BadBody {
                    what: "TopicRouteData",
                    reason: "the body could not be decoded (internal error)".into(),
                }))
            });
            Some(Finished { conn, cmd, work })
        }
        Job::Hash { conn, cmd, checks } => {
            let hashed = catch_unwind(AssertUnwindSafe(|| {
                processor::hash_registration(&cmd, &checks)
            }));
            // After a panic the loop hashes it itself: hashing has no decoder behind it.
            let work = hashed.map_or(BodyWork::DecodeOffLoop, BodyWork::Hashed);
            Some(Finished { conn, cmd, work })
        }
        Job::Decode {
            conn,
            cmd,
            fingerprint,
            checks,
        } => {
            let decoded = catch_unwind(AssertUnwindSafe(|| {
                processor::decode_registration(&cmd, fingerprint, &checks, scratch)
            }))
            .unwrap_or_else(|_| {
                error!("BUG: decoding a registration body panicked; refusing that registration");
                processor::DecodedBody {
                    fingerprint,
                    crc_mismatch: None,
                    body: Err(crate::request::ParseError::BadRegisterBody(
                        "the body could not be decoded (internal error)".into(),
                    )),
                }
            });
            let work = BodyWork::Decoded(Box::new(decoded));
            Some(Finished { conn, cmd, work })
        }
    }
}
