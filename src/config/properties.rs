//! `java.util.Properties`: `Properties.load`'s reader, and an editor that keeps other lines.

use std::io;
use std::path::Path;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub key: String,
    pub value: String,
    /// 1-based, for messages.
    pub line: usize,
    /// 0-based physical lines the entry spans (several with continuation lines).
    first: usize,
    last: usize,
}

/// How a file's bytes became text, so that an edit writes untouched lines back unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Utf8,
    /// Java's own reading of a properties file; used when the bytes are not valid UTF-8.
    Latin1,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PropertiesFile {
    pub text: String,
    pub encoding: Encoding,
}

impl PropertiesFile {
    /// Reads `path`: UTF-8 when valid, else ISO-8859-1 as Java reads it.
    pub fn read(path: &Path) -> io::Result<PropertiesFile> {
        let bytes = std::fs::read(path)?;
        Ok(match String::from_utf8(bytes) {
            Ok(text) => PropertiesFile {
                text,
                encoding: Encoding::Utf8,
            },
            Err(e) => PropertiesFile {
                text: e.into_bytes().iter().map(|&b| char::from(b)).collect(),
                encoding: Encoding::Latin1,
            },
        })
    }

    /// The text in the file's encoding ([`edit`] writes only ASCII into Latin-1 text).
    pub fn to_bytes(&self) -> Vec<u8> {
        match self.encoding {
            Encoding::Utf8 => self.text.as_bytes().to_vec(),
            Encoding::Latin1 => self
                .text
                .chars()
                .map(|c| u8::try_from(u32::from(c)).unwrap_or(b'?'))
                .collect(),
        }
    }
}

fn is_blank(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\x0c')
}

/// Physical lines with their terminators (`\n`, `\r\n` or `\r`); the last may have none.
fn physical_lines(text: &str) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find(['\n', '\r']) {
        let end = at + if rest[at..].starts_with("\r\n") { 2 } else { 1 };
        let (line, after) = rest.split_at(end);
        lines.push(line);
        rest = after;
    }
    if !rest.is_empty() {
        lines.push(rest);
    }
    lines
}

fn without_terminator(line: &str) -> &str {
    line.trim_end_matches(['\n', '\r'])
}

fn ends_in_odd_backslashes(s: &str) -> bool {
    s.chars().rev().take_while(|&c| c == '\\').count() % 2 == 1
}

/// Continuation lines joined (without their backslashes), and the physical lines spanned.
struct Logical {
    text: String,
    first: usize,
    last: usize,
}

/// Groups physical lines as `Properties.LineReader` does (comments never continue; an odd
/// number of final backslashes continues on the next line, its leading blanks skipped).
fn logical_lines(lines: &[&str]) -> Vec<Logical> {
    let mut out = Vec::new();
    let mut current: Option<Logical> = None;
    for (index, raw) in lines.iter().enumerate() {
        let content = without_terminator(raw).trim_start_matches(is_blank);
        let mut entry = match current.take() {
            Some(mut open) => {
                open.last = index;
                open.text.push_str(content);
                open
            }
            None if content.is_empty() || content.starts_with(['#', '!']) => continue,
            None => Logical {
                text: content.to_string(),
                first: index,
                last: index,
            },
        };
        if ends_in_odd_backslashes(content) {
            entry.text.pop();
            current = Some(entry);
        } else {
            out.push(entry);
        }
    }
    // A continuation at the end of the text ends the entry (its backslash is already gone).
    out.extend(current);
    out
}

/// Splits a logical line at the first unescaped `=`, `:` or blank (`Properties.load`).
fn split_key_value(line: &[char]) -> (&[char], &[char]) {
    let mut key_len = line.len();
    let mut value_start = line.len();
    let mut has_separator = false;
    let mut preceding_backslash = false;
    for (i, &c) in line.iter().enumerate() {
        if !preceding_backslash && (c == '=' || c == ':' || is_blank(c)) {
            key_len = i;
            value_start = i + 1;
            has_separator = c == '=' || c == ':';
            break;
        }
        preceding_backslash = c == '\\' && !preceding_backslash;
    }
    let rest = line.get(value_start..).unwrap_or(&[]);
    let mut skip = 0;
    for &c in rest {
        if is_blank(c) {
            skip += 1;
        } else if !has_separator && (c == '=' || c == ':') {
            has_separator = true;
            skip += 1;
        } else {
            break;
        }
    }
    let key = line.get(..key_len).unwrap_or(&[]);
    (key, rest.get(skip..).unwrap_or(&[]))
}

