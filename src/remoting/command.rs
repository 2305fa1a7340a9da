//! `RemotingCommand`: one decoded frame, both header codecs (docs/protocol.md §2) and the
//! encoder, which writes the JSON header in fastjson's order so captures look like Java's.

use super::codes::{self, FLAG_ONEWAY, FLAG_RESPONSE};
use super::frame::{check_type_word, FrameError, PREFIX_LEN};
use super::json::{self, Field, Item, Scalar};
use byteorder::{BigEndian, ByteOrder};
use bytes::{Buf, Bytes, TryGetError};
use std::borrow::Cow;
use std::fmt;

pub use super::ext_fields::ExtFields;

/// Header serialization of a frame (top byte of the second word).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SerializeType {
    #[default]
    Json = 0,
    RocketMq = 1,
}

/// Limits applied while decoding a header (hardening; all configurable).
#[derive(Debug, Clone, Copy)]
pub struct DecodeLimits {
    pub max_header_len: usize,
    pub max_ext_fields: usize,
    pub json: json::Limits,
}

impl Default for DecodeLimits {
    fn default() -> Self {
        DecodeLimits {
            max_header_len: 256 * 1024,
            max_ext_fields: 256,
            json: json::Limits {
                max_depth: 16,
                max_string_len: 64 * 1024,
            },
        }
    }
}

/// Why a frame's header could not be decoded (the connection is closed, as in Java).
#[derive(Debug, Clone, PartialEq)]
pub enum DecodeError {
    Frame(FrameError),
    HeaderTooLong { len: usize, max: usize },
    TooManyExtFields { max: usize },
    Json(String),
    Binary(&'static str),
    Field(&'static str),
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Frame(e) => write!(f, "{e}"),
            DecodeError::HeaderTooLong { len, max } => {
                write!(f, "header of {len} bytes exceeds maxHeaderLength {max}")
            }
            DecodeError::TooManyExtFields { max } => {
                write!(f, "more than {max} extFields (maxExtFields)")
            }
            DecodeError::Json(e) => write!(f, "malformed JSON header: {e}"),
            DecodeError::Binary(e) => write!(f, "malformed ROCKETMQ header: {e}"),
            DecodeError::Field(e) => write!(f, "bad header field: {e}"),
        }
    }
}

impl std::error::Error for DecodeError {}

impl From<FrameError> for DecodeError {
    fn from(e: FrameError) -> Self {
        DecodeError::Frame(e)
    }
}

/// One decoded request (or response, on the client side).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RemotingCommand {
    pub code: i32,
    /// Binary `LanguageCode`; 255 when the peer sent a name we do not know.
    pub language: u8,
    pub version: i32,
    pub opaque: i32,
    pub flag: i32,
    pub remark: Option<String>,
    pub ext_fields: ExtFields,
    pub body: Bytes,
    pub serialize_type: SerializeType,
}

#[cfg(test)]
mod for_tests {
    use super::*;

    impl RemotingCommand {
        /// A request as unit tests build it: JSON header, version 479, opaque 1, no remark.
        pub(crate) fn for_test(code: i32, ext: &[(&str, &str)], body: impl AsRef<[u8]>) -> Self {
            RemotingCommand {
                code,
                language: 0,
                version: 479,
                opaque: 1,
                flag: 0,
                remark: None,
                ext_fields: ext.iter().copied().collect(),
                body: Bytes::copy_from_slice(body.as_ref()),
                serialize_type: SerializeType::Json,
            }
        }
    }
}

impl RemotingCommand {
    /// Value of one ext field (the request's custom header).
    pub fn ext(&self, key: &str) -> Option<&str> {
        self.ext_fields.get(key)
    }

    pub fn is_oneway(&self) -> bool {
        self.flag & FLAG_ONEWAY != 0
    }

    pub fn is_response(&self) -> bool {
        self.flag & FLAG_RESPONSE != 0
    }

