//! Answers ([`Reply`]) and their frames: field by field, or from templates for the commonest.

use super::DecodeJob;
use crate::remoting::codes::{response, version, FLAG_RESPONSE};
use crate::remoting::command::{encode_frame, FrameTemplate, Header, SerializeType};
use crate::request::reply::{DataVersionReply, ReplyFields};
use bytes::Bytes;

pub(super) struct Reply {
    pub(super) code: i32,
    pub(super) remark: Option<String>,
    pub(super) ext: ReplyExt,
    pub(super) body: Bytes,
    pub(super) deferred: bool,
    /// Boxed: rare, and the reply of every request is moved on the way out.
    pub(super) off_loop: Option<Box<DecodeJob>>,
    /// What an audited request changed: its audit line is written with the answer.
    pub(super) audit: Option<String>,
}

pub(super) enum ReplyExt {
    /// No `extFields` member (Java's handlers without a custom response header).
    None,
    Pairs(ReplyFields),
    Changed(bool),
}

fn header(code: i32, remark: Option<&str>) -> Header<'_> {
    Header {
        code,
        language: "JAVA",
        version: version::CURRENT,
        opaque: 0,
        flag: FLAG_RESPONSE,
        remark,
    }
}

/// A reply encoded field by field (what the templates hold, for the replies they cover).
pub(super) fn encode_reply(
    serialize_type: SerializeType,
    opaque: i32,
    reply: &Reply,
    out: &mut Vec<u8>,
) {
    let header = Header {
        opaque,
        ..header(reply.code, reply.remark.as_deref())
    };
    let (pairs, changed): (&[(&str, String)], _) = match &reply.ext {
        ReplyExt::None => (&[], None),
        ReplyExt::Pairs(pairs) => (pairs, None),
        ReplyExt::Changed(c) => (&[], Some(DataVersionReply::value(*c))),
    };
    let ext = (!matches!(reply.ext, ReplyExt::None)).then(|| {
        let pairs = pairs.iter().map(|(k, v)| (*k, v.as_str()));
        pairs.chain(changed.map(|v| (DataVersionReply::FIELD, v)))
    });
    encode_frame(out, serialize_type, &header, ext, &reply.body);
}

/// The replies sent most, encoded once per [`SerializeType`]: then a copy and the opaque.
pub(super) struct ReplyTemplates {
    /// SUCCESS without remark or ext fields (any body: route lookups, cluster info...).
    ok: [FrameTemplate; 2],
    changed: [[FrameTemplate; 2]; 2],
}

impl ReplyTemplates {
    pub(super) fn new() -> Self {
        let header = header(response::SUCCESS, None);
        let no_ext: Option<[(&str, &str); 0]> = None;
        let types = [SerializeType::Json, SerializeType::RocketMq];
        let changed = |c| {
            let ext = [(DataVersionReply::FIELD, DataVersionReply::value(c))];
            types.map(|t| FrameTemplate::new(t, &header, Some(ext)))
        };
        ReplyTemplates {
            ok: types.map(|t| FrameTemplate::new(t, &header, no_ext)),
            changed: [changed(false), changed(true)],
        }
    }

    pub(super) fn write(
        &self,
        serialize_type: SerializeType,
        opaque: i32,
        reply: &Reply,
        out: &mut Vec<u8>,
    ) -> bool {
        if reply.code != response::SUCCESS || reply.remark.is_some() {
            return false;
        }
        let t = serialize_type as usize;
        let template = match &reply.ext {
            ReplyExt::None => &self.ok[t],
            ReplyExt::Changed(c) => &self.changed[usize::from(*c)][t],
            ReplyExt::Pairs(_) => return false,
        };
        template.write_with_body(out, opaque, |o| o.extend_from_slice(&reply.body));
        true
    }
}

impl Reply {
    pub(super) fn ok() -> Self {
        Reply {
            code: response::SUCCESS,
            remark: None,
            ext: ReplyExt::None,
            body: Bytes::new(),
            deferred: false,
            off_loop: None,
            audit: None,
        }
    }
    /// This answer changed `what` (or did not change it: `what` says so).
    pub(super) fn audited(self, what: String) -> Self {
        Reply {
            audit: Some(what),
            ..self
        }
    }
    pub(super) fn later() -> Self {
        Reply {
            deferred: true,
            ..Reply::ok()
        }
    }
    pub(super) fn off_loop(job: DecodeJob) -> Self {
        Reply {
            off_loop: Some(Box::new(job)),
            ..Reply::ok()
        }
    }
    /// SUCCESS with `body` (a `Bytes` is shared, not copied).
    pub(super) fn with_body(body: impl Into<Bytes>) -> Self {
        Reply {
            body: body.into(),
            ..Reply::ok()
        }
    }
    pub(super) fn encoded(encode: impl FnOnce(&mut Vec<u8>)) -> Self {
        let mut body = Vec::with_capacity(256);
        encode(&mut body);
        Reply::with_body(body)
    }
    pub(super) fn with_ext(self, ext: ReplyExt) -> Self {
        Reply { ext, ..self }
    }
    pub(super) fn error(code: i32, remark: impl Into<String>) -> Self {
        Reply {
            code,
            remark: Some(remark.into()),
            ..Reply::ok()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::route::model::DataVersion;

    #[test]
    fn templated_replies_are_the_bytes_of_encoded_ones() {
        let dv = DataVersion {
            counter: 7,
            state_version: -2,
            timestamp: 1_700_000_000_123,
        };
        let mut text = Vec::new();
        dv.encode(&mut text);
        let text = Bytes::from(text);
        let replies = || {
            let changed = |c, body| Reply {
                ext: ReplyExt::Changed(c),
                body,
                ..Reply::ok()
            };
            [
                Reply::ok(),
                Reply::with_body(b"{\"a\":1}".to_vec()),
                Reply {
                    body: Bytes::from_static(&[7u8; 300]),
                    ..Reply::ok()
                },
                changed(false, text.clone()),
                changed(true, text.clone()),
                changed(true, Bytes::new()),
            ]
        };
        let templates = ReplyTemplates::new();
        for serialize_type in [SerializeType::Json, SerializeType::RocketMq] {
            for reply in replies() {
                for opaque in [0, 42, -7, i32::MIN, i32::MAX] {
                    let (mut templated, mut encoded) = (vec![1u8], vec![1u8]);
                    assert!(templates.write(serialize_type, opaque, &reply, &mut templated));
                    encode_reply(serialize_type, opaque, &reply, &mut encoded);
                    assert_eq!(templated, encoded);
                }
            }
            let error = Reply::error(response::SYSTEM_ERROR, "x");
            assert!(!templates.write(serialize_type, 1, &error, &mut Vec::new()));
        }
    }
}
