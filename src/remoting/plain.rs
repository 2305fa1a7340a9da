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

/// Digits of the largest int32 (2147483647).
const MAX_INT_DIGITS: usize = 10;

pub(crate) struct PlainReader<'a> {
    /// The whole input when it was checked as UTF-8 up front ([`PlainReader::new`]).
    text: Option<&'a str>,
    bytes: &'a [u8],
    pos: usize,
    max_string_len: usize,
}

impl<'a> PlainReader<'a> {
    /// A reader over `input` when it is UTF-8 as a whole (for a decoder that keeps the text,
    /// [`PlainReader::text`]); strings longer than `max_string_len` bytes are refused.
    pub(crate) fn new(input: &'a [u8], max_string_len: usize) -> Option<Self> {
        let text = std::str::from_utf8(input).ok()?;
        Some(PlainReader {
            text: Some(text),
            ..PlainReader::checking_strings(input, max_string_len)
        })
    }

    /// A reader over `input` that checks only the strings it reads as UTF-8, not the whole
    /// input up front. Every byte such a reader accepts is either ASCII structure (braces,
    /// commas, digits, [`PlainReader::literal`]s) or inside a string it checked, so whatever
    /// a decoder accepts through it is UTF-8 as a whole, as the general reader requires (a
    /// multi-byte sequence cannot straddle an ASCII quote). Bytes a decoder takes out raw
    /// ([`PlainReader::take_all_but`]) are the checks of whoever reads them.
    pub(crate) fn checking_strings(input: &'a [u8], max_string_len: usize) -> Self {
        PlainReader {
            text: None,
            bytes: input,
            pos: 0,
            max_string_len,
        }
    }

    /// The whole input, as the UTF-8 text it was checked to be (`None` for a reader made by
    /// [`PlainReader::checking_strings`]).
    pub(crate) fn text(&self) -> Option<&'a str> {
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

