//! The controller as one object the event loop drives: [`Controller`] owns the config, the
//! replicated state, the liveness table, the request pipeline, the log and the pending
//! notifications, and turns the loop's inputs into replies.
//!
//! Inputs, all on the loop thread, time passed in: a frame from the controller port
//! ([`Controller::handle`]), "the log writer has news" ([`Controller::on_log_completions`],
//! after the waker given to [`Controller::open`] fired), timers
//! ([`Controller::expire_requests`], [`Controller::scan_not_active_brokers`],
//! [`Controller::scan_inactive_masters`]) and a closed connection
//! ([`Controller::connection_closed`]). Outputs: replies for the caller's tickets (`T`: the
//! loop's connection + opaque + serialization), connections to close, and role-change
//! notifications to send off the loop ([`Controller::take_notifications`]).
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
use super::replicas::{self, Elected};
use super::request::{self, ControllerRequest, ElectMaster, Heartbeat, LeaderRequest};
use super::response::Response;
use super::state::ControllerState;
use super::storage::{Completion, SingleNodeLog, Storage, StorageError, Wake};
use crate::remoting::codes::response::{REQUEST_CODE_NOT_SUPPORTED, SUCCESS, SYSTEM_ERROR};
use crate::remoting::command::RemotingCommand;
use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;

/// The single node's leader term (a Raft group will pass its term instead).
const SINGLE_NODE_TERM: u64 = 1;

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
    log: SingleNodeLog,
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
    pub fn open(
        mut config: ControllerConfig,
        waker: Option<Arc<dyn Wake>>,
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
        let dir = config.store_dir();
        let (storage, recovered) = Storage::open(&dir, waker).map_err(StartError::Storage)?;
        log::info!(
            "controller {} on port {}: store {} recovered {} broker sets (snapshot at {}, {} log records replayed, last index {})",
            config.self_peer().id,
            config.listen_port(),
            dir.display(),
            recovered.state.broker_names().len(),
            recovered.snapshot_index,
            recovered.replayed,
            recovered.last_index
        );
        Ok(Controller {
            config,
            state: recovered.state,
            liveness: Liveness::new(),
            pipeline: Pipeline::new(),
            log: SingleNodeLog::new(storage),
            applied_index: recovered.last_index,
            events_since_snapshot: recovered.events_since_snapshot,
            outbox: NotifyOutbox::default(),
            lease: WriteLeaseGate::new(),
            config_updates: VecDeque::new(),
            next_file_job: 0,
        })
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
        if !wants_reply || self.log.failure().is_some() {
            return response;
        }
        match self.lease.grant(hb, &self.state, SINGLE_NODE_TERM, now_ms) {
            Some(body) => response.body(body),
            None => response,
        }
    }

    /// 1005: this node is the group's only member, so it is the leader.
    fn metadata(&self) -> Response {
        let me = self.config.self_peer();
        let peers: String = self
            .config
            .peers()
            .iter()
            .map(|p| format!("{}:{};", p.id, p.address))
            .collect();
        let mut fields = vec![
            ("controllerLeaderAddress", me.address.clone()),
            ("controllerLeaderId", me.id.clone()),
        ];
        if let Some(group) = self.config.group() {
            fields.push(("group", group.to_owned()));
        }
        fields.push(("isLeader", "true".to_owned()));
        fields.push(("peers", peers));
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
                    match self
                        .log
                        .storage_mut()
                        .write_file(id, plan.path(), plan.file_content())
                    {
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
        if let Err(not_serving) = self.log.serving() {
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
        self.pipeline
            .advance(&self.state, &inputs, &mut self.log, done);
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

    /// Picks up what the log writer finished: applies durable entries, releases their
    /// answers, takes snapshots when due. Call when the waker given to `open` fired.
    pub fn on_log_completions(&mut self, now_ms: u64, out: &mut Vec<Reply<T>>) {
        let mut done = Vec::new();
        while let Some(completion) = self.log.storage().try_completion() {
            match completion {
                Completion::FileWritten { id, result } => self.config_written(id, result, out),
                other => self.on_completion(other, &mut done),
            }
        }
        self.advance(now_ms, &mut done);
        self.finish(done, now_ms, out);
    }

    fn on_completion(&mut self, completion: Completion, done: &mut Vec<Completed<Ticket<T>>>) {
        match completion {
            Completion::Durable { index, entry } => {
                match self
                    .pipeline
                    .on_committed(Some(index), &entry, &mut self.state, done)
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
            Completion::Failed { index, error } => {
                self.fail(format!("entry {index}: {error}"), done);
            }
            // Handled by the caller (it answers a 1009, not a pipeline request).
            Completion::FileWritten { .. } => {}
            Completion::Snapshot { index, result } => match result {
                Ok(kept) => log::info!(
                    "controller: snapshot at index {index} written; log cut to {kept} records"
                ),
                Err(e) => log::error!(
                    "controller: snapshot at index {index} failed: {e}; the log keeps growing until one succeeds"
                ),
            },
        }
    }

    fn fail(&mut self, why: String, done: &mut Vec<Completed<Ticket<T>>>) {
        log::error!(
            "controller: the log failed ({why}); leader-only requests are refused until restart"
        );
        self.log.mark_failed(why);
        if let Err(not_serving) = self.log.serving() {
            self.pipeline.fail_all(&not_serving.response(), done);
        }
    }

    fn maybe_snapshot(&mut self) {
        if self.events_since_snapshot < self.config.settings().snapshot_events {
            return;
        }
        self.events_since_snapshot = 0;
        if let Err(e) = self
            .log
            .storage_mut()
            .snapshot(self.applied_index, &self.state)
        {
            log::error!(
                "controller: snapshot at index {} not taken: {e}",
                self.applied_index
            );
        }
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
        if attempts == 0 || self.pipeline.has_election_for(broker_name) {
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
        let completions = self.log.storage_mut().close_writer();
        for completion in completions {
            match completion {
                Completion::Durable { index, entry } => {
                    if let Err(e) =
                        self.pipeline
                            .on_committed(Some(index), &entry, &mut self.state, &mut done)
                    {
                        log::error!("controller: entry {index} cannot be applied at shutdown: {e}");
                    }
                }
                Completion::FileWritten { id, result } => self.config_written(id, result, &mut out),
                _ => {}
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
