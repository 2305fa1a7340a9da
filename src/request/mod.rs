//! Typed requests, parsed once from a [`RemotingCommand`] with every check that does not need
//! the tables; each `encode` beside its `parse` is how the client and the tools write it.
//! A new code: its row in `remoting::codes`, its struct and `requests!` row here, its handler.

/// A request whose header is required text fields only: struct, `parse` and `encode`.
macro_rules! text_request {
    ($(#[$doc:meta])* $name:ident { $($member:ident: $field:ident),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct $name<'a> {
            $(pub $member: &'a str,)+
        }

        impl<'a> $name<'a> {
            pub(super) fn parse(h: Fields<'a>) -> Result<Self, ParseError> {
                Ok($name { $($member: h.required($field)?,)+ })
            }

            pub fn encode(&self, e: &mut Encoded<'a>) {
                $(e.put($field, self.$member);)+
            }
        }
    };
}

mod admin;
mod broker;
pub mod field;
mod header;
pub mod reply;
mod routes;
mod rules;

pub use admin::{
    DeleteTopic, GetKvList, KvKey, PutKvConfig, RegisterTopic, UpdateNamesrvConfig, WritePerm,
    MAX_CONFIG_UPDATE_BYTES,
};
pub use broker::{
    BrokerHeartbeat, BrokerRef, GetBrokerMemberGroup, QueryDataVersion, RegisterBroker,
};
pub use header::{Encoded, NameLimits, ParseError};
pub use routes::{GetRouteInfo, GetTopicsByCluster};

use crate::remoting::codes::request as code;
use crate::remoting::command::RemotingCommand;
use header::Fields;

/// One row per request (`at_version`: its `encode` takes the sender's version): the enum and
/// its `parse_after`, `code` and `encode`.
macro_rules! requests {
    ($($code:ident => $variant:ident $(($typed:ident $($at:ident)?))?,)*) => {
        /// One request, by code.
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub enum Request<'a> {
            $($variant $(($typed<'a>))?,)*
        }

        impl<'a> Request<'a> {
            /// Parses `cmd` by its code; one the name server does not answer is `NotSupported`.
            pub fn parse(cmd: &'a RemotingCommand, limits: &'a NameLimits) -> Result<Self, ParseError> {
                Request::parse_after(cmd, limits, false)
            }

            /// As [`Request::parse`]; `body_decoded`: the decode worker already decoded the body.
            pub fn parse_after(
                cmd: &'a RemotingCommand,
                limits: &'a NameLimits,
                body_decoded: bool,
            ) -> Result<Self, ParseError> {
                let h = Fields { cmd, limits, body_decoded };
                Ok(match cmd.code {
                    $(code::$code => Request::$variant $(($typed::parse(h)?))?,)*
                    other => return Err(ParseError::NotSupported(other)),
                })
            }

            pub fn code(&self) -> i32 {
                match self {
                    $(Request::$variant $((requests!(@any $typed)))? => code::$code,)*
                }
            }

            /// The request as a sender writes it at `version`.
            pub fn encode(&self, version: i32) -> Encoded<'a> {
                let mut e = Encoded::new(self.code());
                match self {
                    $($(Request::$variant(r) => requests!(@encode r e version $typed $($at)?),)?)*
                    _ => {}
                }
                e
            }
        }
    };
    (@any $typed:ident) => { _ };
    (@encode $r:ident $e:ident $version:ident $typed:ident) => { $r.encode(&mut $e) };
    (@encode $r:ident $e:ident $version:ident $typed:ident at_version) => {
        $r.encode(&mut $e, $version)
    };
}

requests! {
    PUT_KV_CONFIG => PutKvConfig(PutKvConfig),
    GET_KV_CONFIG => GetKvConfig(KvKey),
    DELETE_KV_CONFIG => DeleteKvConfig(KvKey),
    REGISTER_BROKER => RegisterBroker(RegisterBroker),
    UNREGISTER_BROKER => UnregisterBroker(BrokerRef),
    GET_ROUTEINFO_BY_TOPIC => GetRouteInfo(GetRouteInfo at_version),
    GET_BROKER_CLUSTER_INFO => GetBrokerClusterInfo,
    WIPE_WRITE_PERM_OF_BROKER => WipeWritePerm(WritePerm),
    GET_ALL_TOPIC_LIST_FROM_NAMESERVER => GetAllTopicList,
    DELETE_TOPIC_IN_NAMESRV => DeleteTopic(DeleteTopic),
    REGISTER_TOPIC_IN_NAMESRV => RegisterTopic(RegisterTopic),
    GET_KVLIST_BY_NAMESPACE => GetKvList(GetKvList),
    GET_TOPICS_BY_CLUSTER => GetTopicsByCluster(GetTopicsByCluster),
    GET_SYSTEM_TOPIC_LIST_FROM_NS => GetSystemTopicList,
    GET_UNIT_TOPIC_LIST => GetUnitTopicList,
    GET_HAS_UNIT_SUB_TOPIC_LIST => GetHasUnitSubTopicList,
    GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST => GetHasUnitSubUnunitTopicList,
    UPDATE_NAMESRV_CONFIG => UpdateNamesrvConfig(UpdateNamesrvConfig),
    GET_NAMESRV_CONFIG => GetNamesrvConfig,
    QUERY_DATA_VERSION => QueryDataVersion(QueryDataVersion),
    ADD_WRITE_PERM_OF_BROKER => AddWritePerm(WritePerm),
    GET_BROKER_MEMBER_GROUP => GetBrokerMemberGroup(GetBrokerMemberGroup),
    BROKER_HEARTBEAT => BrokerHeartbeat(BrokerHeartbeat),
    RMQ_NAMESRV_STATS => Stats,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remoting::codes::{Kind, REQUEST_CODES};
    use crate::remoting::command::SerializeType;
    use crate::route::model::{DataVersion, Dialect};
    use crate::route::table::RegisteringBroker;
    use bytes::Bytes;

    fn parse(cmd: &RemotingCommand) -> Result<Request<'_>, ParseError> {
        static LIMITS: NameLimits = NameLimits {
            max_name_length: 255,
            max_topic_name_length: 127,
            max_queue_nums: 1024,
            json: crate::remoting::json::Limits {
                max_depth: 64,
                max_string_len: 1 << 20,
            },
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
            let cmd = RemotingCommand::for_test(row.code, ALL_FIELDS, b"");
            match (row.kind, parse(&cmd)) {
                (Kind::Outgoing, Err(ParseError::NotSupported(c))) => assert_eq!(c, row.code),
                (Kind::Outgoing, other) => panic!("{} is only sent: {other:?}", row.name),
                (_, Ok(request)) => assert_eq!(request.code(), row.code, "{}", row.name),
                (_, Err(e)) => panic!("{} does not parse: {e}", row.name),
            }
        }
    }

    /// One request of every code, with every optional field set (`dv` is a DataVersion body).
    fn one_of_each<'a>(register_body: &'a [u8], dv: &'a [u8]) -> Vec<Request<'a>> {
        let broker = BrokerRef {
            broker_name: "broker-a",
            broker_addr: "10.0.0.1:10911",
            cluster: "c",
            broker_id: 2,
        };
        let kv = KvKey {
            namespace: "NS",
            key: "k",
        };
        let register = RegisterBroker {
            broker: RegisteringBroker {
                cluster: "c",
                broker_addr: "10.0.0.1:10911",
                broker_name: "broker-a",
                broker_id: 1,
                ha_server_addr: "10.0.0.1:10912",
                zone_name: Some("z1"),
                heartbeat_timeout_ms: Some(30_000),
                enable_acting_master: Some(true),
            },
            body_crc32: 12345,
            compressed: true,
            version: 479,
            body: register_body,
        };
        let queue = crate::route::model::QueueData {
            broker_name: "broker-a".into(),
            read_queue_nums: 4,
            write_queue_nums: 4,
            perm: 6,
            topic_sys_flag: 0,
        };
        vec![
            Request::PutKvConfig(PutKvConfig {
                namespace: "NS",
                key: "k",
                value: "v=1;x",
            }),
            Request::GetKvConfig(kv),
            Request::DeleteKvConfig(kv),
            Request::RegisterBroker(register),
            Request::UnregisterBroker(broker),
            Request::GetRouteInfo(GetRouteInfo {
                topic: "T",
                dialect: Dialect::Standard,
                zone: Some("z1"),
            }),
            Request::GetBrokerClusterInfo,
            Request::WipeWritePerm(WritePerm {
                broker_name: "broker-a",
            }),
            Request::GetAllTopicList,
            Request::DeleteTopic(DeleteTopic {
                topic: "T",
                cluster: Some("c"),
            }),
            Request::RegisterTopic(RegisterTopic {
                topic: "T",
                queue_datas: vec![queue],
            }),
            Request::GetKvList(GetKvList { namespace: "NS" }),
            Request::GetTopicsByCluster(GetTopicsByCluster::new("c")),
            Request::GetSystemTopicList,
            Request::GetUnitTopicList,
            Request::GetHasUnitSubTopicList,
            Request::GetHasUnitSubUnunitTopicList,
            Request::UpdateNamesrvConfig(UpdateNamesrvConfig {
                properties: Some("a=1\nb=2\n"),
            }),
            Request::GetNamesrvConfig,
            Request::QueryDataVersion(QueryDataVersion::new(broker, dv)),
            Request::AddWritePerm(WritePerm {
                broker_name: "broker-b",
            }),
            Request::GetBrokerMemberGroup(GetBrokerMemberGroup {
                cluster: "c",
                broker_name: "broker-a",
            }),
            Request::BrokerHeartbeat(BrokerHeartbeat {
                cluster: "c",
                broker_addr: "10.0.0.1:10911",
                broker_name: "broker-a",
            }),
            Request::Stats,
        ]
    }

    /// `request` encoded into a whole frame of `version`, sent through the frame decoder.
    fn over_the_wire(request: &Request<'_>, version: i32, st: SerializeType) -> RemotingCommand {
        decoded(&request.encode(version), version, st)
    }

    /// `encoded` as a whole frame of `version`, sent through the frame decoder.
    fn decoded(encoded: &Encoded<'_>, version: i32, st: SerializeType) -> RemotingCommand {
        let frame = encoded.frame(st, "JAVA", version, 7, 0);
        RemotingCommand::decode(
            Bytes::copy_from_slice(&frame[4..]),
            &crate::remoting::command::DecodeLimits::default(),
        )
        .expect("an encoded request decodes")
    }

    #[test]
    fn every_request_encodes_to_a_frame_that_parses_back_to_it() {
        let mut dv = Vec::new();
        DataVersion {
            counter: 3,
            state_version: 1,
            timestamp: 9,
        }
        .encode(&mut dv);
        let requests = one_of_each(b"{\"compressed\":\"opaque to the header\"}", &dv);
        // One of each answered code of the table.
        let mut codes: Vec<i32> = requests.iter().map(Request::code).collect();
        let mut answered: Vec<i32> = REQUEST_CODES
            .iter()
            .filter(|r| r.kind != Kind::Outgoing)
            .map(|r| r.code)
            .collect();
        codes.sort_unstable();
        answered.sort_unstable();
        assert_eq!(codes, answered);
        for st in [SerializeType::Json, SerializeType::RocketMq] {
            for request in &requests {
                let cmd = over_the_wire(request, 479, st);
                assert_eq!(cmd.code, request.code());
                assert_eq!(parse(&cmd).as_ref(), Ok(request), "{st:?}");
            }
        }
    }

    #[test]
    fn optional_fields_left_out_parse_back_as_absent() {
        let sparse = [
            Request::RegisterBroker(RegisterBroker {
                broker: RegisteringBroker {
                    cluster: "c",
                    broker_addr: "10.0.0.1:10911",
                    broker_name: "broker-a",
                    broker_id: 0,
                    ha_server_addr: "10.0.0.1:10912",
                    zone_name: None,
                    heartbeat_timeout_ms: None,
                    enable_acting_master: None,
                },
                body_crc32: 0,
                compressed: false,
                version: 317,
                body: b"",
            }),
            Request::DeleteTopic(DeleteTopic {
                topic: "T",
                cluster: None,
            }),
            Request::UpdateNamesrvConfig(UpdateNamesrvConfig { properties: None }),
            Request::QueryDataVersion(QueryDataVersion::new(
                BrokerRef {
                    broker_name: "b",
                    broker_addr: "a:1",
                    cluster: "c",
                    broker_id: 0,
                },
                b"",
            )),
        ];
        for request in &sparse {
            let cmd = over_the_wire(request, 317, SerializeType::Json);
            assert_eq!(parse(&cmd).as_ref(), Ok(request));
        }
    }

    #[test]
    fn route_lookups_round_trip_in_each_dialect_the_version_allows() {
        let lookups = [
            (479, GetRouteInfo::new("T", 479)),
            (317, GetRouteInfo::new("T", 317)),
            // A legacy-version peer asking for standard JSON.
            (
                317,
                GetRouteInfo {
                    dialect: Dialect::Standard,
                    ..GetRouteInfo::new("T", 317)
                },
            ),
        ];
        assert_eq!(lookups[1].1.dialect, Dialect::Legacy);
        for (version, lookup) in lookups {
            let request = Request::GetRouteInfo(lookup);
            let cmd = over_the_wire(&request, version, SerializeType::Json);
            assert_eq!(parse(&cmd), Ok(request));
        }
        // What a 4.9.4+ client sends: the topic alone, as before.
        let plain = Request::GetRouteInfo(GetRouteInfo::new("T", 479)).encode(479);
        assert_eq!(plain.pairs().collect::<Vec<_>>(), [("topic", "T")]);
    }

    /// Field order and spelling as the client and rmq-bench have always sent them.
    #[test]
    fn hot_requests_keep_their_wire_fields_in_order() {
        let body = b"{}";
        let register = one_of_each(body, b"")
            .into_iter()
            .find(|r| r.code() == code::REGISTER_BROKER)
            .expect("a registration");
        let names: Vec<&str> = register
            .encode(479)
            .fields
            .iter()
            .map(|(k, _)| *k)
            .collect();
        assert_eq!(
            names,
            [
                "brokerName",
                "brokerAddr",
                "clusterName",
                "haServerAddr",
                "brokerId",
                "enableActingMaster",
                "compressed",
                "bodyCrc32",
                "heartbeatTimeoutMillis",
                "__ZONE_NAME"
            ]
        );
        let beat = BrokerHeartbeat {
            cluster: "c",
            broker_addr: "a:1",
            broker_name: "b",
        };
        let mut as_broker = Encoded::new(code::BROKER_HEARTBEAT);
        beat.encode_as_broker(&mut as_broker, 0);
        assert_eq!(
            parse(&decoded(&as_broker, 479, SerializeType::Json)),
            Ok(Request::BrokerHeartbeat(beat))
        );
        assert_eq!(
            as_broker.pairs().collect::<Vec<_>>(),
            [
                ("brokerName", "b"),
                ("brokerAddr", "a:1"),
                ("clusterName", "c"),
                ("brokerId", "0")
            ]
        );
    }

    #[test]
    fn codes_outside_the_table_are_not_supported_with_javas_remark() {
        for code in (0..1100).chain([29_000, 29_002, -5]) {
            if REQUEST_CODES.iter().any(|r| r.code == code) {
                continue;
            }
            let cmd = RemotingCommand::for_test(code, ALL_FIELDS, b"");
            assert_eq!(parse(&cmd), Err(ParseError::NotSupported(code)));
        }
        assert_eq!(
            remark(&RemotingCommand::for_test(31, &[], b"")),
            " request type 31 not supported"
        );
    }

    #[test]
    fn a_missing_field_is_named_in_javas_order() {
        let missing =
            |code, ext: &[(&str, &str)]| remark(&RemotingCommand::for_test(code, ext, b""));
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
        let cmd =
            RemotingCommand::for_test(code::GET_ROUTEINFO_BY_TOPIC, &[("topic", "TopicA")], b"");
        let Ok(Request::GetRouteInfo(r)) = parse(&cmd) else {
            panic!("a route request");
        };
        assert_eq!(r.topic, "TopicA");
        assert!(std::ptr::eq(r.topic, cmd.ext("topic").unwrap()));
    }

    #[test]
    fn route_requests_pick_the_dialect_and_the_zone() {
        let route = |version, ext: &[(&str, &str)]| {
            let mut cmd = RemotingCommand::for_test(code::GET_ROUTEINFO_BY_TOPIC, ext, b"");
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
        let cmd = Box::leak(Box::new(RemotingCommand::for_test(
            code::REGISTER_BROKER,
            ext,
            body,
        )));
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
        assert_eq!((r.body_crc32, r.broker.heartbeat_timeout_ms), (0, None));
        assert_eq!(
            (r.broker.enable_acting_master, r.compressed),
            (Some(true), false)
        );
        assert_eq!(r.crc_mismatch(), None);
        let b = r.broker;
        assert_eq!(
            (b.cluster, b.broker_name, b.broker_id),
            ("c", "broker-a", 0)
        );
        assert_eq!(b.zone_name, Some("z"));
        assert_eq!(r.fingerprint().len, 2);
        assert_eq!(r.fingerprint().hash, crate::checksum::fingerprint(b"{}"));

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
        let cmd = RemotingCommand::for_test(code::QUERY_DATA_VERSION, ALL_FIELDS, &body);
        match parse(&cmd) {
            Ok(Request::QueryDataVersion(q)) => {
                assert_eq!(q.data_version(), Ok(Some(v)));
                assert_eq!(q.broker.broker_addr, "10.0.0.1:10911");
            }
            other => panic!("{other:?}"),
        }
        // The body is decoded by the handler, against the stored version (`changed`).
        let cmd = RemotingCommand::for_test(code::QUERY_DATA_VERSION, ALL_FIELDS, b"[");
        match parse(&cmd) {
            Ok(Request::QueryDataVersion(q)) => {
                let refused = q.changed(None).expect_err("refused");
                assert!(refused.to_string().starts_with("bad DataVersion body: "));
            }
            other => panic!("{other:?}"),
        }

        let route = br#"{"queueDatas":[{"brokerName":"b","readQueueNums":2,"writeQueueNums":2,"perm":6,"topicSysFlag":0}]}"#;
        let cmd =
            RemotingCommand::for_test(code::REGISTER_TOPIC_IN_NAMESRV, &[("topic", "T")], route);
        match parse(&cmd) {
            Ok(Request::RegisterTopic(r)) => assert_eq!(r.queue_datas[0].broker_name, "b"),
            other => panic!("{other:?}"),
        }
        let cmd =
            RemotingCommand::for_test(code::REGISTER_TOPIC_IN_NAMESRV, &[("topic", "T")], b"{");
        assert!(remark(&cmd).starts_with("bad TopicRouteData body: "));
    }

    #[test]
    fn an_admin_topic_name_is_validated_before_its_body_is_read() {
        let cmd =
            RemotingCommand::for_test(code::REGISTER_TOPIC_IN_NAMESRV, &[("topic", "a/b")], b"{");
        assert_eq!(
            remark(&cmd),
            "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
        );
        let cmd = RemotingCommand::for_test(code::DELETE_TOPIC_IN_NAMESRV, &[("topic", " ")], b"");
        assert_eq!(remark(&cmd), "The specified topic is blank.");
        let long = "t".repeat(128);
        let cmd =
            RemotingCommand::for_test(code::DELETE_TOPIC_IN_NAMESRV, &[("topic", &long)], b"");
        assert_eq!(
            remark(&cmd),
            "The specified topic is longer than topic max length."
        );
    }

    #[test]
    fn topics_by_cluster_reports_a_missing_cluster_only_when_asked() {
        let cmd = RemotingCommand::for_test(code::GET_TOPICS_BY_CLUSTER, &[], b"");
        let Ok(Request::GetTopicsByCluster(r)) = parse(&cmd) else {
            panic!("parses without the field");
        };
        assert_eq!(r.cluster(), Err(ParseError::MissingField("cluster")));
    }

    #[test]
    fn config_updates_must_be_text() {
        let cmd = RemotingCommand::for_test(code::UPDATE_NAMESRV_CONFIG, &[], [0xff, 0xfe]);
        assert_eq!(remark(&cmd), "string2Properties error");
        let cmd = RemotingCommand::for_test(code::UPDATE_NAMESRV_CONFIG, &[], b"");
        assert_eq!(
            parse(&cmd),
            Ok(Request::UpdateNamesrvConfig(UpdateNamesrvConfig {
                properties: None
            }))
        );
    }
}