    /// A double-quoted string without escapes, checked as UTF-8 (an ASCII one by the scan
    /// that finds its end).
    #[inline(always)]
    pub(crate) fn string(&mut self) -> Option<&'a str> {
        self.expect(b'"')?;
        let start = self.pos;
        let (len, ascii) = scan_string(self.bytes.get(start..)?)?;
        if len > self.max_string_len {
            return None;
        }
        self.pos = start + len + 1;
        let raw = &self.bytes[start..start + len];
        if ascii {
            // SAFETY: every byte of `raw` is below 0x80 (checked by `scan_string`), and ASCII
            // is UTF-8.
            return Some(unsafe { std::str::from_utf8_unchecked(raw) });
        }
        std::str::from_utf8(raw).ok()
    }

    /// Where the text of a double-quoted string without escapes lies in the input, for a
    /// reader made by [`PlainReader::new`] (the input checked as a whole, so the bytes between
    /// two ASCII quotes are text); `None` for one that checks strings as it reads them.
    #[inline]
    pub(crate) fn string_span(&mut self) -> Option<(usize, usize)> {
        self.text?;
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

    /// A plain decimal int32 (what [`PlainReader::long`] reads, when it fits). Always inlined:
    /// decoders read many in a row (the four of each TopicConfig, a header's code, flag,
    /// opaque and version). At most ten digits fit, so they are summed in a u64 without
    /// overflow checks, and the reader moves only when the number is taken.
    #[inline(always)]
    pub(crate) fn int(&mut self) -> Option<i32> {
        let rest = self.bytes.get(self.pos..)?;
        // One digit and then no other, no fraction or exponent: most numbers of a TopicConfig.
        if let [d @ b'0'..=b'9', next, ..] = *rest {
            if !matches!(next, b'0'..=b'9' | b'.' | b'e' | b'E') {
                self.pos += 1;
                return Some(i32::from(d - b'0'));
            }
        }
        let negative = rest.first() == Some(&b'-');
        let digits = rest.get(usize::from(negative)..)?;
        let (mut n, mut magnitude) = (0, 0u64);
        while let Some(&b) = digits.get(n) {
            let d = b.wrapping_sub(b'0');
            if d > 9 {
                break;
            }
            // Eleven digits without a leading zero are past i32.
            if n == MAX_INT_DIGITS {
                return None;
            }
            magnitude = magnitude * 10 + u64::from(d);
            n += 1;
        }
        // A fraction or an exponent would make it a float: the general decoder's case.
        if n == 0
            || (n > 1 && digits[0] == b'0')
            || matches!(digits.get(n), Some(b'.' | b'e' | b'E'))
        {
            return None;
        }
        let magnitude = magnitude as i64; // below 10^10
        let value = i32::try_from(if negative { -magnitude } else { magnitude }).ok()?;
        self.pos += usize::from(negative) + n;
        Some(value)
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

    fn word<const N: usize>(&mut self, word: &[u8; N]) -> Option<()> {
        self.literal(word).then_some(())
    }

    /// Consumes `lit` if the input continues with exactly these bytes: how a typed decoder
    /// steps over the keys and fixed values of a shape it knows, without scanning them as
    /// strings. `lit` is an array, so the comparison has a constant length and compiles to
    /// a few word loads instead of a `memcmp` call.
    #[inline(always)]
    pub(crate) fn literal<const N: usize>(&mut self, lit: &[u8; N]) -> bool {
        let hit = self
            .bytes
            .get(self.pos..)
            .and_then(|rest| rest.first_chunk::<N>())
            .is_some_and(|next| next == lit);
        self.pos += if hit { N } else { 0 };
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

/// The length of the string `rest` starts with (up to its closing quote) and whether its
/// bytes are all ASCII; `None` when a backslash (an escape: the general decoder's) or the end
/// of the input comes first. Sixteen bytes a step where SSE2 is (every x86_64: a topic name
/// takes one or two), then as the JSON reader scans ([`scan_rest`]).
#[inline(always)]
fn scan_string(rest: &[u8]) -> Option<(usize, bool)> {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{
            _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8,
        };
        let mut at = 0;
        // The high bits of the bytes before the end, one bit a byte: all clear for ASCII.
        let mut high = 0u32;
        while rest.len() - at >= 16 {
            // SAFETY: the 16 bytes loaded are in `rest` (checked above); SSE2 is part of the
            // x86_64 baseline.
            let (hits, highs) = unsafe {
                let v = _mm_loadu_si128(rest.as_ptr().add(at).cast());
                let quote = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8));
                let backslash = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8));
                (
                    _mm_movemask_epi8(_mm_or_si128(quote, backslash)) as u32,
                    _mm_movemask_epi8(v) as u32,
                )
            };
            if hits != 0 {
                let i = hits.trailing_zeros();
                let len = at + i as usize;
                high |= highs & ((1 << i) - 1);
                return (rest[len] == b'"').then_some((len, high == 0));
            }
            high |= highs;
            at += 16;
        }
        let (len, ascii) = scan_rest(rest, at)?;
        Some((len, ascii && high == 0))
    }
    #[cfg(not(target_arch = "x86_64"))]
    scan_rest(rest, 0)
}

