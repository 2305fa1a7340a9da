//! The custom headers of answers: `encode` for the server, `parse` for the clients.

use super::field::{
    ADD_TOPIC_COUNT, CHANGED, HA_SERVER_ADDR, MASTER_ADDR, VALUE, WIPE_TOPIC_COUNT,
};
use crate::remoting::command::RemotingCommand;

/// Header fields of an answer, as the processor's replies hold them.
pub type ReplyFields = Vec<(&'static str, String)>;

/// 103's answer: a slave's master and HA addresses, when known.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RegisterBrokerReply {
    pub ha_server_addr: Option<String>,
    pub master_addr: Option<String>,
}

impl RegisterBrokerReply {
    pub fn encode(&self) -> ReplyFields {
        let fields = [
            (HA_SERVER_ADDR, &self.ha_server_addr),
            (MASTER_ADDR, &self.master_addr),
        ];
        fields
            .into_iter()
            .filter_map(|(k, v)| Some((k, v.clone()?)))
            .collect()
    }

    pub fn parse(resp: &RemotingCommand) -> Self {
        RegisterBrokerReply {
            ha_server_addr: resp.ext(HA_SERVER_ADDR).map(str::to_string),
            master_addr: resp.ext(MASTER_ADDR).map(str::to_string),
        }
    }
}

/// 101's answer: the item's value.
pub struct KvValueReply;

impl KvValueReply {
    pub fn encode(value: &str) -> ReplyFields {
        vec![(VALUE, value.to_string())]
    }

    /// The value (empty when a server answers SUCCESS without one).
    pub fn parse(resp: &RemotingCommand) -> &str {
        resp.ext(VALUE).unwrap_or_default()
    }
}

/// 322's answer: whether the broker's DataVersion differs from the stored one.
pub struct DataVersionReply;

impl DataVersionReply {
    pub const FIELD: &'static str = CHANGED;

    pub fn value(changed: bool) -> &'static str {
        if changed {
            "true"
        } else {
            "false"
        }
    }

    pub fn parse(resp: &RemotingCommand) -> Option<bool> {
        resp.ext(CHANGED).map(|c| c.eq_ignore_ascii_case("true"))
    }
}

/// 205's and 327's answer: how many topics' write permission changed.
pub struct PermReply;

impl PermReply {
    fn field(enable: bool) -> &'static str {
        if enable {
            ADD_TOPIC_COUNT
        } else {
            WIPE_TOPIC_COUNT
        }
    }

    pub fn encode(enable: bool, count: i32) -> ReplyFields {
        vec![(Self::field(enable), count.to_string())]
    }

    pub fn parse(resp: &RemotingCommand, enable: bool) -> Option<i32> {
        resp.ext(Self::field(enable))
            .and_then(|v| v.trim().parse().ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remoting::command::SerializeType;

    fn answer(fields: ReplyFields) -> RemotingCommand {
        RemotingCommand {
            code: 0,
            language: 0,
            version: 479,
            opaque: 1,
            flag: 1,
            remark: None,
            ext_fields: fields.into_iter().collect(),
            body: bytes::Bytes::new(),
            serialize_type: SerializeType::Json,
        }
    }

    #[test]
    fn answers_read_back_what_the_server_writes() {
        let slave = RegisterBrokerReply {
            ha_server_addr: Some("10.0.0.1:10912".into()),
            master_addr: Some("10.0.0.1:10911".into()),
        };
        assert_eq!(RegisterBrokerReply::parse(&answer(slave.encode())), slave);
        let master = RegisterBrokerReply::default();
        assert!(master.encode().is_empty());
        assert_eq!(RegisterBrokerReply::parse(&answer(master.encode())), master);

        assert_eq!(KvValueReply::parse(&answer(KvValueReply::encode("v"))), "v");
        for changed in [true, false] {
            let fields = vec![(
                DataVersionReply::FIELD,
                DataVersionReply::value(changed).into(),
            )];
            assert_eq!(DataVersionReply::parse(&answer(fields)), Some(changed));
        }
        assert_eq!(DataVersionReply::parse(&answer(Vec::new())), None);
        let wiped = answer(PermReply::encode(false, 3));
        assert_eq!(PermReply::parse(&wiped, false), Some(3));
        assert_eq!(PermReply::parse(&wiped, true), None);
        assert_eq!(
            PermReply::parse(&answer(PermReply::encode(true, 2)), true),
            Some(2)
        );
    }

    /// The names the wire has always carried (Java's response header classes).
    #[test]
    fn answer_fields_keep_their_wire_names() {
        let slave = RegisterBrokerReply {
            ha_server_addr: Some("h".into()),
            master_addr: Some("m".into()),
        };
        let names: Vec<&str> = slave.encode().iter().map(|(k, _)| *k).collect();
        assert_eq!(names, ["haServerAddr", "masterAddr"]);
        assert_eq!(KvValueReply::encode("v")[0].0, "value");
        assert_eq!(DataVersionReply::FIELD, "changed");
        assert_eq!(PermReply::encode(false, 0)[0].0, "wipeTopicCount");
        assert_eq!(PermReply::encode(true, 0)[0].0, "addTopicCount");
    }
}
