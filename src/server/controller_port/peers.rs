//! The link between the controller nodes of a Raft group: opaque payloads out and in over
//! ordinary connections of the loop on the controller port, with one private code
//! ([`PEER_CODE`]); it knows nothing of Raft. Its rules are in docs/controller.md ("Peers").
//! The one that matters most: nothing is decoded from a connection before its handshake is
//! accepted, and only from an IP the configured host of that id resolves to (protobuf 2 has
//! an advisory for hostile input), and with `controllerPeerSecret` set, only from a peer that
//! proved it knows it ([`auth`]). Large payloads travel in chunks ([`chunks`]).

use crate::controller::config::PEER_SECRET_KEY;
use crate::controller::raft::raft_ids;
use crate::controller::raft::wire::Payload;
use crate::controller::ControllerConfig;
use crate::event_loop::{ConnId, Ctx, LogGate, TimerId};
use crate::remoting::command::{encode_frame, Header, RemotingCommand, SerializeType};
use bytes::Bytes;
use crossbeam_channel::{unbounded, Receiver, Sender};
use log::{debug, info, warn};
use std::collections::hash_map::RandomState;
use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasher;
use std::io;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::thread::JoinHandle;

mod auth;
mod chunks;
mod handshake;
#[cfg(test)]
mod tests;

use auth::Nonce;
pub use chunks::MAX_PAYLOAD;
use chunks::{Incoming, Outgoing, CHUNK};
pub use handshake::encode_handshake;

/// A handshake (a request answered by the acceptor), then payloads (oneway). RocketMQ uses no
/// code in this range.
pub const PEER_CODE: i32 = 40_016;

pub const PEER_TIMER: TimerId = TimerId(14);
const TICK_MS: u64 = 100;

/// Reconnect backoff, doubled after each failure, with jitter (half to all of it).
const BACKOFF_MIN_MS: u64 = 100;
const BACKOFF_MAX_MS: u64 = 5_000;
const HANDSHAKE_TIMEOUT_MS: u64 = 3_000;
/// Messages (and their bytes) kept for a peer while its connection is being set up.
const QUEUE_MESSAGES: usize = 256;
const QUEUE_BYTES: usize = 8 << 20;
/// Unsent bytes on a link beyond which its messages are dropped (or half the loop's write hard
/// cap, if lower: that would close the link).
const MAX_UNSENT: usize = 16 << 20;
const OVERSIZE_WARN_EVERY_MS: u64 = 10_000;
const REFUSAL_WARN_EVERY_MS: u64 = 1_000;
/// An acceptor re-resolves a peer's host after a mismatching handshake at most this often.
const RESOLVE_AGAIN_MS: u64 = 5_000;

const LANGUAGE: &str = "RUST";
const FLAG_RESPONSE: i32 = 1;
const FLAG_ONEWAY: i32 = 2;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerSetup {
    pub group: String,
    pub self_id: u64,
    /// This node's address as the others have it in their `controllerDLegerPeers`.
    pub self_addr: String,
    pub peers: Vec<(u64, String)>,
    /// `controllerPeerSecret` ("": none).
    pub secret: String,
}

impl PeerSetup {
    /// Ids by [`raft_ids`], the rule the Raft group numbers by.
    pub fn from_config(config: &ControllerConfig) -> PeerSetup {
        let ids = raft_ids(config.peers());
        let me = config.self_index();
        let peers = ids
            .iter()
            .zip(config.peers())
            .enumerate()
            .filter(|&(i, _)| i != me)
            .map(|(_, (&id, p))| (id, p.address.clone()))
            .collect();
        PeerSetup {
            group: config.group().unwrap_or("").to_owned(),
            self_id: ids[me],
            self_addr: config.self_peer().address.clone(),
            peers,
            secret: config.get(PEER_SECRET_KEY).unwrap_or("").to_owned(),
        }
    }
}

/// What the application keeps for a connection the link opens.
pub trait PeerConnData {
    fn peer_link() -> Self;
}

