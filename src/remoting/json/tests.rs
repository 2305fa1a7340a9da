use super::document::MAX_SPARE_SLOTS;
use super::reader::find_quote_or_backslash;
use super::*;
use std::path::PathBuf;

fn obj(members: &[(&str, Value)]) -> Value {
    Value::Object(
        members
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
    )
}

fn s(text: &str) -> Value {
    Value::Str(text.to_string())
}

fn fixtures_dir() -> PathBuf {
    crate::test_support::fixture_path("")
}

fn fixture(name: &str) -> Value {
    let bytes = crate::test_support::fixture(name);
    parse(&bytes).unwrap_or_else(|e| panic!("fixture {name}: {e}"))
}

fn browser(text: &str) -> String {
    let mut out = Vec::new();
    write_str_browser(&mut out, text);
    String::from_utf8(out).unwrap()
}

fn default_escaped(text: &str) -> String {
    let mut out = Vec::new();
    write_str(&mut out, text);
    String::from_utf8(out).unwrap()
}

#[test]
fn standard_json_parses_to_the_expected_tree() {
    let v = parse(br#" {"a": [1, -2, 3.5, true, false, null, "x"], "b": {}} "#).unwrap();
    assert_eq!(
        v,
        obj(&[
            (
                "a",
                Value::Array(vec![
                    Value::Int(1),
                    Value::Int(-2),
                    Value::Float(3.5),
                    Value::Bool(true),
                    Value::Bool(false),
                    Value::Null,
                    s("x"),
                ])
            ),
            ("b", Value::Object(vec![])),
        ])
    );
}

#[test]
fn bare_numeric_and_identifier_keys_arrive_as_text() {
    let v = parse(br#"{0:"a",1:"b",-1:"c",topic:"x",$_k9:1}"#).unwrap();
    assert_eq!(
        v,
        obj(&[
            ("0", s("a")),
            ("1", s("b")),
            ("-1", s("c")),
            ("topic", s("x")),
            ("$_k9", Value::Int(1)),
        ])
    );
    assert_eq!(parse(b"{ 12 : 0 }").unwrap(), obj(&[("12", Value::Int(0))]));
}

#[test]
fn single_quoted_strings_and_keys_are_accepted() {
    let v = parse(br#"{'k':'it\'s "quoted"', "d":'x'}"#).unwrap();
    assert_eq!(v, obj(&[("k", s("it's \"quoted\"")), ("d", s("x"))]));
}

#[test]
fn arbitrary_commas_are_skipped() {
    assert_eq!(
        parse(b"[1,,2,]").unwrap(),
        Value::Array(vec![Value::Int(1), Value::Int(2)])
    );
    assert_eq!(parse(b"[,]").unwrap(), Value::Array(vec![]));
    assert_eq!(
        parse(b"[ , , 7]").unwrap(),
        Value::Array(vec![Value::Int(7)])
    );
    assert_eq!(
        parse(br#"{,"a":1,,"b":2,}"#).unwrap(),
        obj(&[("a", Value::Int(1)), ("b", Value::Int(2))])
    );
    assert_eq!(parse(b"{,}").unwrap(), Value::Object(vec![]));
}

#[test]
fn trailing_whitespace_and_newline_are_accepted_but_garbage_is_not() {
    assert_eq!(
        parse(b"{\"code\":105}\n").unwrap(),
        obj(&[("code", Value::Int(105))])
    );
    assert_eq!(parse(b"\r\n\t 1 \r\n").unwrap(), Value::Int(1));
    assert!(parse(b"{} x").is_err());
    assert!(parse(b"{}{}").is_err());
    assert!(parse(b"1 2").is_err());
    assert!(parse(b"{}\0").is_err());
}

#[test]
fn escapes_decode_to_their_characters() {
    let v = parse(br#""q\"b\\s\/n\nr\rt\tb\bf\f u\u0041\u00e9\u4E2D""#).unwrap();
    assert_eq!(v, s("q\"b\\s/n\nr\rt\tb\u{8}f\u{c} uA\u{e9}\u{4e2d}"));
    assert_eq!(parse(br#""\x41""#).unwrap(), s("A"));
    assert!(parse(br#""\q""#).is_err());
    assert!(parse(br#""\u12G4""#).is_err());
}

#[test]
fn surrogate_pairs_combine_and_unpaired_surrogates_become_replacement_chars() {
    assert_eq!(parse(br#""\uD83D\uDE00""#).unwrap(), s("\u{1F600}"));
    assert_eq!(parse(br#""\ud83d\ude00!""#).unwrap(), s("\u{1F600}!"));
    assert_eq!(parse(br#""a\uD83Db""#).unwrap(), s("a\u{FFFD}b"));
    assert_eq!(parse(br#""\uDE00""#).unwrap(), s("\u{FFFD}"));
    assert_eq!(parse(br#""\uD83D\u0041""#).unwrap(), s("\u{FFFD}A"));
    assert_eq!(parse(br#""\uD83D\n""#).unwrap(), s("\u{FFFD}\n"));
    assert_eq!(parse(br#""\uD83D""#).unwrap(), s("\u{FFFD}"));
}

#[test]
fn raw_utf8_is_kept_and_invalid_utf8_is_an_error() {
    assert_eq!(parse("\"生产\"".as_bytes()).unwrap(), s("生产"));
    assert_eq!(
        parse("{生产:1}".as_bytes()).unwrap(),
        obj(&[("生产", Value::Int(1))])
    );
    assert!(parse(b"\"\xff\"").is_err());
    assert!(parse(b"\"a\\n\xc3\"").is_err());
    assert!(parse(b"{\xff:1}").is_err());
    assert!(parse(b"\xff").is_err());
}

#[test]
fn nesting_up_to_the_depth_limit_parses_and_beyond_it_fails() {
    let limits = Limits {
        max_depth: 4,
        max_string_len: 100,
    };
    assert!(parse_with(b"[[[[1]]]]", &limits).is_ok());
    let err = parse_with(b"[[[[[1]]]]]", &limits).unwrap_err();
    assert_eq!(err.offset, 4);
    assert!(parse_with(br#"{"a":{"b":{"c":{"d":{}}}}}"#, &limits).is_err());
    // The default limit holds against a deep hostile document without exhausting the stack.
    let deep = vec![b'['; 1_000_000];
    assert!(parse(&deep).is_err());
    let ok_depth = format!("{}{}", "[".repeat(64), "]".repeat(64));
    assert!(parse(ok_depth.as_bytes()).is_ok());
}

#[test]
fn strings_and_keys_longer_than_the_limit_fail() {
    let limits = Limits {
        max_depth: 8,
        max_string_len: 4,
    };
    assert_eq!(parse_with(br#""abcd""#, &limits).unwrap(), s("abcd"));
    assert!(parse_with(br#""abcde""#, &limits).is_err());
    assert!(parse_with(br#""ab\ncde""#, &limits).is_err());
    assert!(parse_with(br#"{"abcde":1}"#, &limits).is_err());
    assert!(parse_with(br#"{abcde:1}"#, &limits).is_err());
    assert!(parse_with(br#"["ab\u0041\u0042\u0043"]"#, &limits).is_err());
}

#[test]
fn numbers_are_ints_when_they_fit_and_floats_otherwise() {
    assert_eq!(parse(b"9223372036854775807").unwrap(), Value::Int(i64::MAX));
    assert_eq!(
        parse(b"-9223372036854775808").unwrap(),
        Value::Int(i64::MIN)
    );
    assert_eq!(
        parse(b"9223372036854775808").unwrap(),
        Value::Float(-(i64::MIN as f64))
    );
    assert_eq!(parse(b"1e3").unwrap(), Value::Float(1000.0));
    assert_eq!(parse(b"-0.25E-2").unwrap(), Value::Float(-0.0025));
    assert!(parse(b"-").is_err());
    assert!(parse(b"1.").is_err());
    assert!(parse(b"1e").is_err());
    assert!(parse(b".5").is_err());
}

#[test]
fn every_truncation_of_a_valid_document_is_an_error_not_a_panic() {
    let doc = br#"{"brokerAddrs":{0:"127.0.0.1:10911"},'s':"a\u00e9\uD83D\uDE00\n",n:-1.5e3,l:[true,false,null,,]}"#;
    assert!(parse(doc).is_ok());
    for end in 0..doc.len() {
        assert!(parse(&doc[..end]).is_err(), "prefix of {end} bytes parsed");
    }
}

#[test]
fn garbage_input_returns_errors_without_panicking() {
    let cases: &[&[u8]] = &[
        b"",
        b" ",
        b"}",
        b"]",
        b"{",
        b"[",
        b":",
        b",",
        b"{\"a\"}",
        b"{\"a\":}",
        b"{\"a\" 1}",
        b"[1 2]",
        b"{\"a\":1 \"b\":2}",
        b"tru",
        b"nul",
        b"falsey",
        b"undefined",
        b"\"",
        b"'",
        b"\"\\",
        b"\"\\u12",
        b"{:1}",
        b"{a:1",
        b"[\"a\",",
        b"{'a':'b'",
        b"+1",
        b"[}",
        b"{]",
        b"{\"a\":1]",
        b"[1}",
    ];
    for case in cases {
        assert!(
            parse(case).is_err(),
            "{:?} parsed",
            String::from_utf8_lossy(case)
        );
    }
    // Deterministic pseudo-random byte soup over the dialect's alphabet.
    let alphabet = b"{}[]:,\"'\\u0019-.eE tfn \xc3\xa9\xff";
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    for _ in 0..20_000 {
        let mut doc = Vec::new();
        for _ in 0..(state % 24) {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            doc.push(alphabet[(state % alphabet.len() as u64) as usize]);
        }
        let _ = parse(&doc);
    }
}

#[test]
fn get_takes_the_last_duplicate() {
    let v = parse(br#"{"a":1,"b":2,"a":3}"#).unwrap();
    assert_eq!(v.get("a"), Some(&Value::Int(3)));
    assert_eq!(v.get("c"), None);
    assert_eq!(Value::Int(1).get("a"), None);
}

#[test]
fn write_i64_writes_what_display_writes() {
    let mut values = vec![
        0,
        1,
        9,
        10,
        99,
        100,
        101,
        999,
        1000,
        i64::MIN,
        i64::MAX,
        -1,
        -10,
    ];
    let mut x: i64 = 1;
    while let Some(next) = x.checked_mul(7) {
        values.extend([x, x - 1, x + 1, -x, 1 - x]);
        x = next;
    }
    for p in 1..19 {
        let ten = 10i64.pow(p);
        values.extend([ten, ten - 1, ten + 1, -ten, 1 - ten]);
    }
    for v in values {
        let mut out = vec![b'x'];
        write_i64(&mut out, v);
        assert_eq!(out, format!("x{v}").into_bytes());
    }
}

#[test]
fn accessors_coerce_like_fastjson() {
    assert_eq!(s("4").as_i64(), Some(4));
    assert_eq!(s("-4").as_i64(), Some(-4));
    assert_eq!(s("+4").as_i64(), Some(4));
    assert_eq!(s("+-4").as_i64(), None);
    assert_eq!(s("4.5").as_i64(), None);
    assert_eq!(s("").as_i64(), None);
    assert_eq!(Value::Float(12.0).as_i64(), Some(12));
    assert_eq!(Value::Float(12.5).as_i64(), None);
    assert_eq!(Value::Float(1e300).as_i64(), None);
    assert_eq!(s("TRUE").as_bool(), Some(true));
    assert_eq!(s("False").as_bool(), Some(false));
    assert_eq!(Value::Int(1).as_bool(), Some(true));
    assert_eq!(Value::Int(0).as_bool(), Some(false));
    assert_eq!(Value::Int(2).as_bool(), None);
    assert_eq!(s("x").as_str(), Some("x"));
    assert_eq!(Value::Int(1).as_str(), None);
    assert!(Value::Null.is_null());
    assert_eq!(
        parse(b"[1]").unwrap().as_array(),
        Some(&[Value::Int(1)][..])
    );
    assert!(parse(b"{}").unwrap().as_object().is_some());
}

#[test]
fn to_text_renders_non_strings_as_fastjson_would() {
    assert_eq!(s("a\"b").to_text(), "a\"b");
    assert_eq!(Value::Int(3).to_text(), "3");
    assert_eq!(Value::Bool(true).to_text(), "true");
    assert_eq!(Value::Null.to_text(), "null");
    assert_eq!(Value::Float(1.5).to_text(), "1.5");
    assert_eq!(
        parse(br#"{0:"a",'b':[1,"x"]}"#).unwrap().to_text(),
        r#"{"0":"a","b":[1,"x"]}"#
    );
}

#[test]
fn written_values_read_back_unchanged() {
    let v = parse("{'k':[1,-2.5,\"é\\u0001\\\"\",null,{0:true}]}".as_bytes()).unwrap();
    let mut out = Vec::new();
    write_value(&mut out, &v);
    assert_eq!(parse(&out).unwrap(), v);
}

#[test]
fn write_str_escapes_quotes_backslashes_and_controls_only() {
    assert_eq!(default_escaped("a\"b\\c/d"), r#""a\"b\\c/d""#);
    assert_eq!(
        default_escaped("\u{8}\u{c}\n\r\t\u{1}\u{1f}"),
        r#""\b\f\n\r\t\u0001\u001F""#
    );
    assert_eq!(default_escaped("é生产😀\u{7f}"), "\"é生产😀\u{7f}\"");
    assert_eq!(default_escaped(""), "\"\"");
}

#[test]
fn write_str_browser_escapes_slash_and_everything_from_0x7f() {
    assert_eq!(browser("10.0.0.1/x"), r#""10.0.0.1\/x""#);
    assert_eq!(browser("é"), r#""\u00E9""#);
    assert_eq!(browser("😀"), r#""\uD83D\uDE00""#);
    assert_eq!(browser("生产"), r#""\u751F\u4EA7""#);
    assert_eq!(browser("\u{7f}~"), r#""\u007F~""#);
    assert_eq!(browser("a\"\\\n\u{1}"), r#""a\"\\\n\u0001""#);
    // What the browser escaper writes reads back as the original text.
    let text = "x/é😀\"\u{1}生";
    assert_eq!(parse(browser(text).as_bytes()).unwrap(), s(text));
}

#[test]
fn seq_places_commas_between_elements_only() {
    let mut out = Vec::new();
    let mut object = Seq::object(&mut out);
    Seq::array(object.field("empty")).end();
    let mut items = Seq::array(object.key("k\"ey"));
    write_i64(items.item(), 1);
    write_bool(items.item(), true);
    items.end();
    Seq::object(object.field("last")).end();
    object.end();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        r#"{"empty":[],"k\"ey":[1,true],"last":{}}"#
    );
}

#[test]
fn write_key_and_numbers_are_plain_text() {
    let mut out = Vec::new();
    write_key(&mut out, "brokerAddrs");
    write_i64(&mut out, 0);
    out.push(b',');
    write_i64(&mut out, i64::MIN);
    out.push(b',');
    write_i64(&mut out, i64::MAX);
    out.push(b',');
    write_i64(&mut out, -42);
    out.push(b',');
    write_bool(&mut out, false);
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "\"brokerAddrs\":0,-9223372036854775808,9223372036854775807,-42,false"
    );
}

#[test]
fn legacy_cluster_info_fixture_parses_with_numeric_broker_ids() {
    let v = fixture("cluster_info_fastjson_legacy.json");
    let broker = v
        .get("brokerAddrTable")
        .and_then(|t| t.get("broker-a"))
        .unwrap();
    assert_eq!(
        broker.get("brokerAddrs").unwrap(),
        &obj(&[("0", s("127.0.0.1:10911"))])
    );
    assert_eq!(
        broker.get("cluster").and_then(Value::as_str),
        Some("DefaultCluster")
    );
    assert_eq!(
        broker.get("enableActingMaster").and_then(Value::as_bool),
        Some(false)
    );
    let clusters = v
        .get("clusterAddrTable")
        .and_then(|t| t.get("DefaultCluster"))
        .unwrap();
    assert_eq!(clusters, &Value::Array(vec![s("broker-a")]));
}

#[test]
fn legacy_topic_route_fixture_parses_with_numeric_keys() {
    let v = fixture("topic_route_data_fastjson_legacy.json");
    let broker = &v.get("brokerDatas").and_then(Value::as_array).unwrap()[0];
    assert_eq!(
        broker.get("brokerName").and_then(Value::as_str),
        Some("interopBroker")
    );
    assert_eq!(
        broker.get("brokerAddrs").and_then(|a| a.get("0")),
        Some(&s("127.0.0.1:10911"))
    );
    let queue = &v.get("queueDatas").and_then(Value::as_array).unwrap()[0];
    assert_eq!(queue.get("perm").and_then(Value::as_i64), Some(6));
    assert_eq!(queue.get("writeQueueNums").and_then(Value::as_i64), Some(4));
    let mapping = v
        .get("topicQueueMappingByBroker")
        .and_then(|m| m.get("interopBroker"))
        .unwrap();
    assert_eq!(
        mapping.get("currIdMap").unwrap(),
        &obj(&[("0", Value::Int(0))])
    );
    assert_eq!(mapping.get("epoch").and_then(Value::as_i64), Some(1));
    assert_eq!(mapping.get("scope").and_then(Value::as_str), Some("ScopeA"));
    assert_eq!(v.get("filterServerTable"), Some(&Value::Object(vec![])));
}

#[test]
fn kv_config_fixture_parses_with_non_ascii_value() {
    let v = fixture("kvconfig_file_java.json");
    let table = v.get("configTable").unwrap();
    assert_eq!(
        table
            .get("ORDER_TOPIC_CONFIG")
            .and_then(|n| n.get("orders-eu")),
        Some(&s("broker-a:4;broker-b:4"))
    );
    assert_eq!(
        table
            .get("PROJECT_CONFIG")
            .and_then(|n| n.get("tenant-unicode")),
        Some(&s("生产"))
    );
}

#[test]
fn zone_route_fixture_parses_with_nulls() {
    let v = fixture("zone_route_cases.json");
    let brokers = v
        .get("route")
        .and_then(|r| r.get("brokerDatas"))
        .and_then(Value::as_array)
        .unwrap();
    assert_eq!(brokers.len(), 5);
    assert!(brokers[2].get("zoneName").unwrap().is_null());
    assert_eq!(
        brokers[4]
            .get("enableActingMaster")
            .and_then(Value::as_bool),
        Some(true)
    );
    let cases = v.get("cases").and_then(Value::as_array).unwrap();
    assert_eq!(cases.len(), 8);
    assert_eq!(cases[0].get("zoneMode"), Some(&Value::Null));
}

#[test]
fn delete_topic_fixtures_parse() {
    for name in [
        "delete_topic_in_namesrv_216_json.json",
        "delete_topic_in_namesrv_216_rocketmq.json",
    ] {
        let v = fixture(name);
        assert_eq!(v.get("requestCodeValue").and_then(Value::as_i64), Some(216));
        let ext = v.get("canonicalExtFields").unwrap();
        assert_eq!(ext.get("topic").and_then(Value::as_str), Some("TopicA"));
        assert_eq!(ext.get("lo").and_then(Value::as_bool), Some(true));
        assert_eq!(
            v.get("inputFields").and_then(|f| f.get("oway")),
            Some(&Value::Bool(false))
        );
    }
}

#[test]
fn real_4x_register_broker_body_parses_with_expected_values() {
    let v = fixture("third_party/register_broker_103_body_v4.json");
    assert_eq!(v.get("filterServerList"), Some(&Value::Array(vec![])));
    let wrapper = v.get("topicConfigSerializeWrapper").unwrap();
    let data_version = wrapper.get("dataVersion").unwrap();
    assert_eq!(
        data_version.get("counter").and_then(Value::as_i64),
        Some(293)
    );
    assert_eq!(
        data_version.get("timestamp").and_then(Value::as_i64),
        Some(1_645_882_625_002)
    );
    assert_eq!(data_version.get("stateVersion"), None);
    let topics = wrapper
        .get("topicConfigTable")
        .and_then(Value::as_object)
        .unwrap();
    assert_eq!(topics.len(), 16);
    let test = wrapper
        .get("topicConfigTable")
        .and_then(|t| t.get("TopicTest"))
        .unwrap();
    assert_eq!(
        test.get("topicName").and_then(Value::as_str),
        Some("TopicTest")
    );
    assert_eq!(test.get("readQueueNums").and_then(Value::as_i64), Some(8));
    assert_eq!(test.get("perm").and_then(Value::as_i64), Some(6));
    assert_eq!(test.get("order").and_then(Value::as_bool), Some(false));
    let header = fixture("third_party/register_broker_103_extfields_v4.json");
    assert_eq!(
        header.get("bodyCrc32").and_then(Value::as_i64),
        Some(1_794_280_071)
    );
    assert_eq!(
        header.get("compressed").and_then(Value::as_bool),
        Some(false)
    );
}

#[test]
fn every_json_fixture_parses() {
    let mut count = 0;
    for dir in [fixtures_dir(), fixtures_dir().join("third_party")] {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "json") {
                let bytes = std::fs::read(&path).unwrap();
                assert!(parse(&bytes).is_ok(), "{} did not parse", path.display());
                count += 1;
            }
        }
    }
    assert!(count >= 8, "found only {count} fixtures");
}

/// A 5.x RegisterBrokerBody (docs/protocol.md §4.1) with `topics` topics and a few
/// static-topic mappings with bare integer `currIdMap` keys.
fn synthetic_register_body(topics: usize) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(b"{\"filterServerList\":[],\"topicConfigSerializeWrapper\":{");
    out.extend_from_slice(
        b"\"dataVersion\":{\"counter\":12,\"stateVersion\":0,\"timestamp\":1700000000000},",
    );
    out.extend_from_slice(
        b"\"mappingDataVersion\":{\"counter\":0,\"stateVersion\":0,\"timestamp\":1700000000000},",
    );
    out.extend_from_slice(b"\"topicConfigTable\":{");
    for i in 0..topics {
        if i > 0 {
            out.push(b',');
        }
        let name = format!("BenchmarkTopic_{i:05}_with_a_longer_name");
        write_key(&mut out, &name);
        out.extend_from_slice(
            b"{\"attributes\":{},\"order\":false,\"perm\":6,\"readQueueNums\":8,",
        );
        out.extend_from_slice(b"\"topicFilterType\":\"SINGLE_TAG\",\"topicName\":");
        write_str(&mut out, &name);
        out.extend_from_slice(b",\"topicSysFlag\":0,\"writeQueueNums\":8}");
    }
    out.extend_from_slice(b"},\"topicQueueMappingDetailMap\":{},\"topicQueueMappingInfoMap\":{");
    out.extend_from_slice(
        b"\"StaticT\":{\"bname\":\"broker-a\",\"currIdMap\":{0:0,1:1},\"dirty\":false,\"epoch\":1700000000000,\"scope\":\"__global__\",\"topic\":\"StaticT\",\"totalQueues\":8}",
    );
    out.extend_from_slice(b"}}}");
    out
}

#[test]
fn synthetic_5x_register_body_parses_with_all_topics() {
    let body = synthetic_register_body(1000);
    let v = parse(&body).unwrap();
    let wrapper = v.get("topicConfigSerializeWrapper").unwrap();
    let topics = wrapper
        .get("topicConfigTable")
        .and_then(Value::as_object)
        .unwrap();
    assert_eq!(topics.len(), 1000);
    assert_eq!(
        topics[999].1.get("topicName").and_then(Value::as_str),
        Some("BenchmarkTopic_00999_with_a_longer_name")
    );
    let mapping = wrapper
        .get("topicQueueMappingInfoMap")
        .and_then(|m| m.get("StaticT"))
        .unwrap();
    assert_eq!(
        mapping.get("currIdMap").and_then(|c| c.get("1")),
        Some(&Value::Int(1))
    );
}

// ---- borrowed documents ----

fn doc(input: &[u8]) -> Document<'_> {
    parse_borrowed(input, &Limits::default()).unwrap()
}

/// Whether `s` points into `input` (a borrowed, not a decoded, string).
fn borrows_from(s: &str, input: &[u8]) -> bool {
    let range = input.as_ptr_range();
    range.contains(&s.as_ptr()) && s.len() <= input.len()
}

#[test]
fn borrowed_strings_without_escapes_point_into_the_input() {
    let input = br#"{"plain":"text","esc\u0041ped":"a\nb",bare:'single'}"#;
    let d = doc(input);
    let members: Vec<(&str, ValueRef<'_>)> = d.root().members().unwrap().collect();
    let keys: Vec<&str> = members.iter().map(|(k, _)| *k).collect();
    assert_eq!(keys, ["plain", "escAped", "bare"]);
    assert!(borrows_from(keys[0], input));
    assert!(!borrows_from(keys[1], input));
    assert!(borrows_from(keys[2], input));
    let text = members[0].1.as_str().unwrap();
    assert_eq!(text, "text");
    assert!(borrows_from(text, input));
    assert_eq!(members[1].1.as_str(), Some("a\nb"));
    assert_eq!(members[2].1.as_str(), Some("single"));
    assert!(borrows_from(members[2].1.as_str().unwrap(), input));
}

#[test]
fn borrowed_dialect_cases_match_the_owned_tree() {
    let cases: &[&[u8]] = &[
        br#"{0:"a",1:"b",-1:"c",topic:"x",$_k9:1}"#,
        b"{ 12 : 0 }",
        br#"{'k':'it\'s "quoted"', "d":'x'}"#,
        b"[1,,2,]",
        br#"{,"a":1,,"b":2,}"#,
        br#""q\"b\\s\/n\nr\rt\tb\bf\f u\u0041\u00e9\u4E2D""#,
        br#""\x41""#,
        br#"["\uD83D\uDE00","\ud83d\ude00!","a\uD83Db","\uDE00","\uD83D\u0041","\uD83D\n","\uD83D"]"#,
        "{生产:\"生产\"}".as_bytes(),
        b"[9223372036854775807,-9223372036854775808,9223372036854775808,1e3,-0.25E-2]",
        b"\xEF\xBB\xBF {\"bom\":true} \n",
        br#"{"a":[1,[2,{"x":3}],[],{},4],"b":{"c":{}},"d":null,"e":"",'f':[[[]]]}"#,
    ];
    for case in cases {
        let owned = parse(case).unwrap();
        let d = doc(case);
        assert_eq!(
            d.root().to_value(),
            owned,
            "{}",
            String::from_utf8_lossy(case)
        );
        // Walking members/items by hand gives the same tree as to_value.
        assert_eq!(
            rebuild(d.root()),
            owned,
            "{}",
            String::from_utf8_lossy(case)
        );
    }
}

/// Rebuilds an owned tree through the public ValueRef API only.
fn rebuild(v: ValueRef<'_>) -> Value {
    if let Some(members) = v.members() {
        assert_eq!(members.len(), members.clone().count());
        return Value::Object(members.map(|(k, v)| (k.to_owned(), rebuild(v))).collect());
    }
    if let Some(items) = v.items() {
        assert_eq!(items.len(), items.clone().count());
        return Value::Array(items.map(rebuild).collect());
    }
    let owned = v.to_value();
    // The scalar accessors agree with the owned tree's.
    assert_eq!(v.as_str(), owned.as_str());
    assert_eq!(v.as_i64(), owned.as_i64());
    assert_eq!(v.as_bool(), owned.as_bool());
    assert_eq!(v.is_null(), owned.is_null());
    assert_eq!(v.to_text(), owned.to_text());
    owned
}

#[test]
fn borrowed_accessors_coerce_like_the_owned_tree() {
    let d = doc(br#"["4","-4","+4","+-4","4.5","",12.0,12.5,1e300,1099511627776,"-7","TRUE","False",1,0,2,true,null,"x",[1],{"a":1}]"#);
    let items: Vec<ValueRef<'_>> = d.root().items().unwrap().collect();
    assert_eq!(items.len(), 21);
    for item in &items {
        rebuild(*item);
    }
    assert_eq!(items[0].as_i64(), Some(4));
    assert_eq!(items[3].as_i64(), None);
    assert_eq!(items[6].as_i64(), Some(12));
    assert_eq!(items[9].as_i32(), None);
    assert_eq!(items[11].as_bool(), Some(true));
    assert_eq!(items[15].as_bool(), None);
    assert_eq!(items[19].to_text(), "[1]");
    assert_eq!(items[20].to_text(), r#"{"a":1}"#);
    assert!(items[20].as_str().is_none() && items[20].items().is_none());
    assert!(items[19].members().is_none());
}

#[test]
fn get_and_get_many_take_the_last_duplicate_and_skip_nested_containers() {
    let d = doc(br#"{"a":1,"n":{"a":9,"b":[{"a":8}]},"b":2,"a":3,"z":null}"#);
    let root = d.root();
    assert_eq!(root.get("a").and_then(|v| v.as_i64()), Some(3));
    assert_eq!(root.get("c").map(|v| v.to_value()), None);
    assert!(root.get("z").unwrap().is_null());
    let [a, b, n, c] = root.get_many(["a", "b", "n", "c"]);
    assert_eq!(a.and_then(|v| v.as_i64()), Some(3));
    assert_eq!(b.and_then(|v| v.as_i64()), Some(2));
    assert_eq!(
        n.and_then(|n| n.get("b"))
            .and_then(|b| b.items())
            .map(|items| items.len()),
        Some(1)
    );
    assert!(c.is_none());
    // Not an object: nothing found.
    let d = doc(b"[1]");
    assert!(d.root().get("a").is_none());
    assert!(d.root().get_many(["a", "b"]).iter().all(Option::is_none));
}

#[test]
fn borrowed_limits_and_errors_match_the_owned_parser() {
    let limits = Limits {
        max_depth: 4,
        max_string_len: 4,
    };
    assert!(parse_borrowed(b"[[[[1]]]]", &limits).is_ok());
    assert_eq!(
        parse_borrowed(b"[[[[[1]]]]]", &limits).unwrap_err().offset,
        4
    );
    assert!(parse_borrowed(br#"["abcd"]"#, &limits).is_ok());
    assert!(parse_borrowed(br#"["abcde"]"#, &limits).is_err());
    assert!(parse_borrowed(br#"{abcde:1}"#, &limits).is_err());
    assert!(parse_borrowed(br#"["ab\u0041\u0042\u0043"]"#, &limits).is_err());
    let deep = vec![b'['; 1_000_000];
    assert!(parse_borrowed(&deep, &Limits::default()).is_err());
    // Invalid UTF-8 is reported where the string or key starts, or as stray bytes.
    let err = |input: &[u8]| parse_borrowed(input, &Limits::default()).unwrap_err();
    assert_eq!(
        err(b"{} \xff"),
        JsonError {
            offset: 3,
            message: "unexpected characters after the value"
        }
    );
    assert_eq!(
        err(b"[\"ab\xff\"]"),
        JsonError {
            offset: 2,
            message: "invalid UTF-8 in string"
        }
    );
    assert_eq!(
        err(b"[\"a\\n\xc3\"]"),
        JsonError {
            offset: 2,
            message: "invalid UTF-8 in string"
        }
    );
    assert_eq!(
        err(b"{\xff:1}"),
        JsonError {
            offset: 1,
            message: "invalid UTF-8 in key"
        }
    );
}

#[test]
fn borrowed_garbage_and_truncations_are_errors_never_panics() {
    let doc_bytes = br#"{"brokerAddrs":{0:"127.0.0.1:10911"},'s':"a\u00e9\uD83D\uDE00\n",n:-1.5e3,l:[true,false,null,,]}"#;
    for end in 0..doc_bytes.len() {
        assert!(parse_borrowed(&doc_bytes[..end], &Limits::default()).is_err());
    }
    // Random byte soup over the dialect's alphabet, and valid documents with a few bytes
    // replaced: whatever parses can be walked completely.
    let alphabet = b"{}[]:,\"'\\u0019-.eE tfn \xc3\xa9\xff";
    let mut state: u64 = 0x2545_F491_4F6C_DD1D;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut parsed = 0;
    for round in 0..20_000 {
        let input: Vec<u8> = if round % 2 == 0 {
            (0..next() % 24)
                .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
                .collect()
        } else {
            let mut input = doc_bytes.to_vec();
            for _ in 0..1 + next() % 2 {
                let at = (next() % input.len() as u64) as usize;
                input[at] = alphabet[(next() % alphabet.len() as u64) as usize];
            }
            input
        };
        let result = parse_borrowed(&input, &Limits::default());
        if let Ok(d) = &result {
            rebuild(d.root());
            parsed += 1;
        }
    }
    assert!(parsed > 100, "only {parsed} inputs parsed");
}

#[test]
fn slot_buffers_are_reused_safely_across_documents() {
    let small = doc(br#"{"a":[1,2,3]}"#);
    let big_body = synthetic_register_body(50);
    let big = doc(&big_body);
    // Two live documents never share a buffer.
    assert_eq!(small.root().to_value(), parse(br#"{"a":[1,2,3]}"#).unwrap());
    assert_eq!(big.root().to_value(), parse(&big_body).unwrap());
    drop(big);
    drop(small);
    // A buffer larger than the spare limit is not kept, and nothing else breaks.
    let huge: Vec<u8> = format!("[{}1]", "1,".repeat(MAX_SPARE_SLOTS + 10)).into_bytes();
    let d = doc(&huge);
    assert_eq!(d.root().items().unwrap().len(), MAX_SPARE_SLOTS + 11);
    drop(d);
    for _ in 0..3 {
        let d = doc(&big_body);
        let table = d
            .root()
            .get("topicConfigSerializeWrapper")
            .and_then(|w| w.get("topicConfigTable"))
            .and_then(|t| t.members())
            .unwrap();
        assert_eq!(table.len(), 50);
    }
    // A failed parse hands its buffers back too, its stack of open containers left
    // half full: the next document starts from an empty one.
    assert!(parse_borrowed(b"[1,2,", &Limits::default()).is_err());
    assert!(parse_borrowed(br#"{"a":[{"b":[1"#, &Limits::default()).is_err());
    assert_eq!(
        doc(br#"{"x":{}}"#).root().to_value(),
        obj(&[("x", Value::Object(vec![]))])
    );
    assert_eq!(
        doc(b"[7]").root().to_value(),
        Value::Array(vec![Value::Int(7)])
    );
}

#[test]
fn word_at_a_time_scan_finds_the_first_quote_or_backslash() {
    // Bytes around the targets stress the zero-byte trick (0x00, 0x01, bytes one off the
    // targets, high bytes).
    let fillers = [
        b'a',
        0x00,
        0x01,
        b'!',
        b'#',
        b'[',
        b']',
        0x80,
        0xff,
        0x22 ^ 0x80,
    ];
    for len in 0..24 {
        for &filler in &fillers {
            let base = vec![filler; len];
            assert_eq!(find_quote_or_backslash(&base, b'"'), None, "{base:?}");
            for at in 0..len {
                for (target, quote) in [(b'"', b'"'), (b'\\', b'"'), (b'\'', b'\'')] {
                    let mut bytes = base.clone();
                    bytes[at] = target;
                    if at + 1 < len {
                        bytes[at + 1] = b'"';
                    }
                    assert_eq!(
                        find_quote_or_backslash(&bytes, quote),
                        Some(at),
                        "{bytes:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn synthetic_5x_register_body_reads_through_the_borrowed_path() {
    let body = synthetic_register_body(1000);
    let d = doc(&body);
    let wrapper = d.root().get("topicConfigSerializeWrapper").unwrap();
    let topics: Vec<(&str, ValueRef<'_>)> = wrapper
        .get("topicConfigTable")
        .and_then(|t| t.members())
        .unwrap()
        .collect();
    assert_eq!(topics.len(), 1000);
    let (key, last) = topics[999];
    assert_eq!(key, "BenchmarkTopic_00999_with_a_longer_name");
    assert!(borrows_from(key, &body));
    let [name, perm] = last.get_many(["topicName", "perm"]);
    assert_eq!(name.and_then(|n| n.as_str()), Some(key));
    assert_eq!(perm.and_then(|p| p.as_i32()), Some(6));
    let curr = wrapper
        .get("topicQueueMappingInfoMap")
        .and_then(|m| m.get("StaticT"))
        .and_then(|m| m.get("currIdMap"))
        .unwrap();
    let ids: Vec<(&str, i64)> = curr
        .members()
        .unwrap()
        .map(|(k, v)| (k, v.as_i64().unwrap()))
        .collect();
    assert_eq!(ids, [("0", 0), ("1", 1)]);
}
