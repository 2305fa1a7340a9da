//! The embedded Controller end to end over TCP, with stand-in controller-mode brokers
//! (tests/controller_net): two brokers of one set register through the controller, the
//! master goes away, the slave is elected, told so with 1008, registers with the name server
//! as id 0 with `stateVersion = masterEpoch`, and routes follow.
#![cfg(feature = "controller")]

mod common;
mod controller_net;

use common::{wait_until, ClientExt};
use controller_net::{
    routed, wait_for_master_route, BrokerOptions, ControllerServer, Notice, StandInBroker, CLUSTER,
};
use rmq_namesrv::client::api::BrokerIdentity;
use rmq_namesrv::route::model::DataVersion;
use std::time::Duration;

/// Master `a` (id 1) and slave `b` (id 2) of broker-a, both in the SyncStateSet, both routed.
fn two_brokers(
    server: &ControllerServer,
    options: BrokerOptions,
) -> (StandInBroker, StandInBroker) {
    let a = StandInBroker::start(server, "broker-a", options.clone());
    let b = StandInBroker::start(server, "broker-a", options);
    let (ra, rb) = (a.role(), b.role());
    assert_eq!((ra.controller_id, rb.controller_id), (1, 2));
    assert!(ra.is_master(), "the first to ask is master: {ra:?}");
    assert_eq!(rb.master_id, Some(1), "the second follows it: {rb:?}");
    assert_eq!(rb.master_addr.as_deref(), Some(a.addr()));
    a.alter_sync_state_set(&[1, 2]);
    let mut ns = server.namesrv_client();
    assert!(wait_until(Duration::from_secs(10), || {
        let r = routed(&mut ns, "broker-a");
        r.contains(&(0, a.addr().to_string())) && r.contains(&(2, b.addr().to_string()))
    }));
    (a, b)
}

/// What the name server stored for the new master: its stateVersion is the master epoch.
fn stored_state_version(server: &ControllerServer, broker: &StandInBroker) -> i64 {
    let identity = BrokerIdentity {
        cluster: CLUSTER.to_string(),
        broker_name: "broker-a".to_string(),
        broker_addr: broker.addr().to_string(),
        broker_id: 0,
        ha_server_addr: broker.addr().to_string(),
    };
    let (_, stored) = server
        .namesrv_client()
        .query_data_version(&identity, Some(&DataVersion::default()))
        .expect("QUERY_DATA_VERSION");
    stored
        .expect("the name server knows the new master")
        .state_version
}

#[test]
fn the_masters_connection_dies_and_the_slave_takes_over() {
    let server = ControllerServer::start(&[]);
    let (a, b) = two_brokers(&server, BrokerOptions::default());
    let a_addr = a.addr().to_string();
    a.kill();
    let mut ns = server.namesrv_client();
    assert!(
        wait_for_master_route(&mut ns, "broker-a", b.addr()),
        "the slave never became the routed master: {:?}, notices {:?}",
        routed(&mut ns, "broker-a"),
        b.notices()
    );
    let role = b.role();
    assert!(role.is_master(), "{role:?}");
    assert_eq!(role.master_epoch, 2, "the election bumped the epoch once");
    assert_eq!(
        b.notices(),
        vec![Notice {
            master_id: 2,
            master_epoch: 2,
            master_addr: Some(b.addr().to_string()),
        }]
    );
    assert_eq!((role.namesrv_id, role.state_version), (0, 2));
    assert_eq!(stored_state_version(&server, &b), 2);
    let routes = routed(&mut ns, "broker-a");
    assert!(
        !routes.iter().any(|(_, addr)| *addr == a_addr),
        "the dead master is gone from the route: {routes:?}"
    );
}

#[test]
fn a_silent_master_is_replaced_after_its_heartbeat_timeout() {
    // Tuned: a broker that misses 600 ms of heartbeats is inactive; scans every 100 ms.
    let server = ControllerServer::start(&[
        ("scanNotActiveBrokerInterval", "100"),
        ("scanInactiveMasterInterval", "100"),
    ]);
    let options = BrokerOptions {
        heartbeat_timeout_ms: 600,
        heartbeat_interval: Duration::from_millis(100),
        ..BrokerOptions::default()
    };
    let (a, b) = two_brokers(&server, options);
    a.hang();
    let mut ns = server.namesrv_client();
    assert!(wait_until(Duration::from_secs(30), || b.role().is_master()));
    assert_eq!(b.notices().last().map(|n| n.master_id), Some(2));
    // The hung master still has its name-server registration (its connection is open), so
    // both brokers claim id 0 in turn; the new master's registration is what routes show.
    assert!(wait_until(Duration::from_secs(30), || {
        routed(&mut ns, "broker-a").contains(&(0, b.addr().to_string()))
    }));
    // As Java: the controller closes the expired broker's connection.
    assert!(a.controller_closed_connection(Duration::from_secs(10)));
}

#[test]
fn a_slave_that_dies_changes_nothing_and_a_new_one_follows_the_master() {
    let server = ControllerServer::start(&[]);
    let (a, b) = two_brokers(&server, BrokerOptions::default());
    b.kill();
    let c = StandInBroker::start(&server, "broker-a", BrokerOptions::default());
    let role = c.role();
    assert_eq!(role.controller_id, 3);
    assert_eq!(role.master_id, Some(1));
    assert_eq!(role.master_epoch, 1);
    assert!(a.role().is_master());
    // The only notice the master ever got is of its own first election (it had sent a
    // heartbeat before asking, so it was an active member): the slave's death elected nobody.
    assert!(
        a.notices().iter().all(|n| n.master_epoch == 1),
        "{:?}",
        a.notices()
    );
}
