//! The peer link over TCP: each node is a loop of its own with a tiny handler that hosts a
//! [`PeerLinks`], sends what the test thread queues and records what it receives. Raw clients
//! (bound to chosen loopback addresses) play peers that should be refused.

use super::*;
use crate::event_loop::tests::connect_from;
use crate::event_loop::{EventLoop, Handler, Limits, ListenerTag, LoopWaker, Next, StopHandle};
use crate::remoting::codes::response::SUCCESS;
use crate::remoting::command::DecodeLimits;
use crate::remoting::frame::{self, FrameError};
use bytes::BytesMut;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const LISTENER: ListenerTag = ListenerTag(1);
const GROUP: &str = "test-group";

#[derive(Default)]
struct NodeConn;

impl PeerConnData for NodeConn {
    fn peer_link() -> NodeConn {
        NodeConn
    }
}

/// What the test thread and a node's loop share.
#[derive(Default)]
struct Shared {
    outbox: Mutex<Vec<(u64, Vec<u8>)>>,
    received: Mutex<Vec<(u64, Vec<u8>)>>,
    status: Mutex<PeerStatus>,
}

struct Node {
    links: PeerLinks,
    shared: Arc<Shared>,
}

impl Handler for Node {
    type Conn = NodeConn;
    type FrameError = FrameError;

    fn cut_frame(&self, buf: &mut BytesMut) -> Result<Option<Bytes>, FrameError> {
        frame::next_frame(buf, 16 << 20)
    }

    fn on_frame(&mut self, ctx: &mut Ctx<NodeConn>, conn: ConnId, frame: Bytes) -> Next {
        let Ok(cmd) = RemotingCommand::decode(frame, &DecodeLimits::default()) else {
            return Next::Close;
        };
        // Only peer traffic in these tests (the controller's requests are not hosted).
        if cmd.code != PEER_CODE && !self.links.owns(conn) {
            return Next::Close;
        }
        match self.links.on_frame(ctx, conn, &cmd) {
            PeerFrame::Payload { from, payload } => {
                let mut received = self.shared.received.lock().unwrap();
                received.push((from, payload.to_vec()));
                Next::Continue
            }
            PeerFrame::Handled => Next::Continue,
            PeerFrame::Close => Next::Close,
        }
    }

    fn on_connected(&mut self, ctx: &mut Ctx<NodeConn>, conn: ConnId, result: io::Result<()>) {
        self.links.on_connected(ctx, conn, &result);
    }

    fn on_close(&mut self, ctx: &mut Ctx<NodeConn>, conn: ConnId, _: NodeConn) {
        self.links.on_closed(ctx, conn);
    }

    fn on_timer(&mut self, ctx: &mut Ctx<NodeConn>, timer: TimerId) {
        self.links.on_timer(ctx, timer);
    }

    fn before_sleep(&mut self, ctx: &mut Ctx<NodeConn>) -> bool {
        let out = std::mem::take(&mut *self.shared.outbox.lock().unwrap());
        for (to, payload) in out {
            self.links.send(ctx, to, payload.into());
        }
        *self.shared.status.lock().unwrap() = self.links.status();
        self.links.pump(ctx)
    }
}

struct Running {
    stop: StopHandle,
    waker: LoopWaker,
    shared: Arc<Shared>,
    thread: std::thread::JoinHandle<io::Result<Node>>,
}

impl Running {
    fn send(&self, to: u64, payload: impl Into<Vec<u8>>) {
        self.shared
            .outbox
            .lock()
            .unwrap()
            .push((to, payload.into()));
        self.waker.wake();
    }

    fn status(&self) -> PeerStatus {
        *self.shared.status.lock().unwrap()
    }

    fn received(&self) -> Vec<(u64, Vec<u8>)> {
        self.shared.received.lock().unwrap().clone()
    }

    fn stop(self) {
        self.stop.stop();
        let node = self.thread.join().unwrap().unwrap();
        node.links.shutdown();
    }
}

