//! Large topic lists answered from the cache are queued shared behind their headers: peers
//! that ask for many and never read them are still held to the buffer budget (each queued
//! body counts whole per connection holding it) and closed, and the budget comes back; peers
//! that read them are written a bounded share per loop turn, all of them together.

mod common;

use common::*;
use rmq_namesrv::remoting::codes::request;
use std::io::Write;
use std::net::TcpStream;
use std::thread;
use std::time::Duration;

/// What the server's write line writes per turn to all connections together
/// (src/event_loop/ctx.rs), and a small reply's size (written whatever the turn wrote).
const TURN_WRITE_MAX: i64 = 256 * 1024;
const SMALL_REPLY: i64 = 64 * 1024;

/// One broker of `n` topics: the all-topic list is about 10 bytes a topic.
fn registered(n: usize, server: &TestServer) -> rmq_namesrv::client::Client {
    let topics: Vec<_> = (0..n).map(|i| topic(&format!("T{i:06}"), 4, 6)).collect();
    let mut admin = server.client();
    let broker = Broker::new("c", "b", "10.0.0.1:10911", 0);
    assert_eq!(
        register(&mut admin, &broker, &body_with(1, &topics)).code,
        0
    );
    admin
}

#[test]
fn peers_that_never_read_shared_topic_lists_are_closed_and_the_budget_returns() {
    let server = TestServer::start_with(|c| c.max_buffered_bytes = 4 << 20);
    // 30,000 topics: a 300 KB list, over the size answered inline.
    let mut admin = registered(30_000, &server);
    let asks: Vec<u8> = (0..200)
        .flat_map(|i| request_frame(request::GET_ALL_TOPIC_LIST_FROM_NAMESERVER, i, &[], b""))
        .collect();
    let peers: Vec<TcpStream> = (0..8)
        .map(|_| {
            let mut s = TcpStream::connect(&server.addr).expect("connect");
            s.set_write_timeout(Some(Duration::from_secs(2))).unwrap();
            let _ = s.write_all(&asks);
            s
        })
        .collect();
    assert!(wait_until(Duration::from_secs(30), || {
        stat(&mut admin, "closedOverBudget") > 0
    }));
    assert!(stat(&mut admin, "sharedReplyBytes") > 300_000);
    drop(peers);
    assert!(
        wait_until(Duration::from_secs(10), || stat(
            &mut admin,
            "bufferedBytes"
        ) < 1 << 20),
        "{} bytes still buffered",
        stat(&mut admin, "bufferedBytes")
    );
    assert!(route_data(&mut admin, "T000001").is_some());
}

#[test]
fn large_replies_to_many_readers_are_written_a_bounded_share_per_turn() {
    let server = TestServer::start();
    // A 1 MB list: before, each reader's flush wrote up to 1 MiB of it in the same turn.
    let mut admin = registered(100_000, &server);
    let readers: Vec<_> = (0..4)
        .map(|_| {
            let mut c = server.client();
            thread::spawn(move || {
                for _ in 0..3 {
                    let resp = (c.request(request::GET_ALL_TOPIC_LIST_FROM_NAMESERVER, &[], b""))
                        .expect("topic list");
                    assert_eq!(resp.code, 0);
                    assert!(resp.body.len() > 1_000_000, "{}", resp.body.len());
                }
            })
        })
        .collect();
    // Small replies go on meanwhile.
    for _ in 0..20 {
        assert!(route_data(&mut admin, "T000001").is_some());
    }
    for r in readers {
        r.join().expect("every reader got its lists whole");
    }
    assert!(stat(&mut admin, "sharedReplyBytes") > 12_000_000);
    let most = stat(&mut admin, "maxTurnBytesOut");
    assert!(
        (1..=TURN_WRITE_MAX + SMALL_REPLY).contains(&most),
        "one loop turn wrote {most} bytes"
    );
}
