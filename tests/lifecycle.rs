//! The server's start and stop: the port it reports, the error a busy port gives, and a stop
//! that answers what it has read before it returns.

mod common;

use common::*;
use rmq_namesrv::remoting::codes::{request, response};
use rmq_namesrv::remoting::command::RemotingCommand;
use rmq_namesrv::route::model;
use rmq_namesrv::server::StartError;
use std::io::Read;
use std::net::TcpStream;
use std::time::Duration;

#[test]
fn get_namesrv_config_reports_the_port_actually_bound() {
    let server = TestServer::start_with(|c| c.listen_port = 0);
    let port = server.handle.local_addr().port();
    assert_ne!(port, 0);
    let mut c = server.client();
    let resp = c.request(request::GET_NAMESRV_CONFIG, &[], b"").unwrap();
    assert_eq!(resp.code, response::SUCCESS);
    let text = String::from_utf8(resp.body.to_vec()).unwrap();
    assert!(
        text.lines().any(|l| l == format!("listenPort={port}")),
        "{text}"
    );
}

#[test]
fn a_busy_port_is_a_bind_error_that_names_the_address() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let dir = TempDir::new("busy-port");
    let mut config = test_config(dir.path());
    config.listen_port = port;
    match start(config) {
        Err(e @ StartError::Bind { .. }) => assert_eq!(
            e.to_string(),
            format!("cannot listen on 127.0.0.1:{port}: Address already in use")
        ),
        Err(e) => panic!("expected a bind error, got {e}"),
        Ok(_) => panic!("bound a port already taken"),
    }
}

#[cfg(not(feature = "tls"))]
#[test]
fn a_tls_mode_in_a_build_without_tls_is_a_start_error_naming_the_key_and_the_build() {
    let dir = TempDir::new("no-tls");
    let mut config = test_config(dir.path());
    config.tls_server_mode = "enforcing".into();
    match start(config) {
        Err(e @ StartError::Tls(_)) => {
            let text = e.to_string();
            assert!(text.contains("tls.server.mode=enforcing"), "{text}");
            assert!(
                text.contains("cargo build --release --features tls"),
                "{text}"
            );
        }
        Err(e) => panic!("expected a TLS start error, got {e}"),
        Ok(_) => panic!("started with TLS asked of a build without it"),
    }
}

/// Everything a connection receives until the server closes it, cut into responses; panics on
/// a partial frame (a reply cut short by the stop).
fn responses_until_closed(s: &mut TcpStream) -> Vec<RemotingCommand> {
    let mut got = Vec::new();
    s.read_to_end(&mut got).expect("a clean close, not a reset");
    let mut buf = bytes::BytesMut::from(&got[..]);
    let mut out = Vec::new();
    while let Some(f) = rmq_namesrv::remoting::frame::next_frame(&mut buf, 64 << 20).unwrap() {
        out.push(RemotingCommand::decode(f, &Default::default()).unwrap());
    }
    assert!(
        buf.is_empty(),
        "a reply was cut short: {} bytes left",
        buf.len()
    );
    out
}

#[test]
fn a_stop_answers_the_registrations_it_queued_and_closes_every_connection_cleanly() {
    let server = TestServer::start_with(|c| c.registration_budget_per_iteration = 1);
    let topics: Vec<_> = (0..2000)
        .map(|i| topic(&format!("Stop{i}"), 4, 6))
        .collect();
    let mut bytes = Vec::new();
    model::encode_register_body_json(&body_with(1, &topics), &mut bytes);
    let crc = (rmq_namesrv::checksum::crc32(&bytes) & 0x7FFF_FFFF).to_string();
    let mut conns: Vec<TcpStream> = Vec::new();
    for i in 0..8 {
        let name = format!("stop-{i}");
        let addr = format!("10.8.0.{i}:10911");
        let ext = [
            ("brokerName", name.as_str()),
            ("brokerAddr", addr.as_str()),
            ("clusterName", "stop"),
            ("haServerAddr", "10.8.0.1:10912"),
            ("brokerId", "0"),
            ("bodyCrc32", crc.as_str()),
        ];
        let mut s = TcpStream::connect(&server.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        std::io::Write::write_all(
            &mut s,
            &request_frame(request::REGISTER_BROKER, 1, &ext, &bytes),
        )
        .unwrap();
        conns.push(s);
    }
    let mut watcher = server.client();
    assert!(wait_until(Duration::from_secs(30), || stat(
        &mut watcher,
        "registrations"
    ) >= 1));
    let addr = server.addr.clone();
    let TestServer { handle, dir, .. } = server;
    handle.stop().unwrap();
    drop(dir);
    assert!(TcpStream::connect(&addr).is_err(), "still accepting");
    // Each peer got its answer whole, or (not read before the stop) nothing at all.
    let mut answered = 0;
    for s in conns.iter_mut() {
        let responses = responses_until_closed(s);
        assert!(responses.len() <= 1);
        for r in responses {
            assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
            answered += 1;
        }
    }
    assert!(answered >= 1);
}
