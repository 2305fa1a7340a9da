//! The REGISTER_BROKER body (docs/protocol.md §4): decoders checking every count and length.

use crate::remoting::codes::version::{V3_0_11, V5_0_0};
use crate::remoting::json::{self, Cursor, Field, Item, Scalar, Seq};
use std::borrow::Cow;

use super::model::{
    dedup_last_wins, err, expect_object, int_field, mappings_from_ref, string_field, string_list,
    write_str_array, DataVersion, Dialect, MappingInfo, ModelError,
};

mod scratch;

pub use scratch::DecodeScratch;

/// TopicConfig defaults (Java `TopicConfig` field initialisers).
const DEFAULT_QUEUE_NUMS: i32 = 16;
const DEFAULT_PERM: i32 = 6;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicConfig {
    pub topic_name: String,
    pub read_queue_nums: i32,
    pub write_queue_nums: i32,
    pub perm: i32,
    pub topic_sys_flag: i32,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct RegisterBody {
    pub data_version: DataVersion,
    /// (map key, config); the config's topic_name is the topic used.
    pub topics: Vec<(String, TopicConfig)>,
    /// None when absent / old-version body.
    pub filter_servers: Option<Vec<String>>,
    pub mappings: Vec<(String, MappingInfo)>,
}

#[derive(Debug, Clone, Copy)]
pub struct BodyLimits {
    pub json: json::Limits,
    pub max_topics: usize,
    pub max_inflated_len: usize,
}

impl Default for BodyLimits {
    fn default() -> Self {
        BodyLimits {
            json: json::Limits::default(),
            max_topics: 100_000,
            max_inflated_len: 16 << 20,
        }
    }
}

/// Decodes a REGISTER_BROKER body: a compressed one, or one starting with 0x78 (5.x brokers
/// mis-flag it, §4.2 TRAP), is inflated; topic names go into strings kept in `scratch`.
pub fn decode_register_body(
    body: &[u8],
    compressed: bool,
    version: i32,
    limits: &BodyLimits,
    scratch: &mut DecodeScratch,
) -> Result<RegisterBody, ModelError> {
    if version < 0 {
        return err(format!("invalid version {version}"));
    }
    match body.first() {
        None => Ok(RegisterBody::default()),
        Some(&first) if compressed || first == 0x78 => decode_compressed(body, version, limits),
        Some(_) => decode_json_body(body, version, limits, scratch),
    }
}

/// A RegisterBrokerBody (before V3_0_11 a bare wrapper), read by the cursor straight into it.
fn decode_json_body(
    body: &[u8],
    version: i32,
    limits: &BodyLimits,
    scratch: &mut DecodeScratch,
) -> Result<RegisterBody, ModelError> {
    let mut c = Cursor::checking_strings(body, &limits.json)?;
    let mut decoded = RegisterBody::default();
    expect_object(&mut c, "RegisterBrokerBody")?;
    if version < V3_0_11 {
        wrapper(&mut c, &mut decoded, limits, scratch)?;
    } else {
        c.members(|c, key| {
            match &*key {
                "filterServerList" if c.null()? => decoded.filter_servers = None,
                "filterServerList" => {
                    let list = c.document()?;
                    decoded.filter_servers = Some(string_list(list.root(), "filterServerList")?);
                }
                "topicConfigSerializeWrapper" => wrapper(c, &mut decoded, limits, scratch)?,
                _ => c.skip()?,
            }
            Ok::<_, ModelError>(())
        })?;
    }
    c.finish()?;
    Ok(decoded)
}

/// The TopicConfigSerializeWrapper at `c` (null: none), replacing what an earlier one set.
fn wrapper(
    c: &mut Cursor<'_>,
    out: &mut RegisterBody,
    limits: &BodyLimits,
    scratch: &mut DecodeScratch,
) -> Result<(), ModelError> {
    out.data_version = DataVersion::default();
    out.topics.clear();
    out.mappings.clear();
    if c.null()? {
        return Ok(());
    }
    expect_object(c, "topicConfigSerializeWrapper")?;
    c.members(|c, key| {
        match &*key {
            "dataVersion" if c.null()? => out.data_version = DataVersion::default(),
            "dataVersion" => out.data_version = DataVersion::read(c)?,
            "topicConfigTable" => out.topics = topic_table(c, limits.max_topics, scratch)?,
            "topicQueueMappingInfoMap" if c.null()? => out.mappings = Vec::new(),
            "topicQueueMappingInfoMap" => {
                let map = c.document()?;
                out.mappings = mappings_from_ref(map.root(), limits.max_topics)?;
            }
            _ => c.skip()?,
        }
        Ok(())
    })
}

/// The topicConfigTable at `c` (null: empty).
fn topic_table(
    c: &mut Cursor<'_>,
    max_topics: usize,
    scratch: &mut DecodeScratch,
) -> Result<Vec<(String, TopicConfig)>, ModelError> {
    if c.null()? {
        return Ok(Vec::new());
    }
    expect_object(c, "topicConfigTable")?;
    // A broker writes about 180 bytes per TopicConfig: sized once instead of doubling.
    let mut topics = scratch.topics((c.remaining() / 160).min(max_topics));
    let mut n = 0;
    c.members(|c, key| {
        // Past the limit the entries are only counted, for the error.
        if n >= max_topics {
            n += 1;
            return c.skip().map_err(ModelError::from);
        }
        let mark = c.mark();
        let plain_key = matches!(key, Cow::Borrowed(_)).then_some(&*key);
        match broker_layout(c, plain_key) {
            Some((name, tc)) => DecodeScratch::put(&mut topics, n, &key, name.unwrap_or(&key), tc),
            None => {
                c.rewind(mark);
                topic_config(c, &key, &mut topics, n)?;
            }
        }
        n += 1;
        Ok(())
    })?;
    if n > max_topics {
        return err(format!("too many topics ({n} > {max_topics})"));
    }
    topics.truncate(n);
    Ok(dedup_last_wins(topics))
}

/// One TopicConfig as entry `at` of `topics`: Java's defaults, the map `key` as topicName.
fn topic_config<'a>(
    c: &mut Cursor<'a>,
    key: &str,
    topics: &mut Vec<(String, TopicConfig)>,
    at: usize,
) -> Result<(), ModelError> {
    const WHAT: &str = "TopicConfig";
    if c.null()? {
        return err(format!("null TopicConfig for {key}"));
    }
    expect_object(c, WHAT)?;
    let mut fields: [Option<Item<'a>>; 5] = Default::default();
    c.members(|c, member| {
        let i = match &*member {
            "topicName" => 0,
            "readQueueNums" => 1,
            "writeQueueNums" => 2,
            "perm" => 3,
            "topicSysFlag" => 4,
            _ => return c.skip(),
        };
        fields[i] = Some(c.item()?);
        Ok(())
    })?;
    let [name, read, write, perm, sys_flag] = fields;
    let name = match name {
        Some(Item::Scalar(Scalar::Str(s))) => Some(s),
        v => string_field(v).map(Cow::Owned),
    };
    let tc = TopicConfig {
        topic_name: String::new(),
        read_queue_nums: int_field(read, DEFAULT_QUEUE_NUMS, WHAT, "readQueueNums")?,
        write_queue_nums: int_field(write, DEFAULT_QUEUE_NUMS, WHAT, "writeQueueNums")?,
        perm: int_field(perm, DEFAULT_PERM, WHAT, "perm")?,
        topic_sys_flag: int_field(sys_flag, 0, WHAT, "topicSysFlag")?,
    };
    DecodeScratch::put(topics, at, key, name.as_deref().unwrap_or(key), tc);
    Ok(())
}

/// A TopicConfig exactly as a broker's fastjson writes it, keys compared as bytes (a changed
/// registration's hot path); anything else is `None`, for [`topic_config`].
fn broker_layout<'a>(
    c: &mut Cursor<'a>,
    plain_key: Option<&str>,
) -> Option<(Option<&'a str>, TopicConfig)> {
    (c.peek() == Some(b'{') && c.open(false).ok()?).then_some(())?;
    c.literal(b"\"attributes\":{},");
    (c.literal(b"\"order\":false,\"perm\":") || c.literal(b"\"order\":true,\"perm\":"))
        .then_some(())?;
    let perm = c.plain_int()?;
    c.literal(b",\"readQueueNums\":").then_some(())?;
    let read_queue_nums = c.plain_int()?;
    c.literal(b",\"topicFilterType\":\"").then_some(())?;
    (c.literal(b"SINGLE_TAG\",\"topicName\":") || c.literal(b"MULTI_TAG\",\"topicName\":"))
        .then_some(())?;
    // A broker writes the map key again as the name: compared, not scanned.
    let name = match plain_key {
        Some(key) if c.quoted(key) => None,
        _ => Some(c.plain_str()?),
    };
    c.literal(b",\"topicSysFlag\":").then_some(())?;
    let topic_sys_flag = c.plain_int()?;
    c.literal(b",\"writeQueueNums\":").then_some(())?;
    let write_queue_nums = c.plain_int()?;
    let tc = TopicConfig {
        topic_name: String::new(),
        read_queue_nums,
        write_queue_nums,
        perm,
        topic_sys_flag,
    };
    (!c.next(false).ok()?).then_some((name, tc))
}

