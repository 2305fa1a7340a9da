//! The fastjson dialect of JSON that RocketMQ peers speak: one reader with two results, and
//! append-only writer helpers for the encoders elsewhere.
//!
//! Java peers serialize with fastjson 1.2.83, whose output is not always JSON (map keys of
//! `Map<Long,..>` arrive as bare numbers, `{0:"a"}`), and whose parser tolerates unquoted and
//! single-quoted keys, single-quoted strings and stray commas. Anything a Java NameServer
//! accepts we must accept too, so the reader implements that dialect rather than strict JSON.
//!
//! The reader builds a [`Document`] ([`parse_borrowed`]): the values in document order in one
//! flat Vec of 16-byte slots, strings and keys without escapes as slices of the input, escaped
//! ones decoded into one shared String. That is what the hot paths read (REGISTER_BROKER
//! bodies, request headers): a 1,000-topic body costs no allocation per member, and the slot
//! buffer is reused from the previous document on the same thread. [`parse`] turns the same
//! document into an owned [`Value`] tree for everything else.
//!
//! The reader is iterative (an explicit stack of the containers being read), so nesting
//! costs heap, never call stack, and `Limits::max_depth` bounds it. Every byte it reads is
//! bounds-checked: malformed, truncated or hostile input gives a [`JsonError`], never a panic.
//!
//! The writers append to a caller-owned `Vec<u8>` so the route encoders can build a whole
//! body in one buffer. Two string escapers exist because Java uses two: fastjson's default
//! (non-ASCII raw) for almost everything, and `BrowserCompatible` for the standard route dialect.

use std::cell::Cell;
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
/// This is [`parse_borrowed`] followed by [`ValueRef::to_value`]: one parser, two shapes.
pub fn parse_with(input: &[u8], limits: &Limits) -> Result<Value, JsonError> {
    Ok(parse_borrowed(input, limits)?.root().to_value())
}

/// Parses one fastjson-dialect value into a [`Document`] that borrows from `input`; only
/// whitespace may follow the value. Same dialect, limits and errors as [`parse_with`], but a
/// string or key without escapes is a slice of the input and the whole tree is one flat Vec,
/// so a document costs one or two allocations however many members it has.
pub fn parse_borrowed<'a>(input: &'a [u8], limits: &Limits) -> Result<Document<'a>, JsonError> {
    if u32::try_from(input.len()).is_err() {
        return Err(JsonError {
            offset: 0,
            message: "document larger than 4 GiB",
        });
    }
    let mut parser = Parser {
        input,
        // Any document that parses is valid UTF-8 (structure, numbers and literals are ASCII,
        // strings and keys are checked), so one check up front lets every string be sliced
        // from the input without a check of its own. When it fails, the parser checks each
        // string as it goes, to report the same first error as ever.
        text: std::str::from_utf8(input).ok(),
        pos: 0,
        limits: *limits,
        // About one slot per 10 input bytes in RocketMQ bodies and headers; a denser
        // document grows the Vec as usual.
        slots: spare_slots(input.len() / 10 + 4),
        decoded: String::new(),
        scratch: Vec::new(),
    };
    // A UTF-8 byte order mark is tolerated, as Java's readers strip it too.
    if input.starts_with(&[0xEF, 0xBB, 0xBF]) {
        parser.pos = 3;
    }
    let parsed = parser.parse_document();
    match (parsed, parser.text) {
        (Ok(()), Some(text)) => Ok(Document {
            text,
            slots: parser.slots,
            decoded: parser.decoded,
        }),
        (parsed, _) => {
            keep_spare_slots(parser.slots);
            // Input that is not UTF-8 never parses; the second error is unreachable.
            Err(parsed.err().unwrap_or(JsonError {
                offset: 0,
                message: "invalid UTF-8",
            }))
        }
    }
}

thread_local! {
    /// The slot buffer of the last document dropped on this thread. The event loop reads
    /// one document at a time, so each parse reuses the previous one's buffer instead of
    /// allocating (and, for a big body, page-faulting) a new one.
    static SPARE_SLOTS: Cell<Vec<Slot>> = const { Cell::new(Vec::new()) };
    /// The stack of open containers, reused too: a fresh one per document made parsing a
    /// request header about 5 % slower (interleaved runs of `parse_borrowed` on the two
    /// headers of `benches/json_parse.rs`), the one speed trick left in the reader's loop.
    static SPARE_STACK: Cell<Vec<Open>> = const { Cell::new(Vec::new()) };
}

/// Largest buffer kept for reuse (4 MiB of slots: a body of about 25,000 topics).
const MAX_SPARE_SLOTS: usize = 1 << 18;

/// An empty slot buffer with room for `capacity` slots, reused when one is spare.
fn spare_slots(capacity: usize) -> Vec<Slot> {
    let mut slots = SPARE_SLOTS.try_with(Cell::take).unwrap_or_default();
    slots.clear();
    slots.reserve(capacity);
    slots
}

fn keep_spare_slots(slots: Vec<Slot>) {
    if slots.capacity() <= MAX_SPARE_SLOTS {
        // During thread teardown the buffer is simply freed.
        let _ = SPARE_SLOTS.try_with(|spare| spare.set(slots));
    }
}

impl Drop for Document<'_> {
    fn drop(&mut self) {
        keep_spare_slots(std::mem::take(&mut self.slots));
    }
}

/// One element of a parsed document, in document order (a "tape"): a container's slot is
/// followed by its items, or by key and value slots in turn for an object, nested containers
/// inline. `end` lets a reader step over a whole container at once. Offsets are u32 (inputs
/// are limited to 4 GiB) so that a slot is 16 bytes.
#[derive(Debug, Clone, Copy)]
enum Slot {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    /// A string or key without escapes: `Document::text[start..end]`.
    Str {
        start: u32,
        end: u32,
    },
    /// A string or key with escapes, decoded into `Document::decoded[start..end]`.
    Decoded {
        start: u32,
        end: u32,
    },
    /// `len` items follow; `end` is the index just past the array's last slot.
    Array {
        len: u32,
        end: u32,
    },
    /// `len` key/value pairs follow; `end` is the index just past the object's last slot.
    Object {
        len: u32,
        end: u32,
    },
}

/// A parsed document that borrows its unescaped strings from the input. Read it through
/// [`Document::root`].
#[derive(Debug, Clone)]
pub struct Document<'a> {
    /// The whole input.
    text: &'a str,
    slots: Vec<Slot>,
    /// Text of every string that had escapes, back to back.
    decoded: String,
}

impl<'a> Document<'a> {
    /// The top-level value.
    pub fn root(&self) -> ValueRef<'_> {
        ValueRef { doc: self, at: 0 }
    }

    /// The text of a string slot.
    fn text_of(&self, slot: Slot) -> Option<&str> {
        match slot {
            Slot::Str { start, end } => self.text.get(start as usize..end as usize),
            Slot::Decoded { start, end } => self.decoded.get(start as usize..end as usize),
            _ => None,
        }
    }
}

/// A value inside a [`Document`]: a cheap, copyable handle with the reading methods of
/// [`Value`] (the same fastjson coercions), plus iterators over members and items.
#[derive(Clone, Copy)]
pub struct ValueRef<'d> {
    doc: &'d Document<'d>,
    at: usize,
}

impl fmt::Debug for ValueRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.to_value())
    }
}

impl<'d> ValueRef<'d> {
    fn slot(&self) -> Slot {
        self.doc.slots.get(self.at).copied().unwrap_or(Slot::Null)
    }

    pub fn is_null(&self) -> bool {
        matches!(self.slot(), Slot::Null)
    }

