//! Shared by the controller_* tests: a controller node driven the way the event loop will
//! drive it (a mio Poll woken by the log writer, time passed in by hand), and frames built
//! from JSON text so that expected bytes come from the reference, not from our encoder.
#![allow(dead_code)]

use bytes::Bytes;
use mio::{Events, Poll, Token, Waker};
use rmq_namesrv::controller::{ConnRef, Controller, ControllerConfig, Reply, Response, Wake};
use rmq_namesrv::remoting::command::{DecodeLimits, RemotingCommand, SerializeType};
#[path = "../support/mod.rs"]
mod support;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
pub use support::TempDir;

/// A whole frame (length prefix, JSON header type word, header, body) from header text.
pub fn frame(header: &str, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&((4 + header.len() + body.len()) as u32).to_be_bytes());
    out.extend_from_slice(&(header.len() as u32).to_be_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(body);
    out
}

/// A Java broker's request header: `{"code":..,"extFields":{..},"flag":..,"language":"JAVA",...}`.
pub fn request_header(code: i32, opaque: i32, flag: i32, ext: &[(&str, &str)]) -> String {
    let fields: Vec<String> = ext
        .iter()
        .map(|(k, v)| format!("\"{k}\":\"{v}\""))
        .collect();
    format!(
        "{{\"code\":{code},\"extFields\":{{{}}},\"flag\":{flag},\"language\":\"JAVA\",\"opaque\":{opaque},\"serializeTypeCurrentRPC\":\"JSON\",\"version\":479}}",
        fields.join(",")
    )
}

pub fn decode(frame: &[u8]) -> RemotingCommand {
    RemotingCommand::decode(
        Bytes::copy_from_slice(&frame[4..]),
        &DecodeLimits::default(),
    )
    .expect("test frames decode")
}

/// Header text and body of a response frame (checking its two length words).
pub fn split(frame: &[u8]) -> (String, Vec<u8>) {
    let total = u32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]) as usize;
    assert_eq!(total + 4, frame.len(), "length prefix");
    let header_len =
        (u32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]) & 0xFF_FFFF) as usize;
    (
        String::from_utf8(frame[8..8 + header_len].to_vec()).expect("JSON header"),
        frame[8 + header_len..].to_vec(),
    )
}

pub const WAKE: Token = Token(7);

/// The value of one ext field of a controller answer.
pub trait ExtValue {
    fn ext_value(&self, key: &str) -> Option<&str>;
}

impl ExtValue for Response {
    fn ext_value(&self, key: &str) -> Option<&str> {
        let fields = self.ext.as_ref()?;
        fields
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// The controller's log writer wakes the test's poll.
pub struct PollWaker(Waker);

impl Wake for PollWaker {
    fn wake(&self) {
        self.0.wake().expect("wake the poll");
    }
}

/// One controller node over a store directory.
pub struct Node {
    pub poll: Poll,
    waker: Arc<PollWaker>,
    pub controller: Option<Controller<i32>>,
    pub dir: PathBuf,
    pub settings: Vec<(String, String)>,
    pub now: u64,
}

pub fn config(dir: &Path, extra: &[(String, String)]) -> ControllerConfig {
    let mut pairs: Vec<(&str, String)> = vec![
        ("controllerDLegerGroup", "group1".into()),
        ("controllerDLegerPeers", "n0-127.0.0.1:9878".into()),
        ("controllerDLegerSelfId", "n0".into()),
        ("controllerStorePath", dir.to_string_lossy().into_owned()),
    ];
    pairs.extend(extra.iter().map(|(k, v)| (k.as_str(), v.clone())));
    let borrowed: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (*k, v.as_str())).collect();
    config_from_pairs(&borrowed).expect("test config")
}

/// A config from `pairs` (the last of a repeated key wins), other keys at their defaults.
pub fn config_from_pairs(pairs: &[(&str, &str)]) -> Result<ControllerConfig, String> {
    ControllerConfig::from_lookup(&|key| {
        let last = pairs.iter().rev().find(|(k, _)| *k == key);
        last.map(|(_, v)| (*v).to_owned())
    })
}

impl Node {
    pub fn open(dir: &TempDir, extra: &[(&str, &str)]) -> Node {
        Node::open_at(dir.path(), extra)
    }

    /// As [`Node::open`] over a directory the caller keeps (a crash test's child process).
    pub fn open_at(dir: &Path, extra: &[(&str, &str)]) -> Node {
        let poll = Poll::new().expect("poll");
        let waker = Arc::new(PollWaker(Waker::new(poll.registry(), WAKE).expect("waker")));
        let mut node = Node {
            poll,
            waker,
            controller: None,
            dir: dir.to_path_buf(),
            settings: extra
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            now: 1_000_000,
        };
        node.start();
        node
    }

    fn start(&mut self) {
        let config = config(&self.dir, &self.settings);
        self.controller = Some(
            Controller::open(config, Some(self.waker.clone()), self.now).expect("controller opens"),
        );
    }

    pub fn c(&mut self) -> &mut Controller<i32> {
        self.controller.as_mut().expect("running")
    }

