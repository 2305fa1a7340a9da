//! Admin writes to the registry (write permission, DELETE_TOPIC_IN_NAMESRV,
//! REGISTER_TOPIC_IN_NAMESRV) and the stats extension's body.

use super::{
    BodyWork, Decoded, Processor, Refusal, Reply, ReplyExt, RequestContext, ServerCounters,
};
use crate::remoting::codes::request;
use crate::request::{DeleteTopic, RegisterTopic, WritePerm};
use log::{debug, info};

impl Processor {
    pub(super) fn write_perm(&mut self, r: WritePerm<'_>, enable: bool) -> Result<Reply, Refusal> {
        let count = self.table.set_write_perm(r.broker_name, enable);
        let (key, verb) = if enable {
            ("addTopicCount", "added")
        } else {
            ("wipeTopicCount", "wiped")
        };
        info!(
            "write permission {verb} for broker {}: {count} topic(s)",
            r.broker_name
        );
        Ok(Reply {
            ext: ReplyExt::Pairs(vec![(key, count.to_string())]),
            ..Reply::ok()
        })
    }

    pub(super) fn delete_topic(&mut self, r: DeleteTopic<'_>) -> Result<Reply, Refusal> {
        if self.table.delete_topic(r.topic, r.cluster) {
            info!(
                "topic {} deleted (cluster {:?})",
                r.topic,
                r.cluster.unwrap_or("")
            );
        }
        Ok(Reply::ok())
    }

    /// REGISTER_TOPIC_IN_NAMESRV: brokers with `enableSingleTopicRegister` send one per topic,
    /// so each is logged at debug and counted into the periodic summary.
    /// A large body was decoded by the decode worker (`work`).
    pub(super) fn register_topic(
        &mut self,
        ctx: &RequestContext,
        mut r: RegisterTopic<'_>,
        work: BodyWork,
    ) -> Result<Reply, Refusal> {
        if let BodyWork::OffLoop(decoded) = work {
            let queue_datas = match *decoded {
                Decoded::TopicRoute(queue_datas) => queue_datas,
                Decoded::Failed(e) => Err(e),
                // The header parsed here but not there (the limits changed in between): sent
                // again with the limits in force.
                Decoded::Registration { .. } | Decoded::Header => {
                    return Ok(Reply::off_loop(self.decode_job(None)))
                }
            };
            r.queue_datas = queue_datas.map_err(|e| {
                self.warn_refused(ctx, request::REGISTER_TOPIC_IN_NAMESRV, &e);
                Refusal::Parse(e)
            })?;
        }
        if let Err(e) = self
            .table
            .check_topic_bounds(r.topic, &r.queue_datas, &self.bounds)
        {
            let what = format!("REGISTER_TOPIC_IN_NAMESRV of {}", r.topic);
            return Err(self.bound_reached(ctx, &what, e));
        }
        if self.table.register_topic(r.topic, &r.queue_datas) {
            self.stats
                .changes
                .topic_registered(r.queue_datas.len(), ctx.now_ms);
            debug!(
                "topic {} registered with {} queue entries",
                r.topic,
                r.queue_datas.len()
            );
        }
        Ok(Reply::ok())
    }

    /// RMQ_NAMESRV_STATS: the counters as one JSON object.
    pub(super) fn stats(&mut self, counters: &ServerCounters) -> Result<Reply, Refusal> {
        Ok(Reply::with_body(self.stats_body(counters)))
    }

    fn stats_body(&self, counters: &ServerCounters) -> Vec<u8> {
        use crate::remoting::json::{write_i64, write_key};
        let mut out = Vec::with_capacity(512);
        let fields: [(&str, i64); 23] = [
            ("connections", counters.connections as i64),
            ("brokers", self.table.live_broker_count() as i64),
            ("brokerGroups", self.table.broker_group_count() as i64),
            ("topics", self.table.topic_count() as i64),
            ("clusters", self.table.cluster_count() as i64),
            ("uptimeMillis", self.started.elapsed().as_millis() as i64),
            ("registrations", self.stats.registrations as i64),
            (
                "registrationsUnchanged",
                self.stats.registrations_unchanged as i64,
            ),
            ("expiries", self.stats.expiries as i64),
            ("unregistrations", self.stats.unregistrations as i64),
            ("unregisterBatches", self.stats.unregister_batches as i64),
            ("largestUnregisterBatch", self.stats.largest_batch as i64),
            ("bytesIn", counters.bytes_in as i64),
            ("bytesOut", counters.bytes_out as i64),
            ("rejectedBusy", self.stats.rejected_busy as i64),
            (
                "unregisterQueueFull",
                self.stats.unregister_queue_full as i64,
            ),
            ("bufferedBytes", counters.buffered_bytes as i64),
            ("refusedConnections", counters.refused_connections as i64),
            ("frameTimeouts", counters.frame_timeouts as i64),
            ("closedOverBudget", counters.closed_over_budget as i64),
            ("acceptFailures", counters.accept_failures as i64),
            ("maxTurnMicros", counters.max_turn_micros as i64),
            ("longTurns", counters.long_turns as i64),
        ];
        out.push(b'{');
        for (k, v) in fields {
            write_key(&mut out, k);
            write_i64(&mut out, v);
            out.push(b',');
        }
        write_key(&mut out, "requests");
        out.push(b'{');
        for (i, (code, n)) in self.stats.requests_by_code.sorted().into_iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            write_key(&mut out, &code.to_string());
            write_i64(&mut out, n as i64);
        }
        out.extend_from_slice(b"}}");
        out
    }
}
