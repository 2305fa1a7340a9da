//! The checks every fuzz input goes through, shared by the cargo-fuzz targets
//! (`tests/fuzz/fuzz_targets/*.rs`) and the stable CI harness (`tests/fuzz_props.rs`), so both
//! hold the decoders to the same promises.
//!
//! Each `check_*` feeds peer-controlled bytes to one decoder and panics only when a promise is
//! broken: a decoder may answer `Ok` or `Err`, but must not panic, must keep what it builds
//! within its limits, and where an encoder exists, what it decoded must survive a round trip
//! through that encoder. A panic here is the crash the fuzzer reports.
#![allow(dead_code)]

use bytes::{Bytes, BytesMut};
use rmq_namesrv::config::{parse_properties, NamesrvConfig, SetOutcome};
use rmq_namesrv::remoting::command::{DecodeLimits, RemotingCommand, SerializeType};
use rmq_namesrv::remoting::frame::{self, FrameError};
use rmq_namesrv::remoting::json::{self, Value};
use rmq_namesrv::route::model::{self, BodyLimits, Dialect, TopicRouteData};

/// The frame limit the fuzzers cut with: small enough that mutated inputs hold whole frames.
pub const FUZZ_FRAME_MAX: u32 = 1 << 20;

/// The server's decode limits (its defaults).
pub fn limits() -> DecodeLimits {
    DecodeLimits::default()
}

/// A byte stream as a connection would deliver it: cut every whole frame, decode each one,
/// stop at the first error (the server closes the connection there).
pub fn check_frame_stream(data: &[u8]) {
    let mut buf = BytesMut::from(data);
    loop {
        let before = buf.len();
        match frame::next_frame(&mut buf, FUZZ_FRAME_MAX) {
            Ok(Some(f)) => {
                assert!(f.len() >= 4, "a cut frame holds at least its type word");
                assert_eq!(before - buf.len(), f.len() + 4, "cut consumes length + 4");
                check_decoded(f);
            }
            Ok(None) => {
                assert_eq!(buf.len(), before, "an incomplete frame is left in place");
                if buf.len() >= 4 {
                    let claimed = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
                    assert!(u64::from(claimed) + 4 <= u64::from(FUZZ_FRAME_MAX));
                }
                return;
            }
            Err(e) => {
                // Errors must be the ones the first eight bytes justify.
                match e {
                    FrameError::TooLong { .. }
                    | FrameError::TooShort { .. }
                    | FrameError::BadHeaderLength { .. }
                    | FrameError::BadSerializeType(_) => {}
                }
                let _ = e.to_string();
                return;
            }
        }
    }
}

