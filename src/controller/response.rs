//! One controller answer as plain data (`Response`), and its frame encoding.
//!
//! Java makes every non-null field of a response-header object an ext field, so a handler
//! with a header class always sends `extFields` (possibly `{}`), and one without sends none:
//! `ext` is `None` for no header object. Ext fields are alphabetical, so frames are stable.

use crate::remoting::codes::{response as code, version, FLAG_ONEWAY, FLAG_RESPONSE};
use crate::remoting::command::{encode_frame, Header, SerializeType};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub code: i32,
    pub remark: Option<String>,
    pub ext: Option<Vec<(&'static str, String)>>,
    pub body: Option<Vec<u8>>,
}

impl Response {
    pub fn new(code: i32, remark: Option<String>) -> Response {
        Response {
            code,
            remark,
            ext: None,
            body: None,
        }
    }

    /// An error answer with a remark and no header object (Java's `createResponseCommand`).
    pub fn error(code: i32, remark: impl Into<String>) -> Response {
        Response::new(code, Some(remark.into()))
    }

    /// An answer from a handler with a response-header class: its non-null fields.
    pub fn with_header(code: i32, fields: Vec<(&'static str, String)>) -> Response {
        debug_assert!(
            fields.windows(2).all(|w| w[0].0 < w[1].0),
            "ext fields must be alphabetical: {fields:?}"
        );
        Response {
            code,
            remark: None,
            ext: Some(fields),
            body: None,
        }
    }

    pub fn remark(mut self, remark: impl Into<String>) -> Response {
        self.remark = Some(remark.into());
        self
    }

    pub fn body(mut self, body: Vec<u8>) -> Response {
        self.body = Some(body);
        self
    }

    /// Java's SYSTEM_ERROR for an exception thrown while handling.
    pub fn system_error(remark: impl Into<String>) -> Response {
        Response::error(code::SYSTEM_ERROR, remark)
    }

    /// Java's `createResponseCommand(null)` (1006 without broker names).
    pub fn not_set() -> Response {
        Response::error(code::SYSTEM_ERROR, "not set any response code")
    }

    pub fn encode(&self, opaque: i32, serialize_type: SerializeType, out: &mut Vec<u8>) {
        let header = (self.code, opaque, FLAG_RESPONSE, self.remark.as_deref());
        let ext = self.ext.as_deref();
        let body = self.body.as_deref().unwrap_or(&[]);
        encode(out, serialize_type, header, ext, body);
    }
}

/// Appends a oneway request frame (the controller's one outgoing request, 1008) to `out`.
pub fn encode_oneway_request(
    code: i32,
    opaque: i32,
    fields: &[(&'static str, String)],
    body: &[u8],
    out: &mut Vec<u8>,
) {
    encode(
        out,
        SerializeType::Json,
        (code, opaque, FLAG_ONEWAY, None),
        Some(fields),
        body,
    );
}

fn encode(
    out: &mut Vec<u8>,
    serialize_type: SerializeType,
    (code, opaque, flag, remark): (i32, i32, i32, Option<&str>),
    ext: Option<&[(&'static str, String)]>,
    body: &[u8],
) {
    let header = Header {
        code,
        language: "JAVA",
        version: version::CURRENT,
        opaque,
        flag,
        remark,
    };
    let ext = ext.map(|fields| fields.iter().map(|(k, v)| (*k, v.as_str())));
    encode_frame(out, serialize_type, &header, ext, body);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_object_with_no_fields_still_writes_ext_fields() {
        let mut out = Vec::new();
        Response::with_header(2012, vec![])
            .remark("Failed to elect a new master")
            .encode(5, SerializeType::Json, &mut out);
        let text = std::str::from_utf8(&out[8..]).unwrap();
        assert_eq!(
            text,
            "{\"code\":2012,\"extFields\":{},\"flag\":1,\"language\":\"JAVA\",\"opaque\":5,\
             \"remark\":\"Failed to elect a new master\",\"serializeTypeCurrentRPC\":\"JSON\",\"version\":479}"
        );
        let mut out = Vec::new();
        Response::error(2007, "x").encode(5, SerializeType::Json, &mut out);
        assert!(!std::str::from_utf8(&out[8..])
            .unwrap()
            .contains("extFields"));
    }
}
