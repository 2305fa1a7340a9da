//! The fastjson 1.2.83 dialect of JSON that RocketMQ peers speak (bare numeric keys, quotes
//! of either kind, stray commas), read only by [`reader`]'s [`Cursor`]. Nothing recurses.

pub mod document;
pub mod reader;
pub mod writer;

pub use document::{Document, Items, Members, ValueRef};
pub use reader::{Cursor, Field, Item, Scalar};
pub use writer::*;

use std::borrow::Cow;
use std::fmt;

/// A parsed JSON value of the fastjson dialect.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    /// An integer literal that fits i64.
    Int(i64),
    /// Any other number (fraction, exponent, or out of i64 range).
    Float(f64),
    Str(String),
    Array(Vec<Value>),
    /// Members in input order; a numeric or unquoted key arrives as its text (`"0"`).
    Object(Vec<(String, Value)>),
}

/// Bounds on what a peer can make the parser build.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Deepest nesting of arrays/objects accepted (the top-level container is depth 1).
    pub max_depth: usize,
    /// Longest string or key accepted, in decoded UTF-8 bytes.
    pub max_string_len: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_depth: 64,
            max_string_len: 1 << 20,
        }
    }
}

/// Why and where (byte offset into the input) parsing stopped.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonError {
    pub offset: usize,
    pub message: &'static str,
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid JSON at byte {}: {}", self.offset, self.message)
    }
}

impl std::error::Error for JsonError {}

/// Parses one fastjson-dialect value with [`Limits::default`].
pub fn parse(input: &[u8]) -> Result<Value, JsonError> {
    parse_with(input, &Limits::default())
}

/// Parses one fastjson-dialect value into an owned tree; only whitespace may follow it.
pub fn parse_with(input: &[u8], limits: &Limits) -> Result<Value, JsonError> {
    Ok(parse_borrowed(input, limits)?.root().to_value())
}

/// Parses one value into a [`Document`] borrowing from `input`; only whitespace may follow.
pub fn parse_borrowed<'a>(input: &'a [u8], limits: &Limits) -> Result<Document<'a>, JsonError> {
    let mut c = Cursor::new(input, limits)?;
    let doc = document::read(&mut c)?;
    c.finish()?;
    Ok(doc)
}

impl Value {
    /// Object member lookup (the last duplicate wins, as in a Java map); None for non-objects.
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Object(members) => members.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The value when it is not a container, to read with [`Scalar`]'s coercions.
    fn scalar(&self) -> Option<Scalar<'_>> {
        Some(match self {
            Value::Null => Scalar::Null,
            Value::Bool(b) => Scalar::Bool(*b),
            Value::Int(v) => Scalar::Int(*v),
            Value::Float(f) => Scalar::Float(*f),
            Value::Str(s) => Scalar::Str(Cow::Borrowed(s)),
            Value::Array(_) | Value::Object(_) => return None,
        })
    }

    /// As [`Scalar::as_i64`].
    pub fn as_i64(&self) -> Option<i64> {
        self.scalar()?.as_i64()
    }

    /// As [`Scalar::as_bool`].
    pub fn as_bool(&self) -> Option<bool> {
        self.scalar()?.as_bool()
    }

    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(items) => Some(items),
            _ => None,
        }
    }

    pub fn as_object(&self) -> Option<&[(String, Value)]> {
        match self {
            Value::Object(members) => Some(members),
            _ => None,
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// The text fastjson gives when a non-string is read into a String field (a container's
    /// compact JSON).
    pub fn to_text(&self) -> String {
        match self {
            Value::Str(s) => s.clone(),
            other => {
                let mut out = Vec::new();
                write_value(&mut out, other);
                // write_value emits only valid UTF-8 (ASCII plus copies of valid strings).
                String::from_utf8(out).unwrap_or_default()
            }
        }
    }
}

#[cfg(test)]
mod tests;