    /// The string, borrowed from the input when it had no escapes; None for non-strings.
    pub fn as_str(&self) -> Option<&'d str> {
        let doc: &'d Document<'d> = self.doc;
        doc.text_of(self.slot())
    }

    /// As [`Value::as_i64`].
    pub fn as_i64(&self) -> Option<i64> {
        match self.slot() {
            Slot::Int(v) => Some(v),
            Slot::Float(f) => float_as_i64(f),
            _ => self.as_str().and_then(str_as_i64),
        }
    }

    pub fn as_i32(&self) -> Option<i32> {
        self.as_i64().and_then(|v| i32::try_from(v).ok())
    }

    /// As [`Value::as_bool`].
    pub fn as_bool(&self) -> Option<bool> {
        match self.slot() {
            Slot::Bool(b) => Some(b),
            Slot::Int(0) => Some(false),
            Slot::Int(1) => Some(true),
            _ => self.as_str().and_then(str_as_bool),
        }
    }

    /// The members of an object, in input order (duplicates included); None otherwise.
    pub fn members(&self) -> Option<Members<'d>> {
        match self.slot() {
            Slot::Object { len, .. } => Some(Members {
                doc: self.doc,
                at: self.at + 1,
                remaining: len as usize,
            }),
            _ => None,
        }
    }

    /// The items of an array; None otherwise.
    pub fn items(&self) -> Option<Items<'d>> {
        match self.slot() {
            Slot::Array { len, .. } => Some(Items {
                doc: self.doc,
                at: self.at + 1,
                remaining: len as usize,
            }),
            _ => None,
        }
    }

    /// Object member lookup (the last duplicate wins, as in a Java map); None for non-objects.
    pub fn get(&self, key: &str) -> Option<ValueRef<'d>> {
        let [found] = self.get_many([key]);
        found
    }

    /// `[get(keys[0]), get(keys[1]), ..]` in one pass over the members (what a bean decoder
    /// wants): the last duplicate of each key wins; None for absent keys and non-objects.
    pub fn get_many<const N: usize>(&self, keys: [&str; N]) -> [Option<ValueRef<'d>>; N] {
        let mut found = [None; N];
        let Slot::Object { len, .. } = self.slot() else {
            return found;
        };
        // Members by hand rather than through `Members`: keys compare as bytes, which skips
        // the char-boundary checks of slicing text.
        let doc = self.doc;
        let mut at = self.at + 1;
        for _ in 0..len {
            let key = match doc.slots.get(at) {
                Some(&Slot::Str { start, end }) => {
                    doc.text.as_bytes().get(start as usize..end as usize)
                }
                Some(&Slot::Decoded { start, end }) => {
                    doc.decoded.as_bytes().get(start as usize..end as usize)
                }
                _ => None,
            };
            let Some(key) = key else {
                break;
            };
            if let Some(i) = keys.iter().position(|k| k.as_bytes() == key) {
                found[i] = Some(ValueRef { doc, at: at + 1 });
            }
            at = next_sibling(&doc.slots, at + 1);
        }
        found
    }

    /// As [`Value::to_text`].
    pub fn to_text(&self) -> String {
        match self.as_str() {
            Some(s) => s.to_owned(),
            None => self.to_value().to_text(),
        }
    }

    /// An owned copy of this value. Iterative (an explicit stack of the containers being
    /// filled), so depth costs heap, never call stack; each container is allocated once, at
    /// its final size.
    pub fn to_value(&self) -> Value {
        /// A container being filled: its members so far and how many it will have.
        enum Filling {
            Array(Vec<Value>, usize),
            /// `key` names the member whose value comes next.
            Object(Vec<(String, Value)>, usize, String),
        }
        let doc = self.doc;
        let owned_text = |at: usize| -> String {
            doc.slots
                .get(at)
                .and_then(|&slot| doc.text_of(slot))
                .unwrap_or_default()
                .to_owned()
        };
        let mut stack: Vec<Filling> = Vec::new();
        let mut at = self.at;
        'value: loop {
            let slot = doc.slots.get(at).copied().unwrap_or(Slot::Null);
            at += 1;
            let mut value = match slot {
                Slot::Null => Value::Null,
                Slot::Bool(b) => Value::Bool(b),
                Slot::Int(v) => Value::Int(v),
                Slot::Float(f) => Value::Float(f),
                Slot::Str { .. } | Slot::Decoded { .. } => {
                    Value::Str(doc.text_of(slot).unwrap_or_default().to_owned())
                }
                Slot::Array { len: 0, .. } => Value::Array(Vec::new()),
                Slot::Object { len: 0, .. } => Value::Object(Vec::new()),
                Slot::Array { len, .. } => {
                    let len = len as usize;
                    stack.push(Filling::Array(Vec::with_capacity(len), len));
                    continue 'value;
                }
                Slot::Object { len, .. } => {
                    let len = len as usize;
                    let key = owned_text(at);
                    at += 1;
                    stack.push(Filling::Object(Vec::with_capacity(len), len, key));
                    continue 'value;
                }
            };
            // Hand the finished value to its container; close containers as they fill up.
            loop {
                match stack.last_mut() {
                    None => return value,
                    Some(Filling::Array(items, len)) => {
                        items.push(value);
                        if items.len() < *len {
                            continue 'value;
                        }
                        value = Value::Array(std::mem::take(items));
                    }
                    Some(Filling::Object(members, len, key)) => {
                        members.push((std::mem::take(key), value));
                        if members.len() < *len {
                            *key = owned_text(at);
                            at += 1;
                            continue 'value;
                        }
                        value = Value::Object(std::mem::take(members));
                    }
                }
                stack.pop();
            }
        }
    }
}

/// Index just past the value whose slot is at `at`.
fn next_sibling(slots: &[Slot], at: usize) -> usize {
    match slots.get(at) {
        Some(Slot::Array { end, .. } | Slot::Object { end, .. }) => *end as usize,
        _ => at + 1,
    }
}

/// Iterator over an object's `(key, value)` pairs; see [`ValueRef::members`].
#[derive(Clone)]
pub struct Members<'d> {
    doc: &'d Document<'d>,
    at: usize,
    remaining: usize,
}

impl<'d> Iterator for Members<'d> {
    type Item = (&'d str, ValueRef<'d>);

    fn next(&mut self) -> Option<Self::Item> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        let doc: &'d Document<'d> = self.doc;
        let key = doc.text_of(doc.slots.get(self.at).copied()?)?;
        let value = ValueRef {
            doc,
            at: self.at + 1,
        };
        self.at = next_sibling(&doc.slots, self.at + 1);
        Some((key, value))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl ExactSizeIterator for Members<'_> {}

/// Iterator over an array's items; see [`ValueRef::items`].
#[derive(Clone)]
pub struct Items<'d> {
    doc: &'d Document<'d>,
    at: usize,
    remaining: usize,
}

impl<'d> Iterator for Items<'d> {
    type Item = ValueRef<'d>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        let item = ValueRef {
            doc: self.doc,
            at: self.at,
        };
        self.at = next_sibling(&self.doc.slots, self.at);
        Some(item)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl ExactSizeIterator for Items<'_> {}

/// An array or object whose members are still being read.
#[derive(Clone, Copy)]
struct Open {
    /// Index of its slot, written with the final length and end when it closes.
    at: usize,
    /// Members (or items) read so far.
    len: u32,
    is_array: bool,
}

fn container(is_array: bool, len: u32, end: u32) -> Slot {
    if is_array {
        Slot::Array { len, end }
    } else {
        Slot::Object { len, end }
    }
}

fn closing(is_array: bool) -> u8 {
    if is_array {
        b']'
    } else {
        b'}'
    }
}

struct Parser<'a> {
    input: &'a [u8],
    /// `input` as text, when it is valid UTF-8 as a whole.
    text: Option<&'a str>,
    pos: usize,
    limits: Limits,
    slots: Vec<Slot>,
    decoded: String,
    /// Reused buffer for decoding one escaped string.
    scratch: Vec<u8>,
}

/// Whitespace as fastjson skips it (it also skips form feed and backspace).
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\n' | b'\r' | b'\t' | 0x0C | 0x08)
}

/// Bytes that end an unquoted key.
fn ends_unquoted_key(b: u8) -> bool {
    is_space(b) || matches!(b, b':' | b',' | b'{' | b'}' | b'[' | b']' | b'"' | b'\'')
}

impl<'a> Parser<'a> {
    fn error(&self, message: &'static str) -> JsonError {
        JsonError {
            offset: self.pos,
            message,
        }
    }

    fn peek(&self) -> Option<u8> {
        self.input.get(self.pos).copied()
    }

    fn skip_space(&mut self) {
        while let Some(&b) = self.input.get(self.pos) {
            if !is_space(b) {
                break;
            }
            self.pos += 1;
        }
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

    /// Fills `self.slots` with the document's one value; only whitespace may follow it.
    /// Iterative: `open` holds the containers being read, innermost last, so nesting costs
    /// heap (bounded by `Limits::max_depth`), never call stack.
    fn parse_document(&mut self) -> Result<(), JsonError> {
        let mut open = SPARE_STACK.try_with(Cell::take).unwrap_or_default();
        open.clear();
        let parsed = self.parse_values(&mut open);
        // During thread teardown the stack is simply freed.
        let _ = SPARE_STACK.try_with(|spare| spare.set(open));
        parsed
    }

    fn parse_values(&mut self, open: &mut Vec<Open>) -> Result<(), JsonError> {
        loop {
            self.skip_space();
            match self.peek() {
                Some(b @ (b'[' | b'{')) => {
                    if self.open_container(b == b'[', open)? {
                        continue; // its first member comes next
                    }
                }
                Some(_) => self.parse_scalar()?,
                None => return Err(self.error("unexpected end of input, expected a value")),
            }
            if !self.end_value(open)? {
                return Ok(());
            }
        }
    }

    /// Reads an opening bracket. Returns whether members follow; if not, the container was
    /// empty and is complete.
    fn open_container(&mut self, is_array: bool, open: &mut Vec<Open>) -> Result<bool, JsonError> {
        if open.len() >= self.limits.max_depth {
            return Err(self.error("nesting deeper than the limit"));
        }
        self.pos += 1;
        let at = self.slots.len();
        // An empty container ends just past its own slot; others are rewritten on closing.
        self.slots.push(container(is_array, 0, at as u32 + 1));
        self.skip_space_and_commas();
        if self.peek() == Some(closing(is_array)) {
            self.pos += 1;
            return Ok(false);
        }
        open.push(Open {
            at,
            len: 0,
            is_array,
        });
        if !is_array {
            self.parse_key()?;
        }
        Ok(true)
    }

    /// A value just ended: counts it in its container and closes every container that ends
    /// with it. Returns whether another value follows (false: the document is complete).
    fn end_value(&mut self, open: &mut Vec<Open>) -> Result<bool, JsonError> {
        while let Some(inner) = open.last_mut() {
            inner.len += 1;
            let Open { at, len, is_array } = *inner;
            let close = closing(is_array);
            self.skip_space();
            match self.peek() {
                Some(b',') => {
                    self.skip_space_and_commas();
                    if self.peek() != Some(close) {
                        if !is_array {
                            self.parse_key()?;
                        }
                        return Ok(true);
                    }
                    self.pos += 1;
                }
                Some(b) if b == close => self.pos += 1,
                Some(_) if is_array => return Err(self.error("expected ',' or ']'")),
                Some(_) => return Err(self.error("expected ',' or '}'")),
                None if is_array => return Err(self.error("unexpected end of input in array")),
                None => return Err(self.error("unexpected end of input in object")),
            }
            let end = self.slots.len() as u32;
            if let Some(slot) = self.slots.get_mut(at) {
                *slot = container(is_array, len, end);
            }
            open.pop();
        }
        self.skip_space();
        if self.pos != self.input.len() {
            return Err(self.error("unexpected characters after the value"));
        }
        Ok(false)
    }

    /// Reads a member key and the `:` after it. Keys may be double-quoted, single-quoted,
    /// or bare (identifiers and numbers, as fastjson writes `Map<Long,..>` keys).
    #[inline(always)]
    fn parse_key(&mut self) -> Result<(), JsonError> {
        match self.peek() {
            Some(q @ (b'"' | b'\'')) => self.parse_string(q)?,
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
                if !self.is_text(start, self.pos) {
                    self.pos = start;
                    return Err(self.error("invalid UTF-8 in key"));
                }
                self.slots.push(Slot::Str {
                    start: start as u32,
                    end: self.pos as u32,
                });
            }
            None => return Err(self.error("unexpected end of input, expected a key")),
        }
        self.skip_space();
        if self.peek() != Some(b':') {
            return Err(self.error("expected ':' after key"));
        }
        self.pos += 1;
        Ok(())
    }

