//! Payloads above [`CHUNK`] bytes (Raft's snapshots) cross a link as consecutive oneway
//! frames with the extFields `offset` and `total`, one chunk per link per loop turn; one such
//! payload at a time each way per peer, at most [`MAX_PAYLOAD`] bytes.

use super::{encode_peer_frame, FLAG_ONEWAY, PEER_CODE};
use crate::remoting::command::RemotingCommand;
use bytes::Bytes;

pub use crate::controller::raft::MAX_MESSAGE_BYTES as MAX_PAYLOAD;

/// A frame's share of a large payload: one such copy per link and loop turn.
pub const CHUNK: usize = 1 << 20;

/// A large payload going out: the bytes and how many of them are sent.
pub struct Outgoing {
    payload: Vec<u8>,
    sent: usize,
}

impl Outgoing {
    pub fn new(payload: Vec<u8>) -> Outgoing {
        Outgoing { payload, sent: 0 }
    }

    /// Writes the next chunk; true when that was the last.
    pub fn write_next(&mut self, out: &mut Vec<u8>) -> bool {
        let end = (self.sent + CHUNK).min(self.payload.len());
        let offset = self.sent.to_string();
        let total = self.payload.len().to_string();
        let ext = [("offset", offset.as_str()), ("total", total.as_str())];
        let chunk = &self.payload[self.sent..end];
        encode_peer_frame(out, (FLAG_ONEWAY, PEER_CODE, 0), None, Some(&ext), chunk);
        self.sent = end;
        end == self.payload.len()
    }
}

/// A large payload coming in: the bytes so far, room for all of them reserved.
#[derive(Default)]
pub struct Incoming {
    buf: Vec<u8>,
    total: usize,
}

impl Incoming {
    /// Takes the next chunk; `Ok(Some)` once the payload is whole, `Err` (the link closes) on
    /// a chunk out of order or a payload above the cap.
    pub fn take(&mut self, cmd: &RemotingCommand) -> Result<Option<Bytes>, String> {
        let number = |key| cmd.ext(key).and_then(|v| v.parse::<usize>().ok());
        let (Some(offset), Some(total)) = (number("offset"), number("total")) else {
            return Err("a chunk without its offset and total".into());
        };
        if total > MAX_PAYLOAD {
            return Err(format!(
                "a payload of {total} bytes is above the cap of {MAX_PAYLOAD}"
            ));
        }
        if offset == 0 {
            self.total = total;
            self.buf = Vec::with_capacity(total);
        }
        let body = &cmd.body;
        if offset != self.buf.len() || total != self.total || body.len() > total - offset {
            return Err(format!(
                "a chunk at {offset} of {total} bytes ({} bytes) where {} of {} were expected",
                body.len(),
                self.buf.len(),
                self.total
            ));
        }
        self.buf.extend_from_slice(body);
        if self.buf.len() < total {
            return Ok(None);
        }
        self.total = 0;
        Ok(Some(Bytes::from(std::mem::take(&mut self.buf))))
    }
}
