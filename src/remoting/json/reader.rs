//! The one reader of the dialect: a [`Cursor`] stepping through the input's tokens without
//! building anything, for the [`Document`] builder and the hot-shape decoders alike. Hostile
//! input gives a [`JsonError`], never a panic.

use super::document::{self, Document};
use super::{JsonError, Limits};
use std::borrow::Cow;

/// A value that is not a container.
#[derive(Debug, Clone, PartialEq)]
pub enum Scalar<'a> {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(Cow<'a, str>),
}

impl Scalar<'_> {
    /// Int; a Float with no fraction in [-2^63, 2^63); a Str as Java's `Long.parseLong` reads it.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Scalar::Int(v) => Some(*v),
            Scalar::Float(f)
                if f.fract() == 0.0 && *f >= i64::MIN as f64 && *f < -(i64::MIN as f64) =>
            {
                Some(*f as i64)
            }
            Scalar::Str(s) => s.parse().ok(),
            _ => None,
        }
    }

    /// Bool; Int 0 or 1; Str `"true"`/`"false"` in any case.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Scalar::Bool(b) => Some(*b),
            Scalar::Int(0) => Some(false),
            Scalar::Int(1) => Some(true),
            Scalar::Str(s) if s.eq_ignore_ascii_case("true") => Some(true),
            Scalar::Str(s) if s.eq_ignore_ascii_case("false") => Some(false),
            _ => None,
        }
    }

    /// As [`super::Value::to_text`].
    pub fn to_text(&self) -> String {
        match self {
            Scalar::Str(s) => s.as_ref().to_owned(),
            Scalar::Null => "null".to_owned(),
            Scalar::Bool(b) => b.to_string(),
            Scalar::Int(v) => v.to_string(),
            Scalar::Float(f) => super::Value::Float(*f).to_text(),
        }
    }
}

/// One value read by [`Cursor::item`]: a scalar as it is, a container as a [`Document`].
#[derive(Debug)]
pub enum Item<'a> {
    Scalar(Scalar<'a>),
    Tree(Document<'a>),
}

/// fastjson's coercions of a member's value, an [`Item`] or a [`super::ValueRef`].
pub trait Field {
    fn is_null(&self) -> bool;
    fn as_i64(&self) -> Option<i64>;
    fn as_bool(&self) -> Option<bool>;
    fn to_text(&self) -> String;
    fn as_i32(&self) -> Option<i32> {
        self.as_i64().and_then(|v| i32::try_from(v).ok())
    }
}

impl Field for Item<'_> {
    fn is_null(&self) -> bool {
        matches!(self, Item::Scalar(Scalar::Null))
    }
    fn as_i64(&self) -> Option<i64> {
        let Item::Scalar(s) = self else { return None };
        s.as_i64()
    }
    fn as_bool(&self) -> Option<bool> {
        let Item::Scalar(s) = self else { return None };
        s.as_bool()
    }
    fn to_text(&self) -> String {
        match self {
            Item::Scalar(s) => s.to_text(),
            Item::Tree(doc) => doc.root().to_text(),
        }
    }
}

/// Whitespace as fastjson skips it (it also skips form feed and backspace).
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\n' | b'\r' | b'\t' | 0x0C | 0x08)
}

/// Bytes that end an unquoted key.
fn ends_unquoted_key(b: u8) -> bool {
    is_space(b) || matches!(b, b':' | b',' | b'{' | b'}' | b'[' | b']' | b'"' | b'\'')
}

fn closing(is_array: bool) -> u8 {
    if is_array {
        b']'
    } else {
        b'}'
    }
}

/// A position in one input. A container is [`Cursor::open`], then per member ([`Cursor::key`]
/// first in an object) its value and [`Cursor::next`], until one of them says it closed.
pub struct Cursor<'a> {
    input: &'a [u8],
    /// `input` as text when it is UTF-8 as a whole (else each string is checked as read).
    text: Option<&'a str>,
    pos: usize,
    limits: Limits,
    /// Containers open now.
    depth: usize,
}

