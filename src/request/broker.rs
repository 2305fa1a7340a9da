//! What brokers send about themselves, read in Java's order (the same missing field is named).

use super::field::{
    BODY_CRC32, BROKER_ADDR, BROKER_ID, BROKER_NAME, CLUSTER_NAME, COMPRESSED,
    ENABLE_ACTING_MASTER, HA_SERVER_ADDR, HEARTBEAT_TIMEOUT_MILLIS, ZONE_NAME,
};
use super::header::{Encoded, Fields, NameLimits, ParseError};
use crate::remoting::codes::request::NOTIFY_MIN_BROKER_ID_CHANGE;
use crate::route::model::{
    decode_register_body, BodyLimits, DataVersion, DecodeScratch, RegisterBody,
};
use crate::route::table::{
    BodyFingerprint, MinIdNotification, RegisteringBroker, UnregisterRequest,
};

/// 103 REGISTER_BROKER (docs/protocol.md §4.4), its body as sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisterBroker<'a> {
    pub broker: RegisteringBroker<'a>,
    /// `bodyCrc32` (0: not checked).
    pub body_crc32: i64,
    pub compressed: bool,
    /// The request's `version`: decides the body layout.
    pub version: i32,
    pub body: &'a [u8],
}

impl<'a> RegisterBroker<'a> {
    pub(super) fn parse(h: Fields<'a>) -> Result<Self, ParseError> {
        let broker_name = h.required(BROKER_NAME)?;
        let broker_addr = h.required(BROKER_ADDR)?;
        let cluster = h.required(CLUSTER_NAME)?;
        let ha_server_addr = h.required(HA_SERVER_ADDR)?;
        let broker_id = h.required_i64(BROKER_ID)?;
        h.limits.check_broker_name(CLUSTER_NAME, cluster)?;
        h.limits.check_broker_name(BROKER_NAME, broker_name)?;
        h.limits.check_address(BROKER_ADDR, broker_addr)?;
        h.limits.check_address(HA_SERVER_ADDR, ha_server_addr)?;
        // Java parses these leniently: an unparsable value is logged and left at its default.
        let body_crc32 = h
            .optional(BODY_CRC32)
            .and_then(|v| v.trim().parse::<i32>().ok())
            .map_or(0, i64::from);
        let heartbeat_timeout_ms = h
            .optional(HEARTBEAT_TIMEOUT_MILLIS)
            .and_then(|v| v.trim().parse::<i64>().ok())
            .filter(|v| *v > 0)
            .map(|v| v as u64);
        let broker = RegisteringBroker {
            cluster,
            broker_addr,
            broker_name,
            broker_id,
            ha_server_addr,
            zone_name: h.optional(ZONE_NAME),
            heartbeat_timeout_ms,
            enable_acting_master: h.optional_bool(ENABLE_ACTING_MASTER),
        };
        Ok(RegisterBroker {
            broker,
            body_crc32,
            compressed: h.optional_bool(COMPRESSED).unwrap_or(false),
            version: h.cmd.version,
            body: h.body(),
        })
    }

    /// As a broker sends it (`enableActingMaster` left out for a 4.x broker).
    pub fn encode(&self, e: &mut Encoded<'a>) {
        let b = &self.broker;
        e.put(BROKER_NAME, b.broker_name);
        e.put(BROKER_ADDR, b.broker_addr);
        e.put(CLUSTER_NAME, b.cluster);
        e.put(HA_SERVER_ADDR, b.ha_server_addr);
        e.put_value(BROKER_ID, b.broker_id);
        if let Some(acting) = b.enable_acting_master {
            e.put_value(ENABLE_ACTING_MASTER, acting);
        }
        e.put_value(COMPRESSED, self.compressed);
        e.put_value(BODY_CRC32, self.body_crc32);
        if let Some(t) = b.heartbeat_timeout_ms {
            e.put_value(HEARTBEAT_TIMEOUT_MILLIS, t);
        }
        e.put_opt(ZONE_NAME, b.zone_name);
        e.body = self.body.into();
    }

    /// What recognises an unchanged body: its length, `bodyCrc32` and hash.
    pub fn fingerprint(&self) -> BodyFingerprint {
        BodyFingerprint {
            len: self.body.len(),
            header_crc: self.body_crc32,
            hash: crate::checksum::fingerprint(self.body),
        }
    }

    /// The body's actual CRC when the header names another (0 in the header: not checked).
    pub fn crc_mismatch(&self) -> Option<i64> {
        if self.body_crc32 == 0 {
            return None;
        }
        let actual = i64::from(crate::checksum::crc32(self.body) & 0x7FFF_FFFF);
        (actual != self.body_crc32).then_some(actual)
    }

