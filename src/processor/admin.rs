//! Admin writes to the registry: write permission, topic delete, REGISTER_TOPIC_IN_NAMESRV.

use super::{BodyWork, Decoded, Processor, Refusal, Reply, ReplyExt, RequestContext};
use crate::remoting::codes::request;
use crate::request::reply::PermReply;
use crate::request::{DeleteTopic, RegisterTopic, WritePerm};

impl Processor {
    pub(super) fn write_perm(&mut self, r: WritePerm<'_>, enable: bool) -> Result<Reply, Refusal> {
        let count = self.table.set_write_perm(r.broker_name, enable);
        let what = format!("broker {}: {count} topic(s)", r.broker_name);
        let count = i32::try_from(count).unwrap_or(i32::MAX);
        let reply = Reply::ok().with_ext(ReplyExt::Pairs(PermReply::encode(enable, count)));
        Ok(reply.audited(what))
    }

    pub(super) fn delete_topic(&mut self, r: DeleteTopic<'_>) -> Result<Reply, Refusal> {
        let deleted = self.table.delete_topic(r.topic, r.cluster);
        let what = format!(
            "topic {}{}{}",
            r.topic,
            r.cluster
                .map(|c| format!(" in cluster {c}"))
                .unwrap_or_default(),
            if deleted { "" } else { " (no such route)" }
        );
        Ok(Reply::ok().audited(what))
    }

    /// REGISTER_TOPIC_IN_NAMESRV: a topic created or updated through a broker.
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
        let what = format!(
            "topic {} with {} queue entries",
            r.topic,
            r.queue_datas.len()
        );
        if let Err(e) = self
            .table
            .check_topic_bounds(r.topic, &r.queue_datas, &self.bounds)
        {
            // Its audit line is the warning (rate-limited with the other refusals).
            return Ok(Refusal::Failed(e.to_string()).reply().audited(what));
        }
        let changed = self.table.register_topic(r.topic, &r.queue_datas);
        let unchanged = if changed { "" } else { ": unchanged" };
        Ok(Reply::ok().audited(format!("{what}{unchanged}")))
    }
}
