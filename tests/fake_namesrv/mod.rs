//! A tiny canned-response name server on std::net, standing in for name servers that are not
//! rmq-namesrv: one that does not know the stats extension (answers REQUEST_CODE_NOT_SUPPORTED
//! like any Java name server would) and one that accepts connections but never answers.
#![allow(dead_code)]

use bytes::Bytes;
use rmq_namesrv::remoting::codes::{request, response, version, FLAG_RESPONSE};
use rmq_namesrv::remoting::command::{encode_frame, DecodeLimits, Header, RemotingCommand};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Behaviour {
    /// Answers 106 with an empty ClusterInfo, 105 with TOPIC_NOT_EXIST, 206 with an empty
    /// topic list, everything else (the stats extension included) with code 3.
    NoStats,
    /// Reads requests and never answers (a hung server: callers time out).
    Silent,
}

pub struct FakeNamesrv {
    pub addr: String,
    /// Requests answered with code 0 (so tests can tell which server served a call).
    pub served: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

fn reply(cmd: &RemotingCommand, code: i32, remark: Option<&str>, body: &[u8]) -> Vec<u8> {
    let header = Header {
        code,
        language: "JAVA",
        version: version::CURRENT,
        opaque: cmd.opaque,
        flag: FLAG_RESPONSE,
        remark,
    };
    let mut out = Vec::new();
    encode_frame(
        &mut out,
        cmd.serialize_type,
        &header,
        None::<[(&str, &str); 0]>,
        body,
    );
    out
}

fn canned(cmd: &RemotingCommand) -> (i32, Option<String>, &'static [u8]) {
    match cmd.code {
        request::GET_BROKER_CLUSTER_INFO => (
            response::SUCCESS,
            None,
            b"{\"brokerAddrTable\":{},\"clusterAddrTable\":{}}",
        ),
        request::GET_ALL_TOPIC_LIST_FROM_NAMESERVER => {
            (response::SUCCESS, None, b"{\"topicList\":[]}")
        }
        request::GET_ROUTEINFO_BY_TOPIC => (
            response::TOPIC_NOT_EXIST,
            Some("No topic route info in name server for the topic".into()),
            b"",
        ),
        code => (
            response::REQUEST_CODE_NOT_SUPPORTED,
            Some(format!(" request type {code} not supported")),
            b"",
        ),
    }
}

fn serve(mut stream: TcpStream, behaviour: Behaviour, served: Arc<AtomicUsize>) {
    loop {
        let mut len = [0u8; 4];
        if stream.read_exact(&mut len).is_err() {
            return;
        }
        let mut frame = vec![0u8; u32::from_be_bytes(len) as usize];
        if stream.read_exact(&mut frame).is_err() {
            return;
        }
        let Ok(cmd) = RemotingCommand::decode(Bytes::from(frame), &DecodeLimits::default()) else {
            return;
        };
        if behaviour == Behaviour::Silent || cmd.is_oneway() {
            continue;
        }
        let (code, remark, body) = canned(&cmd);
        if code == response::SUCCESS {
            served.fetch_add(1, Ordering::SeqCst);
        }
        if stream
            .write_all(&reply(&cmd, code, remark.as_deref(), body))
            .is_err()
        {
            return;
        }
    }
}

impl FakeNamesrv {
    pub fn start(behaviour: Behaviour) -> FakeNamesrv {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind fake name server");
        let addr = listener.local_addr().expect("fake addr").to_string();
        let stop = Arc::new(AtomicBool::new(false));
        let served = Arc::new(AtomicUsize::new(0));
        let (stop2, served2) = (stop.clone(), served.clone());
        thread::spawn(move || {
            for stream in listener.incoming() {
                if stop2.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(stream) = stream else { continue };
                let served = served2.clone();
                thread::spawn(move || serve(stream, behaviour, served));
            }
        });
        FakeNamesrv { addr, served, stop }
    }

    pub fn served(&self) -> usize {
        self.served.load(Ordering::SeqCst)
    }
}

impl Drop for FakeNamesrv {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(&self.addr);
    }
}

/// An address with nothing listening: bind an ephemeral port, then free it.
pub fn dead_addr() -> String {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().expect("addr").to_string();
    drop(l);
    addr
}
