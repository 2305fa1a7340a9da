//! Isolation inside the one loop: registrations wait in a bounded queue and are answered
//! SYSTEM_BUSY with Java's `[OVERLOAD]` remark past the bound, while cheap requests keep
//! being answered.

mod common;

use common::*;
use rmq_namesrv::client::api::BrokerIdentity;
use rmq_namesrv::remoting::codes::response;
use rmq_namesrv::route::model;
use std::time::Duration;

#[test]
fn a_registration_storm_past_the_backlog_bound_gets_system_busy() {
    let server = TestServer::start_with(|c| {
        c.registration_backlog_limit = 1;
        c.registration_budget_per_iteration = 1;
    });
    // Large bodies make each registration slow to apply, so the others pile up behind it.
    let topics: Vec<_> = (0..3000)
        .map(|i| topic(&format!("Storm{i}"), 4, 6))
        .collect();
    let mut conns: Vec<_> = (0..20).map(|_| server.client()).collect();
    let mut bytes = Vec::new();
    model::encode_register_body_json(&body_with(1, &topics), &mut bytes);
    let mut opaques = Vec::new();
    for (i, c) in conns.iter_mut().enumerate() {
        let broker = BrokerIdentity {
            cluster: "storm".into(),
            broker_name: format!("storm-{i}"),
            broker_addr: format!("10.9.0.{i}:10911"),
            broker_id: 0,
            ha_server_addr: "10.9.0.1:10912".into(),
        };
        let options = RegisterOptions::default();
        opaques.push(c.send_register_broker(&broker, &bytes, &options).unwrap());
    }
    let mut busy = 0;
    let mut ok = 0;
    for (c, opaque) in conns.iter_mut().zip(opaques) {
        c.set_timeout(Duration::from_secs(60));
        let resp = c.read_response(opaque).unwrap();
        match resp.code {
            response::SUCCESS => ok += 1,
            response::SYSTEM_BUSY => {
                assert_eq!(
                    resp.remark.as_deref(),
                    Some("[OVERLOAD]system busy, start flow control for a while")
                );
                busy += 1;
            }
            other => panic!("unexpected code {other}: {:?}", resp.remark),
        }
    }
    assert!(busy >= 1, "some registrations are refused ({ok} accepted)");
    assert!(ok >= 1);
    let mut c = server.client();
    assert_eq!(stat(&mut c, "rejectedBusy"), busy);
    assert_eq!(cluster_info(&mut c).broker_addr_table.len(), ok as usize);
}
