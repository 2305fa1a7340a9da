//! The controller as one object the event loop drives: [`Controller`] owns the config, the
//! state, the liveness table, the pipeline, the Raft group and the pending notifications, and
//! turns the loop's inputs (with the time passed in) into replies, connections to close, 1008
//! notifications and payloads for peers.

mod elections;
pub use elections::{Scan, SCAN_STEPS_PER_TURN};
mod senders;
mod start;

use super::codes::response as rc;
use super::config::{ControllerConfig, Peer, PlannedUpdate};
use super::event::Event;
use super::lease::WriteLeaseGate;
use super::liveness::{ConnRef, Liveness};
use super::notify::{self, NotifyOutbox, RoleChangeNotification};
use super::pipeline::{Completed, Durability, NotServing, Origin, Pipeline};
use super::raft::records::StorageError;
use super::raft::wire::Payload;
use super::raft::{self, GroupEvent, GroupStatus, RaftGroup, WallClock};
use super::replicas::{Elected, View};
use super::request::{self, ControllerRequest, ElectMaster, Heartbeat, LeaderRequest};
use super::response::Response;
use super::state::{ControllerState, Stamp};
use crate::config::Cidr;
use crate::event_loop::LogGate;
use crate::remoting::codes::response::{
    REQUEST_CODE_NOT_SUPPORTED, SUCCESS, SYSTEM_BUSY, SYSTEM_ERROR,
};
use crate::remoting::command::RemotingCommand;
use crate::request::NameLimits;
use bytes::Bytes;
use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::net::IpAddr;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply<T> {
    pub ticket: T,
    pub response: Response,
    /// What an audited request (election, clean, config update) asked to change: the caller
    /// writes its audit line with the answer (`crate::audit`).
    pub audit: Option<String>,
}

#[derive(Debug)]
pub enum StartError {
    Config(String),
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

/// A request of the caller's: the ticket, whether an answer is expected, and what an
/// audited one asks to change ([`Reply::audit`]).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Ticket<T> {
    ticket: T,
    wants_reply: bool,
    audit: Option<String>,
}

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
    /// 1009s, one at a time: the front one may be waiting for its file write.
    config_updates: VecDeque<ConfigUpdate<T>>,
    next_file_job: u64,
    /// Counts of the replay at start; None once it is over.
    replay: Option<start::Replay>,
    wall: WallClock,
    /// Masters seen dying while this node did not serve (see `elections`).
    inactive_masters: BTreeMap<String, elections::DeadMaster>,
    /// Where the paced scans stand (see `elections`).
    scans: elections::Scans,
    /// When this node began to serve, and whether a new leader's checks are done.
    serving_since: Option<u64>,
    serving_checked: bool,
    /// The name server's `maxNameLength` and kin, as they are now (they are live settings).
    name_limits: NameLimits,
    /// Requests refused at the wire: one warning line per interval.
    refused_log: LogGate,
    /// The name server's `adminAllowList` and `brokerAllowList` (see `senders`).
    admin_allow_list: Vec<Cidr>,
    broker_allow_list: Vec<Cidr>,
    refused_senders: u64,
    /// Master elections by [`ELECTION_RESULTS`].
    elections: [u64; 3],
}

/// Java's `ElectionResult` names, the `election_result` label of its `election_total`.
pub const ELECTION_RESULTS: [&str; 3] = [
    "new_master_elected",
    "keep_current_master",
    "no_master_elected",
];

struct ConfigUpdate<T> {
    asked: Ticket<T>,
    body: Vec<u8>,
    writing: Option<(u64, PlannedUpdate)>,
}

impl<T> Controller<T> {
    pub fn group_status(&self) -> GroupStatus {
        self.group.status()
    }

    /// Master elections so far, by [`ELECTION_RESULTS`].
    pub fn elections(&self) -> [u64; 3] {
        self.elections
    }

    /// An election's outcome, known by its answer (requested or the controller's own).
    fn count_election(&mut self, c: &Completed<Ticket<T>>) {
        let result = match c.response.code {
            _ if c.elected.is_some() => 0,
            rc::CONTROLLER_MASTER_STILL_EXIST => 1,
            rc::CONTROLLER_MASTER_NOT_AVAILABLE | rc::CONTROLLER_ELECT_MASTER_FAILED => 2,
            _ => return,
        };
        self.elections[result] += 1;
    }

