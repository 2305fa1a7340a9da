//! The fast path of the JSON header decoder: a header in the exact shape Java's fastjson
//! writes it (compact, double-quoted, no escapes, integers and strings only, ext fields all
//! strings), read in one pass ([`super::plain`]) straight into a [`RemotingCommand`].
//!
//! Heartbeats (904, 322) and route lookups are a few hundred bytes of header and almost no
//! work, so building the general reader's tape and walking it was a third of their cost.
//! Anything outside that shape (whitespace, single quotes, bare keys, escapes, nulls, nested
//! values, numbers out of range, invalid UTF-8, a limit reached) makes this return `None`, and
//! the general decoder reads the header as before, with its coercions and its errors: the fast
//! path never decides a header is bad, and what it accepts decodes to the same command (a test
//! checks both paths on every header it accepts).

use super::codes;
use super::command::{empty_command, DecodeLimits, ExtFields, RemotingCommand, SerializeType};
use super::plain::PlainReader;
use bytes::Bytes;
use std::ops::Range;

/// Reads `header` if it has the plain shape; `None` sends it to the general decoder.
/// The header is `frame[at]`; ext fields keep a slice of the frame (a reference count).
pub(super) fn decode(
    frame: &Bytes,
    at: Range<usize>,
    limits: &DecodeLimits,
) -> Option<RemotingCommand> {
    let header = frame.get(at.clone())?;
    let mut r = PlainReader::new(header, limits.json.max_string_len)?;
    if let Some(cmd) = java_layout(&mut r, frame, &at, limits) {
        return Some(cmd);
    }
    r.rewind(0);
    let mut cmd = empty_command(SerializeType::Json);
    r.members(|r, key| {
        match key {
            "code" => cmd.code = r.int()?,
            "version" => cmd.version = r.int()?,
            "opaque" => cmd.opaque = r.int()?,
            "flag" => cmd.flag = r.int()?,
            "language" => cmd.language = codes::language_by_name(r.string()?).unwrap_or(255),
            "remark" => {
                let remark = r.string()?;
                cmd.remark = (!remark.is_empty()).then(|| remark.to_owned());
            }
            "extFields" => {
                cmd.ext_fields = ExtFields::sharing(frame.slice(at.clone()), r.text()?)?;
                ext_fields(r, &mut cmd.ext_fields, limits.max_ext_fields)?
            }
            // Ignored members, as in the general decoder; only plain values are skipped here.
            _ => match r.peek()? {
                b'"' => drop(r.string()?),
                _ => drop(r.int()?),
            },
        }
        Some(())
    })?;
    r.at_end().then_some(cmd)
}

/// The header exactly as Java's fastjson writes a request's (members in alphabetical order,
/// `remark` only when set): literals for the keys, so no key is scanned or matched. Anything
/// else is `None`, and the member loop of [`decode`] reads it from the start.
fn java_layout(
    r: &mut PlainReader<'_>,
    frame: &Bytes,
    at: &Range<usize>,
    limits: &DecodeLimits,
) -> Option<RemotingCommand> {
    let mut cmd = empty_command(SerializeType::Json);
    r.literal(b"{\"code\":").then_some(())?;
    cmd.code = r.int()?;
    if r.literal(b",\"extFields\":") {
        cmd.ext_fields = ExtFields::sharing(frame.slice(at.clone()), r.text()?)?;
        ext_fields(r, &mut cmd.ext_fields, limits.max_ext_fields)?;
    }
    r.literal(b",\"flag\":").then_some(())?;
    cmd.flag = r.int()?;
    r.literal(b",\"language\":").then_some(())?;
    cmd.language = codes::language_by_name(r.string()?).unwrap_or(255);
    r.literal(b",\"opaque\":").then_some(())?;
    cmd.opaque = r.int()?;
    if r.literal(b",\"remark\":") {
        let remark = r.string()?;
        cmd.remark = (!remark.is_empty()).then(|| remark.to_owned());
    }
    r.literal(b",\"serializeTypeCurrentRPC\":\"JSON\",\"version\":")
        .then_some(())?;
    cmd.version = r.int()?;
    r.expect(b'}')?;
    r.at_end().then_some(cmd)
}

