use super::*;
use crate::remoting::codes::{Kind, REQUEST_CODES};
use crate::remoting::command::SerializeType;
use crate::route::model::{self, DataVersion, Dialect};
use bytes::Bytes;

fn command(code: i32, ext: &[(&str, &str)], body: &[u8]) -> RemotingCommand {
    RemotingCommand {
        code,
        language: 0,
        version: 479,
        opaque: 1,
        flag: 0,
        remark: None,
        ext_fields: ext
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        body: Bytes::copy_from_slice(body),
        serialize_type: SerializeType::Json,
    }
}

fn parse(cmd: &RemotingCommand) -> Result<Request<'_>, ParseError> {
    static LIMITS: NameLimits = NameLimits {
        max_name_length: 255,
        max_topic_name_length: 127,
    };
    Request::parse(cmd, &LIMITS)
}

fn remark(cmd: &RemotingCommand) -> String {
    parse(cmd).expect_err("refused").to_string()
}

/// Every header field any request reads, with valid values.
const ALL_FIELDS: &[(&str, &str)] = &[
    ("namespace", "NS"),
    ("key", "k"),
    ("value", "v"),
    ("brokerName", "broker-a"),
    ("brokerAddr", "10.0.0.1:10911"),
    ("clusterName", "c"),
    ("haServerAddr", "10.0.0.1:10912"),
    ("brokerId", "0"),
    ("topic", "T"),
    ("cluster", "c"),
];

#[test]
fn every_answered_code_of_the_table_parses_to_the_request_of_that_code() {
    for row in REQUEST_CODES {
        let cmd = command(row.code, ALL_FIELDS, b"");
        match (row.kind, parse(&cmd)) {
            (Kind::Outgoing, Err(ParseError::NotSupported(c))) => assert_eq!(c, row.code),
            (Kind::Outgoing, other) => panic!("{} is only sent: {other:?}", row.name),
            (_, Ok(request)) => assert_eq!(request.code(), row.code, "{}", row.name),
            (_, Err(e)) => panic!("{} does not parse: {e}", row.name),
        }
    }
}

#[test]
fn codes_outside_the_table_are_not_supported_with_javas_remark() {
    for code in (0..1100).chain([29_000, 29_002, -5]) {
        if REQUEST_CODES.iter().any(|r| r.code == code) {
            continue;
        }
        let cmd = command(code, ALL_FIELDS, b"");
        assert_eq!(parse(&cmd), Err(ParseError::NotSupported(code)));
    }
    assert_eq!(
        remark(&command(31, &[], b"")),
        " request type 31 not supported"
    );
}

#[test]
fn a_missing_field_is_named_in_javas_order() {
    let missing = |code, ext: &[(&str, &str)]| remark(&command(code, ext, b""));
    assert_eq!(
        missing(code::REGISTER_BROKER, &[]),
        "the custom field <brokerName> is null"
    );
    assert_eq!(
        missing(code::REGISTER_BROKER, &ALL_FIELDS[3..6]),
        "the custom field <haServerAddr> is null"
    );
    assert_eq!(
        missing(code::BROKER_HEARTBEAT, &[("brokerName", "b")]),
        "the custom field <clusterName> is null"
    );
    assert_eq!(
        missing(code::QUERY_DATA_VERSION, &ALL_FIELDS[3..6]),
        "the custom field <brokerId> is null"
    );
    assert_eq!(
        missing(code::PUT_KV_CONFIG, &[("namespace", "n"), ("key", "k")]),
        "the custom field <value> is null"
    );
    assert_eq!(
        missing(code::GET_ROUTEINFO_BY_TOPIC, &[]),
        "the custom field <topic> is null"
    );
    let bad_id = [
        ("brokerName", "b"),
        ("brokerAddr", "a"),
        ("clusterName", "c"),
        ("brokerId", "x1"),
    ];
    assert_eq!(
        missing(code::UNREGISTER_BROKER, &bad_id),
        "the custom field <brokerId> is not a number: x1"
    );
}