impl<'a> Cursor<'a> {
    /// A cursor that checks only the strings it reads as UTF-8, for a large body whose
    /// decoder keeps few of them (what it accepts is UTF-8 all the same).
    pub fn checking_strings(input: &'a [u8], limits: &Limits) -> Result<Self, JsonError> {
        Cursor::over(input, limits, None)
    }

    pub fn new(input: &'a [u8], limits: &Limits) -> Result<Self, JsonError> {
        Cursor::over(input, limits, std::str::from_utf8(input).ok())
    }

    fn over(input: &'a [u8], limits: &Limits, text: Option<&'a str>) -> Result<Self, JsonError> {
        if u32::try_from(input.len()).is_err() {
            return Err(JsonError {
                offset: 0,
                message: "document larger than 4 GiB",
            });
        }
        // A UTF-8 byte order mark is tolerated, as Java's readers strip it too.
        let pos = if input.starts_with(&[0xEF, 0xBB, 0xBF]) {
            3
        } else {
            0
        };
        Ok(Cursor {
            input,
            text,
            pos,
            limits: *limits,
            depth: 0,
        })
    }

    pub(super) fn error(&self, message: &'static str) -> JsonError {
        JsonError {
            offset: self.pos,
            message,
        }
    }

    pub(super) fn pos(&self) -> usize {
        self.pos
    }

