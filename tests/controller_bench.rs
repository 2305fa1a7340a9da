//! `rmq-bench controller` against the embedded Controller: the throughput phases run without
//! errors and clean up after themselves, and a crash failover round completes (times are the
//! tool's output, not checked here).
#![cfg(feature = "controller")]

mod common;
mod controller_net;

use controller_net::ControllerServer;
use rmq_namesrv::remoting::json::{self, Value};
use std::process::Command;

fn bench(args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_rmq-bench"))
        .args(args)
        .env_remove("NAMESRV_ADDR")
        .output()
        .expect("rmq-bench runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "rmq-bench {args:?}: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    json::parse(stdout.trim().as_bytes()).expect("--json output")
}

#[test]
fn throughput_phases_run_clean_and_the_sets_are_removed_afterwards() {
    let server = ControllerServer::start(&[]);
    let doc = bench(&[
        "controller",
        "--controller",
        &server.controller,
        "--brokers",
        "20",
        "--clients",
        "2",
        "--depth",
        "4",
        "-d",
        "300ms",
        "--tag",
        "t1",
        "--json",
        "--quiet",
    ]);
    let phases = doc.get("phases").and_then(Value::as_array).expect("phases");
    let names: Vec<&str> = phases
        .iter()
        .filter_map(|p| p.get("name").and_then(Value::as_str))
        .collect();
    assert_eq!(
        names,
        [
            "1012 GET_NEXT_BROKER_ID",
            "1003 REGISTER_BROKER",
            "1001 ALTER_SYNC_STATE_SET"
        ]
    );
    for p in phases {
        let class = &p.get("classes").and_then(Value::as_array).expect("class")[0];
        assert!(
            class.get("ops").and_then(Value::as_i64).unwrap_or(0) > 0,
            "{p:?}"
        );
        assert_eq!(
            class.get("errors").and_then(Value::as_i64),
            Some(0),
            "{p:?}"
        );
    }
    // Zero errors: every phase clean and the sets removed afterwards (1011).
    assert_eq!(
        doc.get("errors").and_then(Value::as_i64),
        Some(0),
        "{doc:?}"
    );
    // Nothing of the run is left in the controller.
    let mut c = server.controller_client();
    let resp = c
        .request(1006, &[], b"[\"cb-t1-0\",\"cb-t1-19\"]")
        .expect("1006");
    assert_eq!(resp.code, 0);
    assert_eq!(&resp.body[..], b"{\"replicasInfoTable\":{}}");
}

#[test]
fn a_crash_failover_round_completes() {
    let server = ControllerServer::start(&[]);
    let doc = bench(&[
        "controller",
        "--controller",
        &server.controller,
        "-n",
        &server.namesrv,
        "--failover",
        "crash",
        "--rounds",
        "1",
        "--json",
    ]);
    let results = doc.get("results").expect("results");
    assert!(results.get("round_0_notified").is_some(), "{doc:?}");
    assert!(results.get("round_0_routed").is_some(), "{doc:?}");
}