#[test]
fn requests_borrow_their_strings_from_the_command() {
    let cmd = command(code::GET_ROUTEINFO_BY_TOPIC, &[("topic", "TopicA")], b"");
    let Ok(Request::GetRouteInfo(r)) = parse(&cmd) else {
        panic!("a route request");
    };
    assert_eq!(r.topic, "TopicA");
    assert!(std::ptr::eq(r.topic, cmd.ext("topic").unwrap()));
}

#[test]
fn route_requests_pick_the_dialect_and_the_zone() {
    let route = |version, ext: &[(&str, &str)]| {
        let mut cmd = command(code::GET_ROUTEINFO_BY_TOPIC, ext, b"");
        cmd.version = version;
        match parse(&cmd) {
            Ok(Request::GetRouteInfo(r)) => (r.dialect, r.zone.map(str::to_string)),
            other => panic!("{other:?}"),
        }
    };
    let t = ("topic", "T");
    assert_eq!(route(401, &[t]), (Dialect::Standard, None));
    assert_eq!(route(399, &[t]), (Dialect::Legacy, None));
    let ask = ("acceptStandardJsonOnly", "TRUE");
    assert_eq!(route(399, &[t, ask]), (Dialect::Standard, None));
    let zone = ("__ZONE_NAME", "z1");
    assert_eq!(route(479, &[t, zone]), (Dialect::Standard, None));
    let mode = ("__ZONE_MODE", "true");
    assert_eq!(
        route(479, &[t, zone, mode]),
        (Dialect::Standard, Some("z1".into()))
    );
    assert_eq!(route(479, &[t, ("__ZONE_NAME", " "), mode]).1, None);
}

fn register_broker(ext: &[(&str, &str)], body: &[u8]) -> Result<RegisterBroker<'static>, String> {
    let cmd = Box::leak(Box::new(command(code::REGISTER_BROKER, ext, body)));
    match parse(cmd) {
        Ok(Request::RegisterBroker(r)) => Ok(r),
        Ok(other) => panic!("{other:?}"),
        Err(e) => Err(e.to_string()),
    }
}

#[test]
fn registration_headers_are_read_leniently_where_java_is_and_bounded_where_we_are() {
    let mut ext = ALL_FIELDS[3..8].to_vec();
    ext.extend([
        ("bodyCrc32", "not-a-number"),
        ("heartbeatTimeoutMillis", "-5"),
        ("enableActingMaster", "True"),
        ("compressed", "yes"),
        ("__ZONE_NAME", "z"),
    ]);
    let r = register_broker(&ext, b"{}").unwrap();
    assert_eq!((r.body_crc32, r.heartbeat_timeout_ms), (0, None));
    assert_eq!((r.enable_acting_master, r.compressed), (Some(true), false));
    assert_eq!(r.crc_mismatch(), None);
    let req = r.table_request(Some(7), 1234);
    assert_eq!(
        (req.cluster, req.broker_name, req.broker_id),
        ("c", "broker-a", 0)
    );
    assert_eq!(
        (req.conn, req.now_ms, req.zone_name),
        (Some(7), 1234, Some("z"))
    );
    assert_eq!(req.fingerprint.len, 2);
    assert_eq!(req.fingerprint.hash, model::fingerprint(b"{}"));

    let long = "x".repeat(256);
    let mut ext = ALL_FIELDS[3..8].to_vec();
    ext[0] = ("brokerName", &long);
    assert_eq!(
        register_broker(&ext, b"").unwrap_err(),
        "brokerName is longer than 255 bytes"
    );
}

