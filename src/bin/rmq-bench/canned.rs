//! `rmq-bench canned`: a server that does no work, on the name server's own event loop. It
//! answers every request frame with the same SUCCESS reply, so a workload run against it shows
//! the ceiling of the load generator and the loop together on this machine.

use crate::engine::Template;
use bytes::{Bytes, BytesMut};
use rmq_namesrv::event_loop::{ConnId, Ctx, EventLoop, Handler, Limits, ListenerTag, Next};
use rmq_namesrv::remoting::command::{DecodeLimits, RemotingCommand, SerializeType};
use rmq_namesrv::remoting::frame::{self, FrameError};
use std::io;
use std::net::SocketAddr;

/// An event-loop handler that decodes every frame and hands the command to its closure; an
/// undecodable frame closes the connection.
pub struct OnCommand<F>(pub F);

impl<F: FnMut(&mut Ctx<()>, ConnId, RemotingCommand)> Handler for OnCommand<F> {
    type Conn = ();
    type FrameError = FrameError;

    fn cut_frame(&self, buf: &mut BytesMut) -> Result<Option<Bytes>, FrameError> {
        frame::next_frame(buf, u32::MAX)
    }

    fn on_frame(&mut self, ctx: &mut Ctx<()>, conn: ConnId, frame: Bytes) -> Next {
        match RemotingCommand::decode(frame, &DecodeLimits::default()) {
            Ok(command) => (self.0)(ctx, conn, command),
            Err(_) => return Next::Close,
        }
        Next::Continue
    }
}

/// Serves until the process is killed. Prints `canned listening on ADDR` first.
pub fn serve(listen: &str, body_bytes: usize) -> io::Result<()> {
    let addr: SocketAddr = listen
        .parse()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{listen}: {e}")))?;
    // A load generator's peers read what they are sent: no backpressure, no idle closes.
    let limits = Limits {
        write_high_water: 1 << 30,
        write_hard_cap: usize::MAX,
        ..Limits::default()
    };
    let mut event_loop = EventLoop::new(limits)?;
    let bound = event_loop.listen(addr, ListenerTag(0))?;
    println!("canned listening on {bound}");
    // Every request gets the same SUCCESS reply in its header codec, with its opaque.
    let replies =
        [SerializeType::Json, SerializeType::RocketMq].map(|st| Template::success(st, body_bytes));
    let reply = |ctx: &mut Ctx<()>, conn, request: RemotingCommand| {
        if !request.is_oneway() {
            if let Some(out) = ctx.write_buf(conn) {
                replies[request.serialize_type as usize].write_to(out, request.opaque);
            }
        }
    };
    event_loop.run(OnCommand(reply))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canned_replies_decode_with_the_request_opaque() {
        for st in [SerializeType::Json, SerializeType::RocketMq] {
            let r = Template::success(st, 5);
            for opaque in [0, 7, -3, 1_000_000_042, i32::MIN, i32::MAX] {
                let mut out = Vec::new();
                r.write_to(&mut out, opaque);
                let len = u32::from_be_bytes([out[0], out[1], out[2], out[3]]) as usize;
                assert_eq!(len + 4, out.len());
                let cmd = RemotingCommand::decode(
                    Bytes::copy_from_slice(&out[4..]),
                    &DecodeLimits::default(),
                )
                .unwrap();
                assert_eq!(cmd.opaque, opaque);
                assert_eq!(cmd.code, 0);
                assert!(cmd.is_response());
                assert_eq!(&cmd.body[..], b"xxxxx");
            }
        }
    }
}