    /// Decodes a frame as cut by [`super::frame::next_frame`] (without the length prefix).
    pub fn decode(frame: Bytes, limits: &DecodeLimits) -> Result<RemotingCommand, DecodeError> {
        if frame.len() < 4 {
            return Err(DecodeError::Frame(FrameError::TooShort {
                length: frame.len() as u32,
            }));
        }
        let word = BigEndian::read_u32(&frame[..4]);
        let (serialize_type, header_len) = check_type_word(word, frame.len() as u32)?;
        if header_len > limits.max_header_len {
            return Err(DecodeError::HeaderTooLong {
                len: header_len,
                max: limits.max_header_len,
            });
        }
        let header = 4..4 + header_len;
        let mut cmd = if serialize_type == 0 {
            decode_json_header(&frame, header, limits)?
        } else {
            decode_binary_header(&frame[header], limits)?
        };
        cmd.body = frame.slice(4 + header_len..);
        Ok(cmd)
    }
}

impl From<json::JsonError> for DecodeError {
    fn from(e: json::JsonError) -> Self {
        DecodeError::Json(e.to_string())
    }
}

fn int_field(v: Item<'_>, name: &'static str) -> Result<i32, DecodeError> {
    if v.is_null() {
        return Ok(0);
    }
    v.as_i32().ok_or(DecodeError::Field(name))
}

/// Any header the JSON reader accepts, with fastjson's coercions, read member by member
/// into the command; ext fields written as plain strings stay in the frame's bytes.
fn decode_json_header(
    frame: &Bytes,
    at: std::ops::Range<usize>,
    limits: &DecodeLimits,
) -> Result<RemotingCommand, DecodeError> {
    let mut c = json::Cursor::new(&frame[at.clone()], &limits.json)?;
    if c.peek() != Some(b'{') {
        c.skip()?;
        c.finish()?;
        return Err(DecodeError::Json("header is not an object".into()));
    }
    let mark = c.mark();
    let mut cmd = RemotingCommand::default();
    if java_layout(&mut c, &mut cmd, frame, &at, limits).is_some() {
        return Ok(cmd);
    }
    c.rewind(mark);
    cmd = RemotingCommand::default();
    c.members(|c, key| {
        match &*key {
            "code" => cmd.code = int_field(c.item()?, "code")?,
            "version" => cmd.version = int_field(c.item()?, "version")?,
            "opaque" => cmd.opaque = int_field(c.item()?, "opaque")?,
            "flag" => cmd.flag = int_field(c.item()?, "flag")?,
            "language" => cmd.language = language(c.item()?)?,
            "remark" => {
                let v = c.item()?;
                let empty =
                    v.is_null() || matches!(&v, Item::Scalar(Scalar::Str(s)) if s.is_empty());
                cmd.remark = (!empty).then(|| v.to_text());
            }
            "extFields" => {
                let sharing = cmd.ext_fields.share(frame.slice(at.clone()), c.text());
                ext_fields(c, &mut cmd.ext_fields, sharing, limits.max_ext_fields)?;
            }
            _ => c.skip()?,
        }
        Ok::<_, DecodeError>(())
    })?;
    c.finish()?;
    Ok(cmd)
}

/// A request header exactly as Java's fastjson writes it (members in alphabetical order,
/// `remark` only when set, plain numbers and strings): the keys are literals, so none is
/// scanned. Anything else is `None`, and [`decode_json_header`] reads the header member by
/// member from the start. Without this, a heartbeat or route lookup cost about 1.7 times the
/// instructions (`benches/scripts/cgdelta.sh NS heartbeat`).
fn java_layout(
    c: &mut json::Cursor<'_>,
    cmd: &mut RemotingCommand,
    frame: &Bytes,
    at: &std::ops::Range<usize>,
    limits: &DecodeLimits,
) -> Option<()> {
    (c.peek() == Some(b'{') && c.open(false).ok()? && c.literal(b"\"code\":")).then_some(())?;
    cmd.code = c.plain_int()?;
    if c.literal(b",\"extFields\":") {
        let sharing = cmd
            .ext_fields
            .share(frame.slice(at.clone()), Some(c.text()?));
        ext_fields(c, &mut cmd.ext_fields, sharing, limits.max_ext_fields).ok()?;
    }
    c.literal(b",\"flag\":").then_some(())?;
    cmd.flag = c.plain_int()?;
    c.literal(b",\"language\":").then_some(())?;
    cmd.language = codes::language_by_name(c.plain_str()?).unwrap_or(255);
    c.literal(b",\"opaque\":").then_some(())?;
    cmd.opaque = c.plain_int()?;
    if c.literal(b",\"remark\":") {
        let remark = c.plain_str()?;
        cmd.remark = (!remark.is_empty()).then(|| remark.to_owned());
    }
    c.literal(b",\"serializeTypeCurrentRPC\":\"JSON\",\"version\":")
        .then_some(())?;
    cmd.version = c.plain_int()?;
    (!c.next(false).ok()? && c.finish().is_ok()).then_some(())
}

