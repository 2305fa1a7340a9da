//! Reading `extFields` into typed values ([`Fields`]), writing them ([`Encoded`]), [`ParseError`].

use crate::remoting::command::{encode_frame, Header, RemotingCommand, SerializeType};
use std::borrow::Cow;
use std::fmt;

/// `NotSupported` is answered REQUEST_CODE_NOT_SUPPORTED, the rest SYSTEM_ERROR with the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParseError {
    /// The name server does not answer this code.
    NotSupported(i32),
    /// A required header field is absent (Java's `@CFNotNull`).
    MissingField(&'static str),
    /// A body that does not decode as `what` (DataVersion, TopicRouteData).
    BadBody { what: &'static str, reason: String },
    /// Any other refusal: a field, name, address, topic or body that does not pass (the remark).
    Invalid(String),
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseError::NotSupported(code) => write!(f, " request type {code} not supported"),
            ParseError::MissingField(field) => write!(f, "the custom field <{field}> is null"),
            ParseError::BadBody { what, reason } => write!(f, "bad {what} body: {reason}"),
            ParseError::Invalid(remark) => f.write_str(remark),
        }
    }
}

impl std::error::Error for ParseError {}

/// Settings `maxNameLength`, `maxTopicNameLength`, `maxQueueNums`, as `rules` reads them, and
/// `maxJsonDepth`, `maxJsonStringLength` for the bodies a parse decodes.
#[derive(Debug, Clone, Copy)]
pub struct NameLimits {
    pub max_name_length: usize,
    pub max_topic_name_length: usize,
    pub max_queue_nums: i32,
    pub json: crate::remoting::json::Limits,
}

impl NameLimits {
    /// The limits the config sets now (the name server's and its embedded controller's).
    pub fn from_config(config: &crate::config::NamesrvConfig) -> Self {
        NameLimits {
            max_name_length: config.max_name_length as usize,
            max_topic_name_length: config.max_topic_name_length as usize,
            max_queue_nums: config.max_queue_nums.min(i32::MAX as u32) as i32,
            json: config.json_limits(),
        }
    }
}

#[derive(Clone, Copy)]
pub(super) struct Fields<'a> {
    pub cmd: &'a RemotingCommand,
    pub limits: &'a NameLimits,
    /// The decode worker already decoded the body (REGISTER_TOPIC_IN_NAMESRV's queues empty).
    pub body_decoded: bool,
}

impl<'a> Fields<'a> {
    pub fn optional(&self, field: &str) -> Option<&'a str> {
        self.cmd.ext(field)
    }

    pub fn required(&self, field: &'static str) -> Result<&'a str, ParseError> {
        self.optional(field).ok_or(ParseError::MissingField(field))
    }

    pub fn required_i64(&self, field: &'static str) -> Result<i64, ParseError> {
        let text = self.required(field)?;
        let not_a_number = || format!("the custom field <{field}> is not a number: {text}");
        parse_i64_field(text).ok_or_else(|| ParseError::Invalid(not_a_number()))
    }

    /// Java's Boolean parsing: "true" in any case is true, anything else false.
    pub fn optional_bool(&self, field: &str) -> Option<bool> {
        self.optional(field)
            .map(|v| v.trim().eq_ignore_ascii_case("true"))
    }

    pub fn body(&self) -> &'a [u8] {
        &self.cmd.body
    }
}

/// A request as a sender writes it (code, header fields in order, body).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Encoded<'a> {
    pub code: i32,
    pub fields: Vec<(&'static str, Cow<'a, str>)>,
    pub body: Cow<'a, [u8]>,
}

impl<'a> Encoded<'a> {
    pub fn new(code: i32) -> Self {
        Encoded {
            code,
            fields: Vec::new(),
            body: Cow::Borrowed(&[]),
        }
    }

    pub fn put(&mut self, field: &'static str, value: &'a str) {
        self.fields.push((field, Cow::Borrowed(value)));
    }

    pub fn put_opt(&mut self, field: &'static str, value: Option<&'a str>) {
        if let Some(v) = value {
            self.put(field, v);
        }
    }

    /// A number or a flag, written as Java's `String.valueOf` writes it.
    pub fn put_value(&mut self, field: &'static str, value: impl fmt::Display) {
        self.fields.push((field, Cow::Owned(value.to_string())));
    }

    pub fn pairs(&self) -> impl Iterator<Item = (&str, &str)> + '_ {
        self.fields.iter().map(|(k, v)| (*k, v.as_ref()))
    }

    /// The whole frame (length prefix included) with these header values.
    pub fn frame(
        &self,
        serialize_type: SerializeType,
        language: &str,
        version: i32,
        opaque: i32,
        flag: i32,
    ) -> Vec<u8> {
        let mut out = Vec::with_capacity(128 + self.body.len());
        let header = Header {
            code: self.code,
            language,
            version,
            opaque,
            flag,
            remark: None,
        };
        encode_frame(
            &mut out,
            serialize_type,
            &header,
            Some(self.pairs()),
            &self.body,
        );
        out
    }
}

/// Trimmed, then read as an i64 (plain short digits, what Java writes, by a quicker path).
fn parse_i64_field(text: &str) -> Option<i64> {
    if (1..=18).contains(&text.len()) && text.bytes().all(|b| b.is_ascii_digit()) {
        return Some(
            text.bytes()
                .fold(0, |n: i64, b| n * 10 + i64::from(b - b'0')),
        );
    }
    text.trim().parse::<i64>().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Default for NameLimits {
        fn default() -> Self {
            NameLimits {
                max_name_length: 255,
                max_topic_name_length: 127,
                max_queue_nums: 65_536,
                json: crate::remoting::json::Limits::default(),
            }
        }
    }

    /// The digits-only path reads what trimming and parsing reads.
    #[test]
    fn numeric_fields_read_as_trim_and_parse_do() {
        let mut inputs: Vec<String> = [
            "0",
            "7",
            "007",
            "-1",
            "+1",
            " 1",
            "1 ",
            "\u{a0}2",
            "",
            " ",
            "1a",
            "0x1",
            "1.0",
            "999999999999999999",
            "9999999999999999999",
            "9223372036854775807",
            "9223372036854775808",
            "-9223372036854775808",
            "٣",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        inputs.extend((0..40).map(|n| "9".repeat(n)));
        inputs.extend((0..20).map(|n| format!("1{}", "0".repeat(n))));
        for text in &inputs {
            assert_eq!(
                parse_i64_field(text),
                text.trim().parse::<i64>().ok(),
                "{text:?}"
            );
        }
    }
}