    fn parse_scalar(&mut self) -> Result<(), JsonError> {
        let slot = match self.peek() {
            Some(q @ (b'"' | b'\'')) => return self.parse_string(q),
            Some(b'-' | b'0'..=b'9') => self.parse_number()?,
            Some(b't') => self.literal(b"true", Slot::Bool(true))?,
            Some(b'f') => self.literal(b"false", Slot::Bool(false))?,
            Some(b'n') => self.literal(b"null", Slot::Null)?,
            Some(_) => return Err(self.error("expected a value")),
            None => return Err(self.error("unexpected end of input, expected a value")),
        };
        self.slots.push(slot);
        Ok(())
    }

    fn literal(&mut self, word: &[u8], slot: Slot) -> Result<Slot, JsonError> {
        if self.input[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(slot)
        } else {
            Err(self.error("invalid literal"))
        }
    }

    fn parse_number(&mut self) -> Result<Slot, JsonError> {
        let start = self.pos;
        let mut is_float = false;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        let digits_start = self.pos;
        self.skip_digits();
        if self.pos == digits_start {
            return Err(self.error("expected digits"));
        }
        if self.peek() == Some(b'.') {
            is_float = true;
            self.pos += 1;
            let frac_start = self.pos;
            self.skip_digits();
            if self.pos == frac_start {
                return Err(self.error("expected digits after '.'"));
            }
        }
        if let Some(b'e' | b'E') = self.peek() {
            is_float = true;
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            let exp_start = self.pos;
            self.skip_digits();
            if self.pos == exp_start {
                return Err(self.error("expected digits in exponent"));
            }
        }
        let text = &self.input[start..self.pos];
        if !is_float {
            if let Some(v) = parse_i64(text) {
                return Ok(Slot::Int(v));
            }
        }
        // The slice holds only ASCII digits, signs, '.', 'e', so it is valid UTF-8.
        std::str::from_utf8(text)
            .ok()
            .and_then(|s| s.parse::<f64>().ok())
            .map(Slot::Float)
            .ok_or(JsonError {
                offset: start,
                message: "invalid number",
            })
    }

    fn skip_digits(&mut self) {
        while let Some(b'0'..=b'9') = self.input.get(self.pos) {
            self.pos += 1;
        }
    }

    /// Whether `input[start..end]` is text; both ends sit next to ASCII delimiters.
    fn is_text(&self, start: usize, end: usize) -> bool {
        match self.text {
            // Valid as a whole, so valid between two ASCII bytes.
            Some(_) => true,
            None => self
                .input
                .get(start..end)
                .is_some_and(|raw| std::str::from_utf8(raw).is_ok()),
        }
    }

    /// Reads a string quoted by `quote` (the opening quote is at `self.pos`) into a slot.
    #[inline(always)]
    fn parse_string(&mut self, quote: u8) -> Result<(), JsonError> {
        self.pos += 1;
        let start = self.pos;
        let run_end = self.scan_plain(quote);
        match self.input.get(run_end) {
            Some(&b) if b == quote => {
                // Common case: no escapes, the string is a slice of the input.
                if run_end - start > self.limits.max_string_len {
                    return Err(self.error("string longer than the limit"));
                }
                if !self.is_text(start, run_end) {
                    return Err(self.error("invalid UTF-8 in string"));
                }
                self.pos = run_end + 1;
                self.slots.push(Slot::Str {
                    start: start as u32,
                    end: run_end as u32,
                });
                Ok(())
            }
            Some(_) => self.parse_escaped_string(quote, start, run_end),
            None => {
                self.pos = self.input.len();
                Err(self.error("unterminated string"))
            }
        }
    }

    /// First index at or after `self.pos` holding `quote` or a backslash (or the input end).
    #[inline(always)]
    fn scan_plain(&self, quote: u8) -> usize {
        let rest = &self.input[self.pos..];
        self.pos + find_quote_or_backslash(rest, quote).unwrap_or(rest.len())
    }

    /// Slow path once an escape is seen: `start` is the first content byte, `run_end` the
    /// first backslash. The text is decoded into `self.decoded`.
    #[cold]
    #[inline(never)]
    fn parse_escaped_string(
        &mut self,
        quote: u8,
        start: usize,
        mut run_end: usize,
    ) -> Result<(), JsonError> {
        let mut out = std::mem::take(&mut self.scratch);
        out.clear();
        out.extend_from_slice(&self.input[start..run_end]);
        self.pos = run_end;
        let result = loop {
            if out.len() > self.limits.max_string_len {
                break Err(self.error("string longer than the limit"));
            }
            match self.input.get(self.pos) {
                None => break Err(self.error("unterminated string")),
                Some(&b) if b == quote => {
                    self.pos += 1;
                    break Ok(());
                }
                Some(_) => {
                    // A backslash: decode one escape, then copy the next plain run.
                    self.pos += 1;
                    if let Err(e) = self.decode_escape(&mut out) {
                        break Err(e);
                    }
                    run_end = self.scan_plain(quote);
                    out.extend_from_slice(&self.input[self.pos..run_end]);
                    self.pos = run_end;
                }
            }
        };
        let result = result.and_then(|()| {
            if out.len() > self.limits.max_string_len {
                return Err(self.error("string longer than the limit"));
            }
            let text = std::str::from_utf8(&out).map_err(|_| JsonError {
                offset: start,
                message: "invalid UTF-8 in string",
            })?;
            let from = self.decoded.len() as u32;
            self.decoded.push_str(text);
            self.slots.push(Slot::Decoded {
                start: from,
                end: self.decoded.len() as u32,
            });
            Ok(())
        });
        self.scratch = out;
        result
    }

    /// Decodes the escape whose backslash was just consumed.
    fn decode_escape(&mut self, out: &mut Vec<u8>) -> Result<(), JsonError> {
        let Some(&b) = self.input.get(self.pos) else {
            return Err(self.error("unterminated escape"));
        };
        self.pos += 1;
        let plain = match b {
            b'"' => b'"',
            b'\'' => b'\'',
            b'\\' => b'\\',
            b'/' => b'/',
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

    /// Completes a surrogate pair if `\uDC00`..`\uDFFF` follows; otherwise the high
    /// surrogate is unpaired and becomes U+FFFD (the following text is left unread).
    fn low_surrogate_after(&mut self, high: u32) -> char {
        let save = self.pos;
        if self.input.get(self.pos) == Some(&b'\\') && self.input.get(self.pos + 1) == Some(&b'u') {
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
        let digit = match self.input.get(self.pos) {
            Some(&b) => (b as char).to_digit(16),
            None => return Err(self.error("unterminated escape")),
        };
        match digit {
            Some(d) => {
                self.pos += 1;
                Ok(d)
            }
            None => Err(self.error("invalid hex digit in escape")),
        }
    }
}

/// Index of the first `quote` or backslash in `bytes`, eight bytes per step: a byte of a word
/// `x` is zero iff the word `(x - 0x01..) & !x & 0x80..` has its top bit set (bits above the
/// first zero byte may be set spuriously, so only the lowest set bit counts).
#[inline(always)]
pub(crate) fn find_quote_or_backslash(bytes: &[u8], quote: u8) -> Option<usize> {
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

/// Parses `-?[0-9]+` into i64; None on overflow.
fn parse_i64(text: &[u8]) -> Option<i64> {
    let (negative, digits) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, text),
    };
    if digits.is_empty() {
        return None;
    }
    // Accumulate negatively so i64::MIN fits.
    let mut v: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_sub(i64::from(d - b'0'))?;
    }
    if negative {
        Some(v)
    } else {
        v.checked_neg()
    }
}

/// Like Java's Long.parseLong: an optional single '+' or '-' sign, then digits.
fn str_as_i64(s: &str) -> Option<i64> {
    match s.strip_prefix('+') {
        Some(rest) if rest.starts_with('-') => None,
        Some(rest) => parse_i64(rest.as_bytes()),
        None => parse_i64(s.as_bytes()),
    }
}

/// A Float with no fraction. 2^63 is exactly representable; anything in [-2^63, 2^63)
/// converts losslessly.
fn float_as_i64(f: f64) -> Option<i64> {
    if f.fract() == 0.0 && f >= i64::MIN as f64 && f < -(i64::MIN as f64) {
        Some(f as i64)
    } else {
        None
    }
}

/// `"true"`/`"false"` in any case.
fn str_as_bool(s: &str) -> Option<bool> {
    if s.eq_ignore_ascii_case("true") {
        Some(true)
    } else if s.eq_ignore_ascii_case("false") {
        Some(false)
    } else {
        None
    }
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

    /// Int; a Str holding a decimal integer (`"4"`, as extFields carry numbers); a Float
    /// with no fraction.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int(v) => Some(*v),
            Value::Str(s) => str_as_i64(s),
            Value::Float(f) => float_as_i64(*f),
            _ => None,
        }
    }

    pub fn as_i32(&self) -> Option<i32> {
        self.as_i64().and_then(|v| i32::try_from(v).ok())
    }

    /// Bool; Str `"true"`/`"false"` in any case; Int 0 or 1.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            Value::Str(s) => str_as_bool(s),
            Value::Int(0) => Some(false),
            Value::Int(1) => Some(true),
            _ => None,
        }
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

    /// The text fastjson gives when a non-string is read into a String field:
    /// Str itself, Int `"3"`, Bool `"true"`, Float its shortest form, Null `"null"`,
    /// Array/Object compact JSON.
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

