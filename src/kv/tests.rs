use super::*;
use crate::durable_file::sibling;
use crate::test_support::{fixture_path, TempDir};
use std::fs;
use std::sync::mpsc;
use std::time::Duration;

impl KvStore {
    /// Changes handed to the writer and not reported yet.
    fn in_flight(&self) -> usize {
        self.in_flight.changes
    }

    fn namespace(&self, namespace: &str) -> Option<&Entries> {
        self.namespaces.get(namespace).map(|ns| &ns.entries)
    }
}

/// A store with its writer thread, driven the way the processor drives it.
struct Harness {
    /// Removed when the harness is dropped.
    _dir: TempDir,
    file: PathBuf,
    kv: KvStore,
    writer: Option<DurableWriter>,
    thread: Option<std::thread::JoinHandle<()>>,
    woken: mpsc::Receiver<()>,
    next_id: u64,
}

impl Harness {
    fn new(label: &str) -> Harness {
        let dir = TempDir::new(label);
        Self::open(dir)
    }

    fn open(dir: TempDir) -> Harness {
        let file = dir.join("kvConfig.json");
        Self::at(dir, file)
    }

    /// A store whose file is `file` (somewhere in `dir`).
    fn at(dir: TempDir, file: PathBuf) -> Harness {
        let kv = KvStore::open(&file).unwrap();
        let (tx, woken) = mpsc::channel();
        let wake = Box::new(move || {
            let _ = tx.send(());
        });
        let (writer, thread) = kv.spawn_writer("kv-test-writer", wake).unwrap();
        Harness {
            _dir: dir,
            file,
            kv,
            writer: Some(writer),
            thread: Some(thread),
            woken,
            next_id: 0,
        }
    }

    fn file(&self) -> PathBuf {
        self.file.clone()
    }

    fn writer(&self) -> &DurableWriter {
        self.writer.as_ref().unwrap()
    }

