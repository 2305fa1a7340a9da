//! A body weighing more than `decodeOnLoopMaxBytes` is decoded by the worker, then handled.

use super::{Processor, Refusal};
use crate::remoting::codes::request;
use crate::remoting::command::RemotingCommand;
use crate::request::{NameLimits, ParseError, RegisterBroker, Request};
use crate::route::model::{BodyLimits, DecodeScratch, QueueData, RegisterBody};
use crate::route::table::BodyFingerprint;

/// How much a zlib stream may inflate (deflate's limit is about 1032:1): a compressed body is
/// weighed by what it may become, so a small zlib bomb is inflated off the loop too.
const MAX_INFLATE_RATIO: usize = 1032;

#[derive(Debug)]
pub enum BodyWork {
    /// Nothing yet: a small body is decoded here, a large one sent off.
    OnLoop,
    OffLoop(Box<Decoded>),
}

#[derive(Debug)]
pub enum Decoded {
    Registration {
        fingerprint: BodyFingerprint,
        body: Option<Result<RegisterBody, BodyRefused>>,
    },
    TopicRoute(Result<Vec<QueueData>, ParseError>),
    /// The header did not parse there: the loop parses it again and answers the error.
    Header,
    /// Decoding failed there (a bug): refused with this.
    Failed(ParseError),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyRefused {
    Crc { actual: i64 },
    Bad(ParseError),
}

/// The limits when the job was made and, for a registration, its broker's last fingerprint.
#[derive(Debug, Clone, Copy)]
pub struct DecodeJob {
    pub body: BodyLimits,
    pub names: NameLimits,
    pub unchanged: Option<BodyFingerprint>,
}

/// The bytes a body stands for: its length, or for a compressed one what it may inflate to.
pub fn body_weight(body: &[u8], compressed: bool) -> usize {
    if compressed || body.first() == Some(&0x78) {
        body.len().saturating_mul(MAX_INFLATE_RATIO)
    } else {
        body.len()
    }
}

/// The worker's side of [`DecodeJob`]: the checks the loop makes, in the same order.
pub fn decode_off_loop(
    cmd: &RemotingCommand,
    job: &DecodeJob,
    scratch: &mut DecodeScratch,
) -> Decoded {
    match Request::parse(cmd, &job.names) {
        Ok(Request::RegisterBroker(r)) => {
            let fingerprint = r.fingerprint();
            let body = (job.unchanged != Some(fingerprint))
                .then(|| decode_checked(&r, &job.body, &job.names, scratch));
            Decoded::Registration { fingerprint, body }
        }
        Ok(Request::RegisterTopic(r)) => Decoded::TopicRoute(Ok(r.queue_datas)),
        Err(e) if cmd.code == request::REGISTER_TOPIC_IN_NAMESRV => Decoded::TopicRoute(Err(e)),
        Ok(_) | Err(_) => Decoded::Header,
    }
}

/// A changed registration body, on the loop or off it: CRC, decode, topic config checks.
pub(super) fn decode_checked(
    r: &RegisterBroker<'_>,
    body: &BodyLimits,
    names: &NameLimits,
    scratch: &mut DecodeScratch,
) -> Result<RegisterBody, BodyRefused> {
    if let Some(actual) = r.crc_mismatch() {
        return Err(BodyRefused::Crc { actual });
    }
    r.decode_body(body, names, scratch)
        .map_err(BodyRefused::Bad)
}

impl Processor {
    pub(super) fn too_large_for_the_loop(&self, weight: usize) -> bool {
        weight > self.config.decode_on_loop_max_bytes as usize
    }

    /// A REGISTER_TOPIC_IN_NAMESRV body is decoded by its parse: whether it goes is decided before.
    pub(super) fn off_loop_before_parse(&self, cmd: &RemotingCommand) -> Option<DecodeJob> {
        let large = cmd.code == request::REGISTER_TOPIC_IN_NAMESRV
            && self.too_large_for_the_loop(body_weight(&cmd.body, false));
        large.then(|| self.decode_job(None))
    }

    pub(super) fn decode_job(&self, unchanged: Option<BodyFingerprint>) -> DecodeJob {
        DecodeJob {
            body: self.body_limits,
            names: self.name_limits(),
            unchanged,
        }
    }

    pub(super) fn body_refused(
        &mut self,
        ctx: &super::RequestContext,
        r: &RegisterBroker<'_>,
        refused: BodyRefused,
    ) -> Refusal {
        let registration = super::register::registration_of(r);
        let (what, refusal) = match refused {
            BodyRefused::Crc { actual } => {
                let crc = r.body_crc32;
                let what = format!("{registration}: body crc32 {actual} != header bodyCrc32 {crc}");
                (what, Refusal::CrcMismatch)
            }
            BodyRefused::Bad(e) => (format!("{registration}: {e}"), Refusal::Parse(e)),
        };
        self.warn_refused(ctx, request::REGISTER_BROKER, &what);
        refusal
    }
}
