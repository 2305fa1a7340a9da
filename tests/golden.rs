//! Golden bytes: the captured and reference payloads in tests/fixtures go through the
//! real server over TCP, and the answers are compared byte for byte with what docs/protocol.md says
//! the Java 5.x NameServer returns for them (JSON header, fastjson field order, `language`
//! JAVA, `version` 479, `flag` 1, the request's opaque; bodies in the dialect §6.1 picks).

mod common;

use common::*;
use rmq_namesrv::remoting::codes::request;
use rmq_namesrv::remoting::json;
use rmq_namesrv::route::model;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::fixture;

fn hex_fixture(name: &str) -> Vec<u8> {
    let text = String::from_utf8(fixture(name)).expect("hex text");
    let digits: Vec<u8> = text.bytes().filter(|b| b.is_ascii_hexdigit()).collect();
    digits
        .chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).expect("ascii"), 16).expect("hex"))
        .collect()
}

/// Standard base64 (the 216 fixtures carry whole frames as `frameBase64`).
fn base64_decode(text: &str) -> Vec<u8> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = Vec::new();
    let mut acc = 0u32;
    let mut bits = 0;
    for c in text
        .bytes()
        .filter(|c| !c.is_ascii_whitespace() && *c != b'=')
    {
        let v = ALPHABET.iter().position(|a| *a == c).expect("base64 digit") as u32;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    out
}

/// A whole frame as Java's NettyEncoder writes it: JSON header, then the body.
fn json_frame(header: &str, body: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&((4 + header.len() + body.len()) as u32).to_be_bytes());
    f.extend_from_slice(&(header.len() as u32).to_be_bytes());
    f.extend_from_slice(header.as_bytes());
    f.extend_from_slice(body);
    f
}

/// The response header the Java 5.3.3 NameServer writes (fastjson, alphabetical, nulls
/// omitted; `ext` = None when the handler used no custom header class).
fn java_header(code: i32, ext: Option<&str>, opaque: i32, remark: Option<&str>) -> String {
    let mut h = format!("{{\"code\":{code}");
    if let Some(ext) = ext {
        h.push_str(&format!(",\"extFields\":{ext}"));
    }
    h.push_str(&format!(
        ",\"flag\":1,\"language\":\"JAVA\",\"opaque\":{opaque}"
    ));
    if let Some(r) = remark {
        let mut quoted = Vec::new();
        json::write_str(&mut quoted, r);
        h.push_str(&format!(
            ",\"remark\":{}",
            String::from_utf8(quoted).expect("utf8")
        ));
    }
    h.push_str(",\"serializeTypeCurrentRPC\":\"JSON\",\"version\":479}");
    h
}

/// A raw connection: whole frames out, whole frames (with their length prefix) in.
struct Raw(TcpStream);