    fn submit(&mut self, change: Change) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        assert!(self.writer().submit(Job::Change { id, change }).is_ok());
        id
    }

    /// The writer's next report (waiting for its wake-up, not sleeping).
    fn next_done(&self) -> Done {
        loop {
            if let Some(done) = self.writer().try_done().expect("the writer runs") {
                return done;
            }
            self.woken
                .recv_timeout(Duration::from_secs(30))
                .expect("the writer reports");
        }
    }

    fn next_commit(&mut self) -> Commit {
        match self.next_done() {
            Done::Changes(commit) => {
                self.kv.apply(&commit);
                commit
            }
            Done::File { .. } => panic!("expected a commit"),
        }
    }

    /// One change, written and applied; Err is the writer's or the limits' text.
    fn write(&mut self, prepared: Result<Option<Change>, KvRefusal>) -> Result<(), String> {
        let Some(change) = prepared.map_err(|r| r.to_string())? else {
            return Ok(());
        };
        self.submit(change);
        let commit = self.next_commit();
        assert_eq!(commit.changes.len(), 1);
        commit.result.map(|_| ())
    }

    fn put(&mut self, ns: &str, key: &str, value: &str) -> Result<(), String> {
        let prepared = self.kv.prepare_put(ns, key, value);
        self.write(prepared)
    }

    fn delete(&mut self, ns: &str, key: &str) -> Result<(), String> {
        let prepared = self.kv.prepare_delete(ns, key);
        self.write(prepared)
    }

    /// Holds the writer until the returned sender is dropped (jobs queue up behind it).
    fn block_writer(&mut self) -> mpsc::Sender<()> {
        let (release, wait) = mpsc::channel::<()>();
        self.next_id += 1;
        let write: FileWrite = Box::new(move || {
            let _ = wait.recv();
            Ok(())
        });
        let job = Job::File {
            id: self.next_id,
            write,
        };
        assert!(self.writer().submit(job).is_ok());
        release
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        drop(self.writer.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn body_text(kv: &KvStore, ns: &str) -> Option<String> {
    kv.namespace_body(ns)
        .map(|b| String::from_utf8(b.to_vec()).unwrap())
}

#[test]
fn put_get_delete_and_namespace_round_trip() {
    let mut h = Harness::new("kv-roundtrip");
    assert_eq!(h.kv.get("ORDER_TOPIC_CONFIG", "TopicA"), None);
    h.put("ORDER_TOPIC_CONFIG", "TopicA", "broker-a:4").unwrap();
    h.put("ORDER_TOPIC_CONFIG", "TopicB", "broker-b:8").unwrap();
    h.put("ORDER_TOPIC_CONFIG", "TopicA", "broker-a:2").unwrap();
    assert_eq!(h.kv.get("ORDER_TOPIC_CONFIG", "TopicA"), Some("broker-a:2"));
    let ns = h.kv.namespace("ORDER_TOPIC_CONFIG").unwrap();
    assert_eq!(ns.len(), 2);
    assert_eq!(ns.get("TopicB").map(|v| &**v), Some("broker-b:8"));
    h.delete("ORDER_TOPIC_CONFIG", "TopicA").unwrap();
    h.delete("ORDER_TOPIC_CONFIG", "TopicB").unwrap();
    h.delete("NOPE", "x").unwrap();
    assert_eq!(h.kv.get("ORDER_TOPIC_CONFIG", "TopicA"), None);
    // An emptied namespace stays, as in Java.
    assert_eq!(
        h.kv.namespace("ORDER_TOPIC_CONFIG").map(BTreeMap::len),
        Some(0)
    );
    assert_eq!(h.kv.namespace("NOPE"), None);
    assert_eq!(
        h.kv.usage(),
        Usage {
            entries: 1,
            bytes: 18
        }
    );
    assert_eq!(h.kv.in_flight(), 0);
}

#[test]
fn kv_table_body_is_compact_and_absent_for_unknown_namespaces() {
    let mut h = Harness::new("kv-body");
    assert_eq!(h.kv.namespace_body("ns"), None);
    h.put("ns", "b", "2").unwrap();
    h.put("ns", "a", "q\"é").unwrap();
    assert_eq!(
        body_text(&h.kv, "ns").unwrap(),
        "{\"table\":{\"a\":\"q\\\"é\",\"b\":\"2\"}}"
    );
    h.delete("ns", "a").unwrap();
    h.delete("ns", "b").unwrap();
    assert_eq!(body_text(&h.kv, "ns").unwrap(), "{\"table\":{}}");
}

#[test]
fn file_after_put_is_exactly_the_compact_java_shape() {
    let mut h = Harness::new("kv-compact");
    assert_eq!(h.kv.path(), h.file().as_path());
    h.put("ORDER_TOPIC_CONFIG", "TopicA", "broker-a:4;broker-b:4")
        .unwrap();
    h.put("PROJECT_CONFIG", "tenant-unicode", "生产\n").unwrap();
    assert_eq!(
        fs::read_to_string(h.file()).unwrap(),
        "{\"configTable\":{\"ORDER_TOPIC_CONFIG\":{\"TopicA\":\"broker-a:4;broker-b:4\"},\
         \"PROJECT_CONFIG\":{\"tenant-unicode\":\"生产\\n\"}}}"
    );
}

#[test]
fn reopening_finds_what_was_put_and_not_what_was_deleted() {
    let dir = TempDir::new("kv-reopen");
    let path = dir.join("kvConfig.json");
    {
        let mut h = Harness::open(dir);
        h.put("ns", "kept", "1").unwrap();
        h.put("ns", "gone", "2").unwrap();
        h.put("empty", "x", "3").unwrap();
        h.delete("ns", "gone").unwrap();
        h.delete("empty", "x").unwrap();
        let kv = KvStore::open(&path).unwrap();
        assert_eq!(kv.get("ns", "kept"), Some("1"));
        assert_eq!(kv.get("ns", "gone"), None);
        assert_eq!(kv.namespace("empty").map(BTreeMap::len), Some(0));
        assert_eq!(kv.usage(), h.kv.usage());
        assert_eq!(kv.namespace_body("ns"), h.kv.namespace_body("ns"));
        // The previous version was kept as .bak.
        let bak = fs::read_to_string(sibling(&path, ".bak")).unwrap();
        assert!(bak.contains("\"x\":\"3\""), "{bak}");
    }
}

#[test]
fn changes_become_visible_only_when_the_writer_reports_them_durable() {
    let mut h = Harness::new("kv-visible");
    h.put("ns", "k", "old").unwrap();
    let release = h.block_writer();
    let change = h.kv.prepare_put("ns", "k", "new").unwrap().unwrap();
    h.submit(change);
    let delete = h.kv.prepare_delete("ns", "k").unwrap().unwrap();
    h.submit(delete);
    assert_eq!(h.kv.in_flight(), 2);
    // In flight: readers still see what is on disk.
    assert_eq!(h.kv.get("ns", "k"), Some("old"));
    assert!(body_text(&h.kv, "ns").unwrap().contains("old"));
    drop(release);
    assert!(matches!(h.next_done(), Done::File { .. }));
    // Queued behind the blocked job, both changes went out in one write.
    let commit = h.next_commit();
    assert_eq!(commit.changes.len(), 2);
    assert!(commit.result.is_ok());
    assert_eq!(h.kv.get("ns", "k"), None);
    assert_eq!(h.kv.in_flight(), 0);
    assert_eq!(
        fs::read_to_string(h.file()).unwrap(),
        "{\"configTable\":{\"ns\":{}}}"
    );
}

#[test]
fn puts_and_deletes_that_change_nothing_are_not_written() {
    let mut h = Harness::new("kv-noop");
    assert_eq!(h.kv.prepare_delete("ns", "k"), Ok(None));
    h.put("ns", "k", "v").unwrap();
    assert_eq!(h.kv.prepare_put("ns", "k", "v"), Ok(None));
    // With a change in flight, the same requests must queue behind it to keep their order.
    let change = h.kv.prepare_put("ns", "k", "w").unwrap().unwrap();
    assert!(h.kv.prepare_put("ns", "k", "v").unwrap().is_some());
    assert!(h.kv.prepare_delete("ns", "absent").unwrap().is_some());
    assert_eq!(h.kv.in_flight(), 3);
    let _ = change;
}

#[test]
fn a_failed_write_changes_nothing_visible_or_on_disk_and_later_writes_work() {
    let dir = TempDir::new("kv-rollback");
    let sub = dir.join("sub");
    fs::create_dir_all(&sub).unwrap();
    // The store's directory will be made unusable.
    let mut h = Harness::at(dir, sub.join("kvConfig.json"));
    h.put("ns", "k", "v1").unwrap();
    let usage = h.kv.usage();
    // A regular file where the directory should be makes every write fail.
    fs::remove_dir_all(&sub).unwrap();
    fs::write(&sub, b"in the way").unwrap();
    for result in [
        h.put("ns", "k", "v2"),
        h.put("ns", "new", "x"),
        h.put("fresh", "k", "x"),
        h.delete("ns", "k"),
    ] {
        let error = result.unwrap_err();
        assert!(error.contains("kvConfig.json"), "{error}");
    }
    assert_eq!(h.kv.get("ns", "k"), Some("v1"));
    assert_eq!(h.kv.get("ns", "new"), None);
    assert_eq!(h.kv.namespace("fresh"), None);
    assert_eq!(h.kv.usage(), usage);
    assert_eq!(h.kv.in_flight(), 0);
    // Once the directory is back, the next write holds exactly what was acknowledged.
    fs::remove_file(&sub).unwrap();
    h.put("ns", "other", "y").unwrap();
    assert_eq!(
        fs::read_to_string(sub.join("kvConfig.json")).unwrap(),
        "{\"configTable\":{\"ns\":{\"k\":\"v1\",\"other\":\"y\"}}}"
    );
}

#[test]
fn limits_refuse_long_keys_and_values_and_a_full_store_with_their_setting() {
    let mut h = Harness::new("kv-limits");
    h.kv.set_limits(KvLimits {
        max_key_length: 8,
        max_value_length: 10,
        max_entries: 4,
        max_total_bytes: 40,
    });
    let refusal = |r: Result<Option<Change>, KvRefusal>| r.unwrap_err().to_string();
    let text = refusal(h.kv.prepare_put("namespace1", "k", "v"));
    assert!(text.contains("namespace too long: 10 bytes") && text.contains("kvMaxKeyLength"));
    let text = refusal(h.kv.prepare_put("ns", "key-is-long", "v"));
    assert!(text.contains("key too long: 11 bytes"), "{text}");
    let text = refusal(h.kv.prepare_put("ns", "k", "value-too-long"));
    assert!(text.contains("kvMaxValueLength"), "{text}");
    // Entries: the namespace and three keys.
    for key in ["a", "b", "c"] {
        h.put("ns", key, "0123456789").unwrap();
    }
    let text = refusal(h.kv.prepare_put("ns", "d", "x"));
    assert!(text.contains("kvMaxEntries"), "{text}");
    assert!(refusal(h.kv.prepare_put("other", "a", "x")).contains("kvMaxEntries"));
    assert_eq!(
        h.kv.usage(),
        Usage {
            entries: 4,
            bytes: 35
        }
    );
    // An unchanged value is no change at all; changing an existing key is not a new entry.
    assert_eq!(h.kv.prepare_put("ns", "b", "0123456789"), Ok(None));
    assert!(h.kv.prepare_put("ns", "a", "x").unwrap().is_some());
}

#[test]
fn byte_limit_counts_growth_and_changes_in_flight() {
    let mut h = Harness::new("kv-bytes");
    h.kv.set_limits(KvLimits {
        max_key_length: 8,
        max_value_length: 100,
        max_entries: 100,
        max_total_bytes: 40,
    });
    h.put("ns", "a", "0123456789").unwrap(); // 2 + 11
    let release = h.block_writer();
    // In flight: +11 (new key) and +5 (a grows): 13 + 16 = 29.
    let b = h.kv.prepare_put("ns", "b", "0123456789").unwrap().unwrap();
    let a =
        h.kv.prepare_put("ns", "a", "012345678901234")
            .unwrap()
            .unwrap();
    let refused = h.kv.prepare_put("ns", "c", "0123456789AB").unwrap_err();
    assert!(
        matches!(
            refused,
            KvRefusal::TooManyBytes {
                would_be: 42,
                limit: 40
            }
        ),
        "{refused}"
    );
    // A put that does not grow the store is fine even near the limit; deletes always are.
    let shrink = h.kv.prepare_put("ns", "a", "short").unwrap().unwrap();
    h.kv.cancel(&shrink);
    let delete = h.kv.prepare_delete("ns", "a").unwrap().unwrap();
    h.kv.cancel(&delete);
    for change in [b, a] {
        h.submit(change);
    }
    drop(release);
    assert!(matches!(h.next_done(), Done::File { .. }));
    assert!(h.next_commit().result.is_ok());
    assert_eq!(
        h.kv.usage(),
        Usage {
            entries: 3,
            bytes: 29
        }
    );
    h.kv.set_limits(KvLimits {
        max_total_bytes: 1,
        ..h.kv.limits()
    });
    // Lowered limits keep what is stored; growing is refused until it is under them.
    assert!(h.kv.prepare_put("ns", "z", "1").is_err());
}

#[test]
fn bytes_waiting_for_the_disk_are_bounded_but_one_change_may_always_wait() {
    let mut h = Harness::new("kv-busy");
    h.kv.set_limits(KvLimits {
        max_key_length: 8,
        max_value_length: 100,
        max_entries: 100,
        max_total_bytes: 100,
    });
    h.put("ns", "k", &"v".repeat(90)).unwrap();
    let _release = h.block_writer();
    // Overwrites do not grow the store, but they wait in memory: bounded all the same.
    let first = h.kv.prepare_put("ns", "k", &"w".repeat(90)).unwrap();
    assert!(first.is_some());
    let busy = h.kv.prepare_put("ns", "k", &"x".repeat(90)).unwrap_err();
    assert!(busy.is_busy(), "{busy}");
    assert!(busy.to_string().starts_with("[OVERLOAD]"), "{busy}");
    h.kv.cancel(&first.unwrap());
    assert_eq!(h.kv.in_flight(), 0);
    assert!(h.kv.prepare_put("ns", "k", &"x".repeat(90)).is_ok());
}

#[test]
fn java_pretty_printed_file_loads() {
    let dir = TempDir::new("kv-java");
    let file = dir.join("kvConfig.json");
    let fixture = fixture_path("kvconfig_file_java.json");
    fs::copy(&fixture, &file).unwrap_or_else(|e| panic!("fixture {}: {e}", fixture.display()));
    let kv = KvStore::open(&file).unwrap();
    assert_eq!(
        kv.get("ORDER_TOPIC_CONFIG", "orders-eu"),
        Some("broker-a:4;broker-b:4")
    );
    assert_eq!(kv.get("PROJECT_CONFIG", "tenant-a"), Some("project-alpha"));
    assert_eq!(kv.get("PROJECT_CONFIG", "tenant-unicode"), Some("生产"));
    assert_eq!(kv.namespace("PROJECT_CONFIG").map(BTreeMap::len), Some(2));
    assert!(body_text(&kv, "PROJECT_CONFIG")
        .unwrap()
        .starts_with("{\"table\":{\"tenant-a\":\"project-alpha\""));
}

#[test]
fn missing_file_without_backup_is_an_empty_store() {
    let dir = TempDir::new("kv-missing");
    let kv = KvStore::open(&dir.join("sub").join("kvConfig.json")).unwrap();
    assert_eq!(kv.usage(), Usage::default());
}

#[test]
fn empty_file_is_empty_without_backup_and_corrupt_with_one() {
    let dir = TempDir::new("kv-empty");
    let file = dir.join("kvConfig.json");
    fs::write(&file, b"").unwrap();
    assert_eq!(KvStore::open(&file).unwrap().usage(), Usage::default());
    fs::write(
        sibling(&file, ".bak"),
        br#"{"configTable":{"ns":{"k":"v"}}}"#,
    )
    .unwrap();
    assert_eq!(KvStore::open(&file).unwrap().get("ns", "k"), Some("v"));
}

#[test]
fn truncated_file_with_good_backup_recovers_from_backup() {
    let mut h = Harness::new("kv-truncated-bak");
    h.put("ns", "a", "1").unwrap();
    h.put("ns", "b", "2").unwrap();
    let content = fs::read(h.file()).unwrap();
    fs::write(h.file(), &content[..content.len() - 3]).unwrap();
    let kv = KvStore::open(&h.file()).unwrap();
    // The backup holds the version before the last put.
    assert_eq!(kv.get("ns", "a"), Some("1"));
    assert_eq!(kv.get("ns", "b"), None);
}

#[test]
fn truncated_file_without_backup_refuses_to_open() {
    let dir = TempDir::new("kv-truncated");
    let file = dir.join("kvConfig.json");
    fs::write(&file, br#"{"configTable":{"ns":{"k":"v""#).unwrap();
    let text = KvStore::open(&file).err().unwrap().to_string();
    assert!(
        text.starts_with(&format!("KV config {} is corrupt", file.display()))
            && text.contains("no backup"),
        "{text}"
    );
}

#[test]
fn corrupt_file_and_corrupt_backup_refuse_to_open() {
    let dir = TempDir::new("kv-both-corrupt");
    let file = dir.join("kvConfig.json");
    fs::write(&file, b"{\"configTable\":[1]}").unwrap();
    fs::write(sibling(&file, ".bak"), b"not json").unwrap();
    let text = KvStore::open(&file).err().unwrap().to_string();
    assert!(
        text.contains("not an object") && text.contains("corrupt too"),
        "{text}"
    );
}

#[test]
fn missing_file_with_backup_loads_the_backup() {
    let dir = TempDir::new("kv-only-bak");
    let file = dir.join("kvConfig.json");
    fs::write(
        sibling(&file, ".bak"),
        br#"{"configTable":{"ns":{"k":"v"}}}"#,
    )
    .unwrap();
    assert_eq!(KvStore::open(&file).unwrap().get("ns", "k"), Some("v"));
}

#[test]
fn non_string_values_load_as_their_text() {
    let dir = TempDir::new("kv-coerce");
    let file = dir.join("kvConfig.json");
    fs::write(
        &file,
        br#"{"configTable":{"ns":{"n":4,"b":true,"z":null},"skip":null}}"#,
    )
    .unwrap();
    let kv = KvStore::open(&file).unwrap();
    assert_eq!(kv.get("ns", "n"), Some("4"));
    assert_eq!(kv.get("ns", "b"), Some("true"));
    assert_eq!(kv.get("ns", "z"), None);
    assert_eq!(kv.namespace("skip"), None);
    assert_eq!(
        body_text(&kv, "ns").unwrap(),
        r#"{"table":{"b":"true","n":"4"}}"#
    );
}

#[test]
fn a_writer_that_ended_is_reported_gone_and_refuses_jobs() {
    let mut h = Harness::new("kv-gone");
    let change = h.kv.prepare_put("ns", "k", "v").unwrap().unwrap();
    let write: FileWrite = Box::new(|| panic!("a bug in a file job (expected by this test)"));
    assert!(h.writer().submit(Job::File { id: 1, write }).is_ok());
    // The thread ends with the panic; its end of the channel goes with it.
    h.thread.take().unwrap().join().unwrap_err();
    assert_eq!(h.writer().try_done().err(), Some(WriterGone));
    assert!(h.writer().submit(Job::Change { id: 2, change }).is_err());
    h.kv.forget_in_flight();
    assert_eq!(h.kv.in_flight(), 0);
}
