//! The leader's request pipeline: one FIFO of leader-only requests, one write in flight.
//! The head request is computed on the *applied* state, so every answer reflects every change
//! acknowledged before it (docs/controller.md, "What runs").

use super::codes::response as rc;
use super::event::{decode_entry, encode_entry, Event};
use super::replicas::{self, Elected, View};
use super::request::LeaderRequest;
use super::response::Response;
use super::state::ControllerState;
use crate::remoting::codes::response::{SYSTEM_BUSY, SYSTEM_ERROR};
use std::collections::VecDeque;

/// How long a request may wait for its answer (Java's `WAIT_TIMEOUT_OUT`).
pub const REQUEST_TIMEOUT_MS: u64 = 5_000;
/// Queued requests beyond which new ones are answered SYSTEM_BUSY (a memory bound).
pub const QUEUE_LIMIT: usize = 10_000;

/// Why a node may not serve leader-only requests now: not the leader (2007), the log
/// failed (SYSTEM_ERROR with why), or it cannot be appended to now (a full disk: requests
/// that change something get SYSTEM_ERROR with why, the others are answered).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotServing {
    NotLeader,
    Failed(String),
    WritesFailing(String),
}

impl NotServing {
    pub fn response(&self) -> Response {
        match self {
            NotServing::NotLeader => Response::error(
                rc::CONTROLLER_NOT_LEADER,
                "The controller is not in leader state",
            ),
            NotServing::Failed(why) | NotServing::WritesFailing(why) => {
                Response::system_error(why.clone())
            }
        }
    }
}

