//! The generator's side of the wire: request frames prepared once before the timed loop,
//! stamped with a per-request opaque in place, and a response-header scanner that pulls
//! `code`, `opaque` and `flag` out of either header codec without allocating.
//!
//! Requests are typed requests encoded by the library (`request::Encoded`), framed by its
//! encoder. Opaques are `OPAQUE_BASE + seq` with `seq < 10^9`, so in a JSON header they are
//! always ten ASCII digits and stamping one is ten byte stores, no formatting; where they sit
//! is found by encoding the frame with two opaques whose every digit differs. The scanner
//! matches JSON members by the names the library's encoder writes ([`head_names`]): neither
//! restates the remoting codec's layout.

use rmq_namesrv::remoting::command::{encode_frame, Header, SerializeType};
use rmq_namesrv::request::Encoded;
use std::sync::OnceLock;

/// First opaque a prepared frame carries; `OPAQUE_BASE + seq` stays ten digits wide.
pub const OPAQUE_BASE: i32 = 1_000_000_000;
/// Sequence numbers wrap here so that the opaque keeps its width.
pub const SEQ_WRAP: u32 = 1_000_000_000;
/// An opaque of OPAQUE_BASE's width whose every digit (and byte) differs from OPAQUE_BASE's.
const OPAQUE_PROBE: i32 = 2_111_111_111;

/// One request frame, ready to be copied into a send buffer.
#[derive(Clone, Debug)]
pub struct Template {
    pub bytes: Vec<u8>,
    /// Offset of the opaque inside `bytes` (ten digits for JSON, four bytes BE for binary).
    opaque_at: usize,
    binary: bool,
}

fn frame(
    serialize_type: SerializeType,
    request: &Encoded<'_>,
    version: i32,
    language: &str,
    opaque: i32,
) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(128 + request.body.len());
    let header = Header {
        code: request.code,
        language,
        version,
        opaque,
        flag: 0,
        remark: None,
    };
    encode_frame(
        &mut bytes,
        serialize_type,
        &header,
        Some(request.pairs()),
        &request.body,
    );
    bytes
}

impl Template {
    /// Encodes `request` with opaque `OPAQUE_BASE` and remembers where the opaque sits.
    pub fn new(
        serialize_type: SerializeType,
        request: &Encoded<'_>,
        version: i32,
        language: &str,
    ) -> Template {
        let bytes = frame(serialize_type, request, version, language, OPAQUE_BASE);
        let probe = frame(serialize_type, request, version, language, OPAQUE_PROBE);
        // The opaque is the only difference: its first byte is the first that differs.
        let opaque_at = bytes
            .iter()
            .zip(&probe)
            .position(|(a, b)| a != b)
            .unwrap_or(0);
        Template {
            bytes,
            opaque_at,
            binary: serialize_type == SerializeType::RocketMq,
        }
    }

    /// Appends this frame to `out` carrying opaque `OPAQUE_BASE + seq`.
    #[inline]
    pub fn write_to(&self, out: &mut Vec<u8>, seq: u32) {
        let start = out.len();
        out.extend_from_slice(&self.bytes);
        let at = start + self.opaque_at;
        let opaque = OPAQUE_BASE as u32 + (seq % SEQ_WRAP);
        if self.binary {
            out[at..at + 4].copy_from_slice(&opaque.to_be_bytes());
        } else {
            write_digits(&mut out[at..at + 10], opaque);
        }
    }
}

/// Writes `v` as exactly `dst.len()` decimal digits (left-padded with zeros).
#[inline]
pub fn write_digits(dst: &mut [u8], mut v: u32) {
    for d in dst.iter_mut().rev() {
        *d = b'0' + (v % 10) as u8;
        v /= 10;
    }
}

/// What the generator needs from a response header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    pub code: i32,
    pub opaque: i32,
    pub flag: i32,
}

/// Reads `code`, `opaque` and `flag` from a frame without its length prefix (type word,
/// header, body). `None` when the header is not one of the two codecs.
pub fn scan_head(frame: &[u8]) -> Option<Head> {
    if frame.len() < 4 {
        return None;
    }
    let word = u32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]);
    let header_len = (word & 0x00FF_FFFF) as usize;
    let header = frame.get(4..4 + header_len)?;
    match word >> 24 {
        1 => {
            if header.len() < 13 {
                return None;
            }
            Some(Head {
                code: i32::from(i16::from_be_bytes([header[0], header[1]])),
                opaque: i32::from_be_bytes([header[5], header[6], header[7], header[8]]),
                flag: i32::from_be_bytes([header[9], header[10], header[11], header[12]]),
            })
        }
        0 => scan_json_head(header),
        _ => None,
    }
}

/// The JSON header's member names for `code`, `opaque` and `flag`, as the library's encoder
/// writes them (a header with three distinct values is encoded once and the name before each
/// value read back), as [`key_word`]s.
struct HeadNames {
    code: u64,
    opaque: u64,
    flag: u64,
    /// Bit n set when a name has n bytes: other keys are passed over without reading them.
    lengths: u16,
}