/// A language name (255 when unknown or null), or fastjson's ordinal (out of range throws).
fn language(v: Item<'_>) -> Result<u8, DecodeError> {
    match &v {
        Item::Scalar(Scalar::Null) => Ok(255),
        Item::Scalar(Scalar::Str(name)) => Ok(codes::language_by_name(name).unwrap_or(255)),
        _ => match v.as_i64() {
            Some(n) if (0..codes::LANGUAGES.len() as i64).contains(&n) => Ok(n as u8),
            _ => Err(DecodeError::Field("language")),
        },
    }
}

/// The `extFields` value. fastjson assigns a repeated member again, so the last `extFields`
/// wins, and within it the last value of a repeated key (a HashMap put; null removes). Pairs
/// of plain strings go into `fields` (emptied by the caller) as spans while they are
/// `sharing` the header; any other pair makes the fields owned copies.
fn ext_fields(
    c: &mut json::Cursor<'_>,
    fields: &mut ExtFields,
    mut sharing: bool,
    max: usize,
) -> Result<(), DecodeError> {
    if c.peek() == Some(b'n') {
        return Ok(c.skip()?);
    }
    if c.peek() != Some(b'{') {
        c.skip()?;
        return Err(DecodeError::Field("extFields"));
    }
    let mut pairs = 0;
    let mut more = c.open(false)?;
    while more {
        // Counted as they come (repeated keys included).
        pairs += 1;
        if pairs > max {
            return Err(DecodeError::TooManyExtFields { max });
        }
        // `"k":"v"` as Java writes it, else the pair read as any member.
        let mark = c.mark();
        let plain = match c.plain_str() {
            Some(k) if sharing && c.literal(b":") => c.plain_str().map(|v| (k, v)),
            _ => None,
        };
        match plain {
            Some((k, v)) => fields.put_span(c.span_of(k), c.span_of(v)),
            None => {
                c.rewind(mark);
                let key = c.key()?;
                match (&key, c.item()?) {
                    (Cow::Borrowed(k), Item::Scalar(Scalar::Str(Cow::Borrowed(v)))) if sharing => {
                        fields.put_span(c.span_of(k), c.span_of(v))
                    }
                    (_, v) => {
                        sharing = false;
                        let value = (!v.is_null()).then(|| v.to_text());
                        fields.put(&key, value.as_deref());
                    }
                }
            }
        }
        more = c.next(false)?;
    }
    Ok(())
}

/// `len` bytes off the front of `c`, as text; `bad` is the error for a negative `len`.
fn take_str<'a>(c: &mut &'a [u8], len: i32, bad: &'static str) -> Result<&'a str, DecodeError> {
    let len = usize::try_from(len).map_err(|_| DecodeError::Binary(bad))?;
    let bytes = c
        .get(..len)
        .ok_or(DecodeError::Binary("truncated header"))?;
    c.advance(len);
    std::str::from_utf8(bytes).map_err(|_| DecodeError::Binary("string is not UTF-8"))
}