/// Decodes one frame (without its length prefix) and checks what came out.
pub fn check_decoded(f: Bytes) {
    let len = f.len();
    let limits = limits();
    match RemotingCommand::decode(f.clone(), &limits) {
        Ok(cmd) => {
            assert!(cmd.ext_fields.len() <= limits.max_ext_fields);
            assert!(
                cmd.body.len() + 4 <= len,
                "the body is a slice of the frame"
            );
            assert!(f.ends_with(&cmd.body), "the body is the frame's tail");
            let text: usize = cmd
                .ext_fields
                .iter()
                .map(|(k, v)| k.len() + v.len())
                .sum::<usize>()
                + cmd.remark.as_ref().map_or(0, String::len);
            // Strings decoded from a header stay within a small multiple of it: the only
            // growth is a non-string ext value re-rendered as JSON text, where a raw control
            // byte (accepted, as fastjson does) becomes a 6-byte \u00XX escape.
            assert!(text <= 6 * len + 64, "ext text {text} from {len} bytes");
            let _ = cmd.is_oneway();
            let _ = cmd.is_response();
            reencode_round_trip(&cmd);
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
}

/// Whatever the server decoded, it can encode again and decode to the same fields.
fn reencode_round_trip(cmd: &RemotingCommand) {
    use rmq_namesrv::remoting::codes::LANGUAGES;
    use rmq_namesrv::remoting::command::{encode_frame, Header};
    let language = LANGUAGES
        .get(usize::from(cmd.language))
        .copied()
        .unwrap_or("JAVA");
    // The binary codec carries code and version as int16 and lengths as int32; only values
    // that fit are comparable after a round trip.
    if cmd.serialize_type == SerializeType::RocketMq
        && (i16::try_from(cmd.code).is_err() || i16::try_from(cmd.version).is_err())
    {
        return;
    }
    let header = Header {
        code: cmd.code,
        language,
        version: cmd.version,
        opaque: cmd.opaque,
        flag: cmd.flag,
        remark: cmd.remark.as_deref(),
    };
    let ext = cmd.ext_fields.iter();
    let mut out = Vec::new();
    encode_frame(&mut out, cmd.serialize_type, &header, Some(ext), &cmd.body);
    let mut buf = BytesMut::from(&out[..]);
    let frame_max = u32::try_from(out.len() + 16).unwrap_or(u32::MAX);
    let f = frame::next_frame(&mut buf, frame_max)
        .expect("re-encoded frame cuts")
        .expect("re-encoded frame is whole");
    let limits = DecodeLimits {
        max_header_len: 16 << 20,
        max_ext_fields: 1 << 16,
        ..DecodeLimits::default()
    };
    let again = RemotingCommand::decode(f, &limits).expect("re-encoded frame decodes");
    assert_eq!(again.code, cmd.code);
    assert_eq!(again.version, cmd.version);
    assert_eq!(again.opaque, cmd.opaque);
    assert_eq!(again.flag, cmd.flag);
    assert_eq!(again.body, cmd.body);
    if usize::from(cmd.language) < LANGUAGES.len() {
        assert_eq!(again.language, cmd.language);
    }
    assert_eq!(again.remark, cmd.remark);
    // The binary codec drops pairs with an empty key or value (Java reads them as null).
    let expected: Vec<(&str, &str)> = cmd
        .ext_fields
        .iter()
        .filter(|(k, v)| {
            cmd.serialize_type == SerializeType::Json || (!k.is_empty() && !v.is_empty())
        })
        .collect();
    // A JSON header with a repeated ext key keeps every pair, in order, both times.
    let got: Vec<(&str, &str)> = again.ext_fields.iter().collect();
    assert_eq!(got, expected);
}

/// `data` as the header of a frame whose type byte is `serialize_type`.
pub fn header_frame(serialize_type: u8, header: &[u8], body: &[u8]) -> Option<Bytes> {
    if header.len() > 0x00FF_FFFF {
        return None;
    }
    let mut f = Vec::with_capacity(4 + header.len() + body.len());
    let word = (u32::from(serialize_type) << 24) | header.len() as u32;
    f.extend_from_slice(&word.to_be_bytes());
    f.extend_from_slice(header);
    f.extend_from_slice(body);
    Some(Bytes::from(f))
}

/// The JSON header decoder on `data` as a whole header (type byte 0).
pub fn check_json_header(data: &[u8]) {
    if let Some(f) = header_frame(0, data, b"B") {
        check_decoded(f);
    }
}

/// The ROCKETMQ binary header decoder on `data` as a whole header (type byte 1).
pub fn check_binary_header(data: &[u8]) {
    if let Some(f) = header_frame(1, data, b"B") {
        check_decoded(f);
    }
}

/// The fastjson-dialect reader: no panic, depth and string limits hold, and a value it read
/// writes out as JSON that reads back to the same value.
pub fn check_json(data: &[u8]) {
    let limits = json::Limits {
        max_depth: 32,
        max_string_len: 4096,
    };
    let Ok(v) = json::parse_with(data, &limits) else {
        return;
    };
    check_value_limits(&v, 1, &limits);
    let mut out = Vec::new();
    json::write_value(&mut out, &v);
    let generous = json::Limits {
        max_depth: 64,
        max_string_len: 1 << 20,
    };
    let again = json::parse_with(&out, &generous).unwrap_or_else(|e| {
        panic!(
            "written JSON does not read back ({e}): {:?}",
            String::from_utf8_lossy(&out)
        )
    });
    assert!(
        same_value(&v, &again),
        "round trip changed the value: {v:?} -> {again:?}"
    );
    let _ = v.to_text();
}

fn check_value_limits(v: &Value, depth: usize, limits: &json::Limits) {
    match v {
        Value::Str(s) => assert!(s.len() <= limits.max_string_len),
        Value::Array(items) => {
            assert!(depth <= limits.max_depth, "depth {depth}");
            for item in items {
                check_value_limits(item, depth + 1, limits);
            }
        }
        Value::Object(members) => {
            assert!(depth <= limits.max_depth, "depth {depth}");
            for (k, item) in members {
                assert!(k.len() <= limits.max_string_len);
                check_value_limits(item, depth + 1, limits);
            }
        }
        _ => {}
    }
}

/// Equality where a non-finite float (written as null) matches null.
fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Float(f), Value::Null) if !f.is_finite() => true,
        (Value::Float(x), Value::Float(y)) => x == y || (x.is_nan() && y.is_nan()),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same_value(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y)
                    .all(|((kp, p), (kq, q))| kp == kq && same_value(p, q))
        }
        _ => a == b,
    }
}

