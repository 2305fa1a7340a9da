//! Payloads above [`CHUNK`] bytes (Raft's snapshots) cross a link as consecutive oneway
//! frames with the extFields `offset` and `total`, one chunk per link per loop turn; one such
//! payload at a time each way per peer, at most [`MAX_PAYLOAD`] bytes. A chunk never spans two
//! parts of a [`Payload`]: the parts are sent as they are, never joined.

use super::{encode_peer_frame, FLAG_ONEWAY, PEER_CODE};
use crate::controller::raft::wire::Payload;
use crate::remoting::command::RemotingCommand;
use bytes::Bytes;

pub use crate::controller::raft::MAX_MESSAGE_BYTES as MAX_PAYLOAD;

/// A frame's share of a large payload: one such copy per link and loop turn.
pub const CHUNK: usize = 1 << 20;

/// A large payload going out: its parts, the part being sent and how much of it is sent.
pub struct Outgoing {
    payload: Payload,
    total: usize,
    /// Bytes sent, of the payload and of its part `part`.
    sent: usize,
    part: usize,
    sent_of_part: usize,
}

impl Outgoing {
    pub fn new(payload: Payload) -> Outgoing {
        Outgoing {
            total: payload.len(),
            payload,
            sent: 0,
            part: 0,
            sent_of_part: 0,
        }
    }

    /// Writes the next chunk; true when that was the last.
    pub fn write_next(&mut self, out: &mut Vec<u8>) -> bool {
        let parts = self.payload.parts();
        while parts
            .get(self.part)
            .is_some_and(|p| self.sent_of_part == p.len())
        {
            (self.part, self.sent_of_part) = (self.part + 1, 0);
        }
        let part = parts
            .get(self.part)
            .map_or(&[][..], |p| &p[self.sent_of_part..]);
        let chunk = &part[..part.len().min(CHUNK)];
        let offset = self.sent.to_string();
        let total = self.total.to_string();
        let ext = [("offset", offset.as_str()), ("total", total.as_str())];
        encode_peer_frame(out, (FLAG_ONEWAY, PEER_CODE, 0), None, Some(&ext), chunk);
        self.sent += chunk.len();
        self.sent_of_part += chunk.len();
        self.sent == self.total
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::raft::wire;
    use crate::remoting::command::DecodeLimits;

    #[test]
    fn a_payload_in_parts_arrives_whole_in_chunks_that_never_span_two_parts() {
        let mut msg = raft::eraftpb::Message::default();
        let data: Vec<u8> = (0..2 * CHUNK + 5).map(|i| i as u8).collect();
        msg.mut_snapshot().data = data.into();
        msg.mut_snapshot().mut_metadata().index = 9;
        let payload = wire::encode(msg).unwrap();
        let whole = payload.to_bytes();
        let (mut outgoing, mut incoming) = (Outgoing::new(payload), Incoming::default());
        for frame in 1.. {
            let mut buf = Vec::new();
            let last = outgoing.write_next(&mut buf);
            let frame_bytes = Bytes::from(buf).slice(4..);
            let cmd = RemotingCommand::decode(frame_bytes, &DecodeLimits::default()).unwrap();
            assert!(cmd.body.len() <= CHUNK);
            match incoming.take(&cmd).unwrap() {
                None => assert!(!last),
                Some(got) => {
                    assert!(last);
                    assert_eq!(got, whole);
                    assert_eq!(frame, 5, "the head, the data in three chunks, the rest");
                    return;
                }
            }
        }
    }
}
