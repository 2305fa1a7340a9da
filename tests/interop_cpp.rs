//! Interoperability with the official RocketMQ C++ client (rocketmq-client-cpp, as
//! `librocketmq.so` inside the PyPI wheel `rocketmq==0.4.4`), driven through
//! `tests/interop/cpp_client.py` with the virtualenv that `tests/interop/setup-cpp.sh` makes.
//!
//! The C++ client is configured with nothing but the name server's address. Everything it
//! learns about brokers comes from our GET_ROUTEINFO_BY_TOPIC answers, so a message that lands
//! on the right test broker, queue by queue, proves the route it parsed was right. The test
//! brokers here are small: they register with rmq-namesrv over REGISTER_BROKER and answer the
//! handful of broker requests a C++ producer and push consumer make (send, heartbeat, consumer
//! list, offsets; pulls are held, like a long poll that never finds a message).
//!
//! The test skips (passes with a loud message) only when the virtualenv is absent.

mod common;

use bytes::BytesMut;
use common::*;
use rmq_namesrv::remoting::command::{
    encode_frame, DecodeLimits, Header, RemotingCommand, SerializeType,
};
use rmq_namesrv::remoting::{frame, json};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

// Broker-side request codes the C++ client sends (RequestCode.java).
const SEND_MESSAGE: i32 = 10;
const PULL_MESSAGE: i32 = 11;
const QUERY_CONSUMER_OFFSET: i32 = 14;
const UPDATE_CONSUMER_OFFSET: i32 = 15;
const GET_MIN_OFFSET: i32 = 29;
const GET_MAX_OFFSET: i32 = 30;
const HEART_BEAT: i32 = 34;
const UNREGISTER_CLIENT: i32 = 35;
const GET_CONSUMER_LIST_BY_GROUP: i32 = 38;
const SEND_MESSAGE_V2: i32 = 310;
const TOPIC_NOT_EXIST: i32 = 17;
const REQUEST_CODE_NOT_SUPPORTED: i32 = 3;
/// Binary LanguageCode of CPP.
const LANG_CPP: u8 = 1;

/// How long any single C++ client run may take before the test kills it.
const CHILD_TIMEOUT: Duration = Duration::from_secs(60);

// ------------------------------------------------------------------------------------------
// Locating the C++ client
// ------------------------------------------------------------------------------------------

/// The virtualenv's python, or None when setup-cpp.sh has not installed it.
fn venv_python() -> Option<PathBuf> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Ok(v) = std::env::var("RMQ_INTEROP_VENV") {
        candidates.push(PathBuf::from(v));
    }
    if let Ok(t) = std::env::var("CARGO_TARGET_DIR") {
        candidates.push(PathBuf::from(t).join("interop-venv"));
    }
    // target/<profile>/deps/<test binary>, maybe with a target triple in between.
    if let Ok(exe) = std::env::current_exe() {
        for dir in exe.ancestors().skip(3).take(2) {
            candidates.push(dir.join("interop-venv"));
        }
    }
    candidates.push(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/interop-venv"));
    candidates
        .into_iter()
        .map(|v| v.join("bin/python"))
        .find(|p| p.exists())
}

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/interop/cpp_client.py")
}

/// Written straight to the process's stderr (not through `eprintln!`, which the test
/// harness captures for passing tests), so a skip is visible in every `cargo test` run.
fn loud_skip(test: &str) {
    let bar = "!".repeat(72);
    let _ = writeln!(
        std::io::stderr(),
        "{bar}\n!!! SKIPPING {test}: no virtualenv with the rocketmq==0.4.4 wheel\n\
         !!! (run tests/interop/setup-cpp.sh; RMQ_INTEROP_CPP={:?})\n{bar}",
        std::env::var("RMQ_INTEROP_CPP").unwrap_or_default()
    );
}

macro_rules! python_or_skip {
    ($test:expr) => {
        match venv_python() {
            Some(p) => p,
            None => {
                loud_skip($test);
                return;
            }
        }
    };
}

/// One run of cpp_client.py. Output lines are collected by reader threads; the run is killed
/// if it outlives [`CHILD_TIMEOUT`].
struct CppRun {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Arc<Mutex<Vec<String>>>,
    stderr: Arc<Mutex<String>>,
    home: TempDir,
    started: Instant,
}