/// `data` as a zlib stream of stored (uncompressed) deflate blocks: a valid stream for the
/// inflater at almost no cost, so the fuzzer spends its time in the layout parser behind it.
pub fn zlib_stored(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() + data.len() / 65535 * 5 + 16);
    out.extend_from_slice(&[0x78, 0x01]);
    let mut chunks = data.chunks(65535).peekable();
    if chunks.peek().is_none() {
        out.extend_from_slice(&[1, 0, 0, 0xFF, 0xFF]);
    }
    while let Some(chunk) = chunks.next() {
        out.push(u8::from(chunks.peek().is_none()));
        let len = chunk.len() as u16;
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(!len).to_le_bytes());
        out.extend_from_slice(chunk);
    }
    let (mut a, mut b) = (1u32, 0u32);
    for &byte in data {
        a = (a + u32::from(byte)) % 65521;
        b = (b + a) % 65521;
    }
    out.extend_from_slice(&((b << 16) | a).to_be_bytes());
    out
}

/// Versions that change how a registration body is read (old wrapper, 4.x, 5.x mappings).
const VERSIONS: [i32; 8] = [-1, 0, 36, 37, 400, 412, 413, 479];

/// The registration body decoder. The first byte picks the mode: bits 0-2 the version,
/// bit 3 the `compressed` flag, bit 4 "wrap the rest in a zlib stream first" so the fuzzer reaches the
/// binary layout behind zlib without having to forge a zlib stream.
pub fn check_register_body(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let version = VERSIONS[usize::from(mode & 7)];
    let compressed = mode & 8 != 0;
    let limits = BodyLimits::default();
    let deflated;
    let body: &[u8] = if mode & 16 != 0 {
        deflated = zlib_stored(rest);
        &deflated
    } else {
        rest
    };
    let Ok(decoded) = model::decode_register_body(
        body,
        compressed || mode & 16 != 0,
        version,
        &limits,
        &mut Default::default(),
    ) else {
        return;
    };
    assert!(version >= 0, "a negative version is refused");
    assert!(decoded.topics.len() <= limits.max_topics);
    assert!(decoded.mappings.len() <= limits.max_topics);
    // What was decoded re-encodes (as a 5.x broker would send it) and decodes the same.
    let mut json_body = Vec::new();
    model::encode_register_body_json(&decoded, &mut json_body);
    let again =
        model::decode_register_body(&json_body, false, 479, &limits, &mut Default::default())
            .unwrap_or_else(|e| {
                panic!(
                    "re-encoded JSON body does not decode ({e}): {}",
                    String::from_utf8_lossy(&json_body)
                )
            });
    assert_eq!(again.data_version, decoded.data_version);
    assert_eq!(again.topics, decoded.topics);
    assert_eq!(again.mappings.len(), decoded.mappings.len());
    let _ = rmq_namesrv::checksum::crc32(body);
    let _ = rmq_namesrv::checksum::fingerprint(body);
}

