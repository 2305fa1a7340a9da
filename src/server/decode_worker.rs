//! The decode worker: a thread beside the loop that hashes and decodes large request bodies
//! past `decodeOnLoopMaxBytes`, so that no single request holds the loop (a 16 MiB JSON body
//! takes 100+ ms to decode: `cargo bench --bench register_body_parse` gives the rates). It
//! runs [`processor::decode_off_loop`], a pure function of the request and the limits handed
//! over, and frees what the loop is done with. The connection stays held meanwhile. It runs at
//! the loop's priority: at nice 10 the registrations it decodes waited behind a benchmark's
//! generator, and the route lookups ordered after them with it (storm route p99 1 -> 3-5 ms).

use super::admission::QueuedRegistration;
use super::{NameServer, PeerState};
use crate::event_loop::{ConnId, Ctx, LoopWaker, Next};
use crate::processor::{self, BodyWork, DecodeJob, Decoded};
use crate::remoting::codes::request;
use crate::remoting::command::RemotingCommand;
use crate::request::ParseError;
use crate::route::model::{DecodeScratch, RegisterBody};
use crossbeam_channel::{unbounded, Receiver, Sender};
use log::{error, warn};
use std::collections::VecDeque;
use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::thread::JoinHandle;

/// Body bytes of REGISTER_TOPIC_IN_NAMESRV requests that may wait for the decode worker; more
/// are answered SYSTEM_BUSY (registrations are bounded by their own queue).
const DECODE_BACKLOG_BYTES: usize = 64 << 20;

enum Job {
    Decode(Box<Request>),
    /// Free what the loop is done with (thousands of strings, or megabytes to unmap).
    Free(Box<dyn Send>),
}

pub struct Request {
    pub conn: ConnId,
    pub cmd: RemotingCommand,
    pub job: DecodeJob,
}

pub struct Finished {
    pub conn: ConnId,
    pub cmd: RemotingCommand,
    pub decoded: Decoded,
}

pub struct DecodeWorker {
    jobs: Option<Sender<Job>>,
    finished: Receiver<Finished>,
    /// Decoded on the loop because the thread is gone (it ended after a panic).
    decoded_here: VecDeque<Finished>,
    thread: Option<JoinHandle<()>>,
    in_flight: usize,
    bytes_in_flight: usize,
}

impl DecodeWorker {
    pub fn spawn(name: &str, waker: LoopWaker) -> io::Result<DecodeWorker> {
        // Unbounded: the server bounds what it hands over.
        let (jobs, job_rx) = unbounded();
        let (done_tx, finished) = unbounded();
        let thread = std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || run(job_rx, done_tx, waker))?;
        Ok(DecodeWorker {
            jobs: Some(jobs),
            finished,
            decoded_here: VecDeque::new(),
            thread: Some(thread),
            in_flight: 0,
            bytes_in_flight: 0,
        })
    }

    pub fn decode(&mut self, request: Request) {
        self.in_flight += 1;
        self.bytes_in_flight += request.cmd.body.len();
        let request = match &self.jobs {
            Some(jobs) => match jobs.send(Job::Decode(Box::new(request))) {
                Ok(()) => return,
                Err(e) => match e.into_inner() {
                    Job::Decode(request) => *request,
                    Job::Free(_) => return,
                },
            },
            None => request,
        };
        let Request { conn, cmd, job } = request;
        error!(
            "the decode worker is gone: decoding request {} on the loop",
            cmd.code
        );
        let decoded = decode_guarded(&cmd, &job, &mut DecodeScratch::default());
        self.decoded_here.push_back(Finished { conn, cmd, decoded });
    }

    pub fn free(&mut self, bodies: Vec<RegisterBody>, requests: Vec<RemotingCommand>) {
        if let Some(jobs) = self.jobs.as_ref() {
            let _ = jobs.send(Job::Free(Box::new((bodies, requests))));
        }
    }

    pub fn try_take(&mut self) -> Option<Finished> {
        let finished = match self.decoded_here.pop_front() {
            Some(f) => f,
            None => self.finished.try_recv().ok()?,
        };
        self.in_flight -= 1;
        self.bytes_in_flight -= finished.cmd.body.len();
        Some(finished)
    }

    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Whether a request decoded on the loop waits to be taken (no wake-up will come).
    pub fn ready_here(&self) -> bool {
        !self.decoded_here.is_empty()
    }

    pub fn shutdown(mut self) {
        self.jobs = None;
        if self.thread.take().is_some_and(|t| t.join().is_err()) {
            error!("the decode worker panicked");
        }
    }
}

fn run(jobs: Receiver<Job>, finished: Sender<Finished>, waker: LoopWaker) {
    // Its string pool stays empty: a pool of large bodies' strings would pin heap pages.
    let mut scratch = DecodeScratch::default();
    while let Ok(job) = jobs.recv() {
        let request = match job {
            Job::Decode(request) => request,
            Job::Free(spent) => {
                drop(spent);
                continue;
            }
        };
        let Request { conn, cmd, job } = *request;
        let decoded = decode_guarded(&cmd, &job, &mut scratch);
        if finished.send(Finished { conn, cmd, decoded }).is_err() {
            return;
        }
        waker.wake();
    }
}

/// [`processor::decode_off_loop`]; a panic (a bug) in a decoder refuses that request only.
fn decode_guarded(cmd: &RemotingCommand, job: &DecodeJob, scratch: &mut DecodeScratch) -> Decoded {
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

impl NameServer {
    /// Held while decoded (SYSTEM_BUSY when too many bytes already wait there).
    pub(super) fn decode_off_loop(
        &mut self,
        ctx: &mut Ctx<PeerState>,
        conn: ConnId,
        cmd: RemotingCommand,
        job: DecodeJob,
    ) -> Next {
        if self.decode.bytes_in_flight + cmd.body.len() > DECODE_BACKLOG_BYTES {
            warn!(
                "decode worker backlog full: answering SYSTEM_BUSY to request {} from {:?}",
                cmd.code,
                ctx.peer(conn)
            );
            if let Some(out) = ctx.write_buf(conn) {
                self.processor.reply_overloaded(&cmd, out);
            }
            return Next::Continue;
        }
        self.decode.decode(Request { conn, cmd, job });
        Next::Hold
    }

    pub(super) fn free_off_loop(&mut self) {
        let spent = self.processor.take_spent_bodies();
        let requests = std::mem::take(&mut self.handled_off_loop);
        if !spent.is_empty() || !requests.is_empty() {
            self.decode.free(spent, requests);
        }
    }

    pub(super) fn take_decoded(&mut self, ctx: &mut Ctx<PeerState>) {
        while let Some(done) = self.decode.try_take() {
            let work = BodyWork::OffLoop(Box::new(done.decoded));
            if done.cmd.code == request::REGISTER_BROKER {
                self.registrations.queue.push_back(QueuedRegistration {
                    conn: done.conn,
                    cmd: done.cmd,
                    work,
                });
                continue;
            }
            self.handle_held(ctx, done.conn, &done.cmd, work);
            self.handled_off_loop.push(done.cmd);
        }
    }
}
