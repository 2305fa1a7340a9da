//! The handshake that opens a link: the dialer names its group, id and address, the acceptor
//! checks them against its `controllerDLegerPeers` (and the IPs the peer's host resolves to)
//! and answers; with `controllerPeerSecret` set, each side proves it knows the secret
//! ([`auth`](super::auth)) before the link is up.

use super::auth::{self, Transcript, ACCEPTOR, DIALER};
use super::chunks::Incoming;
use super::{
    encode_payload, encode_peer_frame, peer_name, Link, PeerFrame, PeerLinks, Proving,
    BACKOFF_MIN_MS, FLAG_ONEWAY, FLAG_RESPONSE, PEER_CODE, RESOLVE_AGAIN_MS,
};
use crate::event_loop::{ConnId, Ctx};
use crate::remoting::codes::response::{SUCCESS, SYSTEM_ERROR};
use crate::remoting::command::RemotingCommand;
use log::{info, warn};
use std::net::IpAddr;

impl PeerLinks {
    /// The dialer's proof that it knows the secret: the link is up, or the connection closes.
    pub(super) fn on_proof<C>(
        &mut self,
        ctx: &mut Ctx<C>,
        conn: ConnId,
        from: u64,
        cmd: &RemotingCommand,
    ) -> PeerFrame {
        let Some(i) = self.index_of(from) else {
            return PeerFrame::Close;
        };
        let Some(v) = self.peers[i].proving.take() else {
            return PeerFrame::Close;
        };
        let (group, ids) = (&self.group, (from, self.self_id));
        let transcript = Transcript {
            group,
            ids,
            nonces: &v.nonces,
        };
        if !transcript.verify(&self.secret, DIALER, cmd.ext("proof")) {
            let why = format!("node {from} did not prove it knows controllerPeerSecret");
            self.refuse(ctx, conn, &why);
            return PeerFrame::Close;
        }
        self.accept_link(ctx, i, conn);
        PeerFrame::Handled
    }

    pub(super) fn on_handshake<C>(
        &mut self,
        ctx: &mut Ctx<C>,
        conn: ConnId,
        cmd: &RemotingCommand,
    ) -> PeerFrame {
        let now = ctx.now_ms();
        let from = match self.check_handshake(ctx, conn, cmd, now) {
            Ok(id) => id,
            Err(why) => {
                self.refuse(ctx, conn, &why);
                if let Some(out) = ctx.write_buf(conn) {
                    let answer = (FLAG_RESPONSE, SYSTEM_ERROR, cmd.opaque);
                    encode_peer_frame(out, answer, Some(&why), Some(&[]), &[]);
                }
                return PeerFrame::Close;
            }
        };
        let Some(i) = self.index_of(from) else {
            return PeerFrame::Close;
        };
        let id = self.self_id.to_string();
        let mut ext = vec![("group", self.group.as_str()), ("nodeId", id.as_str())];
        let answer = (FLAG_RESPONSE, SUCCESS, cmd.opaque);
        if self.secret.is_empty() {
            if let Some(out) = ctx.write_buf(conn) {
                encode_peer_frame(out, answer, None, Some(&ext), &[]);
            }
            self.accept_link(ctx, i, conn);
            return PeerFrame::Handled;
        }
        // The link is up only once the dialer answers this node's nonce with its proof.
        let dialer_nonce = auth::nonce_from_hex(cmd.ext("nonce")).unwrap_or_default();
        let nonces = (dialer_nonce, auth::nonce());
        let (group, ids) = (&self.group, (from, self.self_id));
        let proof = Transcript {
            group,
            ids,
            nonces: &nonces,
        }
        .prove(&self.secret, ACCEPTOR);
        let nonce = auth::to_hex(&nonces.1);
        let v = Proving {
            conn,
            since_ms: now,
            nonces,
        };
        ext.extend([("nonce", nonce.as_str()), ("proof", proof.as_str())]);
        if let Some(out) = ctx.write_buf(conn) {
            encode_peer_frame(out, answer, None, Some(&ext), &[]);
        }
        if let Some(old) = self.peers[i].proving.replace(v) {
            self.conns.remove(&old.conn);
            ctx.close(old.conn, "controller peer: replaced by a newer handshake");
        }
        self.conns.insert(conn, from);
        PeerFrame::Handled
    }

    fn accept_link<C>(&mut self, ctx: &mut Ctx<C>, i: usize, conn: ConnId) {
        if let Link::Up(old) = self.peers[i].link {
            // The peer restarted (or its old connection is half dead): the new one wins.
            self.conns.remove(&old);
            ctx.close(old, "controller peer: replaced by a newer connection");
        }
        self.conns.insert(conn, self.peers[i].id);
        self.link_up(i, conn, peer_name(ctx, conn));
    }

