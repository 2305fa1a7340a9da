//! The KV config store. [`KvStore`] holds the table as it is **on disk**; a change goes to the
//! [`writer`] thread and becomes visible once durable, so a crash loses nothing a client read.

mod file;
mod writer;

pub use file::KvError;
pub use writer::{Commit, Done, DurableWriter, FileWrite, Job, WriterGone};

use bytes::Bytes;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Strings of the table, shared between the loop, the writer and the changes in flight.
pub type Text = Arc<str>;

pub type Entries = BTreeMap<Text, Text>;

/// Entries and their GET_KVLIST_BY_NAMESPACE body (whose inner part is the file's piece).
#[derive(Debug, Clone, Default)]
pub struct Namespace {
    pub entries: Entries,
    pub body: Bytes,
}

type Table = BTreeMap<Text, Namespace>;

/// The config's `kvMax*` rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KvLimits {
    pub max_key_length: usize,
    pub max_value_length: usize,
    pub max_entries: usize,
    pub max_total_bytes: usize,
}

impl KvLimits {
    pub fn from_config(config: &crate::config::NamesrvConfig) -> KvLimits {
        KvLimits {
            max_key_length: config.kv_max_key_length as usize,
            max_value_length: config.kv_max_value_length as usize,
            max_entries: config.kv_max_entries as usize,
            max_total_bytes: config.kv_max_total_bytes as usize,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KvRefusal {
    TooLong {
        what: &'static str,
        len: usize,
        limit: usize,
        setting: &'static str,
    },
    TooManyEntries {
        limit: usize,
    },
    TooManyBytes {
        would_be: usize,
        limit: usize,
    },
    /// `kvMaxTotalBytes` of changes already wait for the disk: a transient overload.
    Busy {
        waiting: usize,
        limit: usize,
    },
}

impl KvRefusal {
    /// Answered SYSTEM_BUSY rather than an error.
    pub fn is_busy(&self) -> bool {
        matches!(self, KvRefusal::Busy { .. })
    }
}

impl fmt::Display for KvRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KvRefusal::TooLong {
                what,
                len,
                limit,
                setting,
            } => write!(
                f,
                "KV {what} too long: {len} bytes, the limit is {limit} ({setting})"
            ),
            KvRefusal::TooManyEntries { limit } => write!(
                f,
                "KV store full: it holds {limit} entries, the limit (kvMaxEntries; keys and \
                 namespaces count); delete some first"
            ),
            KvRefusal::TooManyBytes { would_be, limit } => write!(
                f,
                "KV store full: this put would take it to {would_be} bytes, over the limit of \
                 {limit} (kvMaxTotalBytes); delete some first"
            ),
            KvRefusal::Busy { waiting, limit } => write!(
                f,
                "[OVERLOAD] {waiting} bytes of KV changes are waiting for the disk (the limit \
                 is kvMaxTotalBytes, {limit}); try again later"
            ),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub namespace: Text,
    pub key: Text,
    pub op: Op,
    /// What it counts for while in flight.
    charge: Charge,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Put(Text),
    Delete,
}

impl Change {
    /// Java's semantics (a delete keeps an emptied namespace); (value replaced, namespace new).
    fn apply_to(&self, table: &mut Table) -> (Option<Text>, bool) {
        match &self.op {
            Op::Put(value) => {
                let created = !table.contains_key(&self.namespace);
                let ns = table.entry(self.namespace.clone()).or_default();
                (ns.entries.insert(self.key.clone(), value.clone()), created)
            }
            Op::Delete => {
                let ns = table.get_mut(&self.namespace);
                (ns.and_then(|ns| ns.entries.remove(&self.key)), false)
            }
        }
    }
}

/// One change's share of the in-flight accounting, or the sum of all in flight.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Charge {
    changes: usize,
    /// Namespace + key + value, for the bound on bytes waiting for the disk.
    bytes: usize,
    /// What the store's bytes grow by if it succeeds (0 for deletes and shrinking puts).
    growth: usize,
    new_entries: usize,
}

impl Charge {
    fn add(&mut self, other: Charge) {
        self.changes += other.changes;
        self.bytes += other.bytes;
        self.growth += other.growth;
        self.new_entries += other.new_entries;
    }