fn bind(addr: &str) -> (EventLoop<Node>, SocketAddr) {
    let mut lp = EventLoop::new(Limits::default()).unwrap();
    let bound = lp.listen(addr.parse().unwrap(), LISTENER).unwrap();
    (lp, bound)
}

/// Node `self_id` at `addrs[self_id - 1]` with the others as peers.
fn setup(self_id: u64, addrs: &[SocketAddr]) -> PeerSetup {
    PeerSetup {
        group: GROUP.into(),
        self_id,
        self_addr: addrs[self_id as usize - 1].to_string(),
        peers: (1..=addrs.len() as u64)
            .filter(|id| *id != self_id)
            .map(|id| (id, addrs[id as usize - 1].to_string()))
            .collect(),
        secret: String::new(),
    }
}

fn run(mut lp: EventLoop<Node>, setup: PeerSetup) -> Running {
    let mut links = PeerLinks::new(setup).unwrap();
    links.start(lp.ctx());
    let shared = Arc::new(Shared::default());
    let node = Node {
        links,
        shared: shared.clone(),
    };
    let (stop, waker) = (lp.stop_handle(), lp.waker());
    let thread = std::thread::spawn(move || lp.run(node));
    Running {
        stop,
        waker,
        shared,
        thread,
    }
}

fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !cond() {
        assert!(Instant::now() < deadline, "not reached in 20 s: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn has(node: &Running, from: u64, payload: &[u8]) -> bool {
    node.received()
        .iter()
        .any(|(f, p)| *f == from && p == payload)
}

#[test]
fn three_links_carry_payloads_between_every_pair() {
    let bound: Vec<_> = (0..3).map(|_| bind("127.0.0.1:0")).collect();
    let addrs: Vec<SocketAddr> = bound.iter().map(|(_, a)| *a).collect();
    let nodes: Vec<Running> = bound
        .into_iter()
        .enumerate()
        .map(|(i, (lp, _))| run(lp, setup(i as u64 + 1, &addrs)))
        .collect();
    wait_until("every node linked with both others", || {
        nodes.iter().all(|n| n.status().connected == 2)
    });
    for (i, node) in nodes.iter().enumerate() {
        let from = i as u64 + 1;
        for to in (1..=3).filter(|to| *to != from) {
            node.send(to, format!("{from} to {to}").as_bytes());
        }
    }
    for (i, node) in nodes.iter().enumerate() {
        let to = i as u64 + 1;
        for from in (1..=3).filter(|from| *from != to) {
            let payload = format!("{from} to {to}");
            wait_until(&payload, || has(node, from, payload.as_bytes()));
        }
        assert_eq!(node.received().len(), 2);
    }
    for node in nodes {
        assert_eq!(node.status().refused, 0);
        node.stop();
    }
}

#[test]
fn large_payloads_pass_up_to_the_cap_and_beyond_it_are_dropped() {
    let bound: Vec<_> = (0..2).map(|_| bind("127.0.0.1:0")).collect();
    let addrs: Vec<SocketAddr> = bound.iter().map(|(_, a)| *a).collect();
    let mut nodes: Vec<Running> = bound
        .into_iter()
        .enumerate()
        .map(|(i, (lp, _))| run(lp, setup(i as u64 + 1, &addrs)))
        .collect();
    wait_until("linked", || nodes[0].status().connected == 1);
    // Chunks: 5 of them, the last one short.
    let large: Vec<u8> = (0..4 * CHUNK + 3).map(|i| (i % 251) as u8).collect();
    let too_large = vec![0u8; MAX_PAYLOAD + 1];
    nodes[1].send(1, large.clone());
    nodes[1].send(1, too_large);
    nodes[1].send(1, b"after");
    wait_until("the large payload", || has(&nodes[0], 2, &large));
    wait_until("the small one", || has(&nodes[0], 2, b"after"));
    assert_eq!(
        nodes[0].received().len(),
        2,
        "the one above the cap was dropped"
    );
    assert_eq!(nodes[1].status().dropped, 1);
    let second = nodes.pop().unwrap();
    second.stop();
    nodes.pop().unwrap().stop();
}

#[test]
fn a_peer_that_restarts_is_linked_again_whichever_side_it_is() {
    let (lp1, a1) = bind("127.0.0.1:0");
    let (lp2, a2) = bind("127.0.0.1:0");
    let addrs = [a1, a2];
    let n1 = run(lp1, setup(1, &addrs));
    let n2 = run(lp2, setup(2, &addrs));
    wait_until("first link", || {
        n1.status().connected == 1 && n2.status().connected == 1
    });
    // The accepting side (higher id) restarts: the dialer links again after its backoff.
    n2.stop();
    wait_until("node 1 sees the link down", || n1.status().connected == 0);
    let n2 = run(bind(&a2.to_string()).0, setup(2, &addrs));
    wait_until("relinked to the new node 2", || n2.status().connected == 1);
    n1.send(2, b"to the new 2");
    wait_until("payload to the new node 2", || has(&n2, 1, b"to the new 2"));
    // The dialing side restarts: it dials again, and the acceptor takes the new connection.
    n1.stop();
    let n1 = run(bind(&a1.to_string()).0, setup(1, &addrs));
    wait_until("relinked from the new node 1", || {
        n1.status().connected == 1
    });
    n2.send(1, b"to the new 1");
    wait_until("payload to the new node 1", || has(&n1, 2, b"to the new 1"));
    assert_eq!(n2.status().connected, 1);
    n1.stop();
    n2.stop();
}

#[test]
fn peers_named_by_host_name_are_resolved_off_the_loop_and_linked() {
    let (lp1, a1) = bind("127.0.0.1:0");
    let (lp2, a2) = bind("127.0.0.1:0");
    let named = |a: SocketAddr| format!("localhost:{}", a.port());
    let setup_of = |self_id: u64| {
        let names = [named(a1), named(a2)];
        PeerSetup {
            group: GROUP.into(),
            self_id,
            self_addr: names[self_id as usize - 1].clone(),
            peers: vec![(3 - self_id, names[2 - self_id as usize].clone())],
            secret: String::new(),
        }
    };
    let n1 = run(lp1, setup_of(1));
    let n2 = run(lp2, setup_of(2));
    wait_until("linked by host name", || {
        n1.status().connected == 1 && n2.status().connected == 1
    });
    n1.send(2, b"by name");
    wait_until("payload delivered", || has(&n2, 1, b"by name"));
    n1.stop();
    n2.stop();
}

#[test]
fn a_peer_that_never_answers_the_handshake_is_dropped_and_dialed_again() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let (lp, a1) = bind("127.0.0.1:0");
    let addrs = [a1, silent.local_addr().unwrap()];
    let node = run(lp, setup(1, &addrs));
    node.send(2, b"queued while linking");
    let (mut first, _) = silent.accept().unwrap();
    first
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    // The handshake arrives, then (no answer given) the close; nothing queued was sent.
    let cmd = read_cmd(&mut first).expect("the handshake");
    assert_eq!((cmd.code, cmd.ext("nodeId")), (PEER_CODE, Some("1")));
    assert!(read_cmd(&mut first).is_none());
    let (mut second, _) = silent.accept().unwrap();
    second
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    assert!(read_cmd(&mut second).is_some_and(|c| c.ext("group") == Some(GROUP)));
    assert_eq!(node.status().connected, 0);
    node.stop();
}