impl Raw {
    fn connect(server: &TestServer) -> Raw {
        let s = TcpStream::connect(&server.addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        Raw(s)
    }

    fn send(&mut self, frame: &[u8]) {
        self.0.write_all(frame).expect("send");
    }

    fn recv(&mut self) -> Vec<u8> {
        let mut len = [0u8; 4];
        self.0.read_exact(&mut len).expect("length prefix");
        let n = u32::from_be_bytes(len) as usize;
        let mut frame = len.to_vec();
        frame.resize(4 + n, 0);
        self.0.read_exact(&mut frame[4..]).expect("frame");
        frame
    }

    fn exchange(&mut self, frame: &[u8]) -> Vec<u8> {
        self.send(frame);
        self.recv()
    }
}

/// Header text and body of a JSON-typed response frame.
fn split(frame: &[u8]) -> (String, Vec<u8>) {
    let word = u32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
    assert_eq!(word >> 24, 0, "response header must be JSON (type 0)");
    let hlen = (word & 0x00FF_FFFF) as usize;
    let header = String::from_utf8(frame[8..8 + hlen].to_vec()).expect("utf8 header");
    (header, frame[8 + hlen..].to_vec())
}

/// Asserts `got` is exactly the frame Java writes, showing header text on mismatch.
fn assert_frame(got: &[u8], header: &str, body: &[u8]) {
    let (gh, gb) = split(got);
    assert_eq!(gh, header, "response header");
    assert_eq!(
        String::from_utf8_lossy(&gb),
        String::from_utf8_lossy(body),
        "response body"
    );
    assert_eq!(got, json_frame(header, body).as_slice(), "whole frame");
}

/// A request nobody answers must not produce a frame: the next frame on the connection is the
/// answer to a follow-up request.
fn assert_next_answer_is_for(raw: &mut Raw, opaque: i32) {
    let probe = format!(
        "{{\"code\":206,\"flag\":0,\"language\":\"JAVA\",\"opaque\":{opaque},\"serializeTypeCurrentRPC\":\"JSON\",\"version\":479}}"
    );
    let got = raw.exchange(&json_frame(&probe, b""));
    let (h, _) = split(&got);
    assert!(
        h.contains(&format!("\"opaque\":{opaque},")),
        "expected the answer to the probe, got {h}"
    );
}

// ------------------------------------------------------------------------------------------
// Frames
// ------------------------------------------------------------------------------------------

#[test]
fn golden_json_request_frame_is_answered_with_a_java_shaped_frame() {
    let server = TestServer::start();
    let mut raw = Raw::connect(&server);
    // code 31 with "remark" and unordered keys: not a NameServer code.
    let got = raw.exchange(&hex_fixture("frame_golden_json_request_frame.hex"));
    assert_frame(
        &got,
        &java_header(3, None, 16909060, Some(" request type 31 not supported")),
        b"",
    );
}

#[test]
fn golden_rocketmq_request_frame_is_oneway_and_gets_no_answer() {
    let server = TestServer::start();
    let mut raw = Raw::connect(&server);
    raw.send(&hex_fixture("frame_golden_rocketmq_request_frame.hex"));
    assert_next_answer_is_for(&mut raw, 11);
}

#[test]
fn golden_rocketmq_request_without_the_oneway_bit_is_answered_in_json() {
    // The same binary frame with flag 0: 5.x answers in its own type (JSON), echoing the
    // opaque 0x7FFFFFFF bit-exactly.
    let server = TestServer::start();
    let mut raw = Raw::connect(&server);
    let mut frame = hex_fixture("frame_golden_rocketmq_request_frame.hex");
    // length(4) type word(4) code(2) language(1) version(2) opaque(4) flag(4)
    assert_eq!(&frame[17..21], &[0, 0, 0, 2], "fixture's flag is oneway");
    frame[17..21].copy_from_slice(&[0, 0, 0, 0]);
    let got = raw.exchange(&frame);
    assert_frame(
        &got,
        &java_header(3, None, i32::MAX, Some(" request type 31 not supported")),
        b"",
    );
}

#[test]
fn golden_response_frames_sent_to_the_server_are_dropped_not_answered() {
    let server = TestServer::start();
    let mut raw = Raw::connect(&server);
    for name in [
        "frame_golden_json_response_frame.hex",
        "frame_golden_rocketmq_response_frame.hex",
        "frame_rocketmq_binary_response_v1.hex",
    ] {
        raw.send(&hex_fixture(name));
    }
    assert_next_answer_is_for(&mut raw, 12);
}

// ------------------------------------------------------------------------------------------
// DELETE_TOPIC_IN_NAMESRV (216) frames with inherited header fields
// ------------------------------------------------------------------------------------------

fn frame_of_216_fixture(name: &str) -> Vec<u8> {
    let doc = json::parse(&fixture(name)).expect("fixture JSON");
    let b64 = doc
        .get("frameBase64")
        .and_then(|v| v.as_str())
        .expect("frameBase64");
    let frame = base64_decode(b64);
    let want_len = doc
        .get("frameLength")
        .and_then(|v| v.as_i64())
        .expect("len");
    assert_eq!(
        frame.len() as i64,
        want_len,
        "{name} decodes to frameLength bytes"
    );
    frame
}

#[test]
fn golden_216_frames_delete_the_topic_in_the_named_cluster() {
    for name in [
        "delete_topic_in_namesrv_216_json.json",
        "delete_topic_in_namesrv_216_rocketmq.json",
    ] {
        let server = TestServer::start();
        let mut c = server.client();
        let a = Broker::new("DefaultCluster", "broker-a", "10.0.0.1:10911", 0);
        let b = Broker::new("OtherCluster", "broker-b", "10.0.0.2:10911", 0);
        assert_eq!(
            register(&mut c, &a, &body_with(1, &[topic("TopicA", 4, 6)])).code,
            0
        );
        assert_eq!(
            register(&mut c, &b, &body_with(1, &[topic("TopicA", 2, 6)])).code,
            0
        );

        let mut raw = Raw::connect(&server);
        let got = raw.exchange(&frame_of_216_fixture(name));
        // deleteTopicInNamesrv answers createResponseCommand(null): no extFields.
        assert_frame(&got, &java_header(0, None, 7, None), b"");

        // clusterName=DefaultCluster: only broker-a's queues went.
        let r = route_data(&mut c, "TopicA").expect("broker-b still serves TopicA");
        let names: Vec<&str> = r
            .queue_datas
            .iter()
            .map(|q| q.broker_name.as_str())
            .collect();
        assert_eq!(names, ["broker-b"], "{name}");
        assert_eq!(r.broker_datas.len(), 1);
        assert_eq!(r.broker_datas[0].broker_name, "broker-b");
    }
}

// ------------------------------------------------------------------------------------------
// The real 4.x REGISTER_BROKER capture
// ------------------------------------------------------------------------------------------

/// The capture's ext fields as (key, value) pairs, in the capture's order.
fn capture_ext() -> Vec<(String, String)> {
    let v = json::parse(&fixture(
        "third_party/register_broker_103_extfields_v4.json",
    ))
    .expect("ext JSON");
    v.as_object()
        .expect("object")
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().expect("string value").to_string()))
        .collect()
}