    fn remove(&mut self, other: Charge) {
        self.changes -= other.changes;
        self.bytes -= other.bytes;
        self.growth -= other.growth;
        self.new_entries -= other.new_entries;
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub entries: usize,
    pub bytes: usize,
}

#[derive(Debug)]
pub struct KvStore {
    path: PathBuf,
    namespaces: Table,
    usage: Usage,
    in_flight: Charge,
    limits: KvLimits,
}

impl KvStore {
    /// See [`file`] for what a damaged file does.
    pub fn open(path: &Path) -> Result<KvStore, KvError> {
        let namespaces = file::open(path)?;
        let mut usage = Usage::default();
        for (name, ns) in &namespaces {
            usage.entries += 1 + ns.entries.len();
            let entry_bytes: usize = ns.entries.iter().map(|(k, v)| k.len() + v.len()).sum();
            usage.bytes += name.len() + entry_bytes;
        }
        Ok(KvStore {
            path: path.to_path_buf(),
            namespaces,
            usage,
            in_flight: Charge::default(),
            limits: KvLimits::from_config(&crate::config::NamesrvConfig::default()),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn spawn_writer(
        &self,
        name: &str,
        wake: Box<dyn Fn() + Send>,
    ) -> std::io::Result<(DurableWriter, std::thread::JoinHandle<()>)> {
        writer::spawn_writer(name, &self.path, self.namespaces.clone(), wake)
    }

    pub fn limits(&self) -> KvLimits {
        self.limits
    }

    /// New limits apply to the next changes; what the store holds stays.
    pub fn set_limits(&mut self, limits: KvLimits) {
        self.limits = limits;
    }

    pub fn usage(&self) -> Usage {
        self.usage
    }

    pub fn get(&self, namespace: &str, key: &str) -> Option<&str> {
        let ns = self.namespaces.get(namespace)?;
        ns.entries.get(key).map(|v| &**v)
    }

    /// The GET_KVLIST_BY_NAMESPACE body, `{"table":{"k":"v",...}}`.
    pub fn namespace_body(&self, namespace: &str) -> Option<Bytes> {
        self.namespaces.get(namespace).map(|ns| ns.body.clone())
    }

    /// Checks a put against the limits and counts it in flight; `Ok(None)`: nothing to write.
    pub fn prepare_put(
        &mut self,
        namespace: &str,
        key: &str,
        value: &str,
    ) -> Result<Option<Change>, KvRefusal> {
        let limits = self.limits;
        let (key_limit, value_limit) = (limits.max_key_length, limits.max_value_length);
        check_len("namespace", namespace, key_limit, "kvMaxKeyLength")?;
        check_len("key", key, key_limit, "kvMaxKeyLength")?;
        check_len("value", value, value_limit, "kvMaxValueLength")?;
        let existing = self.get(namespace, key);
        if self.in_flight.changes == 0 && existing == Some(value) {
            return Ok(None);
        }
        let new_namespace = !self.namespaces.contains_key(namespace);
        let entry_bytes = key.len() + value.len();
        let charge = Charge {
            changes: 1,
            bytes: namespace.len() + entry_bytes,
            growth: entry_bytes.saturating_sub(existing.map_or(0, |v| key.len() + v.len()))
                + if new_namespace { namespace.len() } else { 0 },
            new_entries: usize::from(existing.is_none()) + usize::from(new_namespace),
        };
        let entries = self.usage.entries + self.in_flight.new_entries + charge.new_entries;
        if charge.new_entries > 0 && entries > limits.max_entries {
            return Err(KvRefusal::TooManyEntries {
                limit: limits.max_entries,
            });
        }
        let would_be = self.usage.bytes + self.in_flight.growth + charge.growth;
        if charge.growth > 0 && would_be > limits.max_total_bytes {
            return Err(KvRefusal::TooManyBytes {
                would_be,
                limit: limits.max_total_bytes,
            });
        }
        let op = Op::Put(Arc::from(value));
        self.charge(namespace, key, op, charge).map(Some)
    }

    /// Counts a delete in flight (`Ok(None)`: nothing to delete). Never refused by the size
    /// limits: deleting is how a full store gets room again.
    pub fn prepare_delete(
        &mut self,
        namespace: &str,
        key: &str,
    ) -> Result<Option<Change>, KvRefusal> {
        if self.in_flight.changes == 0 && self.get(namespace, key).is_none() {
            return Ok(None);
        }
        let charge = Charge {
            changes: 1,
            bytes: namespace.len() + key.len(),
            ..Charge::default()
        };
        self.charge(namespace, key, Op::Delete, charge).map(Some)
    }

    fn charge(
        &mut self,
        namespace: &str,
        key: &str,
        op: Op,
        charge: Charge,
    ) -> Result<Change, KvRefusal> {
        let waiting = self.in_flight.bytes + charge.bytes;
        // One change may always wait, however large, so that progress never stops.
        if self.in_flight.changes > 0 && waiting > self.limits.max_total_bytes {
            return Err(KvRefusal::Busy {
                waiting: self.in_flight.bytes,
                limit: self.limits.max_total_bytes,
            });
        }
        self.in_flight.add(charge);
        Ok(Change {
            namespace: Arc::from(namespace),
            key: Arc::from(key),
            op,
            charge,
        })
    }

    /// A change that never reached the writer: it no longer counts in flight.
    pub fn cancel(&mut self, change: &Change) {
        self.in_flight.remove(change.charge);
    }

    /// The writer is gone with changes unreported: they failed.
    pub fn forget_in_flight(&mut self) {
        self.in_flight = Charge::default();
    }

    /// A group the writer wrote becomes visible; returns the bodies replaced, to free.
    pub fn apply(&mut self, commit: &Commit) -> Vec<Bytes> {
        for (_, change) in &commit.changes {
            self.cancel(change);
        }
        let Ok(bodies) = &commit.result else {
            return Vec::new();
        };
        for (_, change) in &commit.changes {
            let (previous, created) = change.apply_to(&mut self.namespaces);
            let usage = &mut self.usage;
            if created {
                usage.entries += 1;
                usage.bytes += change.namespace.len();
            }
            if let Some(old) = previous {
                usage.entries -= 1;
                usage.bytes -= change.key.len() + old.len();
            }
            if let Op::Put(value) = &change.op {
                usage.entries += 1;
                usage.bytes += change.key.len() + value.len();
            }
        }
        let mut replaced = Vec::with_capacity(bodies.len());
        for (namespace, body) in bodies {
            if let Some(ns) = self.namespaces.get_mut(namespace) {
                replaced.push(std::mem::replace(&mut ns.body, body.clone()));
            }
        }
        replaced
    }
}

fn check_len(
    what: &'static str,
    text: &str,
    limit: usize,
    setting: &'static str,
) -> Result<(), KvRefusal> {
    if text.len() > limit {
        return Err(KvRefusal::TooLong {
            what,
            len: text.len(),
            limit,
            setting,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests;