    /// Decodes the body and checks its topic configs, so that a refused body changes nothing.
    pub fn decode_body(
        &self,
        body_limits: &BodyLimits,
        names: &NameLimits,
        scratch: &mut DecodeScratch,
    ) -> Result<RegisterBody, ParseError> {
        let (body, compressed) = (self.body, self.compressed);
        let body = decode_register_body(body, compressed, self.version, body_limits, scratch)
            .map_err(|e| ParseError::Invalid(format!("register broker failed: bad body: {e}")))?;
        for (_, tc) in &body.topics {
            names.check_topic_name(&tc.topic_name)?;
            let values = [tc.read_queue_nums, tc.write_queue_nums, tc.perm];
            names.check_topic_values(&tc.topic_name, values)?;
        }
        Ok(body)
    }
}

/// The four fields that name one broker in UNREGISTER_BROKER (104) and QUERY_DATA_VERSION.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BrokerRef<'a> {
    pub broker_name: &'a str,
    pub broker_addr: &'a str,
    pub cluster: &'a str,
    pub broker_id: i64,
}

impl<'a> BrokerRef<'a> {
    pub(super) fn parse(h: Fields<'a>) -> Result<Self, ParseError> {
        Ok(BrokerRef {
            broker_name: h.required(BROKER_NAME)?,
            broker_addr: h.required(BROKER_ADDR)?,
            cluster: h.required(CLUSTER_NAME)?,
            broker_id: h.required_i64(BROKER_ID)?,
        })
    }

    pub fn encode(&self, e: &mut Encoded<'a>) {
        e.put(BROKER_NAME, self.broker_name);
        e.put(BROKER_ADDR, self.broker_addr);
        e.put(CLUSTER_NAME, self.cluster);
        e.put_value(BROKER_ID, self.broker_id);
    }

    /// UNREGISTER_BROKER as the worker and the route table take it (owned: it is queued).
    pub fn unregister_request(&self) -> UnregisterRequest {
        UnregisterRequest {
            broker_name: self.broker_name.into(),
            broker_addr: self.broker_addr.into(),
            cluster: self.cluster.into(),
            broker_id: self.broker_id,
        }
    }
}

/// 322 QUERY_DATA_VERSION: the broker and the DataVersion it holds, as sent (JSON, or empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryDataVersion<'a> {
    pub broker: BrokerRef<'a>,
    body: &'a [u8],
}

/// The longest QUERY_DATA_VERSION body: a DataVersion is three numbers (under 100 bytes).
pub const MAX_DATA_VERSION_BYTES: usize = 4096;

impl<'a> QueryDataVersion<'a> {
    pub fn new(broker: BrokerRef<'a>, body: &'a [u8]) -> Self {
        QueryDataVersion { broker, body }
    }

    pub fn encode(&self, e: &mut Encoded<'a>) {
        self.broker.encode(e);
        e.body = self.body.into();
    }

    pub(super) fn parse(h: Fields<'a>) -> Result<Self, ParseError> {
        let broker = BrokerRef::parse(h)?;
        if h.body().len() > MAX_DATA_VERSION_BYTES {
            return Err(ParseError::BadBody {
                what: "DataVersion",
                reason: format!(
                    "{} bytes, more than {MAX_DATA_VERSION_BYTES}",
                    h.body().len()
                ),
            });
        }
        Ok(QueryDataVersion {
            broker,
            body: h.body(),
        })
    }

    /// A body that does not decode is refused ([`ParseError::BadBody`]).
    pub fn data_version(&self) -> Result<Option<DataVersion>, ParseError> {
        if self.body.is_empty() {
            return Ok(None);
        }
        DataVersion::decode(self.body)
            .map(Some)
            .map_err(|e| ParseError::BadBody {
                what: "DataVersion",
                reason: e.to_string(),
            })
    }

    /// Java's `changed`: false only when the broker is live (`stored`: its DataVersion and its
    /// text) and sent an equal DataVersion; the stored text is compared, not decoded.
    pub fn changed(&self, stored: Option<(&DataVersion, &[u8])>) -> Result<bool, ParseError> {
        match stored {
            Some((_, text)) if self.body == text => Ok(false),
            _ => Ok(match (stored, self.data_version()?) {
                (Some((s, _)), Some(v)) => *s != v,
                _ => true,
            }),
        }
    }
}

/// 904 BROKER_HEARTBEAT (the controller's optional fields are not read).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BrokerHeartbeat<'a> {
    pub cluster: &'a str,
    pub broker_addr: &'a str,
    pub broker_name: &'a str,
}

impl<'a> BrokerHeartbeat<'a> {
    pub(super) fn parse(h: Fields<'a>) -> Result<Self, ParseError> {
        Ok(BrokerHeartbeat {
            cluster: h.required(CLUSTER_NAME)?,
            broker_addr: h.required(BROKER_ADDR)?,
            broker_name: h.required(BROKER_NAME)?,
        })
    }

    /// In the order brokers write it (brokerName, brokerAddr, clusterName).
    pub fn encode(&self, e: &mut Encoded<'a>) {
        e.put(BROKER_NAME, self.broker_name);
        e.put(BROKER_ADDR, self.broker_addr);
        e.put(CLUSTER_NAME, self.cluster);
    }

