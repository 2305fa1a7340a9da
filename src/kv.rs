//! The KV config store: namespace -> (key -> value), all strings, persisted to
//! `kvConfigPath` in Java's `KVConfigSerializeWrapper` format (PROTOCOL.md §7).
//!
//! It backs PUT_KV_CONFIG (100), GET_KV_CONFIG (101), DELETE_KV_CONFIG (102) and
//! GET_KVLIST_BY_NAMESPACE (219); the route code reads the `ORDER_TOPIC_CONFIG` namespace.
//!
//! Every change is on disk before the call returns (through [`crate::durable_file`], which
//! keeps `<path>.bak` like Java), so a response never acknowledges a change a crash could
//! lose; if writing fails the change is undone and the error returned. The file is Java's
//! own shape, so either server can read the other's file. Loading is strict about damage:
//! a corrupt main file falls back to `.bak`, and if that fails too `open` refuses rather
//! than start with an empty store that the next write would make permanent.
//!
//! BTreeMaps keep namespaces and keys sorted, so the file and the 219 body are stable.

use crate::durable_file::{replace_file, sibling};
use crate::remoting::json::{self, Seq, Value};
use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// One namespace's entries.
type KvTable = BTreeMap<String, String>;

pub struct KvStore {
    /// Where the store persists; None for an in-memory store.
    path: Option<PathBuf>,
    config_table: BTreeMap<String, KvTable>,
    /// Per-namespace change counter; only namespaces that have ever changed are present.
    generations: BTreeMap<String, u64>,
}

#[derive(Debug)]
pub enum KvError {
    /// The file exists but could not be read.
    Io(PathBuf, io::Error),
    /// The file does not hold a KV config and no usable backup replaced it.
    Corrupt {
        path: PathBuf,
        reason: String,
        /// What happened with `<path>.bak`.
        backup: String,
    },
}

impl fmt::Display for KvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KvError::Io(path, err) => write!(f, "cannot read KV config {}: {err}", path.display()),
            KvError::Corrupt {
                path,
                reason,
                backup,
            } => write!(
                f,
                "KV config {} is corrupt ({reason}) and {backup}",
                path.display()
            ),
        }
    }
}

impl std::error::Error for KvError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            KvError::Io(_, err) => Some(err),
            KvError::Corrupt { .. } => None,
        }
    }
}

/// What reading one candidate file gave.
enum Loaded {
    Missing,
    /// Present but 0 bytes (or only whitespace): Java's loader treats it as no content.
    Empty,
    Table(BTreeMap<String, KvTable>),
    Corrupt(String),
}

fn load(path: &Path) -> Result<Loaded, KvError> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Loaded::Missing),
        Err(e) => return Err(KvError::Io(path.to_path_buf(), e)),
    };
    if bytes.iter().all(|b| b.is_ascii_whitespace()) {
        return Ok(Loaded::Empty);
    }
    Ok(match decode_file(&bytes) {
        Ok(table) => Loaded::Table(table),
        Err(reason) => Loaded::Corrupt(reason),
    })
}

/// Reads `{"configTable":{ns:{k:v}}}`. A missing or null `configTable` is an empty store;
/// anything that is not that shape is corrupt.
fn decode_file(bytes: &[u8]) -> Result<BTreeMap<String, KvTable>, String> {
    // The file is our own (or Java's) output, so strings may be as long as the file.
    let limits = json::Limits {
        max_string_len: bytes.len(),
        ..json::Limits::default()
    };
    let root = json::parse_with(bytes, &limits).map_err(|e| e.to_string())?;
    if root.as_object().is_none() {
        return Err("top level is not a JSON object".to_string());
    }
    let mut config_table = BTreeMap::new();
    let namespaces = match root.get("configTable") {
        None | Some(Value::Null) => return Ok(config_table),
        Some(Value::Object(namespaces)) => namespaces,
        Some(_) => return Err("\"configTable\" is not an object".to_string()),
    };
    for (namespace, entries) in namespaces {
        let entries = match entries {
            Value::Null => continue,
            Value::Object(entries) => entries,
            _ => return Err(format!("namespace {namespace:?} is not an object")),
        };
        let table: &mut KvTable = config_table.entry(namespace.clone()).or_default();
        for (key, value) in entries {
            // fastjson reads a non-string into a String field as its text; null means absent.
            if !value.is_null() {
                table.insert(key.clone(), value.to_text());
            }
        }
    }
    Ok(config_table)
}

