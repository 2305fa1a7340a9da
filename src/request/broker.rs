//! What brokers send about themselves: REGISTER_BROKER (103), UNREGISTER_BROKER (104),
//! QUERY_DATA_VERSION (322), BROKER_HEARTBEAT (904), and GET_BROKER_MEMBER_GROUP (901).
//! Header fields are read in Java's order, so a request missing several names the same
//! field Java would.

use super::header::{BodyDone, Fields, NameLimits, ParseError};
use crate::route::model::{
    decode_register_body_reusing, BodyLimits, DataVersion, DecodeScratch, RegisterBody,
};
use crate::route::table::{BodyFingerprint, ConnId, RegisterRequest, UnregisterRequest};

/// 103 REGISTER_BROKER (docs/protocol.md §4.4). The body is kept as sent: a registration whose
/// body is byte-identical to the broker's previous one is applied without decoding it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisterBroker<'a> {
    pub cluster: &'a str,
    pub broker_addr: &'a str,
    pub broker_name: &'a str,
    pub broker_id: i64,
    pub ha_server_addr: &'a str,
    pub zone_name: Option<&'a str>,
    pub heartbeat_timeout_ms: Option<u64>,
    /// `None` marks a 4.x broker.
    pub enable_acting_master: Option<bool>,
    /// `bodyCrc32` (0: not checked).
    pub body_crc32: i64,
    pub compressed: bool,
    /// The request's `version`: decides the body layout.
    pub version: i32,
    pub body: &'a [u8],
    /// Identifies the body, to recognise an unchanged one without decoding it.
    pub fingerprint: BodyFingerprint,
}

impl<'a> RegisterBroker<'a> {
    pub(super) fn parse(h: Fields<'a>) -> Result<Self, ParseError> {
        let broker_name = h.required("brokerName")?;
        let broker_addr = h.required("brokerAddr")?;
        let cluster = h.required("clusterName")?;
        let ha_server_addr = h.required("haServerAddr")?;
        let broker_id = h.required_i64("brokerId")?;
        h.limits.check_broker_name("clusterName", cluster)?;
        h.limits.check_broker_name("brokerName", broker_name)?;
        h.limits.check_address("brokerAddr", broker_addr)?;
        h.limits.check_address("haServerAddr", ha_server_addr)?;
        // Java parses these leniently: an unparsable value is logged and left at its default.
        let body_crc32 = h
            .optional("bodyCrc32")
            .and_then(|v| v.trim().parse::<i32>().ok())
            .map_or(0, i64::from);
        let heartbeat_timeout_ms = h
            .optional("heartbeatTimeoutMillis")
            .and_then(|v| v.trim().parse::<i64>().ok())
            .filter(|v| *v > 0)
            .map(|v| v as u64);
        let body = h.body();
        Ok(RegisterBroker {
            cluster,
            broker_addr,
            broker_name,
            broker_id,
            ha_server_addr,
            zone_name: h.optional("__ZONE_NAME"),
            heartbeat_timeout_ms,
            enable_acting_master: h.optional_bool("enableActingMaster"),
            body_crc32,
            compressed: h.optional_bool("compressed").unwrap_or(false),
            version: h.cmd.version,
            body,
            fingerprint: match h.done {
                BodyDone::Hashed(fingerprint) => fingerprint,
                _ => body_fingerprint(body, body_crc32),
            },
        })
    }

    /// The registration as the route table takes it.
    pub fn table_request(&self, conn: Option<ConnId>, now_ms: u64) -> RegisterRequest<'a> {
        RegisterRequest {
            cluster: self.cluster,
            broker_addr: self.broker_addr,
            broker_name: self.broker_name,
            broker_id: self.broker_id,
            ha_server_addr: self.ha_server_addr,
            zone_name: self.zone_name,
            heartbeat_timeout_ms: self.heartbeat_timeout_ms,
            enable_acting_master: self.enable_acting_master,
            conn,
            now_ms,
            fingerprint: self.fingerprint,
        }
    }

    /// The body's actual CRC when the header names a different one (0 in the header: not
    /// checked).
    pub fn crc_mismatch(&self) -> Option<i64> {
        if self.body_crc32 == 0 {
            return None;
        }
        let actual = i64::from(crate::checksum::crc32(self.body) & 0x7FFF_FFFF);
        (actual != self.body_crc32).then_some(actual)
    }

    /// Decodes the body (JSON, old-version or zlib) and checks the topic configs it reports:
    /// names, queue counts and perm (`rules`), so that a refused body changes nothing. Topic
    /// names go into strings `scratch` kept from applied bodies.
    pub fn decode_body(
        &self,
        body_limits: &BodyLimits,
        names: &NameLimits,
        scratch: &mut DecodeScratch,
    ) -> Result<RegisterBody, ParseError> {
        let (body, compressed) = (self.body, self.compressed);
        let body =
            decode_register_body_reusing(body, compressed, self.version, body_limits, scratch)
                .map_err(|e| ParseError::BadRegisterBody(e.to_string()))?;
        for (_, tc) in &body.topics {
            names.check_topic_name(&tc.topic_name)?;
            names.check_topic_values(
                &tc.topic_name,
                tc.read_queue_nums,
                tc.write_queue_nums,
                tc.perm,
            )?;
        }
        Ok(body)
    }
}

/// What recognises an unchanged registration body: its length, the header's `bodyCrc32` and
/// its hash (the costly part for a large body: the decode worker computes it for those).
pub fn body_fingerprint(body: &[u8], header_crc: i64) -> BodyFingerprint {
    BodyFingerprint {
        len: body.len(),
        header_crc,
        hash: crate::checksum::fingerprint(body),
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
            broker_name: h.required("brokerName")?,
            broker_addr: h.required("brokerAddr")?,
            cluster: h.required("clusterName")?,
            broker_id: h.required_i64("brokerId")?,
        })
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

/// 322 QUERY_DATA_VERSION: the broker's DataVersion, if it sent one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryDataVersion<'a> {
    pub broker: BrokerRef<'a>,
    pub data_version: Option<DataVersion>,
}

/// The longest QUERY_DATA_VERSION body: a DataVersion is three numbers (under 100 bytes).
pub const MAX_DATA_VERSION_BYTES: usize = 4096;

impl<'a> QueryDataVersion<'a> {
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
        let data_version = if h.body().is_empty() {
            None
        } else {
            Some(
                DataVersion::decode(h.body()).map_err(|e| ParseError::BadBody {
                    what: "DataVersion",
                    reason: e.to_string(),
                })?,
            )
        };
        Ok(QueryDataVersion {
            broker,
            data_version,
        })
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
            cluster: h.required("clusterName")?,
            broker_addr: h.required("brokerAddr")?,
            broker_name: h.required("brokerName")?,
        })
    }
}

/// 901 GET_BROKER_MEMBER_GROUP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GetBrokerMemberGroup<'a> {
    pub cluster: &'a str,
    pub broker_name: &'a str,
}

impl<'a> GetBrokerMemberGroup<'a> {
    pub(super) fn parse(h: Fields<'a>) -> Result<Self, ParseError> {
        Ok(GetBrokerMemberGroup {
            cluster: h.required("clusterName")?,
            broker_name: h.required("brokerName")?,
        })
    }
}
