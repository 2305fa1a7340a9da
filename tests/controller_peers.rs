//! The peer code (40016) on the real server's controller port: routed to the peer link, never
//! to the controller; on a single node nobody is a member, so every handshake is refused and a
//! peer payload without one closes the connection. The link between several nodes is tested
//! with loops of its own (`server::controller_port::peers` unit tests).
#![cfg(feature = "controller")]

mod common;
mod controller_net;

use controller_net::ControllerServer;
use rmq_namesrv::remoting::command::{
    encode_frame, DecodeLimits, Header, RemotingCommand, SerializeType,
};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// The controller peers' private request code (docs/controller.md, Peers).
const PEER_CODE: i32 = 40_016;

fn frame(flag: i32, ext: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let header = Header {
        code: PEER_CODE,
        language: "RUST",
        version: 0,
        opaque: 7,
        flag,
        remark: None,
    };
    let mut out = Vec::new();
    encode_frame(
        &mut out,
        SerializeType::Json,
        &header,
        Some(ext.iter().copied()),
        body,
    );
    out
}

fn connect(addr: &str) -> TcpStream {
    let s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

/// The next frame, or None once the server closed the connection.
fn read_cmd(s: &mut TcpStream) -> Option<RemotingCommand> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).ok()?;
    let mut rest = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut rest).ok()?;
    Some(RemotingCommand::decode(rest.into(), &DecodeLimits::default()).expect("a frame"))
}

#[test]
fn a_single_node_refuses_every_peer_handshake_and_closes() {
    let server = ControllerServer::start(&[]);
    let mut s = connect(&server.controller);
    let handshake = [
        ("kind", "handshake"),
        ("group", "group1"),
        ("nodeId", "2"),
        ("addr", "127.0.0.1:1"),
    ];
    s.write_all(&frame(0, &handshake, b"")).unwrap();
    let answer = read_cmd(&mut s).expect("a refusal");
    assert!(answer.is_response());
    assert_eq!(answer.code, 1);
    let remark = answer.remark.unwrap_or_default();
    assert!(remark.contains("not another member"), "{remark}");
    assert!(read_cmd(&mut s).is_none(), "closed after the refusal");
    // The controller itself still answers.
    let resp = server
        .controller_client()
        .request(1005, &[], b"")
        .expect("1005");
    assert_eq!(resp.code, 0);
}

#[test]
fn a_peer_payload_without_a_handshake_closes_the_connection() {
    let server = ControllerServer::start(&[]);
    let mut s = connect(&server.controller);
    // Oneway, as peers' payloads are: no answer, only the close.
    s.write_all(&frame(2, &[], b"not a raft message")).unwrap();
    assert!(read_cmd(&mut s).is_none());
    let resp = server
        .controller_client()
        .request(1005, &[], b"")
        .expect("1005");
    assert_eq!(resp.code, 0);
}