/// Reads the int32-BE length-prefixed parts of an inflated body, each checked against the rest.
struct PartReader<'a> {
    rest: &'a [u8],
}

impl<'a> PartReader<'a> {
    fn read_i32(&mut self, what: &str) -> Result<i32, ModelError> {
        match self.rest {
            [a, b, c, d, rest @ ..] => {
                self.rest = rest;
                Ok(i32::from_be_bytes([*a, *b, *c, *d]))
            }
            _ => err(format!("compressed body truncated at {what}")),
        }
    }

    /// A length or count at `what` (`kind`: how a negative one is named).
    fn read_len(&mut self, what: &str, kind: &str) -> Result<usize, ModelError> {
        let n = self.read_i32(what)?;
        usize::try_from(n).or_else(|_| err(format!("negative {what}{kind} in compressed body")))
    }

    /// A count within `max` and the bytes left (each item has a 4-byte length prefix).
    fn read_count(&mut self, what: &str, max: usize) -> Result<usize, ModelError> {
        let n = self.read_len(what, "")?;
        if n > max {
            return err(format!(
                "too many entries in compressed body ({what} {n} > {max})"
            ));
        }
        if n > self.rest.len() / 4 {
            return err(format!("compressed body truncated ({what} {n})"));
        }
        Ok(n)
    }

