//! The server's side of large bodies: a request the processor sends off the loop
//! (`Effects::off_loop`) goes to the [`decode_worker`](super::decode_worker) with its
//! connection held, comes back in turn (registrations through their queue), and what it
//! leaves behind (applied bodies, the request's buffer) is freed there too.

use super::admission::QueuedRegistration;
use super::{decode_worker, NameServer, PeerState};
use crate::event_loop::{ConnId, Ctx, Next};
use crate::processor::{BodyWork, DecodeJob, Decoded};
use crate::remoting::codes::request;
use crate::remoting::command::RemotingCommand;
use crate::route::model::DecodeScratch;
use log::{error, warn};

/// Body bytes of REGISTER_TOPIC_IN_NAMESRV requests that may wait for the decode worker; more
/// are answered SYSTEM_BUSY (registrations are bounded by their own queue).
pub(super) const DECODE_BACKLOG_BYTES: usize = 64 << 20;

impl NameServer {
    /// A request other than a registration whose body is too large for the loop: decoded by
    /// the worker while the connection is held, then handled again ([`NameServer::take_decoded`]);
    /// answered SYSTEM_BUSY when too many bytes already wait there (registrations are bounded
    /// by their own queue).
    pub(super) fn decode_off_loop(
        &mut self,
        ctx: &mut Ctx<PeerState>,
        conn: ConnId,
        cmd: RemotingCommand,
        job: DecodeJob,
    ) -> Next {
        if self.decode.bytes_in_flight() + cmd.body.len() > DECODE_BACKLOG_BYTES {
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
        match self
            .decode
            .decode(decode_worker::Request { conn, cmd, job })
        {
            None => Next::Hold,
            Some(back) => {
                let decoded = decode_here(&back);
                self.handle_now(ctx, conn, &back.cmd, BodyWork::OffLoop(Box::new(decoded)))
            }
        }
    }

    /// Applied registration bodies and handled large requests are freed by the decode worker.
    pub(super) fn free_off_loop(&mut self) {
        let spent = self.processor.take_spent_bodies();
        let requests = std::mem::take(&mut self.handled_off_loop);
        if !spent.is_empty() || !requests.is_empty() {
            self.decode.free(spent, requests);
        }
    }

    /// Registrations the decode worker is done with join the queue again, to be applied in
    /// turn; other requests it decoded are handled now.
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
            if ctx.peer(done.conn).is_none() {
                continue;
            }
            match self.handle_now(ctx, done.conn, &done.cmd, work) {
                Next::Continue => ctx.release(done.conn),
                Next::Hold => {}
                Next::Close => ctx.close(done.conn, "handling a decoded request failed"),
            }
            self.handled_off_loop.push(done.cmd);
        }
    }
}

/// What the decode worker would make of a job, made here: the fallback when the worker is gone
/// (it ended after a panic), so that large bodies are still answered.
pub(super) fn decode_here(request: &decode_worker::Request) -> Decoded {
    let (cmd, job) = (&request.cmd, &request.job);
    error!(
        "the decode worker is gone: decoding request {} on the loop",
        cmd.code
    );
    decode_worker::decode_guarded(cmd, job, &mut DecodeScratch::default())
}