// ---- writers ----

/// Escape to use for ASCII byte `b` in fastjson's default escaping, or 0 for "write raw".
/// `u` means `\u00XX`.
const fn ascii_escape(b: u8) -> u8 {
    match b {
        b'"' => b'"',
        b'\\' => b'\\',
        0x08 => b'b',
        0x0C => b'f',
        b'\n' => b'n',
        b'\r' => b'r',
        b'\t' => b't',
        0..=0x1F => b'u',
        _ => 0,
    }
}

const ESCAPES: [u8; 128] = {
    let mut table = [0u8; 128];
    let mut i = 0;
    while i < 128 {
        table[i] = ascii_escape(i as u8);
        i += 1;
    }
    table
};

const HEX_UPPER: &[u8; 16] = b"0123456789ABCDEF";

fn write_u_escape(out: &mut Vec<u8>, unit: u16) {
    out.extend_from_slice(&[
        b'\\',
        b'u',
        HEX_UPPER[usize::from(unit >> 12)],
        HEX_UPPER[usize::from((unit >> 8) & 0xF)],
        HEX_UPPER[usize::from((unit >> 4) & 0xF)],
        HEX_UPPER[usize::from(unit & 0xF)],
    ]);
}

fn write_ascii_escape(out: &mut Vec<u8>, b: u8, escape: u8) {
    if escape == b'u' {
        write_u_escape(out, u16::from(b));
    } else {
        out.extend_from_slice(&[b'\\', escape]);
    }
}

/// `"..."` with fastjson's default escaping: `"` and `\` escaped, \b \f \n \r \t as such,
/// other chars < 0x20 as \u00XX; everything else (including non-ASCII UTF-8) written raw.
pub fn write_str(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let mut run_start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escape = if b < 0x80 { ESCAPES[usize::from(b)] } else { 0 };
        if escape != 0 {
            out.extend_from_slice(&bytes[run_start..i]);
            write_ascii_escape(out, b, escape);
            run_start = i + 1;
        }
    }
    out.extend_from_slice(&bytes[run_start..]);
    out.push(b'"');
}

/// `"..."` with fastjson's BrowserCompatible escaping (standard route dialect): like
/// [`write_str`], plus `/` as `\/` and every char >= 0x7F as `\uXXXX` (UTF-16 units,
/// surrogate pairs, uppercase hex).
pub fn write_str_browser(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let mut run_start = 0;
    for (i, c) in s.char_indices() {
        let code = u32::from(c);
        if code < 0x7F {
            let b = code as u8;
            let escape = if b == b'/' {
                b'/'
            } else {
                ESCAPES[usize::from(b)]
            };
            if escape != 0 {
                out.extend_from_slice(&bytes[run_start..i]);
                write_ascii_escape(out, b, escape);
                run_start = i + 1;
            }
        } else {
            out.extend_from_slice(&bytes[run_start..i]);
            let mut units = [0u16; 2];
            for &unit in c.encode_utf16(&mut units).iter() {
                write_u_escape(out, unit);
            }
            run_start = i + c.len_utf8();
        }
    }
    out.extend_from_slice(&bytes[run_start..]);
    out.push(b'"');
}

/// Writes `"key":` (key with [`write_str`] escaping).
pub fn write_key(out: &mut Vec<u8>, key: &str) {
    write_str(out, key);
    out.push(b':');
}

/// "00" to "99": two digits per step of [`write_i64`].
const DIGIT_PAIRS: &[u8; 200] = b"\
0001020304050607080910111213141516171819\
2021222324252627282930313233343536373839\
4041424344454647484950515253545556575859\
6061626364656667686970717273747576777879\
8081828384858687888990919293949596979899";

/// Decimal text of `v`, without allocating (two digits per division: numbers are most of a
/// heartbeat's reply and of a DataVersion).
pub fn write_i64(out: &mut Vec<u8>, v: i64) {
    // i64::MIN: 19 digits and the sign.
    let mut buf = [0u8; 20];
    let mut n = v.unsigned_abs();
    let mut i = buf.len();
    while n >= 100 {
        let pair = (n % 100) as usize * 2;
        n /= 100;
        i -= 2;
        buf[i..i + 2].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
    }
    if n >= 10 {
        let pair = n as usize * 2;
        i -= 2;
        buf[i..i + 2].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
    } else {
        i -= 1;
        buf[i] = b'0' + n as u8;
    }
    if v < 0 {
        i -= 1;
        buf[i] = b'-';
    }
    out.extend_from_slice(&buf[i..]);
}

pub fn write_bool(out: &mut Vec<u8>, v: bool) {
    out.extend_from_slice(if v { b"true" } else { b"false" });
}

/// Compact standard JSON for a Value (quoted keys, default string escaping). A non-finite
/// Float (only reachable from an overflowing literal such as `1e999`) is written as `null`.
pub fn write_value(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(b) => write_bool(out, *b),
        Value::Int(i) => write_i64(out, *i),
        Value::Float(f) if f.is_finite() => {
            // Debug gives the shortest text that reads back to the same f64, keeping a
            // ".0" or an exponent so it stays a valid JSON number.
            use std::io::Write;
            let _ = write!(out, "{f:?}");
        }
        Value::Float(_) => out.extend_from_slice(b"null"),
        Value::Str(s) => write_str(out, s),
        Value::Array(items) => {
            let mut array = Seq::array(out);
            for item in items {
                write_value(array.item(), item);
            }
            array.end();
        }
        Value::Object(members) => {
            let mut object = Seq::object(out);
            for (key, value) in members {
                write_value(object.key(key), value);
            }
            object.end();
        }
    }
}

/// One JSON array or object being written: it places the commas, so an encoder only says
/// where each element starts. Open it with [`Seq::array`] or [`Seq::object`], start each
/// element with [`Seq::item`] (or [`Seq::key`] / [`Seq::field`], which also write the member
/// name), write the element into the buffer they return, and close with [`Seq::end`].
pub struct Seq<'a> {
    out: &'a mut Vec<u8>,
    close: u8,
    empty: bool,
}

impl<'a> Seq<'a> {
    pub fn array(out: &'a mut Vec<u8>) -> Self {
        out.push(b'[');
        Seq {
            out,
            close: b']',
            empty: true,
        }
    }

    pub fn object(out: &'a mut Vec<u8>) -> Self {
        out.push(b'{');
        Seq {
            out,
            close: b'}',
            empty: true,
        }
    }

    /// Starts the next element (a comma unless it is the first); write it into the result.
    #[inline]
    pub fn item(&mut self) -> &mut Vec<u8> {
        if !self.empty {
            self.out.push(b',');
        }
        self.empty = false;
        self.out
    }

    /// Starts the next member, named `key` (escaped as [`write_str`] does).
    #[inline]
    pub fn key(&mut self, key: &str) -> &mut Vec<u8> {
        let out = self.item();
        write_key(out, key);
        out
    }

