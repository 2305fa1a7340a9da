//! The metrics endpoint with the embedded Controller: Java's Controller metrics under Java's
//! names and labels, the Raft group's state, and the dashboard's Controller panels, scraped
//! over TCP while stand-in brokers register, heartbeat and elect a master.
#![cfg(feature = "controller")]

mod common;
mod controller_net;

use common::{prom, wait_until, TempDir};
use controller_net::{BrokerOptions, ControllerServer, StandInBroker};
use std::time::Duration;

#[test]
fn the_controllers_metrics_carry_javas_names_and_the_raft_state() {
    let server = ControllerServer::start_configured(TempDir::new("ctrl-metrics"), &[], |c| {
        c.metrics_exporter_type = "PROM".into();
        c.metrics_prom_exporter_port = 0;
    });
    let addr = server.handle.metrics_addr().expect("the metrics listener");
    let a = StandInBroker::start(&server, "broker-a", BrokerOptions::default());
    let b = StandInBroker::start(&server, "broker-a", BrokerOptions::default());
    assert!(a.role().is_master() && !b.role().is_master());
    if !prom::parser_available() {
        return;
    }
    let mut s = prom::parse(&prom::scrape(addr));
    // Both brokers have heartbeated once they started; the counters are read again until then.
    assert!(wait_until(Duration::from_secs(10), || {
        s = prom::parse(&prom::scrape(addr));
        s.value("active_broker_num", &[("broker_set", "broker-a")]) == Some(2.0)
    }));
    let node = [("group", "group1"), ("peer_id", "n0")];
    assert_eq!(s.value("role", &node), Some(3.0), "a single node leads");
    let success = |t: &str| {
        let labels = [("request_type", t), ("request_handle_status", "success")];
        s.value("request_total", &labels).unwrap_or(0.0)
    };
    assert!(success("CONTROLLER_REGISTER_BROKER") >= 2.0);
    assert!(success("CONTROLLER_BROKER_HEARTBEAT") >= 2.0);
    assert!(success("CONTROLLER_ELECT_MASTER") >= 1.0);
    let elected = [("election_result", "new_master_elected")];
    assert!(s.value("election_total", &elected).unwrap_or(0.0) >= 1.0);
    let elect = [("request_type", "CONTROLLER_ELECT_MASTER")];
    assert!(s.value("request_latency_count", &elect).unwrap_or(0.0) >= 1.0);
    assert_eq!(
        s.families.get("request_latency").map(String::as_str),
        Some("histogram")
    );
    let v = |name: &str| s.value(name, &[]).unwrap_or(-1.0);
    let (term, commit, applied) = (
        v("rmq_namesrv_controller_raft_term"),
        v("rmq_namesrv_controller_raft_commit_index"),
        v("rmq_namesrv_controller_raft_applied_index"),
    );
    assert!(
        term >= 1.0 && applied >= 1.0 && commit >= applied,
        "{term} {commit} {applied}"
    );
    assert!(
        s.value("rmq_namesrv_connections", &[("kind", "controller")])
            .unwrap_or(0.0)
            >= 2.0
    );
    // The dashboard's Controller panels read only what this scrape has.
    let dashboard = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/grafana-dashboard.json"),
    )
    .expect("the dashboard");
    let mut checked = 0;
    for (title, expr) in prom::dashboard_queries(&dashboard) {
        if !title.starts_with("Controller") {
            continue;
        }
        for name in prom::metric_names(&expr) {
            assert!(s.has(&name), "{title}: {name} is not in a scrape");
            checked += 1;
        }
    }
    assert!(checked >= 5, "{checked}");
}
