//! Length framing (docs/protocol.md §1.1): cuts whole frames out of a connection's read buffer,
//! checking only sizes. Any error closes the connection, as Java's NettyDecoder does.

use byteorder::{BigEndian, ByteOrder};
use bytes::{Buf, Bytes, BytesMut};
use std::fmt;

/// Why a frame could not be cut.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameError {
    /// `length + 4` exceeds the configured `frameMaxLength`.
    TooLong { length: u32, max: u32 },
    /// `length` too small to hold even the type/header-length word.
    TooShort { length: u32 },
    /// The header length in the second word does not fit the frame.
    BadHeaderLength { header: u32, length: u32 },
    /// The serialize-type byte is neither JSON (0) nor ROCKETMQ (1).
    BadSerializeType(u8),
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::TooLong { length, max } => {
                write!(f, "frame length {length} (+4) exceeds frameMaxLength {max}")
            }
            FrameError::TooShort { length } => write!(f, "frame length {length} is below 4"),
            FrameError::BadHeaderLength { header, length } => {
                write!(
                    f,
                    "header length {header} does not fit frame length {length}"
                )
            }
            FrameError::BadSerializeType(t) => write!(f, "unknown serialize type {t}"),
        }
    }
}

impl std::error::Error for FrameError {}

/// Size of the frame prefix: the length word and the type/header-length word.
pub const PREFIX_LEN: usize = 8;

/// The next whole frame off `buf`, without its length prefix (`None`: more bytes needed). An
/// oversized length is refused as soon as the first eight bytes are there.
pub fn next_frame(buf: &mut BytesMut, frame_max: u32) -> Result<Option<Bytes>, FrameError> {
    if buf.len() < 4 {
        return Ok(None);
    }
    let length = BigEndian::read_u32(&buf[..4]);
    if u64::from(length) + 4 > u64::from(frame_max) {
        return Err(FrameError::TooLong {
            length,
            max: frame_max,
        });
    }
    if length < 4 {
        return Err(FrameError::TooShort { length });
    }
    if buf.len() >= PREFIX_LEN {
        let word = BigEndian::read_u32(&buf[4..PREFIX_LEN]);
        check_type_word(word, length)?;
    }
    let total = length as usize + 4;
    if buf.len() < total {
        // Nothing is reserved for the announced length: the buffer grows as bytes arrive.
        return Ok(None);
    }
    buf.advance(4);
    Ok(Some(buf.split_to(length as usize).freeze()))
}

/// (serialize type, header length) of the second word, checked against the frame length.
pub fn check_type_word(word: u32, length: u32) -> Result<(u8, usize), FrameError> {
    let serialize_type = (word >> 24) as u8;
    let header = word & 0x00FF_FFFF;
    if serialize_type > 1 {
        return Err(FrameError::BadSerializeType(serialize_type));
    }
    if header > length - 4 {
        return Err(FrameError::BadHeaderLength { header, length });
    }
    Ok((serialize_type, header as usize))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(header: &[u8], body: &[u8], serialize_type: u8) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&((4 + header.len() + body.len()) as u32).to_be_bytes());
        v.extend_from_slice(&(((serialize_type as u32) << 24) | header.len() as u32).to_be_bytes());
        v.extend_from_slice(header);
        v.extend_from_slice(body);
        v
    }

    #[test]
    fn a_frame_split_across_reads_is_cut_once_complete() {
        let bytes = frame(b"{}", b"body", 0);
        let mut buf = BytesMut::new();
        for (i, b) in bytes.iter().enumerate() {
            buf.extend_from_slice(&[*b]);
            let got = next_frame(&mut buf, 1 << 24).unwrap();
            if i + 1 < bytes.len() {
                assert!(got.is_none());
            } else {
                assert_eq!(&got.unwrap()[..], &bytes[4..]);
            }
        }
        assert!(buf.is_empty());
    }

    #[test]
    fn two_frames_in_one_read_come_out_in_order() {
        let mut bytes = frame(b"{}", b"a", 0);
        bytes.extend(frame(b"{}", b"bb", 1));
        let mut buf = BytesMut::from(&bytes[..]);
        let first = next_frame(&mut buf, 1 << 24).unwrap().unwrap();
        let second = next_frame(&mut buf, 1 << 24).unwrap().unwrap();
        assert_eq!(first.len(), 7);
        assert_eq!(second.len(), 8);
        assert!(next_frame(&mut buf, 1 << 24).unwrap().is_none());
    }

    #[test]
    fn oversized_length_is_refused_before_the_body_arrives() {
        let mut buf = BytesMut::from(&[0xFFu8, 0xFF, 0xFF, 0xF0][..]);
        assert!(matches!(
            next_frame(&mut buf, 16 << 20),
            Err(FrameError::TooLong { .. })
        ));
        // The limit counts the length prefix, as Netty's decoder does.
        let mut exact = BytesMut::from(&((16u32 << 20) - 4).to_be_bytes()[..]);
        assert!(next_frame(&mut exact, 16 << 20).unwrap().is_none());
        let mut over = BytesMut::from(&((16u32 << 20) - 3).to_be_bytes()[..]);
        assert!(next_frame(&mut over, 16 << 20).is_err());
    }

    #[test]
    fn impossible_header_length_and_type_are_refused() {
        let mut buf = BytesMut::new();
        buf.extend_from_slice(&8u32.to_be_bytes());
        buf.extend_from_slice(&5u32.to_be_bytes()); // header 5 > 8 - 4
        assert!(matches!(
            next_frame(&mut buf, 1 << 24),
            Err(FrameError::BadHeaderLength { .. })
        ));
        let mut buf = BytesMut::new();
        buf.extend_from_slice(&8u32.to_be_bytes());
        buf.extend_from_slice(&(2u32 << 24).to_be_bytes());
        assert_eq!(
            next_frame(&mut buf, 1 << 24),
            Err(FrameError::BadSerializeType(2))
        );
        let mut buf = BytesMut::from(&2u32.to_be_bytes()[..]);
        assert_eq!(
            next_frame(&mut buf, 1 << 24),
            Err(FrameError::TooShort { length: 2 })
        );
    }
}
