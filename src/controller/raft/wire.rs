//! A Raft message's bytes for the peer link. A snapshot's data (tens of MB for 100,000 broker
//! sets) is not copied into the message: the [`Payload`] is the message's bytes around it and
//! the data itself, shared with the store, so each send (Raft retries a snapshot until the
//! follower has it) encodes a few hundred bytes on the loop, not the whole snapshot again.

use bytes::Bytes;
use protobuf::{Message as _, ProtobufResult};
use raft::eraftpb::Message;

/// The parts of one message, sent one after the other as one payload.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Payload {
    parts: Vec<Bytes>,
}

impl Payload {
    pub fn len(&self) -> usize {
        self.parts.iter().map(Bytes::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn parts(&self) -> &[Bytes] {
        &self.parts
    }

    /// All of it in one piece (a copy unless it is one part).
    pub fn to_bytes(&self) -> Bytes {
        match self.parts.as_slice() {
            [one] => one.clone(),
            parts => Bytes::from(parts.concat()),
        }
    }
}

impl From<Vec<u8>> for Payload {
    fn from(bytes: Vec<u8>) -> Payload {
        Payload {
            parts: vec![bytes.into()],
        }
    }
}

/// Protobuf's field 9 of `Message` (its snapshot) and field 1 of `Snapshot` (the data), both
/// length-delimited (wire type 2).
const SNAPSHOT_FIELD: u8 = 9 << 3 | 2;
const DATA_FIELD: u8 = 1 << 3 | 2;

/// The message's bytes: those protobuf writes, except that a snapshot's data is a part of its
/// own (protobuf reads fields in any order: the snapshot comes last, its data first).
pub fn encode(mut msg: Message) -> ProtobufResult<Payload> {
    if msg.get_snapshot().data.is_empty() {
        return Ok(msg.write_to_bytes()?.into());
    }
    let mut snapshot = msg.take_snapshot();
    let data = std::mem::take(&mut snapshot.data);
    let rest = snapshot.write_to_bytes()?;
    let mut head = msg.write_to_bytes()?;
    let data_field = 1 + varint_len(data.len()) + data.len();
    head.push(SNAPSHOT_FIELD);
    put_varint(&mut head, data_field + rest.len());
    head.push(DATA_FIELD);
    put_varint(&mut head, data.len());
    Ok(Payload {
        parts: vec![head.into(), data, rest.into()],
    })
}

fn put_varint(out: &mut Vec<u8>, mut n: usize) {
    while n >= 0x80 {
        out.push(n as u8 | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn varint_len(n: usize) -> usize {
    (usize::BITS - (n | 1).leading_zeros()).div_ceil(7) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use raft::eraftpb::{MessageType, Snapshot};

    fn message(data: &[u8]) -> Message {
        let mut msg = Message::default();
        msg.set_msg_type(MessageType::MsgSnapshot);
        (msg.to, msg.from, msg.term, msg.commit) = (2, 1, 7, 300);
        let mut snapshot = Snapshot {
            data: Bytes::copy_from_slice(data),
            ..Default::default()
        };
        snapshot.mut_metadata().index = 42;
        snapshot.mut_metadata().term = 6;
        snapshot.mut_metadata().mut_conf_state().voters = vec![1, 2, 3];
        msg.set_snapshot(snapshot);
        msg
    }

    #[test]
    fn a_snapshot_message_reads_back_whole_with_its_data_shared() {
        for size in [1, 127, 128, 300, 16_384, 1 << 21] {
            let data: Vec<u8> = (0..size).map(|i| i as u8).collect();
            let msg = message(&data);
            let payload = encode(msg.clone()).unwrap();
            assert_eq!(payload.parts().len(), 3);
            assert_eq!(
                payload.parts()[1].len(),
                size,
                "the data is a part of its own"
            );
            let back = Message::parse_from_carllerche_bytes(&payload.to_bytes()).unwrap();
            assert_eq!(back, msg, "size {size}");
            assert_eq!(payload.len(), msg.write_to_bytes().unwrap().len());
        }
    }

    #[test]
    fn other_messages_are_protobufs_bytes_in_one_part() {
        let mut msg = message(b"");
        msg.clear_snapshot();
        msg.set_msg_type(MessageType::MsgAppend);
        let payload = encode(msg.clone()).unwrap();
        assert_eq!(payload.parts().len(), 1);
        assert_eq!(payload.to_bytes(), msg.write_to_bytes().unwrap());
    }
}