    /// Stops (waiting for the log writer) and starts again on the same store.
    pub fn restart(&mut self) {
        if let Some(c) = self.controller.take() {
            let replies = c.shutdown();
            assert!(
                replies.is_empty(),
                "nothing in flight at restart: {replies:?}"
            );
        }
        self.start();
    }

    /// Blocks on the poll until the writer wakes it, then lets the controller pick up the
    /// completions, until `done` holds or 10 s pass.
    pub fn drive_until(
        &mut self,
        out: &mut Vec<Reply<i32>>,
        done: impl Fn(&[Reply<i32>], usize) -> bool,
    ) {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut events = Events::with_capacity(8);
        while !done(out, self.c().pending_requests()) {
            assert!(Instant::now() < deadline, "no completion within 10 s");
            self.poll
                .poll(&mut events, Some(Duration::from_millis(200)))
                .expect("poll");
            let now = self.now;
            self.c().on_log_completions(now, out);
        }
    }

    /// Sends one request frame; returns the response frame (None for oneway requests).
    pub fn request(&mut self, frame: &[u8]) -> Option<Vec<u8>> {
        let cmd = decode(frame);
        let mut out = Vec::new();
        let now = self.now;
        self.c()
            .handle_from(cmd.opaque, &cmd, Some(ConnRef(1)), None, now, &mut out);
        if !cmd.is_oneway() {
            self.drive_until(&mut out, |out, pending| !out.is_empty() || pending == 0);
        } else {
            self.drive_until(&mut out, |_, pending| pending == 0);
        }
        assert!(out.len() <= 1, "one answer per request: {out:?}");
        out.pop().map(|reply| {
            assert_eq!(reply.ticket, cmd.opaque);
            let mut bytes = Vec::new();
            reply
                .response
                .encode(cmd.opaque, SerializeType::Json, &mut bytes);
            bytes
        })
    }

    /// A request from ext fields; returns (header text, body).
    pub fn call(&mut self, code: i32, ext: &[(&str, &str)], body: &[u8]) -> (String, Vec<u8>) {
        let response = self
            .request(&frame(&request_header(code, 9, 0, ext), body))
            .expect("an answer");
        split(&response)
    }

    /// A Java broker's oneway heartbeat (with its own timeout, epoch and offset) on `conn`.
    pub fn heartbeat(
        &mut self,
        conn: u64,
        name: &str,
        id: i64,
        timeout_ms: i64,
        epoch: i32,
        offset: i64,
    ) {
        let id_text = id.to_string();
        let timeout = timeout_ms.to_string();
        let epoch = epoch.to_string();
        let offset = offset.to_string();
        let addr = format!("127.0.0.1:{}", 30900 + id);
        let header = request_header(
            904,
            1,
            2,
            &[
                ("clusterName", "DefaultCluster"),
                ("brokerAddr", &addr),
                ("brokerName", name),
                ("brokerId", &id_text),
                ("epoch", &epoch),
                ("maxOffset", &offset),
                ("confirmOffset", "0"),
                ("heartbeatTimeoutMills", &timeout),
                ("electionPriority", "0"),
            ],
        );
        let cmd = decode(&frame(&header, b""));
        let mut out = Vec::new();
        let now = self.now;
        self.c()
            .handle_from(1, &cmd, Some(ConnRef(conn)), None, now, &mut out);
        assert!(out.is_empty());
    }

    /// 1012 + 1013 + 1003 as a Java broker does it; returns the id it got.
    pub fn register(&mut self, name: &str, port: u16) -> i64 {
        let (header, _) = self.call(
            1012,
            &[("clusterName", "DefaultCluster"), ("brokerName", name)],
            b"",
        );
        let id: i64 = header
            .split("\"nextBrokerId\":\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .and_then(|n| n.parse().ok())
            .expect("nextBrokerId");
        let addr = format!("127.0.0.1:{port}");
        let code = format!("{addr};1700000000000");
        let id_text = id.to_string();
        let (header, _) = self.call(
            1013,
            &[
                ("clusterName", "DefaultCluster"),
                ("brokerName", name),
                ("appliedBrokerId", &id_text),
                ("registerCheckCode", &code),
            ],
            b"",
        );
        assert!(header.starts_with("{\"code\":0,"), "{header}");
        let (header, _) = self.call(
            1003,
            &[
                ("clusterName", "DefaultCluster"),
                ("brokerName", name),
                ("brokerId", &id_text),
                ("brokerAddress", &addr),
            ],
            b"",
        );
        assert!(header.starts_with("{\"code\":0,"), "{header}");
        id
    }

    /// A broker electing itself (1002 from a broker); returns the response code.
    pub fn self_elect(&mut self, name: &str, id: i64) -> i32 {
        let id_text = id.to_string();
        let (header, _) = self.call(
            1002,
            &[
                ("clusterName", "DefaultCluster"),
                ("brokerName", name),
                ("brokerId", &id_text),
                ("designateElect", "false"),
            ],
            b"",
        );
        code_of(&header)
    }
}

pub fn code_of(header: &str) -> i32 {
    header
        .strip_prefix("{\"code\":")
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .expect("a code")
}
