//! Admin writes to the registry: write permission, topic delete, REGISTER_TOPIC_IN_NAMESRV.

use super::{BodyWork, Decoded, Processor, Refusal, Reply, ReplyExt, RequestContext};
use crate::remoting::codes::request;
use crate::request::reply::PermReply;
use crate::request::{DeleteTopic, RegisterTopic, WritePerm};
use log::{debug, info};

impl Processor {
    pub(super) fn write_perm(&mut self, r: WritePerm<'_>, enable: bool) -> Result<Reply, Refusal> {
        let count = self.table.set_write_perm(r.broker_name, enable);
        let verb = if enable { "added" } else { "wiped" };
        info!(
            "write permission {verb} for broker {}: {count} topic(s)",
            r.broker_name
        );
        let count = i32::try_from(count).unwrap_or(i32::MAX);
        Ok(Reply::ok().with_ext(ReplyExt::Pairs(PermReply::encode(enable, count))))
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

    /// REGISTER_TOPIC_IN_NAMESRV: one per topic, so logged at debug and counted in the summary.
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
                // The header parsed here but not there (the limits changed in between).
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
}
