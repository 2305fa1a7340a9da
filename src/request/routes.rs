//! GET_ROUTEINFO_BY_TOPIC (105) and GET_TOPICS_BY_CLUSTER (224).

use super::field::{ACCEPT_STANDARD_JSON_ONLY, CLUSTER, TOPIC, ZONE_MODE, ZONE_NAME};
use super::header::{Encoded, Fields, ParseError};
use crate::remoting::codes::version;
use crate::route::model::Dialect;

/// 105 GET_ROUTEINFO_BY_TOPIC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GetRouteInfo<'a> {
    pub topic: &'a str,
    /// Standard for 4.9.4+ peers and those that ask (`acceptStandardJsonOnly`), else legacy.
    pub dialect: Dialect,
    /// The zone to filter the route by (ZoneRouteRPCHook, §5.8).
    pub zone: Option<&'a str>,
}

impl<'a> GetRouteInfo<'a> {
    pub(super) fn parse(h: Fields<'a>) -> Result<Self, ParseError> {
        let mut lookup = GetRouteInfo::new(h.required(TOPIC)?, h.cmd.version);
        if h.optional_bool(ACCEPT_STANDARD_JSON_ONLY).unwrap_or(false) {
            lookup.dialect = Dialect::Standard;
        }
        if h.optional_bool(ZONE_MODE).unwrap_or(false) {
            lookup.zone = h.optional(ZONE_NAME).filter(|z| !z.trim().is_empty());
        }
        Ok(lookup)
    }

    /// A lookup of `topic` in the dialect a peer of `version` gets without asking.
    pub fn new(topic: &'a str, version: i32) -> Self {
        GetRouteInfo {
            topic,
            dialect: if version >= version::V4_9_4 {
                Dialect::Standard
            } else {
                Dialect::Legacy
            },
            zone: None,
        }
    }

    /// An older `version` asks for the standard dialect with `acceptStandardJsonOnly`.
    pub fn encode(&self, e: &mut Encoded<'a>, version: i32) {
        e.put(TOPIC, self.topic);
        if self.dialect == Dialect::Standard && version < version::V4_9_4 {
            e.put_value(ACCEPT_STANDARD_JSON_ONLY, true);
        }
        if let Some(zone) = self.zone {
            e.put(ZONE_NAME, zone);
            e.put_value(ZONE_MODE, true);
        }
    }
}

/// 224 GET_TOPICS_BY_CLUSTER; a missing `cluster` is an error only with `enableTopicList`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GetTopicsByCluster<'a> {
    cluster: Option<&'a str>,
}

impl<'a> GetTopicsByCluster<'a> {
    pub(super) fn parse(h: Fields<'a>) -> Result<Self, ParseError> {
        Ok(GetTopicsByCluster {
            cluster: h.optional(CLUSTER),
        })
    }

    pub fn new(cluster: &'a str) -> Self {
        GetTopicsByCluster {
            cluster: Some(cluster),
        }
    }

    pub fn encode(&self, e: &mut Encoded<'a>) {
        e.put_opt(CLUSTER, self.cluster);
    }

    pub fn cluster(&self) -> Result<&'a str, ParseError> {
        self.cluster.ok_or(ParseError::MissingField(CLUSTER))
    }
}
