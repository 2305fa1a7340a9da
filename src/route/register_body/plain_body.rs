//! The fast path of the JSON registration body: a RegisterBrokerBody in the exact shape a
//! broker's fastjson writes it (compact, no escapes, plain ints, no static-topic mappings),
//! read in one pass straight into a [`RegisterBody`].
//!
//! A changed registration of a hundred topics is 21 KB of JSON; building the general reader's
//! tape (about 2,000 slots) and then looking each TopicConfig's fields up in it was over half
//! of its cost. Each TopicConfig is first matched against the exact layout brokers write
//! (members in alphabetical order, keys and fixed values compared as bytes, only the numbers
//! and the topic name read); one in another layout is read member by member. Anything outside
//! that shape (whitespace, escapes, nulls, strings for numbers, a repeated member, mappings, a
//! limit reached) returns `None`, and the general decoder reads the body as before, with its
//! coercions and errors: the fast path never refuses a body, and what it accepts decodes to the
//! same value (tests check both paths on every body it accepts).

use super::{
    BodyLimits, DecodeScratch, RegisterBody, TopicConfig, DEFAULT_PERM, DEFAULT_QUEUE_NUMS,
};
use crate::remoting::json;
use crate::remoting::plain::PlainReader;
use crate::route::model::DataVersion;
use crate::route::model::{mappings_from_ref, MappingInfo};

/// Nesting the fast path may reach (root, wrapper, table, TopicConfig, attributes, and one
/// more inside a skipped value): below this limit the general reader decides.
const DEPTH_NEEDED: usize = 10;

/// Reads a RegisterBrokerBody (version >= V3_0_11) if it has the plain shape; its topic names
/// go into strings `scratch` kept.
pub(super) fn decode(
    body: &[u8],
    limits: &BodyLimits,
    scratch: &mut DecodeScratch,
) -> Option<RegisterBody> {
    if limits.json.max_depth < DEPTH_NEEDED {
        return None;
    }
    // No UTF-8 pass over the whole body: the reader checks the strings it reads, and the rest
    // of what it accepts is ASCII structure.
    let mut r = PlainReader::checking_strings(body, limits.json.max_string_len);
    let mut decoded = RegisterBody::default();
    let (mut seen_filter, mut seen_wrapper) = (false, false);
    r.members(|r, key| {
        match key {
            "filterServerList" if !seen_filter => {
                seen_filter = true;
                decoded.filter_servers = Some(r.string_array()?);
            }
            "topicConfigSerializeWrapper" if !seen_wrapper => {
                seen_wrapper = true;
                wrapper(r, &mut decoded, limits, scratch)?;
            }
            "filterServerList" | "topicConfigSerializeWrapper" => return None,
            _ => r.skip_value()?,
        }
        Some(())
    })?;
    r.at_end().then_some(decoded)
}

/// The TopicConfigSerializeWrapper: dataVersion, topicConfigTable, and an empty
/// topicQueueMappingInfoMap (a non-empty one is the general decoder's).
fn wrapper(
    r: &mut PlainReader<'_>,
    out: &mut RegisterBody,
    limits: &BodyLimits,
    scratch: &mut DecodeScratch,
) -> Option<()> {
    let (mut seen_version, mut seen_table, mut seen_mappings) = (false, false, false);
    r.members(|r, key| {
        match key {
            "dataVersion" if !seen_version => {
                seen_version = true;
                out.data_version = DataVersion::read_plain(r)?;
            }
            "topicConfigTable" if !seen_table => {
                seen_table = true;
                out.topics = topic_table(r, limits.max_topics, scratch)?;
            }
            "topicQueueMappingInfoMap" if !seen_mappings => {
                seen_mappings = true;
                if !r.literal(b"{}") {
                    out.mappings = mappings_at_end(r, limits)?;
                }
            }
            "dataVersion" | "topicConfigTable" | "topicQueueMappingInfoMap" => return None,
            _ => r.skip_value()?,
        }
        Some(())
    })
}