/// Two nodes with these secrets: linked with the same one, payloads and a chunked payload
/// pass; otherwise both keep refusing (and no payload passes).
fn two_with_secrets(secrets: [&str; 2]) {
    let bound: Vec<_> = (0..2).map(|_| bind("127.0.0.1:0")).collect();
    let addrs: Vec<SocketAddr> = bound.iter().map(|(_, a)| *a).collect();
    let nodes: Vec<Running> = bound
        .into_iter()
        .zip(secrets)
        .enumerate()
        .map(|(i, ((lp, _), secret))| {
            let setup = PeerSetup {
                secret: secret.into(),
                ..setup(i as u64 + 1, &addrs)
            };
            run(lp, setup)
        })
        .collect();
    if secrets[0] == secrets[1] {
        wait_until("linked", || nodes.iter().all(|n| n.status().connected == 1));
        let large = vec![5u8; CHUNK + 1];
        nodes[0].send(2, large.clone());
        nodes[1].send(1, b"back".to_vec());
        wait_until("both ways", || {
            has(&nodes[1], 1, &large) && has(&nodes[0], 2, b"back")
        });
    } else {
        wait_until("refused twice", || {
            nodes.iter().map(|n| n.status().refused).sum::<u64>() >= 4
        });
        nodes[0].send(2, b"never".to_vec());
        // (An acceptor without a secret links until the dialer finds no proof and closes.)
        for (node, secret) in nodes.iter().zip(secrets) {
            assert!(secret.is_empty() || node.status().connected == 0);
            assert!(node.received().is_empty());
        }
    }
    for node in nodes {
        node.stop();
    }
}

