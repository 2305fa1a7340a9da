//! Large topic lists answered from the cache are queued shared behind their headers: peers
//! that ask for many and never read them are still held to the buffer budget (each queued
//! body counts whole per connection holding it) and closed, and the budget comes back.

mod common;

use common::*;
use rmq_namesrv::remoting::codes::request;
use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

#[test]
fn peers_that_never_read_shared_topic_lists_are_closed_and_the_budget_returns() {
    let server = TestServer::start_with(|c| c.max_buffered_bytes = 4 << 20);
    // 30,000 topics: a 300 KB list, over the size answered inline.
    let topics: Vec<_> = (0..30_000)
        .map(|i| topic(&format!("T{i:06}"), 4, 6))
        .collect();
    let mut admin = server.client();
    let broker = Broker::new("c", "b", "10.0.0.1:10911", 0);
    assert_eq!(
        register(&mut admin, &broker, &body_with(1, &topics)).code,
        0
    );
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