/// Makes entries durable: the Raft group (tests may stand in for it).
pub trait Durability {
    fn serving(&self) -> Result<(), NotServing>;
    /// Starts making `entry` durable; returns the id its commit will be reported under.
    fn propose(&mut self, entry: Vec<u8>) -> Result<u64, NotServing>;
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin<T> {
    /// A peer's request; `T` is the caller's reply address (connection, opaque, ...).
    Client(T),
    /// An election the controller started itself after a master went inactive.
    Election {
        broker_name: String,
        attempts_left: u32,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completed<T> {
    pub origin: Origin<T>,
    pub response: Response,
    pub elected: Option<Elected>,
}

impl<T> Completed<T> {
    pub fn answer(origin: Origin<T>, response: Response) -> Self {
        Completed {
            origin,
            response,
            elected: None,
        }
    }
}

struct Waiting<T> {
    origin: Origin<T>,
    request: LeaderRequest,
    deadline_ms: u64,
}

struct InFlight<T> {
    /// None once the answer went out as a timeout; the entry still gets applied.
    origin: Option<Origin<T>>,
    /// The broker sets whose master the entry changes.
    elects: Vec<String>,
    proposal: u64,
    response: Response,
    elected: Option<Elected>,
    deadline_ms: u64,
}

pub struct Pipeline<T> {
    queue: VecDeque<Waiting<T>>,
    in_flight: Option<InFlight<T>>,
}

impl<T> Default for Pipeline<T> {
    fn default() -> Self {
        Pipeline {
            queue: VecDeque::new(),
            in_flight: None,
        }
    }
}

impl<T> Pipeline<T> {
    pub fn len(&self) -> usize {
        self.queue.len() + usize::from(self.in_flight.is_some())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether an election the controller started for `broker_name` is still pending.
    pub fn has_election_for(&self, broker_name: &str) -> bool {
        let is_it = |o: &Origin<T>| matches!(o, Origin::Election { broker_name: b, .. } if b == broker_name);
        self.queue.iter().any(|w| is_it(&w.origin))
            || self
                .in_flight
                .as_ref()
                .and_then(|f| f.origin.as_ref())
                .is_some_and(is_it)
    }

    /// Whether the entry in flight changes `broker_name`'s master.
    pub fn electing(&self, broker_name: &str) -> bool {
        self.in_flight
            .as_ref()
            .is_some_and(|f| f.elects.iter().any(|n| n == broker_name))
    }

    /// The earliest deadline of a waiting request (for the owner's timer).
    pub fn next_deadline_ms(&self) -> Option<u64> {
        let queued = self.queue.iter().map(|w| w.deadline_ms).min();
        let flying = self
            .in_flight
            .as_ref()
            .filter(|f| f.origin.is_some())
            .map(|f| f.deadline_ms);
        queued.into_iter().chain(flying).min()
    }

    /// Queues a request (SYSTEM_BUSY in `out` when the queue is full).
    pub fn submit(
        &mut self,
        origin: Origin<T>,
        request: LeaderRequest,
        now_ms: u64,
        out: &mut Vec<Completed<T>>,
    ) {
        if self.queue.len() >= QUEUE_LIMIT {
            let busy = "[OVERLOAD]system busy, start flow control for a while";
            out.push(Completed::answer(
                origin,
                Response::error(SYSTEM_BUSY, busy),
            ));
            return;
        }
        self.queue.push_back(Waiting {
            origin,
            request,
            deadline_ms: now_ms.saturating_add(REQUEST_TIMEOUT_MS),
        });
    }

    /// Answers queued requests from the head until one needs the durable step. With
    /// `process_read_event` (Java's), reads and writes without events wait for an empty entry.
    pub fn advance(
        &mut self,
        view: &View<'_>,
        process_read_event: bool,
        durability: &mut dyn Durability,
        out: &mut Vec<Completed<T>>,
    ) {
        while !self.queue.is_empty() {
            let serving = durability.serving();
            let stalled = matches!(serving, Err(NotServing::WritesFailing(_)));
            if self.in_flight.is_some() && !stalled {
                return;
            }
            let Some(head) = self.queue.pop_front() else {
                return;
            };
            if let Err(not_serving) = serving {
                let response = match not_serving {
                    // What the write in flight (answered already) changes is not acknowledged:
                    // a read need not wait for it.
                    NotServing::WritesFailing(_) => {
                        let outcome = replicas::handle(&head.request, view);
                        let reads = outcome.events.is_empty() && !process_read_event;
                        reads.then_some(outcome.response)
                    }
                    _ => None,
                };
                let response = response.unwrap_or_else(|| not_serving.response());
                out.push(Completed::answer(head.origin, response));
                continue;
            }
            let outcome = replicas::handle(&head.request, view);
            if outcome.events.is_empty() && !process_read_event {
                out.push(Completed {
                    origin: head.origin,
                    response: outcome.response,
                    elected: outcome.elected,
                });
                continue;
            }
            let elects = outcome
                .events
                .iter()
                .filter(|e| matches!(e, Event::ElectMaster { .. }))
                .map(|e| e.broker_name().to_owned())
                .collect();
            match durability.propose(encode_entry(&outcome.events)) {
                Ok(proposal) => {
                    self.in_flight = Some(InFlight {
                        origin: Some(head.origin),
                        elects,
                        proposal,
                        response: outcome.response,
                        elected: outcome.elected,
                        deadline_ms: head.deadline_ms,
                    })
                }
                Err(not_serving) => {
                    out.push(Completed::answer(head.origin, not_serving.response()))
                }
            }
        }
    }

    /// A committed entry (whoever proposed it): applies its events to `state`, releases its
    /// answer if it is the one in flight, returns the events.
    pub fn on_committed(
        &mut self,
        proposal: Option<u64>,
        entry: &[u8],
        state: &mut ControllerState,
        out: &mut Vec<Completed<T>>,
    ) -> Result<Vec<Event>, String> {
        let events = decode_entry(entry)?;
        for event in &events {
            state.apply(event);
        }
        let ours = matches!((&self.in_flight, proposal), (Some(f), Some(p)) if f.proposal == p);
        if ours {
            if let Some(flight) = self.in_flight.take() {
                if let Some(origin) = flight.origin {
                    out.push(Completed {
                        origin,
                        response: flight.response,
                        elected: flight.elected,
                    });
                }
            }
        }
        Ok(events)
    }

    /// Answers every request whose 5 s are up; a write in flight keeps its place until its
    /// entry commits (the next request must see it applied).
    pub fn expire(&mut self, now_ms: u64, out: &mut Vec<Completed<T>>) {
        let timeout = || {
            Response::error(
                SYSTEM_ERROR,
                format!("java.util.concurrent.TimeoutException: no answer within {REQUEST_TIMEOUT_MS} ms"),
            )
        };
        if let Some(flight) = &mut self.in_flight {
            if flight.deadline_ms <= now_ms {
                if let Some(origin) = flight.origin.take() {
                    out.push(Completed::answer(origin, timeout()));
                }
            }
        }
        while self.queue.front().is_some_and(|w| w.deadline_ms <= now_ms) {
            if let Some(w) = self.queue.pop_front() {
                out.push(Completed::answer(w.origin, timeout()));
            }
        }
    }

    /// The log stalled: the write in flight is answered `response` now but keeps its place
    /// (its entry may still commit once the log is written again).
    pub fn answer_in_flight(&mut self, response: &Response, out: &mut Vec<Completed<T>>) {
        if let Some(origin) = self.in_flight.as_mut().and_then(|f| f.origin.take()) {
            out.push(Completed::answer(origin, response.clone()));
        }
    }

    /// Leadership lost: the write in flight gets `in_flight`, the requests never proposed get
    /// `queued` (2007: the caller retries at the leader).
    pub fn lose_leadership(
        &mut self,
        in_flight: &Response,
        queued: &Response,
        out: &mut Vec<Completed<T>>,
    ) {
        if let Some(origin) = self.in_flight.take().and_then(|f| f.origin) {
            out.push(Completed::answer(origin, in_flight.clone()));
        }
        self.fail_all(queued, out);
    }

    /// Answers everything with `response`; the write in flight's fate is another leader's.
    pub fn fail_all(&mut self, response: &Response, out: &mut Vec<Completed<T>>) {
        if let Some(origin) = self.in_flight.take().and_then(|f| f.origin) {
            out.push(Completed::answer(origin, response.clone()));
        }
        for w in self.queue.drain(..) {
            out.push(Completed::answer(w.origin, response.clone()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::liveness::Liveness;
    use crate::controller::request::{ApplyBrokerId, ElectMaster, GetNextBrokerId};

    impl Response {
        /// The value of one ext field (integration tests have the harness's `ExtValue`).
        fn ext_value(&self, key: &str) -> Option<&str> {
            let fields = self.ext.as_ref()?;
            fields
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, v)| v.as_str())
        }
    }

    /// Records proposals; commits only when the test says so.
    #[derive(Default)]
    struct Manual {
        next: u64,
        proposed: Vec<(u64, Vec<u8>)>,
        down: Option<NotServing>,
    }

    impl Durability for Manual {
        fn serving(&self) -> Result<(), NotServing> {
            self.down.clone().map_or(Ok(()), Err)
        }
        fn propose(&mut self, entry: Vec<u8>) -> Result<u64, NotServing> {
            self.serving()?;
            self.next += 1;
            self.proposed.push((self.next, entry));
            Ok(self.next)
        }
    }

    fn apply_id(name: &str, id: i64) -> LeaderRequest {
        LeaderRequest::ApplyBrokerId(ApplyBrokerId {
            cluster_name: Some("c".into()),
            broker_name: Some(name.into()),
            applied_broker_id: Some(id),
            register_check_code: Some(format!("h:{id};0")),
        })
    }

    fn next_id(name: &str) -> LeaderRequest {
        LeaderRequest::GetNextBrokerId(GetNextBrokerId {
            cluster_name: Some("c".into()),
            broker_name: Some(name.into()),
        })
    }

    struct Rig {
        pipeline: Pipeline<u32>,
        state: ControllerState,
        liveness: Liveness,
        log: Manual,
        out: Vec<Completed<u32>>,
        process_read_event: bool,
    }

    impl Rig {
        fn new() -> Rig {
            Rig {
                pipeline: Pipeline::default(),
                state: ControllerState::default(),
                liveness: Liveness::default(),
                log: Manual::default(),
                out: Vec::new(),
                process_read_event: false,
            }
        }
        fn submit(&mut self, ticket: u32, request: LeaderRequest, now: u64) {
            self.pipeline
                .submit(Origin::Client(ticket), request, now, &mut self.out);
            self.advance(now);
        }
        fn advance(&mut self, now: u64) {
            let view = View {
                state: &self.state,
                liveness: &self.liveness,
                now_ms: now,
                enable_elect_unclean_master: false,
            };
            let read_event = self.process_read_event;
            self.pipeline
                .advance(&view, read_event, &mut self.log, &mut self.out);
        }
        fn commit(&mut self, index: u64, now: u64) {
            let entry = self
                .log
                .proposed
                .iter()
                .find(|(i, _)| *i == index)
                .unwrap()
                .1
                .clone();
            self.pipeline
                .on_committed(Some(index), &entry, &mut self.state, &mut self.out)
                .unwrap();
            self.advance(now);
        }
        fn answered(&mut self) -> Vec<(u32, i32, Option<String>)> {
            self.out
                .drain(..)
                .map(|c| match c.origin {
                    Origin::Client(t) => (
                        t,
                        c.response.code,
                        c.response.ext_value("nextBrokerId").map(str::to_owned),
                    ),
                    Origin::Election { .. } => (u32::MAX, c.response.code, None),
                })
                .collect()
        }
    }

    #[test]
    fn a_read_behind_a_write_sees_the_write_applied() {
        let mut rig = Rig::new();
        rig.submit(1, apply_id("a", 1), 0);
        rig.submit(2, next_id("a"), 0);
        assert!(
            rig.answered().is_empty(),
            "the write waits for its commit, the read behind it"
        );
        assert_eq!(rig.pipeline.len(), 2);
        rig.commit(1, 1);
        assert_eq!(rig.answered(), vec![(1, 0, None), (2, 0, Some("2".into()))]);
        assert!(rig.pipeline.is_empty());
    }

    #[test]
    fn reads_and_event_less_writes_answer_at_once_unless_process_read_event() {
        let mut rig = Rig::new();
        rig.submit(1, next_id("a"), 0);
        rig.submit(2, apply_id("a", 5), 0); // refused (2014): no event
        assert_eq!(
            rig.answered(),
            vec![(1, 0, Some("1".into())), (2, 2014, None)]
        );
        rig.process_read_event = true;
        rig.submit(3, next_id("a"), 0);
        assert!(rig.answered().is_empty());
        assert_eq!(
            rig.log.proposed.last().unwrap().1,
            Vec::<u8>::new(),
            "an empty barrier entry"
        );
        rig.commit(1, 0);
        assert_eq!(rig.answered(), vec![(3, 0, Some("1".into()))]);
    }

    #[test]
    fn requests_time_out_after_five_seconds_but_a_late_commit_is_still_applied() {
        let mut rig = Rig::new();
        rig.submit(1, apply_id("a", 1), 0);
        rig.submit(2, next_id("a"), 1000);
        rig.pipeline.expire(4_999, &mut rig.out);
        assert!(rig.answered().is_empty());
        rig.pipeline.expire(5_000, &mut rig.out);
        assert_eq!(rig.answered(), vec![(1, 1, None)]);
        assert_eq!(rig.pipeline.next_deadline_ms(), Some(6_000));
        rig.pipeline.expire(6_000, &mut rig.out);
        assert_eq!(rig.answered(), vec![(2, 1, None)]);
        rig.submit(3, next_id("a"), 6_000);
        assert!(
            rig.answered().is_empty(),
            "still behind the uncommitted write"
        );
        rig.commit(1, 6_001);
        assert_eq!(rig.answered(), vec![(3, 0, Some("2".into()))]);
        assert!(rig.state.contains_broker_set("a"));
    }

    #[test]
    fn a_node_that_cannot_serve_answers_with_why() {
        let mut rig = Rig::new();
        rig.log.down = Some(NotServing::NotLeader);
        rig.submit(1, next_id("a"), 0);
        rig.log.down = Some(NotServing::Failed("log broken".into()));
        rig.submit(2, next_id("a"), 0);
        assert_eq!(rig.answered(), vec![(1, 2007, None), (2, 1, None)]);
    }

    #[test]
    fn a_stalled_log_refuses_changes_and_serves_reads_even_behind_a_write() {
        let mut rig = Rig::new();
        rig.submit(1, apply_id("a", 1), 0);
        let why = NotServing::WritesFailing("raft.log: write failed: No space left".into());
        rig.log.down = Some(why.clone());
        rig.pipeline.answer_in_flight(&why.response(), &mut rig.out);
        rig.submit(2, next_id("a"), 0);
        rig.submit(3, apply_id("b", 1), 0);
        assert_eq!(
            rig.answered(),
            vec![(1, 1, None), (2, 0, Some("1".into())), (3, 1, None)]
        );
        assert_eq!(rig.log.proposed.len(), 1, "nothing proposed while stalled");
        // Space returns: the first write commits after all, and changes are taken again.
        rig.log.down = None;
        rig.commit(1, 1);
        rig.submit(4, apply_id("a", 2), 1);
        assert_eq!(rig.log.proposed.len(), 2);
        rig.commit(2, 1);
        rig.submit(5, next_id("a"), 1);
        assert_eq!(rig.answered(), vec![(4, 0, None), (5, 0, Some("3".into()))]);
    }

    #[test]
    fn fail_all_answers_everything_and_the_queue_is_bounded() {
        let mut rig = Rig::new();
        rig.submit(1, apply_id("a", 1), 0);
        for t in 0..QUEUE_LIMIT as u32 {
            rig.pipeline
                .submit(Origin::Client(100 + t), next_id("a"), 0, &mut rig.out);
        }
        rig.pipeline
            .submit(Origin::Client(7), next_id("a"), 0, &mut rig.out);
        assert_eq!(rig.answered(), vec![(7, 2, None)]);
        rig.pipeline
            .fail_all(&NotServing::NotLeader.response(), &mut rig.out);
        let answered = rig.answered();
        assert_eq!(answered.len(), QUEUE_LIMIT + 1);
        assert!(answered.iter().all(|(_, code, _)| *code == 2007));
        assert!(rig.pipeline.is_empty());
    }

    #[test]
    fn controller_elections_are_tracked_per_broker_set() {
        let mut rig = Rig::new();
        rig.submit(1, apply_id("a", 1), 0);
        let elect = LeaderRequest::ElectMaster(ElectMaster::controller_trigger("a"));
        rig.pipeline.submit(
            Origin::Election {
                broker_name: "a".into(),
                attempts_left: 3,
            },
            elect,
            0,
            &mut rig.out,
        );
        assert!(rig.pipeline.has_election_for("a"));
        assert!(!rig.pipeline.has_election_for("b"));
    }
}
