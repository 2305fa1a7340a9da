//! Append-only writers over a caller's `Vec<u8>`. Two string escapers because Java uses two:
//! fastjson's default, and `BrowserCompatible` for the standard route dialect.

use super::Value;

/// The escape of byte `b` in fastjson's default escaping (`u`: `\u00XX`; 0: write raw).
fn ascii_escape(b: u8) -> u8 {
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

/// `"..."` with fastjson's default escaping (control chars escaped, non-ASCII raw).
pub fn write_str(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let mut run_start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escape = ascii_escape(b);
        if escape != 0 {
            out.extend_from_slice(&bytes[run_start..i]);
            write_ascii_escape(out, b, escape);
            run_start = i + 1;
        }
    }
    out.extend_from_slice(&bytes[run_start..]);
    out.push(b'"');
}

/// `"..."` with fastjson's BrowserCompatible escaping: also `/` as `\/` and every char >= 0x7F
/// as `\uXXXX` (UTF-16 units, uppercase hex).
pub fn write_str_browser(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let mut run_start = 0;
    for (i, c) in s.char_indices() {
        let code = u32::from(c);
        if code < 0x7F {
            let b = code as u8;
            let escape = if b == b'/' { b'/' } else { ascii_escape(b) };
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

/// Decimal text of `v`, two digits per division (numbers are most of a heartbeat's reply).
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

/// Compact JSON for a Value; a non-finite Float (from a literal such as `1e999`) as `null`.
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

/// One JSON array or object being written: it places the commas; each element is started
/// with [`Seq::item`], [`Seq::key`] or [`Seq::field`] and written into the buffer returned.
pub struct Seq<'a> {
    out: &'a mut Vec<u8>,
    close: u8,
    empty: bool,
}

impl<'a> Seq<'a> {
    pub fn array(out: &'a mut Vec<u8>) -> Self {
        Seq::open(out, b'[', b']')
    }

    pub fn object(out: &'a mut Vec<u8>) -> Self {
        Seq::open(out, b'{', b'}')
    }

    fn open(out: &'a mut Vec<u8>, open: u8, close: u8) -> Self {
        out.push(open);
        Seq {
            out,
            close,
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
