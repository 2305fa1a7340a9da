//! Attacks on the name server port, each reproduced over TCP against the real
//! server, bounded in time and count: running out of file descriptors, many large partial
//! frames, peers that ask for large replies and never read them, and trickling peers that
//! hold every connection slot. Each test checks that a good client is still served and that
//! what the attackers can make the server hold stays bounded.
//!
//! RSS is measured on the real binary as a child process (`common/child.rs`); the
//! out-of-descriptors loop test runs this test binary again as a child with a low limit.

#[path = "common/child.rs"]
mod child;
mod common;

use bytes::{Bytes, BytesMut};
use child::ServerProcess;
use common::{
    body_with, connect_from, register, stat, topic, wait_until, Broker, TempDir, TestServer,
};
use rmq_namesrv::client::Client;
use rmq_namesrv::event_loop::{
    ConnId, Ctx, DescriptorLimit, EventLoop, Handler, Limits, ListenerTag, Next,
};
use rmq_namesrv::remoting::codes::{request, response};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;

// ------------------------------------------------------------------------------- helpers

/// The real binary on loopback, its console log in `dir/server.stderr`, optionally with
/// both descriptor limits set to `nofile` (as `ulimit -n` does).
fn spawn_server(dir: &TempDir, extra: &[&str], nofile: Option<u64>) -> ServerProcess {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rmq-namesrv"));
    cmd.args([
        "--listenPort=0",
        "--bindAddress=127.0.0.1",
        "--logPath=",
        &format!("--kvConfigPath={}", dir.path().join("kv.json").display()),
        &format!(
            "--configStorePath={}",
            dir.path().join("ns.properties").display()
        ),
    ])
    .args(extra)
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(std::fs::File::create(dir.path().join("server.stderr")).expect("stderr file"));
    if let Some(n) = nofile {
        let limit = DescriptorLimit { soft: n, hard: n };
        // SAFETY: the closure only makes the setrlimit system call, which is
        // async-signal-safe, between fork and exec.
        unsafe {
            cmd.pre_exec(move || rmq_namesrv::event_loop::descriptors::set_descriptor_limit(limit));
        }
    }
    let mut child = cmd.spawn().expect("spawn rmq-namesrv");
    let mut line = String::new();
    let stdout = child.stdout.take().expect("stdout");
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("first line");
    let addr = line
        .trim()
        .strip_prefix("rmq-namesrv listening on ")
        .unwrap_or_else(|| panic!("server did not start: {line:?}"))
        .to_string();
    ServerProcess { child, addr }
}

fn server_log(dir: &TempDir) -> String {
    std::fs::read_to_string(dir.path().join("server.stderr")).unwrap_or_default()
}

/// A fresh connection asks for the cluster info: true when it is answered with success.
fn served(addr: &str) -> bool {
    let Ok(mut c) = Client::connect(addr, Duration::from_secs(2)) else {
        return false;
    };
    c.request(request::GET_BROKER_CLUSTER_INFO, &[], b"")
        .is_ok_and(|r| r.code == response::SUCCESS)
}

/// Whether the peer sees the connection closed (EOF or reset) rather than kept open.
fn closed_by_server(s: &mut TcpStream) -> bool {
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return e.kind() == std::io::ErrorKind::ConnectionReset,
        }
    }
}

fn peak(sample: &mut u64, server: &ServerProcess) {
    *sample = (*sample).max(server.rss_kib().unwrap_or(0));
}

// ------------------------------------------------------------- 1. file descriptors

/// Once the attackers are gone: the server's buffers drain (under 64 KiB) and its RSS comes
/// back within 4 MiB of `idle_kib`, polled for up to 10 s.
fn memory_returns(watcher: &mut Client, server: &ServerProcess, idle_kib: u64) -> bool {
    wait_until(Duration::from_secs(10), || {
        stat(watcher, "bufferedBytes") < 64 * 1024
            && server.rss_kib().unwrap_or(u64::MAX) < idle_kib + 4 * 1024
    })
}

