//! How big registrations may make the registry, and handing memory back after removals.

use super::topic_map::shrink_sparse;
use super::{QueueData, RegisterBody, RegisterRequest, RegisteringBroker, RouteTable, TopicsInput};
use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasher, Hash};

/// `Default` is all zero: the processor sets them from the config.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RouteBounds {
    pub max_brokers: usize,
    pub max_topics: usize,
    pub max_topics_per_broker: usize,
}

/// A registration refused because the registry would outgrow a bound. `Display` is the remark.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BoundExceeded {
    Brokers {
        max: usize,
    },
    Topics {
        max: usize,
        held: usize,
        adding: usize,
    },
    TopicsPerBroker {
        broker_name: String,
        max: usize,
        held: usize,
        adding: usize,
    },
}

impl BoundExceeded {
    pub fn key(&self) -> &'static str {
        match self {
            BoundExceeded::Brokers { .. } => "maxBrokers",
            BoundExceeded::Topics { .. } => "maxTopics",
            BoundExceeded::TopicsPerBroker { .. } => "maxTopicsPerBroker",
        }
    }
}

impl fmt::Display for BoundExceeded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BoundExceeded::Brokers { max } => write!(
                f,
                "maxBrokers reached: {max} brokers are registered; no new broker address until one leaves"
            ),
            BoundExceeded::Topics { max, held, adding } => write!(
                f,
                "maxTopics reached: the registry holds {held} topics, this would add {adding} (limit {max})"
            ),
            BoundExceeded::TopicsPerBroker {
                broker_name,
                max,
                held,
                adding,
            } => write!(
                f,
                "maxTopicsPerBroker reached: broker {broker_name} serves {held} topics, this would add {adding} (limit {max})"
            ),
        }
    }
}

impl std::error::Error for BoundExceeded {}

/// Maps smaller than this many slots are never shrunk (not worth a rehash).
const SHRINK_MIN_CAPACITY: usize = 4096;
/// A sparse map is shrunk only while it holds at most this many entries: each moved entry is
/// rehashed (0.15-0.35 µs), so a shrink costs the loop a few milliseconds at most.
const SHRINK_MAX_MOVED: usize = 32_768;
/// Old tables of at least this many slots are freed on a short-lived thread (returning tens
/// of megabytes to the OS costs the kernel ~15 ms for 1.8 M slots).
const RELEASE_OFF_LOOP_CAPACITY: usize = 65_536;

impl RouteTable {
    /// Whether applying `req` would outgrow a bound (per topic only near a bound).
    pub fn check_register_bounds(
        &self,
        req: &RegisterRequest<'_>,
        topics_in: TopicsInput<'_>,
        bounds: &RouteBounds,
    ) -> Result<(), BoundExceeded> {
        let r = &req.broker;
        if self.live_id(r.cluster, r.broker_addr).is_none() && self.live.len() >= bounds.max_brokers
        {
            return Err(BoundExceeded::Brokers {
                max: bounds.max_brokers,
            });
        }
        match topics_in {
            TopicsInput::Body(body) if self.would_apply_topics(r) => {
                self.check_new_topics(r.broker_name, body, bounds)
            }
            _ => Ok(()),
        }
    }

    /// §5.2 step 9 ahead of time: the master's and the prime slave's topics are applied.
    fn would_apply_topics(&self, r: &RegisteringBroker<'_>) -> bool {
        if r.broker_id == 0 {
            return true;
        }
        if r.enable_acting_master.is_none() {
            return false; // a 4.x slave
        }
        // The lowest id once this registration is in (its address under other ids goes).
        let lowest_other = self.brokers.get(r.broker_name).and_then(|b| {
            b.data
                .broker_addrs
                .iter()
                .filter(|(_, a)| a.as_str() != r.broker_addr)
                .map(|(id, _)| *id)
                .min()
        });
        lowest_other.map_or(true, |lowest| r.broker_id <= lowest)
    }

