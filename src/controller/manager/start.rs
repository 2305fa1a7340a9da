//! Opening a controller: the kept runtime config updates, the Raft group's recovery, and the
//! replay of its committed entries (silent but for one summary line). A group of one then
//! campaigns and serves before `open` returns.

use super::{Controller, StartError};
use crate::config::NamesrvConfig;
use crate::controller::config::ControllerConfig;
use crate::controller::lease::WriteLeaseGate;
use crate::controller::liveness::Liveness;
use crate::controller::notify::NotifyOutbox;
use crate::controller::pipeline::Pipeline;
use crate::controller::raft::records::corrupt;
use crate::controller::raft::{self, Persistence, RaftGroup, Wake, WallClock};
use crate::event_loop::LogGate;
use crate::request::NameLimits;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a group of one may take to serve at start: its first entry's fsync.
const START_SERVING_TIMEOUT: Duration = Duration::from_secs(10);

/// At most one line per this many milliseconds about requests refused at the wire.
const REFUSED_LOG_INTERVAL_MS: u64 = 10_000;

#[derive(Debug, Default)]
pub(super) struct Replay {
    pub(super) entries: u64,
    pub(super) events: u64,
}

impl<T> Controller<T> {
    /// `now_ms` is the caller's clock (the one it passes to every other call).
    pub fn open(
        config: ControllerConfig,
        waker: Option<Arc<dyn Wake>>,
        now_ms: u64,
    ) -> Result<Self, StartError> {
        Self::open_with(
            config,
            Persistence::Thread(waker),
            now_ms,
            raft::system_wall_clock(),
        )
    }

    /// As [`open`](Self::open), with the caller's wall clock; with `Persistence::Manual` the
    /// disk runs only in [`run_disk`](Self::run_disk) (deterministic simulations).
    pub fn open_with(
        mut config: ControllerConfig,
        persistence: Persistence,
        now_ms: u64,
        wall: WallClock,
    ) -> Result<Self, StartError> {
        let started = Instant::now();
        config.load_updates().map_err(StartError::Config)?;
        let java_store = config
            .store_path()
            .join(format!("dledger-{}", config.self_peer().id));
        if java_store.exists() {
            log::warn!(
                "controller: {} holds a Java DLedger controller store; its state is not imported (brokers re-apply for ids)",
                java_store.display()
            );
        }
        let dir = config.store_dir();
        let ids = raft::raft_ids(config.peers());
        let self_id = ids[config.self_index()];
        let (group, state) = RaftGroup::open(&dir, self_id, &ids, persistence, wall.clone())
            .map_err(StartError::Storage)?;
        let snapshot_index = group.status().applied;
        let mut controller = Controller {
            config,
            state,
            liveness: Liveness::default(),
            pipeline: Pipeline::default(),
            group: Box::new(group),
            applied_index: snapshot_index,
            events_since_snapshot: 0,
            outbox: NotifyOutbox::default(),
            lease: WriteLeaseGate::default(),
            config_updates: VecDeque::new(),
            next_file_job: 0,
            replay: Some(Replay::default()),
            wall,
            inactive_masters: BTreeMap::new(),
            scans: Default::default(),
            admin_allow_list: Vec::new(),
            broker_allow_list: Vec::new(),
            refused_senders: 0,
            elections: [0; 3],
            serving_since: None,
            serving_checked: true,
            name_limits: NameLimits::from_config(&NamesrvConfig::default()),
            refused_log: LogGate::new(REFUSED_LOG_INTERVAL_MS),
        };
        let mut out = Vec::new();
        // The committed entries the log holds (raft-rs hands them over on the first pass).
        controller.drive_group(now_ms, &mut out, |group, events| group.process(events));
        if controller.group.is_alone() {
            controller.serve_alone(started, now_ms)?;
        }
        debug_assert!(out.is_empty(), "nobody asked anything yet: {}", out.len());
        controller.end_replay(snapshot_index, started, now_ms);
        Ok(controller)
    }

    /// A group of one: campaigns, and waits until its first entry is on disk and applied.
    fn serve_alone(&mut self, started: Instant, now_ms: u64) -> Result<(), StartError> {
        let mut out = Vec::new();
        self.drive_group(now_ms, &mut out, |group, events| group.lead_alone(events));
        while !self.group.is_serving() {
            let why = match self.group.failure() {
                Some(why) => format!("the controller cannot start serving: {why}"),
                None if started.elapsed() > START_SERVING_TIMEOUT => {
                    "the first write did not reach the disk within 10 s".into()
                }
                None => {
                    self.drive_group(now_ms, &mut out, |group, events| {
                        group.wait_disk(Duration::from_millis(100), events)
                    });
                    continue;
                }
            };
            let dir = self.config.store_dir();
            return Err(StartError::Storage(corrupt(&dir, None, why)));
        }
        Ok(())
    }

    /// The replay is over: one summary line, and the write leases' waits counted from when
    /// this node itself proposed its masters' elections, not from now.
    fn end_replay(&mut self, snapshot_index: u64, started: Instant, now_ms: u64) {
        let replay = self.replay.take().unwrap_or_default();
        let self_id = self.group.self_id();
        let wall_now = (self.wall)();
        self.lease.observe_all(&self.state, now_ms);
        for sync in self.state.sync_states() {
            let Some(stamp) = sync.master_stamp.filter(|s| s.node == self_id) else {
                continue;
            };
            // A clock set back since then counts as no time passed.
            let age = wall_now.saturating_sub(stamp.wall_ms);
            self.lease.backdate(&sync.broker_name, now_ms, age);
        }
        log::info!(
            "controller {} (Raft node {self_id} of {:?}) on port {}: {} broker sets recovered from {} (snapshot at index {snapshot_index}, {} entries with {} events replayed) in {} ms",
            self.config.self_peer().id,
            raft::raft_ids(self.config.peers()),
            self.config.listen_port(),
            self.state.broker_names().len(),
            self.config.store_dir().display(),
            replay.entries,
            replay.events,
            started.elapsed().as_millis(),
        );
    }
}