/// The key `h[start..start + len]` as one word, when it has 1 to 8 bytes (the three names the
/// scanner reads do), so that a key is compared with one load and integer compares, no call:
/// the scanner runs once per response, in the generator's hot loop, and should cost what
/// matching string literals costs (compare instructions per request under callgrind against
/// `rmq-bench canned` when changing it). Key bytes are never 0 (JSON escapes control
/// characters), so no key's word is 0 and a word's length is implied by its bytes.
#[inline]
fn key_word(h: &[u8], start: usize, len: usize) -> Option<u64> {
    if len == 0 || len > 8 {
        return None;
    }
    // A key inside a header is followed by at least `":0}`: 8 bytes can be read at once.
    let bytes: [u8; 8] = match h.get(start..start + 8) {
        Some(eight) => eight.try_into().ok()?,
        None => {
            let mut padded = [0u8; 8];
            padded[..len].copy_from_slice(h.get(start..start + len)?);
            padded
        }
    };
    Some(u64::from_le_bytes(bytes) & (u64::MAX >> (64 - 8 * len)))
}

fn head_names() -> &'static HeadNames {
    static NAMES: OnceLock<HeadNames> = OnceLock::new();
    NAMES.get_or_init(|| {
        let (code, opaque, flag) = (1_234_567, 1_357_913, 1_765_432);
        let header = Header {
            code,
            language: "JAVA",
            version: 0,
            opaque,
            flag,
            remark: None,
        };
        let mut bytes = Vec::new();
        encode_frame(
            &mut bytes,
            SerializeType::Json,
            &header,
            None::<[(&str, &str); 0]>,
            b"",
        );
        let names = [code, opaque, flag].map(|v| member_name_before(&bytes, v).unwrap_or_default());
        // 0 matches no key: a name that is not found (or longer than 8 bytes) is never read.
        let [code, opaque, flag] = names
            .each_ref()
            .map(|n| key_word(n, 0, n.len()).unwrap_or(0));
        HeadNames {
            code,
            opaque,
            flag,
            lengths: names
                .iter()
                .fold(0, |bits, n| bits | 1u16 << n.len().min(15)),
        }
    })
}

/// The name of the JSON member whose value is `value` (`"name":value`) in `text`.
fn member_name_before(text: &[u8], value: i32) -> Option<Vec<u8>> {
    let needle = format!(":{value}");
    let colon = text
        .windows(needle.len())
        .position(|w| w == needle.as_bytes())?;
    let close = colon.checked_sub(1).filter(|&i| text[i] == b'"')?;
    let open = text[..close].iter().rposition(|&b| b == b'"')?;
    Some(text[open + 1..close].to_vec())
}

