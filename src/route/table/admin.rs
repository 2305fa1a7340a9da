//! Admin writes to the registry: write permission, topic delete, REGISTER_TOPIC_IN_NAMESRV.

use super::super::model::QueueData;
use super::{QueueSlot, RouteTable, PERM_READ, PERM_WRITE};
use std::sync::Arc;

impl RouteTable {
    /// WIPE (clear the write bit) or ADD (perm = READ|WRITE) a group's write permission (§5.9).
    pub fn set_write_perm(&mut self, broker_name: &str, enable: bool) -> usize {
        let Some(b) = self.brokers.get(broker_name) else {
            return 0;
        };
        let id = b.id;
        let topics: Vec<Arc<str>> = b.topics.to_vec();
        let mut count = 0;
        for topic in topics {
            let Some(entry) = self.topics.get_mut(topic.as_ref()) else {
                continue;
            };
            if let Some(i) = entry.position(id) {
                let q = &mut entry.queues[i];
                q.perm = if enable {
                    PERM_READ | PERM_WRITE
                } else {
                    q.perm & !PERM_WRITE
                };
                count += 1;
                self.invalidate_topic(&topic);
            }
        }
        if count > 0 {
            self.touch_slots(id);
        }
        count
    }

    /// DELETE_TOPIC_IN_NAMESRV (§5.10). `cluster` None/empty: the whole topic.
    pub fn delete_topic(&mut self, topic: &str, cluster: Option<&str>) -> bool {
        let names: Vec<String> = match cluster.filter(|c| !c.is_empty()) {
            None => match self.topics.get(topic) {
                Some(e) => e
                    .queues
                    .iter()
                    .filter_map(|q| self.broker_names.get(q.broker as usize))
                    .map(|n| n.to_string())
                    .collect(),
                None => return false,
            },
            Some(c) => match self.clusters.get(c) {
                Some(set) => set.iter().cloned().collect(),
                None => return false,
            },
        };
        let mut any = false;
        for name in names {
            any |= self.remove_queue(topic, &name);
        }
        self.shrink_if_sparse();
        any
    }

    /// REGISTER_TOPIC_IN_NAMESRV (§5.11). Returns whether anything was stored.
    pub fn register_topic(&mut self, topic: &str, queue_datas: &[QueueData]) -> bool {
        if queue_datas.is_empty() {
            return false;
        }
        let exists = self.topics.contains_key(topic);
        if !exists
            && queue_datas
                .iter()
                .any(|q| !self.brokers.contains_key(q.broker_name.as_str()))
        {
            return false;
        }
        let mut stored = false;
        for q in queue_datas {
            let Some(id) = self.brokers.get(q.broker_name.as_str()).map(|b| b.id) else {
                break; // Java aborts at the first unknown broker; earlier entries stay.
            };
            let slot = QueueSlot {
                broker: id,
                read_queue_nums: q.read_queue_nums,
                write_queue_nums: q.write_queue_nums,
                perm: q.perm,
                topic_sys_flag: q.topic_sys_flag,
            };
            self.put_queue(topic, slot, false);
            stored = true;
        }
        stored
    }
}
