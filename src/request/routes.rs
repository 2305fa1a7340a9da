//! What producers, consumers and tools ask about routes and topics: GET_ROUTEINFO_BY_TOPIC
//! (105, the hottest request) and GET_TOPICS_BY_CLUSTER (224). The other topic-list reads
//! carry no header.

use super::header::{Fields, ParseError};
use crate::remoting::codes::version;
use crate::route::model::Dialect;

/// 105 GET_ROUTEINFO_BY_TOPIC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GetRouteInfo<'a> {
    pub topic: &'a str,
    /// Standard JSON for 4.9.4+ peers and those that ask for it (`acceptStandardJsonOnly`),
    /// fastjson's legacy dialect otherwise (docs/protocol.md §6.1).
    pub dialect: Dialect,
    /// The zone to filter the route by (ZoneRouteRPCHook, §5.8): set when `__ZONE_MODE` is
    /// true and `__ZONE_NAME` is not blank.
    pub zone: Option<&'a str>,
}

impl<'a> GetRouteInfo<'a> {
    pub(super) fn parse(h: Fields<'a>) -> Result<Self, ParseError> {
        let topic = h.required("topic")?;
        let standard = h.cmd.version >= version::V4_9_4
            || h.optional_bool("acceptStandardJsonOnly").unwrap_or(false);
        let zone = if h.optional_bool("__ZONE_MODE").unwrap_or(false) {
            h.optional("__ZONE_NAME").filter(|z| !z.trim().is_empty())
        } else {
            None
        };
        Ok(GetRouteInfo {
            topic,
            dialect: if standard {
                Dialect::Standard
            } else {
                Dialect::Legacy
            },
            zone,
        })
    }
}

/// 224 GET_TOPICS_BY_CLUSTER. Java checks `enableTopicList` before it reads this header, so
/// a missing `cluster` is only an error once the list is enabled: see [`Self::cluster`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GetTopicsByCluster<'a> {
    cluster: Option<&'a str>,
}

impl<'a> GetTopicsByCluster<'a> {
    pub(super) fn parse(h: Fields<'a>) -> Result<Self, ParseError> {
        Ok(GetTopicsByCluster {
            cluster: h.optional("cluster"),
        })
    }

    /// The required `cluster` field.
    pub fn cluster(&self) -> Result<&'a str, ParseError> {
        self.cluster.ok_or(ParseError::MissingField("cluster"))
    }
}