/// Walks the top level of a JSON header object: strings are skipped with their escapes,
/// nested objects by depth, and only the three integer members at depth 1 are read.
fn scan_json_head(h: &[u8]) -> Option<Head> {
    let names = head_names();
    let mut head = Head {
        code: 0,
        opaque: 0,
        flag: 0,
    };
    let mut seen = 0u8;
    let mut i = 0;
    let mut depth = 0usize;
    // Key of the depth-1 member whose value comes next.
    let mut key: Option<(usize, usize)> = None;
    let mut expect_key = false;
    while i < h.len() {
        match h[i] {
            b'"' => {
                let start = i + 1;
                i += 1;
                while i < h.len() && h[i] != b'"' {
                    if h[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
                if depth == 1 && expect_key {
                    key = Some((start, i));
                    expect_key = false;
                }
            }
            b'{' | b'[' => {
                depth += 1;
                if depth == 1 {
                    expect_key = true;
                }
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            b',' if depth == 1 => {
                expect_key = true;
                key = None;
            }
            b':' if depth == 1 => {
                if let Some((s, e)) = key.take() {
                    let len = e - s;
                    let wanted = len < 16 && names.lengths & (1 << len) != 0;
                    let key = if wanted { key_word(h, s, len) } else { None };
                    let slot = match key {
                        Some(w) if w == names.code => Some((&mut head.code, 1u8)),
                        Some(w) if w == names.opaque => Some((&mut head.opaque, 2)),
                        Some(w) if w == names.flag => Some((&mut head.flag, 4)),
                        _ => None,
                    };
                    if let Some((dst, bit)) = slot {
                        let (v, next) = parse_int(h, i + 1)?;
                        *dst = v;
                        seen |= bit;
                        i = next;
                        continue;
                    }
                }
            }
            _ => {}
        }
        i += 1;
    }
    // A header without "code" is code 0 (Java's default), but one without opaque or flag
    // cannot be matched to a request.
    (seen & 6 == 6).then_some(head)
}

fn parse_int(h: &[u8], mut i: usize) -> Option<(i32, usize)> {
    while i < h.len() && h[i] == b' ' {
        i += 1;
    }
    let neg = h.get(i) == Some(&b'-');
    if neg {
        i += 1;
    }
    let start = i;
    let mut v: i64 = 0;
    while i < h.len() && h[i].is_ascii_digit() {
        v = v * 10 + i64::from(h[i] - b'0');
        if v > i64::from(u32::MAX) {
            return None;
        }
        i += 1;
    }
    if i == start {
        return None;
    }
    let v = if neg { -v } else { v };
    Some((v as i32, i))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use rmq_namesrv::remoting::command::{DecodeLimits, RemotingCommand};
    use rmq_namesrv::request::field;

    fn decode(frame: &[u8]) -> RemotingCommand {
        RemotingCommand::decode(
            Bytes::copy_from_slice(&frame[4..]),
            &DecodeLimits::default(),
        )
        .unwrap()
    }

    #[test]
    fn stamped_json_and_binary_frames_decode_with_their_opaque() {
        // A field value that looks like the opaque must not be taken for it.
        let mut request = Encoded::new(105);
        request.put(field::TOPIC, "\"opaque\":1000000000");
        request.body = b"\"opaque\":1000000000".as_slice().into();
        for st in [SerializeType::Json, SerializeType::RocketMq] {
            let t = Template::new(st, &request, 479, "JAVA");
            for seq in [0u32, 7, 123_456_789, SEQ_WRAP - 1, SEQ_WRAP + 3] {
                let mut out = vec![9u8; 3];
                t.write_to(&mut out, seq);
                let cmd = decode(&out[3..]);
                assert_eq!(cmd.opaque as u32, OPAQUE_BASE as u32 + seq % SEQ_WRAP);
                assert_eq!(cmd.code, 105);
                assert_eq!(cmd.ext(field::TOPIC), Some("\"opaque\":1000000000"));
                let head = scan_head(&out[7..]).unwrap();
                assert_eq!(head.opaque, cmd.opaque);
                assert_eq!(head.code, 105);
            }
        }
    }

    /// What the derivations find is the protocol's layout (Java's member names, the binary
    /// header's fixed opaque offset after length words, code, language and version).
    #[test]
    fn member_names_and_the_opaque_offset_come_from_the_library_encoder() {
        let n = head_names();
        let word = |name: &[u8]| key_word(name, 0, name.len());
        assert_eq!(Some(n.code), word(b"code"));
        assert_eq!(Some(n.opaque), word(b"opaque"));
        assert_eq!(Some(n.flag), word(b"flag"));
        // Keys read the same wherever they sit in a header, near its end too.
        let h = b"{\"code\":1,\"opaque\":2,\"x\":\"flag\"}";
        assert_eq!(key_word(h, 2, 4), Some(n.code));
        assert_eq!(key_word(h, 11, 6), Some(n.opaque));
        assert_eq!(key_word(h, h.len() - 6, 4), Some(n.flag));
        assert_ne!(word(b"cod"), Some(n.code));
        assert_ne!(word(b"codex"), Some(n.code));
        assert_eq!(word(b"123456789"), None);
        let t = Template::new(SerializeType::RocketMq, &Encoded::new(904), 479, "JAVA");
        assert_eq!(t.opaque_at, 13);
    }

    #[test]
    fn json_scanner_reads_top_level_fields_only() {
        let header = br#"{"code":17,"extFields":{"opaque":"5","x":{"flag":9}},"flag":1,"language":"JAVA","opaque":42,"remark":"No topic route info in name server for the topic: T, \"code\":3","serializeTypeCurrentRPC":"JSON","version":479}"#;
        let mut frame = Vec::new();
        frame.extend_from_slice(&(header.len() as u32).to_be_bytes());
        frame.extend_from_slice(header);
        frame.extend_from_slice(b"body");
        assert_eq!(
            scan_head(&frame),
            Some(Head {
                code: 17,
                opaque: 42,
                flag: 1
            })
        );
    }

    #[test]
    fn json_scanner_accepts_negative_and_refuses_incomplete_headers() {
        let ok = br#"{"flag":1,"opaque":-5}"#;
        let mut frame = (ok.len() as u32).to_be_bytes().to_vec();
        frame.extend_from_slice(ok);
        assert_eq!(
            scan_head(&frame),
            Some(Head {
                code: 0,
                opaque: -5,
                flag: 1
            })
        );
        let bad = br#"{"code":0,"flag":1}"#;
        let mut frame = (bad.len() as u32).to_be_bytes().to_vec();
        frame.extend_from_slice(bad);
        assert_eq!(scan_head(&frame), None);
    }

    #[test]
    fn digits_are_fixed_width() {
        let mut d = [0u8; 10];
        write_digits(&mut d, 1_000_000_042);
        assert_eq!(&d, b"1000000042");
    }
}
