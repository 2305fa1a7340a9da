//! Crash safety of the controller's store (a single node: a Raft group of one): a child
//! process (this test binary, re-run with an environment variable) streams broker-id
//! applications at a controller and prints each one the controller acknowledged; the parent
//! SIGKILLs it at a different point in each round, then opens a controller on the store:
//! every acknowledged change must be there and the store must open (a torn last record is
//! fine, anything else is not). Small snapshot intervals make the kills land in snapshots and
//! log cuts too.
#![cfg(feature = "controller")]

#[path = "controller_harness/mod.rs"]
mod harness;

use harness::Node;
use harness::TempDir;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

const CHILD_ENV: &str = "RMQ_CONTROLLER_CRASH_DIR";
const ROUNDS: usize = 5;

fn settings() -> [(&'static str, &'static str); 1] {
    [("controllerSnapshotEvents", "7")]
}

/// The child: applies for ids of new broker sets, forever, printing each acknowledged one.
#[test]
fn crash_child() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return; // an ordinary test run: nothing to do
    };
    let round = std::env::var("RMQ_CONTROLLER_CRASH_ROUND").unwrap_or_default();
    let mut node = Node::open_at(Path::new(&dir), &settings());
    for i in 0.. {
        let name = format!("set-{round}-{i}");
        let (header, _) = node.call(
            1013,
            &[
                ("clusterName", "c"),
                ("brokerName", &name),
                ("appliedBrokerId", "1"),
                ("registerCheckCode", "127.0.0.1:30911;1"),
            ],
            b"",
        );
        if harness::code_of(&header) == 0 {
            println!("ACK {name}");
        }
    }
}

#[test]
fn acknowledged_changes_survive_sigkill() {
    let dir = TempDir::new("ctrl-crash");
    let exe = std::env::current_exe().expect("test binary");
    let mut acked: Vec<String> = Vec::new();
    for round in 0..ROUNDS {
        let mut child = Command::new(&exe)
            .args(["--exact", "crash_child", "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, dir.path())
            .env("RMQ_CONTROLLER_CRASH_ROUND", round.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("child starts");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let kill_after = 15 + round * 23;
        let mut seen = 0;
        for line in lines.by_ref() {
            let line = line.expect("child output");
            if let Some(name) = line.strip_prefix("ACK ") {
                acked.push(name.to_owned());
                seen += 1;
                if seen == kill_after {
                    break;
                }
            }
        }
        assert_eq!(seen, kill_after, "round {round}: the child stopped early");
        child.kill().expect("SIGKILL");
        // Acknowledgements already in the pipe were given before the kill: they count too.
        for line in lines.map_while(Result::ok) {
            if let Some(name) = line.strip_prefix("ACK ") {
                acked.push(name.to_owned());
            }
        }
        let _ = child.wait();
        let config = harness::config(dir.path(), &[]);
        let recovered = rmq_namesrv::controller::Controller::<i32>::open(config, None, 0)
            .unwrap_or_else(|e| panic!("round {round}: the store does not open: {e}"));
        for name in &acked {
            assert!(
                recovered.state().contains_broker_set(name),
                "round {round}: acknowledged {name} lost (applied index {})",
                recovered.applied_index()
            );
        }
        assert!(recovered.shutdown().is_empty());
    }
    assert!(acked.len() >= (0..ROUNDS).map(|r| 15 + r * 23).sum::<usize>());
}
