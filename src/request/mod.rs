//! Typed requests: every request the name server answers, parsed once from its
//! [`RemotingCommand`] into a value that borrows the header's strings and the body (nothing
//! is copied), the way mini-redis parses a frame into a `Get` before applying it. The
//! processor's handlers take these values and never read header fields themselves.
//!
//! Parsing applies every check that does not need the tables: required fields (Java's
//! `@CFNotNull`), numbers, name lengths, topic names, what valid names, addresses and topic
//! configs look like (`rules`), and the bodies that decode the same whatever the tables hold
//! (a registration body is decoded only when it changed, so [`RegisterBroker`] keeps it as
//! sent, and its topic configs are checked when it is decoded). A failure is a [`ParseError`]
//! whose text is the remark (Java's, where Java has one); the processor picks the response
//! code.
//!
//! Adding a request code: its row in `remoting::codes`, its struct here with a `parse`, a
//! variant of [`Request`] with its arm in [`Request::parse`], and its
//! handler in the processor (whose dispatch matches every variant, so the compiler asks).

mod admin;
mod broker;
mod header;
mod routes;
mod rules;

pub use admin::{
    DeleteTopic, GetKvList, KvKey, PutKvConfig, RegisterTopic, UpdateNamesrvConfig, WritePerm,
};
pub use broker::{
    BrokerHeartbeat, BrokerRef, GetBrokerMemberGroup, QueryDataVersion, RegisterBroker,
};
pub use header::{BodyDone, NameLimits, ParseError};
pub use routes::{GetRouteInfo, GetTopicsByCluster};
pub use rules::Allowed;

use crate::remoting::codes::request as code;
use crate::remoting::command::RemotingCommand;
use header::Fields;