    fn check_handshake<C>(
        &mut self,
        ctx: &Ctx<C>,
        conn: ConnId,
        cmd: &RemotingCommand,
        now: u64,
    ) -> Result<u64, String> {
        let group = cmd.ext("group").unwrap_or("");
        if group != self.group {
            return Err(format!(
                "group {group:?} is not this node's {:?}",
                self.group
            ));
        }
        let claimed = cmd.ext("nodeId").and_then(|v| v.parse::<u64>().ok());
        let Some(i) = claimed.and_then(|id| self.index_of(id)) else {
            return Err(format!(
                "node id {:?} is not another member of the group",
                cmd.ext("nodeId").unwrap_or("")
            ));
        };
        let peer = &self.peers[i];
        if peer.dials {
            return Err(format!(
                "node {} has a higher id than this node {}: this node dials it, not the other way round",
                peer.id, self.self_id
            ));
        }
        let advertised = cmd.ext("addr").unwrap_or("");
        if advertised != peer.addr {
            return Err(format!(
                "node {} says its address is {advertised:?}, controllerDLegerPeers here says {:?}",
                peer.id, peer.addr
            ));
        }
        let ip = ctx.peer(conn).map(|a| a.ip().to_canonical());
        if !ip.is_some_and(|ip| peer.resolved.contains(&ip)) {
            let why = format!(
                "node {} is configured at {} ({}), not at this address",
                peer.id,
                peer.addr,
                describe_ips(&peer.resolved)
            );
            // The peer may have moved: look again for its next attempt.
            if peer
                .last_resolve_ms
                .map_or(true, |at| now >= at + RESOLVE_AGAIN_MS)
            {
                self.resolve(i, now);
            }
            return Err(why);
        }
        if !self.secret.is_empty() && auth::nonce_from_hex(cmd.ext("nonce")).is_none() {
            return Err(format!(
                "node {} has no controllerPeerSecret (this node has one)",
                peer.id
            ));
        }
        Ok(peer.id)
    }

    /// One line per second at most: hostile handshakes cannot flood the log.
    pub(super) fn refuse<C>(&mut self, ctx: &Ctx<C>, conn: ConnId, why: &str) {
        self.status.refused += 1;
        let Some(held) = self.refusal_log.ready(ctx.now_ms()) else {
            return;
        };
        warn!(
            "controller peers: refusing the connection from {}: {why} ({held} more refused since the last line)",
            peer_name(ctx, conn)
        );
    }

    pub(super) fn on_answer<C>(
        &mut self,
        ctx: &mut Ctx<C>,
        conn: ConnId,
        peer: u64,
        cmd: &RemotingCommand,
    ) -> PeerFrame {
        let Some(i) = self.index_of(peer) else {
            return PeerFrame::Close;
        };
        if !matches!(self.peers[i].link, Link::Handshaking { conn: c, .. } if c == conn) {
            warn!(
                "controller peers: closing the link with node {peer} ({}): an answer to no handshake",
                peer_name(ctx, conn)
            );
            return PeerFrame::Close;
        }
        let expected = peer.to_string();
        let theirs = auth::nonce_from_hex(cmd.ext("nonce")).unwrap_or_default();
        let (group, ids, nonces) = (
            &self.group,
            (self.self_id, peer),
            &(self.peers[i].nonce, theirs),
        );
        let transcript = Transcript { group, ids, nonces };
        let proven =
            self.secret.is_empty() || transcript.verify(&self.secret, ACCEPTOR, cmd.ext("proof"));
        let refusal = if cmd.code != SUCCESS {
            Some(format!(
                "it refused the handshake: {}",
                cmd.remark.as_deref().unwrap_or("(no reason given)")
            ))
        } else if cmd.ext("group") != Some(self.group.as_str())
            || cmd.ext("nodeId") != Some(expected.as_str())
        {
            Some(format!(
                "it answered as node {:?} of group {:?}",
                cmd.ext("nodeId").unwrap_or(""),
                cmd.ext("group").unwrap_or("")
            ))
        } else if !proven {
            Some("it did not prove it knows controllerPeerSecret".into())
        } else {
            None
        };
        let proof = (!self.secret.is_empty()).then(|| transcript.prove(&self.secret, DIALER));
        if let Some(why) = refusal {
            self.status.refused += 1;
            warn!(
                "controller peers: no link with node {peer} at {}: {why}",
                self.peers[i].addr
            );
            return PeerFrame::Close;
        }
        self.link_up(i, conn, self.peers[i].addr.clone());
        let p = &mut self.peers[i];
        if let Some(out) = ctx.write_buf(conn) {
            if let Some(proof) = &proof {
                let ext = [("proof", proof.as_str())];
                encode_peer_frame(out, (FLAG_ONEWAY, PEER_CODE, 0), None, Some(&ext), &[]);
            }
            for payload in p.queue.drain(..) {
                encode_payload(out, &payload);
            }
        }
        PeerFrame::Handled
    }

    fn link_up(&mut self, i: usize, conn: ConnId, name: String) {
        let p = &mut self.peers[i];
        p.link = Link::Up(conn);
        p.backoff_ms = BACKOFF_MIN_MS;
        p.failures = 0;
        p.sending = None;
        p.receiving = Incoming::default();
        let id = p.id;
        info!(
            "controller peers: linked with node {id} ({name}), {} of {} peers connected",
            self.status().connected,
            self.peers.len()
        );
    }
}

fn describe_ips(ips: &[IpAddr]) -> String {
    if ips.is_empty() {
        return "not resolved yet".into();
    }
    let list: Vec<String> = ips.iter().map(IpAddr::to_string).collect();
    list.join(", ")
}

/// `nonce`: with `controllerPeerSecret` set.
pub fn encode_handshake(out: &mut Vec<u8>, group: &str, me: (u64, &str), nonce: Option<&str>) {
    let id = me.0.to_string();
    let mut ext = vec![
        ("kind", "handshake"),
        ("group", group),
        ("nodeId", id.as_str()),
        ("addr", me.1),
    ];
    ext.extend(nonce.map(|n| ("nonce", n)));
    encode_peer_frame(out, (0, PEER_CODE, 1), None, Some(&ext), &[]);
}