#[test]
fn a_registration_body_is_checked_against_its_crc_and_decoded_on_demand() {
    let body = br#"{"topicConfigSerializeWrapper":{"topicConfigTable":{"":{"topicName":""}},"dataVersion":{"counter":1,"timestamp":1}},"filterServerList":[]}"#;
    let crc = (model::crc32(body) & 0x7FFF_FFFF).to_string();
    let mut ext = ALL_FIELDS[3..8].to_vec();
    ext.push(("bodyCrc32", "12345"));
    let r = register_broker(&ext, body).unwrap();
    assert_eq!(r.crc_mismatch(), Some(crc.parse().unwrap()));
    ext.pop();
    ext.push(("bodyCrc32", &crc));
    let r = register_broker(&ext, body).unwrap();
    assert_eq!(r.crc_mismatch(), None);
    let limits = NameLimits::default();
    let decoded = r.decode_body(&Default::default(), &limits);
    assert_eq!(
        decoded.unwrap_err().to_string(),
        "topic name of 0 bytes is outside 1..=127 (maxTopicNameLength)"
    );
    let r = register_broker(&ALL_FIELDS[3..8], b"not json").unwrap();
    let err = r.decode_body(&Default::default(), &limits).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("register broker failed: bad body: "),
        "{err}"
    );
}

#[test]
fn data_version_and_topic_route_bodies_are_decoded_with_the_header() {
    let mut body = Vec::new();
    let v = DataVersion {
        counter: 3,
        state_version: 0,
        timestamp: 9,
    };
    v.encode(&mut body);
    let cmd = command(code::QUERY_DATA_VERSION, ALL_FIELDS, &body);
    match parse(&cmd) {
        Ok(Request::QueryDataVersion(q)) => {
            assert_eq!(q.data_version, Some(v));
            assert_eq!(q.broker.broker_addr, "10.0.0.1:10911");
        }
        other => panic!("{other:?}"),
    }
    let cmd = command(code::QUERY_DATA_VERSION, ALL_FIELDS, b"[");
    assert!(remark(&cmd).starts_with("bad DataVersion body: "));

    let route = br#"{"queueDatas":[{"brokerName":"b","readQueueNums":2,"writeQueueNums":2,"perm":6,"topicSysFlag":0}]}"#;
    let cmd = command(code::REGISTER_TOPIC_IN_NAMESRV, &[("topic", "T")], route);
    match parse(&cmd) {
        Ok(Request::RegisterTopic(r)) => assert_eq!(r.queue_datas[0].broker_name, "b"),
        other => panic!("{other:?}"),
    }
    let cmd = command(code::REGISTER_TOPIC_IN_NAMESRV, &[("topic", "T")], b"{");
    assert!(remark(&cmd).starts_with("bad TopicRouteData body: "));
}

#[test]
fn an_admin_topic_name_is_validated_before_its_body_is_read() {
    let cmd = command(code::REGISTER_TOPIC_IN_NAMESRV, &[("topic", "a/b")], b"{");
    assert_eq!(
        remark(&cmd),
        "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    );
    let cmd = command(code::DELETE_TOPIC_IN_NAMESRV, &[("topic", " ")], b"");
    assert_eq!(remark(&cmd), "The specified topic is blank.");
    let long = "t".repeat(128);
    let cmd = command(code::DELETE_TOPIC_IN_NAMESRV, &[("topic", &long)], b"");
    assert_eq!(
        remark(&cmd),
        "The specified topic is longer than topic max length."
    );
}

#[test]
fn topics_by_cluster_reports_a_missing_cluster_only_when_asked() {
    let cmd = command(code::GET_TOPICS_BY_CLUSTER, &[], b"");
    let Ok(Request::GetTopicsByCluster(r)) = parse(&cmd) else {
        panic!("parses without the field");
    };
    assert_eq!(r.cluster(), Err(ParseError::MissingField("cluster")));
}

#[test]
fn config_updates_must_be_text() {
    let cmd = command(code::UPDATE_NAMESRV_CONFIG, &[], &[0xff, 0xfe]);
    assert_eq!(remark(&cmd), "string2Properties error");
    let cmd = command(code::UPDATE_NAMESRV_CONFIG, &[], b"");
    assert_eq!(
        parse(&cmd),
        Ok(Request::UpdateNamesrvConfig(UpdateNamesrvConfig {
            properties: None
        }))
    );
}
