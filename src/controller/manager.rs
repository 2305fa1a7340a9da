//! The controller as one object the event loop drives: [`Controller`] owns the config, the
//! replicated state, the liveness table, the request pipeline, the log and the pending
//! notifications, and turns the loop's inputs into replies.
//!
//! Inputs, all on the loop thread, time passed in: a frame from the controller port
//! ([`Controller::handle`]), "the log writer has news" ([`Controller::on_log_completions`],
//! after the waker given to [`Controller::open`] fired), timers
//! ([`Controller::expire_requests`], [`Controller::scan_not_active_brokers`],
//! [`Controller::scan_inactive_masters`]) and a closed connection
//! ([`Controller::connection_closed`]); in a Raft group also Raft's tick
//! ([`Controller::raft_tick`]) and peers' payloads ([`Controller::on_peer_message`]).
//! Outputs: replies for the caller's tickets (`T`: the loop's connection + opaque +
//! serialization), connections to close, role-change notifications to send off the loop
//! ([`Controller::take_notifications`]) and payloads for peers
//! ([`Controller::take_peer_messages`]).
//!
//! The durable step is the Raft group (module `raft`), of one node or several: every
//! committed entry is applied by [`Controller`] the same way, and only the serving leader
//! answers leader-only requests, elects and grants write leases.
//!
//! Inactive brokers become elections as in Java's `ControllerManager`: an inactive master
//! (or a scan that finds one) starts a controller-triggered election, retried up to
//! `electMasterMaxRetryCount` times until one succeeds; a successful election, from
//! anywhere, notifies the set's active members when `notifyBrokerRoleChanged` is on.

use super::codes::response as rc;
use super::config::{ConfigError, ControllerConfig, PlannedUpdate};
use super::event::Event;
use super::lease::WriteLeaseGate;
use super::liveness::{ConnRef, InactiveBroker, Liveness};
use super::notify::{self, NotifyOutbox, RoleChangeNotification};
use super::pipeline::{Completed, Durability, Inputs, Origin, Pipeline};
use super::raft::records::StorageError;
use super::raft::{self, GroupEvent, GroupStatus, Persistence, RaftGroup, Wake};
use super::replicas::{self, Elected};
use super::request::{self, ControllerRequest, ElectMaster, Heartbeat, LeaderRequest};
use super::response::Response;
use super::state::ControllerState;
use crate::remoting::codes::response::{REQUEST_CODE_NOT_SUPPORTED, SUCCESS, SYSTEM_ERROR};
use crate::remoting::command::RemotingCommand;
use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a group of one may take to serve at start: its first entry's fsync.
const START_SERVING_TIMEOUT: Duration = Duration::from_secs(10);

/// An answer for one of the caller's requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply<T> {
    pub ticket: T,
    pub response: Response,
}

