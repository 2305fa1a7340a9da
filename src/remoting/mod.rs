//! The wire: length framing, the `RemotingCommand` header codecs, request/response codes
//! and the fastjson-dialect JSON reader/writer. Nothing here knows about routes.

pub mod codes;
pub mod command;
mod ext_fields;
pub mod frame;
pub mod json;