/// Resolves `\t \n \r \f \uXXXX` (UTF-16 units; any other `\x` is `x`).
fn unescape(chars: &[char]) -> Result<String, String> {
    let mut units: Vec<u16> = Vec::with_capacity(chars.len());
    let mut it = chars.iter().copied();
    let mut utf16 = [0u16; 2];
    while let Some(c) = it.next() {
        let c = if c == '\\' {
            match it.next() {
                // Only reachable at end of input, where Java drops the backslash too.
                None => break,
                Some('u') => {
                    let mut unit: u32 = 0;
                    for _ in 0..4 {
                        let digit = it
                            .next()
                            .and_then(|h| h.to_digit(16))
                            .ok_or_else(|| "Malformed \\uxxxx encoding.".to_string())?;
                        unit = unit * 16 + digit;
                    }
                    units.push(unit as u16);
                    continue;
                }
                Some('t') => '\t',
                Some('r') => '\r',
                Some('n') => '\n',
                Some('f') => '\x0c',
                Some(other) => other,
            }
        } else {
            c
        };
        units.extend_from_slice(c.encode_utf16(&mut utf16));
    }
    Ok(String::from_utf16_lossy(&units))
}

/// Every entry of `text` in file order, duplicates included (later ones win when applied).
pub fn entries(text: &str) -> Result<Vec<Entry>, String> {
    let lines = physical_lines(text);
    let mut out = Vec::new();
    for logical in logical_lines(&lines) {
        let chars: Vec<char> = logical.text.chars().collect();
        let (key, value) = split_key_value(&chars);
        let line = logical.first + 1;
        let key = unescape(key).map_err(|e| format!("line {line}: {e}"))?;
        let value = unescape(value).map_err(|e| format!("line {line}: {e}"))?;
        out.push(Entry {
            key,
            value,
            line,
            first: logical.first,
            last: logical.last,
        });
    }
    Ok(out)
}

/// `key=value\n` lines in key order, unescaped, as Java writes GET_*_CONFIG bodies.
pub fn sorted_lines(all: std::collections::BTreeMap<&str, String>) -> String {
    all.into_iter()
        .map(|(key, value)| format!("{key}={value}\n"))
        .collect()
}

/// `java.util.Properties.load` over text: the (key, value) pairs in file order.
pub fn parse_properties(text: &str) -> Result<Vec<(String, String)>, String> {
    Ok(entries(text)?
        .into_iter()
        .map(|e| (e.key, e.value))
        .collect())
}

/// Writes `text` so that the reader gives it back; `ascii_only` for Latin-1 files.
fn push_escaped(out: &mut String, text: &str, key: bool, ascii_only: bool) {
    for (i, c) in text.chars().enumerate() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\x0c' => out.push_str("\\f"),
            ' ' if key || i == 0 => out.push_str("\\ "),
            '=' | ':' if key => {
                out.push('\\');
                out.push(c);
            }
            '#' | '!' if key && i == 0 => {
                out.push('\\');
                out.push(c);
            }
            c if (ascii_only && !c.is_ascii()) || c.is_control() => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04X}"));
                }
            }
            c => out.push(c),
        }
    }
}