    fn read_part(&mut self, what: &str) -> Result<&'a [u8], ModelError> {
        let len = self.read_len(what, " length")?;
        if len > self.rest.len() {
            return err(format!("compressed body truncated in {what}"));
        }
        let (part, rest) = self.rest.split_at(len);
        self.rest = rest;
        Ok(part)
    }
}

fn decode_compressed(
    body: &[u8],
    version: i32,
    limits: &BodyLimits,
) -> Result<RegisterBody, ModelError> {
    // Grows step by step up to the limit, whatever the stream claims.
    let inflated =
        miniz_oxide::inflate::decompress_to_vec_zlib_with_limit(body, limits.max_inflated_len)
            .map_err(|e| match e.status {
                miniz_oxide::inflate::TINFLStatus::HasMoreOutput => ModelError(format!(
                    "compressed body inflates beyond {} bytes",
                    limits.max_inflated_len
                )),
                status => ModelError(format!("bad zlib body: {status:?}")),
            })?;
    let mut reader = PartReader { rest: &inflated };

    let dv_json = reader.read_part("dataVersion")?;
    let data_version = DataVersion::decode_with(dv_json, &limits.json)?;

    let topic_count = reader.read_count("topic count", limits.max_topics)?;
    let mut topics = Vec::with_capacity(topic_count);
    for _ in 0..topic_count {
        let line = reader.read_part("TopicConfig")?;
        let config = parse_topic_config_line(&String::from_utf8_lossy(line))?;
        topics.push((config.topic_name.clone(), config));
    }

    let filter_json = reader.read_part("filterServerList")?;
    // Java ignores a filter list it cannot parse and keeps an empty one.
    let filter_servers = match json::parse_borrowed(filter_json, &limits.json) {
        Ok(doc) if doc.root().is_null() => None,
        Ok(doc) => Some(string_list(doc.root(), "filterServerList").unwrap_or_default()),
        Err(_) => Some(Vec::new()),
    };

    let mut mappings = Vec::new();
    if version >= V5_0_0 {
        let count = reader.read_count("mapping count", limits.max_topics)?;
        mappings.reserve(count);
        for _ in 0..count {
            let part = reader.read_part("TopicQueueMappingInfo")?;
            let info = MappingInfo::from_ref(json::parse_borrowed(part, &limits.json)?.root())?;
            mappings.push((info.topic.clone(), info));
        }
    }
    Ok(RegisterBody {
        data_version,
        topics: dedup_last_wins(topics),
        filter_servers,
        mappings: dedup_last_wins(mappings),
    })
}

/// `TopicConfig.decode`: `<name> <read> <write> <perm> <filterType>[ <attributes json>]`.
fn parse_topic_config_line(line: &str) -> Result<TopicConfig, ModelError> {
    let mut tokens: Vec<&str> = line.split(' ').collect();
    while tokens.last() == Some(&"") {
        tokens.pop();
    }
    let [name, read, write, perm, filter_type, ..] = tokens.as_slice() else {
        return err(format!("bad TopicConfig line {line:?}"));
    };
    let int = |s: &str| -> Result<i32, ModelError> {
        s.parse::<i32>()
            .or_else(|_| err(format!("bad number {s:?} in TopicConfig line {line:?}")))
    };
    if *filter_type != "SINGLE_TAG" && *filter_type != "MULTI_TAG" {
        return err(format!("bad topicFilterType {filter_type:?}"));
    }
    Ok(TopicConfig {
        topic_name: (*name).to_owned(),
        read_queue_nums: int(read)?,
        write_queue_nums: int(write)?,
        perm: int(perm)?,
        topic_sys_flag: 0,
    })
}