    /// The whole input, when it is UTF-8.
    pub fn text(&self) -> Option<&'a str> {
        self.text
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.input.len() - self.pos
    }

    /// Where a string this cursor returned borrowed lies in the input.
    pub fn span_of(&self, s: &str) -> (usize, usize) {
        let start = (s.as_ptr() as usize).wrapping_sub(self.input.as_ptr() as usize);
        (start, start + s.len())
    }

    /// `input[start..end]` as text; both ends sit next to ASCII delimiters.
    pub(super) fn text_between(&self, start: usize, end: usize) -> Option<&'a str> {
        match self.text {
            Some(text) => text.get(start..end),
            None => {
                let bytes = self.input.get(start..end)?;
                if bytes.is_ascii() {
                    // SAFETY: every byte is below 0x80, so each is a whole UTF-8 char
                    // (checked a word at a time; `from_utf8` goes byte by byte).
                    return Some(unsafe { std::str::from_utf8_unchecked(bytes) });
                }
                std::str::from_utf8(bytes).ok()
            }
        }
    }

    /// The next byte after whitespace (which is consumed).
    #[inline]
    pub fn peek(&mut self) -> Option<u8> {
        while let Some(&b) = self.input.get(self.pos) {
            if !is_space(b) {
                return Some(b);
            }
            self.pos += 1;
        }
        None
    }

    /// Skips whitespace and any number of commas (fastjson's AllowArbitraryCommas).
    fn skip_space_and_commas(&mut self) {
        while let Some(&b) = self.input.get(self.pos) {
            if !(is_space(b) || b == b',') {
                break;
            }
            self.pos += 1;
        }
    }

    /// Reads the `[` or `{` at the cursor; whether members follow (if not, it is closed).
    pub fn open(&mut self, is_array: bool) -> Result<bool, JsonError> {
        if self.depth >= self.limits.max_depth {
            return Err(self.error("nesting deeper than maxJsonDepth"));
        }
        self.depth += 1;
        self.pos += 1;
        self.skip_space_and_commas();
        self.close_if(closing(is_array))
    }

    /// After a member's value: whether another member follows; if not, the container closed.
    pub fn next(&mut self, is_array: bool) -> Result<bool, JsonError> {
        let close = closing(is_array);
        match self.peek() {
            Some(b',') => {
                self.skip_space_and_commas();
                self.close_if(close)
            }
            Some(b) if b == close => self.close_if(close),
            Some(_) if is_array => Err(self.error("expected ',' or ']'")),
            Some(_) => Err(self.error("expected ',' or '}'")),
            None if is_array => Err(self.error("unexpected end of input in array")),
            None => Err(self.error("unexpected end of input in object")),
        }
    }

    fn close_if(&mut self, close: u8) -> Result<bool, JsonError> {
        if self.input.get(self.pos) != Some(&close) {
            return Ok(true);
        }
        self.pos += 1;
        self.depth -= 1;
        Ok(false)
    }

    /// Reads `{...}` at the cursor, handing each key to `member`, which reads its value.
    pub fn members<E: From<JsonError>>(
        &mut self,
        mut member: impl FnMut(&mut Self, Cow<'a, str>) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut more = self.open(false)?;
        while more {
            let key = self.member_key()?;
            member(self, key)?;
            more = self.next(false)?;
        }
        Ok(())
    }

    /// Only whitespace may follow the value read.
    pub fn finish(&mut self) -> Result<(), JsonError> {
        match self.peek() {
            None => Ok(()),
            Some(_) => Err(self.error("unexpected characters after the value")),
        }
    }

    /// Where the cursor is, to come back to with [`Cursor::rewind`].
    pub fn mark(&self) -> (usize, usize) {
        (self.pos, self.depth)
    }

    pub fn rewind(&mut self, mark: (usize, usize)) {
        (self.pos, self.depth) = mark;
    }

    /// Consumes `lit` if the input continues with exactly these bytes (a few word loads), to
    /// step over the keys of shapes Java writes byte for byte; it must not open or close one.
    #[inline(always)]
    pub fn literal<const N: usize>(&mut self, lit: &[u8; N]) -> bool {
        let hit = self.input[self.pos..].first_chunk::<N>() == Some(lit);
        self.pos += if hit { N } else { 0 };
        hit
    }

    /// A plain decimal (`-?[0-9]+`, no leading zero) that fits `T`; `None`, the cursor
    /// unmoved, for anything else (for [`Cursor::scalar`]).
    #[inline(always)]
    pub fn plain_int<T: TryFrom<i64>>(&mut self) -> Option<T> {
        let rest = &self.input[self.pos..];
        let negative = rest.first() == Some(&b'-');
        let digits = &rest[usize::from(negative)..];
        let (mut n, mut magnitude) = (0, 0i64);
        while let Some(&b) = digits.get(n) {
            let d = b.wrapping_sub(b'0');
            if d > 9 {
                break;
            }
            if n == 18 || (n == 1 && magnitude == 0) {
                return None; // past what surely fits, or a leading zero
            }
            magnitude = magnitude * 10 + i64::from(d);
            n += 1;
        }
        if n == 0 || matches!(digits.get(n), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        let value = T::try_from(if negative { -magnitude } else { magnitude }).ok()?;
        self.pos += usize::from(negative) + n;
        Some(value)
    }

    /// A double-quoted string without escapes; `None`, the cursor unmoved, for anything else.
    #[inline(always)]
    pub fn plain_str(&mut self) -> Option<&'a str> {
        let start = self.pos + 1;
        let rest = self
            .input
            .get(start..)
            .filter(|_| self.input[self.pos] == b'"')?;
        let len = find_quote_or_backslash(rest, b'"').filter(|&len| rest[len] == b'"')?;
        if len > self.limits.max_string_len {
            return None;
        }
        let text = self.text_between(start, start + len)?;
        self.pos = start + len + 1;
        Some(text)
    }

    /// Consumes `"s"` if it comes next (`s` a string this cursor returned borrowed).
    #[inline(always)]
    pub fn quoted(&mut self, s: &str) -> bool {
        let n = s.len();
        let hit = self
            .input
            .get(self.pos..self.pos + n + 2)
            .is_some_and(|w| w[0] == b'"' && w[n + 1] == b'"' && &w[1..=n] == s.as_bytes());
        self.pos += if hit { n + 2 } else { 0 };
        hit
    }

    /// A key as Java writes it, `"k":`, read fast (one per topic of a body); else `key`.
    #[inline(always)]
    fn member_key(&mut self) -> Result<Cow<'a, str>, JsonError> {
        let mark = self.pos;
        match self.plain_str() {
            Some(key) if self.literal(b":") => Ok(Cow::Borrowed(key)),
            _ => {
                self.pos = mark;
                self.key()
            }
        }
    }

    /// A member key, quoted either way or bare (fastjson's `Map<Long,..>` keys), and its `:`.
    pub fn key(&mut self) -> Result<Cow<'a, str>, JsonError> {
        let key = match self.input.get(self.pos) {
            Some(&q @ (b'"' | b'\'')) => self.string(q)?,
            Some(_) => {
                let start = self.pos;
                while let Some(&b) = self.input.get(self.pos) {
                    if ends_unquoted_key(b) {
                        break;
                    }
                    self.pos += 1;
                }
                if self.pos == start {
                    return Err(self.error("expected an object key"));
                }
                if self.pos - start > self.limits.max_string_len {
                    return Err(self.error("key longer than the limit"));
                }
                let Some(key) = self.text_between(start, self.pos) else {
                    self.pos = start;
                    return Err(self.error("invalid UTF-8 in key"));
                };
                Cow::Borrowed(key)
            }
            None => return Err(self.error("unexpected end of input, expected a key")),
        };
        if self.peek() != Some(b':') {
            return Err(self.error("expected ':' after key"));
        }
        self.pos += 1;
        Ok(key)
    }

    /// The value at the cursor: a scalar, or a container read into a [`Document`].
    pub fn item(&mut self) -> Result<Item<'a>, JsonError> {
        match self.peek() {
            Some(b'[' | b'{') => Ok(Item::Tree(document::read(self)?)),
            _ => Ok(Item::Scalar(self.scalar()?)),
        }
    }

    /// The value at the cursor, whatever it is, read into a [`Document`].
    pub fn document(&mut self) -> Result<Document<'a>, JsonError> {
        document::read(self)
    }

    /// Consumes a `null` if one comes next.
    pub fn null(&mut self) -> Result<bool, JsonError> {
        let null = self.peek() == Some(b'n');
        if null {
            self.scalar()?;
        }
        Ok(null)
    }

    /// Steps over the value at the cursor, building nothing.
    pub fn skip(&mut self) -> Result<(), JsonError> {
        let mut open: Vec<bool> = Vec::new();
        loop {
            let mut more = match self.peek() {
                Some(b @ (b'[' | b'{')) => {
                    let members = self.open(b == b'[')?;
                    if members {
                        open.push(b == b'[');
                    }
                    members
                }
                _ => self.scalar().map(|_| false)?,
            };
            while !more {
                let Some(&is_array) = open.last() else {
                    return Ok(());
                };
                more = self.next(is_array)?;
                if !more {
                    open.pop();
                }
            }
            if open.last() == Some(&false) {
                self.key()?;
            }
        }
    }

    /// The scalar at the cursor (after whitespace).
    pub fn scalar(&mut self) -> Result<Scalar<'a>, JsonError> {
        let scalar = match self.peek() {
            Some(q @ (b'"' | b'\'')) => return Ok(Scalar::Str(self.string(q)?)),
            Some(b'-' | b'0'..=b'9') => self.number()?,
            Some(b't') => self.word(b"true", Scalar::Bool(true))?,
            Some(b'f') => self.word(b"false", Scalar::Bool(false))?,
            Some(b'n') => self.word(b"null", Scalar::Null)?,
            Some(_) => return Err(self.error("expected a value")),
            None => return Err(self.error("unexpected end of input, expected a value")),
        };
        Ok(scalar)
    }

    fn word(&mut self, word: &[u8], value: Scalar<'a>) -> Result<Scalar<'a>, JsonError> {
        if self.input[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(value)
        } else {
            Err(self.error("invalid literal"))
        }
    }

    fn number(&mut self) -> Result<Scalar<'a>, JsonError> {
        let start = self.pos;
        let mut is_float = false;
        if self.input.get(self.pos) == Some(&b'-') {
            self.pos += 1;
        }
        if self.skip_digits() == 0 {
            return Err(self.error("expected digits"));
        }
        if self.input.get(self.pos) == Some(&b'.') {
            is_float = true;
            self.pos += 1;
            if self.skip_digits() == 0 {
                return Err(self.error("expected digits after '.'"));
            }
        }
        if let Some(b'e' | b'E') = self.input.get(self.pos) {
            is_float = true;
            self.pos += 1;
            if let Some(b'+' | b'-') = self.input.get(self.pos) {
                self.pos += 1;
            }
            if self.skip_digits() == 0 {
                return Err(self.error("expected digits in exponent"));
            }
        }
        // Only ASCII digits, signs, '.' and 'e' were stepped over: valid UTF-8.
        let text = std::str::from_utf8(&self.input[start..self.pos]).unwrap_or_default();
        if !is_float {
            if let Ok(v) = text.parse() {
                return Ok(Scalar::Int(v));
            }
        }
        text.parse().map(Scalar::Float).map_err(|_| JsonError {
            offset: start,
            message: "invalid number",
        })
    }

    /// Digits stepped over.
    fn skip_digits(&mut self) -> usize {
        let start = self.pos;
        while let Some(b'0'..=b'9') = self.input.get(self.pos) {
            self.pos += 1;
        }
        self.pos - start
    }

    /// A string quoted by `quote` (the opening quote is at the cursor).
    #[inline(always)]
    fn string(&mut self, quote: u8) -> Result<Cow<'a, str>, JsonError> {
        self.pos += 1;
        let start = self.pos;
        let run_end = self.scan_plain(quote);
        match self.input.get(run_end) {
            Some(&b) if b == quote => {
                // Common case: no escapes, the string is a slice of the input.
                if run_end - start > self.limits.max_string_len {
                    return Err(self.error("string longer than the limit"));
                }
                let Some(text) = self.text_between(start, run_end) else {
                    return Err(self.error("invalid UTF-8 in string"));
                };
                self.pos = run_end + 1;
                Ok(Cow::Borrowed(text))
            }
            Some(_) => self.escaped_string(quote, start, run_end).map(Cow::Owned),
            None => {
                self.pos = self.input.len();
                Err(self.error("unterminated string"))
            }
        }
    }

    /// First index at or after the cursor holding `quote` or a backslash (or the input end).
    #[inline(always)]
    fn scan_plain(&self, quote: u8) -> usize {
        let rest = &self.input[self.pos..];
        self.pos + find_quote_or_backslash(rest, quote).unwrap_or(rest.len())
    }

    /// From the first backslash (`run_end`); `start` is the first content byte.
    #[cold]
    #[inline(never)]
    fn escaped_string(
        &mut self,
        quote: u8,
        start: usize,
        mut run_end: usize,
    ) -> Result<String, JsonError> {
        let mut out = self.input[start..run_end].to_vec();
        self.pos = run_end;
        loop {
            if out.len() > self.limits.max_string_len {
                return Err(self.error("string longer than the limit"));
            }
            match self.input.get(self.pos) {
                None => return Err(self.error("unterminated string")),
                Some(&b) if b == quote => {
                    self.pos += 1;
                    break;
                }
                Some(_) => {
                    // A backslash: decode one escape, then copy the next plain run.
                    self.pos += 1;
                    self.decode_escape(&mut out)?;
                    run_end = self.scan_plain(quote);
                    out.extend_from_slice(&self.input[self.pos..run_end]);
                    self.pos = run_end;
                }
            }
        }
        if out.len() > self.limits.max_string_len {
            return Err(self.error("string longer than the limit"));
        }
        String::from_utf8(out).map_err(|_| JsonError {
            offset: start,
            message: "invalid UTF-8 in string",
        })
    }

    /// Decodes the escape whose backslash was just consumed.
    fn decode_escape(&mut self, out: &mut Vec<u8>) -> Result<(), JsonError> {
        let Some(&b) = self.input.get(self.pos) else {
            return Err(self.error("unterminated escape"));
        };
        self.pos += 1;
        let plain = match b {
            b'"' | b'\'' | b'\\' | b'/' => b,
            b'b' => 0x08,
            b'f' => 0x0C,
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            b'v' => 0x0B,
            b'0' => 0,
            b'x' => {
                // fastjson's `\xHH`: one Latin-1 character.
                let hi = self.hex_digit()?;
                let lo = self.hex_digit()?;
                push_char(out, char::from((hi << 4 | lo) as u8));
                return Ok(());
            }
            b'u' => {
                let unit = self.hex4()?;
                let c = match unit {
                    0xD800..=0xDBFF => self.low_surrogate_after(unit),
                    0xDC00..=0xDFFF => char::REPLACEMENT_CHARACTER,
                    _ => char::from_u32(unit).unwrap_or(char::REPLACEMENT_CHARACTER),
                };
                push_char(out, c);
                return Ok(());
            }
            _ => {
                self.pos -= 1;
                return Err(self.error("invalid escape"));
            }
        };
        out.push(plain);
        Ok(())
    }

    /// Completes a surrogate pair if `\uDC00`..`\uDFFF` follows; else U+FFFD.
    fn low_surrogate_after(&mut self, high: u32) -> char {
        let save = self.pos;
        if self.input.get(self.pos..self.pos + 2) == Some(b"\\u") {
            self.pos += 2;
            if let Ok(low @ 0xDC00..=0xDFFF) = self.hex4() {
                let code = 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00);
                return char::from_u32(code).unwrap_or(char::REPLACEMENT_CHARACTER);
            }
        }
        self.pos = save;
        char::REPLACEMENT_CHARACTER
    }

    fn hex4(&mut self) -> Result<u32, JsonError> {
        let mut v = 0;
        for _ in 0..4 {
            v = v << 4 | self.hex_digit()?;
        }
        Ok(v)
    }

    fn hex_digit(&mut self) -> Result<u32, JsonError> {
        let Some(&b) = self.input.get(self.pos) else {
            return Err(self.error("unterminated escape"));
        };
        let digit = (b as char)
            .to_digit(16)
            .ok_or_else(|| self.error("invalid hex digit in escape"))?;
        self.pos += 1;
        Ok(digit)
    }
}

/// Index of the first `quote` or backslash in `bytes`, eight bytes per step: a byte of a word
/// `x` is zero iff the word `(x - 0x01..) & !x & 0x80..` has its top bit set (bits above the
/// first zero byte may be set spuriously, so only the lowest set bit counts).
#[inline(always)]
pub(super) fn find_quote_or_backslash(bytes: &[u8], quote: u8) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let quotes = ONES * u64::from(quote);
    let backslashes = ONES * u64::from(b'\\');
    let mut chunks = bytes.chunks_exact(8);
    let mut offset = 0;
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let word = u64::from_le_bytes(word);
        let q = word ^ quotes;
        let b = word ^ backslashes;
        let hits = ((q.wrapping_sub(ONES) & !q) | (b.wrapping_sub(ONES) & !b)) & HIGHS;
        if hits != 0 {
            return Some(offset + (hits.trailing_zeros() / 8) as usize);
        }
        offset += 8;
    }
    chunks
        .remainder()
        .iter()
        .position(|&b| b == quote || b == b'\\')
        .map(|i| offset + i)
}

fn push_char(out: &mut Vec<u8>, c: char) {
    let mut buf = [0u8; 4];
    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
}