/// The route-side body decoders (what the client and tools read): TopicRouteData in either
/// dialect, ClusterInfo, DataVersion, TopicList, KVTable. A decoded route or cluster info
/// re-encodes and decodes to the same value.
pub fn check_models(data: &[u8]) {
    if let Ok(route) = TopicRouteData::decode(data) {
        for dialect in [Dialect::Standard, Dialect::Legacy] {
            let mut out = Vec::new();
            route.encode(dialect, &mut out);
            let again = TopicRouteData::decode(&out).unwrap_or_else(|e| {
                panic!(
                    "re-encoded route ({dialect:?}) does not decode ({e}): {}",
                    String::from_utf8_lossy(&out)
                )
            });
            assert_eq!(
                normalized(again),
                normalized(route.clone()),
                "route round trip ({dialect:?})"
            );
        }
    }
    if let Ok(info) = model::ClusterInfo::decode(data) {
        let mut out = Vec::new();
        info.encode(&mut out);
        let again = model::ClusterInfo::decode(&out).unwrap_or_else(|e| {
            panic!(
                "re-encoded cluster info does not decode ({e}): {}",
                String::from_utf8_lossy(&out)
            )
        });
        assert_eq!(again, info, "cluster info round trip");
    }
    if let Ok(dv) = model::DataVersion::decode(data) {
        let mut out = Vec::new();
        dv.encode(&mut out);
        assert_eq!(model::DataVersion::decode(&out).ok(), Some(dv));
    }
    if let Ok((topics, broker)) = model::decode_topic_list(data) {
        let mut out = Vec::new();
        model::encode_topic_list(
            topics.iter().map(String::as_str),
            broker.as_deref(),
            &mut out,
        );
        let (t2, b2) = model::decode_topic_list(&out).expect("re-encoded topic list decodes");
        assert_eq!((t2, b2), (topics, broker));
    }
    if let Ok(table) = model::decode_kv_table(data) {
        let mut out = Vec::new();
        encode_kv_table(
            table.iter().map(|(k, v)| (k.as_str(), v.as_str())),
            &mut out,
        );
        let again = model::decode_kv_table(&out).expect("re-encoded KV table decodes");
        assert_eq!(again, table);
    }
}

/// A route with its map-like lists in key order: the standard dialect writes maps sorted
/// (as Java's does), so only order may change in a round trip.
fn normalized(mut route: TopicRouteData) -> TopicRouteData {
    if let Some(mappings) = route.topic_queue_mapping_by_broker.as_mut() {
        mappings.sort_by(|a, b| a.0.cmp(&b.0));
        for (_, info) in mappings.iter_mut() {
            info.curr_id_map.sort();
        }
    }
    route
}

/// java.util.Properties parsing, then every pair through `NamesrvConfig::set`; a config that
/// took them writes a file that parses back to the same config (what a restart reads).
pub fn check_properties(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let Ok(pairs) = parse_properties(&text) else {
        return;
    };
    assert!(pairs.len() <= text.len() + 1);
    let mut config = NamesrvConfig::default();
    for (key, value) in &pairs {
        match config.set(key, value) {
            SetOutcome::Applied | SetOutcome::Unknown | SetOutcome::Invalid(_) => {}
        }
    }
    let written = config.to_properties_text();
    let reread = parse_properties(&written)
        .unwrap_or_else(|e| panic!("written config does not parse ({e}): {written:?}"));
    let mut again = NamesrvConfig::default();
    for (key, value) in &reread {
        if let SetOutcome::Invalid(reason) = again.set(key, value) {
            panic!("written config has a value set refuses ({reason}): {key}={value:?}");
        }
    }
    assert_eq!(
        again.to_properties_text(),
        written,
        "config does not survive a write and re-read"
    );
}

/// KVTable `{"table":{k:v}}` as the server's KV store writes it.
pub fn encode_kv_table<'a>(entries: impl Iterator<Item = (&'a str, &'a str)>, out: &mut Vec<u8>) {
    let mut o = json::Seq::object(out);
    let mut table = json::Seq::object(o.field("table"));
    for (k, v) in entries {
        json::write_str(table.key(k), v);
    }
    table.end();
    o.end();
}