#[derive(Debug, PartialEq, Eq)]
pub enum PeerFrame {
    Payload {
        from: u64,
        payload: Bytes,
    },
    Handled,
    /// Refused (already logged).
    Close,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PeerStatus {
    pub configured: usize,
    /// Peers with an established, authenticated link (`peersConnected`).
    pub connected: usize,
    pub dropped: u64,
    /// Handshakes refused, and payloads before a handshake.
    pub refused: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Link {
    Down { retry_at_ms: u64 },
    Resolving,
    Connecting(ConnId),
    Handshaking { conn: ConnId, since_ms: u64 },
    Up(ConnId),
}

struct Peer {
    id: u64,
    addr: String,
    literal: Option<SocketAddr>,
    /// The IPs the configured host resolved to last (who may claim this id).
    resolved: Vec<IpAddr>,
    resolving: bool,
    last_resolve_ms: Option<u64>,
    /// This node's id is lower.
    dials: bool,
    link: Link,
    backoff_ms: u64,
    /// Failed attempts since the link was last up.
    failures: u32,
    queue: VecDeque<Vec<u8>>,
    /// The dialer's nonce of its current handshake.
    nonce: Nonce,
    /// An accepted handshake waiting for the dialer's proof of the secret.
    proving: Option<Proving>,
    sending: Option<Outgoing>,
    receiving: Incoming,
}

#[derive(Clone, Copy)]
struct Proving {
    conn: ConnId,
    since_ms: u64,
    /// The dialer's, this node's.
    nonces: (Nonce, Nonce),
}

struct Resolver {
    requests: Option<Sender<(u64, String)>>,
    results: Receiver<(u64, io::Result<Vec<SocketAddr>>)>,
    thread: JoinHandle<()>,
}

pub struct PeerLinks {
    group: String,
    self_id: u64,
    self_addr: String,
    secret: String,
    peers: Vec<Peer>,
    /// The peer of each connection: outbound ones to the peers this node dials, inbound ones
    /// (accepted handshakes) from the others.
    conns: HashMap<ConnId, u64>,
    resolver: Option<Resolver>,
    status: PeerStatus,
    oversize_log: LogGate,
    refusal_log: LogGate,
}

impl PeerLinks {
    /// Starts the resolver thread when a peer is named by host name.
    pub fn new(setup: PeerSetup) -> io::Result<PeerLinks> {
        let peers: Vec<Peer> = setup
            .peers
            .into_iter()
            .map(|(id, addr)| Peer {
                id,
                literal: addr.parse().ok(),
                resolved: Vec::new(),
                resolving: false,
                last_resolve_ms: None,
                dials: setup.self_id < id,
                link: Link::Down { retry_at_ms: 0 },
                backoff_ms: BACKOFF_MIN_MS,
                failures: 0,
                queue: VecDeque::new(),
                nonce: Nonce::default(),
                proving: None,
                sending: None,
                receiving: Incoming::default(),
                addr,
            })
            .collect();
        let resolver = if peers.iter().any(|p| p.literal.is_none()) {
            Some(spawn_resolver()?)
        } else {
            None
        };
        Ok(PeerLinks {
            status: PeerStatus::default(),
            group: setup.group,
            self_id: setup.self_id,
            self_addr: setup.self_addr,
            secret: setup.secret,
            peers,
            conns: HashMap::new(),
            resolver,
            oversize_log: LogGate::new(OVERSIZE_WARN_EVERY_MS),
            refusal_log: LogGate::new(REFUSAL_WARN_EVERY_MS),
        })
    }

    pub fn start<C: PeerConnData>(&mut self, ctx: &mut Ctx<C>) {
        if self.peers.is_empty() {
            return;
        }
        let now = ctx.now_ms();
        for i in 0..self.peers.len() {
            self.resolve(i, now);
        }
        info!(
            "controller peers: node {} of group {:?} at {}; dialing {}, accepting {}",
            self.self_id,
            self.group,
            self.self_addr,
            self.describe(true),
            self.describe(false)
        );
        if self.secret.is_empty() {
            warn!("controller peers: no controllerPeerSecret: the group trusts its members' addresses only");
        }
        self.dial_due(ctx);
        ctx.set_timer(PEER_TIMER, now + TICK_MS);
    }

    fn describe(&self, dials: bool) -> String {
        let list: Vec<String> = self
            .peers
            .iter()
            .filter(|p| p.dials == dials)
            .map(|p| format!("{}={}", p.id, p.addr))
            .collect();
        if list.is_empty() {
            "none".into()
        } else {
            list.join(", ")
        }
    }

    pub fn status(&self) -> PeerStatus {
        PeerStatus {
            configured: self.peers.len(),
            connected: self
                .peers
                .iter()
                .filter(|p| matches!(p.link, Link::Up(_)))
                .count(),
            ..self.status
        }
    }

    /// Each peer's configured address, and whether its link is up.
    pub fn links(&self) -> impl Iterator<Item = (&str, bool)> + '_ {
        (self.peers.iter()).map(|p| (p.addr.as_str(), matches!(p.link, Link::Up(_))))
    }

    pub fn owns(&self, conn: ConnId) -> bool {
        // A single node (or one with no link open) pays no hash per controller request.
        !self.conns.is_empty() && self.conns.contains_key(&conn)
    }

    /// Or drops it: Raft sends again what was lost. One payload above [`CHUNK`] at a time goes
    /// to each peer, in chunks ([`pump`](Self::pump)).
    pub fn send<C>(&mut self, ctx: &mut Ctx<C>, to: u64, payload: Payload) {
        if payload.len() > MAX_PAYLOAD {
            self.status.dropped += 1;
            // Raft sends it again and again: one line per interval.
            if self.oversize_log.ready(ctx.now_ms()).is_some() {
                warn!(
                    "controller peers: dropping a message of {} bytes to node {to}: above the peer payload cap of {MAX_PAYLOAD} ({} messages dropped so far)",
                    payload.len(),
                    self.status.dropped
                );
            }
            return;
        }
        let max_unsent = MAX_UNSENT.min(ctx.limits().write_hard_cap / 2);
        let Some(peer) = self.peers.iter_mut().find(|p| p.id == to) else {
            debug!("controller peers: dropping a message to unknown node {to}");
            self.status.dropped += 1;
            return;
        };
        let sent = match peer.link {
            _ if payload.len() > CHUNK => {
                let free = peer.sending.is_none() && matches!(peer.link, Link::Up(_));
                if free {
                    peer.sending = Some(Outgoing::new(payload));
                }
                free
            }
            Link::Up(conn) if ctx.unsent(conn) + payload.len() <= max_unsent => ctx
                .write_buf(conn)
                .map(|out| encode_payload(out, &payload.to_bytes()))
                .is_some(),
            Link::Resolving | Link::Connecting(_) | Link::Handshaking { .. } => {
                peer.enqueue(&payload.to_bytes())
            }
            _ => false,
        };
        if !sent {
            self.status.dropped += 1;
        }
    }

    /// The next chunk of each large payload, to links with less than a chunk unsent; true while
    /// one was written and more follow (the loop turns again at once).
    pub fn pump<C>(&mut self, ctx: &mut Ctx<C>) -> bool {
        let mut more = false;
        for p in self.peers.iter_mut() {
            let (Some(sending), Link::Up(conn)) = (&mut p.sending, p.link) else {
                continue;
            };
            if ctx.unsent(conn) >= CHUNK {
                continue;
            }
            let Some(out) = ctx.write_buf(conn) else {
                continue;
            };
            if sending.write_next(out) {
                p.sending = None;
            } else {
                more = true;
            }
        }
        more
    }

    pub fn on_frame<C>(
        &mut self,
        ctx: &mut Ctx<C>,
        conn: ConnId,
        cmd: &RemotingCommand,
    ) -> PeerFrame {
        match self.conns.get(&conn).copied() {
            Some(peer) if cmd.is_response() && self.dials(peer) => {
                self.on_answer(ctx, conn, peer, cmd)
            }
            Some(peer) if cmd.code == PEER_CODE && cmd.is_oneway() && self.is_up(peer, conn) => {
                self.on_payload(ctx, conn, peer, cmd)
            }
            Some(peer)
                if cmd.code == PEER_CODE && cmd.is_oneway() && self.is_proving(peer, conn) =>
            {
                self.on_proof(ctx, conn, peer, cmd)
            }
            None if cmd.code == PEER_CODE && !cmd.is_oneway() && !cmd.is_response() => {
                self.on_handshake(ctx, conn, cmd)
            }
            None if cmd.code == PEER_CODE && cmd.is_oneway() => {
                self.refuse(ctx, conn, "a peer message before a handshake");
                PeerFrame::Close
            }
            _ => {
                let why = format!(
                    "unexpected frame (code {}, flag {}) on a peer connection",
                    cmd.code, cmd.flag
                );
                self.refuse(ctx, conn, &why);
                PeerFrame::Close
            }
        }
    }

    fn dials(&self, peer: u64) -> bool {
        self.peers.iter().any(|p| p.id == peer && p.dials)
    }

    fn is_up(&self, peer: u64, conn: ConnId) -> bool {
        self.peers
            .iter()
            .any(|p| p.id == peer && p.link == Link::Up(conn))
    }

    fn is_proving(&self, peer: u64, conn: ConnId) -> bool {
        self.peers
            .iter()
            .any(|p| p.id == peer && p.proving.is_some_and(|v| v.conn == conn))
    }

    fn on_payload<C>(
        &mut self,
        ctx: &mut Ctx<C>,
        conn: ConnId,
        from: u64,
        cmd: &RemotingCommand,
    ) -> PeerFrame {
        let Some(i) = self.index_of(from) else {
            return PeerFrame::Close;
        };
        let taken = if cmd.ext("total").is_some() {
            self.peers[i].receiving.take(cmd)
        } else if cmd.body.len() > CHUNK {
            Err(format!(
                "a payload of {} bytes is above one chunk ({CHUNK})",
                cmd.body.len()
            ))
        } else {
            Ok(Some(cmd.body.clone()))
        };
        match taken {
            Ok(Some(payload)) => PeerFrame::Payload { from, payload },
            Ok(None) => PeerFrame::Handled,
            Err(why) => {
                self.status.refused += 1;
                warn!(
                    "controller peers: closing the link with node {from} ({}): {why}",
                    peer_name(ctx, conn)
                );
                PeerFrame::Close
            }
        }
    }

    pub fn on_connected<C>(&mut self, ctx: &mut Ctx<C>, conn: ConnId, result: &io::Result<()>) {
        let Some(peer) = self.conns.get(&conn).copied() else {
            return;
        };
        let Some(i) = self.index_of(peer) else {
            return;
        };
        match result {
            Ok(()) => {
                let now = ctx.now_ms();
                self.peers[i].link = Link::Handshaking {
                    conn,
                    since_ms: now,
                };
                let nonce = (!self.secret.is_empty()).then(|| {
                    self.peers[i].nonce = auth::nonce();
                    auth::to_hex(&self.peers[i].nonce)
                });
                if let Some(out) = ctx.write_buf(conn) {
                    let me = (self.self_id, self.self_addr.as_str());
                    encode_handshake(out, &self.group, me, nonce.as_deref());
                }
            }
            // The close follows and finds the link already down.
            Err(e) => self.attempt_failed(i, &format!("connect: {e}"), ctx.now_ms()),
        }
    }

    /// True when it was the link's.
    pub fn on_closed<C>(&mut self, ctx: &mut Ctx<C>, conn: ConnId) -> bool {
        let Some(peer) = self.conns.remove(&conn) else {
            return false;
        };
        let Some(i) = self.index_of(peer) else {
            return true;
        };
        let now = ctx.now_ms();
        let p = &mut self.peers[i];
        if p.proving.is_some_and(|v| v.conn == conn) {
            p.proving = None;
        }
        let link = p.link;
        match link {
            Link::Up(c) if c == conn => {
                info!(
                    "controller peers: link with node {peer} ({}) closed",
                    self.peers[i].addr
                );
                self.schedule_retry(i, now);
            }
            Link::Connecting(c) | Link::Handshaking { conn: c, .. } if c == conn => {
                self.attempt_failed(i, "the connection closed during the handshake", now);
            }
            _ => {}
        }
        true
    }

    /// False: not its timer.
    pub fn on_timer<C: PeerConnData>(&mut self, ctx: &mut Ctx<C>, timer: TimerId) -> bool {
        if timer != PEER_TIMER {
            return false;
        }
        let now = ctx.now_ms();
        ctx.set_timer(PEER_TIMER, now + TICK_MS);
        self.take_resolutions(ctx, now);
        for p in self.peers.iter_mut() {
            if let Link::Handshaking { conn, since_ms } = p.link {
                if now >= since_ms + HANDSHAKE_TIMEOUT_MS {
                    // on_closed schedules the next attempt.
                    ctx.close(conn, "controller peer: no answer to the handshake");
                }
            }
            if let Some(v) = p
                .proving
                .filter(|v| now >= v.since_ms + HANDSHAKE_TIMEOUT_MS)
            {
                ctx.close(v.conn, "controller peer: no proof of the secret");
            }
        }
        self.dial_due(ctx);
        true
    }

    fn dial_due<C: PeerConnData>(&mut self, ctx: &mut Ctx<C>) {
        let now = ctx.now_ms();
        for i in 0..self.peers.len() {
            let p = &mut self.peers[i];
            let due = matches!(p.link, Link::Down { retry_at_ms } if retry_at_ms <= now);
            if !p.dials || !due || ctx.is_stopping() {
                continue;
            }
            match p.literal {
                Some(addr) => self.dial(ctx, i, addr),
                None => {
                    p.link = Link::Resolving;
                    self.resolve(i, now);
                }
            }
        }
    }

    fn dial<C: PeerConnData>(&mut self, ctx: &mut Ctx<C>, i: usize, addr: SocketAddr) {
        match ctx.connect(addr, C::peer_link()) {
            Ok(conn) => {
                let peer = self.peers[i].id;
                self.peers[i].link = Link::Connecting(conn);
                self.conns.insert(conn, peer);
                debug!("controller peers: dialing node {peer} at {addr}");
            }
            Err(e) => {
                self.attempt_failed(i, &format!("connect to {addr}: {e}"), ctx.now_ms());
            }
        }
    }

    fn resolve(&mut self, i: usize, now: u64) {
        let p = &mut self.peers[i];
        p.last_resolve_ms = Some(now);
        if let Some(addr) = p.literal {
            p.resolved = vec![addr.ip().to_canonical()];
            return;
        }
        if p.resolving {
            return;
        }
        let sent = self
            .resolver
            .as_ref()
            .and_then(|r| r.requests.as_ref())
            .is_some_and(|tx| tx.send((p.id, p.addr.clone())).is_ok());
        p.resolving = sent;
    }

    fn take_resolutions<C: PeerConnData>(&mut self, ctx: &mut Ctx<C>, now: u64) {
        let Some(resolver) = &self.resolver else {
            return;
        };
        let results: Vec<_> = resolver.results.try_iter().collect();
        for (id, result) in results {
            let Some(i) = self.index_of(id) else {
                continue;
            };
            let p = &mut self.peers[i];
            p.resolving = false;
            let addrs = match result {
                Ok(addrs) => addrs,
                Err(e) => {
                    warn!(
                        "controller peers: cannot resolve node {id}'s address {}: {e}",
                        p.addr
                    );
                    Vec::new()
                }
            };
            p.resolved = addrs.iter().map(|a| a.ip().to_canonical()).collect();
            if p.link != Link::Resolving {
                continue;
            }
            // Each attempt takes the next address (a host name may resolve to some that do
            // not answer, an IPv6 one first for instance).
            let pick = p.failures as usize % addrs.len().max(1);
            match addrs.get(pick) {
                Some(addr) => self.dial(ctx, i, *addr),
                None => {
                    self.attempt_failed(i, "its host name resolved to no address", now);
                }
            }
        }
    }

    /// Only the first failure of a streak is a warning (a peer that is down is no news).
    fn attempt_failed(&mut self, i: usize, why: &str, now: u64) {
        let p = &mut self.peers[i];
        p.failures += 1;
        if p.failures == 1 {
            warn!(
                "controller peers: cannot link with node {} at {}: {why}; retrying with backoff up to {BACKOFF_MAX_MS} ms",
                p.id, p.addr
            );
        } else {
            debug!(
                "controller peers: attempt {} to link with node {} at {} failed: {why}",
                p.failures, p.id, p.addr
            );
        }
        self.schedule_retry(i, now);
    }

    fn schedule_retry(&mut self, i: usize, now: u64) {
        // The std hasher's random keys: jitter, nothing more is needed.
        let jitter = RandomState::new().hash_one(now);
        let p = &mut self.peers[i];
        p.queue.clear();
        p.sending = None;
        p.receiving = Incoming::default();
        let wait = p.backoff_ms / 2 + jitter % (p.backoff_ms / 2 + 1);
        p.link = Link::Down {
            retry_at_ms: now + wait,
        };
        p.backoff_ms = (p.backoff_ms * 2).min(BACKOFF_MAX_MS);
    }

    fn index_of(&self, id: u64) -> Option<usize> {
        self.peers.iter().position(|p| p.id == id)
    }

    /// Ends the resolver thread.
    pub fn shutdown(self) {
        if let Some(mut r) = self.resolver {
            r.requests = None;
            if r.thread.join().is_err() {
                warn!("controller peers: the resolver thread panicked");
            }
        }
    }
}

impl Peer {
    /// False when the queue is full.
    fn enqueue(&mut self, payload: &[u8]) -> bool {
        let queued: usize = self.queue.iter().map(Vec::len).sum();
        if self.queue.len() >= QUEUE_MESSAGES || queued + payload.len() > QUEUE_BYTES {
            return false;
        }
        self.queue.push_back(payload.to_vec());
        true
    }
}

fn peer_name<C>(ctx: &Ctx<C>, conn: ConnId) -> String {
    ctx.peer(conn)
        .map_or_else(|| "a closed connection".into(), |a| a.to_string())
}

fn spawn_resolver() -> io::Result<Resolver> {
    let (requests, inbox) = unbounded::<(u64, String)>();
    let (outbox, results) = unbounded();
    let thread = std::thread::Builder::new()
        .name("controller-peer-resolver".into())
        .spawn(move || {
            for (id, addr) in inbox {
                let result = addr.to_socket_addrs().map(Iterator::collect);
                if outbox.send((id, result)).is_err() {
                    return;
                }
            }
        })?;
    Ok(Resolver {
        requests: Some(requests),
        results,
        thread,
    })
}

/// One peer frame: a handshake (flag 0), its answer ([`FLAG_RESPONSE`]) or a payload
/// ([`FLAG_ONEWAY`], no header fields).
fn encode_peer_frame(
    out: &mut Vec<u8>,
    (flag, code, opaque): (i32, i32, i32),
    remark: Option<&str>,
    ext: Option<&[(&str, &str)]>,
    body: &[u8],
) {
    let header = Header {
        code,
        language: LANGUAGE,
        version: 0,
        opaque,
        flag,
        remark,
    };
    let ext = ext.map(|fields| fields.iter().copied());
    encode_frame(out, SerializeType::Json, &header, ext, body);
}

pub fn encode_payload(out: &mut Vec<u8>, payload: &[u8]) {
    encode_peer_frame(out, (FLAG_ONEWAY, PEER_CODE, 0), None, None, payload);
}