fn topic_table(
    r: &mut PlainReader<'_>,
    max_topics: usize,
    scratch: &mut DecodeScratch,
) -> Option<Vec<(String, TopicConfig)>> {
    // A broker writes about 180 bytes per TopicConfig: sized once instead of doubling seven
    // times for a hundred topics (the kept list of a body applied before, when there is one).
    let mut topics = scratch.topics((r.remaining() / 160).min(max_topics));
    let mut n = 0;
    r.members(|r, key| {
        if n == max_topics {
            return None;
        }
        let (name, config) = topic_config(r, key)?;
        DecodeScratch::put(&mut topics, n, key, name.unwrap_or(key), config);
        n += 1;
        Some(())
    })?;
    topics.truncate(n);
    Some(super::dedup_last_wins(topics))
}

/// A non-empty topicQueueMappingInfoMap (sent only by brokers hosting static topics). fastjson
/// writes its `currIdMap` with bare integer keys, which the plain reader does not take, so the
/// map is handed to the general reader, without reading the topics again: when it is the
/// body's last member, as brokers write it (the bytes left are the map and the two closing
/// braces), it is parsed alone, with the depth it has in the body (two levels down), and read
/// as the general decoder reads it. Anything else (a member after it, an error) returns
/// `None`: the general decoder then reads the whole body, with its errors.
fn mappings_at_end(
    r: &mut PlainReader<'_>,
    limits: &BodyLimits,
) -> Option<Vec<(String, MappingInfo)>> {
    let map = r.take_all_but(b"}}")?;
    let json_limits = json::Limits {
        max_depth: limits.json.max_depth.checked_sub(2)?,
        ..limits.json
    };
    let doc = json::parse_borrowed(map, &json_limits).ok()?;
    mappings_from_ref(doc.root(), limits.max_topics).ok()
}

/// A TopicConfig without its name (left empty: the caller owns the strings), and the name
/// when the config has one.
type Unnamed<'a> = (Option<&'a str>, TopicConfig);

/// One TopicConfig: in the exact layout a broker writes when it can be (nearly always), else
/// member by member.
fn topic_config<'a>(r: &mut PlainReader<'a>, key: &'a str) -> Option<Unnamed<'a>> {
    let mark = r.mark();
    if let Some(tc) = broker_layout(r, key) {
        return Some(tc);
    }
    r.rewind(mark);
    topic_config_members(r)
}

/// A TopicConfig exactly as fastjson writes it, members in alphabetical order:
/// `{["attributes":{},]"order":false,"perm":6,"readQueueNums":8,"topicFilterType":"SINGLE_TAG",
/// "topicName":"T","topicSysFlag":0,"writeQueueNums":8}` (`attributes` since 5.x, empty unless a
/// topic has some). The keys and fixed values are compared as bytes, not scanned as strings:
/// a hundred-topic body has a thousand of them; those between two values are one or two literals
/// (compared a word at a time). Anything else (another member, order, or value; attributes)
/// returns `None` and the member loop reads the TopicConfig, to the same value when this
/// accepts it. The topicName is first compared with the map `key` (a broker writes the same
/// name twice), and only scanned when it differs.
fn broker_layout<'a>(r: &mut PlainReader<'a>, key: &'a str) -> Option<Unnamed<'a>> {
    #[inline(always)]
    fn lit<const N: usize>(r: &mut PlainReader<'_>, bytes: &[u8; N]) -> Option<()> {
        r.literal(bytes).then_some(())
    }
    if !r.literal(b"{\"attributes\":{},\"order\":") {
        lit(r, b"{\"order\":")?;
    }
    if !r.literal(b"false,\"perm\":") {
        lit(r, b"true,\"perm\":")?;
    }
    let perm = r.int()?;
    lit(r, b",\"readQueueNums\":")?;
    let read_queue_nums = r.int()?;
    // Two literals of at most 32 bytes: compared inline, where a longer one calls memcmp.
    lit(r, b",\"topicFilterType\":\"")?;
    if !r.literal(b"SINGLE_TAG\",\"topicName\":") {
        lit(r, b"MULTI_TAG\",\"topicName\":")?;
    }
    let name = if r.quoted(key) { key } else { r.string()? };
    lit(r, b",\"topicSysFlag\":")?;
    let topic_sys_flag = r.int()?;
    lit(r, b",\"writeQueueNums\":")?;
    let write_queue_nums = r.int()?;
    lit(r, b"}")?;
    let tc = TopicConfig {
        topic_name: String::new(),
        read_queue_nums,
        write_queue_nums,
        perm,
        topic_sys_flag,
    };
    Some((Some(name), tc))
}