fn capture_body() -> Vec<u8> {
    fixture("third_party/register_broker_103_body_v4.json")
}

/// A REGISTER_BROKER request header in the given style (`java`: as a Java 4.9.x broker sends
/// it, with serializeTypeCurrentRPC; otherwise Go/C++ style without it, `remark:""`).
fn register_header(ext: &[(String, String)], opaque: i32, version: i32, java: bool) -> String {
    let mut e = Vec::new();
    e.push(b'{');
    for (i, (k, v)) in ext.iter().enumerate() {
        if i > 0 {
            e.push(b',');
        }
        json::write_key(&mut e, k);
        json::write_str(&mut e, v);
    }
    e.push(b'}');
    let ext = String::from_utf8(e).expect("utf8");
    if java {
        format!("{{\"code\":103,\"extFields\":{ext},\"flag\":0,\"language\":\"JAVA\",\"opaque\":{opaque},\"serializeTypeCurrentRPC\":\"JSON\",\"version\":{version}}}")
    } else {
        format!("{{\"code\":103,\"language\":\"GO\",\"version\":{version},\"opaque\":{opaque},\"flag\":0,\"remark\":\"\",\"extFields\":{ext}}}\n")
    }
}

fn route_request(topic: &str, opaque: i32, version: i32) -> Vec<u8> {
    json_frame(
        &format!("{{\"code\":105,\"extFields\":{{\"topic\":\"{topic}\"}},\"flag\":0,\"language\":\"JAVA\",\"opaque\":{opaque},\"serializeTypeCurrentRPC\":\"JSON\",\"version\":{version}}}"),
        b"",
    )
}