    fn check_new_topics(
        &self,
        broker_name: &str,
        body: &RegisterBody,
        bounds: &RouteBounds,
    ) -> Result<(), BoundExceeded> {
        let group = self.brokers.get(broker_name);
        let held_by_group = group.map_or(0, |g| g.topics.len());
        // Far from both bounds (the usual case) even a body of new topics fits.
        let at_most = body.topics.len();
        if self.topics.len() + at_most <= bounds.max_topics
            && held_by_group + at_most <= bounds.max_topics_per_broker
        {
            return Ok(());
        }
        let (mut new_topics, mut new_for_group) = (0, 0);
        for (_, tc) in &body.topics {
            match self.topics.get(tc.topic_name.as_str()) {
                None => {
                    new_topics += 1;
                    new_for_group += 1;
                }
                Some(entry) => {
                    if group.and_then(|g| entry.position(g.id)).is_none() {
                        new_for_group += 1;
                    }
                }
            }
        }
        self.check_growth(
            broker_name,
            new_topics,
            held_by_group,
            new_for_group,
            bounds,
        )
    }

    fn check_growth(
        &self,
        broker_name: &str,
        new_topics: usize,
        held_by_group: usize,
        new_for_group: usize,
        bounds: &RouteBounds,
    ) -> Result<(), BoundExceeded> {
        if new_topics > 0 && self.topics.len() + new_topics > bounds.max_topics {
            return Err(BoundExceeded::Topics {
                max: bounds.max_topics,
                held: self.topics.len(),
                adding: new_topics,
            });
        }
        if new_for_group > 0 && held_by_group + new_for_group > bounds.max_topics_per_broker {
            return Err(BoundExceeded::TopicsPerBroker {
                broker_name: broker_name.to_string(),
                max: bounds.max_topics_per_broker,
                held: held_by_group,
                adding: new_for_group,
            });
        }
        Ok(())
    }

    /// Whether REGISTER_TOPIC_IN_NAMESRV of `topic` would outgrow a bound.
    pub fn check_topic_bounds(
        &self,
        topic: &str,
        queue_datas: &[QueueData],
        bounds: &RouteBounds,
    ) -> Result<(), BoundExceeded> {
        let entry = self.topics.get(topic);
        let new_topics = usize::from(entry.is_none() && !queue_datas.is_empty());
        if new_topics > 0 && self.topics.len() >= bounds.max_topics {
            return self.check_growth("", new_topics, 0, 0, bounds);
        }
        for q in queue_datas {
            let Some(group) = self.brokers.get(q.broker_name.as_str()) else {
                continue;
            };
            if entry.and_then(|e| e.position(group.id)).is_none() {
                self.check_growth(&q.broker_name, 0, group.topics.len(), 1, bounds)?;
            }
        }
        Ok(())
    }

    pub(super) fn shrink_if_sparse(&mut self) {
        let (old_tables, old_capacity) = self.topics.shrink_if_sparse();
        if old_capacity >= RELEASE_OFF_LOOP_CAPACITY {
            release_off_loop(old_tables);
        }
        shrink_if_sparse(&mut self.brokers);
        shrink_if_sparse(&mut self.live_by_addr);
        shrink_if_sparse(&mut self.live_by_conn);
    }
}

fn shrink_if_sparse<K, V, S>(map: &mut HashMap<K, V, S>)
where
    K: Hash + Eq + Send + 'static,
    V: Send + 'static,
    S: BuildHasher + Clone + Send + 'static,
{
    let capacity = map.capacity();
    if capacity < SHRINK_MIN_CAPACITY || map.len() > SHRINK_MAX_MOVED {
        return;
    }
    if let Some(old) = shrink_sparse(map) {
        if capacity >= RELEASE_OFF_LOOP_CAPACITY {
            release_off_loop(old);
        }
    }
}

/// Drops `value` (an emptied table) on a thread of its own (here, if none can start).
fn release_off_loop<T: Send + 'static>(value: T) {
    let _ = std::thread::Builder::new()
        .name("table-release".into())
        .spawn(move || drop(value));
}