impl KvStore {
    /// Loads the store persisted at `path`. A missing file is an empty store. A corrupt
    /// file (or an empty one while a `.bak` exists) is replaced by `<path>.bak` if that
    /// parses; otherwise this fails, so the server refuses to start rather than lose data.
    pub fn open(path: &Path) -> Result<KvStore, KvError> {
        let bak = sibling(path, ".bak");
        let mut main_was_empty = false;
        let reason = match load(path)? {
            Loaded::Table(config_table) => return Ok(Self::with_table(path, config_table)),
            Loaded::Missing => {
                // Java's string2File deletes the file before renaming the new one in; a
                // crash there leaves only the backup.
                match load(&bak)? {
                    Loaded::Table(config_table) => {
                        log::warn!(
                            "KV config {} is missing; loaded its backup {}",
                            path.display(),
                            bak.display()
                        );
                        return Ok(Self::with_table(path, config_table));
                    }
                    Loaded::Missing | Loaded::Empty => {
                        return Ok(Self::with_table(path, BTreeMap::new()))
                    }
                    Loaded::Corrupt(bak_reason) => {
                        return Err(KvError::Corrupt {
                            path: path.to_path_buf(),
                            reason: "the file is missing".to_string(),
                            backup: format!(
                                "its backup {} is corrupt too ({bak_reason})",
                                bak.display()
                            ),
                        })
                    }
                }
            }
            Loaded::Empty => {
                main_was_empty = true;
                "the file is empty".to_string()
            }
            Loaded::Corrupt(reason) => reason,
        };
        log::error!(
            "KV config {} is unusable ({reason}); trying its backup {}",
            path.display(),
            bak.display()
        );
        let corrupt = |backup: String| KvError::Corrupt {
            path: path.to_path_buf(),
            reason: reason.clone(),
            backup,
        };
        match load(&bak) {
            Ok(Loaded::Table(config_table)) => {
                log::warn!(
                    "KV config {} is unusable ({reason}); loaded its backup {} instead",
                    path.display(),
                    bak.display()
                );
                Ok(Self::with_table(path, config_table))
            }
            // An empty file with nothing behind it is what Java would load as an empty store.
            Ok(Loaded::Missing) if main_was_empty => Ok(Self::with_table(path, BTreeMap::new())),
            Ok(Loaded::Missing) => Err(corrupt(format!("there is no backup {}", bak.display()))),
            Ok(Loaded::Empty) => Err(corrupt(format!("its backup {} is empty", bak.display()))),
            Ok(Loaded::Corrupt(bak_reason)) => Err(corrupt(format!(
                "its backup {} is corrupt too ({bak_reason})",
                bak.display()
            ))),
            Err(e) => Err(corrupt(format!("its backup could not be read: {e}"))),
        }
    }

    fn with_table(path: &Path, config_table: BTreeMap<String, KvTable>) -> KvStore {
        KvStore {
            path: Some(path.to_path_buf()),
            config_table,
            generations: BTreeMap::new(),
        }
    }

    /// A store that is never persisted (tests, benches).
    pub fn in_memory() -> KvStore {
        KvStore {
            path: None,
            config_table: BTreeMap::new(),
            generations: BTreeMap::new(),
        }
    }

    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Sets `namespace`/`key` to `value` and persists before returning. If persisting
    /// fails the store is left as it was and the error is returned.
    pub fn put(&mut self, namespace: &str, key: &str, value: &str) -> io::Result<()> {
        let namespace_existed = self.config_table.contains_key(namespace);
        let previous = self
            .config_table
            .entry(namespace.to_string())
            .or_default()
            .insert(key.to_string(), value.to_string());
        if let Err(e) = self.persist() {
            match previous {
                Some(previous) => {
                    if let Some(table) = self.config_table.get_mut(namespace) {
                        table.insert(key.to_string(), previous);
                    }
                }
                None if !namespace_existed => {
                    self.config_table.remove(namespace);
                }
                None => {
                    if let Some(table) = self.config_table.get_mut(namespace) {
                        table.remove(key);
                    }
                }
            }
            return Err(e);
        }
        self.bump(namespace);
        Ok(())
    }

    pub fn get(&self, namespace: &str, key: &str) -> Option<&str> {
        self.config_table
            .get(namespace)?
            .get(key)
            .map(String::as_str)
    }

    /// Removes `namespace`/`key` and persists, even when nothing was removed (as Java
    /// does). A namespace left empty is kept. On a persistence failure the entry is restored.
    pub fn delete(&mut self, namespace: &str, key: &str) -> io::Result<()> {
        let removed = self
            .config_table
            .get_mut(namespace)
            .and_then(|table| table.remove(key));
        if let Err(e) = self.persist() {
            if let (Some(previous), Some(table)) = (removed, self.config_table.get_mut(namespace)) {
                table.insert(key.to_string(), previous);
            }
            return Err(e);
        }
        if self.config_table.contains_key(namespace) {
            self.bump(namespace);
        }
        Ok(())
    }

