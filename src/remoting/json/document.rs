//! [`Document`]: a whole value read into one flat Vec of 16-byte slots in document order
//! (unescaped strings are slices of the input), so a 1,000-member object costs no allocation
//! per member; [`ValueRef`] reads it with fastjson's coercions.

use super::reader::{Cursor, Field, Scalar};
use super::{JsonError, Value};
use std::borrow::Cow;
use std::cell::Cell;
use std::fmt;

thread_local! {
    /// The slot buffer of the last document dropped on this thread, reused by the next parse
    /// (the loop reads one document at a time) instead of allocating and page-faulting.
    static SPARE_SLOTS: Cell<Vec<Slot>> = const { Cell::new(Vec::new()) };
}

/// Largest buffer kept for reuse (4 MiB of slots: a body of about 25,000 topics).
pub(super) const MAX_SPARE_SLOTS: usize = 1 << 18;

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

/// One element of a parsed document (a "tape"): a container's slot is followed by its items
/// (an object's as key, value), and its `end` steps over it. u32 offsets keep a slot 16 bytes.
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

/// A parsed document that borrows its unescaped strings from the input.
#[derive(Debug, Clone)]
pub struct Document<'a> {
    /// The value's text in the input (slot offsets count from its start).
    text: &'a str,
    slots: Vec<Slot>,
    /// Text of every string that had escapes, back to back.
    decoded: String,
}

impl<'a> Document<'a> {
    /// The slot of a string the cursor read, for a document whose text starts at `base`.
    fn string_slot(&mut self, c: &Cursor<'a>, base: usize, s: Cow<'a, str>) -> Slot {
        let at = |offset: usize| offset as u32;
        match s {
            Cow::Borrowed(s) => {
                let (start, end) = c.span_of(s);
                let (start, end) = (at(start - base), at(end - base));
                Slot::Str { start, end }
            }
            Cow::Owned(s) => {
                let start = at(self.decoded.len());
                self.decoded.push_str(&s);
                let end = at(self.decoded.len());
                Slot::Decoded { start, end }
            }
        }
    }

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

/// A value inside a [`Document`]: a copyable handle with [`Value`]'s reading methods.
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

    /// The string, borrowed from the input when it had no escapes; None for non-strings.
    pub fn as_str(&self) -> Option<&'d str> {
        let doc: &'d Document<'d> = self.doc;
        doc.text_of(self.slot())
    }

    /// The value when it is not a container.
    fn scalar(&self) -> Option<Scalar<'d>> {
        Some(match self.slot() {
            Slot::Null => Scalar::Null,
            Slot::Bool(b) => Scalar::Bool(b),
            Slot::Int(v) => Scalar::Int(v),
            Slot::Float(f) => Scalar::Float(f),
            Slot::Str { .. } | Slot::Decoded { .. } => Scalar::Str(Cow::Borrowed(self.as_str()?)),
            Slot::Array { .. } | Slot::Object { .. } => return None,
        })
    }

    /// The members of an object, in input order (duplicates included); None otherwise.
    pub fn members(&self) -> Option<Members<'d>> {
        match self.slot() {
            Slot::Object { len, .. } => Some(Members(Items {
                doc: self.doc,
                at: self.at + 1,
                remaining: 2 * len as usize,
            })),
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

    /// `[get(keys[0]), get(keys[1]), ..]` in one pass over the members.
    pub fn get_many<const N: usize>(&self, keys: [&str; N]) -> [Option<ValueRef<'d>>; N] {
        let mut found = [None; N];
        for (key, value) in self.members().into_iter().flatten() {
            if let Some(i) = keys.iter().position(|k| *k == key) {
                found[i] = Some(value);
            }
        }
        found
    }

    /// An owned copy: the slots read backwards, each container taking its items off a stack.
    pub fn to_value(&self) -> Value {
        let doc = self.doc;
        let end = next_sibling(&doc.slots, self.at).min(doc.slots.len());
        let mut stack: Vec<Value> = Vec::new();
        for at in (self.at..end).rev() {
            let slot = doc.slots[at];
            let value = match slot {
                Slot::Null => Value::Null,
                Slot::Bool(b) => Value::Bool(b),
                Slot::Int(v) => Value::Int(v),
                Slot::Float(f) => Value::Float(f),
                Slot::Str { .. } | Slot::Decoded { .. } => {
                    Value::Str(doc.text_of(slot).unwrap_or_default().to_owned())
                }
                // The first item is on top of the stack.
                Slot::Array { len, .. } => {
                    let from = stack.len().saturating_sub(len as usize);
                    Value::Array(stack.drain(from..).rev().collect())
                }
                Slot::Object { len, .. } => {
                    let from = stack.len().saturating_sub(2 * len as usize);
                    let mut slots = stack.drain(from..).rev();
                    let mut members = Vec::with_capacity(len as usize);
                    while let (Some(Value::Str(key)), Some(value)) = (slots.next(), slots.next()) {
                        members.push((key, value));
                    }
                    Value::Object(members)
                }
            };
            stack.push(value);
        }
        stack.pop().unwrap_or(Value::Null)
    }
}

