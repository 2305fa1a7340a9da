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
    // As long as the name and check-code rules allow.
    let name = "b".repeat(255);
    let code = format!("127.0.0.1:30911;{}", "7".repeat(32));
    let log = raft_log(&server);
    let before = log_bytes(&log);
    assert_eq!(apply_id(&mut ctrl, &name, "1", &code).0, 0);
    let after_first = log_bytes(&log);
    assert!(after_first > before, "the first application is logged");
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

const CHILD_ENV: &str = "RMQ_CONTROLLER_FSIZE_CHILD";
/// The child's file-size limit once its server is up: room for a few applications.
const FILE_LIMIT: u64 = 256 << 10;

fn set_file_limit(soft: u64) {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct passed by pointer.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_FSIZE, &mut limit), 0);
        limit.rlim_cur = soft.min(limit.rlim_max);
        assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &limit), 0);
    }
}

/// The child: a controller whose files cannot grow past [`FILE_LIMIT`] (writes past it fail
/// with EFBIG, as a full disk's with ENOSPC) until the parent writes "raise".
#[test]
fn file_limited_child() {
    if std::env::var(CHILD_ENV).is_err() {
        return; // an ordinary test run: nothing to do
    }
    // SAFETY: ignoring a signal installs no handler; writes past the limit then fail instead
    // of killing the process.
    unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) };
    let server = ControllerServer::start(&[]);
    set_file_limit(FILE_LIMIT);
    println!(
        "CONTROLLER {} {}",
        server.controller,
        raft_log(&server).display()
    );
    let mut line = String::new();
    while std::io::stdin().read_line(&mut line).is_ok_and(|n| n > 0) {
        if line.trim() == "raise" {
            set_file_limit(libc::RLIM_INFINITY);
            println!("RAISED");
        }
        line.clear();
    }
    server.stop();
}

#[test]
fn a_full_disk_refuses_changes_serves_reads_and_heals_without_a_restart() {
    use std::io::{BufRead, BufReader, Write};
    use std::process::{Command, Stdio};
    let exe = std::env::current_exe().expect("test binary");
    let mut child = Command::new(&exe)
        .args([
            "--exact",
            "file_limited_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("child starts");
    let mut stdin = child.stdin.take().expect("stdin");
    let stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let (tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        stdout
            .lines()
            .map_while(Result::ok)
            .try_for_each(|l| tx.send(l))
    });
    let next_line = |prefix: &str| loop {
        let wait = std::time::Duration::from_secs(60);
        let line = lines.recv_timeout(wait).expect("the child answers");
        // The test harness may have printed the test's name before it on the same line.
        if let Some((_, rest)) = line.split_once(prefix) {
            return rest.to_owned();
        }
    };
    let started = next_line("CONTROLLER ");
    let (addr, log) = started.split_once(' ').expect("address and log path");
    let mut ctrl = Client::connect(addr, std::time::Duration::from_secs(10)).expect("connect");
    let code = "127.0.0.1:30911;1";
    // Names as long as the name rule allows (255 bytes), so that the log fills in a few
    // hundred changes.
    let name = |i: usize| format!("set-{i:06}-{}", "n".repeat(244));
    let mut refused = None;
    for i in 0..5_000 {
        let (code, remark) = apply_id(&mut ctrl, &name(i), "1", code);
        if code != 0 {
            refused = Some((i, code, remark.unwrap_or_default()));
            break;
        }
    }
    let (full_at, code_refused, remark) = refused.expect("the limit is reached");
    assert!(full_at > 2, "a few changes fit first");
    assert_eq!(code_refused, 1, "SYSTEM_ERROR");
    assert!(
        remark.contains("raft.log") && remark.contains("os error 27"),
        "the remark names the file and the error: {remark}"
    );
    let stalled_bytes = log_bytes(Path::new(log));
    // Changes are refused at once, reads are served from what is applied.
    let (again, _) = apply_id(&mut ctrl, &name(100_000), "1", code);
    assert_eq!(again, 1);
    let next = ctrl
        .request(1012, &[("clusterName", "c"), ("brokerName", &name(0))], b"")
        .expect("1012");
    assert_eq!((next.code, next.ext("nextBrokerId")), (0, Some("2")));
    let info = ctrl
        .request(1004, &[("brokerName", &name(1))], b"")
        .expect("1004");
    assert_eq!(info.code, 0, "{:?}", info.remark);
    assert_eq!(
        log_bytes(Path::new(log)),
        stalled_bytes,
        "nothing half-written is left"
    );
    // Space returns: writes work again within the writer's retry, no restart.
    writeln!(stdin, "raise").expect("to child");
    next_line("RAISED");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let (code, remark) = apply_id(&mut ctrl, &name(200_000), "1", code);
        if code == 0 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "still refused: {remark:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(log_bytes(Path::new(log)) > stalled_bytes);
    drop(stdin);
    assert!(child.wait().expect("child exits").success());
}
