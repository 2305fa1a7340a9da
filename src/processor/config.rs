//! GET/UPDATE_NAMESRV_CONFIG (one write at a time, applied once on disk), derived settings.

use super::{Awaiting, DeferredReply, Effects, Processor, Refusal, Reply, Ticket};
use crate::audit;
use crate::config::{Cidr, ConfigPlan, UpdateError};
use crate::kv::{Job, KvLimits};
use crate::request::UpdateNamesrvConfig;
use crate::route::model::BodyLimits;
use crate::route::table::{RouteBounds, RouteSettings};
use log::{info, warn};

/// UPDATE_NAMESRV_CONFIGs, and their bytes, that may wait behind the one being written.
pub(super) const MAX_WAITING_CONFIG_UPDATES: usize = 64;

pub(super) const MAX_WAITING_CONFIG_BYTES: usize = 1 << 20;

const NOTHING_TO_CHANGE: &str = "nothing to change";

impl Processor {
    pub(super) fn get_config(&mut self) -> Result<Reply, Refusal> {
        let text = self.config.to_properties_text();
        Ok(Reply::with_body(text.into_bytes()))
    }

    pub(super) fn update_config(
        &mut self,
        r: UpdateNamesrvConfig<'_>,
        ticket: Ticket,
    ) -> Result<Reply, Refusal> {
        let Some(text) = r.properties else {
            return Ok(Reply::ok().audited(NOTHING_TO_CHANGE.into()));
        };
        if !self.config_writing {
            return self.start_config_update(text, ticket);
        }
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

    fn start_config_update(&mut self, text: &str, ticket: Ticket) -> Result<Reply, Refusal> {
        let plan = match self.config.plan_update(text) {
            Ok(Some(plan)) => plan,
            Ok(None) => return Ok(Reply::ok().audited(NOTHING_TO_CHANGE.into())),
            // Its audit line gives the reason (rate-limited: anyone may send updates).
            Err(e) => return Err(Refusal::Config(e)),
        };
        let what = audit::changes(
            plan.changes()
                .iter()
                .map(|(k, new)| (k.as_str(), self.config.get(k), Some(new.clone()))),
        );
        let persist = plan.clone();
        let write: crate::kv::FileWrite =
            Box::new(move || persist.persist().map_err(|e| e.remark()));
        let job = |id| Job::File { id, write };
        let reply = self
            .submit_durable(job, ticket, Some(Box::new(plan)), what)
            .map_err(|_| {
                let gone = "cannot write the config file: the writer thread has ended; nothing was changed";
                Refusal::Failed(gone.into())
            })?;
        self.config_writing = true;
        Ok(reply)
    }

    /// Update `id`'s file is written (or not): apply and answer it, then start the next.
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
            what,
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
            Err(remark) => Refusal::Failed(remark).reply(),
        };
        replies.push(self.answer_later(ticket, &reply.audited(what)));
        while !self.config_writing {
            let Some((ticket, text)) = self.config_queue.pop_front() else {
                break;
            };
            let reply = match self.start_config_update(&text, ticket) {
                Ok(reply) if reply.deferred => continue,
                Ok(reply) => reply,
                Err(r) => r.reply(),
            };
            replies.push(self.answer_later(ticket, &reply));
        }
    }

    /// SIGHUP's values of the live keys (read from the config file off the loop): checked as
    /// an update is, all or nothing, adopted without a write-back (the file is their source).
    pub fn reload_config(&mut self, live: &[(String, String)]) -> Effects {
        let mut effects = Effects::default();
        match self.config.plan_reload(live) {
            Ok(Some(plan)) => {
                info!("config reloaded (SIGHUP): {}", plan.changed().join(", "));
                self.adopt_config(plan, &mut effects);
            }
            Ok(None) => info!("config reloaded: no live key changed"),
            Err(UpdateError::Refused(problems)) => {
                for problem in problems {
                    warn!("config reload refused, nothing applied: {problem}");
                }
            }
            Err(e) => warn!("config reload refused, nothing applied: {e}"),
        }
        effects
    }

    /// Updates are audited where their answer goes out; reloads log their changes above.
    fn adopt_config(&mut self, plan: ConfigPlan, effects: &mut Effects) {
        let before = self.config.clone();
        plan.apply_to(&mut self.config);
        effects.config_changed = true;
        let settings = self.table.settings;
        self.derive_settings();
        if settings != self.table.settings
            || before.order_message_enable != self.config.order_message_enable
        {
            self.table.invalidate_all();
        }
        if before.log_level != self.config.log_level {
            if let Ok(level) = self.config.log_level.parse() {
                log::set_max_level(level);
            }
        }
    }

    /// What the processor and the tables take from the config (again after each update).
    pub(super) fn derive_settings(&mut self) {
        let c = &self.config;
        self.table.settings = RouteSettings {
            support_acting_master: c.support_acting_master,
            delete_topic_with_broker_registration: c.delete_topic_with_broker_registration,
            notify_min_broker_id_changed: c.notify_min_broker_id_changed,
            cache_max_bytes: c.route_cache_max_bytes as usize,
        };
        self.kv.set_limits(KvLimits::from_config(c));
        self.bounds = RouteBounds {
            max_brokers: c.max_brokers as usize,
            max_topics: c.max_topics as usize,
            max_topics_per_broker: c.max_topics_per_broker as usize,
        };
        self.body_limits = BodyLimits {
            json: c.json_limits(),
            max_topics: c.max_topics_per_registration as usize,
            max_inflated_len: c.max_inflated_body_length as usize,
        };
        self.admin_allow_list = Cidr::parse_list(&c.admin_allow_list);
        self.broker_allow_list = Cidr::parse_list(&c.broker_allow_list);
    }
}