/// `file` with `changes` set: those keys' lines replaced by one line (or appended).
pub fn edit(file: &PropertiesFile, changes: &[(&str, &str)]) -> Result<PropertiesFile, String> {
    let lines = physical_lines(&file.text);
    let found = entries(&file.text)?;
    let ascii_only = file.encoding == Encoding::Latin1;
    let newline = if file.text.contains("\r\n") {
        "\r\n"
    } else {
        "\n"
    };
    let line_for = |key: &str, value: &str| {
        let mut line = String::new();
        push_escaped(&mut line, key, true, ascii_only);
        line.push('=');
        push_escaped(&mut line, value, false, ascii_only);
        line
    };
    let mut text = String::with_capacity(file.text.len() + 64);
    let mut copied = 0;
    for entry in &found {
        if let Some((key, value)) = changes.iter().find(|(k, _)| *k == entry.key) {
            text.extend(lines[copied..entry.first].iter().copied());
            text.push_str(&line_for(key, value));
            let last = lines[entry.last];
            text.push_str(&last[without_terminator(last).len()..]);
            copied = entry.last + 1;
        }
    }
    text.extend(lines[copied..].iter().copied());
    for (key, value) in changes {
        if !found.iter().any(|e| e.key == *key) {
            if !text.is_empty() && !text.ends_with(['\n', '\r']) {
                text.push_str(newline);
            }
            text.push_str(&line_for(key, value));
            text.push_str(newline);
        }
    }
    Ok(PropertiesFile {
        text,
        encoding: file.encoding,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn utf8(text: &str) -> PropertiesFile {
        PropertiesFile {
            text: text.to_string(),
            encoding: Encoding::Utf8,
        }
    }

    #[test]
    fn parse_properties_accepts_all_three_separators() {
        let got = parse_properties("a=1\nb:2\nc 3\nd\t = 4\ne : 5\nf\ng=\n").unwrap();
        let want = pairs(&[
            ("a", "1"),
            ("b", "2"),
            ("c", "3"),
            ("d", "4"),
            ("e", "5"),
            ("f", ""),
            ("g", ""),
        ]);
        assert_eq!(got, want);
    }

    #[test]
    fn parse_properties_skips_comments_blank_lines_and_leading_whitespace() {
        let got = parse_properties(
            "# comment\n  ! also comment\n\n   \n   key = value with  spaces  \n#x=y\n",
        )
        .unwrap();
        assert_eq!(got, pairs(&[("key", "value with  spaces  ")]));
    }

    #[test]
    fn parse_properties_joins_continuation_lines() {
        let text = "list=a,\\\n     b,\\\n\tc\nnext=1\neven=x\\\\\nodd=y\\\\\\\n  z\n# comment \\\nafter=2\n";
        let got = parse_properties(text).unwrap();
        assert_eq!(
            got,
            pairs(&[
                ("list", "a,b,c"),
                ("next", "1"),
                ("even", "x\\"),
                ("odd", "y\\z"),
                ("after", "2")
            ])
        );
        // A continuation into a blank line ends the value; a continuation at EOF is dropped.
        assert_eq!(
            parse_properties("a=1\\\n\nb=2\\").unwrap(),
            pairs(&[("a", "1"), ("b", "2")])
        );
        // A continued line starting with '#' is not a comment.
        assert_eq!(
            parse_properties("a=1\\\n  #2").unwrap(),
            pairs(&[("a", "1#2")])
        );
    }

    #[test]
    fn parse_properties_resolves_escapes() {
        let text = "tab=a\\tb\nnl=a\\nb\\r\\f\nslash=a\\\\b\nother=\\q\\=\\:\nkey\\ with\\=sep\\:s=v\nuni=\\u0041\\u00e9\\u4E2D\nemoji=\\uD83D\\uDE00\n";
        let got = parse_properties(text).unwrap();
        assert_eq!(
            got,
            pairs(&[
                ("tab", "a\tb"),
                ("nl", "a\nb\r\x0c"),
                ("slash", "a\\b"),
                ("other", "q=:"),
                ("key with=sep:s", "v"),
                ("uni", "Aé中"),
                ("emoji", "😀"),
            ])
        );
    }

    #[test]
    fn parse_properties_rejects_malformed_unicode_escapes() {
        assert!(parse_properties("a=\\u12G4\n").is_err());
        assert!(parse_properties("a=\\u12").is_err());
        let err = parse_properties("ok=1\nk\\uZZZZ=v\n").unwrap_err();
        assert!(err.contains("line 2"), "{err}");
    }

    #[test]
    fn parse_properties_handles_crlf_and_cr_line_endings() {
        let got = parse_properties("a=1\r\nb=2\\\r\n   3\r\n\r\n#c\r\nd=4\re=5").unwrap();
        assert_eq!(
            got,
            pairs(&[("a", "1"), ("b", "23"), ("d", "4"), ("e", "5")])
        );
    }

    #[test]
    fn parse_properties_keeps_duplicates_in_file_order() {
        let got = parse_properties("a=1\na=2\n").unwrap();
        assert_eq!(got, pairs(&[("a", "1"), ("a", "2")]));
    }

    #[test]
    fn entries_know_their_first_line() {
        let got = entries("# c\n\nlist=a,\\\n  b\r\nnext=1\rlast=2").unwrap();
        let lines: Vec<(&str, usize)> = got.iter().map(|e| (e.key.as_str(), e.line)).collect();
        assert_eq!(lines, [("list", 3), ("next", 5), ("last", 6)]);
    }

    #[test]
    fn edit_changes_only_the_lines_of_changed_keys() {
        let original = "# Operator's notes\n\n# the port\nlistenPort=9876\n  # indented comment\nscanNotActiveBrokerInterval : 5000\n\nlogLevel=info\n";
        let edited = edit(
            &utf8(original),
            &[
                ("scanNotActiveBrokerInterval", "7000"),
                ("orderMessageEnable", "true"),
            ],
        )
        .unwrap();
        assert_eq!(
            edited.text,
            "# Operator's notes\n\n# the port\nlistenPort=9876\n  # indented comment\nscanNotActiveBrokerInterval=7000\n\nlogLevel=info\norderMessageEnable=true\n"
        );
    }

    #[test]
    fn edit_replaces_continued_entries_and_every_duplicate_and_keeps_crlf() {
        let original = "a=1\r\nlist=x,\\\r\n   y\r\n# keep\r\na=2\r\nz=9";
        let edited = edit(&utf8(original), &[("a", "3"), ("list", "q"), ("new", "n")]).unwrap();
        assert_eq!(
            edited.text,
            "a=3\r\nlist=q\r\n# keep\r\na=3\r\nz=9\r\nnew=n\r\n"
        );
        assert_eq!(
            parse_properties(&edited.text).unwrap(),
            pairs(&[
                ("a", "3"),
                ("list", "q"),
                ("a", "3"),
                ("z", "9"),
                ("new", "n")
            ])
        );
    }

    #[test]
    fn edit_of_an_empty_file_writes_only_the_changes() {
        let edited = edit(&utf8(""), &[("logLevel", "debug")]).unwrap();
        assert_eq!(edited.text, "logLevel=debug\n");
    }

    #[test]
    fn edited_values_read_back_unchanged() {
        let tricky = [
            ("k", " leading blank"),
            ("k", "back\\slash"),
            ("k", "tab\tand\nnewline"),
            ("k", "v=with:separators#!"),
            ("k", "é 中 😀"),
            ("key with=sep:s", "v"),
            ("#hash", "v"),
        ];
        for encoding in [Encoding::Utf8, Encoding::Latin1] {
            for (key, value) in tricky {
                let file = PropertiesFile {
                    text: "# c\n".into(),
                    encoding,
                };
                let edited = edit(&file, &[(key, value)]).unwrap();
                assert_eq!(
                    parse_properties(&edited.text).unwrap(),
                    pairs(&[(key, value)]),
                    "{encoding:?} {:?}",
                    edited.text
                );
                if encoding == Encoding::Latin1 {
                    assert!(edited.text.is_ascii(), "{:?}", edited.text);
                }
            }
        }
    }

    #[test]
    fn a_latin1_file_keeps_its_bytes() {
        let dir = crate::test_support::TempDir::new("latin1");
        let path = dir.join("ns.conf");
        std::fs::write(&path, b"# caf\xe9\nproductEnvName=caf\xe9\nlistenPort=1\n").unwrap();
        let file = PropertiesFile::read(&path).unwrap();
        assert_eq!(file.encoding, Encoding::Latin1);
        let edited = edit(&file, &[("listenPort", "2")]).unwrap();
        assert_eq!(
            edited.to_bytes(),
            b"# caf\xe9\nproductEnvName=caf\xe9\nlistenPort=2\n"
        );
    }
}
