use super::*;

fn hex(s: &str) -> Vec<u8> {
    let s = s.trim();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn fixture(name: &str) -> Vec<u8> {
    let bytes = crate::test_support::fixture(name);
    hex(std::str::from_utf8(&bytes).expect("hex fixture is text"))
}

fn decode_whole(frame: &[u8]) -> RemotingCommand {
    RemotingCommand::decode(
        Bytes::copy_from_slice(&frame[4..]),
        &DecodeLimits::default(),
    )
    .unwrap()
}

#[test]
fn golden_json_request_decodes_with_remark_ext_and_body() {
    let cmd = decode_whole(&fixture("frame_golden_json_request_frame.hex"));
    assert_eq!(cmd.code, 31);
    assert_eq!(cmd.language, 0);
    assert_eq!(cmd.version, 321);
    assert_eq!(cmd.opaque, 16909060);
    assert_eq!(cmd.flag, 0);
    assert_eq!(cmd.remark.as_deref(), Some("json-request"));
    assert_eq!(cmd.ext("queueId"), Some("7"));
    assert_eq!(cmd.ext("topic"), Some("TopicA"));
    assert_eq!(&cmd.body[..], b"JR");
    assert_eq!(cmd.serialize_type, SerializeType::Json);
}

#[test]
fn golden_json_response_keeps_negative_opaque_and_null_remark() {
    let cmd = decode_whole(&fixture("frame_golden_json_response_frame.hex"));
    assert_eq!(cmd.opaque, -1234567);
    assert!(cmd.is_response());
    assert_eq!(cmd.remark, None);
    assert_eq!(cmd.ext("hasMsg"), Some("true"));
    assert_eq!(cmd.language, 12);
}

#[test]
fn golden_binary_frames_decode() {
    let req = decode_whole(&fixture("frame_golden_rocketmq_request_frame.hex"));
    assert_eq!(
        (req.code, req.language, req.version, req.opaque, req.flag),
        (31, 0, 323, 2147483647, 2)
    );
    assert!(req.is_oneway());
    assert_eq!(req.remark.as_deref(), Some("binary-request"));
    assert_eq!(req.ext("topic"), Some("TopicB"));
    assert_eq!(&req.body[..], &[0x00, 0xff, 0x52]);
    let resp = decode_whole(&fixture("frame_golden_rocketmq_response_frame.hex"));
    assert_eq!(resp.opaque, i32::MIN);
    assert_eq!(resp.remark, None);
    assert_eq!(resp.ext("pollingFull"), Some("false"));
    let v1 = decode_whole(&fixture("frame_rocketmq_binary_response_v1.hex"));
    assert_eq!((v1.code, v1.version, v1.opaque), (105, 321, 0x01020304));
    assert_eq!(v1.remark.as_deref(), Some("golden"));
    assert_eq!(v1.ext("alpha"), Some("first"));
    assert_eq!(v1.ext("zeta"), Some("last"));
    assert_eq!(&v1.body[..], b"body");
}

#[test]
fn binary_encoding_round_trips_byte_for_byte() {
    let original = fixture("frame_rocketmq_binary_response_v1.hex");
    let cmd = decode_whole(&original);
    let mut out = Vec::new();
    let header = Header {
        code: cmd.code,
        language: "JAVA",
        version: cmd.version,
        opaque: cmd.opaque,
        flag: cmd.flag,
        remark: cmd.remark.as_deref(),
    };
    let ext = cmd.ext_fields.iter();
    encode_frame(
        &mut out,
        SerializeType::RocketMq,
        &header,
        Some(ext),
        &cmd.body,
    );
    assert_eq!(out, original);
}

#[test]
fn cpp_style_header_with_newline_and_numeric_ext_values_decodes() {
    let header = b"{\"code\":105,\"extFields\":{\"AccessKey\":\"\",\"n\":7,\"b\":true,\"topic\":\"T\"},\"flag\":0,\"language\":\"CPP\",\"opaque\":1,\"remark\":\"\",\"version\":333}\n";
    let mut frame = Vec::new();
    frame.extend_from_slice(&(header.len() as u32).to_be_bytes());
    frame.extend_from_slice(header);
    let cmd = RemotingCommand::decode(Bytes::from(frame), &DecodeLimits::default()).unwrap();
    assert_eq!(cmd.code, 105);
    assert_eq!(cmd.language, 1);
    assert_eq!(cmd.remark, None);
    assert_eq!(cmd.ext("topic"), Some("T"));
    assert_eq!(cmd.ext("n"), Some("7"));
    assert_eq!(cmd.ext("b"), Some("true"));
    assert_eq!(cmd.ext("AccessKey"), Some(""));
}

fn decode_header(header: &[u8]) -> Result<RemotingCommand, DecodeError> {
    let mut frame = Vec::new();
    frame.extend_from_slice(&(header.len() as u32).to_be_bytes());
    frame.extend_from_slice(header);
    RemotingCommand::decode(Bytes::from(frame), &DecodeLimits::default())
}

#[test]
fn go_style_header_with_escapes_nulls_and_an_ordinal_language_decodes() {
    let header = br#"{code:105,'language':12,"version":317,"opaque":"9","flag":null,"remark":{"r":1},"extFields":{"topic":"T\u00e9\"x","nil":null,"n":-1.5,'q':'s'},"unknown":[1]}"#;
    let cmd = decode_header(header).unwrap();
    assert_eq!(
        (cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag),
        (105, 12, 317, 9, 0)
    );
    assert_eq!(cmd.remark.as_deref(), Some(r#"{"r":1}"#));
    assert_eq!(
        cmd.ext_fields.iter().collect::<Vec<_>>(),
        [("topic", "Té\"x"), ("n", "-1.5"), ("q", "s")]
    );
    let cmd = decode_header(br#"{"code":1,"language":"NOPE","extFields":null}"#).unwrap();
    assert_eq!(cmd.language, 255);
    assert!(cmd.ext_fields.is_empty());
}

#[test]
fn bad_json_headers_are_errors() {
    assert!(decode_header(br#"{"code":1,"extFields":[1]}"#).is_err());
    assert!(decode_header(br#"{"code":"x"}"#).is_err());
    assert!(decode_header(br#"{"code":4294967296}"#).is_err());
    assert!(decode_header(br#"{"language":14}"#).is_err());
    assert!(decode_header(br#"[1]"#).is_err());
    assert!(decode_header(br#"{"code":1"#).is_err());
    let many: String = (0..257).map(|i| format!("\"k{i}\":\"v\",")).collect();
    let header = format!("{{\"code\":1,\"extFields\":{{{many}}}}}");
    assert_eq!(
        decode_header(header.as_bytes()),
        Err(DecodeError::TooManyExtFields { max: 256 })
    );
}

#[test]
fn templates_write_the_bytes_encode_frame_writes() {
    let exts: [Option<Vec<(&str, &str)>>; 4] = [
        None,
        Some(vec![]),
        Some(vec![("changed", "false")]),
        Some(vec![("opaque", "0"), ("q\"", ",\"opaque\":0,")]),
    ];
    let bodies: [&[u8]; 3] = [b"", b"{\"counter\":1}", &[0u8; 300]];
    for serialize_type in [SerializeType::Json, SerializeType::RocketMq] {
        for ext in &exts {
            for remark in [None, Some("a \"remark\" with ,\"opaque\":0,")] {
                let header = |opaque| Header {
                    code: 0,
                    language: "JAVA",
                    version: 479,
                    opaque,
                    flag: 1,
                    remark,
                };
                let t = FrameTemplate::new(serialize_type, &header(99), ext.clone());
                for opaque in [0, 7, -3, 10, -10, 1_000_000_042, i32::MIN, i32::MAX] {
                    for body in bodies {
                        let mut want = vec![9u8];
                        encode_frame(
                            &mut want,
                            serialize_type,
                            &header(opaque),
                            ext.clone(),
                            body,
                        );
                        let mut got = vec![9u8];
                        t.write_with_body(&mut got, opaque, |out| out.extend_from_slice(body));
                        assert_eq!(got, want, "{serialize_type:?} {ext:?} {remark:?} {opaque}");
                    }
                }
            }
        }
    }
}

#[test]
fn json_response_header_is_alphabetical_like_fastjson() {
    let mut out = Vec::new();
    let header = Header {
        code: 0,
        language: "JAVA",
        version: 479,
        opaque: 3,
        flag: 1,
        remark: None,
    };
    encode_frame(
        &mut out,
        SerializeType::Json,
        &header,
        Some([("wipeTopicCount", "3")]),
        b"",
    );
    assert_eq!(
        &out[8..],
        &b"{\"code\":0,\"extFields\":{\"wipeTopicCount\":\"3\"},\"flag\":1,\"language\":\"JAVA\",\"opaque\":3,\"serializeTypeCurrentRPC\":\"JSON\",\"version\":479}"[..]
    );
    assert_eq!(
        u32::from_be_bytes([out[0], out[1], out[2], out[3]]) as usize,
        out.len() - 4
    );
}

fn json_header_frame(header: &[u8]) -> Bytes {
    let mut frame = Vec::new();
    frame.extend_from_slice(&(header.len() as u32).to_be_bytes());
    frame.extend_from_slice(header);
    Bytes::from(frame)
}

#[test]
fn ext_fields_put_replaces_in_place_removes_on_null_and_compares_by_pairs() {
    let mut f = ExtFields::default();
    f.put("a", Some("1"));
    f.put("b", Some("2"));
    f.put("c", Some("3"));
    f.put("a", Some("one"));
    f.put("b", None);
    f.put("zz", None);
    assert_eq!(f.iter().collect::<Vec<_>>(), [("a", "one"), ("c", "3")]);
    assert_eq!((f.get("a"), f.get("b"), f.len()), (Some("one"), None, 2));
    // Same pairs, built without the replaced text: equal.
    let g: ExtFields = [("a", "one"), ("c", "3")].into_iter().collect();
    assert_eq!(f, g);
    f.put("", Some(""));
    assert_ne!(f, g);
    assert_eq!(f.get(""), Some(""));
    f.clear();
    assert!(f.is_empty() && f.get("a").is_none());
}

/// Found by fuzzing (tests/fuzz, header_json): every repeated `extFields` member was
/// appended, so a header could carry any number of pairs past maxExtFields. fastjson
/// keeps the last assignment; so do we.
#[test]
fn repeated_ext_fields_member_keeps_the_last_and_stays_within_the_limit() {
    let mut header = String::from("{\"code\":105");
    for i in 0..300 {
        header.push_str(&format!(",\"extFields\":{{\"a{i}\":\"x\",\"b\":\"{i}\"}}"));
    }
    header.push('}');
    let limits = DecodeLimits::default();
    let cmd = RemotingCommand::decode(json_header_frame(header.as_bytes()), &limits).unwrap();
    assert_eq!(cmd.ext_fields.len(), 2);
    assert_eq!(cmd.ext("a299"), Some("x"));
    assert_eq!(cmd.ext("a0"), None);
    assert_eq!(cmd.ext("b"), Some("299"));
    let cleared = br#"{"code":105,"extFields":{"topic":"T"},"extFields":null}"#;
    let cmd = RemotingCommand::decode(json_header_frame(cleared), &limits).unwrap();
    assert!(cmd.ext_fields.is_empty());
}

#[test]
fn repeated_ext_key_takes_the_last_value_like_a_hash_map() {
    let header = br#"{"code":105,"extFields":{"topic":"A","n":"1","topic":"B","n":null}}"#;
    let cmd = RemotingCommand::decode(json_header_frame(header), &DecodeLimits::default()).unwrap();
    assert_eq!(cmd.ext_fields.iter().collect::<Vec<_>>(), [("topic", "B")]);

    let mut out = Vec::new();
    let h = Header {
        code: 105,
        language: "JAVA",
        version: 479,
        opaque: 1,
        flag: 0,
        remark: None,
    };
    let ext = [("topic", "A"), ("n", "1"), ("topic", "B"), ("n", "")];
    encode_frame(&mut out, SerializeType::RocketMq, &h, Some(ext), b"");
    let cmd =
        RemotingCommand::decode(Bytes::copy_from_slice(&out[4..]), &Default::default()).unwrap();
    assert_eq!(cmd.ext_fields.iter().collect::<Vec<_>>(), [("topic", "B")]);
}

#[test]
fn binary_header_counts_every_pair_against_max_ext_fields() {
    let mut out = Vec::new();
    let h = Header {
        code: 105,
        language: "JAVA",
        version: 479,
        opaque: 1,
        flag: 0,
        remark: None,
    };
    let ext: Vec<(&str, &str)> = (0..300).map(|_| ("k", "v")).collect();
    encode_frame(&mut out, SerializeType::RocketMq, &h, Some(ext), b"");
    assert_eq!(
        RemotingCommand::decode(Bytes::copy_from_slice(&out[4..]), &Default::default()),
        Err(DecodeError::TooManyExtFields { max: 256 })
    );
}

#[test]
fn truncated_and_lying_binary_headers_are_errors_not_panics() {
    let good = fixture("frame_rocketmq_binary_response_v1.hex");
    let header_len = 57;
    for cut in 0..header_len {
        let mut frame = Vec::new();
        frame.extend_from_slice(&((1u32 << 24) | cut as u32).to_be_bytes());
        frame.extend_from_slice(&good[8..8 + cut]);
        assert!(
            RemotingCommand::decode(Bytes::from(frame), &DecodeLimits::default()).is_err(),
            "cut at {cut}"
        );
    }
}