/// `{"k":"v",...}` with string values, replacing any earlier `extFields` as the general
/// decoder does (the last repeated key wins within it). The pairs stay in the header's bytes
/// (`fields` shares them): plain strings read as they are written.
fn ext_fields(r: &mut PlainReader<'_>, fields: &mut ExtFields, max: usize) -> Option<()> {
    r.expect(b'{')?;
    if r.eat(b'}') {
        return Some(());
    }
    let mut members = 0;
    loop {
        // Counted like the general decoder counts them (repeated keys included).
        members += 1;
        if members > max {
            return None;
        }
        let key = r.string_span()?;
        r.expect(b':')?;
        let value = r.string_span()?;
        fields.put_span(key, value);
        if !r.eat(b',') {
            break;
        }
    }
    r.expect(b'}')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remoting::command::decode_json_header_general;

    const PLAIN: &[&str] = &[
        r#"{"code":904,"extFields":{"brokerName":"broker-a","brokerAddr":"10.0.0.1:10911","clusterName":"DefaultCluster","brokerId":"0"},"flag":0,"language":"JAVA","opaque":12,"serializeTypeCurrentRPC":"JSON","version":479}"#,
        r#"{"code":105,"extFields":{"topic":"TopicTest"},"flag":0,"language":"JAVA","opaque":-5,"remark":"","serializeTypeCurrentRPC":"JSON","version":479}"#,
        r#"{"code":0,"flag":1,"language":"RUST","opaque":2147483647,"remark":"ok","version":-2147483648}"#,
        r#"{"code":1,"extFields":{"a":"1","a":"2","b":"é"},"extFields":{"c":"x","d":""},"code":2}"#,
        r#"{"language":"NOPE","opaque":0,"unknown":"u","other":7}"#,
        r#"{"extFields":{}}"#,
        r#"{}"#,
    ];

    /// Whatever the fast path accepts, the general decoder decodes to the same command.
    fn check(header: &[u8], limits: &DecodeLimits) -> bool {
        let Some(fast) = decode(&Bytes::copy_from_slice(header), 0..header.len(), limits) else {
            return false;
        };
        let general = decode_json_header_general(header, limits);
        assert_eq!(
            general.as_ref(),
            Ok(&fast),
            "{:?}",
            String::from_utf8_lossy(header)
        );
        true
    }

    #[test]
    fn java_shaped_headers_take_the_fast_path_and_decode_as_in_general() {
        for h in PLAIN {
            assert!(check(h.as_bytes(), &DecodeLimits::default()), "{h}");
        }
        let header = Bytes::from_static(PLAIN[0].as_bytes());
        let cmd = decode(&header, 0..header.len(), &DecodeLimits::default()).unwrap();
        assert_eq!(
            (cmd.code, cmd.opaque, cmd.version, cmd.language),
            (904, 12, 479, 0)
        );
        assert_eq!(cmd.ext_fields.len(), 4);
    }

    #[test]
    fn java_written_headers_take_the_layout_path_and_others_the_member_loop() {
        let limits = DecodeLimits::default();
        let layout = |h: &str| {
            let header = Bytes::copy_from_slice(h.as_bytes());
            let mut r = PlainReader::new(&header, limits.json.max_string_len).unwrap();
            java_layout(&mut r, &header, &(0..header.len()), &limits)
        };
        for h in &PLAIN[..2] {
            let header = Bytes::copy_from_slice(h.as_bytes());
            assert_eq!(layout(h), decode(&header, 0..h.len(), &limits), "{h}");
            assert!(layout(h).is_some(), "{h}");
        }
        for h in &PLAIN[2..] {
            assert!(layout(h).is_none(), "{h}");
        }
    }

    #[test]
    fn every_mutation_the_fast_path_accepts_decodes_the_same_in_general() {
        let tight = DecodeLimits {
            max_ext_fields: 1,
            json: crate::remoting::json::Limits {
                max_string_len: 3,
                ..DecodeLimits::default().json
            },
            ..DecodeLimits::default()
        };
        let bytes = [
            b' ', b'"', b'\\', b'0', b'1', b'-', b'.', b'e', b',', b'}', b'{', b':', b'n', b'\'',
            b'[', 0xC3, 0xFF,
        ];
        let (mut accepted, mut refused) = (0, 0);
        for h in PLAIN {
            let h = h.as_bytes();
            for v in crate::remoting::plain::mutations(h, &bytes) {
                for limits in [DecodeLimits::default(), tight] {
                    if check(&v, &limits) {
                        accepted += 1;
                    } else {
                        refused += 1;
                    }
                }
            }
        }
        // Both paths were exercised.
        assert!(accepted > 500 && refused > 5000, "{accepted} {refused}");
    }
}
