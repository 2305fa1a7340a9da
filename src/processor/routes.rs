//! Reads of the registry: routes (cached bodies, zone filtering), topic lists (cached, built
//! in steps while their requests wait), cluster info.

use super::{LoopConnId, Processor, Refusal, Reply, Ticket, ORDER_TOPIC_CONFIG};
use crate::request::{GetRouteInfo, GetTopicsByCluster};
use crate::route::model;
use crate::route::model::{Dialect, TopicRouteData};
use crate::route::table::ListKind;
use byteorder::{BigEndian, ByteOrder};
use bytes::Bytes;
use std::time::{Duration, Instant};

/// What encoding a topic list may take of a turn (at 1,000,000 topics a shard holds 4,000).
const TOPIC_LIST_STEP: Duration = Duration::from_micros(300);

/// Larger lists are answered by [`Processor::run_topic_lists`], one a turn: the body is queued
/// shared, behind its frame's header.
const INLINE_LIST_BYTES: usize = 256 << 10;

impl Processor {
    pub(super) fn cluster_info(&mut self) -> Result<Reply, Refusal> {
        Ok(Reply::encoded(|out| self.table.cluster_info().encode(out)))
    }

    pub(super) fn route_info(&mut self, r: GetRouteInfo<'_>) -> Result<Reply, Refusal> {
        if self.config.need_wait_for_service
            && self.started.elapsed().as_secs() < self.config.wait_seconds_for_service.max(0) as u64
        {
            return Err(Refusal::Failed("name server not ready".into()));
        }
        let topic = r.topic;
        let order_enabled = self.config.order_message_enable;
        let kv = &self.kv;
        let order_conf = || {
            let conf = order_enabled.then(|| kv.get(ORDER_TOPIC_CONFIG, topic));
            conf.flatten().map(str::to_string)
        };
        if let Some(zone) = r.zone {
            // Zone-filtered answers are built per request and always legacy (§5.8).
            let Some(mut route) = self.table.pickup_route(topic) else {
                return Err(Refusal::TopicNotExist(topic.to_string()));
            };
            route.order_topic_conf = order_conf();
            filter_by_zone(&mut route, zone);
            return Ok(Reply::encoded(|out| route.encode(Dialect::Legacy, out)));
        }
        match self.table.route_body(topic, r.dialect, order_conf) {
            Some(bytes) => Ok(Reply::with_body(bytes)),
            None => Err(Refusal::TopicNotExist(topic.to_string())),
        }
    }

    /// 206, 224 and 311-313: the cached body, or (stale or large) answered by
    /// `run_topic_lists`.
    pub(super) fn topic_list(&mut self, kind: ListKind, t: Ticket) -> Result<Reply, Refusal> {
        if self.lists_waiting.is_empty() {
            let deadline = Instant::now() + TOPIC_LIST_STEP;
            let body = self.table.topic_list(&kind, deadline);
            if let Some(body) = body.filter(|b| b.len() <= INLINE_LIST_BYTES) {
                return Ok(Reply::with_body(body));
            }
        }
        self.lists_waiting.push_back((kind, t));
        Ok(Reply::later())
    }

    /// One step of the oldest waiting list; once current, its answer (one a turn) goes to
    /// `write` as the frame's header and its body, false for a closed connection. Returns
    /// the connections to release.
    pub fn run_topic_lists(
        &mut self,
        mut write: impl FnMut(LoopConnId, &mut dyn FnMut(&mut Vec<u8>), Bytes) -> bool,
    ) -> Vec<LoopConnId> {
        let mut answered = Vec::new();
        if self.lists_waiting.is_empty() {
            return answered; // every turn: no clock read when nothing waits
        }
        let deadline = Instant::now() + TOPIC_LIST_STEP;
        while let Some((kind, t)) = self.lists_waiting.front() {
            let Some(body) = self.table.topic_list(kind, deadline) else {
                break;
            };
            let t = *t;
            self.lists_waiting.pop_front();
            answered.push(t.conn);
            let mut head = |out: &mut Vec<u8>| {
                // A SUCCESS frame without a body, its length word then counting the body.
                let start = out.len();
                self.write_reply(t.opaque, &Reply::ok(), out);
                let len = BigEndian::read_u32(&out[start..]) + body.len() as u32;
                BigEndian::write_u32(&mut out[start..], len);
            };
            if !t.oneway && write(t.conn, &mut head, body.clone()) {
                break;
            }
        }
        answered
    }

    pub fn topic_lists_waiting(&self) -> bool {
        !self.lists_waiting.is_empty()
    }

    /// 206 and 311-313, gated by `enableAllTopicList` and `enableTopicList`.
    pub(super) fn listed_topics(&mut self, kind: ListKind, t: Ticket) -> Result<Reply, Refusal> {
        let c = &self.config;
        list_enabled(if kind == ListKind::All {
            c.enable_all_topic_list
        } else {
            c.enable_topic_list
        })?;
        self.topic_list(kind, t)
    }

    /// 224: `cluster` is required only with `enableTopicList` (checked first).
    pub(super) fn topics_by_cluster(
        &mut self,
        r: GetTopicsByCluster<'_>,
        t: Ticket,
    ) -> Result<Reply, Refusal> {
        list_enabled(self.config.enable_topic_list)?;
        let cluster = r.cluster().map_err(Refusal::Parse)?;
        self.topic_list(ListKind::Cluster(cluster.into()), t)
    }

    pub(super) fn system_topic_list(&mut self) -> Result<Reply, Refusal> {
        let (topics, addr) = self.table.system_topics();
        let topics = topics.iter().map(String::as_str);
        Ok(topic_list(topics, addr.as_deref()))
    }
}

fn list_enabled(enabled: bool) -> Result<(), Refusal> {
    enabled
        .then_some(())
        .ok_or_else(|| Refusal::Failed("disable".into()))
}

fn topic_list<'a>(topics: impl IntoIterator<Item = &'a str>, addr: Option<&str>) -> Reply {
    Reply::encoded(|out| model::encode_topic_list(topics.into_iter(), addr, out))
}

/// ZoneRouteRPCHook (§5.8): keep brokers without a master or in the requested zone.
fn filter_by_zone(route: &mut TopicRouteData, zone: &str) {
    let mut removed_addrs = Vec::new();
    let mut removed_names = Vec::new();
    route.broker_datas.retain(|b| {
        let keep = !b.broker_addrs.contains_key(&0)
            || b.zone_name
                .as_deref()
                .is_some_and(|z| z.eq_ignore_ascii_case(zone));
        if !keep {
            removed_names.push(b.broker_name.clone());
            removed_addrs.extend(b.broker_addrs.values().cloned());
        }
        keep
    });
    route
        .queue_datas
        .retain(|q| !removed_names.contains(&q.broker_name));
    for a in removed_addrs {
        route.filter_server_table.remove(&a);
    }
}