fn decode_binary_header(
    header: &[u8],
    limits: &DecodeLimits,
) -> Result<RemotingCommand, DecodeError> {
    let truncated = |_: TryGetError| DecodeError::Binary("truncated header");
    let mut c = header;
    let mut cmd = RemotingCommand {
        serialize_type: SerializeType::RocketMq,
        ..RemotingCommand::default()
    };
    cmd.code = i32::from(c.try_get_i16().map_err(truncated)?);
    let language = c.try_get_u8().map_err(truncated)?;
    cmd.language = if (language as usize) < codes::LANGUAGES.len() {
        language
    } else {
        255
    };
    cmd.version = i32::from(c.try_get_i16().map_err(truncated)?);
    cmd.opaque = c.try_get_i32().map_err(truncated)?;
    cmd.flag = c.try_get_i32().map_err(truncated)?;
    let remark_len = c.try_get_i32().map_err(truncated)?;
    if remark_len < 0 || remark_len as usize > header.len() {
        return Err(DecodeError::Binary("remark length"));
    }
    if remark_len > 0 {
        cmd.remark = Some(take_str(&mut c, remark_len, "remark length")?.to_owned());
    }
    let ext_len = c.try_get_i32().map_err(truncated)?;
    if ext_len < 0 || ext_len as usize > c.len() {
        return Err(DecodeError::Binary("extFields length"));
    }
    // The bytes after the ext fields (none in a well-formed header).
    let after_ext = c.len() - ext_len as usize;
    cmd.ext_fields.reserve_text(ext_len as usize);
    // Pairs on the wire are counted, not distinct keys: repeats cost a scan each.
    let mut pairs = 0usize;
    while c.len() > after_ext {
        if pairs >= limits.max_ext_fields {
            return Err(DecodeError::TooManyExtFields {
                max: limits.max_ext_fields,
            });
        }
        pairs += 1;
        let key_len = c.try_get_i16().map_err(truncated)?;
        let key = take_str(&mut c, key_len.into(), "negative key length")?;
        let value_len = c.try_get_i32().map_err(truncated)?;
        let value = take_str(&mut c, value_len, "negative value length")?;
        if c.len() < after_ext {
            return Err(DecodeError::Binary("extFields overrun"));
        }
        // Java turns zero-length strings into null and puts the pair into a HashMap: an
        // empty key is never looked up, an empty value removes the key, a repeat replaces it.
        if !key.is_empty() {
            cmd.ext_fields
                .put(key, (!value.is_empty()).then_some(value));
        }
    }
    Ok(cmd)
}

/// The header fields of an outgoing frame.
#[derive(Debug, Clone, Copy)]
pub struct Header<'a> {
    pub code: i32,
    pub language: &'a str,
    pub version: i32,
    pub opaque: i32,
    pub flag: i32,
    pub remark: Option<&'a str>,
}

/// Appends a whole frame (length prefix included) to `out`. `ext` = `None` omits `extFields`
/// from a JSON header (Java omits it when the handler had no custom header), `Some(empty)`
/// writes `"extFields":{}`.
pub fn encode_frame<'e, I>(
    out: &mut Vec<u8>,
    serialize_type: SerializeType,
    header: &Header<'_>,
    ext: Option<I>,
    body: &[u8],
) where
    I: IntoIterator<Item = (&'e str, &'e str)>,
{
    let start = out.len();
    out.extend_from_slice(&[0u8; PREFIX_LEN]);
    match serialize_type {
        SerializeType::Json => {
            json_header_head(out, header, ext);
            json::write_i64(out, i64::from(header.opaque));
            json_header_tail(out, header);
        }
        SerializeType::RocketMq => encode_binary_header(out, header, ext),
    }
    let header_end = out.len();
    out.extend_from_slice(body);
    write_length_words(out, start, header_end, serialize_type);
}

/// Fills in the two words a frame starting at `start` opens with: its length after the first
/// word, then the serialize type and the header's length (the header ends at `header_end`).
fn write_length_words(
    out: &mut [u8],
    start: usize,
    header_end: usize,
    serialize_type: SerializeType,
) {
    let length = (out.len() - start - 4) as u32;
    BigEndian::write_u32(&mut out[start..start + 4], length);
    let header_len = (header_end - start - 8) as u32 & 0x00FF_FFFF;
    let word = ((serialize_type as u32) << 24) | header_len;
    BigEndian::write_u32(&mut out[start + 4..start + 8], word);
}

/// A frame encoded once and written per request with its opaque and body, the only parts
/// that differ between two answers to the same kind of request (a heartbeat's SUCCESS, a
/// QUERY_DATA_VERSION's `changed`). The bytes are those [`encode_frame`] writes.
#[derive(Debug, Clone)]
pub struct FrameTemplate {
    serialize_type: SerializeType,
    /// The frame up to the opaque's value (JSON), or with the whole header (ROCKETMQ: the
    /// opaque is at a fixed offset).
    head: Vec<u8>,
    /// JSON: the header after the opaque's value.
    tail: Vec<u8>,
}

/// Where the opaque is in a ROCKETMQ frame: after the two length words, the code (2 bytes),
/// the language (1) and the version (2).
const BINARY_OPAQUE_AT: usize = 13;