/// One TopicConfig read member by member; missing members take Java's defaults (a missing
/// topicName is the caller's: it takes the map key).
fn topic_config_members<'a>(r: &mut PlainReader<'a>) -> Option<Unnamed<'a>> {
    let mut name: Option<&str> = None;
    let mut tc = TopicConfig {
        topic_name: String::new(),
        read_queue_nums: DEFAULT_QUEUE_NUMS,
        write_queue_nums: DEFAULT_QUEUE_NUMS,
        perm: DEFAULT_PERM,
        topic_sys_flag: 0,
    };
    r.members(|r, member| {
        match member {
            "topicName" => name = Some(r.string()?),
            "readQueueNums" => tc.read_queue_nums = r.int()?,
            "writeQueueNums" => tc.write_queue_nums = r.int()?,
            "perm" => tc.perm = r.int()?,
            "topicSysFlag" => tc.topic_sys_flag = r.int()?,
            _ => r.skip_value()?,
        }
        Some(())
    })?;
    Some((name, tc))
}

#[cfg(test)]
mod tests {
    use super::super::{decode_json_body_general, encode_register_body_json};
    use super::*;
    use crate::remoting::codes::version::CURRENT;

    /// The fast path with a scratch of its own.
    fn fast(body: &[u8], limits: &BodyLimits) -> Option<RegisterBody> {
        decode(body, limits, &mut DecodeScratch::default())
    }

    /// A TopicConfig read by `f`, named as the decoder names it (its topicName, else the key
    /// "K").
    fn named(read: Option<Unnamed<'_>>) -> Option<TopicConfig> {
        read.map(|(name, tc)| TopicConfig {
            topic_name: name.unwrap_or("K").to_owned(),
            ..tc
        })
    }

    fn topic(name: &str, queues: i32, perm: i32) -> (String, TopicConfig) {
        let tc = TopicConfig {
            topic_name: name.to_owned(),
            read_queue_nums: queues,
            write_queue_nums: queues + 1,
            perm,
            topic_sys_flag: 1,
        };
        (name.to_owned(), tc)
    }

    /// A body as a broker writes it: every TopicConfig field, filter list, mapping maps.
    fn broker_body(topics: usize) -> Vec<u8> {
        let body = RegisterBody {
            data_version: DataVersion {
                counter: 7,
                state_version: -1,
                timestamp: 1_700_000_000_123,
            },
            topics: (0..topics)
                .map(|i| topic(&format!("T{i}"), i as i32, 6))
                .collect(),
            filter_servers: Some(vec!["f:1".into()]),
            mappings: Vec::new(),
        };
        let mut out = Vec::new();
        encode_register_body_json(&body, &mut out);
        out
    }

    /// A broker body of two topics with one static-topic mapping (written as fastjson does,
    /// bare integer keys in `currIdMap`).
    fn body_with_mapping() -> Vec<u8> {
        let mut body: RegisterBody = fast(&broker_body(2), &BodyLimits::default()).unwrap();
        let info = MappingInfo {
            topic: "StaticT".into(),
            scope: "__global__".into(),
            total_queues: 8,
            bname: "b-1".into(),
            epoch: 1_700_000_000_000,
            dirty: false,
            curr_id_map: vec![(0, 0), (3, 1)],
        };
        body.mappings = vec![("StaticT".into(), info)];
        let mut out = Vec::new();
        encode_register_body_json(&body, &mut out);
        out
    }

    /// Whatever the fast path accepts, the general decoder decodes to the same body.
    fn check(body: &[u8], limits: &BodyLimits) -> bool {
        let Some(fast) = fast(body, limits) else {
            return false;
        };
        let general = decode_json_body_general(body, CURRENT, limits);
        assert_eq!(
            general.as_ref().ok(),
            Some(&fast),
            "{:?} {general:?}",
            String::from_utf8_lossy(body)
        );
        true
    }