/// One request, by code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request<'a> {
    PutKvConfig(PutKvConfig<'a>),
    GetKvConfig(KvKey<'a>),
    DeleteKvConfig(KvKey<'a>),
    RegisterBroker(RegisterBroker<'a>),
    UnregisterBroker(BrokerRef<'a>),
    GetRouteInfo(GetRouteInfo<'a>),
    GetBrokerClusterInfo,
    WipeWritePerm(WritePerm<'a>),
    GetAllTopicList,
    DeleteTopic(DeleteTopic<'a>),
    RegisterTopic(RegisterTopic<'a>),
    GetKvList(GetKvList<'a>),
    GetTopicsByCluster(GetTopicsByCluster<'a>),
    GetSystemTopicList,
    GetUnitTopicList,
    GetHasUnitSubTopicList,
    GetHasUnitSubUnunitTopicList,
    UpdateNamesrvConfig(UpdateNamesrvConfig<'a>),
    GetNamesrvConfig,
    QueryDataVersion(QueryDataVersion<'a>),
    AddWritePerm(WritePerm<'a>),
    GetBrokerMemberGroup(GetBrokerMemberGroup<'a>),
    BrokerHeartbeat(BrokerHeartbeat<'a>),
    Stats,
}

impl<'a> Request<'a> {
    /// Parses `cmd` by its code. Codes the name server does not answer (unknown ones, and
    /// 905, which it only sends) are [`ParseError::NotSupported`].
    pub fn parse(cmd: &'a RemotingCommand, limits: &'a NameLimits) -> Result<Self, ParseError> {
        Request::parse_after(cmd, limits, BodyDone::Nothing)
    }

    /// As [`Request::parse`], when the decode worker already did `done` with the body (so
    /// that a large body is not hashed or decoded again on the loop).
    pub fn parse_after(
        cmd: &'a RemotingCommand,
        limits: &'a NameLimits,
        done: BodyDone,
    ) -> Result<Self, ParseError> {
        let h = Fields { cmd, limits, done };
        Ok(match cmd.code {
            code::PUT_KV_CONFIG => Request::PutKvConfig(PutKvConfig::parse(h)?),
            code::GET_KV_CONFIG => Request::GetKvConfig(KvKey::parse(h)?),
            code::DELETE_KV_CONFIG => Request::DeleteKvConfig(KvKey::parse(h)?),
            code::REGISTER_BROKER => Request::RegisterBroker(RegisterBroker::parse(h)?),
            code::UNREGISTER_BROKER => Request::UnregisterBroker(BrokerRef::parse(h)?),
            code::GET_ROUTEINFO_BY_TOPIC => Request::GetRouteInfo(GetRouteInfo::parse(h)?),
            code::GET_BROKER_CLUSTER_INFO => Request::GetBrokerClusterInfo,
            code::WIPE_WRITE_PERM_OF_BROKER => Request::WipeWritePerm(WritePerm::parse(h)?),
            code::GET_ALL_TOPIC_LIST_FROM_NAMESERVER => Request::GetAllTopicList,
            code::DELETE_TOPIC_IN_NAMESRV => Request::DeleteTopic(DeleteTopic::parse(h)?),
            code::REGISTER_TOPIC_IN_NAMESRV => Request::RegisterTopic(RegisterTopic::parse(h)?),
            code::GET_KVLIST_BY_NAMESPACE => Request::GetKvList(GetKvList::parse(h)?),
            code::GET_TOPICS_BY_CLUSTER => {
                Request::GetTopicsByCluster(GetTopicsByCluster::parse(h)?)
            }
            code::GET_SYSTEM_TOPIC_LIST_FROM_NS => Request::GetSystemTopicList,
            code::GET_UNIT_TOPIC_LIST => Request::GetUnitTopicList,
            code::GET_HAS_UNIT_SUB_TOPIC_LIST => Request::GetHasUnitSubTopicList,
            code::GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST => Request::GetHasUnitSubUnunitTopicList,
            code::UPDATE_NAMESRV_CONFIG => {
                Request::UpdateNamesrvConfig(UpdateNamesrvConfig::parse(h)?)
            }
            code::GET_NAMESRV_CONFIG => Request::GetNamesrvConfig,
            code::QUERY_DATA_VERSION => Request::QueryDataVersion(QueryDataVersion::parse(h)?),
            code::ADD_WRITE_PERM_OF_BROKER => Request::AddWritePerm(WritePerm::parse(h)?),
            code::GET_BROKER_MEMBER_GROUP => {
                Request::GetBrokerMemberGroup(GetBrokerMemberGroup::parse(h)?)
            }
            code::BROKER_HEARTBEAT => Request::BrokerHeartbeat(BrokerHeartbeat::parse(h)?),
            code::RMQ_NAMESRV_STATS => Request::Stats,
            other => return Err(ParseError::NotSupported(other)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remoting::codes::{Kind, REQUEST_CODES};
    use crate::remoting::command::SerializeType;
    use crate::route::model::{DataVersion, Dialect};
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
            max_queue_nums: 1024,
        };
        Request::parse(cmd, &LIMITS)
    }

    fn remark(cmd: &RemotingCommand) -> String {
        parse(cmd).expect_err("refused").to_string()
    }

    /// The request code a request was parsed from (checks the arms of `Request::parse`).
    fn code_of(request: &Request<'_>) -> i32 {
        match request {
            Request::PutKvConfig(_) => code::PUT_KV_CONFIG,
            Request::GetKvConfig(_) => code::GET_KV_CONFIG,
            Request::DeleteKvConfig(_) => code::DELETE_KV_CONFIG,
            Request::RegisterBroker(_) => code::REGISTER_BROKER,
            Request::UnregisterBroker(_) => code::UNREGISTER_BROKER,
            Request::GetRouteInfo(_) => code::GET_ROUTEINFO_BY_TOPIC,
            Request::GetBrokerClusterInfo => code::GET_BROKER_CLUSTER_INFO,
            Request::WipeWritePerm(_) => code::WIPE_WRITE_PERM_OF_BROKER,
            Request::GetAllTopicList => code::GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
            Request::DeleteTopic(_) => code::DELETE_TOPIC_IN_NAMESRV,
            Request::RegisterTopic(_) => code::REGISTER_TOPIC_IN_NAMESRV,
            Request::GetKvList(_) => code::GET_KVLIST_BY_NAMESPACE,
            Request::GetTopicsByCluster(_) => code::GET_TOPICS_BY_CLUSTER,
            Request::GetSystemTopicList => code::GET_SYSTEM_TOPIC_LIST_FROM_NS,
            Request::GetUnitTopicList => code::GET_UNIT_TOPIC_LIST,
            Request::GetHasUnitSubTopicList => code::GET_HAS_UNIT_SUB_TOPIC_LIST,
            Request::GetHasUnitSubUnunitTopicList => code::GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST,
            Request::UpdateNamesrvConfig(_) => code::UPDATE_NAMESRV_CONFIG,
            Request::GetNamesrvConfig => code::GET_NAMESRV_CONFIG,
            Request::QueryDataVersion(_) => code::QUERY_DATA_VERSION,
            Request::AddWritePerm(_) => code::ADD_WRITE_PERM_OF_BROKER,
            Request::GetBrokerMemberGroup(_) => code::GET_BROKER_MEMBER_GROUP,
            Request::BrokerHeartbeat(_) => code::BROKER_HEARTBEAT,
            Request::Stats => code::RMQ_NAMESRV_STATS,
        }
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
                (_, Ok(request)) => assert_eq!(code_of(&request), row.code, "{}", row.name),
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

    fn register_broker(
        ext: &[(&str, &str)],
        body: &[u8],
    ) -> Result<RegisterBroker<'static>, String> {
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
        let req = r.table_request(Some(7), 1234, r.fingerprint());
        assert_eq!(
            (req.cluster, req.broker_name, req.broker_id),
            ("c", "broker-a", 0)
        );
        assert_eq!(
            (req.conn, req.now_ms, req.zone_name),
            (Some(7), 1234, Some("z"))
        );
        assert_eq!(req.fingerprint.len, 2);
        assert_eq!(req.fingerprint.hash, crate::checksum::fingerprint(b"{}"));

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
        let crc = (crate::checksum::crc32(body) & 0x7FFF_FFFF).to_string();
        let mut ext = ALL_FIELDS[3..8].to_vec();
        ext.push(("bodyCrc32", "12345"));
        let r = register_broker(&ext, body).unwrap();
        assert_eq!(r.crc_mismatch(), Some(crc.parse().unwrap()));
        ext.pop();
        ext.push(("bodyCrc32", &crc));
        let r = register_broker(&ext, body).unwrap();
        assert_eq!(r.crc_mismatch(), None);
        let limits = NameLimits::default();
        let decoded = r.decode_body(&Default::default(), &limits, &mut Default::default());
        assert_eq!(
            decoded.unwrap_err().to_string(),
            "topic name of 0 bytes is outside 1..=127 (maxTopicNameLength)"
        );
        let r = register_broker(&ALL_FIELDS[3..8], b"not json").unwrap();
        let err = r
            .decode_body(&Default::default(), &limits, &mut Default::default())
            .unwrap_err();
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
                assert_eq!(q.data_version(), Ok(Some(v)));
                assert_eq!(q.broker.broker_addr, "10.0.0.1:10911");
            }
            other => panic!("{other:?}"),
        }
        // The body is decoded by the handler, against the stored version (`changed`).
        let cmd = command(code::QUERY_DATA_VERSION, ALL_FIELDS, b"[");
        match parse(&cmd) {
            Ok(Request::QueryDataVersion(q)) => {
                let refused = q.changed(None).expect_err("refused");
                assert!(refused.to_string().starts_with("bad DataVersion body: "));
            }
            other => panic!("{other:?}"),
        }

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
}
