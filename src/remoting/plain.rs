//! A strict one-pass reader for JSON in the exact shape Java's fastjson writes: compact (no
//! whitespace), double-quoted strings without escapes, integers without fraction or exponent,
//! `true`/`false`. It underlies the fast paths of the header decoder (`plain_header`), of the
//! registration body decoder (`route::register_body`) and of the DataVersion body
//! (`route::model`, QUERY_DATA_VERSION): typed decoders that read the bytes straight into
//! their structs instead of building the general reader's tape first.
//!
//! Every method returns `None` on anything outside that shape; a fast path then gives up and
//! the general decoder ([`super::json`]) reads the input from the start, with its coercions,
//! limits and error messages. So this reader never has to explain an error, only to be exact
//! about what it accepts.

/// Deepest nesting [`PlainReader::skip_value`] follows before giving up.
const MAX_SKIP_DEPTH: usize = 4;

pub(crate) struct PlainReader<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    max_string_len: usize,
}

impl<'a> PlainReader<'a> {
    /// A reader over `input` when it is UTF-8 (then every string between two ASCII quotes is
    /// text); strings longer than `max_string_len` bytes are refused.
    pub(crate) fn new(input: &'a [u8], max_string_len: usize) -> Option<Self> {
        Some(PlainReader {
            text: std::str::from_utf8(input).ok()?,
            bytes: input,
            pos: 0,
            max_string_len,
        })
    }

