//! A build without the `tls` feature refuses `--tls` in `rmq-admin` and `rmq-bench`, saying
//! how to build it in, before any connection is made.
#![cfg(not(feature = "tls"))]

#[path = "common/admin_run.rs"]
mod admin_run;

use std::process::Command;

#[test]
fn tools_built_without_tls_refuse_it_and_say_how_to_build_it() {
    // Nothing listens on port 1: the refusal comes before any connection.
    let run = admin_run::admin_env(&["-n", "127.0.0.1:1", "--tls", "clusterList"], None);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("--features tls"), "{}", run.stderr);

    let bench = Command::new(env!("CARGO_BIN_EXE_rmq-bench"))
        .args(["route", "-n", "127.0.0.1:1", "--tls", "-d", "1", "--quiet"])
        .output()
        .expect("rmq-bench runs");
    let stderr = String::from_utf8_lossy(&bench.stderr);
    assert!(!bench.status.success());
    assert!(stderr.contains("--features tls"), "{stderr}");
}
