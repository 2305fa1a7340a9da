//! What admin tools send; topic names are validated here, before anything changes.

use super::field::{BROKER_NAME, CLUSTER_NAME, KEY, NAMESPACE, TOPIC, VALUE};
use super::header::{Encoded, Fields, ParseError};
use crate::route::model::{Dialect, QueueData, TopicRouteData};

text_request! {
    /// 100 PUT_KV_CONFIG.
    PutKvConfig { namespace: NAMESPACE, key: KEY, value: VALUE }
}

text_request! {
    /// 101 GET_KV_CONFIG and 102 DELETE_KV_CONFIG: one KV item.
    KvKey { namespace: NAMESPACE, key: KEY }
}

text_request! {
    /// 219 GET_KVLIST_BY_NAMESPACE.
    GetKvList { namespace: NAMESPACE }
}

text_request! {
    /// 205 WIPE_WRITE_PERM_OF_BROKER and 327 ADD_WRITE_PERM_OF_BROKER.
    WritePerm { broker_name: BROKER_NAME }
}

/// 216 DELETE_TOPIC_IN_NAMESRV; without a cluster the topic goes everywhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeleteTopic<'a> {
    pub topic: &'a str,
    pub cluster: Option<&'a str>,
}

impl<'a> DeleteTopic<'a> {
    pub(super) fn parse(h: Fields<'a>) -> Result<Self, ParseError> {
        let topic = h.required(TOPIC)?;
        h.limits.validate_topic(topic)?;
        Ok(DeleteTopic {
            topic,
            cluster: h.optional(CLUSTER_NAME),
        })
    }

    pub fn encode(&self, e: &mut Encoded<'a>) {
        e.put(TOPIC, self.topic);
        e.put_opt(CLUSTER_NAME, self.cluster);
    }
}

/// 217 REGISTER_TOPIC_IN_NAMESRV: the queues of the body's TopicRouteData (as Java).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisterTopic<'a> {
    pub topic: &'a str,
    pub queue_datas: Vec<QueueData>,
}

impl<'a> RegisterTopic<'a> {
    pub(super) fn parse(h: Fields<'a>) -> Result<Self, ParseError> {
        let topic = h.required(TOPIC)?;
        h.limits.validate_topic(topic)?;
        let queue_datas = if h.body().is_empty() || h.body_decoded {
            Vec::new()
        } else {
            TopicRouteData::decode_queues(h.body(), &h.limits.json).map_err(|e| {
                ParseError::BadBody {
                    what: "TopicRouteData",
                    reason: e.to_string(),
                }
            })?
        };
        for q in &queue_datas {
            let values = [q.read_queue_nums, q.write_queue_nums, q.perm];
            h.limits.check_topic_values(topic, values)?;
        }
        Ok(RegisterTopic { topic, queue_datas })
    }

    /// The queues as the body's TopicRouteData (standard JSON; the other members empty).
    pub fn encode(&self, e: &mut Encoded<'a>) {
        e.put(TOPIC, self.topic);
        let route = TopicRouteData {
            queue_datas: self.queue_datas.clone(),
            ..TopicRouteData::default()
        };
        let mut body = Vec::new();
        route.encode(Dialect::Standard, &mut body);
        e.body = body.into();
    }
}

/// 318 UPDATE_NAMESRV_CONFIG: `key=value` lines, `None` for an empty body (nothing to do).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UpdateNamesrvConfig<'a> {
    pub properties: Option<&'a str>,
}

/// The longest UPDATE_NAMESRV_CONFIG body: every key with a long value fits, and checking it
/// (microseconds per line) cannot hold the loop long.
pub const MAX_CONFIG_UPDATE_BYTES: usize = 16 * 1024;

impl<'a> UpdateNamesrvConfig<'a> {
    pub(super) fn parse(h: Fields<'a>) -> Result<Self, ParseError> {
        if h.body().len() > MAX_CONFIG_UPDATE_BYTES {
            return Err(ParseError::BadBody {
                what: "UPDATE_NAMESRV_CONFIG",
                reason: format!(
                    "{} bytes, more than {MAX_CONFIG_UPDATE_BYTES}; send fewer keys at a time",
                    h.body().len()
                ),
            });
        }
        let text = std::str::from_utf8(h.body())
            .map_err(|_| ParseError::Invalid("string2Properties error".into()))?;
        let properties = (!text.is_empty()).then_some(text);
        Ok(UpdateNamesrvConfig { properties })
    }

    pub fn encode(&self, e: &mut Encoded<'a>) {
        e.body = self.properties.unwrap_or_default().as_bytes().into();
    }
}