#[test]
fn with_ulimit_64_and_300_connection_attempts_the_server_keeps_accepting() {
    let dir = TempDir::new("attack-fd");
    let server = spawn_server(&dir, &[], Some(64));
    let addr: SocketAddr = server.addr.parse().unwrap();
    let held: Vec<TcpStream> = (0..300)
        .filter_map(|_| TcpStream::connect_timeout(&addr, Duration::from_millis(300)).ok())
        .collect();
    let held_count = held.len();
    drop(held);
    // Before the fix the listener never accepted again once `accept` had failed.
    assert!(wait_until(Duration::from_secs(10), || served(&server.addr)));
    let mut c = server.client();
    let log = server_log(&dir);
    assert!(
        stat(&mut c, "refusedConnections") > 0,
        "the attack reached the cap ({} held):\n{log}",
        held_count
    );
    assert!(
        log.contains("does not fit the open-file limit"),
        "no warning about maxConnections and the limit:\n{log}"
    );
}

/// Echoes frames of a 4-byte length and a payload: the loop without the name server, so
/// that its connection cap can be set above the descriptor limit.
struct Echo;

impl Handler for Echo {
    type Conn = ();
    type FrameError = String;

    fn cut_frame(&self, buf: &mut BytesMut) -> Result<Option<Bytes>, String> {
        if buf.len() < 4 {
            return Ok(None);
        }
        let len = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
        if buf.len() < 4 + len {
            return Ok(None);
        }
        Ok(Some(buf.split_to(4 + len).freeze()))
    }

    fn on_frame(&mut self, ctx: &mut Ctx<()>, conn: ConnId, frame: Bytes) -> Next {
        if let Some(out) = ctx.write_buf(conn) {
            out.extend_from_slice(&frame);
        }
        Next::Continue
    }
}

const FD_CHILD: &str = "RMQ_ATTACKS_FD_CHILD";
const FD_TEST: &str = "out_of_descriptors_the_loop_sheds_waiting_connections_and_accepts_again";

/// The child's side: 48 descriptors, a connection cap far above them, echo until stdin
/// closes.
fn run_fd_limited_echo() {
    let _ = rmq_namesrv::logging::init(&rmq_namesrv::logging::LogSettings {
        level: log::LevelFilter::Warn,
        file: None,
        max_size: 0,
        max_files: 0,
    });
    let limit = DescriptorLimit { soft: 48, hard: 48 };
    rmq_namesrv::event_loop::descriptors::set_descriptor_limit(limit).expect("setrlimit");
    let mut lp: EventLoop<Echo> = EventLoop::new(Limits {
        max_connections: 100_000,
        ..Limits::default()
    })
    .expect("loop");
    let addr = lp
        .listen("127.0.0.1:0".parse().unwrap(), ListenerTag(0))
        .expect("listen");
    println!("echo listening on {addr}");
    let stop = lp.stop_handle();
    std::thread::spawn(move || {
        let _ = std::io::stdin().read_to_end(&mut Vec::new());
        stop.stop();
    });
    lp.run(Echo).expect("run");
}

fn echoed(addr: SocketAddr) -> bool {
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_millis(500)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let mut reply = [0u8; 8];
    s.write_all(&[0, 0, 0, 4, b'p', b'i', b'n', b'g']).is_ok()
        && s.read_exact(&mut reply).is_ok()
        && &reply[4..] == b"ping"
}