    pub fn raft_tick(&mut self, now_ms: u64, out: &mut Vec<Reply<T>>) {
        self.drive_group(now_ms, out, |group, events| group.tick(events));
    }

    /// A payload peer `from` sent (the link authenticated the peer).
    pub fn on_peer_message(
        &mut self,
        from: u64,
        payload: Bytes,
        now_ms: u64,
        out: &mut Vec<Reply<T>>,
    ) {
        self.drive_group(now_ms, out, |group, events| {
            group.step(from, payload, events)
        });
    }

    /// Payloads to send now, (to, bytes).
    pub fn take_peer_messages(&mut self, out: &mut Vec<(u64, Payload)>) {
        self.group.take_messages(out);
    }

    /// Simulations: the disk finishes everything it was given.
    pub fn run_disk(&mut self, now_ms: u64, out: &mut Vec<Reply<T>>) {
        self.drive_group(now_ms, out, |group, events| group.run_disk(events));
    }

    fn drive_group(
        &mut self,
        now_ms: u64,
        out: &mut Vec<Reply<T>>,
        input: impl FnOnce(&mut RaftGroup, &mut Vec<GroupEvent>),
    ) {
        let mut events = Vec::new();
        input(&mut self.group, &mut events);
        let mut done = Vec::new();
        self.on_group_events(events, &mut done, out, now_ms);
        self.advance(now_ms, &mut done);
        self.finish(done, now_ms, out);
    }

    fn on_group_events(
        &mut self,
        events: Vec<GroupEvent>,
        done: &mut Vec<Completed<Ticket<T>>>,
        out: &mut Vec<Reply<T>>,
        now_ms: u64,
    ) {
        for event in events {
            match event {
                GroupEvent::Committed {
                    index,
                    data,
                    proposal,
                    stamp,
                } => self.on_durable(index, proposal, stamp, &data, done, now_ms),
                GroupEvent::Snapshot { index, state } => {
                    let replaced = std::mem::replace(&mut self.state, state);
                    self.group.discard(replaced);
                    self.applied_index = index;
                    self.events_since_snapshot = 0;
                    // Not a pass over 100,000 sets on the loop: each set's authority is learnt
                    // again at its next heartbeat, later than now (a first grant waits no less).
                    self.group.discard(self.lease.forget_all());
                }
                GroupEvent::Serving { term } => {
                    log::info!("controller: leader in term {term}; serving leader-only requests");
                    self.serving_since = Some(now_ms);
                    // Checked once the events are handled (`finish`).
                    self.serving_checked = false;
                }
                GroupEvent::LeadershipLost { term } => {
                    log::warn!("controller: leadership of term {term} lost; parked requests fail");
                    self.serving_since = None;
                    let in_flight = Response::error(
                        SYSTEM_ERROR,
                        format!("the controller lost its leadership (term {term}) before the change was committed"),
                    );
                    let queued = NotServing::NotLeader.response();
                    self.pipeline.lose_leadership(&in_flight, &queued, done);
                }
                GroupEvent::Failed(why) => self.fail(why, done),
                GroupEvent::Stalled(_) => {
                    if let Err(not_serving) = self.group.serving() {
                        self.pipeline
                            .answer_in_flight(&not_serving.response(), done);
                    }
                }
                GroupEvent::FileWritten { id, result } => self.config_written(id, result, out),
            }
        }
    }

