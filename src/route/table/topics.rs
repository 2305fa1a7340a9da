//! Topics' queue entries (one per group, by small id), the groups (Java's brokerAddrTable),
//! and the queue-entry writes every path goes through, which keep each group's write stamp.

use super::super::model::{BrokerData, QueueData};
use super::RouteTable;
use foldhash::fast::RandomState;
use slab::Slab;
use std::collections::HashMap;
use std::sync::Arc;

/// Small id of a broker group (its slot in `RouteTable::broker_names`).
pub(super) type BrokerId = u32;

/// One broker group's queues in one topic (20 bytes: the group is a small id, not a name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct QueueSlot {
    pub(super) broker: BrokerId,
    pub(super) read_queue_nums: i32,
    pub(super) write_queue_nums: i32,
    pub(super) perm: i32,
    pub(super) topic_sys_flag: i32,
}

impl QueueSlot {
    pub(super) fn to_queue_data(&self, names: &Slab<Arc<str>>) -> QueueData {
        QueueData {
            broker_name: names
                .get(self.broker as usize)
                .map(|n| n.to_string())
                .unwrap_or_default(),
            read_queue_nums: self.read_queue_nums,
            write_queue_nums: self.write_queue_nums,
            perm: self.perm,
            topic_sys_flag: self.topic_sys_flag,
        }
    }
}

/// Topics served by more broker groups than this (system topics) get a group index: O(1).
pub(super) const QUEUE_INDEX_THRESHOLD: usize = 16;

#[derive(Debug, Default)]
pub(super) struct TopicEntry {
    pub(super) queues: Vec<QueueSlot>,
    /// Group -> position in `queues`, for broad topics only (boxed: 8 bytes for the others).
    #[allow(clippy::box_collection)]
    pub(super) index: Option<Box<HashMap<BrokerId, usize, RandomState>>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Put {
    Unchanged,
    Replaced,
    Added,
}

impl TopicEntry {
    /// The sysFlag unit lists go by: the first queue entry's (§5.13).
    pub(super) fn first_flag(&self) -> Option<i32> {
        self.queues.first().map(|q| q.topic_sys_flag)
    }

    pub(super) fn position(&self, broker: BrokerId) -> Option<usize> {
        match &self.index {
            Some(index) => index.get(&broker).copied(),
            None => self.queues.iter().position(|q| q.broker == broker),
        }
    }

    /// Inserts or replaces (if not `only_if_absent`) the entry of `slot`'s broker.
    fn put(&mut self, slot: QueueSlot, only_if_absent: bool) -> Put {
        match self.position(slot.broker) {
            Some(_) if only_if_absent => Put::Unchanged,
            Some(i) if self.queues[i] == slot => Put::Unchanged,
            Some(i) => {
                self.queues[i] = slot;
                Put::Replaced
            }
            None => {
                let at = self.queues.len();
                if let Some(index) = self.index.as_mut() {
                    index.insert(slot.broker, at);
                }
                self.queues.reserve_exact(1);
                self.queues.push(slot);
                if self.index.is_none() && self.queues.len() > QUEUE_INDEX_THRESHOLD {
                    let index = self
                        .queues
                        .iter()
                        .enumerate()
                        .map(|(i, q)| (q.broker, i))
                        .collect();
                    self.index = Some(Box::new(index));
                }
                Put::Added
            }
        }
    }

    /// Removes a broker's entry (swap with the last).
    fn remove(&mut self, broker: BrokerId) -> bool {
        let Some(i) = self.position(broker) else {
            return false;
        };
        self.queues.swap_remove(i);
        let moved = self.queues.get(i).map(|q| q.broker);
        if self.queues.len() <= QUEUE_INDEX_THRESHOLD / 2 {
            self.index = None;
        } else if let Some(index) = self.index.as_mut() {
            index.remove(&broker);
            if let Some(m) = moved {
                index.insert(m, i);
            }
        }
        true
    }
}

#[derive(Debug)]
pub(super) struct BrokerEntry {
    pub(super) name: Arc<str>,
    pub(super) id: BrokerId,
    pub(super) data: BrokerData,
    /// Topics that hold a queue entry for this group (a vector: half a set's memory).
    pub(super) topics: Vec<Arc<str>>,
}

impl RouteTable {
    pub(super) fn slots_stamp(&self, id: BrokerId) -> u64 {
        self.slot_stamps.get(id as usize).copied().unwrap_or(0)
    }

    pub(super) fn touch_slots(&mut self, id: BrokerId) {
        self.write_clock += 1;
        let i = id as usize;
        if self.slot_stamps.len() <= i {
            self.slot_stamps.resize(i + 1, 0);
        }
        self.slot_stamps[i] = self.write_clock;
    }

    /// Puts a queue entry (if `only_if_absent`, when none of its group); true on change.
    pub(super) fn put_queue(&mut self, topic: &str, slot: QueueSlot, only_if_absent: bool) -> bool {
        let broker = slot.broker;
        let key = match self.topics.get_mut(topic) {
            Some(entry) => match (entry.first_flag(), entry.put(slot, only_if_absent)) {
                (_, Put::Unchanged) => return false,
                (flag, Put::Replaced) => {
                    if entry.first_flag() != flag {
                        self.topics.touch(topic);
                    }
                    self.cache.invalidate(topic);
                    self.touch_slots(broker);
                    return true;
                }
                (_, Put::Added) => {
                    // A group more: the cluster lists (224) filter on the groups.
                    self.topics.touch(topic);
                    self.cache.invalidate(topic);
                    self.topics.get_key_value(topic).map(|(k, _)| k.clone())
                }
            },
            None => {
                let mut entry = TopicEntry::default();
                entry.put(slot, false);
                let key: Arc<str> = Arc::from(topic);
                self.topics.insert(key.clone(), entry);
                Some(key)
            }
        };
        self.touch_slots(broker);
        let name = self.broker_names.get(broker as usize).cloned();
        if let (Some(key), Some(b)) = (key, name.and_then(|n| self.brokers.get_mut(n.as_ref()))) {
            b.topics.push(key);
        }
        true
    }

    /// Removes group `id`'s entry from `topic`: (entry removed, topic dropped).
    pub(super) fn drop_queue_entry(&mut self, id: BrokerId, topic: &str) -> (bool, bool) {
        let Some(entry) = self.topics.get_mut(topic) else {
            return (false, false);
        };
        if !entry.remove(id) {
            return (false, false);
        }
        let now_empty = entry.queues.is_empty();
        self.touch_slots(id);
        self.cache.invalidate(topic);
        if now_empty {
            self.topics.remove(topic);
        } else {
            // A group less (and maybe another first flag): what topic lists filter on.
            self.topics.touch(topic);
        }
        (true, now_empty)
    }

    pub(super) fn remove_queue(&mut self, topic: &str, broker_name: &str) -> bool {
        let Some(id) = self.brokers.get(broker_name).map(|b| b.id) else {
            return false;
        };
        if !self.drop_queue_entry(id, topic).0 {
            return false;
        }
        if let Some(b) = self.brokers.get_mut(broker_name) {
            if let Some(i) = b.topics.iter().position(|t| &**t == topic) {
                b.topics.swap_remove(i);
            }
        }
        true
    }
}