#[test]
fn out_of_descriptors_the_loop_sheds_waiting_connections_and_accepts_again() {
    if std::env::var_os(FD_CHILD).is_some() {
        return run_fd_limited_echo();
    }
    let dir = TempDir::new("attack-emfile");
    let mut child = Command::new(std::env::current_exe().expect("test binary"))
        .args(["--exact", FD_TEST, "--nocapture", "--test-threads=1"])
        .env(FD_CHILD, "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(dir.path().join("server.stderr")).unwrap())
        .spawn()
        .expect("spawn the child");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let addr: SocketAddr = loop {
        let line = lines.next().expect("child output").expect("line");
        // libtest may have written "test NAME ... " on the same line first.
        if let Some(at) = line.find("echo listening on ") {
            break line[at + "echo listening on ".len()..]
                .trim()
                .parse()
                .unwrap();
        }
    };
    // More than the accept queue (1024) holds: without shedding, the queue stays full and
    // no new connection is ever reported to the edge-triggered listener again.
    let mut held: Vec<TcpStream> = Vec::new();
    let mut failed_in_a_row = 0;
    while held.len() < 1200 && failed_in_a_row < 5 {
        match TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
            Ok(s) => {
                held.push(s);
                failed_in_a_row = 0;
            }
            // The queue is full and nobody takes connections off it.
            Err(_) => failed_in_a_row += 1,
        }
    }
    let mut shed = 0;
    for s in held.iter_mut().rev().take(10) {
        let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
        if closed_by_server(s) {
            shed += 1;
        }
    }
    assert!(shed > 0, "waiting connections are closed, not left hanging");
    drop(held);
    assert!(wait_until(Duration::from_secs(10), || echoed(addr)));
    drop(child.stdin.take());
    assert!(child.wait().expect("child exit").success());
    let log = server_log(&dir);
    let warnings = log.matches("accept on 127.0.0.1").count();
    assert!(
        (1..=2).contains(&warnings),
        "the condition is logged once per interval, got {warnings}:\n{log}"
    );
}

// ------------------------------------------------------------------- 2. memory

#[test]
fn large_partial_frames_stay_within_the_buffer_budget_and_memory_returns() {
    const BUDGET_MIB: u64 = 8;
    let dir = TempDir::new("attack-frames");
    let server = spawn_server(&dir, &["--maxBufferedBytes=8388608"], None);
    let idle = server.rss_kib().expect("rss");
    // 32 peers each announce a 16 MiB frame and send what the socket takes of 3 MB of it.
    let attackers: Vec<_> = (0..32)
        .map(|_| {
            let addr = server.addr.clone();
            std::thread::spawn(move || {
                let mut s = connect_from([127, 0, 0, 2], &addr).expect("connect");
                s.set_write_timeout(Some(Duration::from_secs(2))).unwrap();
                let mut bytes = ((16u32 << 20) - 4).to_be_bytes().to_vec();
                bytes.extend_from_slice(&100u32.to_be_bytes());
                bytes.resize(3 << 20, b'x');
                let _ = s.write_all(&bytes);
                s
            })
        })
        .collect();
    let mut rss_peak = 0;
    let attackers: Vec<TcpStream> = attackers
        .into_iter()
        .map(|a| {
            peak(&mut rss_peak, &server);
            a.join().unwrap()
        })
        .collect();
    let mut watcher = server.client();
    assert!(stat(&mut watcher, "bufferedBytes") > 0);
    assert!(served(&server.addr));
    peak(&mut rss_peak, &server);
    // Before: ~96 MB of partial frames resident (and 512 MiB reserved).
    let grown_mib = rss_peak.saturating_sub(idle) / 1024;
    assert!(
        grown_mib < 3 * BUDGET_MIB + 16,
        "RSS grew by {grown_mib} MiB"
    );
    drop(attackers);
    assert!(memory_returns(&mut watcher, &server, idle));
}