/// (topicName, readQueueNums, writeQueueNums, perm, topicSysFlag) of every capture topic.
fn capture_topics() -> Vec<(String, i64, i64, i64, i64)> {
    let body = json::parse(&capture_body()).expect("capture body");
    let table = body
        .get("topicConfigSerializeWrapper")
        .and_then(|w| w.get("topicConfigTable"))
        .and_then(|t| t.as_object())
        .expect("topicConfigTable");
    table
        .iter()
        .map(|(_, tc)| {
            let n = |k: &str| tc.get(k).and_then(|v| v.as_i64()).expect(k);
            let name = tc.get("topicName").and_then(|v| v.as_str()).expect("name");
            (
                name.to_string(),
                n("readQueueNums"),
                n("writeQueueNums"),
                n("perm"),
                n("topicSysFlag"),
            )
        })
        .collect()
}

fn ext_value<'a>(ext: &'a [(String, String)], key: &str) -> &'a str {
    ext.iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
        .expect(key)
}

#[test]
fn golden_4x_registration_registers_with_its_crc_and_routes_read_back_as_java_writes_them() {
    let server = TestServer::start();
    let ext = capture_ext();
    let body = capture_body();
    // The capture's CRC is the real one.
    assert_eq!(
        (rmq_namesrv::checksum::crc32(&body) & 0x7FFF_FFFF).to_string(),
        ext_value(&ext, "bodyCrc32")
    );
    let addr = ext_value(&ext, "brokerAddr").to_string();
    let mut raw = Raw::connect(&server);

    // A 4.9.3 broker (version 399). No enableActingMaster: an old-version broker.
    let got = raw.exchange(&json_frame(&register_header(&ext, 41, 399, true), &body));
    // RegisterBrokerResponseHeader, nothing to say to a master; no ORDER_TOPIC_CONFIG ⇒ no body.
    assert_frame(&got, &java_header(0, Some("{}"), 41, None), b"");

    // 105 for a client older than 4.9.4: legacy dialect (bare numeric keys).
    let legacy = format!(
        "{{\"brokerDatas\":[{{\"brokerAddrs\":{{0:\"{addr}\"}},\"brokerName\":\"broker-a\",\"cluster\":\"DefaultCluster\",\"enableActingMaster\":false}}],\"filterServerTable\":{{}},\"queueDatas\":[{{\"brokerName\":\"broker-a\",\"perm\":6,\"readQueueNums\":8,\"topicSysFlag\":0,\"writeQueueNums\":8}}]}}"
    );
    let got = raw.exchange(&route_request("TopicTest", 42, 333));
    assert_frame(&got, &java_header(0, None, 42, None), legacy.as_bytes());
    // ... and the standard dialect from 4.9.4 (401) on.
    let standard = legacy.replace("{0:", "{\"0\":");
    for (opaque, version) in [(43, 401), (44, 479)] {
        let got = raw.exchange(&route_request("TopicTest", opaque, version));
        assert_frame(
            &got,
            &java_header(0, None, opaque, None),
            standard.as_bytes(),
        );
    }

    // 106: ClusterInfo, always legacy; the fixture's shape with this broker's address.
    let want = String::from_utf8(fixture("cluster_info_fastjson_legacy.json"))
        .expect("utf8")
        .trim_end()
        .replace("127.0.0.1:10911", &addr);
    let got = raw.exchange(&json_frame(
        "{\"code\":106,\"flag\":0,\"language\":\"JAVA\",\"opaque\":45,\"serializeTypeCurrentRPC\":\"JSON\",\"version\":479}",
        b"",
    ));
    assert_frame(&got, &java_header(0, None, 45, None), want.as_bytes());

    // Every topic of the capture routes with its own queue numbers and perm.
    let mut c = server.client();
    let topics = capture_topics();
    assert_eq!(topics.len(), 16);
    for (name, read, write, perm, sys) in &topics {
        let r = route_data(&mut c, name).unwrap_or_else(|| panic!("route for {name}"));
        assert_eq!(r.queue_datas.len(), 1, "{name}");
        let q = &r.queue_datas[0];
        assert_eq!(
            (
                q.broker_name.as_str(),
                i64::from(q.read_queue_nums),
                i64::from(q.write_queue_nums),
                i64::from(q.perm),
                i64::from(q.topic_sys_flag)
            ),
            ("broker-a", *read, *write, *perm, *sys),
            "{name}"
        );
    }
    // 206 lists exactly the capture's topics.
    let resp = c
        .request(request::GET_ALL_TOPIC_LIST_FROM_NAMESERVER, &[], b"")
        .expect("206");
    let (mut listed, _) = model::decode_topic_list(&resp.body).expect("topic list");
    listed.sort();
    let mut want: Vec<String> = topics.into_iter().map(|t| t.0).collect();
    want.sort();
    assert_eq!(listed, want);
}