#[test]
fn only_peers_proving_the_same_secret_link() {
    two_with_secrets(["s3cret", "s3cret"]);
    two_with_secrets(["s3cret", "other"]);
    two_with_secrets(["s3cret", ""]);
    two_with_secrets(["", "s3cret"]);
}

// ------------------------------------------------------------------ refusals

/// Node 3 of a group whose node 1 is at 127.0.0.1 and node 2 at 127.0.0.2 (ports never used:
/// node 3 only accepts, the lower ids dial it).
fn acceptor() -> (Running, SocketAddr, [SocketAddr; 3]) {
    let (lp, a3) = bind("127.0.0.1:0");
    let addrs = [
        "127.0.0.1:1".parse().unwrap(),
        "127.0.0.2:2".parse().unwrap(),
        a3,
    ];
    (run(lp, setup(3, &addrs)), a3, addrs)
}

fn write_handshake(s: &mut TcpStream, group: &str, id: u64, addr: &str) {
    let mut out = Vec::new();
    encode_handshake(&mut out, group, (id, addr), None);
    s.write_all(&out).unwrap();
}

fn write_payload(s: &mut TcpStream, payload: &[u8]) {
    let mut out = Vec::new();
    encode_payload(&mut out, payload);
    s.write_all(&out).unwrap();
}

/// The next frame, or None at EOF (or a reset).
fn read_cmd(s: &mut TcpStream) -> Option<RemotingCommand> {
    let mut len = [0u8; 4];
    if s.read_exact(&mut len).is_err() {
        return None;
    }
    let mut rest = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut rest).ok()?;
    Some(RemotingCommand::decode(Bytes::from(rest), &DecodeLimits::default()).unwrap())
}

/// A refused handshake: an error answer (or none), then the close.
fn assert_refused(s: &mut TcpStream) {
    if let Some(answer) = read_cmd(s) {
        assert!(answer.is_response());
        assert_ne!(answer.code, SUCCESS);
        assert!(read_cmd(s).is_none(), "the connection stays open");
    }
}

#[test]
fn a_handshake_from_the_configured_address_links_and_payloads_are_delivered() {
    let (node, a3, addrs) = acceptor();
    let mut s = connect_from([127, 0, 0, 1], a3);
    write_handshake(&mut s, GROUP, 1, &addrs[0].to_string());
    let answer = read_cmd(&mut s).expect("an answer");
    assert_eq!(answer.code, SUCCESS);
    assert_eq!(answer.ext("nodeId"), Some("3"));
    assert_eq!(answer.ext("group"), Some(GROUP));
    write_payload(&mut s, b"raft bytes");
    wait_until("payload delivered", || has(&node, 1, b"raft bytes"));
    // And the other way.
    node.send(1, b"back");
    let back = read_cmd(&mut s).expect("a payload");
    assert_eq!((back.code, &back.body[..]), (PEER_CODE, &b"back"[..]));
    assert!(back.is_oneway());
    node.stop();
}