    /// Starts the next member, named by a bean field: plain ASCII, written without escaping.
    #[inline]
    pub fn field(&mut self, name: &str) -> &mut Vec<u8> {
        debug_assert!(name.bytes().all(|b| b.is_ascii_alphanumeric()));
        let out = self.item();
        out.push(b'"');
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b"\":");
        out
    }

    /// Writes the closing bracket.
    pub fn end(self) {
        self.out.push(self.close);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn obj(members: &[(&str, Value)]) -> Value {
        Value::Object(
            members
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        )
    }

    fn s(text: &str) -> Value {
        Value::Str(text.to_string())
    }

    fn fixtures_dir() -> PathBuf {
        crate::test_support::fixture_path("")
    }

    fn fixture(name: &str) -> Value {
        let bytes = crate::test_support::fixture(name);
        parse(&bytes).unwrap_or_else(|e| panic!("fixture {name}: {e}"))
    }

    fn browser(text: &str) -> String {
        let mut out = Vec::new();
        write_str_browser(&mut out, text);
        String::from_utf8(out).unwrap()
    }

    fn default_escaped(text: &str) -> String {
        let mut out = Vec::new();
        write_str(&mut out, text);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn standard_json_parses_to_the_expected_tree() {
        let v = parse(br#" {"a": [1, -2, 3.5, true, false, null, "x"], "b": {}} "#).unwrap();
        assert_eq!(
            v,
            obj(&[
                (
                    "a",
                    Value::Array(vec![
                        Value::Int(1),
                        Value::Int(-2),
                        Value::Float(3.5),
                        Value::Bool(true),
                        Value::Bool(false),
                        Value::Null,
                        s("x"),
                    ])
                ),
                ("b", Value::Object(vec![])),
            ])
        );
    }

    #[test]
    fn bare_numeric_and_identifier_keys_arrive_as_text() {
        let v = parse(br#"{0:"a",1:"b",-1:"c",topic:"x",$_k9:1}"#).unwrap();
        assert_eq!(
            v,
            obj(&[
                ("0", s("a")),
                ("1", s("b")),
                ("-1", s("c")),
                ("topic", s("x")),
                ("$_k9", Value::Int(1)),
            ])
        );
        assert_eq!(parse(b"{ 12 : 0 }").unwrap(), obj(&[("12", Value::Int(0))]));
    }

    #[test]
    fn single_quoted_strings_and_keys_are_accepted() {
        let v = parse(br#"{'k':'it\'s "quoted"', "d":'x'}"#).unwrap();
        assert_eq!(v, obj(&[("k", s("it's \"quoted\"")), ("d", s("x"))]));
    }

    #[test]
    fn arbitrary_commas_are_skipped() {
        assert_eq!(
            parse(b"[1,,2,]").unwrap(),
            Value::Array(vec![Value::Int(1), Value::Int(2)])
        );
        assert_eq!(parse(b"[,]").unwrap(), Value::Array(vec![]));
        assert_eq!(
            parse(b"[ , , 7]").unwrap(),
            Value::Array(vec![Value::Int(7)])
        );
        assert_eq!(
            parse(br#"{,"a":1,,"b":2,}"#).unwrap(),
            obj(&[("a", Value::Int(1)), ("b", Value::Int(2))])
        );
        assert_eq!(parse(b"{,}").unwrap(), Value::Object(vec![]));
    }

    #[test]
    fn trailing_whitespace_and_newline_are_accepted_but_garbage_is_not() {
        assert_eq!(
            parse(b"{\"code\":105}\n").unwrap(),
            obj(&[("code", Value::Int(105))])
        );
        assert_eq!(parse(b"\r\n\t 1 \r\n").unwrap(), Value::Int(1));
        assert!(parse(b"{} x").is_err());
        assert!(parse(b"{}{}").is_err());
        assert!(parse(b"1 2").is_err());
        assert!(parse(b"{}\0").is_err());
    }

    #[test]
    fn escapes_decode_to_their_characters() {
        let v = parse(br#""q\"b\\s\/n\nr\rt\tb\bf\f u\u0041\u00e9\u4E2D""#).unwrap();
        assert_eq!(v, s("q\"b\\s/n\nr\rt\tb\u{8}f\u{c} uA\u{e9}\u{4e2d}"));
        assert_eq!(parse(br#""\x41""#).unwrap(), s("A"));
        assert!(parse(br#""\q""#).is_err());
        assert!(parse(br#""\u12G4""#).is_err());
    }

    #[test]
    fn surrogate_pairs_combine_and_unpaired_surrogates_become_replacement_chars() {
        assert_eq!(parse(br#""\uD83D\uDE00""#).unwrap(), s("\u{1F600}"));
        assert_eq!(parse(br#""\ud83d\ude00!""#).unwrap(), s("\u{1F600}!"));
        assert_eq!(parse(br#""a\uD83Db""#).unwrap(), s("a\u{FFFD}b"));
        assert_eq!(parse(br#""\uDE00""#).unwrap(), s("\u{FFFD}"));
        assert_eq!(parse(br#""\uD83D\u0041""#).unwrap(), s("\u{FFFD}A"));
        assert_eq!(parse(br#""\uD83D\n""#).unwrap(), s("\u{FFFD}\n"));
        assert_eq!(parse(br#""\uD83D""#).unwrap(), s("\u{FFFD}"));
    }

    #[test]
    fn raw_utf8_is_kept_and_invalid_utf8_is_an_error() {
        assert_eq!(parse("\"生产\"".as_bytes()).unwrap(), s("生产"));
        assert_eq!(
            parse("{生产:1}".as_bytes()).unwrap(),
            obj(&[("生产", Value::Int(1))])
        );
        assert!(parse(b"\"\xff\"").is_err());
        assert!(parse(b"\"a\\n\xc3\"").is_err());
        assert!(parse(b"{\xff:1}").is_err());
        assert!(parse(b"\xff").is_err());
    }

    #[test]
    fn nesting_up_to_the_depth_limit_parses_and_beyond_it_fails() {
        let limits = Limits {
            max_depth: 4,
            max_string_len: 100,
        };
        assert!(parse_with(b"[[[[1]]]]", &limits).is_ok());
        let err = parse_with(b"[[[[[1]]]]]", &limits).unwrap_err();
        assert_eq!(err.offset, 4);
        assert!(parse_with(br#"{"a":{"b":{"c":{"d":{}}}}}"#, &limits).is_err());
        // The default limit holds against a deep hostile document without exhausting the stack.
        let deep = vec![b'['; 1_000_000];
        assert!(parse(&deep).is_err());
        let ok_depth = format!("{}{}", "[".repeat(64), "]".repeat(64));
        assert!(parse(ok_depth.as_bytes()).is_ok());
    }

    #[test]
    fn strings_and_keys_longer_than_the_limit_fail() {
        let limits = Limits {
            max_depth: 8,
            max_string_len: 4,
        };
        assert_eq!(parse_with(br#""abcd""#, &limits).unwrap(), s("abcd"));
        assert!(parse_with(br#""abcde""#, &limits).is_err());
        assert!(parse_with(br#""ab\ncde""#, &limits).is_err());
        assert!(parse_with(br#"{"abcde":1}"#, &limits).is_err());
        assert!(parse_with(br#"{abcde:1}"#, &limits).is_err());
        assert!(parse_with(br#"["ab\u0041\u0042\u0043"]"#, &limits).is_err());
    }

    #[test]
    fn numbers_are_ints_when_they_fit_and_floats_otherwise() {
        assert_eq!(parse(b"9223372036854775807").unwrap(), Value::Int(i64::MAX));
        assert_eq!(
            parse(b"-9223372036854775808").unwrap(),
            Value::Int(i64::MIN)
        );
        assert_eq!(
            parse(b"9223372036854775808").unwrap(),
            Value::Float(-(i64::MIN as f64))
        );
        assert_eq!(parse(b"1e3").unwrap(), Value::Float(1000.0));
        assert_eq!(parse(b"-0.25E-2").unwrap(), Value::Float(-0.0025));
        assert!(parse(b"-").is_err());
        assert!(parse(b"1.").is_err());
        assert!(parse(b"1e").is_err());
        assert!(parse(b".5").is_err());
    }

    #[test]
    fn every_truncation_of_a_valid_document_is_an_error_not_a_panic() {
        let doc = br#"{"brokerAddrs":{0:"127.0.0.1:10911"},'s':"a\u00e9\uD83D\uDE00\n",n:-1.5e3,l:[true,false,null,,]}"#;
        assert!(parse(doc).is_ok());
        for end in 0..doc.len() {
            assert!(parse(&doc[..end]).is_err(), "prefix of {end} bytes parsed");
        }
    }

    #[test]
    fn garbage_input_returns_errors_without_panicking() {
        let cases: &[&[u8]] = &[
            b"",
            b" ",
            b"}",
            b"]",
            b"{",
            b"[",
            b":",
            b",",
            b"{\"a\"}",
            b"{\"a\":}",
            b"{\"a\" 1}",
            b"[1 2]",
            b"{\"a\":1 \"b\":2}",
            b"tru",
            b"nul",
            b"falsey",
            b"undefined",
            b"\"",
            b"'",
            b"\"\\",
            b"\"\\u12",
            b"{:1}",
            b"{a:1",
            b"[\"a\",",
            b"{'a':'b'",
            b"+1",
            b"[}",
            b"{]",
            b"{\"a\":1]",
            b"[1}",
        ];
        for case in cases {
            assert!(
                parse(case).is_err(),
                "{:?} parsed",
                String::from_utf8_lossy(case)
            );
        }
        // Deterministic pseudo-random byte soup over the dialect's alphabet.
        let alphabet = b"{}[]:,\"'\\u0019-.eE tfn \xc3\xa9\xff";
        let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..20_000 {
            let mut doc = Vec::new();
            for _ in 0..(state % 24) {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                doc.push(alphabet[(state % alphabet.len() as u64) as usize]);
            }
            let _ = parse(&doc);
        }
    }

    #[test]
    fn get_takes_the_last_duplicate() {
        let v = parse(br#"{"a":1,"b":2,"a":3}"#).unwrap();
        assert_eq!(v.get("a"), Some(&Value::Int(3)));
        assert_eq!(v.get("c"), None);
        assert_eq!(Value::Int(1).get("a"), None);
    }

    #[test]
    fn write_i64_writes_what_display_writes() {
        let mut values = vec![
            0,
            1,
            9,
            10,
            99,
            100,
            101,
            999,
            1000,
            i64::MIN,
            i64::MAX,
            -1,
            -10,
        ];
        let mut x: i64 = 1;
        while let Some(next) = x.checked_mul(7) {
            values.extend([x, x - 1, x + 1, -x, 1 - x]);
            x = next;
        }
        for p in 1..19 {
            let ten = 10i64.pow(p);
            values.extend([ten, ten - 1, ten + 1, -ten, 1 - ten]);
        }
        for v in values {
            let mut out = vec![b'x'];
            write_i64(&mut out, v);
            assert_eq!(out, format!("x{v}").into_bytes());
        }
    }

    #[test]
    fn accessors_coerce_like_fastjson() {
        assert_eq!(s("4").as_i64(), Some(4));
        assert_eq!(s("-4").as_i64(), Some(-4));
        assert_eq!(s("+4").as_i64(), Some(4));
        assert_eq!(s("+-4").as_i64(), None);
        assert_eq!(s("4.5").as_i64(), None);
        assert_eq!(s("").as_i64(), None);
        assert_eq!(Value::Float(12.0).as_i64(), Some(12));
        assert_eq!(Value::Float(12.5).as_i64(), None);
        assert_eq!(Value::Float(1e300).as_i64(), None);
        assert_eq!(Value::Int(1 << 40).as_i32(), None);
        assert_eq!(s("-7").as_i32(), Some(-7));
        assert_eq!(s("TRUE").as_bool(), Some(true));
        assert_eq!(s("False").as_bool(), Some(false));
        assert_eq!(Value::Int(1).as_bool(), Some(true));
        assert_eq!(Value::Int(0).as_bool(), Some(false));
        assert_eq!(Value::Int(2).as_bool(), None);
        assert_eq!(s("x").as_str(), Some("x"));
        assert_eq!(Value::Int(1).as_str(), None);
        assert!(Value::Null.is_null());
        assert_eq!(
            parse(b"[1]").unwrap().as_array(),
            Some(&[Value::Int(1)][..])
        );
        assert!(parse(b"{}").unwrap().as_object().is_some());
    }

    #[test]
    fn to_text_renders_non_strings_as_fastjson_would() {
        assert_eq!(s("a\"b").to_text(), "a\"b");
        assert_eq!(Value::Int(3).to_text(), "3");
        assert_eq!(Value::Bool(true).to_text(), "true");
        assert_eq!(Value::Null.to_text(), "null");
        assert_eq!(Value::Float(1.5).to_text(), "1.5");
        assert_eq!(
            parse(br#"{0:"a",'b':[1,"x"]}"#).unwrap().to_text(),
            r#"{"0":"a","b":[1,"x"]}"#
        );
    }

    #[test]
    fn written_values_read_back_unchanged() {
        let v = parse("{'k':[1,-2.5,\"é\\u0001\\\"\",null,{0:true}]}".as_bytes()).unwrap();
        let mut out = Vec::new();
        write_value(&mut out, &v);
        assert_eq!(parse(&out).unwrap(), v);
    }

    #[test]
    fn write_str_escapes_quotes_backslashes_and_controls_only() {
        assert_eq!(default_escaped("a\"b\\c/d"), r#""a\"b\\c/d""#);
        assert_eq!(
            default_escaped("\u{8}\u{c}\n\r\t\u{1}\u{1f}"),
            r#""\b\f\n\r\t\u0001\u001F""#
        );
        assert_eq!(default_escaped("é生产😀\u{7f}"), "\"é生产😀\u{7f}\"");
        assert_eq!(default_escaped(""), "\"\"");
    }

    #[test]
    fn write_str_browser_escapes_slash_and_everything_from_0x7f() {
        assert_eq!(browser("10.0.0.1/x"), r#""10.0.0.1\/x""#);
        assert_eq!(browser("é"), r#""\u00E9""#);
        assert_eq!(browser("😀"), r#""\uD83D\uDE00""#);
        assert_eq!(browser("生产"), r#""\u751F\u4EA7""#);
        assert_eq!(browser("\u{7f}~"), r#""\u007F~""#);
        assert_eq!(browser("a\"\\\n\u{1}"), r#""a\"\\\n\u0001""#);
        // What the browser escaper writes reads back as the original text.
        let text = "x/é😀\"\u{1}生";
        assert_eq!(parse(browser(text).as_bytes()).unwrap(), s(text));
    }

    #[test]
    fn seq_places_commas_between_elements_only() {
        let mut out = Vec::new();
        let mut object = Seq::object(&mut out);
        Seq::array(object.field("empty")).end();
        let mut items = Seq::array(object.key("k\"ey"));
        write_i64(items.item(), 1);
        write_bool(items.item(), true);
        items.end();
        Seq::object(object.field("last")).end();
        object.end();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"empty":[],"k\"ey":[1,true],"last":{}}"#
        );
    }

    #[test]
    fn write_key_and_numbers_are_plain_text() {
        let mut out = Vec::new();
        write_key(&mut out, "brokerAddrs");
        write_i64(&mut out, 0);
        out.push(b',');
        write_i64(&mut out, i64::MIN);
        out.push(b',');
        write_i64(&mut out, i64::MAX);
        out.push(b',');
        write_i64(&mut out, -42);
        out.push(b',');
        write_bool(&mut out, false);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "\"brokerAddrs\":0,-9223372036854775808,9223372036854775807,-42,false"
        );
    }

    #[test]
    fn legacy_cluster_info_fixture_parses_with_numeric_broker_ids() {
        let v = fixture("cluster_info_fastjson_legacy.json");
        let broker = v
            .get("brokerAddrTable")
            .and_then(|t| t.get("broker-a"))
            .unwrap();
        assert_eq!(
            broker.get("brokerAddrs").unwrap(),
            &obj(&[("0", s("127.0.0.1:10911"))])
        );
        assert_eq!(
            broker.get("cluster").and_then(Value::as_str),
            Some("DefaultCluster")
        );
        assert_eq!(
            broker.get("enableActingMaster").and_then(Value::as_bool),
            Some(false)
        );
        let clusters = v
            .get("clusterAddrTable")
            .and_then(|t| t.get("DefaultCluster"))
            .unwrap();
        assert_eq!(clusters, &Value::Array(vec![s("broker-a")]));
    }

    #[test]
    fn legacy_topic_route_fixture_parses_with_numeric_keys() {
        let v = fixture("topic_route_data_fastjson_legacy.json");
        let broker = &v.get("brokerDatas").and_then(Value::as_array).unwrap()[0];
        assert_eq!(
            broker.get("brokerName").and_then(Value::as_str),
            Some("interopBroker")
        );
        assert_eq!(
            broker.get("brokerAddrs").and_then(|a| a.get("0")),
            Some(&s("127.0.0.1:10911"))
        );
        let queue = &v.get("queueDatas").and_then(Value::as_array).unwrap()[0];
        assert_eq!(queue.get("perm").and_then(Value::as_i32), Some(6));
        assert_eq!(queue.get("writeQueueNums").and_then(Value::as_i32), Some(4));
        let mapping = v
            .get("topicQueueMappingByBroker")
            .and_then(|m| m.get("interopBroker"))
            .unwrap();
        assert_eq!(
            mapping.get("currIdMap").unwrap(),
            &obj(&[("0", Value::Int(0))])
        );
        assert_eq!(mapping.get("epoch").and_then(Value::as_i64), Some(1));
        assert_eq!(mapping.get("scope").and_then(Value::as_str), Some("ScopeA"));
        assert_eq!(v.get("filterServerTable"), Some(&Value::Object(vec![])));
    }

    #[test]
    fn kv_config_fixture_parses_with_non_ascii_value() {
        let v = fixture("kvconfig_file_java.json");
        let table = v.get("configTable").unwrap();
        assert_eq!(
            table
                .get("ORDER_TOPIC_CONFIG")
                .and_then(|n| n.get("orders-eu")),
            Some(&s("broker-a:4;broker-b:4"))
        );
        assert_eq!(
            table
                .get("PROJECT_CONFIG")
                .and_then(|n| n.get("tenant-unicode")),
            Some(&s("生产"))
        );
    }

    #[test]
    fn zone_route_fixture_parses_with_nulls() {
        let v = fixture("zone_route_cases.json");
        let brokers = v
            .get("route")
            .and_then(|r| r.get("brokerDatas"))
            .and_then(Value::as_array)
            .unwrap();
        assert_eq!(brokers.len(), 5);
        assert!(brokers[2].get("zoneName").unwrap().is_null());
        assert_eq!(
            brokers[4]
                .get("enableActingMaster")
                .and_then(Value::as_bool),
            Some(true)
        );
        let cases = v.get("cases").and_then(Value::as_array).unwrap();
        assert_eq!(cases.len(), 8);
        assert_eq!(cases[0].get("zoneMode"), Some(&Value::Null));
    }

    #[test]
    fn delete_topic_fixtures_parse() {
        for name in [
            "delete_topic_in_namesrv_216_json.json",
            "delete_topic_in_namesrv_216_rocketmq.json",
        ] {
            let v = fixture(name);
            assert_eq!(v.get("requestCodeValue").and_then(Value::as_i32), Some(216));
            let ext = v.get("canonicalExtFields").unwrap();
            assert_eq!(ext.get("topic").and_then(Value::as_str), Some("TopicA"));
            assert_eq!(ext.get("lo").and_then(Value::as_bool), Some(true));
            assert_eq!(
                v.get("inputFields").and_then(|f| f.get("oway")),
                Some(&Value::Bool(false))
            );
        }
    }

    #[test]
    fn real_4x_register_broker_body_parses_with_expected_values() {
        let v = fixture("third_party/register_broker_103_body_v4.json");
        assert_eq!(v.get("filterServerList"), Some(&Value::Array(vec![])));
        let wrapper = v.get("topicConfigSerializeWrapper").unwrap();
        let data_version = wrapper.get("dataVersion").unwrap();
        assert_eq!(
            data_version.get("counter").and_then(Value::as_i64),
            Some(293)
        );
        assert_eq!(
            data_version.get("timestamp").and_then(Value::as_i64),
            Some(1_645_882_625_002)
        );
        assert_eq!(data_version.get("stateVersion"), None);
        let topics = wrapper
            .get("topicConfigTable")
            .and_then(Value::as_object)
            .unwrap();
        assert_eq!(topics.len(), 16);
        let test = wrapper
            .get("topicConfigTable")
            .and_then(|t| t.get("TopicTest"))
            .unwrap();
        assert_eq!(
            test.get("topicName").and_then(Value::as_str),
            Some("TopicTest")
        );
        assert_eq!(test.get("readQueueNums").and_then(Value::as_i32), Some(8));
        assert_eq!(test.get("perm").and_then(Value::as_i32), Some(6));
        assert_eq!(test.get("order").and_then(Value::as_bool), Some(false));
        let header = fixture("third_party/register_broker_103_extfields_v4.json");
        assert_eq!(
            header.get("bodyCrc32").and_then(Value::as_i64),
            Some(1_794_280_071)
        );
        assert_eq!(
            header.get("compressed").and_then(Value::as_bool),
            Some(false)
        );
    }

    #[test]
    fn every_json_fixture_parses() {
        let mut count = 0;
        for dir in [fixtures_dir(), fixtures_dir().join("third_party")] {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.extension().is_some_and(|e| e == "json") {
                    let bytes = std::fs::read(&path).unwrap();
                    assert!(parse(&bytes).is_ok(), "{} did not parse", path.display());
                    count += 1;
                }
            }
        }
        assert!(count >= 8, "found only {count} fixtures");
    }

    /// A 5.x RegisterBrokerBody (docs/protocol.md §4.1) with `topics` topics and a few
    /// static-topic mappings with bare integer `currIdMap` keys.
    fn synthetic_register_body(topics: usize) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(b"{\"filterServerList\":[],\"topicConfigSerializeWrapper\":{");
        out.extend_from_slice(
            b"\"dataVersion\":{\"counter\":12,\"stateVersion\":0,\"timestamp\":1700000000000},",
        );
        out.extend_from_slice(b"\"mappingDataVersion\":{\"counter\":0,\"stateVersion\":0,\"timestamp\":1700000000000},");
        out.extend_from_slice(b"\"topicConfigTable\":{");
        for i in 0..topics {
            if i > 0 {
                out.push(b',');
            }
            let name = format!("BenchmarkTopic_{i:05}_with_a_longer_name");
            write_key(&mut out, &name);
            out.extend_from_slice(
                b"{\"attributes\":{},\"order\":false,\"perm\":6,\"readQueueNums\":8,",
            );
            out.extend_from_slice(b"\"topicFilterType\":\"SINGLE_TAG\",\"topicName\":");
            write_str(&mut out, &name);
            out.extend_from_slice(b",\"topicSysFlag\":0,\"writeQueueNums\":8}");
        }
        out.extend_from_slice(
            b"},\"topicQueueMappingDetailMap\":{},\"topicQueueMappingInfoMap\":{",
        );
        out.extend_from_slice(
            b"\"StaticT\":{\"bname\":\"broker-a\",\"currIdMap\":{0:0,1:1},\"dirty\":false,\"epoch\":1700000000000,\"scope\":\"__global__\",\"topic\":\"StaticT\",\"totalQueues\":8}",
        );
        out.extend_from_slice(b"}}}");
        out
    }

    #[test]
    fn synthetic_5x_register_body_parses_with_all_topics() {
        let body = synthetic_register_body(1000);
        let v = parse(&body).unwrap();
        let wrapper = v.get("topicConfigSerializeWrapper").unwrap();
        let topics = wrapper
            .get("topicConfigTable")
            .and_then(Value::as_object)
            .unwrap();
        assert_eq!(topics.len(), 1000);
        assert_eq!(
            topics[999].1.get("topicName").and_then(Value::as_str),
            Some("BenchmarkTopic_00999_with_a_longer_name")
        );
        let mapping = wrapper
            .get("topicQueueMappingInfoMap")
            .and_then(|m| m.get("StaticT"))
            .unwrap();
        assert_eq!(
            mapping.get("currIdMap").and_then(|c| c.get("1")),
            Some(&Value::Int(1))
        );
    }

    // ---- borrowed documents ----

    fn doc(input: &[u8]) -> Document<'_> {
        parse_borrowed(input, &Limits::default()).unwrap()
    }

    /// Whether `s` points into `input` (a borrowed, not a decoded, string).
    fn borrows_from(s: &str, input: &[u8]) -> bool {
        let range = input.as_ptr_range();
        range.contains(&s.as_ptr()) && s.len() <= input.len()
    }

    #[test]
    fn borrowed_strings_without_escapes_point_into_the_input() {
        let input = br#"{"plain":"text","esc\u0041ped":"a\nb",bare:'single'}"#;
        let d = doc(input);
        let members: Vec<(&str, ValueRef<'_>)> = d.root().members().unwrap().collect();
        let keys: Vec<&str> = members.iter().map(|(k, _)| *k).collect();
        assert_eq!(keys, ["plain", "escAped", "bare"]);
        assert!(borrows_from(keys[0], input));
        assert!(!borrows_from(keys[1], input));
        assert!(borrows_from(keys[2], input));
        let text = members[0].1.as_str().unwrap();
        assert_eq!(text, "text");
        assert!(borrows_from(text, input));
        assert_eq!(members[1].1.as_str(), Some("a\nb"));
        assert_eq!(members[2].1.as_str(), Some("single"));
        assert!(borrows_from(members[2].1.as_str().unwrap(), input));
    }

    #[test]
    fn borrowed_dialect_cases_match_the_owned_tree() {
        let cases: &[&[u8]] = &[
            br#"{0:"a",1:"b",-1:"c",topic:"x",$_k9:1}"#,
            b"{ 12 : 0 }",
            br#"{'k':'it\'s "quoted"', "d":'x'}"#,
            b"[1,,2,]",
            br#"{,"a":1,,"b":2,}"#,
            br#""q\"b\\s\/n\nr\rt\tb\bf\f u\u0041\u00e9\u4E2D""#,
            br#""\x41""#,
            br#"["\uD83D\uDE00","\ud83d\ude00!","a\uD83Db","\uDE00","\uD83D\u0041","\uD83D\n","\uD83D"]"#,
            "{生产:\"生产\"}".as_bytes(),
            b"[9223372036854775807,-9223372036854775808,9223372036854775808,1e3,-0.25E-2]",
            b"\xEF\xBB\xBF {\"bom\":true} \n",
            br#"{"a":[1,[2,{"x":3}],[],{},4],"b":{"c":{}},"d":null,"e":"",'f':[[[]]]}"#,
        ];
        for case in cases {
            let owned = parse(case).unwrap();
            let d = doc(case);
            assert_eq!(
                d.root().to_value(),
                owned,
                "{}",
                String::from_utf8_lossy(case)
            );
            // Walking members/items by hand gives the same tree as to_value.
            assert_eq!(
                rebuild(d.root()),
                owned,
                "{}",
                String::from_utf8_lossy(case)
            );
        }
    }

    /// Rebuilds an owned tree through the public ValueRef API only.
    fn rebuild(v: ValueRef<'_>) -> Value {
        if let Some(members) = v.members() {
            assert_eq!(members.len(), members.clone().count());
            return Value::Object(members.map(|(k, v)| (k.to_owned(), rebuild(v))).collect());
        }
        if let Some(items) = v.items() {
            assert_eq!(items.len(), items.clone().count());
            return Value::Array(items.map(rebuild).collect());
        }
        let owned = v.to_value();
        // The scalar accessors agree with the owned tree's.
        assert_eq!(v.as_str(), owned.as_str());
        assert_eq!(v.as_i64(), owned.as_i64());
        assert_eq!(v.as_i32(), owned.as_i32());
        assert_eq!(v.as_bool(), owned.as_bool());
        assert_eq!(v.is_null(), owned.is_null());
        assert_eq!(v.to_text(), owned.to_text());
        owned
    }

    #[test]
    fn borrowed_accessors_coerce_like_the_owned_tree() {
        let d = doc(br#"["4","-4","+4","+-4","4.5","",12.0,12.5,1e300,1099511627776,"-7","TRUE","False",1,0,2,true,null,"x",[1],{"a":1}]"#);
        let items: Vec<ValueRef<'_>> = d.root().items().unwrap().collect();
        assert_eq!(items.len(), 21);
        for item in &items {
            rebuild(*item);
        }
        assert_eq!(items[0].as_i64(), Some(4));
        assert_eq!(items[3].as_i64(), None);
        assert_eq!(items[6].as_i64(), Some(12));
        assert_eq!(items[9].as_i32(), None);
        assert_eq!(items[11].as_bool(), Some(true));
        assert_eq!(items[15].as_bool(), None);
        assert_eq!(items[19].to_text(), "[1]");
        assert_eq!(items[20].to_text(), r#"{"a":1}"#);
        assert!(items[20].as_str().is_none() && items[20].items().is_none());
        assert!(items[19].members().is_none());
    }

    #[test]
    fn get_and_get_many_take_the_last_duplicate_and_skip_nested_containers() {
        let d = doc(br#"{"a":1,"n":{"a":9,"b":[{"a":8}]},"b":2,"a":3,"z":null}"#);
        let root = d.root();
        assert_eq!(root.get("a").and_then(|v| v.as_i64()), Some(3));
        assert_eq!(root.get("c").map(|v| v.to_value()), None);
        assert!(root.get("z").unwrap().is_null());
        let [a, b, n, c] = root.get_many(["a", "b", "n", "c"]);
        assert_eq!(a.and_then(|v| v.as_i64()), Some(3));
        assert_eq!(b.and_then(|v| v.as_i64()), Some(2));
        assert_eq!(
            n.and_then(|n| n.get("b"))
                .and_then(|b| b.items())
                .map(|items| items.len()),
            Some(1)
        );
        assert!(c.is_none());
        // Not an object: nothing found.
        let d = doc(b"[1]");
        assert!(d.root().get("a").is_none());
        assert!(d.root().get_many(["a", "b"]).iter().all(Option::is_none));
    }

    #[test]
    fn borrowed_limits_and_errors_match_the_owned_parser() {
        let limits = Limits {
            max_depth: 4,
            max_string_len: 4,
        };
        assert!(parse_borrowed(b"[[[[1]]]]", &limits).is_ok());
        assert_eq!(
            parse_borrowed(b"[[[[[1]]]]]", &limits).unwrap_err().offset,
            4
        );
        assert!(parse_borrowed(br#"["abcd"]"#, &limits).is_ok());
        assert!(parse_borrowed(br#"["abcde"]"#, &limits).is_err());
        assert!(parse_borrowed(br#"{abcde:1}"#, &limits).is_err());
        assert!(parse_borrowed(br#"["ab\u0041\u0042\u0043"]"#, &limits).is_err());
        let deep = vec![b'['; 1_000_000];
        assert!(parse_borrowed(&deep, &Limits::default()).is_err());
        // Invalid UTF-8 is reported where the string or key starts, or as stray bytes.
        let err = |input: &[u8]| parse_borrowed(input, &Limits::default()).unwrap_err();
        assert_eq!(
            err(b"{} \xff"),
            JsonError {
                offset: 3,
                message: "unexpected characters after the value"
            }
        );
        assert_eq!(
            err(b"[\"ab\xff\"]"),
            JsonError {
                offset: 2,
                message: "invalid UTF-8 in string"
            }
        );
        assert_eq!(
            err(b"[\"a\\n\xc3\"]"),
            JsonError {
                offset: 2,
                message: "invalid UTF-8 in string"
            }
        );
        assert_eq!(
            err(b"{\xff:1}"),
            JsonError {
                offset: 1,
                message: "invalid UTF-8 in key"
            }
        );
    }

    #[test]
    fn borrowed_garbage_and_truncations_are_errors_never_panics() {
        let doc_bytes = br#"{"brokerAddrs":{0:"127.0.0.1:10911"},'s':"a\u00e9\uD83D\uDE00\n",n:-1.5e3,l:[true,false,null,,]}"#;
        for end in 0..doc_bytes.len() {
            assert!(parse_borrowed(&doc_bytes[..end], &Limits::default()).is_err());
        }
        // Random byte soup over the dialect's alphabet, and valid documents with a few bytes
        // replaced: whatever parses can be walked completely.
        let alphabet = b"{}[]:,\"'\\u0019-.eE tfn \xc3\xa9\xff";
        let mut state: u64 = 0x2545_F491_4F6C_DD1D;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut parsed = 0;
        for round in 0..20_000 {
            let input: Vec<u8> = if round % 2 == 0 {
                (0..next() % 24)
                    .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
                    .collect()
            } else {
                let mut input = doc_bytes.to_vec();
                for _ in 0..1 + next() % 2 {
                    let at = (next() % input.len() as u64) as usize;
                    input[at] = alphabet[(next() % alphabet.len() as u64) as usize];
                }
                input
            };
            let result = parse_borrowed(&input, &Limits::default());
            if let Ok(d) = &result {
                rebuild(d.root());
                parsed += 1;
            }
        }
        assert!(parsed > 100, "only {parsed} inputs parsed");
    }

    #[test]
    fn slot_buffers_are_reused_safely_across_documents() {
        let small = doc(br#"{"a":[1,2,3]}"#);
        let big_body = synthetic_register_body(50);
        let big = doc(&big_body);
        // Two live documents never share a buffer.
        assert_eq!(small.root().to_value(), parse(br#"{"a":[1,2,3]}"#).unwrap());
        assert_eq!(big.root().to_value(), parse(&big_body).unwrap());
        drop(big);
        drop(small);
        // A buffer larger than the spare limit is not kept, and nothing else breaks.
        let huge: Vec<u8> = format!("[{}1]", "1,".repeat(MAX_SPARE_SLOTS + 10)).into_bytes();
        let d = doc(&huge);
        assert_eq!(d.root().items().unwrap().len(), MAX_SPARE_SLOTS + 11);
        drop(d);
        for _ in 0..3 {
            let d = doc(&big_body);
            let table = d
                .root()
                .get("topicConfigSerializeWrapper")
                .and_then(|w| w.get("topicConfigTable"))
                .and_then(|t| t.members())
                .unwrap();
            assert_eq!(table.len(), 50);
        }
        // A failed parse hands its buffers back too, its stack of open containers left
        // half full: the next document starts from an empty one.
        assert!(parse_borrowed(b"[1,2,", &Limits::default()).is_err());
        assert!(parse_borrowed(br#"{"a":[{"b":[1"#, &Limits::default()).is_err());
        assert_eq!(
            doc(br#"{"x":{}}"#).root().to_value(),
            obj(&[("x", Value::Object(vec![]))])
        );
        assert_eq!(
            doc(b"[7]").root().to_value(),
            Value::Array(vec![Value::Int(7)])
        );
    }

    #[test]
    fn word_at_a_time_scan_finds_the_first_quote_or_backslash() {
        // Bytes around the targets stress the zero-byte trick (0x00, 0x01, bytes one off the
        // targets, high bytes).
        let fillers = [
            b'a',
            0x00,
            0x01,
            b'!',
            b'#',
            b'[',
            b']',
            0x80,
            0xff,
            0x22 ^ 0x80,
        ];
        for len in 0..24 {
            for &filler in &fillers {
                let base = vec![filler; len];
                assert_eq!(find_quote_or_backslash(&base, b'"'), None, "{base:?}");
                for at in 0..len {
                    for (target, quote) in [(b'"', b'"'), (b'\\', b'"'), (b'\'', b'\'')] {
                        let mut bytes = base.clone();
                        bytes[at] = target;
                        if at + 1 < len {
                            bytes[at + 1] = b'"';
                        }
                        assert_eq!(
                            find_quote_or_backslash(&bytes, quote),
                            Some(at),
                            "{bytes:?}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn synthetic_5x_register_body_reads_through_the_borrowed_path() {
        let body = synthetic_register_body(1000);
        let d = doc(&body);
        let wrapper = d.root().get("topicConfigSerializeWrapper").unwrap();
        let topics: Vec<(&str, ValueRef<'_>)> = wrapper
            .get("topicConfigTable")
            .and_then(|t| t.members())
            .unwrap()
            .collect();
        assert_eq!(topics.len(), 1000);
        let (key, last) = topics[999];
        assert_eq!(key, "BenchmarkTopic_00999_with_a_longer_name");
        assert!(borrows_from(key, &body));
        let [name, perm] = last.get_many(["topicName", "perm"]);
        assert_eq!(name.and_then(|n| n.as_str()), Some(key));
        assert_eq!(perm.and_then(|p| p.as_i32()), Some(6));
        let curr = wrapper
            .get("topicQueueMappingInfoMap")
            .and_then(|m| m.get("StaticT"))
            .and_then(|m| m.get("currIdMap"))
            .unwrap();
        let ids: Vec<(&str, i64)> = curr
            .members()
            .unwrap()
            .map(|(k, v)| (k, v.as_i64().unwrap()))
            .collect();
        assert_eq!(ids, [("0", 0), ("1", 1)]);
    }
}