impl FrameTemplate {
    /// The frame of `header` (its opaque ignored) and `ext`, without a body.
    pub fn new<'e, I>(serialize_type: SerializeType, header: &Header<'_>, ext: Option<I>) -> Self
    where
        I: IntoIterator<Item = (&'e str, &'e str)>,
    {
        // The length words are written per reply.
        let mut head = vec![0; PREFIX_LEN];
        let mut tail = Vec::new();
        match serialize_type {
            SerializeType::Json => {
                json_header_head(&mut head, header, ext);
                json_header_tail(&mut tail, header);
            }
            SerializeType::RocketMq => encode_binary_header(&mut head, header, ext),
        }
        FrameTemplate {
            serialize_type,
            head,
            tail,
        }
    }

    /// Appends the frame with `opaque`, its body written by `body` (appending to `out`).
    pub fn write_with_body(&self, out: &mut Vec<u8>, opaque: i32, body: impl FnOnce(&mut Vec<u8>)) {
        let start = out.len();
        out.extend_from_slice(&self.head);
        match self.serialize_type {
            SerializeType::RocketMq => {
                let at = start + BINARY_OPAQUE_AT;
                if let Some(slot) = out.get_mut(at..at + 4) {
                    slot.copy_from_slice(&opaque.to_be_bytes());
                }
            }
            SerializeType::Json => {
                json::write_i64(out, i64::from(opaque));
                out.extend_from_slice(&self.tail);
            }
        }
        let header_end = out.len();
        body(out);
        write_length_words(out, start, header_end, self.serialize_type);
    }
}

/// A JSON header up to the opaque's value; [`json_header_tail`] writes what follows it.
fn json_header_head<'e, I>(out: &mut Vec<u8>, h: &Header<'_>, ext: Option<I>)
where
    I: IntoIterator<Item = (&'e str, &'e str)>,
{
    out.extend_from_slice(b"{\"code\":");
    json::write_i64(out, i64::from(h.code));
    if let Some(ext) = ext {
        out.extend_from_slice(b",\"extFields\":");
        let mut fields = json::Seq::object(out);
        for (k, v) in ext {
            json::write_str(fields.key(k), v);
        }
        fields.end();
    }
    out.extend_from_slice(b",\"flag\":");
    json::write_i64(out, i64::from(h.flag));
    out.extend_from_slice(b",\"language\":");
    json::write_str(out, h.language);
    out.extend_from_slice(b",\"opaque\":");
}

fn json_header_tail(out: &mut Vec<u8>, h: &Header<'_>) {
    if let Some(remark) = h.remark {
        out.extend_from_slice(b",\"remark\":");
        json::write_str(out, remark);
    }
    out.extend_from_slice(b",\"serializeTypeCurrentRPC\":\"JSON\",\"version\":");
    json::write_i64(out, i64::from(h.version));
    out.push(b'}');
}

fn encode_binary_header<'e, I>(out: &mut Vec<u8>, h: &Header<'_>, ext: Option<I>)
where
    I: IntoIterator<Item = (&'e str, &'e str)>,
{
    out.extend_from_slice(&(h.code as i16).to_be_bytes());
    // An unknown name is sent as OTHER, as a lenient peer would.
    out.push(codes::language_by_name(h.language).unwrap_or(7));
    out.extend_from_slice(&(h.version as i16).to_be_bytes());
    out.extend_from_slice(&h.opaque.to_be_bytes());
    out.extend_from_slice(&h.flag.to_be_bytes());
    match h.remark {
        Some(r) => {
            out.extend_from_slice(&(r.len() as i32).to_be_bytes());
            out.extend_from_slice(r.as_bytes());
        }
        None => out.extend_from_slice(&0i32.to_be_bytes()),
    }
    let len_pos = out.len();
    out.extend_from_slice(&0i32.to_be_bytes());
    if let Some(ext) = ext {
        for (k, v) in ext {
            out.extend_from_slice(&(k.len() as i16).to_be_bytes());
            out.extend_from_slice(k.as_bytes());
            out.extend_from_slice(&(v.len() as i32).to_be_bytes());
            out.extend_from_slice(v.as_bytes());
        }
    }
    let ext_len = (out.len() - len_pos - 4) as i32;
    BigEndian::write_i32(&mut out[len_pos..len_pos + 4], ext_len);
}

#[cfg(test)]
mod tests;
