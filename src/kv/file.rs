//! The KV file, `{"configTable":{ns:{k:v}}}` (docs/protocol.md §7). Each namespace is encoded
//! once per change as its 219 body `{"table":{...}}`; the file is assembled from those, so a
//! write re-encodes only the namespaces that changed.

use super::{Entries, Table};
use crate::durable_file::sibling;
use crate::remoting::json::{self, Value};
use bytes::Bytes;
use std::fmt;
use std::io;
use std::path::Path;
use std::sync::Arc;

/// What every namespace body starts with; the rest but the closing brace is its table.
const BODY_PREFIX: &[u8] = b"{\"table\":";

/// One line naming the file (and what its backup held).
#[derive(Debug)]
pub struct KvError(String);

impl fmt::Display for KvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for KvError {}

enum Loaded {
    Missing,
    /// Present but 0 bytes (or only whitespace): Java's loader treats it as no content.
    Empty,
    Table(Table),
    Corrupt(String),
}

fn load(path: &Path) -> Result<Loaded, KvError> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Loaded::Missing),
        Err(e) => {
            let path = path.display();
            return Err(KvError(format!("cannot read KV config {path}: {e}")));
        }
    };
    if bytes.iter().all(|b| b.is_ascii_whitespace()) {
        return Ok(Loaded::Empty);
    }
    Ok(match decode_file(&bytes) {
        Ok(table) => Loaded::Table(table),
        Err(reason) => Loaded::Corrupt(reason),
    })
}

/// Reads the file; a missing or null `configTable` is an empty store, another shape corrupt.
fn decode_file(bytes: &[u8]) -> Result<Table, String> {
    // The file is our own (or Java's) output, so strings may be as long as the file.
    let limits = json::Limits {
        max_string_len: bytes.len(),
        ..json::Limits::default()
    };
    let root = json::parse_with(bytes, &limits).map_err(|e| e.to_string())?;
    if root.as_object().is_none() {
        return Err("top level is not a JSON object".to_string());
    }
    let mut table = Table::new();
    let namespaces = match root.get("configTable") {
        None | Some(Value::Null) => return Ok(table),
        Some(Value::Object(namespaces)) => namespaces,
        Some(_) => return Err("\"configTable\" is not an object".to_string()),
    };
    for (namespace, entries) in namespaces {
        let entries = match entries {
            Value::Null => continue,
            Value::Object(entries) => entries,
            _ => return Err(format!("namespace {namespace:?} is not an object")),
        };
        let mut decoded = Entries::new();
        for (key, value) in entries {
            // fastjson reads a non-string into a String field as its text; null means absent.
            if !value.is_null() {
                decoded.insert(Arc::from(key.as_str()), Arc::from(value.to_text()));
            }
        }
        // A namespace repeated in the file: its entries are merged, as before.
        let ns = table.entry(Arc::from(namespace.as_str())).or_default();
        ns.entries.extend(decoded);
    }
    for ns in table.values_mut() {
        ns.body = encode_body(&ns.entries);
    }
    Ok(table)
}

/// Loads the store at `path` (missing: empty). A corrupt or missing file with a `.bak` loads
/// the `.bak` (Java's string2File deletes the file before renaming the new one in); else a
/// corrupt file fails the start rather than lose data.
pub(super) fn open(path: &Path) -> Result<Table, KvError> {
    let bak = sibling(path, ".bak");
    let (reason, missing, empty) = match load(path)? {
        Loaded::Table(table) => return Ok(table),
        Loaded::Missing => (String::from("the file is missing"), true, false),
        Loaded::Empty => (String::from("the file is empty"), false, true),
        Loaded::Corrupt(reason) => (reason, false, false),
    };
    if !missing {
        log::error!(
            "KV config {} is unusable ({reason}); trying its backup {}",
            path.display(),
            bak.display()
        );
    }
    let corrupt = |backup: String| {
        let path = path.display();
        KvError(format!(
            "KV config {path} is corrupt ({reason}) and {backup}"
        ))
    };
    match load(&bak) {
        Ok(Loaded::Table(table)) => {
            let state = match missing {
                true => "missing".to_string(),
                false => format!("unusable ({reason})"),
            };
            log::warn!(
                "KV config {} is {state}; loaded its backup {} instead",
                path.display(),
                bak.display()
            );
            Ok(table)
        }
        // Nothing at all, or an empty file with nothing behind it: what Java loads as empty.
        Ok(Loaded::Missing | Loaded::Empty) if missing => Ok(Table::new()),
        Ok(Loaded::Missing) if empty => Ok(Table::new()),
        Ok(Loaded::Missing) => Err(corrupt(format!("there is no backup {}", bak.display()))),
        Ok(Loaded::Empty) => Err(corrupt(format!("its backup {} is empty", bak.display()))),
        Ok(Loaded::Corrupt(bak_reason)) => Err(corrupt(format!(
            "its backup {} is corrupt too ({bak_reason})",
            bak.display()
        ))),
        Err(e) if missing => Err(e),
        Err(e) => Err(corrupt(format!("its backup could not be read: {e}"))),
    }
}

/// `{"table":{"k":"v",...}}`, compact with fastjson's default escaping (non-ASCII raw).
pub(super) fn encode_body(entries: &Entries) -> Bytes {
    let size: usize = entries.iter().map(|(k, v)| k.len() + v.len() + 6).sum();
    let mut out = Vec::with_capacity(BODY_PREFIX.len() + size + 3);
    out.extend_from_slice(BODY_PREFIX);
    let mut table = json::Seq::object(&mut out);
    for (key, value) in entries.iter() {
        json::write_str(table.key(key), value);
    }
    table.end();
    out.push(b'}');
    Bytes::from(out)
}

/// The `{...}` table inside a namespace body.
fn table_part(body: &[u8]) -> &[u8] {
    match body.len() {
        n if n > BODY_PREFIX.len() => &body[BODY_PREFIX.len()..n - 1],
        _ => b"{}",
    }
}

/// `{"configTable":{"ns":{"k":"v"}}}`, copied from the namespaces' bodies.
pub(super) fn encode_file(table: &Table) -> Vec<u8> {
    let size: usize = table.iter().map(|(k, ns)| k.len() + ns.body.len()).sum();
    let mut out = Vec::with_capacity(size + 32);
    out.extend_from_slice(b"{\"configTable\":");
    let mut namespaces = json::Seq::object(&mut out);
    for (name, ns) in table {
        namespaces.key(name).extend_from_slice(table_part(&ns.body));
    }
    namespaces.end();
    out.push(b'}');
    out
}