    pub fn namespace(&self, namespace: &str) -> Option<&BTreeMap<String, String>> {
        self.config_table.get(namespace)
    }

    /// The GET_KVLIST_BY_NAMESPACE body, `{"table":{"k":"v",...}}`; None if the namespace
    /// does not exist (Java answers QUERY_NOT_FOUND then).
    pub fn encode_kv_table(&self, namespace: &str) -> Option<Vec<u8>> {
        let table = self.config_table.get(namespace)?;
        let mut out = Vec::with_capacity(16 + table_size_hint(table));
        let mut o = Seq::object(&mut out);
        write_table(o.field("table"), table);
        o.end();
        Some(out)
    }

    /// The file content, `{"configTable":{"ns":{"k":"v"}}}`, compact with fastjson's default
    /// escaping (non-ASCII raw), as Java's `toJson(false)` writes it.
    pub fn encode_file(&self) -> Vec<u8> {
        let size: usize = self
            .config_table
            .iter()
            .map(|(ns, table)| ns.len() + 4 + table_size_hint(table))
            .sum();
        let mut out = Vec::with_capacity(20 + size);
        let mut o = Seq::object(&mut out);
        let mut namespaces = Seq::object(o.field("configTable"));
        for (namespace, table) in &self.config_table {
            write_table(namespaces.key(namespace), table);
        }
        namespaces.end();
        o.end();
        out
    }

    /// A counter bumped by every successful put/delete on an existing `namespace`, so a
    /// cache built from it (routes' orderTopicConf) can tell it is stale. 0 until then.
    pub fn generation(&self, namespace: &str) -> u64 {
        self.generations.get(namespace).copied().unwrap_or(0)
    }

    fn bump(&mut self, namespace: &str) {
        match self.generations.get_mut(namespace) {
            Some(generation) => *generation += 1,
            None => {
                self.generations.insert(namespace.to_string(), 1);
            }
        }
    }

    fn persist(&self) -> io::Result<()> {
        match &self.path {
            Some(path) => replace_file(path, &self.encode_file()),
            None => Ok(()),
        }
    }
}

fn table_size_hint(table: &KvTable) -> usize {
    table
        .iter()
        .map(|(k, v)| k.len() + v.len() + 6)
        .sum::<usize>()
        + 2
}

