//! Election notifications (1008) to addresses that swallow connection attempts must not delay
//! another set's: a hostile set of 256 ids, each registered at a listener whose accept queue
//! is full (Linux drops the SYN, so a connect waits for its whole timeout), is elected again;
//! right after, a real set fails over and its new master must get its 1008 at once.
#![cfg(feature = "controller")]

mod common;
mod controller_net;

use common::{wait_until, RawCalls};
use controller_net::{BrokerOptions, ControllerServer, StandInBroker, CLUSTER};
use rmq_namesrv::client::Client;
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

const HOSTILE_IDS: usize = 256;
const HOSTILE: &str = "broker-swallow";

/// A listener whose accept queue is full, and the connection filling it.
fn swallowing_listener() -> (TcpListener, TcpStream, String) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    // SAFETY: listen(2) on a socket this function owns; it only shrinks its backlog to 0.
    assert_eq!(unsafe { libc::listen(listener.as_raw_fd(), 0) }, 0);
    let addr = listener.local_addr().expect("address");
    let filler = TcpStream::connect(addr).expect("the one connection it queues");
    (listener, filler, addr.to_string())
}

fn ok(resp: &rmq_namesrv::remoting::command::RemotingCommand, what: &str) {
    assert_eq!(resp.code, 0, "{what}: {:?}", resp.remark);
}

/// Registers `addrs.len()` ids of the hostile set (id i at `addrs[i - 1]`), keeps them active
/// with one heartbeat each, and makes id 1 master.
fn register_hostile_set(controller: &mut Client, addrs: &[String]) {
    let base = [("clusterName", CLUSTER), ("brokerName", HOSTILE)];
    for (i, addr) in addrs.iter().enumerate() {
        let id = (i + 1).to_string();
        let check = format!("{addr};{i}");
        let mut ext = base.to_vec();
        ext.extend([
            ("appliedBrokerId", id.as_str()),
            ("registerCheckCode", &check),
        ]);
        ok(&controller.request(1013, &ext, b"").expect("1013"), "1013");
        let mut ext = base.to_vec();
        ext.extend([("brokerId", id.as_str()), ("brokerAddress", addr)]);
        ok(&controller.request(1003, &ext, b"").expect("1003"), "1003");
        let mut ext = base.to_vec();
        ext.extend([
            ("brokerAddr", addr.as_str()),
            ("brokerId", &id),
            ("epoch", "0"),
            ("maxOffset", "100"),
            ("confirmOffset", "100"),
            ("heartbeatTimeoutMills", "120000"),
        ]);
        controller.oneway(904, &ext, b"").expect("904");
    }
    elect(controller, "1", false);
}

/// 1002 for the hostile set; with `designate`, as an admin naming the new master.
fn elect(controller: &mut Client, id: &str, designate: bool) {
    let designate = designate.to_string();
    let ext = [
        ("clusterName", CLUSTER),
        ("brokerName", HOSTILE),
        ("brokerId", id),
        ("designateElect", designate.as_str()),
    ];
    ok(&controller.request(1002, &ext, b"").expect("1002"), "1002");
}

#[test]
fn unreachable_members_of_one_set_do_not_delay_another_sets_notification() {
    // Unclean elections let the admin designate any active id of the hostile set.
    let server = ControllerServer::start(&[("enableElectUncleanMaster", "true")]);
    let a = StandInBroker::start(&server, "broker-good", BrokerOptions::default());
    let b = StandInBroker::start(&server, "broker-good", BrokerOptions::default());
    assert!(a.role().is_master());
    a.alter_sync_state_set(&[1, 2]);

    let swallowers: Vec<_> = (0..HOSTILE_IDS).map(|_| swallowing_listener()).collect();
    let addrs: Vec<String> = swallowers.iter().map(|(_, _, addr)| addr.clone()).collect();
    let mut controller = server.controller_client();
    register_hostile_set(&mut controller, &addrs);
    // Every id is active: the election notifies all 256 unreachable addresses.
    elect(&mut controller, "2", true);

    let failover = Instant::now();
    a.kill();
    assert!(
        wait_until(Duration::from_secs(20), || b
            .notices()
            .iter()
            .any(|n| n.master_id == 2)),
        "the good set's new master was never notified"
    );
    let waited = failover.elapsed();
    eprintln!("the new master was notified {waited:?} after the failover");
    assert!(
        waited < Duration::from_secs(2),
        "the new master's 1008 waited {waited:?} behind unreachable addresses"
    );
    drop(swallowers);
}