/// Index just past the value whose slot is at `at`.
fn next_sibling(slots: &[Slot], at: usize) -> usize {
    match slots.get(at) {
        Some(Slot::Array { end, .. } | Slot::Object { end, .. }) => *end as usize,
        _ => at + 1,
    }
}

/// Iterator over an object's `(key, value)` pairs: its slots two by two.
#[derive(Clone)]
pub struct Members<'d>(Items<'d>);

impl<'d> Iterator for Members<'d> {
    type Item = (&'d str, ValueRef<'d>);

    fn next(&mut self) -> Option<Self::Item> {
        let key = self.0.next()?.as_str()?;
        Some((key, self.0.next()?))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.0.remaining / 2, Some(self.0.remaining / 2))
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

/// Reads the value at `c` into a document; `open` holds the containers being read.
pub(super) fn read<'a>(c: &mut Cursor<'a>) -> Result<Document<'a>, JsonError> {
    c.peek();
    let base = c.pos();
    // About one slot per 10 input bytes in RocketMQ bodies and headers.
    let mut doc = Document {
        text: "",
        slots: spare_slots(c.remaining() / 10 + 4),
        decoded: String::new(),
    };
    let mut open: Vec<(usize, u32, bool)> = Vec::new();
    loop {
        let mut more = match c.peek() {
            Some(b @ (b'[' | b'{')) => {
                let is_array = b == b'[';
                let at = doc.slots.len();
                // An empty container ends just past its own slot; others are set on closing.
                doc.slots.push(container(is_array, 0, at as u32 + 1));
                let members = c.open(is_array)?;
                if members {
                    open.push((at, 0, is_array));
                }
                members
            }
            _ => {
                let slot = match c.scalar()? {
                    Scalar::Null => Slot::Null,
                    Scalar::Bool(b) => Slot::Bool(b),
                    Scalar::Int(v) => Slot::Int(v),
                    Scalar::Float(f) => Slot::Float(f),
                    Scalar::Str(s) => doc.string_slot(c, base, s),
                };
                doc.slots.push(slot);
                false
            }
        };
        // Count the value; close the containers it completes.
        while !more {
            let Some((at, len, is_array)) = open.last_mut() else {
                doc.text = c
                    .text_between(base, c.pos())
                    .ok_or(c.error("invalid UTF-8"))?;
                return Ok(doc);
            };
            *len += 1;
            more = c.next(*is_array)?;
            if !more {
                let end = doc.slots.len() as u32;
                doc.slots[*at] = container(*is_array, *len, end);
                open.pop();
            }
        }
        if let Some(&(_, _, false)) = open.last() {
            let key = c.key()?;
            let slot = doc.string_slot(c, base, key);
            doc.slots.push(slot);
        }
    }
}

fn container(is_array: bool, len: u32, end: u32) -> Slot {
    if is_array {
        Slot::Array { len, end }
    } else {
        Slot::Object { len, end }
    }
}

/// [`Scalar`]'s coercions; [`Value::to_text`] of a container.
impl Field for ValueRef<'_> {
    fn is_null(&self) -> bool {
        matches!(self.slot(), Slot::Null)
    }
    fn as_i64(&self) -> Option<i64> {
        self.scalar()?.as_i64()
    }
    fn as_bool(&self) -> Option<bool> {
        self.scalar()?.as_bool()
    }
    fn to_text(&self) -> String {
        match self.as_str() {
            Some(s) => s.to_owned(),
            None => self.to_value().to_text(),
        }
    }
}