fn write_table(out: &mut Vec<u8>, table: &KvTable) {
    let mut o = Seq::object(out);
    for (key, value) in table {
        json::write_str(o.key(key), value);
    }
    o.end();
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    use crate::test_support::{fixture_path, TempDir};

    /// The KV file inside a test's directory.
    trait KvFile {
        fn file(&self) -> PathBuf;
    }

    impl KvFile for TempDir {
        fn file(&self) -> PathBuf {
            self.join("kvConfig.json")
        }
    }

    #[test]
    fn put_get_delete_and_namespace_round_trip() {
        let mut kv = KvStore::in_memory();
        assert_eq!(kv.path(), None);
        assert_eq!(kv.get("ORDER_TOPIC_CONFIG", "TopicA"), None);
        kv.put("ORDER_TOPIC_CONFIG", "TopicA", "broker-a:4")
            .unwrap();
        kv.put("ORDER_TOPIC_CONFIG", "TopicB", "broker-b:8")
            .unwrap();
        kv.put("ORDER_TOPIC_CONFIG", "TopicA", "broker-a:2")
            .unwrap();
        assert_eq!(kv.get("ORDER_TOPIC_CONFIG", "TopicA"), Some("broker-a:2"));
        let ns = kv.namespace("ORDER_TOPIC_CONFIG").unwrap();
        assert_eq!(ns.len(), 2);
        assert_eq!(ns.get("TopicB").map(String::as_str), Some("broker-b:8"));
        kv.delete("ORDER_TOPIC_CONFIG", "TopicA").unwrap();
        kv.delete("ORDER_TOPIC_CONFIG", "TopicB").unwrap();
        kv.delete("NOPE", "x").unwrap();
        assert_eq!(kv.get("ORDER_TOPIC_CONFIG", "TopicA"), None);
        // An emptied namespace stays, as in Java.
        assert_eq!(
            kv.namespace("ORDER_TOPIC_CONFIG").map(BTreeMap::len),
            Some(0)
        );
        assert_eq!(kv.namespace("NOPE"), None);
    }

    #[test]
    fn kv_table_body_is_compact_and_absent_for_unknown_namespaces() {
        let mut kv = KvStore::in_memory();
        assert_eq!(kv.encode_kv_table("ns"), None);
        kv.put("ns", "b", "2").unwrap();
        kv.put("ns", "a", "q\"é").unwrap();
        assert_eq!(
            String::from_utf8(kv.encode_kv_table("ns").unwrap()).unwrap(),
            "{\"table\":{\"a\":\"q\\\"é\",\"b\":\"2\"}}"
        );
        kv.delete("ns", "a").unwrap();
        kv.delete("ns", "b").unwrap();
        assert_eq!(kv.encode_kv_table("ns").unwrap(), b"{\"table\":{}}");
    }

    #[test]
    fn generation_moves_on_every_change_to_its_namespace_only() {
        let mut kv = KvStore::in_memory();
        assert_eq!(kv.generation("ORDER_TOPIC_CONFIG"), 0);
        kv.put("ORDER_TOPIC_CONFIG", "T", "b:4").unwrap();
        assert_eq!(kv.generation("ORDER_TOPIC_CONFIG"), 1);
        kv.put("other", "k", "v").unwrap();
        assert_eq!(kv.generation("ORDER_TOPIC_CONFIG"), 1);
        kv.delete("ORDER_TOPIC_CONFIG", "missing").unwrap();
        kv.delete("ORDER_TOPIC_CONFIG", "T").unwrap();
        assert_eq!(kv.generation("ORDER_TOPIC_CONFIG"), 3);
        kv.delete("never", "k").unwrap();
        assert_eq!(kv.generation("never"), 0);
    }

    #[test]
    fn file_after_put_is_exactly_the_compact_java_shape() {
        let dir = TempDir::new("compact");
        let mut kv = KvStore::open(&dir.file()).unwrap();
        assert_eq!(kv.path(), Some(dir.file().as_path()));
        kv.put("ORDER_TOPIC_CONFIG", "TopicA", "broker-a:4;broker-b:4")
            .unwrap();
        kv.put("PROJECT_CONFIG", "tenant-unicode", "生产\n")
            .unwrap();
        assert_eq!(
            fs::read_to_string(dir.file()).unwrap(),
            "{\"configTable\":{\"ORDER_TOPIC_CONFIG\":{\"TopicA\":\"broker-a:4;broker-b:4\"},\
             \"PROJECT_CONFIG\":{\"tenant-unicode\":\"生产\\n\"}}}"
        );
        assert_eq!(fs::read(dir.file()).unwrap(), kv.encode_file());
    }

    #[test]
    fn reopening_finds_what_was_put_and_not_what_was_deleted() {
        let dir = TempDir::new("reopen");
        {
            let mut kv = KvStore::open(&dir.file()).unwrap();
            kv.put("ns", "kept", "1").unwrap();
            kv.put("ns", "gone", "2").unwrap();
            kv.put("empty", "x", "3").unwrap();
            kv.delete("ns", "gone").unwrap();
            kv.delete("empty", "x").unwrap();
        }
        let kv = KvStore::open(&dir.file()).unwrap();
        assert_eq!(kv.get("ns", "kept"), Some("1"));
        assert_eq!(kv.get("ns", "gone"), None);
        assert_eq!(kv.namespace("empty").map(BTreeMap::len), Some(0));
        // The previous version was kept as .bak.
        let bak = fs::read_to_string(sibling(&dir.file(), ".bak")).unwrap();
        assert!(bak.contains("\"x\":\"3\""), "{bak}");
    }

    #[test]
    fn java_pretty_printed_file_loads() {
        let dir = TempDir::new("java");
        let fixture = fixture_path("kvconfig_file_java.json");
        fs::copy(&fixture, dir.file())
            .unwrap_or_else(|e| panic!("fixture {}: {e}", fixture.display()));
        let kv = KvStore::open(&dir.file()).unwrap();
        assert_eq!(
            kv.get("ORDER_TOPIC_CONFIG", "orders-eu"),
            Some("broker-a:4;broker-b:4")
        );
        assert_eq!(kv.get("PROJECT_CONFIG", "tenant-a"), Some("project-alpha"));
        assert_eq!(kv.get("PROJECT_CONFIG", "tenant-unicode"), Some("生产"));
        assert_eq!(kv.namespace("PROJECT_CONFIG").map(BTreeMap::len), Some(2));
    }

    #[test]
    fn missing_file_without_backup_is_an_empty_store() {
        let dir = TempDir::new("missing");
        let kv = KvStore::open(&dir.join("sub").join("kvConfig.json")).unwrap();
        assert!(kv.config_table.is_empty());
    }

    #[test]
    fn empty_file_is_empty_without_backup_and_corrupt_with_one() {
        let dir = TempDir::new("empty");
        fs::write(dir.file(), b"").unwrap();
        assert!(KvStore::open(&dir.file()).unwrap().config_table.is_empty());
        fs::write(
            sibling(&dir.file(), ".bak"),
            br#"{"configTable":{"ns":{"k":"v"}}}"#,
        )
        .unwrap();
        assert_eq!(
            KvStore::open(&dir.file()).unwrap().get("ns", "k"),
            Some("v")
        );
    }

    #[test]
    fn truncated_file_with_good_backup_recovers_from_backup() {
        let dir = TempDir::new("truncated-bak");
        {
            let mut kv = KvStore::open(&dir.file()).unwrap();
            kv.put("ns", "a", "1").unwrap();
            kv.put("ns", "b", "2").unwrap();
        }
        let content = fs::read(dir.file()).unwrap();
        fs::write(dir.file(), &content[..content.len() - 3]).unwrap();
        let kv = KvStore::open(&dir.file()).unwrap();
        // The backup holds the version before the last put.
        assert_eq!(kv.get("ns", "a"), Some("1"));
        assert_eq!(kv.get("ns", "b"), None);
    }

    #[test]
    fn truncated_file_without_backup_refuses_to_open() {
        let dir = TempDir::new("truncated");
        fs::write(dir.file(), br#"{"configTable":{"ns":{"k":"v""#).unwrap();
        match KvStore::open(&dir.file()) {
            Err(KvError::Corrupt { path, backup, .. }) => {
                assert_eq!(path, dir.file());
                assert!(backup.contains("no backup"), "{backup}");
            }
            other => panic!("expected Corrupt, got {:?}", other.err()),
        }
    }

    #[test]
    fn corrupt_file_and_corrupt_backup_refuse_to_open() {
        let dir = TempDir::new("both-corrupt");
        fs::write(dir.file(), b"{\"configTable\":[1]}").unwrap();
        fs::write(sibling(&dir.file(), ".bak"), b"not json").unwrap();
        let err = KvStore::open(&dir.file()).err().unwrap();
        let text = err.to_string();
        assert!(
            text.contains("not an object") && text.contains("corrupt too"),
            "{text}"
        );
    }

    #[test]
    fn missing_file_with_backup_loads_the_backup() {
        let dir = TempDir::new("only-bak");
        fs::write(
            sibling(&dir.file(), ".bak"),
            br#"{"configTable":{"ns":{"k":"v"}}}"#,
        )
        .unwrap();
        assert_eq!(
            KvStore::open(&dir.file()).unwrap().get("ns", "k"),
            Some("v")
        );
    }

    #[test]
    fn non_string_values_load_as_their_text() {
        let dir = TempDir::new("coerce");
        fs::write(
            dir.file(),
            br#"{"configTable":{"ns":{"n":4,"b":true,"z":null},"skip":null}}"#,
        )
        .unwrap();
        let kv = KvStore::open(&dir.file()).unwrap();
        assert_eq!(kv.get("ns", "n"), Some("4"));
        assert_eq!(kv.get("ns", "b"), Some("true"));
        assert_eq!(kv.get("ns", "z"), None);
        assert_eq!(kv.namespace("skip"), None);
    }

    #[test]
    fn failed_persistence_rolls_back_puts_and_deletes() {
        let dir = TempDir::new("rollback");
        let blocker = dir.join("sub");
        let mut kv = KvStore::open(&blocker.join("kvConfig.json")).unwrap();
        kv.put("ns", "k", "v1").unwrap();
        // A regular file where the parent directory should be makes every write fail.
        fs::remove_dir_all(&blocker).unwrap();
        fs::write(&blocker, b"in the way").unwrap();
        assert!(kv.put("ns", "k", "v2").is_err());
        assert!(kv.put("ns", "new", "x").is_err());
        assert!(kv.put("fresh", "k", "x").is_err());
        assert!(kv.delete("ns", "k").is_err());
        assert_eq!(kv.get("ns", "k"), Some("v1"));
        assert_eq!(kv.get("ns", "new"), None);
        assert_eq!(kv.namespace("fresh"), None);
        assert_eq!(kv.generation("ns"), 1);
        assert_eq!(kv.generation("fresh"), 0);
    }
}