    #[test]
    fn broker_written_bodies_take_the_fast_path_and_decode_as_in_general() {
        let limits = BodyLimits::default();
        for topics in [0, 1, 116] {
            assert!(check(&broker_body(topics), &limits), "{topics} topics");
        }
        let others: [&[u8]; 6] = [
            b"{}",
            br#"{"topicConfigSerializeWrapper":{}}"#,
            br#"{"filterServerList":[],"x":{"y":[1,true,"z",{}]}}"#,
            // Repeated topics: the last config at the first key's place, as a Java map.
            br#"{"topicConfigSerializeWrapper":{"topicConfigTable":{"A":{"perm":2},"B":{},"A":{"topicName":"a2"}}}}"#,
            // Missing fields take Java's defaults; a missing topicName the key.
            br#"{"topicConfigSerializeWrapper":{"dataVersion":{"counter":1,"counter":2},"topicConfigTable":{"K":{"order":false}}}}"#,
            br#"{"topicConfigSerializeWrapper":{"topicQueueMappingInfoMap":{},"topicConfigTable":{}}}"#,
        ];
        for body in others {
            assert!(check(body, &limits), "{}", String::from_utf8_lossy(body));
        }
        // Mappings are read by the general reader from where the topics end.
        let with_mapping = body_with_mapping();
        assert!(check(&with_mapping, &limits));
        let decoded = fast(&with_mapping, &limits).unwrap();
        assert_eq!(decoded.mappings[0].1.curr_id_map, vec![(0, 0), (3, 1)]);
        let member_after =
            String::from_utf8(with_mapping.clone())
                .unwrap()
                .replacen("}}}", r#"}},"x":1}"#, 1);
        assert!(fast(member_after.as_bytes(), &limits).is_none());
        let decoded = fast(&broker_body(2), &limits).unwrap();
        assert_eq!(decoded.topics[1], topic("T1", 1, 6));
        assert_eq!(decoded.data_version.timestamp, 1_700_000_000_123);
    }

    #[test]
    fn every_mutation_the_fast_path_accepts_decodes_the_same_in_general() {
        let mut tight = BodyLimits {
            max_topics: 1,
            ..BodyLimits::default()
        };
        tight.json.max_string_len = 5;
        let bytes = [
            b' ', b'"', b'\\', b'0', b'1', b'-', b'.', b'e', b',', b'}', b'{', b':', b'n', b'[',
            b']', 0xC3,
        ];
        let (mut accepted, mut refused) = (0, 0);
        // A 5.x body, and one whose topics are 4.x-shaped (no attributes) with the other
        // fixed values (order true, MULTI_TAG), so that mutations reach every literal of the
        // broker layout.
        let five = broker_body(2);
        let four = String::from_utf8(five.clone())
            .unwrap()
            .replace(r#""attributes":{},"#, "")
            .replace(r#""order":false"#, r#""order":true"#)
            .replacen("SINGLE_TAG", "MULTI_TAG", 1)
            .into_bytes();
        for body in [five, four, body_with_mapping()] {
            for (a, r) in mutations_checked(&body, &bytes, [BodyLimits::default(), tight]) {
                accepted += a;
                refused += r;
            }
        }
        // Both paths were exercised.
        assert!(accepted > 1500 && refused > 15000, "{accepted} {refused}");
    }

    #[test]
    fn near_misses_of_the_broker_layout_are_refused_or_decode_as_in_general() {
        // Every byte of a 5.x and a 4.x body one off either way, with its lowest bit flipped,
        // with its high bit set, and as 0xFF: a field name or fixed value off by one byte,
        // a non-ASCII byte in a name, a digit that is none.
        let five = broker_body(2);
        let four = String::from_utf8(five.clone())
            .unwrap()
            .replace(r#""attributes":{},"#, "")
            .replace(r#""order":false"#, r#""order":true"#)
            .replace("SINGLE_TAG", "MULTI_TAG")
            .into_bytes();
        let limits = BodyLimits::default();
        let mut accepted = 0;
        for body in [five, four] {
            assert!(check(&body, &limits));
            for i in 0..body.len() {
                let b = body[i];
                for changed in [b.wrapping_add(1), b.wrapping_sub(1), b ^ 1, b | 0x80, 0xFF] {
                    let mut v = body.clone();
                    v[i] = changed;
                    accepted += usize::from(check(&v, &limits));
                }
            }
        }
        // Digits and names changed within the shape are still read here.
        assert!(accepted > 100, "{accepted}");
    }

    #[test]
    fn names_with_escapes_or_bad_utf8_and_numbers_past_i32_are_not_read_here() {
        let limits = BodyLimits::default();
        let body = String::from_utf8(broker_body(1)).unwrap();
        let refused = [
            // Escapes in a key, a topicName, the filter list, an unknown member.
            body.replacen(r#""T0":{"#, r#""T\u0030":{"#, 1),
            body.replacen(r#""topicName":"T0""#, r#""topicName":"T\/0""#, 1),
            body.replacen(r#"["f:1"]"#, r#"["f:1\]"#, 1),
            body.replacen(r#"["f:1"]"#, r#"["f\,"1"]"#, 1),
            body.replacen(
                r#""topicName":"T0""#,
                r#""topicName":"T\,"topicName":"T0""#,
                1,
            ),
            body.replacen(
                r#"{"filterServerList""#,
                r#"{"x":"\"","filterServerList""#,
                1,
            ),
            // Numbers past i32, or not plain ints.
            body.replacen(r#""perm":6"#, r#""perm":2147483648"#, 1),
            body.replacen(r#""perm":6"#, r#""perm":-2147483649"#, 1),
            body.replacen(r#""perm":6"#, r#""perm":99999999999"#, 1),
            body.replacen(r#""perm":6"#, r#""perm":06"#, 1),
            body.replacen(r#""perm":6"#, r#""perm":6.0"#, 1),
            body.replacen(r#""perm":6"#, r#""perm":6e0"#, 1),
            body.replacen(r#""perm":6"#, r#""perm":-"#, 1),
        ];
        for text in &refused {
            assert!(fast(text.as_bytes(), &limits).is_none(), "{text}");
        }
        // The bounds of i32 and a non-ASCII name are read here, as in general.
        let taken = [
            body.replacen(r#""perm":6"#, r#""perm":2147483647"#, 1),
            body.replacen(r#""perm":6"#, r#""perm":-2147483648"#, 1),
            body.replace(r#""T0""#, "\"T\u{e9}\""),
            body.replacen(r#""topicName":"T0""#, "\"topicName\":\"\u{1F600}\"", 1),
        ];
        for text in &taken {
            assert!(check(text.as_bytes(), &limits), "{text}");
        }
        // Invalid UTF-8 anywhere (a key, a name, a skipped member) is the general decoder's
        // error, not read here.
        let bytes = body.into_bytes();
        let at = |needle: &[u8]| {
            bytes
                .windows(needle.len())
                .position(|w| w == needle)
                .unwrap()
        };
        for (needle, offset) in [
            (&b"\"T0\":{"[..], 2),
            (b"\"topicName\":\"T0\"", 14),
            (b"f:1", 1),
        ] {
            for bad in [0x80, 0xC3, 0xFF] {
                let mut v = bytes.clone();
                v[at(needle) + offset] = bad;
                assert!(fast(&v, &limits).is_none());
                assert!(decode_json_body_general(&v, CURRENT, &limits).is_err());
            }
        }
        // In a member the fast path skips.
        let skipped = [&b"{\"x\":[\"a\xFF\"],"[..], &bytes[1..]].concat();
        assert!(fast(&skipped, &limits).is_none());
        assert!(decode_json_body_general(&skipped, CURRENT, &limits).is_err());
        let skipped = [&b"{\"x\":[\"a\xC3\xA9\"],"[..], &bytes[1..]].concat();
        assert!(check(&skipped, &limits));
    }

    /// Checks every mutation of `body` ([`crate::remoting::plain::mutations`]) under each
    /// limit; (accepted, refused) per limit.
    fn mutations_checked(
        body: &[u8],
        bytes: &[u8],
        limits: [BodyLimits; 2],
    ) -> [(usize, usize); 2] {
        let mut counts = [(0, 0); 2];
        for v in crate::remoting::plain::mutations(body, bytes) {
            for (limits, count) in limits.iter().zip(counts.iter_mut()) {
                if check(&v, limits) {
                    count.0 += 1;
                } else {
                    count.1 += 1;
                }
            }
        }
        counts
    }

    #[test]
    fn topic_configs_in_the_broker_layout_read_as_member_by_member() {
        let read = |text: &[u8], f: for<'a> fn(&mut PlainReader<'a>) -> Option<Unnamed<'a>>| {
            let mut r = PlainReader::new(text, 100).unwrap();
            named(f(&mut r)).filter(|_| r.at_end())
        };
        fn layout_k<'a>(r: &mut PlainReader<'a>) -> Option<Unnamed<'a>> {
            broker_layout(r, "K")
        }
        fn either_k<'a>(r: &mut PlainReader<'a>) -> Option<Unnamed<'a>> {
            topic_config(r, "K")
        }
        let by_members = topic_config_members;
        let either = either_k;
        // The topicName the key ("K"), another name, a name starting with the key, an empty one.
        let layout: [&[u8]; 5] = [
            br#"{"order":false,"perm":6,"readQueueNums":8,"topicFilterType":"SINGLE_TAG","topicName":"K","topicSysFlag":0,"writeQueueNums":4}"#,
            br#"{"order":false,"perm":6,"readQueueNums":8,"topicFilterType":"SINGLE_TAG","topicName":"KK","topicSysFlag":0,"writeQueueNums":4}"#,
            br#"{"attributes":{},"order":false,"perm":6,"readQueueNums":8,"topicFilterType":"SINGLE_TAG","topicName":"T","topicSysFlag":0,"writeQueueNums":4}"#,
            br#"{"order":true,"perm":7,"readQueueNums":16,"topicFilterType":"MULTI_TAG","topicName":"T","topicSysFlag":1,"writeQueueNums":16}"#,
            br#"{"order":false,"perm":-1,"readQueueNums":0,"topicFilterType":"SINGLE_TAG","topicName":"","topicSysFlag":3,"writeQueueNums":2147483647}"#,
        ];
        for text in layout {
            let fast = read(text, layout_k);
            assert!(fast.is_some(), "{}", String::from_utf8_lossy(text));
            assert_eq!(fast, read(text, by_members));
            assert_eq!(fast, read(text, either));
        }
        // Not the layout: read member by member, to the values the members say.
        let others: [&[u8]; 5] = [
            br#"{"attributes":{"+a":"1"},"order":false,"perm":6,"readQueueNums":8,"topicFilterType":"SINGLE_TAG","topicName":"T","topicSysFlag":0,"writeQueueNums":4}"#,
            br#"{"perm":6,"order":false,"readQueueNums":8,"topicFilterType":"SINGLE_TAG","topicName":"T","topicSysFlag":0,"writeQueueNums":4}"#,
            br#"{"order":false,"perm":6,"readQueueNums":8,"topicFilterType":"SINGLE_TAG","topicName":"T","topicSysFlag":0,"writeQueueNums":4,"x":1}"#,
            br#"{"order":false,"perm":6,"readQueueNums":8,"topicFilterType":"SINGLE_TAG","topicSysFlag":0,"writeQueueNums":4}"#,
            br#"{"order":false,"perm":6,"perm":2,"readQueueNums":8,"topicFilterType":"SINGLE_TAG","topicName":"T","topicSysFlag":0,"writeQueueNums":4}"#,
        ];
        for text in others {
            assert_eq!(
                read(text, layout_k),
                None,
                "{}",
                String::from_utf8_lossy(text)
            );
            let members = read(text, by_members);
            assert!(members.is_some(), "{}", String::from_utf8_lossy(text));
            assert_eq!(read(text, either), members);
        }
        let missing_name = read(others[3], either).unwrap();
        assert_eq!(
            (missing_name.topic_name.as_str(), missing_name.perm),
            ("K", 6)
        );
        assert_eq!(read(others[4], either).unwrap().perm, 2);
    }
}
