//! The daemon over real TCP: framing, both header serializations, oneway, unknown codes,
//! malformed input closing only the offending connection, idle close, backpressure, and the
//! binary's command line.

mod common;

use common::*;
use rmq_namesrv::remoting::codes::{request, response};
use rmq_namesrv::remoting::command::SerializeType;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::process::{Command, Stdio};
use std::time::Duration;

fn raw_frame(serialize_type: u8, header: &[u8], body: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&((4 + header.len() + body.len()) as u32).to_be_bytes());
    v.extend_from_slice(&(((serialize_type as u32) << 24) | header.len() as u32).to_be_bytes());
    v.extend_from_slice(header);
    v.extend_from_slice(body);
    v
}

/// Reads one whole frame off a raw socket: (serialize type, header bytes, body bytes).
fn read_raw_frame(s: &mut TcpStream) -> (u8, Vec<u8>, Vec<u8>) {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).expect("length");
    let len = u32::from_be_bytes(len) as usize;
    let mut rest = vec![0u8; len];
    s.read_exact(&mut rest).expect("frame");
    let word = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]);
    let header_len = (word & 0xFF_FFFF) as usize;
    (
        (word >> 24) as u8,
        rest[4..4 + header_len].to_vec(),
        rest[4 + header_len..].to_vec(),
    )
}

fn raw_connect(server: &TestServer) -> TcpStream {
    let s = TcpStream::connect(&server.addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s
}

fn assert_still_serving(server: &TestServer) {
    let mut c = server.client();
    let resp = c
        .request(request::GET_BROKER_CLUSTER_INFO, &[], b"")
        .expect("a well-behaved connection is still answered");
    assert_eq!(resp.code, response::SUCCESS);
}

fn closed(s: &mut TcpStream) -> bool {
    let mut buf = [0u8; 1024];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) => return e.kind() == std::io::ErrorKind::ConnectionReset,
        }
    }
}