#[test]
fn golden_4x_registration_with_a_damaged_body_fails_the_crc_check() {
    let server = TestServer::start();
    let ext = capture_ext();
    let mut body = capture_body();
    let i = body.len() / 2;
    body[i] ^= 0x01;
    let mut raw = Raw::connect(&server);
    let got = raw.exchange(&json_frame(&register_header(&ext, 9, 399, true), &body));
    // The handler made its response with RegisterBrokerResponseHeader: `"extFields":{}`.
    assert_frame(
        &got,
        &java_header(1, Some("{}"), 9, Some("crc32 not match")),
        b"",
    );
    let mut c = server.client();
    assert!(
        route_data(&mut c, "TopicTest").is_none(),
        "nothing registered"
    );
}

#[test]
fn registration_without_serialize_type_and_without_mapping_fields_is_accepted() {
    // Go/C++-style JSON header: declaration order, remark "", no serializeTypeCurrentRPC,
    // trailing newline. Body: the 4.x capture (no 5.x mapping fields), then a 5.x-style body
    // without them either.
    let server = TestServer::start();
    let ext = capture_ext();
    let mut raw = Raw::connect(&server);
    let got = raw.exchange(&json_frame(
        &register_header(&ext, 3, 317, false),
        &capture_body(),
    ));
    assert_frame(&got, &java_header(0, Some("{}"), 3, None), b"");
    let mut c = server.client();
    let r = route_data(&mut c, "TopicTest").expect("registered");
    assert_eq!(
        r.broker_datas[0].broker_addrs.get(&0).map(String::as_str),
        Some(ext_value(&ext, "brokerAddr"))
    );

    let body5 = b"{\"filterServerList\":[],\"topicConfigSerializeWrapper\":{\"dataVersion\":{\"counter\":2,\"stateVersion\":0,\"timestamp\":1700000000000},\"topicConfigTable\":{\"Fresh\":{\"attributes\":{},\"order\":false,\"perm\":6,\"readQueueNums\":2,\"topicFilterType\":\"SINGLE_TAG\",\"topicName\":\"Fresh\",\"topicSysFlag\":0,\"writeQueueNums\":2}}}}";
    let crc = (rmq_namesrv::checksum::crc32(body5) & 0x7FFF_FFFF).to_string();
    let ext5: Vec<(String, String)> = [
        ("brokerName", "broker-c"),
        ("brokerAddr", "10.0.0.9:10911"),
        ("clusterName", "DefaultCluster"),
        ("haServerAddr", "10.0.0.9:10912"),
        ("brokerId", "0"),
        ("enableActingMaster", "false"),
        ("compressed", "false"),
        ("bodyCrc32", crc.as_str()),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let got = raw.exchange(&json_frame(&register_header(&ext5, 4, 479, false), body5));
    assert_frame(&got, &java_header(0, Some("{}"), 4, None), b"");
    let r = route_data(&mut c, "Fresh").expect("registered");
    assert_eq!(r.queue_datas[0].read_queue_nums, 2);
    assert_eq!(r.broker_datas[0].broker_name, "broker-c");
}
