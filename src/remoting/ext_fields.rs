//! [`ExtFields`]: a request's `extFields` with Java's `HashMap` semantics, built without
//! allocating in the common case: a header without escapes is kept as a `Bytes` slice of the
//! frame with each pair's span, inline for the usual handful (a Java heartbeat carries nine);
//! anything else is copied into one owned buffer. This saved a tenth of a heartbeat's cost.

use bytes::Bytes;
use std::fmt;

/// Pairs kept without allocating.
const INLINE_PAIRS: usize = 10;

/// One pair: key `[key.0, key.1)` and value `[value.0, value.1)` in the text.
type Span = ([u32; 2], [u32; 2]);

/// A span inline, in 16 bits (headers are a few hundred bytes): the command stays small.
type Short = [u16; 4];

fn short(s: Span) -> Option<Short> {
    let [a, b, c, d] = [s.0[0], s.0[1], s.1[0], s.1[1]].map(u16::try_from);
    Some([a.ok()?, b.ok()?, c.ok()?, d.ok()?])
}

/// A key length's bit in [`ExtFields::key_lens`].
fn key_len_bit(len: usize) -> u32 {
    1 << (len % 32)
}

/// A request's ext fields, in the order their keys first came.
#[derive(Clone, Default)]
pub struct ExtFields {
    /// The header's own bytes when the spans point there: UTF-8, spans between ASCII quotes.
    shared: Option<Bytes>,
    /// Copies of the pairs otherwise (the general and binary decoders, changes, tools).
    owned: String,
    /// The first pairs while every offset fits 16 bits; `len` of them.
    inline: [Short; INLINE_PAIRS],
    len: u8,
    /// Bit `n % 32` set for the length `n` of every key added since the last `clear` (removals
    /// leave it): a key whose bit is clear is absent, known without a scan.
    key_lens: u32,
    /// All pairs once they do not fit inline (then `len` is 0).
    spill: Vec<Span>,
}

impl ExtFields {
    /// Empties the fields and shares `header` as their text if `text` is those same bytes
    /// (the proof they are UTF-8); returns whether it does. In place: a move cost a copy.
    pub(crate) fn share(&mut self, header: Bytes, text: Option<&str>) -> bool {
        self.clear();
        let same = text.is_some_and(|t| t.as_ptr() == header.as_ptr() && t.len() == header.len());
        self.shared = same.then_some(header);
        same
    }

    fn span(&self, i: usize) -> Span {
        if self.spill.is_empty() {
            let s = self.inline[i];
            ([s[0].into(), s[1].into()], [s[2].into(), s[3].into()])
        } else {
            self.spill[i]
        }
    }