#[test]
fn peers_that_never_read_large_replies_are_closed_and_memory_returns() {
    let dir = TempDir::new("attack-noread");
    let server = spawn_server(&dir, &["--maxBufferedBytes=4194304"], None);
    // 5,000 topics: each all-topic list answer is about 100 KB.
    let topics: Vec<_> = (0..5000)
        .map(|i| topic(&format!("attack-topic-{i:06}"), 4, 6))
        .collect();
    let mut client = server.client();
    let broker = Broker::new("C", "b", "127.0.0.1:10911", 0);
    assert_eq!(
        register(&mut client, &broker, &body_with(1, &topics)).code,
        0
    );
    // The server's own state for answering it (caches) counts as idle, not as the attack's.
    let list = client.request(request::GET_ALL_TOPIC_LIST_FROM_NAMESERVER, &[], b"");
    assert!(list.is_ok_and(|r| r.body.len() > 90_000));
    let idle = server.rss_kib().expect("rss");
    let request: Vec<u8> = (0..200)
        .flat_map(|i| {
            common::request_frame(request::GET_ALL_TOPIC_LIST_FROM_NAMESERVER, i, &[], b"")
        })
        .collect();
    let peers: Vec<TcpStream> = (0..10)
        .map(|_| {
            let mut s = connect_from([127, 0, 0, 2], &server.addr).expect("connect");
            s.set_write_timeout(Some(Duration::from_secs(2))).unwrap();
            let _ = s.write_all(&request);
            s
        })
        .collect();
    let mut rss_peak = 0;
    let mut watcher = server.client();
    assert!(wait_until(Duration::from_secs(20), || {
        peak(&mut rss_peak, &server);
        stat(&mut watcher, "closedOverBudget") > 0
    }));
    assert!(served(&server.addr));
    peak(&mut rss_peak, &server);
    // Before: every peer held up to connWriteHighWater (4 MiB) of unread answers.
    let grown_mib = rss_peak.saturating_sub(idle) / 1024;
    assert!(grown_mib < 24, "RSS grew by {grown_mib} MiB");
    drop(peers);
    assert!(memory_returns(&mut watcher, &server, idle));
}

// --------------------------------------------------------------- 6. slow peers

#[test]
fn trickling_peers_cannot_lock_out_a_client_that_was_working() {
    let server = TestServer::start_with(|c| {
        c.max_connections = 40;
        c.server_channel_max_idle_time_seconds = 3;
        c.frame_read_timeout_millis = 2000;
    });
    // A client that works before the attack.
    assert!(served(&server.addr));
    // 60 peers from another address: as many as get in hold a slot, sending a byte of a frame
    // now and then and never finishing it.
    let mut tricklers: Vec<TcpStream> = (0..60)
        .filter_map(|_| connect_from([127, 0, 0, 2], &server.addr).ok())
        .collect();
    for t in tricklers.iter_mut() {
        let _ = t.write_all(&[0]);
    }
    let mut watcher = server.client();
    assert!(wait_until(Duration::from_secs(5), || stat(
        &mut watcher,
        "refusedConnections"
    ) >= 20));
    drop(watcher);
    // The general slots are taken; the reserve (5 % of 40) is for addresses that completed
    // a request recently: the working client gets in, a newcomer does not.
    assert!(served(&server.addr));
    let mut newcomer = connect_from([127, 0, 0, 3], &server.addr).expect("connect");
    assert!(closed_by_server(&mut newcomer));
    // The trickling peers are closed: their frame never completes in time.
    let trickle = std::thread::spawn(move || {
        let mut closed = 0;
        for mut t in tricklers {
            let _ = t.write_all(&[0]);
            if closed_by_server(&mut t) {
                closed += 1;
            }
        }
        closed
    });
    assert_eq!(trickle.join().unwrap(), 60);
    let mut c = server.client();
    assert!(stat(&mut c, "frameTimeouts") >= 38);
}

#[test]
fn one_address_holds_at_most_max_connections_per_address() {
    let server = TestServer::start_with(|c| c.max_connections_per_address = 3);
    let _held: Vec<TcpStream> = (0..3)
        .map(|_| connect_from([127, 0, 0, 2], &server.addr).expect("connect"))
        .collect();
    let mut fourth = connect_from([127, 0, 0, 2], &server.addr).expect("connect");
    assert!(closed_by_server(&mut fourth));
    assert!(served(&server.addr), "another address is not affected");
    let mut c = server.client();
    assert_eq!(stat(&mut c, "refusedConnections"), 1);
}