#[test]
fn json_request_is_answered_in_json_with_opaque_echoed_and_response_flag() {
    let server = TestServer::start();
    let mut s = raw_connect(&server);
    let header = br#"{"code":106,"flag":0,"language":"JAVA","opaque":-7,"serializeTypeCurrentRPC":"JSON","version":479}"#;
    s.write_all(&raw_frame(0, header, b"")).unwrap();
    let (st, header, body) = read_raw_frame(&mut s);
    assert_eq!(st, 0);
    let h = rmq_namesrv::remoting::json::parse(&header).expect("JSON header");
    assert_eq!(h.get("opaque").and_then(|v| v.as_i64()), Some(-7));
    assert_eq!(h.get("flag").and_then(|v| v.as_i64()), Some(1));
    assert_eq!(h.get("code").and_then(|v| v.as_i64()), Some(0));
    assert_eq!(h.get("language").and_then(|v| v.as_str()), Some("JAVA"));
    assert_eq!(
        h.get("serializeTypeCurrentRPC").and_then(|v| v.as_str()),
        Some("JSON")
    );
    assert_eq!(body, br#"{"brokerAddrTable":{},"clusterAddrTable":{}}"#);
}

#[test]
fn rocketmq_request_is_answered_in_the_configured_type() {
    for (setting, expected) in [("JSON", 0u8), ("ROCKETMQ", 1u8)] {
        let server = TestServer::start_with(|c| {
            c.set("serializeType", setting);
        });
        let mut c = server.client();
        c.serialize_type = SerializeType::RocketMq;
        c.request(request::GET_BROKER_CLUSTER_INFO, &[], b"")
            .unwrap();
        let mut s = raw_connect(&server);
        // A binary request: code 106, JAVA, version 479, opaque 0x01020304, flag 0.
        let mut header = Vec::new();
        header.extend_from_slice(&106i16.to_be_bytes());
        header.push(0);
        header.extend_from_slice(&479i16.to_be_bytes());
        header.extend_from_slice(&0x0102_0304i32.to_be_bytes());
        header.extend_from_slice(&0i32.to_be_bytes());
        header.extend_from_slice(&0i32.to_be_bytes());
        header.extend_from_slice(&0i32.to_be_bytes());
        s.write_all(&raw_frame(1, &header, b"")).unwrap();
        let (st, header, _) = read_raw_frame(&mut s);
        assert_eq!(st, expected, "serializeType={setting}");
        if expected == 1 {
            assert_eq!(&header[5..9], &0x0102_0304i32.to_be_bytes());
            assert_eq!(&header[9..13], &1i32.to_be_bytes());
        } else {
            let h = rmq_namesrv::remoting::json::parse(&header).unwrap();
            assert_eq!(h.get("opaque").and_then(|v| v.as_i64()), Some(0x0102_0304));
        }
    }
}

#[test]
fn oneway_request_gets_no_reply() {
    let server = TestServer::start();
    let mut c = server.client();
    c.oneway(
        request::BROKER_HEARTBEAT,
        &[
            ("clusterName", "c"),
            ("brokerAddr", "a:1"),
            ("brokerName", "b"),
        ],
        b"",
    )
    .unwrap();
    let resp = c
        .request(request::GET_BROKER_CLUSTER_INFO, &[], b"")
        .unwrap();
    assert_eq!(resp.code, response::SUCCESS);
    let mut s = raw_connect(&server);
    let oneway = br#"{"code":106,"flag":2,"language":"JAVA","opaque":1,"version":479}"#;
    let twoway = br#"{"code":106,"flag":0,"language":"JAVA","opaque":2,"version":479}"#;
    s.write_all(&raw_frame(0, oneway, b"")).unwrap();
    s.write_all(&raw_frame(0, twoway, b"")).unwrap();
    let (_, header, _) = read_raw_frame(&mut s);
    let h = rmq_namesrv::remoting::json::parse(&header).unwrap();
    assert_eq!(h.get("opaque").and_then(|v| v.as_i64()), Some(2));
}

#[test]
fn unknown_code_is_answered_request_code_not_supported() {
    let server = TestServer::start();
    let mut c = server.client();
    let resp = c.request(9999, &[], b"").unwrap();
    assert_eq!(resp.code, response::REQUEST_CODE_NOT_SUPPORTED);
    assert_eq!(
        resp.remark.as_deref(),
        Some(" request type 9999 not supported")
    );
    // A broker-only code is unknown here too.
    let resp = c.request(305, &[], b"").unwrap();
    assert_eq!(resp.code, response::REQUEST_CODE_NOT_SUPPORTED);
}

#[test]
fn missing_required_field_is_an_error_naming_it() {
    let server = TestServer::start();
    let mut c = server.client();
    let resp = c
        .request(request::GET_ROUTEINFO_BY_TOPIC, &[], b"")
        .unwrap();
    assert_eq!(resp.code, response::SYSTEM_ERROR);
    assert!(resp.remark.unwrap_or_default().contains("topic"));
    let resp = c
        .request(
            request::REGISTER_BROKER,
            &[
                ("brokerName", "b"),
                ("clusterName", "c"),
                ("haServerAddr", "h:1"),
                ("brokerId", "0"),
            ],
            b"",
        )
        .unwrap();
    assert_eq!(resp.code, response::SYSTEM_ERROR);
    assert!(resp.remark.unwrap_or_default().contains("brokerAddr"));
    let resp = c
        .request(
            request::UNREGISTER_BROKER,
            &[
                ("brokerName", "b"),
                ("clusterName", "c"),
                ("brokerAddr", "h:1"),
                ("brokerId", "x"),
            ],
            b"",
        )
        .unwrap();
    assert_eq!(resp.code, response::SYSTEM_ERROR);
    assert!(resp.remark.unwrap_or_default().contains("brokerId"));
}

#[test]
fn oversized_length_closes_only_that_connection() {
    let server = TestServer::start_with(|c| c.frame_max_length = 1 << 20);
    let mut bad = raw_connect(&server);
    bad.write_all(&(2u32 << 20).to_be_bytes()).unwrap();
    bad.write_all(&[0u8; 64]).unwrap();
    assert!(closed(&mut bad));
    assert_still_serving(&server);
}

#[test]
fn header_length_larger_than_frame_closes_the_connection() {
    let server = TestServer::start();
    let mut bad = raw_connect(&server);
    let mut v = Vec::new();
    v.extend_from_slice(&10u32.to_be_bytes());
    v.extend_from_slice(&100u32.to_be_bytes());
    v.extend_from_slice(&[b'{'; 6]);
    bad.write_all(&v).unwrap();
    assert!(closed(&mut bad));
    assert_still_serving(&server);
}

#[test]
fn garbage_json_header_closes_the_connection() {
    let server = TestServer::start();
    let mut bad = raw_connect(&server);
    bad.write_all(&raw_frame(0, b"{\"code\":10", b"")).unwrap();
    assert!(closed(&mut bad));
    let mut bad = raw_connect(&server);
    bad.write_all(&raw_frame(7, b"{}", b"")).unwrap();
    assert!(closed(&mut bad));
    assert_still_serving(&server);
}

#[test]
fn truncated_frame_then_eof_closes_the_connection() {
    let server = TestServer::start();
    let mut bad = raw_connect(&server);
    let frame = raw_frame(0, br#"{"code":106,"flag":0,"opaque":1}"#, b"");
    bad.write_all(&frame[..frame.len() - 3]).unwrap();
    bad.shutdown(Shutdown::Write).unwrap();
    assert!(closed(&mut bad));
    assert_still_serving(&server);
}

#[test]
fn cpp_client_header_with_trailing_newline_is_understood() {
    let server = TestServer::start();
    let mut s = raw_connect(&server);
    let header = b"{\"code\":105,\"extFields\":{\"AccessKey\":\"\",\"OnsChannel\":\"\",\"Signature\":\"\",\"topic\":\"Nope\"},\"flag\":0,\"language\":\"CPP\",\"opaque\":1,\"remark\":\"\",\"version\":333}\n";
    s.write_all(&raw_frame(0, header, b"")).unwrap();
    let (st, header, _) = read_raw_frame(&mut s);
    assert_eq!(st, 0);
    let h = rmq_namesrv::remoting::json::parse(&header).unwrap();
    assert_eq!(h.get("code").and_then(|v| v.as_i64()), Some(17));
}

#[test]
fn idle_connection_is_closed_after_the_configured_time() {
    let server = TestServer::start_with(|c| c.server_channel_max_idle_time_seconds = 1);
    let mut idle = raw_connect(&server);
    idle.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    assert!(closed(&mut idle));
    assert_still_serving(&server);
}

#[test]
fn a_peer_that_does_not_read_is_paused_then_served_in_order() {
    let server = TestServer::start_with(|c| c.conn_write_high_water = 16 * 1024);
    let mut s = raw_connect(&server);
    let n = 5000;
    let mut all = Vec::new();
    for i in 0..n {
        let h = format!(r#"{{"code":106,"flag":0,"language":"JAVA","opaque":{i},"version":479}}"#);
        all.extend(raw_frame(0, h.as_bytes(), b""));
    }
    let writer = {
        let mut w = s.try_clone().unwrap();
        std::thread::spawn(move || w.write_all(&all).is_ok())
    };
    for i in 0..n {
        let (_, header, _) = read_raw_frame(&mut s);
        let h = rmq_namesrv::remoting::json::parse(&header).unwrap();
        assert_eq!(h.get("opaque").and_then(|v| v.as_i64()), Some(i));
    }
    assert!(writer.join().unwrap());
}

#[test]
fn a_peer_over_the_write_hard_cap_is_disconnected() {
    let server = TestServer::start_with(|c| {
        c.conn_write_high_water = 1 << 20;
        c.conn_write_hard_cap = 4096;
    });
    let mut s = raw_connect(&server);
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    // GET_NAMESRV_CONFIG answers ~2 KiB each: 20,000 of them are far more than the kernel's
    // socket buffers hold, so unread answers pile up in the server's write buffer.
    let mut all = Vec::new();
    for i in 0..20_000 {
        let h = format!(r#"{{"code":319,"flag":0,"language":"JAVA","opaque":{i},"version":479}}"#);
        all.extend(raw_frame(0, h.as_bytes(), b""));
    }
    let writer = {
        let mut w = s.try_clone().unwrap();
        std::thread::spawn(move || {
            let _ = w.write_all(&all);
        })
    };
    // Without reading, watch from another connection until the server drops us.
    let mut watcher = server.client();
    assert!(wait_until(Duration::from_secs(30), || stat(
        &mut watcher,
        "connections"
    ) == 1));
    assert!(closed(&mut s));
    writer.join().unwrap();
    assert_still_serving(&server);
}

fn binary() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rmq-namesrv"))
}

#[test]
fn binary_prints_the_bound_address_and_serves() {
    let dir = TempDir::new("bin");
    let kv = dir.path().join("kv.json");
    let mut child = binary()
        .args([
            "--listenPort=0",
            "--bindAddress=127.0.0.1",
            "--logPath=",
            &format!("--kvConfigPath={}", kv.display()),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let mut stdout = child.stdout.take().unwrap();
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while stdout.read(&mut byte).unwrap_or(0) == 1 && byte[0] != b'\n' {
        line.push(byte[0]);
    }
    let line = String::from_utf8(line).unwrap();
    let addr = line
        .strip_prefix("rmq-namesrv listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_string();
    let mut c = rmq_namesrv::client::Client::connect(&addr, Duration::from_secs(5)).unwrap();
    let resp = c.request(request::GET_NAMESRV_CONFIG, &[], b"").unwrap();
    assert_eq!(resp.code, 0);
    let text = String::from_utf8(resp.body.to_vec()).unwrap();
    // Started with listenPort=0, it reports the port actually bound (as Java does).
    let port = addr.rsplit(':').next().unwrap();
    assert!(text.contains(&format!("listenPort={port}\n")), "{text}");
    assert!(text.contains("scanNotActiveBrokerInterval=5000"));
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn binary_prints_config_help_and_version() {
    let out = binary().args(["-p", "--listenPort=1234"]).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.lines().any(|l| l == "listenPort=1234"));
    assert!(text.lines().any(|l| l == "orderMessageEnable=false"));
    let out = binary().arg("--version").output().unwrap();
    assert!(String::from_utf8(out.stdout)
        .unwrap()
        .starts_with("rmq-namesrv "));
    let out = binary().arg("-h").output().unwrap();
    assert!(String::from_utf8(out.stdout).unwrap().contains("-c"));
    let out = binary().arg("--noSuchFlag").output().unwrap();
    assert!(!out.status.success());
}

#[test]
fn connections_beyond_max_connections_are_closed_at_once() {
    let server = TestServer::start_with(|c| c.max_connections = 2);
    let mut first = server.client();
    let _second = server.client();
    let mut third = raw_connect(&server);
    assert!(closed(&mut third));
    assert_eq!(
        first
            .request(request::GET_BROKER_CLUSTER_INFO, &[], b"")
            .unwrap()
            .code,
        response::SUCCESS
    );
}
