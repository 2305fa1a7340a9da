//! Large hostile bodies over TCP: a frame of many MiB is read into one buffer of its announced
//! length once a sixteenth of it is in (not grown by copying all it holds again and again, each
//! copy a stall of the loop), and its bodies are decoded by a worker below the loop's priority;
//! a good client on its own connection is served meanwhile; a 217 body's members other than
//! its queues are stepped over, not built.

#[path = "common/child.rs"]
mod child;
mod common;

use child::ServerProcess;
use common::*;
use rmq_namesrv::remoting::codes::{request, response};
use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

#[test]
fn a_large_frame_is_read_into_one_buffer_of_its_length_and_answered() {
    let server = TestServer::start();
    let mut admin = server.client();
    let mut good = server.client();
    let b = Broker::new("AB", "ab-good", "10.4.0.1:10911", 0);
    assert_eq!(
        register(&mut good, &b, &body_with(1, &[topic("Good", 8, 6)])).code,
        0
    );
    // A TopicRouteData padded with 12 MiB of whitespace (a 217 body: decoded off the loop).
    let mut body = br#"{"brokerDatas":[],"queueDatas":[]}"#.to_vec();
    body.resize(12 << 20, b' ');
    let frame = request_frame(
        request::REGISTER_TOPIC_IN_NAMESRV,
        7,
        &[("topic", "Padded")],
        &body,
    );
    let mut s = TcpStream::connect(&server.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let before = stat(&mut admin, "bytesIn");
    let part = 3 << 20;
    s.write_all(&frame[..part]).unwrap();
    assert!(wait_until(Duration::from_secs(30), || {
        stat(&mut admin, "bytesIn") - before >= part as i64
    }));
    // Grown in steps, the buffer would hold what came and at most one read budget more.
    let buffered = stat(&mut admin, "bufferedBytes");
    assert!(
        buffered >= frame.len() as i64,
        "{buffered} bytes buffered for a {}-byte frame",
        frame.len()
    );
    assert_eq!(route(&mut good, "Good").code, response::SUCCESS);
    s.write_all(&frame[part..]).unwrap();
    let answer = read_command(&mut s);
    assert_eq!((answer.code, answer.opaque), (response::SUCCESS, 7));
    assert!(wait_until(Duration::from_secs(10), || {
        stat(&mut admin, "bufferedBytes") < 1 << 20
    }));
}

/// The peak resident size (VmHWM) of a running process, in KiB.
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let line = status.lines().find_map(|l| l.strip_prefix("VmHWM:"));
    let kib = line.and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok());
    kib.expect("VmHWM")
}

#[cfg(target_os = "linux")]
#[test]
fn a_topic_route_body_nested_deep_everywhere_is_stepped_over_without_building_it() {
    let dir = TempDir::new("attack-217");
    let server = ServerProcess::spawn(&[
        "--listenPort=0".into(),
        "--bindAddress=127.0.0.1".into(),
        "--logPath=".into(),
        format!("--kvConfigPath={}", dir.join("kv.json").display()),
        format!("--configStorePath={}", dir.join("ns.properties").display()),
    ]);
    let mut c = rmq_namesrv::client::Client::connect(&server.addr, Duration::from_secs(60))
        .expect("connect");
    let small =
        br#"{"queueDatas":[{"brokerName":"b","perm":6,"readQueueNums":1,"writeQueueNums":1}]}"#;
    let ok = c.request(
        request::REGISTER_TOPIC_IN_NAMESRV,
        &[("topic", "Small")],
        small,
    );
    assert_eq!(ok.expect("217 answer").code, response::SUCCESS);
    let idle = peak_rss_kib(server.pid());
    // 15.5 MiB of empty arrays nested 60 deep: 8 million values for a document to hold.
    let nest = format!("{}{}", "[".repeat(60), "]".repeat(60));
    let mut body = br#"{"brokerDatas":[],"queueDatas":[],"x":["#.to_vec();
    while body.len() < (31 << 19) - 200 {
        body.extend_from_slice(nest.as_bytes());
        body.push(b',');
    }
    body.extend_from_slice(br#"[]]}"#);
    let answer = c.request(
        request::REGISTER_TOPIC_IN_NAMESRV,
        &[("topic", "Deep")],
        &body,
    );
    assert_eq!(answer.expect("217 answer").code, response::SUCCESS);
    // The frame is held once (15.5 MiB); a document of it was 128 MiB more (138 MiB grown).
    let grown_mib = peak_rss_kib(server.pid()).saturating_sub(idle) / 1024;
    assert!(grown_mib < 48, "peak RSS grew by {grown_mib} MiB");
}
