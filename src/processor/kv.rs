//! KV config requests: changes are answered once on disk (`durable`), reads from the store.

use super::{
    DeferredReply, Processor, Refusal, Reply, ReplyExt, RequestContext, Ticket, ORDER_TOPIC_CONFIG,
};
use crate::kv::{Change, Commit, Job, KvRefusal};
use crate::request::reply::KvValueReply;
use crate::request::{GetKvList, KvKey, PutKvConfig};
use log::warn;

impl Processor {
    pub(super) fn put_kv_config(
        &mut self,
        ctx: &RequestContext,
        r: PutKvConfig<'_>,
        ticket: Ticket,
    ) -> Result<Reply, Refusal> {
        let prepared = self.kv.prepare_put(r.namespace, r.key, r.value);
        // The value is not logged: it may be anything, of any length.
        let what = format!("{}/{} ({} bytes)", r.namespace, r.key, r.value.len());
        self.submit_kv_change(prepared, ticket, ctx.now_ms, what)
    }

    pub(super) fn delete_kv_config(
        &mut self,
        ctx: &RequestContext,
        r: KvKey<'_>,
        ticket: Ticket,
    ) -> Result<Reply, Refusal> {
        let prepared = self.kv.prepare_delete(r.namespace, r.key);
        let what = format!("{}/{}", r.namespace, r.key);
        self.submit_kv_change(prepared, ticket, ctx.now_ms, what)
    }

    fn submit_kv_change(
        &mut self,
        prepared: Result<Option<Change>, KvRefusal>,
        ticket: Ticket,
        now_ms: u64,
        what: String,
    ) -> Result<Reply, Refusal> {
        let change = match prepared {
            Ok(Some(change)) => change,
            Ok(None) => return Ok(Reply::ok().audited(format!("{what}: unchanged"))),
            Err(refusal) => return Ok(self.kv_refused(refusal, now_ms).reply().audited(what)),
        };
        let job = |id| Job::Change { id, change };
        let submitted = self.submit_durable(job, ticket, None, what);
        submitted.map_err(|job| {
            if let Job::Change { change, .. } = job {
                self.kv.cancel(&change);
            }
            let gone = "persisting the KV config failed: its writer thread has ended";
            Refusal::Failed(gone.into())
        })
    }

    /// A change the KV limits refuse; a full store is warned about once per interval.
    fn kv_refused(&mut self, refusal: KvRefusal, now_ms: u64) -> Refusal {
        let full = matches!(
            refusal,
            KvRefusal::TooManyEntries { .. } | KvRefusal::TooManyBytes { .. }
        );
        if full && self.stats.kv_full.admit(now_ms) {
            let usage = self.kv.usage();
            warn!(
                "KV config {} is full ({} entries, {} bytes): {refusal}",
                self.kv.path().display(),
                usage.entries,
                usage.bytes
            );
        }
        Refusal::Kv(refusal)
    }

    pub(super) fn kv_committed(&mut self, commit: Commit, replies: &mut Vec<DeferredReply>) {
        let replaced = self.kv.apply(&commit);
        if !replaced.is_empty() {
            let _ = self.outbox.durable.submit(Job::Discard(replaced));
        }
        let mut reply = match &commit.result {
            Ok(_) => {
                for (_, change) in &commit.changes {
                    if &*change.namespace == ORDER_TOPIC_CONFIG {
                        self.table.invalidate_topic(&change.key);
                    }
                }
                Reply::ok()
            }
            Err(e) => Refusal::Failed(format!("persisting the KV config failed: {e}")).reply(),
        };
        for (id, _) in &commit.changes {
            if let Some(waiting) = self.take_awaiting(*id) {
                reply.audit = Some(waiting.what);
                replies.push(self.answer_later(waiting.ticket, &reply));
            }
        }
    }

    pub(super) fn get_kv_config(&mut self, r: KvKey<'_>) -> Result<Reply, Refusal> {
        match self.kv.get(r.namespace, r.key) {
            Some(v) => Ok(Reply::ok().with_ext(ReplyExt::Pairs(KvValueReply::encode(v)))),
            None => Err(Refusal::NoKvItem {
                namespace: r.namespace.to_string(),
                key: r.key.to_string(),
            }),
        }
    }

    pub(super) fn get_kv_list(&mut self, r: GetKvList<'_>) -> Result<Reply, Refusal> {
        match self.kv.namespace_body(r.namespace) {
            Some(body) => Ok(Reply::with_body(body)),
            None => Err(Refusal::NoKvNamespace(r.namespace.to_string())),
        }
    }
}
