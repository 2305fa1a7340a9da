//! The server's own properties: GET_NAMESRV_CONFIG's text, UPDATE_NAMESRV_CONFIG (checked,
//! written to the config file by the durable writer, one at a time, applied once on disk), and
//! the settings each part of the processor derives from the config.

use super::{Awaiting, DeferredReply, Effects, Processor, Refusal, Reply, Ticket};
use crate::config::{Cidr, ConfigPlan, NamesrvConfig};
use crate::kv::{Job, KvLimits};
use crate::request::UpdateNamesrvConfig;
use crate::route::model::BodyLimits;
use crate::route::table::{RouteBounds, RouteSettings};
use log::{info, warn};

pub(super) fn route_settings(config: &NamesrvConfig) -> RouteSettings {
    RouteSettings {
        support_acting_master: config.support_acting_master,
        delete_topic_with_broker_registration: config.delete_topic_with_broker_registration,
        notify_min_broker_id_changed: config.notify_min_broker_id_changed,
        cache_max_bytes: config.route_cache_max_bytes as usize,
    }
}

/// UPDATE_NAMESRV_CONFIGs, and bytes of their bodies, that may wait behind the one being
/// written; more are answered SYSTEM_BUSY (each waiting one holds a connection and its body).
pub(super) const MAX_WAITING_CONFIG_UPDATES: usize = 64;

pub(super) const MAX_WAITING_CONFIG_BYTES: usize = 1 << 20;

pub(super) fn route_bounds(config: &NamesrvConfig) -> RouteBounds {
    RouteBounds {
        max_brokers: config.max_brokers as usize,
        max_topics: config.max_topics as usize,
        max_topics_per_broker: config.max_topics_per_broker as usize,
    }
}

pub(super) fn body_limits(config: &NamesrvConfig) -> BodyLimits {
    let mut limits = BodyLimits::default();
    limits.json.max_depth = config.max_json_depth as usize;
    limits.json.max_string_len = config.max_json_string_length as usize;
    limits.max_topics = config.max_topics_per_registration as usize;
    limits.max_inflated_len = config.max_inflated_body_length as usize;
    limits
}

impl Processor {
    /// GET_NAMESRV_CONFIG: the properties in force, as text.
    pub(super) fn get_config(&mut self) -> Result<Reply, Refusal> {
        let text = self.config.to_properties_text();
        Ok(Reply::with_body(text.into_bytes()))
    }

    /// UPDATE_NAMESRV_CONFIG: checked against the config, written back to the config file by
    /// the durable writer, applied and answered once the file is on disk. One at a time: a
    /// request arriving meanwhile waits its turn (and is checked against the config the one
    /// before it made).
    pub(super) fn update_config(
        &mut self,
        r: UpdateNamesrvConfig<'_>,
        ticket: Option<Ticket>,
    ) -> Result<Reply, Refusal> {
        let Some(text) = r.properties else {
            return Ok(Reply::ok());
        };
        if !self.config_writing {
            return self.start_config_update(text, ticket);
        }
        let Some(ticket) = ticket else {
            return Err(Refusal::NoConnection);
        };
        let waiting_bytes: usize = self.config_queue.iter().map(|(_, t)| t.len()).sum();
        if self.config_queue.len() >= MAX_WAITING_CONFIG_UPDATES
            || waiting_bytes + text.len() > MAX_WAITING_CONFIG_BYTES
        {
            return Err(Refusal::ConfigBacklog {
                waiting: self.config_queue.len(),
            });
        }
        self.config_queue.push_back((ticket, text.to_string()));
        Ok(Reply::later())
    }

    fn start_config_update(
        &mut self,
        text: &str,
        ticket: Option<Ticket>,
    ) -> Result<Reply, Refusal> {
        let plan = match self.config.plan_update(text) {
            Ok(Some(plan)) => plan,
            Ok(None) => return Ok(Reply::ok()),
            Err(e) => {
                warn!("refused config update: {e}");
                return Err(Refusal::Config(e));
            }
        };
        let Some(ticket) = ticket else {
            return Err(Refusal::NoConnection);
        };
        let persist = plan.clone();
        self.next_write_id += 1;
        let id = self.next_write_id;
        let write: crate::kv::FileWrite =
            Box::new(move || persist.persist().map_err(|e| e.remark()));
        if self.outbox.durable.submit(Job::File { id, write }).is_err() {
            return Err(Refusal::ConfigWriterGone);
        }
        self.config_writing = true;
        self.awaiting.push_back(Awaiting {
            id,
            ticket,
            plan: Some(Box::new(plan)),
        });
        Ok(Reply::later())
    }

    /// The config file of update `id` is written (or not): apply and answer it, then start
    /// the next waiting update.
    pub(super) fn config_written(
        &mut self,
        id: u64,
        result: Result<(), String>,
        replies: &mut Vec<DeferredReply>,
        effects: &mut Effects,
    ) {
        let Some(Awaiting {
            ticket,
            plan: Some(plan),
            ..
        }) = self.take_awaiting(id)
        else {
            return;
        };
        self.config_writing = false;
        let reply = match result {
            Ok(()) => {
                self.adopt_config(*plan, effects);
                Reply::ok()
            }
            Err(remark) => {
                warn!("config update not applied: {remark}");
                Refusal::ConfigNotWritten(remark).reply()
            }
        };
        replies.push(self.deferred_reply(ticket, &reply));
        while !self.config_writing {
            let Some((ticket, text)) = self.config_queue.pop_front() else {
                break;
            };
            let reply = match self.start_config_update(&text, Some(ticket)) {
                Ok(reply) if reply.deferred => continue,
                Ok(reply) => reply,
                Err(r) => r.reply(),
            };
            replies.push(self.deferred_reply(ticket, &reply));
        }
    }

    /// The plan's file is written: its config becomes the server's.
    fn adopt_config(&mut self, plan: ConfigPlan, effects: &mut Effects) {
        info!("config updated: {}", plan.changed().join(", "));
        let before = std::mem::replace(&mut self.config, plan.next);
        self.apply_config_change(&before);
        effects.config_changed = true;
    }

    fn apply_config_change(&mut self, before: &NamesrvConfig) {
        let settings = route_settings(&self.config);
        let routes_differ = settings != self.table.settings
            || before.order_message_enable != self.config.order_message_enable;
        self.table.settings = settings;
        if routes_differ {
            self.table.invalidate_all();
        }
        self.body_limits = body_limits(&self.config);
        self.kv.set_limits(KvLimits::from_config(&self.config));
        self.admin_allow_list = Cidr::parse_list(&self.config.admin_allow_list);
        self.broker_allow_list = Cidr::parse_list(&self.config.broker_allow_list);
        self.bounds = route_bounds(&self.config);
        if before.log_level != self.config.log_level {
            if let Ok(level) = self.config.log_level.parse() {
                log::set_max_level(level);
            }
        }
    }
}