    fn spans(&self) -> impl Iterator<Item = Span> + '_ {
        (0..self.len()).map(|i| self.span(i))
    }

    fn str(&self, range: [u32; 2]) -> &str {
        let (start, end) = (range[0] as usize, range[1] as usize);
        match &self.shared {
            None => self.owned.get(start..end).unwrap_or_default(),
            Some(shared) => match shared.get(start..end) {
                // SAFETY: `shared` was UTF-8 when it was shared (`share` saw a `&str` of
                // exactly its bytes) and `Bytes` never change; `put_span` only records spans
                // whose ends are char boundaries of it. So these bytes are whole UTF-8 chars.
                Some(bytes) => unsafe { std::str::from_utf8_unchecked(bytes) },
                None => "",
            },
        }
    }

    fn position(&self, key: &[u8]) -> Option<usize> {
        if self.key_lens & key_len_bit(key.len()) == 0 {
            return None;
        }
        let text = match &self.shared {
            Some(b) => &b[..],
            None => self.owned.as_bytes(),
        };
        self.spans().position(|s| {
            // Lengths first: most keys of a header differ in length.
            let (start, end) = (s.0[0] as usize, s.0[1] as usize);
            end.saturating_sub(start) == key.len() && text.get(start..end) == Some(key)
        })
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        let span = self.span(self.position(key.as_bytes())?);
        Some(self.str(span.1))
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> + '_ {
        self.spans().map(|s| (self.str(s.0), self.str(s.1)))
    }

    pub fn len(&self) -> usize {
        if self.spill.is_empty() {
            usize::from(self.len)
        } else {
            self.spill.len()
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// No pairs (the text shared from a frame stays shared).
    pub fn clear(&mut self) {
        self.owned.clear();
        self.len = 0;
        self.key_lens = 0;
        self.spill.clear();
    }

    /// Room for `text` more bytes of owned text, allocated once rather than grown field by field.
    pub(crate) fn reserve_text(&mut self, text: usize) {
        self.owned().reserve(text);
    }

    /// The owned buffer, after copying the shared pairs into it if they were shared.
    fn owned(&mut self) -> &mut String {
        if self.shared.is_some() {
            let mut copy = ExtFields::default();
            for (k, v) in self.iter() {
                copy.put(k, Some(v));
            }
            *self = copy;
        }
        &mut self.owned
    }

    /// Moves the inline pairs to `spill` (which then holds them all).
    fn spill_all(&mut self) {
        if self.spill.is_empty() {
            let spans: Vec<Span> = self.spans().collect();
            self.spill = spans;
            self.len = 0;
        }
    }

    fn push(&mut self, span: Span) {
        self.key_lens |= key_len_bit(span.0[1].saturating_sub(span.0[0]) as usize);
        let len = usize::from(self.len);
        if self.spill.is_empty() && len < INLINE_PAIRS {
            if let Some(s) = short(span) {
                self.inline[len] = s;
                self.len += 1;
                return;
            }
        }
        self.spill_all();
        self.spill.push(span);
    }

    fn set(&mut self, i: usize, span: Span) {
        if self.spill.is_empty() {
            if let Some(s) = short(span) {
                self.inline[i] = s;
                return;
            }
            self.spill_all();
        }
        self.spill[i] = span;
    }

    fn remove(&mut self, i: usize) {
        if self.spill.is_empty() {
            self.inline.copy_within(i + 1..usize::from(self.len), i);
            self.len -= 1;
        } else {
            self.spill.remove(i);
        }
    }

    /// `HashMap::put` of a pair whose `key` and `value` are byte ranges of the shared header.
    #[inline]
    pub(crate) fn put_span(&mut self, key: (usize, usize), value: (usize, usize)) {
        let span = (
            [key.0 as u32, key.1 as u32],
            [value.0 as u32, value.1 as u32],
        );
        let Some(shared) = &self.shared else {
            return;
        };
        // Inside the header, each end where a char begins (not a continuation byte) or at the end.
        let boundary = |at: usize| shared.get(at).map_or(true, |b| b & 0xC0 != 0x80);
        let fits =
            |(start, end)| shared.get(start..end).is_some() && boundary(start) && boundary(end);
        if !(fits(key) && fits(value)) {
            return;
        }
        let key_bytes = &shared[key.0..key.1];
        match self.position(key_bytes) {
            Some(i) => self.set(i, span),
            None => self.push(span),
        }
    }

    /// `HashMap::put`: a repeated key's value is replaced in place (in the order), `None`
    /// (Java's null) removes the key. Old text stays: never more than the header's own.
    pub fn put(&mut self, key: &str, value: Option<&str>) {
        let existing = self.position(key.as_bytes());
        let Some(v) = value else {
            if let Some(i) = existing {
                self.remove(i);
            }
            return;
        };
        let text = self.owned();
        let start = text.len() as u32;
        text.push_str(key);
        let mid = text.len() as u32;
        text.push_str(v);
        let span = ([start, mid], [mid, text.len() as u32]);
        match existing {
            Some(i) => self.set(i, span),
            None => self.push(span),
        }
    }
}

impl fmt::Debug for ExtFields {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl PartialEq for ExtFields {
    fn eq(&self, other: &Self) -> bool {
        self.iter().eq(other.iter())
    }
}

impl Eq for ExtFields {}

impl<K: AsRef<str>, V: AsRef<str>> FromIterator<(K, V)> for ExtFields {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(pairs: I) -> Self {
        let mut fields = ExtFields::default();
        for (k, v) in pairs {
            fields.put(k.as_ref(), Some(v.as_ref()));
        }
        fields
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared(header: &str, pairs: &[(&str, &str)]) -> ExtFields {
        let bytes = Bytes::copy_from_slice(header.as_bytes());
        let text = std::str::from_utf8(&bytes).unwrap();
        let mut f = ExtFields::default();
        assert!(f.share(bytes.clone(), Some(text)));
        for (k, v) in pairs {
            let k0 = header.find(&format!("\"{k}\"")).unwrap() + 1;
            let v0 = header[k0..].find(&format!("\"{v}\"")).unwrap() + k0 + 1;
            f.put_span((k0, k0 + k.len()), (v0, v0 + v.len()));
        }
        f
    }

    fn owned_pairs(f: &ExtFields) -> Vec<(String, String)> {
        f.iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    }

    /// The key-length bits only ever skip keys that are absent: lengths that share a bit
    /// (1 and 33), removed and re-added keys, and a cleared set.
    #[test]
    fn key_length_bits_never_hide_a_key() {
        let long = "k".repeat(33);
        let mut f: ExtFields = [("a", "1"), (long.as_str(), "2")].into_iter().collect();
        assert_eq!(
            (f.get("a"), f.get(&long), f.get("b")),
            (Some("1"), Some("2"), None)
        );
        assert_eq!(f.get(&"k".repeat(32)), None);
        f.put("a", None);
        assert_eq!((f.get("a"), f.get(&long)), (None, Some("2")));
        f.put("b", Some("3"));
        assert_eq!(f.get("b"), Some("3"));
        f.clear();
        assert_eq!((f.get("b"), f.get(&long)), (None, None));
        f.put("b", Some("4"));
        assert_eq!(f.get("b"), Some("4"));
    }

    #[test]
    fn shared_and_owned_fields_read_and_change_alike() {
        let header = r#"{"a":"1","b":"two","a":"3","c":""}"#;
        let s = shared(header, &[("a", "1"), ("b", "two"), ("a", "3"), ("c", "")]);
        let o: ExtFields = [("a", "1"), ("b", "two"), ("a", "3"), ("c", "")]
            .into_iter()
            .collect();
        assert_eq!(s, o);
        assert_eq!(owned_pairs(&s), owned_pairs(&o));
        assert_eq!(
            (s.get("a"), s.get("b"), s.get("c"), s.get("d")),
            (Some("3"), Some("two"), Some(""), None)
        );
        assert_eq!(s.len(), 3);
        for mut f in [s, o] {
            f.put("b", None);
            f.put("d", Some("4"));
            f.put("a", Some("5"));
            assert_eq!(
                owned_pairs(&f),
                [("a", "5"), ("c", ""), ("d", "4")].map(|(k, v)| (k.to_string(), v.to_string()))
            );
            f.clear();
            assert!(f.is_empty() && f.get("a").is_none());
        }
    }

    #[test]
    fn offsets_past_16_bits_spill_and_emptied_spills_count_zero() {
        let long = "v".repeat(70_000);
        let mut f = ExtFields::default();
        f.put("a", Some("1"));
        f.put("b", Some(&long));
        f.put("c", Some("3"));
        assert_eq!(f.len(), 3);
        assert_eq!(f.get("b"), Some(long.as_str()));
        assert_eq!(f.get("c"), Some("3"));
        for k in ["a", "b", "c"] {
            f.put(k, None);
        }
        assert!(f.is_empty() && f.iter().next().is_none());
        f.put("d", Some("4"));
        assert_eq!(owned_pairs(&f), [("d".to_string(), "4".to_string())]);
        let header = format!("{{\"k\":\"{long}\",\"z\":\"1\"}}");
        let s = shared(&header, &[("k", &long), ("z", "1")]);
        assert_eq!((s.get("k"), s.get("z")), (Some(long.as_str()), Some("1")));
    }

    #[test]
    fn more_pairs_than_fit_inline_spill_and_keep_their_order() {
        let keys: Vec<String> = (0..INLINE_PAIRS * 2 + 1).map(|i| format!("k{i}")).collect();
        let mut f = ExtFields::default();
        for (i, k) in keys.iter().enumerate() {
            f.put(k, Some(&i.to_string()));
        }
        f.put("k0", Some("again"));
        f.put(&keys[INLINE_PAIRS], None);
        assert_eq!(f.len(), keys.len() - 1);
        assert_eq!(f.get("k0"), Some("again"));
        assert_eq!(f.get(&keys[INLINE_PAIRS]), None);
        let order: Vec<&str> = f.iter().map(|(k, _)| k).collect();
        let want: Vec<&str> = keys
            .iter()
            .filter(|k| **k != keys[INLINE_PAIRS])
            .map(|k| k.as_str())
            .collect();
        assert_eq!(order, want);
        let header: String = format!(
            "{{{}}}",
            keys.iter()
                .map(|k| format!("\"{k}\":\"v{k}\""))
                .collect::<Vec<_>>()
                .join(",")
        );
        let pairs: Vec<(String, String)> =
            keys.iter().map(|k| (k.clone(), format!("v{k}"))).collect();
        let refs: Vec<(&str, &str)> = pairs
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let s = shared(&header, &refs);
        assert_eq!(owned_pairs(&s), pairs);
    }
}
