//! What brokers send about themselves, besides REGISTER_BROKER (`register`).

use super::{Processor, Refusal, Reply, ReplyExt, RequestContext};
use crate::config::allows;
use crate::remoting::codes::request;
use crate::request::{
    BrokerHeartbeat, BrokerRef, GetBrokerMemberGroup, ParseError, QueryDataVersion,
};
use crate::route::model;
use crate::route::table::RemovalReason;

impl Processor {
    pub(super) fn unregister_broker(
        &mut self,
        ctx: &RequestContext,
        r: BrokerRef<'_>,
    ) -> Result<Reply, Refusal> {
        let (cluster, addr, name) = (r.cluster, r.broker_addr, r.broker_name);
        let by_itself = self
            .table
            .registered_over(cluster, addr, name, Some(ctx.reply_to.index()));
        self.check_unregister_sender(ctx, &r, by_itself)?;
        let request = vec![(r.unregister_request(), RemovalReason::Unregister)];
        if self.submit_unregistrations(request).is_err() {
            return Err(Refusal::UnregisterQueueFull);
        }
        // A broker leaving is logged when it is removed; someone else removing it is audited.
        Ok(match by_itself {
            true => Reply::ok(),
            false => Reply::ok().audited(format!(
                "broker {name}@{addr} id {} cluster {cluster}",
                r.broker_id
            )),
        })
    }

    /// With either allow-list set, only the broker's registration connection or an
    /// `adminAllowList` address may unregister it (its audit line says who was refused).
    fn check_unregister_sender(
        &mut self,
        ctx: &RequestContext,
        r: &BrokerRef<'_>,
        by_itself: bool,
    ) -> Result<(), Refusal> {
        if by_itself || self.admin_allow_list.is_empty() && self.broker_allow_list.is_empty() {
            return Ok(());
        }
        if !self.admin_allow_list.is_empty()
            && allows(&self.admin_allow_list, ctx.peer.map(|p| p.ip()))
        {
            return Ok(());
        }
        let (cluster, addr, name) = (r.cluster, r.broker_addr, r.broker_name);
        Err(Refusal::NotAllowed(format!(
            "UNREGISTER_BROKER of {name}@{addr} ({cluster}) refused: not sent over that broker's registration connection, nor from an address in adminAllowList"
        )))
    }

    pub(super) fn broker_heartbeat(
        &mut self,
        ctx: &RequestContext,
        r: BrokerHeartbeat<'_>,
    ) -> Result<Reply, Refusal> {
        self.table.heartbeat(r.cluster, r.broker_addr, ctx.now_ms);
        Ok(Reply::ok())
    }

    pub(super) fn query_data_version(
        &mut self,
        ctx: &RequestContext,
        r: QueryDataVersion<'_>,
    ) -> Result<Reply, Refusal> {
        let (cluster, addr) = (r.broker.cluster, r.broker.broker_addr);
        let answered = self
            .table
            .query_data_version(cluster, addr, ctx.now_ms, |stored| {
                let changed = r.changed(stored.map(|(version, text)| (version, &text[..])))?;
                Ok((changed, stored.map(|(_, text)| text.clone())))
            });
        let (changed, text) = answered.map_err(|e: ParseError| {
            self.warn_refused(ctx, request::QUERY_DATA_VERSION, &e);
            Refusal::Parse(e)
        })?;
        // The stored version's text (none for a broker not live), shared with the table.
        let reply = Reply::with_body(text.unwrap_or_default());
        Ok(reply.with_ext(ReplyExt::Changed(changed)))
    }

    pub(super) fn broker_member_group(
        &mut self,
        r: GetBrokerMemberGroup<'_>,
    ) -> Result<Reply, Refusal> {
        let addrs = self.table.broker_member_group(r.broker_name);
        Ok(Reply::encoded(|out| {
            model::encode_member_group(r.cluster, r.broker_name, &addrs, out)
        }))
    }
}