impl CppRun {
    fn spawn(python: &PathBuf, args: &[&str]) -> CppRun {
        // The C++ client logs under $HOME/logs/rocketmq-cpp: keep that out of the real home.
        let home = TempDir::new("cpp-home");
        let mut child = Command::new(python)
            .arg(script())
            .args(args)
            .env("HOME", home.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the venv's python");
        let stdout = Arc::new(Mutex::new(Vec::new()));
        let stderr = Arc::new(Mutex::new(String::new()));
        let out = child.stdout.take().expect("stdout");
        let lines = stdout.clone();
        thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                lines.lock().unwrap().push(line);
            }
        });
        let mut err = child.stderr.take().expect("stderr");
        let text = stderr.clone();
        thread::spawn(move || {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s);
            text.lock().unwrap().push_str(&s);
        });
        let stdin = child.stdin.take();
        CppRun {
            child,
            stdin,
            stdout,
            stderr,
            home,
            started: Instant::now(),
        }
    }

    /// The `RESULT` lines so far, as key → value maps.
    fn results(&self) -> Vec<BTreeMap<String, String>> {
        self.stdout
            .lock()
            .unwrap()
            .iter()
            .filter_map(|l| l.strip_prefix("RESULT "))
            .map(|l| {
                l.split(' ')
                    .filter_map(|kv| kv.split_once('='))
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect()
            })
            .collect()
    }

    /// Everything useful for a failure message: output and the tail of the C++ client's log.
    fn diagnostics(&self) -> String {
        let mut log = String::new();
        let dir = self.home.path().join("logs/rocketmq-cpp");
        if let Ok(entries) = std::fs::read_dir(&dir) {
            for e in entries.flatten() {
                if let Ok(text) = std::fs::read_to_string(e.path()) {
                    let tail: Vec<&str> = text.lines().rev().take(40).collect();
                    log.push_str(&format!("--- {}\n", e.path().display()));
                    for l in tail.into_iter().rev() {
                        log.push_str(l);
                        log.push('\n');
                    }
                }
            }
        }
        format!(
            "stdout:\n{}\nstderr:\n{}\nC++ client log:\n{}",
            self.stdout.lock().unwrap().join("\n"),
            self.stderr.lock().unwrap(),
            log
        )
    }

    /// Closes stdin (the consume scenario's "stop"), waits for exit within the hard timeout.
    fn finish(mut self) -> (Vec<BTreeMap<String, String>>, String) {
        drop(self.stdin.take());
        let deadline = self.started + CHILD_TIMEOUT;
        loop {
            match self.child.try_wait().expect("try_wait") {
                Some(status) => {
                    let diag = self.diagnostics();
                    // Let the reader threads drain the pipes.
                    wait_until(Duration::from_secs(5), || {
                        self.stdout
                            .lock()
                            .unwrap()
                            .iter()
                            .any(|l| l.contains("RESULT"))
                            || !status.success()
                    });
                    assert!(status.success(), "cpp_client.py failed: {status}\n{diag}");
                    return (self.results(), self.diagnostics());
                }
                None if Instant::now() >= deadline => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    panic!(
                        "cpp_client.py did not finish within {CHILD_TIMEOUT:?}: killed\n{}",
                        self.diagnostics()
                    );
                }
                None => thread::sleep(Duration::from_millis(20)),
            }
        }
    }
}