/// [`scan_string`] from `at` on: the first quote or backslash found as the JSON reader finds
/// it ([`find_quote_or_backslash`](super::json::find_quote_or_backslash), eight bytes a step),
/// then the bytes before it checked as ASCII.
#[inline(always)]
fn scan_rest(rest: &[u8], at: usize) -> Option<(usize, bool)> {
    let len = at + super::json::find_quote_or_backslash(rest.get(at..)?, b'"')?;
    (rest[len] == b'"').then(|| (len, rest[at..len].is_ascii()))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// What `scan_string` must find, byte by byte.
    fn scan_reference(rest: &[u8]) -> Option<(usize, bool)> {
        let end = rest.iter().position(|&b| b == b'"' || b == b'\\')?;
        (rest[end] == b'"').then_some((end, rest[..end].is_ascii()))
    }

    #[test]
    fn string_scan_finds_the_closing_quote_and_non_ascii_bytes_at_every_offset() {
        // The special byte at every place of the first two 16-byte blocks, of the words
        // after them and of the tail.
        for len in 0..45 {
            let base = vec![b'a'; len];
            assert_eq!(scan_string(&base), None, "{len}");
            assert_eq!(scan_rest(&base, 0), None, "{len}");
            for at in 0..len {
                for special in [b'"', b'\\', 0x80, 0xC3, 0xFF, 0x7F, b'"' | 0x80, b'\\' + 1] {
                    let mut bytes = base.clone();
                    bytes[at] = special;
                    // And a closing quote after it, or not.
                    for closed in [false, true] {
                        if closed {
                            bytes.push(b'"');
                        }
                        let expected = scan_reference(&bytes);
                        assert_eq!(scan_string(&bytes), expected, "{bytes:?}");
                        assert_eq!(scan_rest(&bytes, 0), expected, "{bytes:?}");
                    }
                }
            }
        }
    }

    /// `int` as it was written first: a checked int64, then the int32 range.
    fn int_reference(text: &[u8]) -> Option<(i32, usize)> {
        let mut r = PlainReader::checking_strings(text, 100);
        let v = i32::try_from(r.long()?).ok()?;
        Some((v, r.mark()))
    }

    #[test]
    fn int_reads_what_the_checked_long_reads_within_i32() {
        let cases: [&[u8]; 24] = [
            b"0",
            b"-0",
            b"7,",
            b"-7}",
            b"00",
            b"01",
            b"-01",
            b"-",
            b"",
            b"x",
            b"1.5",
            b"1e3",
            b"1E3",
            b"2147483647",
            b"2147483648",
            b"-2147483648",
            b"-2147483649",
            b"9999999999",
            b"10000000000",
            b"4294967296",
            b"99999999999999999999999",
            b"--1",
            b"12a",
            b"1234567890,",
        ];
        for text in cases {
            let mut r = PlainReader::checking_strings(text, 100);
            let fast = r.int().map(|v| (v, r.mark()));
            assert_eq!(
                fast,
                int_reference(text),
                "{}",
                String::from_utf8_lossy(text)
            );
        }
    }

    #[test]
    fn strings_are_checked_as_utf8_where_they_are_read() {
        fn read(text: &[u8]) -> Option<&str> {
            PlainReader::checking_strings(text, 8).string()
        }
        assert_eq!(read(b"\"abc\""), Some("abc"));
        assert_eq!(read("\"t\u{e9}\"".as_bytes()), Some("t\u{e9}"));
        assert_eq!(read(b"\"t\xC3\""), None);
        assert_eq!(read(b"\"\xFF\""), None);
        assert_eq!(read(b"\"a\\\"b\""), None);
        assert_eq!(read(b"\"a\\u0041\""), None);
        assert_eq!(read(b"\"123456789\""), None);
        assert_eq!(read(b"\"abc"), None);
        // A reader made by `new` keeps the text; one that checks strings has none to give.
        assert_eq!(
            PlainReader::new(b"{}", 8).and_then(|r| r.text()),
            Some("{}")
        );
        assert_eq!(PlainReader::checking_strings(b"{}", 8).text(), None);
        assert_eq!(
            PlainReader::checking_strings(b"\"a\"", 8).string_span(),
            None
        );
    }

    #[test]
    fn literals_match_whole_arrays_only() {
        let mut r = PlainReader::checking_strings(b",\"perm\":6", 8);
        assert!(!r.literal(b",\"perm\":6,"));
        assert!(!r.literal(b",\"perl\""));
        assert!(r.literal(b",\"perm\":"));
        assert_eq!(r.int(), Some(6));
        assert!(r.at_end());
    }
}