/// Why the controller cannot start.
#[derive(Debug)]
pub enum StartError {
    Config(ConfigError),
    Storage(StorageError),
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartError::Config(e) => write!(f, "controller config: {e}"),
            StartError::Storage(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for StartError {}

/// A request of the caller's: the ticket and whether an answer is expected.
type Ticket<T> = (T, bool);

pub struct Controller<T> {
    config: ControllerConfig,
    state: ControllerState,
    liveness: Liveness,
    pipeline: Pipeline<Ticket<T>>,
    group: Box<RaftGroup>,
    applied_index: u64,
    events_since_snapshot: u64,
    outbox: NotifyOutbox,
    lease: WriteLeaseGate,
    /// UPDATE_CONTROLLER_CONFIG requests, one at a time: the front one may be waiting for
    /// its file to be written by the log writer.
    config_updates: VecDeque<ConfigUpdate<T>>,
    next_file_job: u64,
}

/// A 1009 waiting its turn, or its file write.
struct ConfigUpdate<T> {
    ticket: T,
    wants_reply: bool,
    body: Vec<u8>,
    writing: Option<(u64, PlannedUpdate)>,
}

impl<T> Controller<T> {
    /// Applies the kept runtime config updates, recovers the store and starts its writer.
    /// Several peers in `controllerDLegerPeers` make this node a member of a Raft group.
    pub fn open(
        config: ControllerConfig,
        waker: Option<Arc<dyn Wake>>,
    ) -> Result<Self, StartError> {
        Self::open_with(config, waker, false)
    }

    /// As [`open`](Self::open), with a Raft group's disk run by the caller
    /// ([`run_disk`](Self::run_disk)) instead of a thread: deterministic simulations.
    pub fn open_simulated(config: ControllerConfig) -> Result<Self, StartError> {
        Self::open_with(config, None, true)
    }

    fn open_with(
        mut config: ControllerConfig,
        waker: Option<Arc<dyn Wake>>,
        manual_disk: bool,
    ) -> Result<Self, StartError> {
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
        let persistence = if manual_disk {
            Persistence::Manual
        } else {
            Persistence::Thread(waker)
        };
        let started = Instant::now();
        let dir = config.store_dir();
        let ids = raft::raft_ids(config.peers());
        let self_id = ids[config.self_index()];
        let opened =
            RaftGroup::open(&dir, self_id, &ids, persistence).map_err(StartError::Storage)?;
        log::info!(
            "controller {} (Raft node {self_id} of {:?}) on port {}: store {} holds a snapshot at {} with {} broker sets and {} log entries after it",
            config.self_peer().id,
            ids,
            config.listen_port(),
            dir.display(),
            opened.snapshot_index,
            opened.state.broker_names().len(),
            opened.log_entries,
        );
        let mut controller = Controller {
            config,
            state: opened.state,
            liveness: Liveness::new(),
            pipeline: Pipeline::new(),
            group: Box::new(opened.group),
            applied_index: opened.snapshot_index,
            events_since_snapshot: 0,
            outbox: NotifyOutbox::default(),
            lease: WriteLeaseGate::new(),
            config_updates: VecDeque::new(),
            next_file_job: 0,
        };
        if controller.group.is_alone() {
            controller.serve_alone(started)?;
        }
        Ok(controller)
    }

    /// A group of one: campaigns, and waits until its first entry is on disk and applied (so
    /// the caller gets a controller that serves, as a node of a group gets one that follows).
    fn serve_alone(&mut self, started: Instant) -> Result<(), StartError> {
        let mut out = Vec::new();
        self.drive_group(0, &mut out, |group, events| group.lead_alone(events));
        while !self.group.is_serving() {
            if let Some(why) = self.group.failure() {
                return Err(StartError::Storage(StorageError::Corrupt {
                    path: self.config.store_dir(),
                    offset: None,
                    reason: format!("the controller cannot start serving: {why}"),
                }));
            }
            if started.elapsed() > START_SERVING_TIMEOUT {
                return Err(StartError::Storage(StorageError::Corrupt {
                    path: self.config.store_dir(),
                    offset: None,
                    reason: "the first write did not reach the disk within 10 s".into(),
                }));
            }
            self.drive_group(0, &mut out, |group, events| {
                group.wait_disk(Duration::from_millis(100), events)
            });
        }
        debug_assert!(out.is_empty(), "nobody asked anything yet: {}", out.len());
        Ok(())
    }

    /// Raft's tick period; the loop calls [`raft_tick`](Self::raft_tick) this often.
    pub fn raft_tick_ms(&self) -> u64 {
        super::raft::TICK_MS
    }

    /// This node's role, term and leader.
    pub fn group_status(&self) -> GroupStatus {
        self.group.status()
    }

    /// Raft's clock.
    pub fn raft_tick(&mut self, now_ms: u64, out: &mut Vec<Reply<T>>) {
        self.drive_group(now_ms, out, |group, events| group.tick(events));
    }

    /// A payload peer `from` sent (the link authenticated the peer); decode errors are
    /// logged and the payload dropped.
    pub fn on_peer_message(
        &mut self,
        from: u64,
        payload: &[u8],
        now_ms: u64,
        out: &mut Vec<Reply<T>>,
    ) {
        self.drive_group(now_ms, out, |group, events| {
            group.step(from, payload, events)
        });
    }

    /// Payloads to send now, (to, bytes); the link drops those for unreachable peers.
    pub fn take_peer_messages(&mut self, out: &mut Vec<(u64, Vec<u8>)>) {
        self.group.take_messages(out);
    }

    /// Simulations ([`open_simulated`](Self::open_simulated)): the disk finishes everything
    /// it was given, and what that releases is processed.
    pub fn run_disk(&mut self, now_ms: u64, out: &mut Vec<Reply<T>>) {
        self.drive_group(now_ms, out, |group, events| group.run_disk(events));
    }

    /// Runs `input` on the Raft group, then processes the events it produced.
    fn drive_group(
        &mut self,
        now_ms: u64,
        out: &mut Vec<Reply<T>>,
        input: impl FnOnce(&mut RaftGroup, &mut Vec<GroupEvent>),
    ) {
        let mut events = Vec::new();
        input(&mut self.group, &mut events);
        let mut done = Vec::new();
        self.on_group_events(events, &mut done, out);
        self.advance(now_ms, &mut done);
        self.finish(done, now_ms, out);
    }

    fn on_group_events(
        &mut self,
        events: Vec<GroupEvent>,
        done: &mut Vec<Completed<Ticket<T>>>,
        out: &mut Vec<Reply<T>>,
    ) {
        for event in events {
            match event {
                GroupEvent::Committed {
                    index,
                    data,
                    proposal,
                } => self.on_durable(index, proposal, &data, done),
                GroupEvent::Snapshot { index, state } => {
                    self.state = state;
                    self.applied_index = index;
                    self.events_since_snapshot = 0;
                }
                GroupEvent::Serving { term } => {
                    log::info!("controller: leader in term {term}; serving leader-only requests");
                    // The next inactive-master scan (a timer) catches what happened meanwhile.
                    self.lease.reset();
                }
                GroupEvent::LeadershipLost { term } => {
                    log::warn!("controller: leadership of term {term} lost; parked requests fail");
                    self.lease.reset();
                    let in_flight = Response::error(
                        SYSTEM_ERROR,
                        format!("the controller lost its leadership (term {term}) before the change was committed"),
                    );
                    let queued = super::pipeline::NotServing::NotLeader.response();
                    self.pipeline.lose_leadership(&in_flight, &queued, done);
                }
                GroupEvent::Failed(why) => self.fail(why, done),
                GroupEvent::FileWritten { id, result } => self.config_written(id, result, out),
            }
        }
    }

    pub fn config(&self) -> &ControllerConfig {
        &self.config
    }

    pub fn state(&self) -> &ControllerState {
        &self.state
    }

    pub fn liveness(&self) -> &Liveness {
        &self.liveness
    }

    /// The index of the last entry applied to the state.
    pub fn applied_index(&self) -> u64 {
        self.applied_index
    }

    /// Requests waiting for an answer: in the pipeline (the one in flight included) and
    /// config updates waiting for their file.
    pub fn pending_requests(&self) -> usize {
        self.pipeline.len() + self.config_updates.len()
    }

    /// When [`expire_requests`](Self::expire_requests) next has something to do.
    pub fn next_deadline_ms(&self) -> Option<u64> {
        self.pipeline.next_deadline_ms()
    }

    /// Rough bytes held by the tables (for memory reports).
    pub fn approximate_bytes(&self) -> usize {
        self.state.approximate_bytes() + self.liveness.approximate_bytes()
    }

    /// One request from the controller port. Replies (this one's, if it can be answered
    /// now, and any others it released) are appended to `out`.
    pub fn handle(
        &mut self,
        ticket: T,
        cmd: &RemotingCommand,
        conn: Option<ConnRef>,
        now_ms: u64,
        out: &mut Vec<Reply<T>>,
    ) {
        if cmd.is_response() {
            log::debug!(
                "controller: dropping an unexpected response frame (opaque {})",
                cmd.opaque
            );
            return;
        }
        let wants_reply = !cmd.is_oneway();
        let request = match request::parse(cmd) {
            Ok(request) => request,
            Err(response) => return reply(out, ticket, wants_reply, response),
        };
        let response = match request {
            ControllerRequest::Heartbeat(hb) => self.heartbeat(&hb, conn, wants_reply, now_ms),
            ControllerRequest::GetMetadata => self.metadata(),
            ControllerRequest::UpdateConfig { body: Some(body) } => {
                self.config_updates.push_back(ConfigUpdate {
                    ticket,
                    wants_reply,
                    body,
                    writing: None,
                });
                return self.next_config_update(out);
            }
            // Java: no body, nothing to change.
            ControllerRequest::UpdateConfig { body: None } => Response::new(SUCCESS, None),
            ControllerRequest::GetConfig => {
                Response::new(SUCCESS, None).body(self.config.to_properties_text().into_bytes())
            }
            ControllerRequest::Unsupported(code) => Response::error(
                REQUEST_CODE_NOT_SUPPORTED,
                format!(" request type {code} not supported"),
            ),
            ControllerRequest::Leader(request) => {
                log::debug!(
                    "controller: {} queued",
                    super::codes::request_name(request.code())
                );
                return self.submit(Origin::Client((ticket, wants_reply)), request, now_ms, out);
            }
        };
        reply(out, ticket, wants_reply, response);
    }

    fn heartbeat(
        &mut self,
        hb: &Heartbeat,
        conn: Option<ConnRef>,
        wants_reply: bool,
        now_ms: u64,
    ) -> Response {
        if hb.broker_id.is_none() {
            return Response::error(
                rc::CONTROLLER_INVALID_REQUEST,
                "Heart beat with empty brokerId",
            );
        }
        self.liveness.on_heartbeat(hb, conn, now_ms);
        let response = Response::new(SUCCESS, Some("Heart beat success".into()));
        // Only a peer that reads the answer can use a lease (rocketmq-rust brokers).
        if !wants_reply || self.group.serving().is_err() {
            return response;
        }
        match self
            .lease
            .grant(hb, &self.state, self.group.status().term, now_ms)
        {
            Some(body) => response.body(body),
            None => response,
        }
    }

    /// 1005: who leads. A single node answers as Java's does (it leads its group of one); a
    /// member of several names the leader it knows (none during an election) so brokers find
    /// it, plus its own role and term (extra header fields Java's clients ignore).
    fn metadata(&self) -> Response {
        if self.group.is_alone() {
            return self.single_node_metadata();
        }
        let status = self.group_status();
        let ids = raft::raft_ids(self.config.peers());
        let leader = ids
            .iter()
            .zip(self.config.peers())
            .find(|(id, _)| **id == status.leader_id && status.leader_id != 0)
            .map(|(_, p)| p);
        let mut fields = Vec::new();
        if let Some(leader) = leader {
            fields.push(("controllerLeaderAddress", leader.address.clone()));
            fields.push(("controllerLeaderId", leader.id.clone()));
        }
        if let Some(group) = self.config.group() {
            fields.push(("group", group.to_owned()));
        }
        fields.push(("isLeader", (status.role == "LEADER").to_string()));
        fields.push(("peers", self.peers_text()));
        fields.push(("raftApplied", status.applied.to_string()));
        fields.push(("raftRole", status.role.to_owned()));
        fields.push(("raftServing", status.serving.to_string()));
        fields.push(("raftTerm", status.term.to_string()));
        Response::with_header(SUCCESS, fields)
    }

    fn peers_text(&self) -> String {
        self.config
            .peers()
            .iter()
            .map(|p| format!("{}:{};", p.id, p.address))
            .collect()
    }

    fn single_node_metadata(&self) -> Response {
        let me = self.config.self_peer();
        let mut fields = vec![
            ("controllerLeaderAddress", me.address.clone()),
            ("controllerLeaderId", me.id.clone()),
        ];
        if let Some(group) = self.config.group() {
            fields.push(("group", group.to_owned()));
        }
        fields.push(("isLeader", "true".to_owned()));
        fields.push(("peers", self.peers_text()));
        Response::with_header(SUCCESS, fields)
    }

    /// 1009, one at a time: checks the front request against the current config, and has
    /// the log writer persist it (the answer waits for that fsync). Refusals and requests
    /// that change nothing are answered at once.
    fn next_config_update(&mut self, out: &mut Vec<Reply<T>>) {
        while let Some(mut update) = self.config_updates.pop_front() {
            if update.writing.is_some() {
                self.config_updates.push_front(update);
                return;
            }
            let response = match self.config.plan_update(&update.body) {
                Err(e) => {
                    log::warn!("controller: UPDATE_CONTROLLER_CONFIG refused: {e}");
                    let (code, remark) = e.code_and_remark();
                    Response::error(code, remark)
                }
                Ok(plan) if plan.keys.is_empty() => Response::new(SUCCESS, None),
                Ok(plan) => {
                    self.next_file_job += 1;
                    let id = self.next_file_job;
                    match self.group.write_file(id, plan.path(), plan.file_content()) {
                        Ok(()) => {
                            update.writing = Some((id, plan));
                            self.config_updates.push_front(update);
                            return;
                        }
                        Err(e) => Response::system_error(e.to_string()),
                    }
                }
            };
            reply(out, update.ticket, update.wants_reply, response);
        }
    }

    /// The log writer persisted (or failed to persist) the front 1009's file.
    fn config_written(&mut self, id: u64, result: Result<(), String>, out: &mut Vec<Reply<T>>) {
        let is_front = matches!(self.config_updates.front(), Some(ConfigUpdate { writing: Some((w, _)), .. }) if *w == id);
        let Some(update) = is_front.then(|| self.config_updates.pop_front()).flatten() else {
            return;
        };
        let Some((_, plan)) = update.writing else {
            return;
        };
        let response = match result {
            Ok(()) => {
                log::info!(
                    "controller: UPDATE_CONTROLLER_CONFIG set {}",
                    plan.keys.join(", ")
                );
                self.config = plan.next;
                Response::new(SUCCESS, None)
            }
            Err(e) => {
                log::error!("controller: UPDATE_CONTROLLER_CONFIG not applied: {e}");
                Response::system_error(e)
            }
        };
        reply(out, update.ticket, update.wants_reply, response);
        self.next_config_update(out);
    }

    fn submit(
        &mut self,
        origin: Origin<Ticket<T>>,
        request: LeaderRequest,
        now_ms: u64,
        out: &mut Vec<Reply<T>>,
    ) {
        let mut done = Vec::new();
        if let Err(not_serving) = self.group.serving() {
            done.push(Completed {
                origin,
                response: not_serving.response(),
                elected: None,
            });
        } else {
            self.pipeline.submit(origin, request, now_ms, &mut done);
            self.advance(now_ms, &mut done);
        }
        self.finish(done, now_ms, out);
    }

    fn advance(&mut self, now_ms: u64, done: &mut Vec<Completed<Ticket<T>>>) {
        let settings = self.config.settings();
        let inputs = Inputs {
            liveness: &self.liveness,
            now_ms,
            enable_elect_unclean_master: settings.enable_elect_unclean_master,
            process_read_event: settings.process_read_event,
        };
        let proposed = self.group.proposals();
        self.pipeline
            .advance(&self.state, &inputs, self.group.as_mut(), done);
        if self.group.proposals() == proposed {
            return; // reads and refusals: nothing for Raft to do
        }
        // A proposal becomes a Ready to persist and send.
        let mut events = Vec::new();
        self.group.process(&mut events);
        if !events.is_empty() {
            let mut out = Vec::new();
            self.on_group_events(events, done, &mut out);
            // Only FileWritten answers land here, and process() never yields those.
            debug_assert!(out.is_empty());
            self.advance(now_ms, done);
        }
    }

    /// Routes completed requests: replies to callers, retries of the controller's own
    /// elections, notifications for durable elections.
    fn finish(
        &mut self,
        mut done: Vec<Completed<Ticket<T>>>,
        now_ms: u64,
        out: &mut Vec<Reply<T>>,
    ) {
        while !done.is_empty() {
            let mut more = Vec::new();
            for c in done {
                if let Some(elected) = &c.elected {
                    self.notify_elected(elected, now_ms);
                }
                match c.origin {
                    Origin::Client((ticket, wants_reply)) => {
                        reply(out, ticket, wants_reply, c.response)
                    }
                    Origin::Election {
                        broker_name,
                        attempts_left,
                    } => {
                        if c.response.code == SUCCESS || attempts_left <= 1 {
                            continue;
                        }
                        log::warn!(
                            "controller: election for broker set {broker_name} answered {} ({}); {} attempts left",
                            c.response.code,
                            c.response.remark.as_deref().unwrap_or(""),
                            attempts_left - 1
                        );
                        let origin = Origin::Election {
                            broker_name: broker_name.clone(),
                            attempts_left: attempts_left - 1,
                        };
                        let request = LeaderRequest::ElectMaster(ElectMaster::controller_trigger(
                            &broker_name,
                        ));
                        self.pipeline.submit(origin, request, now_ms, &mut more);
                    }
                }
            }
            self.advance(now_ms, &mut more);
            done = more;
        }
    }

    /// Queues 1008 for the active members of a set whose election is now durable.
    fn notify_elected(&mut self, elected: &Elected, now_ms: u64) {
        if !self.config.settings().notify_broker_role_changed {
            return;
        }
        for n in notify::for_election(elected, &self.liveness, now_ms) {
            self.outbox.push(n);
        }
    }

    /// Picks up what the log writer finished: applies committed entries, releases their
    /// answers, takes snapshots when due. Call when the waker given to `open` fired.
    pub fn on_log_completions(&mut self, now_ms: u64, out: &mut Vec<Reply<T>>) {
        let mut done = Vec::new();
        let mut events = Vec::new();
        self.group.on_disk(&mut events);
        self.on_group_events(events, &mut done, out);
        self.advance(now_ms, &mut done);
        self.finish(done, now_ms, out);
    }

    /// A committed entry: applied, its request answered if it is this node's, a snapshot
    /// taken when due.
    fn on_durable(
        &mut self,
        index: u64,
        proposal: Option<u64>,
        entry: &[u8],
        done: &mut Vec<Completed<Ticket<T>>>,
    ) {
        match self
            .pipeline
            .on_committed(proposal, entry, &mut self.state, done)
        {
            Ok(events) => {
                self.applied_index = index;
                self.events_since_snapshot += events.len() as u64;
                for event in &events {
                    log_change(event, &self.state);
                }
                self.maybe_snapshot();
            }
            Err(e) => self.fail(format!("entry {index} cannot be applied: {e}"), done),
        }
    }

    fn fail(&mut self, why: String, done: &mut Vec<Completed<Ticket<T>>>) {
        log::error!(
            "controller: the log failed ({why}); leader-only requests are refused until restart"
        );
        self.group.mark_failed(why);
        if let Err(not_serving) = self.group.serving() {
            self.pipeline.fail_all(&not_serving.response(), done);
        }
    }

    fn maybe_snapshot(&mut self) {
        if self.events_since_snapshot < self.config.settings().snapshot_events {
            return;
        }
        self.events_since_snapshot = 0;
        self.group.snapshot(self.applied_index, &self.state);
    }

    /// Answers requests that waited longer than 5 s.
    pub fn expire_requests(&mut self, now_ms: u64, out: &mut Vec<Reply<T>>) {
        let mut done = Vec::new();
        self.pipeline.expire(now_ms, &mut done);
        self.finish(done, now_ms, out);
    }

    /// The heartbeat-expiry scan (every `scanNotActiveBrokerInterval`): silent brokers are
    /// dropped, an inactive master is replaced. Returns the connections to close.
    pub fn scan_not_active_brokers(
        &mut self,
        now_ms: u64,
        out: &mut Vec<Reply<T>>,
    ) -> Vec<ConnRef> {
        let gone = self.liveness.scan_not_active(now_ms);
        let conns = gone.iter().filter_map(|b| b.conn).collect();
        for broker in &gone {
            log::warn!(
                "controller: broker {} id {} (cluster {}) stopped heartbeating",
                broker.broker_name,
                broker.broker_id,
                broker.cluster_name.as_deref().unwrap_or("?")
            );
        }
        self.brokers_inactive(&gone, now_ms, out);
        conns
    }

    /// A connection on the controller port closed: its brokers are inactive now.
    pub fn connection_closed(&mut self, conn: ConnRef, now_ms: u64, out: &mut Vec<Reply<T>>) {
        let gone = self.liveness.connection_closed(conn);
        for broker in &gone {
            log::info!(
                "controller: broker {} id {} disconnected",
                broker.broker_name,
                broker.broker_id
            );
        }
        self.brokers_inactive(&gone, now_ms, out);
    }

    /// Java's `onBrokerInactive`: only the master's loss starts an election.
    fn brokers_inactive(&mut self, gone: &[InactiveBroker], now_ms: u64, out: &mut Vec<Reply<T>>) {
        for broker in gone {
            let is_master = self
                .state
                .sync_state(&broker.broker_name)
                .is_some_and(|s| s.master_broker_id() == Some(broker.broker_id));
            if is_master {
                self.trigger_election(&broker.broker_name, now_ms, out);
            }
        }
    }

    /// The inactive-master scan (every `scanInactiveMasterInterval`): a set whose master is
    /// inactive while another member is alive gets an election.
    pub fn scan_inactive_masters(&mut self, now_ms: u64, out: &mut Vec<Reply<T>>) {
        for name in replicas::scan_need_reelect(&self.state, &self.liveness, now_ms) {
            log::info!("controller: master of broker set {name} is inactive; electing another");
            self.trigger_election(&name, now_ms, out);
        }
    }

    fn trigger_election(&mut self, broker_name: &str, now_ms: u64, out: &mut Vec<Reply<T>>) {
        let attempts = self.config.settings().elect_master_max_retry_count;
        // Java: only the leader elects (followers keep their liveness table only).
        if attempts == 0
            || self.pipeline.has_election_for(broker_name)
            || self.group.serving().is_err()
        {
            return;
        }
        self.submit(
            Origin::Election {
                broker_name: broker_name.to_owned(),
                attempts_left: attempts,
            },
            LeaderRequest::ElectMaster(ElectMaster::controller_trigger(broker_name)),
            now_ms,
            out,
        );
    }

    /// Role-change notifications to send (newest per broker address).
    pub fn take_notifications(&mut self) -> Vec<RoleChangeNotification> {
        self.outbox.drain()
    }

    /// Stops: waits for the writer to finish what it was given, applies and answers what it
    /// made durable, and answers everything else SYSTEM_ERROR.
    pub fn shutdown(mut self) -> Vec<Reply<T>> {
        let mut done = Vec::new();
        let mut out = Vec::new();
        for event in self.group.close() {
            if let GroupEvent::FileWritten { id, result } = event {
                self.config_written(id, result, &mut out);
            }
        }
        let stopping = Response::error(SYSTEM_ERROR, "the controller is shutting down");
        self.pipeline.fail_all(&stopping, &mut done);
        for update in self.config_updates.drain(..) {
            reply(
                &mut out,
                update.ticket,
                update.wants_reply,
                stopping.clone(),
            );
        }
        for c in done {
            if let Origin::Client((ticket, wants_reply)) = c.origin {
                reply(&mut out, ticket, wants_reply, c.response);
            }
        }
        out
    }
}

fn reply<T>(out: &mut Vec<Reply<T>>, ticket: T, wants_reply: bool, response: Response) {
    if wants_reply {
        out.push(Reply { ticket, response });
    }
}

/// One info line per durable change of the replicated state (a handful per broker set's
/// life, never one per request).
fn log_change(event: &Event, state: &ControllerState) {
    let name = event.broker_name();
    let master_epoch = state.sync_state(name).map_or(0, |s| s.master_epoch());
    match event {
        Event::ApplyBrokerId {
            new_broker_id,
            broker_address,
            ..
        } => log::info!("controller: broker set {name} gives id {new_broker_id} to {broker_address}"),
        Event::ElectMaster {
            new_master_broker_id: Some(master),
            ..
        } => log::info!(
            "controller: broker set {name} has a new master: id {master} ({}), masterEpoch {master_epoch}",
            state
                .replica_info(name)
                .and_then(|r| r.address(*master))
                .unwrap_or("no address"),
        ),
        Event::ElectMaster { .. } => log::warn!(
            "controller: broker set {name} has no master: nobody electable is alive (masterEpoch {master_epoch})"
        ),
        Event::AlterSyncStateSet {
            new_sync_state_set, ..
        } => log::info!("controller: broker set {name} in-sync replicas now {new_sync_state_set:?}"),
        Event::CleanBrokerData {
            broker_id_set_to_clean,
            ..
        } => match broker_id_set_to_clean.as_ref().filter(|ids| !ids.is_empty()) {
            Some(ids) => log::info!("controller: broker set {name}: ids {ids:?} cleaned"),
            None => log::info!("controller: broker set {name} cleaned"),
        },
        Event::UpdateBrokerAddress {
            broker_id,
            broker_address,
            ..
        } => log::info!("controller: broker set {name}: id {broker_id} now at {broker_address}"),
    }
}