/// The 5.x JSON body (§4.1): fastjson alphabetical, legacy dialect (currIdMap keys bare).
pub fn encode_register_body_json(body: &RegisterBody, out: &mut Vec<u8>) {
    let mut root = Seq::object(out);
    let filter_servers = body.filter_servers.iter().flatten().map(String::as_str);
    write_str_array(
        root.field("filterServerList"),
        filter_servers,
        Dialect::Legacy,
    );
    let mut wrapper = Seq::object(root.field("topicConfigSerializeWrapper"));
    body.data_version.encode(wrapper.field("dataVersion"));
    let mapping_version = DataVersion {
        timestamp: body.data_version.timestamp,
        ..DataVersion::default()
    };
    mapping_version.encode(wrapper.field("mappingDataVersion"));
    let mut table = Seq::object(wrapper.field("topicConfigTable"));
    for (key, tc) in &body.topics {
        encode_topic_config(tc, table.key(key));
    }
    table.end();
    Seq::object(wrapper.field("topicQueueMappingDetailMap")).end();
    let mut mappings = Seq::object(wrapper.field("topicQueueMappingInfoMap"));
    for (key, info) in &body.mappings {
        info.encode(mappings.key(key), Dialect::Legacy);
    }
    mappings.end();
    wrapper.end();
    root.end();
}

/// A TopicConfig as a broker's fastjson writes it: every field, alphabetical.
fn encode_topic_config(tc: &TopicConfig, out: &mut Vec<u8>) {
    let mut o = Seq::object(out);
    Seq::object(o.field("attributes")).end();
    json::write_bool(o.field("order"), false);
    json::write_i64(o.field("perm"), i64::from(tc.perm));
    json::write_i64(o.field("readQueueNums"), i64::from(tc.read_queue_nums));
    json::write_str(o.field("topicFilterType"), "SINGLE_TAG");
    json::write_str(o.field("topicName"), &tc.topic_name);
    json::write_i64(o.field("topicSysFlag"), i64::from(tc.topic_sys_flag));
    json::write_i64(o.field("writeQueueNums"), i64::from(tc.write_queue_nums));
    o.end();
}

fn push_part(out: &mut Vec<u8>, part: &[u8]) {
    push_count(out, part.len());
    out.extend_from_slice(part);
}

/// A count or length over 2 GiB is clamped, not wrapped (the receiver then reports truncation).
fn push_count(out: &mut Vec<u8>, n: usize) {
    out.extend_from_slice(&i32::try_from(n).unwrap_or(i32::MAX).to_be_bytes());
}

