//! The decode worker: a thread beside the loop that hashes and decodes large request bodies
//! (REGISTER_BROKER, REGISTER_TOPIC_IN_NAMESRV), so that no single request holds the loop (a
//! 16 MiB JSON body takes 100+ ms to decode, a zlib bomb tens of ms to inflate, a 16 MiB body
//! a few ms just to hash: `cargo bench --bench register_body_parse` gives the rates).
//!
//! The loop keeps everything that touches the tables: the processor says which requests come
//! here (`Effects::off_loop`: small bodies never do, so the common case takes no thread hop),
//! and handles what comes back in turn. The worker only runs
//! [`processor::decode_off_loop`], a pure function of the request and the limits handed over,
//! and frees applied registration bodies (thousands of strings each). Results come back
//! through a channel and the loop's waker; the request's connection stays held meanwhile, so
//! its replies keep their order.

use crate::event_loop::{ConnId, LoopWaker};
use crate::processor::{self, DecodeJob, Decoded};
use crate::remoting::command::RemotingCommand;
use crate::request::ParseError;
use crate::route::model::{DecodeScratch, RegisterBody};
use crossbeam_channel::{unbounded, Receiver, Sender};
use log::error;
use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::thread::JoinHandle;

/// What the loop hands over.
pub enum Job {
    /// Hash and decode a request's body.
    Decode(Box<Request>),
    /// Free what the loop is done with: applied bodies (thousands of strings each) and
    /// requests whose large bodies came back from here (freeing megabytes is an unmap).
    Free {
        bodies: Vec<RegisterBody>,
        requests: Vec<RemotingCommand>,
    },
}

/// A request whose body is to be decoded.
pub struct Request {
    pub conn: ConnId,
    pub cmd: RemotingCommand,
    pub job: DecodeJob,
}

/// A request coming back, with what the worker made of its body.
pub struct Finished {
    pub conn: ConnId,
    pub cmd: RemotingCommand,
    pub decoded: Decoded,
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
    /// Starts the thread; it wakes the loop when a request is ready.
    pub fn spawn(name: &str, waker: LoopWaker) -> io::Result<DecodeWorker> {
        // Unbounded: the server bounds what it hands over (registration queue bytes, the
        // decode backlog of other requests).
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

    /// Hands a request over to be decoded; gives it back when the thread is gone (it ended
    /// after a panic), for the loop to decode itself.
    pub fn decode(&mut self, request: Request) -> Option<Request> {
        let bytes = request.cmd.body.len();
        let Some(jobs) = self.jobs.as_ref() else {
            return Some(request);
        };
        match jobs.send(Job::Decode(Box::new(request))) {
            Ok(()) => {
                self.in_flight += 1;
                self.bytes_in_flight += bytes;
                None
            }
            Err(e) => match e.into_inner() {
                Job::Decode(request) => Some(*request),
                Job::Free { .. } => None,
            },
        }
    }

    /// Hands applied bodies and handled large requests over to be freed (here, should the
    /// thread be gone).
    pub fn free(&mut self, bodies: Vec<RegisterBody>, requests: Vec<RemotingCommand>) {
        if let Some(jobs) = self.jobs.as_ref() {
            // Should the thread be gone, they come back in the error and are freed here.
            let _ = jobs.send(Job::Free { bodies, requests });
        }
    }

    /// A request the worker is done with, if any.
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
        let Request { conn, cmd, job } = match job {
            Job::Decode(request) => *request,
            Job::Free { bodies, requests } => {
                drop((bodies, requests));
                continue;
            }
        };
        let decoded = decode_guarded(&cmd, &job, &mut scratch);
        if finished.send(Finished { conn, cmd, decoded }).is_err() {
            return;
        }
        waker.wake();
    }
}

/// [`processor::decode_off_loop`]; a panic (a bug, never expected) in a decoder refuses
/// that request only. The loop calls it too when the worker is gone.
pub fn decode_guarded(
    cmd: &RemotingCommand,
    job: &DecodeJob,
    scratch: &mut DecodeScratch,
) -> Decoded {
    catch_unwind(AssertUnwindSafe(|| {
        processor::decode_off_loop(cmd, job, scratch)
    }))
    .unwrap_or_else(|_| {
        error!(
            "BUG: decoding a body of request {} panicked; refusing it",
            cmd.code
        );
        Decoded::Failed(ParseError::BadBody {
            what: "request",
            reason: "the body could not be decoded (internal error)".into(),
        })
    })
}