    /// The whole input, as the UTF-8 text it was checked to be.
    pub(crate) fn text(&self) -> &'a str {
        self.text
    }

    #[inline]
    pub(crate) fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    /// Consumes `b` if it comes next.
    #[inline]
    pub(crate) fn eat(&mut self, b: u8) -> bool {
        let hit = self.peek() == Some(b);
        self.pos += usize::from(hit);
        hit
    }

    #[inline]
    pub(crate) fn expect(&mut self, b: u8) -> Option<()> {
        self.eat(b).then_some(())
    }

    /// Bytes not read yet.
    pub(crate) fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    pub(crate) fn at_end(&self) -> bool {
        self.pos == self.bytes.len()
    }

    /// A double-quoted string without escapes.
    #[inline]
    pub(crate) fn string(&mut self) -> Option<&'a str> {
        let (start, end) = self.string_span()?;
        self.text.get(start..end)
    }

    /// Where the text of a double-quoted string without escapes lies in the input (between
    /// two ASCII quotes of UTF-8 input, so always text).
    #[inline]
    pub(crate) fn string_span(&mut self) -> Option<(usize, usize)> {
        self.expect(b'"')?;
        let start = self.pos;
        let rest = self.bytes.get(start..)?;
        // The first quote or backslash: a backslash (an escape) is the general decoder's.
        let len = super::json::find_quote_or_backslash(rest, b'"')?;
        if rest[len] != b'"' || len > self.max_string_len {
            return None;
        }
        self.pos = start + len + 1;
        Some((start, start + len))
    }

    /// Consumes the string `s`, quoted, if it comes next. `s` must be a string this reader
    /// returned (so it holds no quote or backslash and is within the length limit): then this
    /// reads what [`PlainReader::string`] would, comparing bytes instead of scanning for the
    /// closing quote.
    #[inline]
    pub(crate) fn quoted(&mut self, s: &str) -> bool {
        let n = s.len();
        let hit = self
            .bytes
            .get(self.pos..self.pos + n + 2)
            .is_some_and(|w| w[0] == b'"' && w[n + 1] == b'"' && &w[1..=n] == s.as_bytes());
        self.pos += if hit { n + 2 } else { 0 };
        hit
    }

    /// A key and its colon.
    #[inline]
    pub(crate) fn key(&mut self) -> Option<&'a str> {
        let key = self.string()?;
        self.expect(b':')?;
        Some(key)
    }

    /// A plain decimal int64: optional '-', then digits without a leading zero.
    pub(crate) fn long(&mut self) -> Option<i64> {
        let negative = self.eat(b'-');
        let start = self.pos;
        let mut magnitude: i64 = 0;
        while let Some(d @ b'0'..=b'9') = self.peek() {
            magnitude = magnitude
                .checked_mul(10)?
                .checked_add(i64::from(d - b'0'))?;
            self.pos += 1;
        }
        let digits = self.pos - start;
        if digits == 0 || (digits > 1 && self.bytes[start] == b'0') {
            return None;
        }
        // A fraction or exponent next would make it a float: the general decoder's case.
        if matches!(self.peek(), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        Some(if negative { -magnitude } else { magnitude })
    }

    /// A plain decimal int32.
    pub(crate) fn int(&mut self) -> Option<i32> {
        i32::try_from(self.long()?).ok()
    }

    /// `["a","b",...]` of plain strings.
    /// An object `{"k":v,...}`, its braces and commas read here once for every decoder:
    /// `member` reads the value after each key (keys in order, repeats included) and refuses
    /// it, and with it the object, by returning `None`.
    #[inline]
    pub(crate) fn members(
        &mut self,
        mut member: impl FnMut(&mut Self, &'a str) -> Option<()>,
    ) -> Option<()> {
        self.expect(b'{')?;
        if self.eat(b'}') {
            return Some(());
        }
        loop {
            let key = self.key()?;
            member(self, key)?;
            if !self.eat(b',') {
                break;
            }
        }
        self.expect(b'}')
    }

    pub(crate) fn string_array(&mut self) -> Option<Vec<String>> {
        self.expect(b'[')?;
        let mut out = Vec::new();
        if self.eat(b']') {
            return Some(out);
        }
        loop {
            out.push(self.string()?.to_owned());
            if !self.eat(b',') {
                break;
            }
        }
        self.expect(b']')?;
        Some(out)
    }

    /// Steps over one plain value (string, int, boolean, or an array or object of them,
    /// nested at most [`MAX_SKIP_DEPTH`] deep). `null` is refused: the general decoders
    /// often treat a null member as absent, which a skipped member cannot tell.
    pub(crate) fn skip_value(&mut self) -> Option<()> {
        self.skip_nested(0)
    }

    fn skip_nested(&mut self, depth: usize) -> Option<()> {
        match self.peek()? {
            b'"' => self.string().map(drop),
            b't' => self.word(b"true"),
            b'f' => self.word(b"false"),
            b'{' | b'[' if depth < MAX_SKIP_DEPTH => {
                let is_object = self.eat(b'{');
                if !is_object {
                    self.expect(b'[')?;
                }
                let close = if is_object { b'}' } else { b']' };
                if self.eat(close) {
                    return Some(());
                }
                loop {
                    if is_object {
                        self.key()?;
                    }
                    self.skip_nested(depth + 1)?;
                    if !self.eat(b',') {
                        break;
                    }
                }
                self.expect(close)
            }
            _ => self.long().map(drop),
        }
    }

    fn word(&mut self, word: &[u8]) -> Option<()> {
        self.literal(word).then_some(())
    }

    /// Consumes `lit` if the input continues with exactly these bytes: how a typed decoder
    /// steps over the keys and fixed values of a shape it knows, without scanning them as
    /// strings.
    #[inline]
    pub(crate) fn literal(&mut self, lit: &[u8]) -> bool {
        let hit = self
            .bytes
            .get(self.pos..)
            .is_some_and(|rest| rest.starts_with(lit));
        self.pos += if hit { lit.len() } else { 0 };
        hit
    }

    /// When the input ends with `suffix`: the bytes from here up to it, leaving the reader
    /// just before it (a typed decoder handing one trailing value to the general reader).
    pub(crate) fn take_all_but(&mut self, suffix: &[u8]) -> Option<&'a [u8]> {
        let end = self.bytes.len().checked_sub(suffix.len())?;
        if end < self.pos || !self.bytes.ends_with(suffix) {
            return None;
        }
        let taken = &self.bytes[self.pos..end];
        self.pos = end;
        Some(taken)
    }

    /// Where the reader is, to come back to with [`PlainReader::rewind`].
    pub(crate) fn mark(&self) -> usize {
        self.pos
    }

    /// Goes back to a position taken with [`PlainReader::mark`] (a typed decoder that tried
    /// one exact layout and now reads the same value member by member).
    pub(crate) fn rewind(&mut self, mark: usize) {
        self.pos = mark.min(self.bytes.len());
    }
}

/// Every truncation, insertion of a space, deletion and replacement (by each of `bytes`) of
/// `input`: the fast paths' tests check on each that both decoders agree.
#[cfg(test)]
pub(crate) fn mutations<'s>(
    input: &'s [u8],
    bytes: &'s [u8],
) -> impl Iterator<Item = Vec<u8>> + 's {
    (0..=input.len()).flat_map(move |i| {
        let mut with_space = input.to_vec();
        with_space.insert(i, b' ');
        let mut variants = vec![input[..i].to_vec(), with_space];
        if i < input.len() {
            let mut removed = input.to_vec();
            removed.remove(i);
            variants.push(removed);
            variants.extend(bytes.iter().map(|&b| {
                let mut replaced = input.to_vec();
                replaced[i] = b;
                replaced
            }));
        }
        variants
    })
}