    /// The name server's limits for names and addresses, which the controller's requests obey.
    pub fn set_name_limits(&mut self, limits: NameLimits) {
        self.name_limits = limits;
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

    pub fn applied_index(&self) -> u64 {
        self.applied_index
    }

    /// Requests waiting for an answer.
    pub fn pending_requests(&self) -> usize {
        self.pipeline.len() + self.config_updates.len()
    }

    /// The name server is stopping: a member of a group of several answers its leader-only
    /// requests now (`SYSTEM_ERROR`), since a stopping loop no longer reads the peers'
    /// acknowledgements. A group of one keeps them: its own disk finishes them.
    pub fn stop_waiting_for_peers(&mut self, out: &mut Vec<Reply<T>>) {
        if !self.group.is_alone() {
            self.fail_pipeline(&stopping(), out);
        }
    }

    fn fail_pipeline(&mut self, response: &Response, out: &mut Vec<Reply<T>>) {
        let mut done = Vec::new();
        self.pipeline.fail_all(response, &mut done);
        for c in done {
            if let Origin::Client(asked) = c.origin {
                reply(out, asked, c.response);
            }
        }
    }

    /// When [`expire_requests`](Self::expire_requests) next has something to do.
    pub fn next_deadline_ms(&self) -> Option<u64> {
        self.pipeline.next_deadline_ms()
    }

    /// One request from the controller port, sent over `conn` from `peer`; the replies it
    /// releases go to `out`.
    pub fn handle_from(
        &mut self,
        ticket: T,
        cmd: &RemotingCommand,
        conn: Option<ConnRef>,
        peer: Option<IpAddr>,
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
        let audited = crate::audit::controller_label(cmd.code).is_some();
        let mut asked = Ticket {
            ticket,
            wants_reply: !cmd.is_oneway(),
            audit: None,
        };
        if let Some(refusal) = self.refuse_admin(cmd, peer) {
            return reply(out, asked, refusal);
        }
        let request = match request::parse(cmd, &self.name_limits) {
            Ok(request) => request,
            Err(response) => {
                // An audited request's refusal is its audit line.
                let more = (!audited).then(|| self.refused_log.ready(now_ms)).flatten();
                if let Some(more) = more {
                    log::warn!(
                        "controller: {} refused: {} ({more} more refused since the last line)",
                        super::codes::request_name(cmd.code),
                        response.remark.as_deref().unwrap_or_default()
                    );
                }
                return reply(out, asked, response);
            }
        };
        asked.audit = audited.then(|| describe(&request));
        if let Some(refusal) = self.refuse_sender(&request, peer, now_ms) {
            return reply(out, asked, refusal);
        }
        let response = match request {
            ControllerRequest::Heartbeat(hb) => {
                self.heartbeat(&hb, conn, asked.wants_reply, now_ms)
            }
            ControllerRequest::GetMetadata => self.metadata(),
            ControllerRequest::UpdateConfig { body: Some(body) } => {
                self.config_updates.push_back(ConfigUpdate {
                    asked,
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
                return self.submit(Origin::Client(asked), request, now_ms, out);
            }
        };
        reply(out, asked, response);
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
        if let Err(full) = self.liveness.on_heartbeat(hb, conn, now_ms) {
            return Response::error(SYSTEM_BUSY, full.0);
        }
        let response = Response::new(SUCCESS, Some("Heart beat success".into()));
        // Only a peer that reads the answer can use a lease (rocketmq-rust brokers). A stalled
        // log changes no master: leases go on.
        let serving = match self.group.serving() {
            Ok(()) | Err(NotServing::WritesFailing(_)) => true,
            Err(_) => false,
        };
        if !wants_reply || !serving {
            return response;
        }
        let electing = hb
            .broker_name
            .as_deref()
            .is_some_and(|name| self.pipeline.electing(name));
        match self
            .lease
            .grant(hb, &self.state, self.group.status().term, now_ms, electing)
        {
            Some(body) => response.body(body),
            None => response,
        }
    }

    /// 1005: who leads (a single node: itself, as Java's), plus a member's own role and term.
    fn metadata(&self) -> Response {
        let alone = self.group.is_alone();
        let status = self.group_status();
        let mut fields = Vec::new();
        let leader = match alone {
            true => Some(self.config.self_peer()),
            false => self.leader_peer(),
        };
        if let Some(leader) = leader {
            fields.push(("controllerLeaderAddress", leader.address.clone()));
            fields.push(("controllerLeaderId", leader.id.clone()));
        }
        if let Some(group) = self.config.group() {
            fields.push(("group", group.to_owned()));
        }
        fields.push(("isLeader", (alone || status.role == "LEADER").to_string()));
        let peers = self.config.peers().iter();
        fields.push((
            "peers",
            peers.map(|p| format!("{}:{};", p.id, p.address)).collect(),
        ));
        if !alone {
            fields.push(("raftApplied", status.applied.to_string()));
            fields.push(("raftRole", status.role.to_owned()));
            fields.push(("raftServing", status.serving.to_string()));
            fields.push(("raftTerm", status.term.to_string()));
        }
        Response::with_header(SUCCESS, fields)
    }

    fn leader_peer(&self) -> Option<&Peer> {
        let leader = self.group.status().leader_id;
        let ids = raft::raft_ids(self.config.peers());
        let mut peers = ids.into_iter().zip(self.config.peers());
        peers
            .find(|(id, _)| *id == leader && leader != 0)
            .map(|(_, p)| p)
    }

    /// 1009, one at a time: checks the front request, and has the log writer persist it (the
    /// answer waits for that fsync). Refusals and no-op requests are answered at once.
    fn next_config_update(&mut self, out: &mut Vec<Reply<T>>) {
        while let Some(mut update) = self.config_updates.pop_front() {
            if update.writing.is_some() {
                self.config_updates.push_front(update);
                return;
            }
            let response = match self.config.plan_update(&update.body) {
                // Its audit line gives the reason.
                Err(e) => Response::error(e.response_code(), e.remark()),
                Ok(plan) if plan.keys.is_empty() => {
                    update.asked.audit = Some(NOTHING_TO_CHANGE.into());
                    Response::new(SUCCESS, None)
                }
                Ok(plan) => {
                    update.asked.audit = Some(crate::audit::changes(plan.keys.iter().map(|k| {
                        let old = self.config.get(k).map(str::to_owned);
                        (k.as_str(), old, plan.next.get(k).map(str::to_owned))
                    })));
                    self.next_file_job += 1;
                    let id = self.next_file_job;
                    let path = plan.next.config_store_path();
                    match self.group.write_file(id, path, plan.file_content()) {
                        Ok(()) => {
                            update.writing = Some((id, plan));
                            self.config_updates.push_front(update);
                            return;
                        }
                        Err(e) => Response::system_error(e.to_string()),
                    }
                }
            };
            reply(out, update.asked, response);
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
                self.config = plan.next;
                Response::new(SUCCESS, None)
            }
            Err(e) => Response::system_error(e),
        };
        reply(out, update.asked, response);
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
        let serving = self.group.serving();
        if let Err(not_serving @ (NotServing::NotLeader | NotServing::Failed(_))) = serving {
            done.push(Completed::answer(origin, not_serving.response()));
        } else {
            self.pipeline.submit(origin, request, now_ms, &mut done);
            self.advance(now_ms, &mut done);
        }
        self.finish(done, now_ms, out);
    }

    fn advance(&mut self, now_ms: u64, done: &mut Vec<Completed<Ticket<T>>>) {
        let settings = self.config.settings();
        let view = View {
            state: &self.state,
            liveness: &self.liveness,
            now_ms,
            enable_elect_unclean_master: settings.enable_elect_unclean_master,
        };
        let proposed = self.group.proposals();
        let read_event = settings.process_read_event;
        self.pipeline
            .advance(&view, read_event, self.group.as_mut(), done);
        if self.group.proposals() == proposed {
            return; // reads and refusals: nothing for Raft to do
        }
        let mut events = Vec::new();
        self.group.process(&mut events);
        if !events.is_empty() {
            let mut out = Vec::new();
            self.on_group_events(events, done, &mut out, now_ms);
            // Only FileWritten answers land here, and process() never yields those.
            debug_assert!(out.is_empty());
            self.advance(now_ms, done);
        }
    }

    /// Routes completed requests: replies, retries of own elections, notifications.
    fn finish(
        &mut self,
        mut done: Vec<Completed<Ticket<T>>>,
        now_ms: u64,
        out: &mut Vec<Reply<T>>,
    ) {
        if self.serving_since.is_some() && !self.serving_checked {
            self.serving_checked = true;
            self.on_serving(now_ms, out);
        }
        while !done.is_empty() {
            let mut more = Vec::new();
            for c in done {
                self.count_election(&c);
                if let Some(elected) = &c.elected {
                    self.notify_elected(elected, now_ms);
                }
                match c.origin {
                    Origin::Client(asked) => reply(out, asked, c.response),
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

    fn notify_elected(&mut self, elected: &Elected, now_ms: u64) {
        if !self.config.settings().notify_broker_role_changed {
            return;
        }
        for n in notify::for_election(elected, &self.liveness, now_ms) {
            self.outbox.push(n);
        }
    }

    /// Picks up what the log writer finished. Call when the waker given to `open` fired.
    pub fn on_log_completions(&mut self, now_ms: u64, out: &mut Vec<Reply<T>>) {
        self.drive_group(now_ms, out, |group, events| group.on_disk(events));
    }

    /// A committed entry: applied, its request answered if it is this node's, the write
    /// leases told of new masters, a snapshot taken when due.
    fn on_durable(
        &mut self,
        index: u64,
        proposal: Option<u64>,
        stamp: Option<Stamp>,
        entry: &[u8],
        done: &mut Vec<Completed<Ticket<T>>>,
        now_ms: u64,
    ) {
        let events = match self
            .pipeline
            .on_committed(proposal, entry, &mut self.state, done)
        {
            Ok(events) => events,
            Err(e) => return self.fail(format!("entry {index} cannot be applied: {e}"), done),
        };
        self.applied_index = index;
        self.events_since_snapshot += events.len() as u64;
        for event in &events {
            let name = event.broker_name();
            if let (Event::ElectMaster { .. }, Some(stamp)) = (event, stamp) {
                self.state.set_master_stamp(name, stamp);
            }
            self.lease.observe(name, &self.state, now_ms);
            match &mut self.replay {
                Some(replay) => replay.events += 1,
                None => log_change(event, &self.state),
            }
        }
        if let Some(replay) = &mut self.replay {
            replay.entries += 1;
        }
        self.maybe_snapshot();
    }

    fn fail(&mut self, why: String, done: &mut Vec<Completed<Ticket<T>>>) {
        log::error!(
            "controller: the log failed ({why}); leader-only requests are refused until restart"
        );
        self.group.fail(why, &mut Vec::new());
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

    pub fn expire_requests(&mut self, now_ms: u64, out: &mut Vec<Reply<T>>) {
        let mut done = Vec::new();
        self.pipeline.expire(now_ms, &mut done);
        self.finish(done, now_ms, out);
    }

    pub fn take_notifications(&mut self) -> Vec<RoleChangeNotification> {
        self.outbox.drain()
    }

    /// Stops: waits for the writer to finish what it was given, answers everything else
    /// SYSTEM_ERROR.
    pub fn shutdown(mut self) -> Vec<Reply<T>> {
        let mut out = Vec::new();
        for event in self.group.close() {
            if let GroupEvent::FileWritten { id, result } = event {
                self.config_written(id, result, &mut out);
            }
        }
        let stopping = stopping();
        self.fail_pipeline(&stopping, &mut out);
        for update in self.config_updates.drain(..) {
            let response = stopping.clone();
            reply(&mut out, update.asked, response);
        }
        out
    }
}

fn stopping() -> Response {
    Response::error(SYSTEM_ERROR, "the controller is shutting down")
}

fn reply<T>(out: &mut Vec<Reply<T>>, asked: Ticket<T>, response: Response) {
    if asked.wants_reply {
        out.push(Reply {
            ticket: asked.ticket,
            response,
            audit: asked.audit,
        });
    }
}

/// What an audited request asks to change, for its audit line (a config update's keys are
/// described once checked, as `key old -> new`).
fn describe(request: &ControllerRequest) -> String {
    match request {
        ControllerRequest::Leader(LeaderRequest::ElectMaster(e)) => match e.designate_elect {
            true => format!(
                "broker set {}, designated id {}",
                e.broker_name, e.broker_id
            ),
            false => format!("broker set {}", e.broker_name),
        },
        ControllerRequest::Leader(LeaderRequest::CleanBrokerData(c)) => format!(
            "broker set {}, ids {}{}",
            c.broker_name.as_deref().unwrap_or_default(),
            c.broker_controller_ids_to_clean
                .as_deref()
                .unwrap_or("(all)"),
            if c.is_clean_living_broker {
                ", living brokers too"
            } else {
                ""
            }
        ),
        // Described once checked.
        ControllerRequest::UpdateConfig { body: Some(_) } => String::new(),
        _ => NOTHING_TO_CHANGE.into(),
    }
}

const NOTHING_TO_CHANGE: &str = "nothing to change";

/// One info line per durable change (a handful per broker set's life).
fn log_change(event: &Event, state: &ControllerState) {
    let name = event.broker_name();
    let master_epoch = state.sync_state(name).map_or(0, |s| s.master_epoch);
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