#[test]
fn handshakes_from_elsewhere_or_naming_the_wrong_group_or_id_are_refused() {
    let (node, a3, addrs) = acceptor();
    let (n1, n2) = (addrs[0].to_string(), addrs[1].to_string());
    let attempts: [([u8; 4], &str, u64, &str); 6] = [
        // Node 1's id, from node 2's address, and from an address that is no peer's.
        ([127, 0, 0, 2], GROUP, 1, &n1),
        ([127, 0, 0, 3], GROUP, 2, &n2),
        // The right address, the wrong group.
        ([127, 0, 0, 1], "other-group", 1, &n1),
        // The right address, an unknown id, this node's own id, a wrong advertised address.
        ([127, 0, 0, 1], GROUP, 9, &n1),
        ([127, 0, 0, 1], GROUP, 3, &n1),
        ([127, 0, 0, 1], GROUP, 1, "127.0.0.1:9"),
    ];
    for (source, group, id, addr) in attempts {
        let mut s = connect_from(source, a3);
        write_handshake(&mut s, group, id, addr);
        write_payload(&mut s, b"must not arrive");
        assert_refused(&mut s);
    }
    assert!(node.received().is_empty());
    assert_eq!(node.status().connected, 0);
    wait_until("refusals counted", || node.status().refused == 6);
    node.stop();
}

#[test]
fn a_payload_before_a_handshake_closes_the_connection() {
    let (node, a3, _) = acceptor();
    let mut s = connect_from([127, 0, 0, 1], a3);
    write_payload(&mut s, b"must not arrive");
    assert!(read_cmd(&mut s).is_none());
    assert!(node.received().is_empty());
    wait_until("refusal counted", || node.status().refused == 1);
    node.stop();
}

// ------------------------------------------------------------------ setup

#[test]
fn a_single_node_has_no_peers_whatever_its_id() {
    let config = ControllerConfig::from_lookup(&|key| match key {
        "controllerDLegerPeers" => Some("a-127.0.0.1:9878".into()),
        "controllerDLegerSelfId" => Some("a".into()),
        "controllerDLegerGroup" => Some("g".into()),
        _ => None,
    })
    .unwrap();
    let setup = PeerSetup::from_config(&config);
    assert_eq!(setup.peers, Vec::new());
    assert_eq!(setup.group, "g");
    assert_eq!(setup.self_addr, "127.0.0.1:9878");
    let links = PeerLinks::new(setup).unwrap();
    assert_eq!(links.status().configured, 0);
    links.shutdown();
}

#[test]
fn chunks_out_of_order_or_above_the_cap_close_the_link() {
    let (node, a3, addrs) = acceptor();
    let chunk = |offset: usize, total: usize, body: &[u8]| {
        let (offset, total) = (offset.to_string(), total.to_string());
        let ext = [("offset", offset.as_str()), ("total", total.as_str())];
        let mut out = Vec::new();
        encode_peer_frame(
            &mut out,
            (FLAG_ONEWAY, PEER_CODE, 0),
            None,
            Some(&ext),
            body,
        );
        out
    };
    let cases = [
        chunk(0, MAX_PAYLOAD + 1, b"x"),
        [chunk(0, 6, b"abc"), chunk(4, 6, b"def")].concat(),
        chunk(0, 2, b"abc"),
    ];
    for (k, frames) in cases.iter().enumerate() {
        let mut s = connect_from([127, 0, 0, 1], a3);
        write_handshake(&mut s, GROUP, 1, &addrs[0].to_string());
        assert_eq!(read_cmd(&mut s).map(|a| a.code), Some(SUCCESS));
        s.write_all(frames).unwrap();
        assert!(read_cmd(&mut s).is_none(), "case {k}: closed");
        wait_until("counted", || node.status().refused == k as u64 + 1);
    }
    // In order, a whole payload is delivered once.
    let mut s = connect_from([127, 0, 0, 1], a3);
    write_handshake(&mut s, GROUP, 1, &addrs[0].to_string());
    assert_eq!(read_cmd(&mut s).map(|a| a.code), Some(SUCCESS));
    s.write_all(&[chunk(0, 6, b"abc"), chunk(3, 6, b"def")].concat())
        .unwrap();
    wait_until("reassembled", || has(&node, 1, b"abcdef"));
    assert_eq!(node.received().len(), 1);
    node.stop();
}