impl Drop for CppRun {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ------------------------------------------------------------------------------------------
// A test broker
// ------------------------------------------------------------------------------------------

/// One request a test broker received.
#[derive(Debug, Clone)]
struct Received {
    code: i32,
    language: u8,
    version: i32,
    ext: BTreeMap<String, String>,
}

#[derive(Default)]
struct BrokerState {
    received: Vec<Received>,
    /// Topics this broker serves (a send to anything else gets TOPIC_NOT_EXIST).
    topics: BTreeSet<String>,
    /// (topic, queueId, body) of every accepted message.
    messages: Vec<(String, i32, String)>,
    /// consumer group → client ids, from heartbeats.
    consumers: BTreeMap<String, BTreeSet<String>>,
    next_offset: BTreeMap<(String, i32), i64>,
}

struct TestBroker {
    name: String,
    addr: String,
    state: Arc<Mutex<BrokerState>>,
    stop: Arc<AtomicBool>,
}

impl TestBroker {
    fn start(name: &str) -> TestBroker {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind test broker");
        let addr = listener.local_addr().expect("addr").to_string();
        let state = Arc::new(Mutex::new(BrokerState::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (st, stp, bname, baddr) = (state.clone(), stop.clone(), name.to_string(), addr.clone());
        thread::spawn(move || {
            for conn in listener.incoming() {
                if stp.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let (st, bname, baddr) = (st.clone(), bname.clone(), baddr.clone());
                thread::spawn(move || serve(conn, &st, &bname, &baddr));
            }
        });
        TestBroker {
            name: name.to_string(),
            addr,
            state,
            stop,
        }
    }

    fn identity(&self) -> Broker {
        Broker {
            cluster: "InteropCluster".into(),
            name: self.name.clone(),
            addr: self.addr.clone(),
            id: 0,
            ha: self.addr.clone(),
        }
    }

    /// Registers (or re-registers) with `topics`, as a 5.x master does every 30 s.
    fn register(&self, ns: &mut rmq_namesrv::client::Client, counter: i64, topics: &[(&str, i32)]) {
        let configs: Vec<_> = topics.iter().map(|(t, q)| topic(t, *q, 6)).collect();
        self.state.lock().unwrap().topics = topics.iter().map(|(t, _)| t.to_string()).collect();
        let resp = register(ns, &self.identity(), &body_with(counter, &configs));
        assert_eq!(resp.code, 0, "register {}: {:?}", self.name, resp.remark);
    }

    fn received(&self, code: i32) -> Vec<Received> {
        let st = self.state.lock().unwrap();
        st.received
            .iter()
            .filter(|r| r.code == code)
            .cloned()
            .collect()
    }

    fn messages(&self) -> Vec<(String, i32, String)> {
        self.state.lock().unwrap().messages.clone()
    }

    /// queue ids of `topic` for which the broker received `code` (offset query or pull).
    fn queues_asked(&self, code: i32, topic: &str) -> BTreeSet<i32> {
        self.received(code)
            .iter()
            .filter(|r| r.ext.get("topic").map(String::as_str) == Some(topic))
            .filter_map(|r| r.ext.get("queueId").and_then(|q| q.parse().ok()))
            .collect()
    }
}

impl Drop for TestBroker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(&self.addr);
    }
}

fn serve(mut conn: TcpStream, state: &Mutex<BrokerState>, name: &str, addr: &str) {
    let mut buf = BytesMut::with_capacity(8192);
    let limits = DecodeLimits::default();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        loop {
            let f = match frame::next_frame(&mut buf, 16 << 20) {
                Ok(Some(f)) => f,
                Ok(None) => break,
                Err(_) => return,
            };
            let Ok(cmd) = RemotingCommand::decode(f, &limits) else {
                return;
            };
            if cmd.is_response() {
                continue;
            }
            let reply = answer(&cmd, state, name, addr);
            if let (Some((code, remark, ext, body)), false) = (reply, cmd.is_oneway()) {
                let mut out = Vec::new();
                let header = Header {
                    code,
                    language: "JAVA",
                    version: 479,
                    opaque: cmd.opaque,
                    flag: 1,
                    remark: remark.as_deref(),
                };
                encode_frame(
                    &mut out,
                    SerializeType::Json,
                    &header,
                    Some(ext.iter().map(|(k, v)| (k.as_str(), v.as_str()))),
                    &body,
                );
                if conn.write_all(&out).is_err() {
                    return;
                }
            }
        }
        match conn.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

type Reply = (i32, Option<String>, Vec<(String, String)>, Vec<u8>);

fn ok(ext: Vec<(&str, String)>, body: Vec<u8>) -> Option<Reply> {
    let ext = ext.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
    Some((0, None, ext, body))
}

/// What a broker answers; None = hold the request (a pull with nothing to deliver).
fn answer(
    cmd: &RemotingCommand,
    state: &Mutex<BrokerState>,
    name: &str,
    addr: &str,
) -> Option<Reply> {
    let ext: BTreeMap<String, String> = (cmd.ext_fields.iter())
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    let mut st = state.lock().unwrap();
    st.received.push(Received {
        code: cmd.code,
        language: cmd.language,
        version: cmd.version,
        ext: ext.clone(),
    });
    let get = |long: &str, short: &str| ext.get(long).or_else(|| ext.get(short)).cloned();
    match cmd.code {
        SEND_MESSAGE | SEND_MESSAGE_V2 => {
            let topic = get("topic", "b").unwrap_or_default();
            let queue: i32 = get("queueId", "e")
                .and_then(|q| q.parse().ok())
                .unwrap_or(-1);
            let default_topic = get("defaultTopic", "c").unwrap_or_default();
            if !st.topics.contains(&topic) {
                // A broker with autoCreateTopicEnable creates topics sent via the default
                // topic it serves; otherwise the topic does not exist here.
                if !st.topics.contains(&default_topic) {
                    return Some((
                        TOPIC_NOT_EXIST,
                        Some(format!("topic[{topic}] not exist, apply first please!")),
                        Vec::new(),
                        Vec::new(),
                    ));
                }
            }
            let body = String::from_utf8_lossy(&cmd.body).into_owned();
            st.messages.push((topic.clone(), queue, body));
            let slot = st.next_offset.entry((topic, queue)).or_insert(1000);
            let offset = *slot;
            *slot += 1;
            let port: u32 = addr
                .rsplit(':')
                .next()
                .and_then(|p| p.parse().ok())
                .unwrap_or(0);
            let msg_id = format!("7F000001{port:08X}{:016X}", offset * 100);
            ok(
                vec![
                    ("msgId", msg_id),
                    ("queueId", queue.to_string()),
                    ("queueOffset", offset.to_string()),
                    ("MSG_REGION", "DefaultRegion".into()),
                    ("TRACE_ON", "false".into()),
                ],
                Vec::new(),
            )
        }
        HEART_BEAT => {
            if let Ok(hb) = json::parse(&cmd.body) {
                let client = hb.get("clientID").and_then(|c| c.as_str()).unwrap_or("");
                let groups: Vec<String> = hb
                    .get("consumerDataSet")
                    .and_then(|s| s.as_array())
                    .unwrap_or(&[])
                    .iter()
                    .filter_map(|c| c.get("groupName").and_then(|g| g.as_str()))
                    .map(str::to_string)
                    .collect();
                for g in groups {
                    st.consumers
                        .entry(g)
                        .or_default()
                        .insert(client.to_string());
                }
            }
            ok(Vec::new(), Vec::new())
        }
        GET_CONSUMER_LIST_BY_GROUP => {
            let group = get("consumerGroup", "consumerGroup").unwrap_or_default();
            let mut body = b"{\"consumerIdList\":[".to_vec();
            for (i, id) in st.consumers.get(&group).into_iter().flatten().enumerate() {
                if i > 0 {
                    body.push(b',');
                }
                json::write_str(&mut body, id);
            }
            body.extend_from_slice(b"]}");
            ok(Vec::new(), body)
        }
        QUERY_CONSUMER_OFFSET | GET_MIN_OFFSET | GET_MAX_OFFSET => {
            ok(vec![("offset", "0".to_string())], Vec::new())
        }
        UPDATE_CONSUMER_OFFSET | UNREGISTER_CLIENT => ok(Vec::new(), Vec::new()),
        PULL_MESSAGE => None,
        code => Some((
            REQUEST_CODE_NOT_SUPPORTED,
            Some(format!(
                "{name}: request type {code} not supported by the test broker"
            )),
            Vec::new(),
            Vec::new(),
        )),
    }
}

/// Number of GET_ROUTEINFO_BY_TOPIC requests the name server has answered.
fn route_lookups(ns: &mut rmq_namesrv::client::Client) -> i64 {
    stats(ns)
        .get("requests")
        .and_then(|r| r.get("105"))
        .and_then(|n| n.as_i64())
        .unwrap_or(0)
}

// ------------------------------------------------------------------------------------------
// Tests
// ------------------------------------------------------------------------------------------

#[test]
fn cpp_producer_sends_to_the_brokers_our_routes_name() {
    let python = python_or_skip!("cpp_producer_sends_to_the_brokers_our_routes_name");
    let server = TestServer::start();
    let mut ns = server.client();
    let a = TestBroker::start("broker-a");
    let b = TestBroker::start("broker-b");
    // Different queue counts per broker: a misparsed route would pick queues that do not exist.
    a.register(&mut ns, 1, &[("TopicInterop", 3)]);
    b.register(&mut ns, 1, &[("TopicInterop", 2)]);
    let lookups_before = route_lookups(&mut ns);

    let run = CppRun::spawn(
        &python,
        &[
            &server.addr,
            "produce",
            "TopicInterop",
            "10",
            "hello-from-cpp",
        ],
    );
    let (results, diag) = run.finish();

    assert_eq!(results.len(), 10, "one RESULT per send\n{diag}");
    for r in &results {
        assert_eq!(
            r.get("status").map(String::as_str),
            Some("OK"),
            "{r:?}\n{diag}"
        );
    }
    let mut got: Vec<(String, i32, String)> = a.messages();
    got.extend(b.messages());
    assert_eq!(
        got.len(),
        10,
        "every SEND_OK was a message a test broker stored\n{diag}"
    );
    for (t, q, body) in &a.messages() {
        assert_eq!(t, "TopicInterop");
        assert!(
            (0..3).contains(q),
            "broker-a has 3 queues, got queue {q} ({body})"
        );
    }
    for (t, q, _) in &b.messages() {
        assert_eq!(t, "TopicInterop");
        assert!((0..2).contains(q), "broker-b has 2 queues, got queue {q}");
    }
    // The C++ client rotates over all five queues of both brokers.
    assert!(
        !a.messages().is_empty() && !b.messages().is_empty(),
        "{got:?}"
    );
    let mut bodies: Vec<String> = got.into_iter().map(|(_, _, b)| b).collect();
    bodies.sort();
    let mut want: Vec<String> = (0..10).map(|i| format!("hello-from-cpp-{i}")).collect();
    want.sort();
    assert_eq!(bodies, want);
    // The offsets the brokers assigned came back through SendMessageResponseHeader.
    for r in &results {
        let off: i64 = r["offset"].parse().expect("offset");
        assert!(off >= 1000, "{r:?}");
    }
    // The sends were C++ requests, and the route came from this name server.
    let sends: Vec<Received> = [&a, &b]
        .iter()
        .flat_map(|br| [br.received(SEND_MESSAGE), br.received(SEND_MESSAGE_V2)])
        .flatten()
        .collect();
    assert_eq!(sends.len(), 10, "one SEND_MESSAGE(_V2) per message");
    assert!(sends.iter().all(|r| r.language == LANG_CPP));
    eprintln!("C++ client header version: {}", sends[0].version);
    assert!(
        route_lookups(&mut ns) > lookups_before,
        "the C++ client asked us for routes"
    );
}

#[test]
fn cpp_producer_gets_no_route_info_for_a_missing_topic_and_uses_tbw102_when_present() {
    let python = python_or_skip!(
        "cpp_producer_gets_no_route_info_for_a_missing_topic_and_uses_tbw102_when_present"
    );
    let server = TestServer::start();
    let mut ns = server.client();
    // A broker with autoCreateTopicEnable=false registers no TBW102.
    let a = TestBroker::start("broker-a");
    a.register(&mut ns, 1, &[("TopicInterop", 4)]);

    let run = CppRun::spawn(&python, &[&server.addr, "produce", "NoSuchTopic", "1", "x"]);
    let (results, diag) = run.finish();
    assert_eq!(results.len(), 1, "{diag}");
    let r = &results[0];
    assert_eq!(
        r.get("error").map(String::as_str),
        Some("ProducerSendSyncFailed"),
        "{r:?}\n{diag}"
    );
    assert!(
        r.get("message")
            .is_some_and(|m| m.contains("No_route_info")),
        "{r:?}\n{diag}"
    );
    assert!(a.messages().is_empty());

    // With autoCreateTopicEnable the broker registers TBW102; the client then sends a new
    // topic to the brokers serving TBW102 (our 17 for the topic is what triggers that).
    a.register(&mut ns, 2, &[("TopicInterop", 4), ("TBW102", 8)]);
    let run = CppRun::spawn(
        &python,
        &[&server.addr, "produce", "AutoCreated", "2", "auto"],
    );
    let (results, diag) = run.finish();
    assert_eq!(results.len(), 2, "{diag}");
    for r in &results {
        assert_eq!(
            r.get("status").map(String::as_str),
            Some("OK"),
            "{r:?}\n{diag}"
        );
    }
    let msgs = a.messages();
    assert_eq!(msgs.len(), 2);
    for (t, q, _) in &msgs {
        assert_eq!(t, "AutoCreated");
        // C++ caps the default topic's queues at 4.
        assert!((0..4).contains(q), "queue {q}");
    }
    let sends = [a.received(SEND_MESSAGE), a.received(SEND_MESSAGE_V2)].concat();
    assert_eq!(sends.len(), 2);
    for s in &sends {
        let default_topic = s.ext.get("defaultTopic").or_else(|| s.ext.get("c"));
        assert_eq!(default_topic.map(String::as_str), Some("TBW102"), "{s:?}");
    }
}

#[test]
fn cpp_push_consumer_resolves_topic_and_retry_topic_routes() {
    let python = python_or_skip!("cpp_push_consumer_resolves_topic_and_retry_topic_routes");
    let server = TestServer::start();
    let mut ns = server.client();
    let a = TestBroker::start("broker-a");
    let b = TestBroker::start("broker-b");
    let group = "GID_RMQ_NAMESRV_INTEROP";
    let retry = format!("%RETRY%{group}");
    a.register(&mut ns, 1, &[("TopicInterop", 3), (retry.as_str(), 1)]);
    b.register(&mut ns, 1, &[("TopicInterop", 2)]);

    let run = CppRun::spawn(&python, &[&server.addr, "consume", "TopicInterop", group]);
    // Rebalancing over the routes it got, the consumer asks each broker for the offset of
    // every queue it was told about: 3 + 2 queues of the topic, 1 of the retry topic.
    let seen_all = wait_until(Duration::from_secs(30), || {
        a.queues_asked(QUERY_CONSUMER_OFFSET, "TopicInterop") == BTreeSet::from([0, 1, 2])
            && b.queues_asked(QUERY_CONSUMER_OFFSET, "TopicInterop") == BTreeSet::from([0, 1])
            && a.queues_asked(QUERY_CONSUMER_OFFSET, &retry) == BTreeSet::from([0])
            && !a.received(PULL_MESSAGE).is_empty()
            && !b.received(PULL_MESSAGE).is_empty()
    });
    let diag = run.diagnostics();
    assert!(
        seen_all,
        "consumer did not reach every queue: a={:?}/{:?} b={:?}\n{diag}",
        a.queues_asked(QUERY_CONSUMER_OFFSET, "TopicInterop"),
        a.queues_asked(QUERY_CONSUMER_OFFSET, &retry),
        b.queues_asked(QUERY_CONSUMER_OFFSET, "TopicInterop"),
    );
    // No broker was asked about a queue the route does not have.
    assert!(a
        .queues_asked(PULL_MESSAGE, "TopicInterop")
        .is_subset(&BTreeSet::from([0, 1, 2])));
    assert!(b
        .queues_asked(PULL_MESSAGE, "TopicInterop")
        .is_subset(&BTreeSet::from([0, 1])));
    assert!(b.queues_asked(QUERY_CONSUMER_OFFSET, &retry).is_empty());
    assert!(a
        .received(HEART_BEAT)
        .iter()
        .all(|r| r.language == LANG_CPP));

    let (results, diag) = run.finish();
    assert!(results.iter().any(|r| r.contains_key("stopped")), "{diag}");
}

#[test]
fn cpp_style_route_request_gets_a_json_legacy_answer() {
    // Independent of the venv: the exact header bytes a C++ client sends (docs/protocol.md §2.2),
    // with its trailing newline, get a JSON (type 0) response with a legacy route body.
    let server = TestServer::start();
    let mut ns = server.client();
    let a = TestBroker::start("broker-a");
    a.register(&mut ns, 1, &[("TopicInterop", 4)]);
    let header = b"{\"code\":105,\"extFields\":{\"AccessKey\":\"\",\"OnsChannel\":\"\",\"Signature\":\"\",\"topic\":\"TopicInterop\"},\"flag\":0,\"language\":\"CPP\",\"opaque\":7,\"remark\":\"\",\"version\":333}\n";
    let mut frame = Vec::new();
    frame.extend_from_slice(&((4 + header.len()) as u32).to_be_bytes());
    frame.extend_from_slice(&(header.len() as u32).to_be_bytes());
    frame.extend_from_slice(header);
    let mut raw = server.client();
    raw.send_raw(&frame).expect("send");
    let resp = raw.read_response(7).expect("response");
    assert_eq!(resp.serialize_type, SerializeType::Json);
    assert_eq!(resp.code, 0);
    let body = String::from_utf8(resp.body.to_vec()).expect("utf8");
    assert!(
        body.contains(&format!("\"brokerAddrs\":{{0:\"{}\"}}", a.addr)),
        "legacy dialect for version 333: {body}"
    );
    assert!(route_lookups(&mut ns) >= 1);
}
