//! The wire: framing, header codecs, codes and the fastjson-dialect JSON. Knows no routes.

pub mod codes;
pub mod command;
mod ext_fields;
pub mod frame;
pub mod json;