    /// As a broker sends it, with the `brokerId` the name server does not read.
    pub fn encode_as_broker(&self, e: &mut Encoded<'a>, broker_id: i64) {
        self.encode(e);
        e.put_value(BROKER_ID, broker_id);
    }
}

/// 905 NOTIFY_MIN_BROKER_ID_CHANGE, which the name server sends (docs/protocol.md §3.5).
impl MinIdNotification {
    pub fn encode(&self) -> Encoded<'_> {
        let mut e = Encoded::new(NOTIFY_MIN_BROKER_ID_CHANGE);
        e.put_value("minBrokerId", self.min_broker_id);
        e.put("minBrokerAddr", &self.min_broker_addr);
        e.put_opt("offlineBrokerAddr", self.offline_broker_addr.as_deref());
        e.put_opt("haBrokerAddr", self.ha_broker_addr.as_deref());
        e
    }
}

text_request! {
    /// 901 GET_BROKER_MEMBER_GROUP.
    GetBrokerMemberGroup { cluster: CLUSTER_NAME, broker_name: BROKER_NAME }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remoting::command::{RemotingCommand, SerializeType};

    fn query(body: &[u8]) -> RemotingCommand {
        RemotingCommand {
            code: 322,
            language: 0,
            version: 479,
            opaque: 1,
            flag: 0,
            remark: None,
            ext_fields: [
                ("brokerName", "b"),
                ("brokerAddr", "10.0.0.1:10911"),
                ("clusterName", "c"),
                ("brokerId", "0"),
            ]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
            body: bytes::Bytes::copy_from_slice(body),
            serialize_type: SerializeType::Json,
        }
    }

    /// The byte comparison answers exactly as decoding and comparing values does: for each
    /// body (the stored version's own bytes, other versions, other layouts of the same
    /// version, odd and broken JSON, none) and each stored version (none: an unknown broker),
    /// the same `changed` and the same refusal.
    #[test]
    fn comparing_bytes_answers_as_decoding_does() {
        let v = |counter, state_version, timestamp| DataVersion {
            counter,
            state_version,
            timestamp,
        };
        let versions = [
            v(7, 0, 1_700_000_000_007),
            v(8, 0, 1_700_000_000_007),
            v(0, 0, 0),
            v(-1, i64::MIN, i64::MAX),
        ];
        let mut bodies: Vec<Vec<u8>> = versions
            .iter()
            .map(|d| {
                let mut b = Vec::new();
                d.encode(&mut b);
                b
            })
            .collect();
        for odd in [
            &br#"{"timestamp":1700000000007,"counter":7,"stateVersion":0}"#[..],
            br#"{ "counter" : 7 , "stateVersion" : 0 , "timestamp" : 1700000000007 }"#,
            br#"{"counter":7,"timestamp":1700000000007}"#,
            br#"{"counter":7,"stateVersion":0,"timestamp":1700000000007,"extra":[1]}"#,
            br#"{"counter":6,"counter":7,"stateVersion":0,"timestamp":1700000000007}"#,
            br#"{"counter":"7","stateVersion":0,"timestamp":1700000000007}"#,
            br#"{"counter":7.0,"stateVersion":0,"timestamp":1700000000007}"#,
            br#"{"counter":7,"stateVersion":0,"timestamp":1700000000007} "#,
            br#"{"counter":7,"stateVersion":0,"timestamp":1700000000007}x"#,
            br#"{"counter":7,"stateVersion":0,"timestamp":17000000000070}"#,
            br#"{"counter":07,"stateVersion":0,"timestamp":1700000000007}"#,
            br#"{"counter":-0,"stateVersion":0,"timestamp":0}"#,
            br#"{}"#,
            br#"{"#,
            br#"[]"#,
            br#"null"#,
            br#"7"#,
            b" ",
            b"\xff",
            b"",
        ] {
            bodies.push(odd.to_vec());
        }
        let limits = NameLimits::default();
        let (mut fast_path, mut refused) = (0, 0);
        for body in &bodies {
            let cmd = query(body);
            let h = Fields {
                cmd: &cmd,
                limits: &limits,
                body_decoded: false,
            };
            let q = QueryDataVersion::parse(h).expect("header");
            for stored in versions.iter().map(Some).chain([None]) {
                let mut text = Vec::new();
                if let Some(s) = stored {
                    s.encode(&mut text);
                }
                let answer = q.changed(stored.map(|s| (s, text.as_slice())));
                assert_eq!(
                    answer,
                    // Decoded and compared by value: what the text comparison must agree with.
                    q.data_version().map(|sent| match (stored, sent) {
                        (Some(s), Some(v)) => *s != v,
                        _ => true,
                    }),
                    "{stored:?} {:?}",
                    String::from_utf8_lossy(body)
                );
                fast_path += usize::from(answer == Ok(false) && stored.is_some() && body == &text);
                refused += usize::from(answer.is_err());
            }
        }
        // Both paths ran: each stored version met its own bytes, and broken bodies were refused.
        assert_eq!(fast_path, versions.len());
        assert!(refused > 0);
    }
}