/// The zlib-compressed binary shape (§4.2) a broker of `version` sends.
pub fn encode_register_body_compressed(body: &RegisterBody, version: i32) -> Vec<u8> {
    let mut plain = Vec::with_capacity(64 + body.topics.len() * 48);
    let mut part = Vec::with_capacity(128);

    body.data_version.encode(&mut part);
    push_part(&mut plain, &part);

    push_count(&mut plain, body.topics.len());
    for (_, tc) in &body.topics {
        part.clear();
        part.extend_from_slice(tc.topic_name.as_bytes());
        for n in [tc.read_queue_nums, tc.write_queue_nums, tc.perm] {
            part.push(b' ');
            json::write_i64(&mut part, i64::from(n));
        }
        part.extend_from_slice(b" SINGLE_TAG");
        if version >= V5_0_0 {
            part.extend_from_slice(b" {}");
        }
        push_part(&mut plain, &part);
    }

    part.clear();
    write_str_array(
        &mut part,
        body.filter_servers.iter().flatten().map(String::as_str),
        Dialect::Legacy,
    );
    push_part(&mut plain, &part);

    if version >= V5_0_0 {
        push_count(&mut plain, body.mappings.len());
        for (_, info) in &body.mappings {
            part.clear();
            info.encode(&mut part, Dialect::Legacy);
            push_part(&mut plain, &part);
        }
    }
    // Level 9 = Deflater.BEST_COMPRESSION; the zlib wrapper gives Java's `78 DA` header.
    miniz_oxide::deflate::compress_to_vec_zlib(&plain, 9)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Decoded with nothing kept from earlier bodies.
    fn decode_register_body(
        body: &[u8],
        compressed: bool,
        version: i32,
        limits: &BodyLimits,
    ) -> Result<RegisterBody, ModelError> {
        super::decode_register_body(body, compressed, version, limits, &mut Default::default())
    }

    use crate::checksum::crc32;
    use crate::route::model::tests::{static_mapping, text, topic};
    use crate::test_support::fixture;

    const BODY_5X: &str = concat!(
        r#"{"filterServerList":["10.0.0.9:7000"],"topicConfigSerializeWrapper":{"#,
        r#""dataVersion":{"counter":12,"stateVersion":3,"timestamp":1700000000000},"#,
        r#""mappingDataVersion":{"counter":0,"stateVersion":0,"timestamp":1700000000000},"#,
        r#""topicConfigTable":{"TopicTest":{"attributes":{},"order":false,"perm":6,"readQueueNums":4,"#,
        r#""topicFilterType":"SINGLE_TAG","topicName":"TopicTest","topicSysFlag":0,"writeQueueNums":4},"#,
        r#""StaticT":{"attributes":{},"order":false,"perm":6,"readQueueNums":8,"#,
        r#""topicFilterType":"SINGLE_TAG","topicName":"StaticT","topicSysFlag":1,"writeQueueNums":8}},"#,
        r#""topicQueueMappingDetailMap":{},"topicQueueMappingInfoMap":{"StaticT":{"bname":"broker-a","#,
        r#""currIdMap":{0:0,1:1},"dirty":false,"epoch":1700000000000,"scope":"__global__","#,
        r#""topic":"StaticT","totalQueues":8}}}}"#
    );

    /// Bodies decoded into the recycled strings of the bodies before them (names longer and
    /// shorter than the strings they land in, a topicName differing from its key, a repeated
    /// key) decode exactly as with nothing kept.
    #[test]
    fn decoding_into_recycled_strings_gives_the_same_bodies() {
        let bodies: Vec<String> = [
            (r#""a":{"topicName":"a","perm":6},"bb":{"topicName":"bb"}"#),
            (r#""a-much-longer-topic-name":{"topicName":"x","perm":2},"c":{}"#),
            (r#""k":{"perm":4},"k":{"topicName":"k2"},"a":{"topicName":"a"}"#),
            (r#""z":{"order":false,"perm":6,"readQueueNums":1,"topicFilterType":"SINGLE_TAG","topicName":"z","topicSysFlag":0,"writeQueueNums":1}"#),
        ]
        .iter()
        .map(|table| format!(r#"{{"topicConfigSerializeWrapper":{{"topicConfigTable":{{{table}}}}}}}"#))
        .collect();
        let limits = BodyLimits::default();
        let mut scratch = DecodeScratch::default();
        for round in 0..3 {
            for text in &bodies {
                let fresh = decode_register_body(text.as_bytes(), false, 479, &limits).unwrap();
                let reused =
                    super::decode_register_body(text.as_bytes(), false, 479, &limits, &mut scratch)
                        .unwrap();
                assert_eq!(reused, fresh, "round {round}: {text}");
                scratch.recycle(reused);
            }
        }
        assert!(scratch.pooled() > 0);
    }

    fn body_5x_expected() -> RegisterBody {
        RegisterBody {
            data_version: DataVersion {
                counter: 12,
                state_version: 3,
                timestamp: 1_700_000_000_000,
            },
            topics: vec![topic("TopicTest", 4, 4, 6, 0), topic("StaticT", 8, 8, 6, 1)],
            filter_servers: Some(vec!["10.0.0.9:7000".to_owned()]),
            mappings: vec![static_mapping()],
        }
    }

    #[test]
    fn real_4x_registration_body_decodes_with_its_crc() {
        let body = fixture("third_party/register_broker_103_body_v4.json");
        assert_eq!(crc32(&body) & 0x7FFF_FFFF, 1_794_280_071);
        let decoded = decode_register_body(&body, false, 373, &BodyLimits::default()).unwrap();
        assert_eq!(
            decoded.data_version,
            DataVersion {
                counter: 293,
                state_version: 0,
                timestamp: 1_645_882_625_002
            }
        );
        assert_eq!(decoded.topics.len(), 16);
        assert_eq!(
            decoded.topics[0],
            topic("SCHEDULE_TOPIC_XXXX", 18, 18, 6, 0)
        );
        let find = |name: &str| {
            decoded
                .topics
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, t)| t.clone())
        };
        assert_eq!(
            find("BenchmarkTest"),
            Some(topic("BenchmarkTest", 1024, 1024, 6, 0).1)
        );
        assert_eq!(
            find("DefaultCluster"),
            Some(topic("DefaultCluster", 16, 16, 7, 0).1)
        );
        assert_eq!(
            find("%DLQ%CID_JODIE"),
            Some(topic("%DLQ%CID_JODIE", 1, 1, 6, 0).1)
        );
        assert!(decoded.topics.iter().all(|(k, t)| *k == t.topic_name));
        assert_eq!(decoded.filter_servers, Some(vec![]));
        assert!(decoded.mappings.is_empty());
    }

    #[test]
    fn body_5x_with_bare_curr_id_map_keys_decodes_mapping_info() {
        let decoded =
            decode_register_body(BODY_5X.as_bytes(), false, 479, &BodyLimits::default()).unwrap();
        assert_eq!(decoded, body_5x_expected());
    }

    #[test]
    fn json_encoder_reproduces_the_5x_body_byte_for_byte() {
        let mut out = Vec::new();
        encode_register_body_json(&body_5x_expected(), &mut out);
        assert_eq!(text(&out), BODY_5X);
    }

    #[test]
    fn old_versions_send_a_bare_wrapper_without_filter_servers() {
        let body =
            br#"{"dataVersion":{"counter":5,"timestamp":99},"topicConfigTable":{"T":{"perm":2}}}"#;
        let decoded = decode_register_body(body, false, 0, &BodyLimits::default()).unwrap();
        assert_eq!(
            decoded.data_version,
            DataVersion {
                counter: 5,
                state_version: 0,
                timestamp: 99
            }
        );
        assert_eq!(decoded.topics, vec![topic("T", 16, 16, 2, 0)]);
        assert_eq!(decoded.filter_servers, None);
        // The same bytes from a new broker lack the wrapper key: nothing registered.
        let decoded = decode_register_body(body, false, 37, &BodyLimits::default()).unwrap();
        assert!(decoded.topics.is_empty());
    }

    #[test]
    fn empty_body_is_an_empty_registration() {
        let decoded = decode_register_body(b"", false, 479, &BodyLimits::default()).unwrap();
        assert_eq!(decoded, RegisterBody::default());
        let decoded = decode_register_body(b"", true, 479, &BodyLimits::default()).unwrap();
        assert_eq!(decoded, RegisterBody::default());
    }

    #[test]
    fn negative_version_is_rejected() {
        assert!(
            decode_register_body(BODY_5X.as_bytes(), false, -1, &BodyLimits::default()).is_err()
        );
    }

    #[test]
    fn missing_topic_name_and_numbers_take_java_defaults() {
        let body = br#"{"topicConfigSerializeWrapper":{"topicConfigTable":{"K":{},"L":{"topicName":"Real","topicSysFlag":"2"}}}}"#;
        let decoded = decode_register_body(body, false, 479, &BodyLimits::default()).unwrap();
        assert_eq!(decoded.topics[0], topic("K", 16, 16, 6, 0));
        assert_eq!(decoded.topics[1].0, "L");
        assert_eq!(decoded.topics[1].1.topic_name, "Real");
        assert_eq!(decoded.topics[1].1.topic_sys_flag, 2);
        assert_eq!(decoded.filter_servers, None);
    }

    #[test]
    fn register_body_in_the_lenient_dialect_decodes() {
        // Single quotes, bare keys, escapes in keys and values, numbers as strings, a
        // non-string topicName, stray commas: all as fastjson reads them.
        let body = br#"{filterServerList:['a\/b',7],'topicConfigSerializeWrapper':{"dataVersion":{counter:"5",'timestamp':6,},"topicConfigTable":{"T\u00e9":{'perm':"4",readQueueNums:2,,"writeQueueNums":3},"N":{"topicName":42},},"topicQueueMappingInfoMap":{'S':{bname:"b\u002d1",currIdMap:{ 3 : 1 ,"4":"2"},"dirty":"TRUE"}}}}"#;
        let decoded = decode_register_body(body, false, 479, &BodyLimits::default()).unwrap();
        assert_eq!(
            decoded.filter_servers,
            Some(vec!["a/b".to_owned(), "7".to_owned()])
        );
        assert_eq!(
            decoded.data_version,
            DataVersion {
                counter: 5,
                state_version: 0,
                timestamp: 6
            }
        );
        assert_eq!(
            decoded.topics,
            vec![
                topic("Té", 2, 3, 4, 0),
                ("N".to_owned(), topic("42", 16, 16, 6, 0).1)
            ]
        );
        let (key, info) = &decoded.mappings[0];
        assert_eq!(key, "S");
        assert_eq!(info.bname, "b-1");
        assert_eq!(info.curr_id_map, vec![(3, 1), (4, 2)]);
        assert!(info.dirty);
        assert_eq!(info.scope, "__global__");
    }

    #[test]
    fn repeated_fields_take_the_last_value_and_null_means_absent() {
        // As a Java map would see the object: only the last "perm" counts, so an earlier bad
        // value is not an error; a null field takes the default.
        let body = br#"{"topicConfigSerializeWrapper":{"topicConfigTable":{"A":{"perm":"rw","perm":4,"readQueueNums":null}},"topicConfigTable":{"B":{"perm":2}}}}"#;
        let decoded = decode_register_body(body, false, 479, &BodyLimits::default()).unwrap();
        assert_eq!(decoded.topics, vec![topic("B", 16, 16, 2, 0)]);
        let body = br#"{"topicConfigSerializeWrapper":{"topicConfigTable":{"A":{"perm":"rw","perm":4,"readQueueNums":null}}}}"#;
        let decoded = decode_register_body(body, false, 479, &BodyLimits::default()).unwrap();
        assert_eq!(decoded.topics, vec![topic("A", 16, 16, 4, 0)]);
        let body =
            br#"{"topicConfigSerializeWrapper":{"topicConfigTable":{"A":{"perm":4,"perm":"rw"}}}}"#;
        assert!(decode_register_body(body, false, 479, &BodyLimits::default()).is_err());
    }

    #[test]
    fn thousand_topic_json_body_round_trips() {
        let body = thousand_topic_body();
        let mut json_body = Vec::new();
        encode_register_body_json(&body, &mut json_body);
        let decoded = decode_register_body(&json_body, false, 479, &BodyLimits::default()).unwrap();
        assert_eq!(decoded, body);
    }

    #[test]
    fn duplicate_topic_keys_keep_the_last_value() {
        let body = br#"{"topicConfigSerializeWrapper":{"topicConfigTable":{"A":{"perm":2},"B":{},"A":{"perm":4}}}}"#;
        let decoded = decode_register_body(body, false, 479, &BodyLimits::default()).unwrap();
        assert_eq!(
            decoded.topics,
            vec![topic("A", 16, 16, 4, 0), topic("B", 16, 16, 6, 0)]
        );
    }

    #[test]
    fn too_many_topics_is_an_error() {
        let limits = BodyLimits {
            max_topics: 1,
            ..BodyLimits::default()
        };
        assert!(decode_register_body(BODY_5X.as_bytes(), false, 479, &limits).is_err());
        let compressed = encode_register_body_compressed(&body_5x_expected(), 479);
        assert!(decode_register_body(&compressed, true, 479, &limits).is_err());
    }

    #[test]
    fn bad_topic_numbers_are_errors() {
        let body = br#"{"topicConfigSerializeWrapper":{"topicConfigTable":{"A":{"perm":"rw"}}}}"#;
        assert!(decode_register_body(body, false, 479, &BodyLimits::default()).is_err());
        let body =
            br#"{"topicConfigSerializeWrapper":{"topicConfigTable":{"A":{"perm":4294967296}}}}"#;
        assert!(decode_register_body(body, false, 479, &BodyLimits::default()).is_err());
        assert!(decode_register_body(b"{not json", false, 479, &BodyLimits::default()).is_err());
    }

    #[test]
    fn compressed_round_trip_for_a_4x_broker_drops_mappings_and_sys_flag() {
        let body = body_5x_expected();
        let compressed = encode_register_body_compressed(&body, 400);
        assert_eq!(&compressed[..2], &[0x78, 0xDA]);
        let decoded = decode_register_body(&compressed, true, 400, &BodyLimits::default()).unwrap();
        assert_eq!(decoded.data_version, body.data_version);
        assert_eq!(
            decoded.topics,
            vec![topic("TopicTest", 4, 4, 6, 0), topic("StaticT", 8, 8, 6, 0)]
        );
        assert_eq!(decoded.filter_servers, body.filter_servers);
        assert!(decoded.mappings.is_empty());
    }

    #[test]
    fn compressed_round_trip_for_a_5x_broker_keeps_mappings() {
        let body = body_5x_expected();
        let compressed = encode_register_body_compressed(&body, 413);
        let decoded = decode_register_body(&compressed, true, 413, &BodyLimits::default()).unwrap();
        assert_eq!(
            decoded.topics,
            vec![topic("TopicTest", 4, 4, 6, 0), topic("StaticT", 8, 8, 6, 0)]
        );
        assert_eq!(decoded.mappings, body.mappings);
        assert_eq!(decoded.filter_servers, body.filter_servers);
    }

    #[test]
    fn zlib_body_flagged_uncompressed_is_sniffed() {
        let compressed = encode_register_body_compressed(&body_5x_expected(), 479);
        let decoded =
            decode_register_body(&compressed, false, 479, &BodyLimits::default()).unwrap();
        assert_eq!(decoded.mappings, body_5x_expected().mappings);
        assert_eq!(decoded.topics.len(), 2);
    }

    #[test]
    fn truncated_or_garbage_compressed_bodies_are_errors() {
        let compressed = encode_register_body_compressed(&body_5x_expected(), 479);
        for cut in [1, 2, 10, compressed.len() / 2, compressed.len() - 1] {
            assert!(
                decode_register_body(&compressed[..cut], true, 479, &BodyLimits::default())
                    .is_err(),
                "cut at {cut}"
            );
        }
        assert!(decode_register_body(
            b"\x78\xDAgarbage-garbage",
            false,
            479,
            &BodyLimits::default()
        )
        .is_err());
        assert!(
            decode_register_body(BODY_5X.as_bytes(), true, 479, &BodyLimits::default()).is_err()
        );
    }

    fn zlib(plain: &[u8]) -> Vec<u8> {
        miniz_oxide::deflate::compress_to_vec_zlib(plain, 6)
    }

    fn part(out: &mut Vec<u8>, bytes: &[u8]) {
        out.extend_from_slice(&(bytes.len() as i32).to_be_bytes());
        out.extend_from_slice(bytes);
    }

    #[test]
    fn hostile_length_prefixes_are_errors_not_allocations() {
        let dv = br#"{"counter":1,"timestamp":2}"#;
        // Topic count far beyond the bytes that follow.
        let mut plain = Vec::new();
        part(&mut plain, dv);
        plain.extend_from_slice(&50_000i32.to_be_bytes());
        assert!(decode_register_body(&zlib(&plain), true, 479, &BodyLimits::default()).is_err());
        // Negative part length.
        let mut plain = Vec::new();
        plain.extend_from_slice(&(-5i32).to_be_bytes());
        assert!(decode_register_body(&zlib(&plain), true, 479, &BodyLimits::default()).is_err());
        // Part length beyond the end.
        let mut plain = Vec::new();
        plain.extend_from_slice(&i32::MAX.to_be_bytes());
        plain.extend_from_slice(dv);
        assert!(decode_register_body(&zlib(&plain), true, 479, &BodyLimits::default()).is_err());
        // Negative topic count.
        let mut plain = Vec::new();
        part(&mut plain, dv);
        plain.extend_from_slice(&(-1i32).to_be_bytes());
        assert!(decode_register_body(&zlib(&plain), true, 479, &BodyLimits::default()).is_err());
    }

    #[test]
    fn zip_bomb_stops_at_the_inflate_limit() {
        let bomb = zlib(&vec![0u8; 4 << 20]);
        let limits = BodyLimits {
            max_inflated_len: 1 << 20,
            ..BodyLimits::default()
        };
        let e = decode_register_body(&bomb, true, 479, &limits).unwrap_err();
        assert!(e.0.contains("beyond"), "{e}");
    }

    #[test]
    fn topic_config_lines_follow_java_split_rules() {
        let dv = br#"{"counter":1,"stateVersion":0,"timestamp":2}"#;
        let build = |lines: &[&str], filter: &[u8]| {
            let mut plain = Vec::new();
            part(&mut plain, dv);
            plain.extend_from_slice(&(lines.len() as i32).to_be_bytes());
            for l in lines {
                part(&mut plain, l.as_bytes());
            }
            part(&mut plain, filter);
            zlib(&plain)
        };
        let ok = build(
            &["A 4 4 6 SINGLE_TAG {\"k\":\"v\"}", "B 1 2 7 MULTI_TAG "],
            b"not json",
        );
        let decoded = decode_register_body(&ok, true, 400, &BodyLimits::default()).unwrap();
        assert_eq!(
            decoded.topics,
            vec![topic("A", 4, 4, 6, 0), topic("B", 1, 2, 7, 0)]
        );
        // Java ignores an unparsable filter list and keeps an empty one.
        assert_eq!(decoded.filter_servers, Some(vec![]));
        for bad in [
            "A 4 4 6",
            "A 4  4 6 SINGLE_TAG",
            "A x 4 6 SINGLE_TAG",
            "A 4 4 6 OTHER",
        ] {
            let body = build(&[bad], b"[]");
            assert!(
                decode_register_body(&body, true, 400, &BodyLimits::default()).is_err(),
                "{bad}"
            );
        }
    }

    fn thousand_topic_body() -> RegisterBody {
        RegisterBody {
            data_version: DataVersion {
                counter: 1000,
                state_version: 0,
                timestamp: 1_700_000_000_000,
            },
            topics: (0..1000)
                .map(|i| topic(&format!("benchmark-topic-{i:05}"), 8, 8, 6, 0))
                .collect(),
            filter_servers: Some(vec![]),
            mappings: vec![static_mapping()],
        }
    }
}
