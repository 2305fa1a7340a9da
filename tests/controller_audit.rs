//! The controller port's audit trail through the real binary: a config update, a clean and an
//! election are logged with the sender's address, the change and the result; a refused one
//! at warn with the reason.
#![cfg(feature = "controller")]

#[path = "common/child.rs"]
mod child;
mod common;

use common::{apply_frame, wait_until, TempDir};
use rmq_namesrv::client::Client;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

/// The binary with its controller on, its log in `dir/ns.log`; (child, controller address).
fn start(dir: &TempDir) -> (Child, String) {
    let conf = dir.join("namesrv.conf");
    let text = format!(
        "bindAddress=127.0.0.1\nlistenPort=0\nlogPath={}\nkvConfigPath={}\n\
         enableControllerInNamesrv=true\ncontrollerDLegerPeers=n0-127.0.0.1:0\n\
         controllerDLegerSelfId=n0\ncontrollerStorePath={}\n",
        log_path(dir.path()).display(),
        dir.join("kv.json").display(),
        dir.join("store").display()
    );
    std::fs::write(&conf, text).unwrap();
    let args = ["-c", conf.to_str().unwrap()];
    let (child, mut lines) = child::spawn_announcing(&args, Stdio::null());
    let mut next = || lines.next().and_then(Result::ok).unwrap_or_default();
    assert!(next().starts_with("rmq-namesrv listening on "));
    let line = next();
    let controller = line
        .strip_prefix("rmq-namesrv controller listening on ")
        .unwrap_or_else(|| panic!("{line:?}"))
        .to_string();
    (child, controller)
}

fn log_path(dir: &Path) -> PathBuf {
    dir.join("ns.log")
}

/// Waits for the one log line holding `level` and `text`; returns it.
fn logged_once(dir: &Path, level: &str, text: &str) -> String {
    let read = || std::fs::read_to_string(log_path(dir)).unwrap_or_default();
    let seen = wait_until(Duration::from_secs(10), || {
        read()
            .lines()
            .any(|l| l.contains(level) && l.contains(text))
    });
    let log = read();
    assert!(seen, "no {level} line with {text:?} in:\n{log}");
    let lines: Vec<&str> = log.lines().filter(|l| l.contains(text)).collect();
    assert_eq!(
        lines.len(),
        1,
        "{text:?} logged {} times:\n{log}",
        lines.len()
    );
    lines[0].to_string()
}

#[test]
fn controller_config_updates_cleans_and_elections_are_audited() {
    let dir = TempDir::new("ctrl-audit");
    let (mut child, controller) = start(&dir);
    let mut c = Client::connect(&controller, Duration::from_secs(10)).expect("connect");
    let me = c.local_addr().unwrap();

    let resp = c.request(1009, &[], b"electMasterMaxRetryCount=5").unwrap();
    assert_eq!(resp.code, 0, "{:?}", resp.remark);
    logged_once(
        dir.path(),
        "INFO",
        &format!("audit: controller config update from {me}: electMasterMaxRetryCount 3 -> 5: OK"),
    );

    // A broker set made by 1013: its one id is elected; an unknown set is refused.
    c.send_raw(&apply_frame(7, "set-a")).unwrap();
    assert_eq!(c.read_response(7).unwrap().code, 0);
    let elect = |c: &mut Client, name: &str| {
        let fields = [
            ("clusterName", "c"),
            ("brokerName", name),
            ("brokerId", "1"),
        ];
        c.request(1002, &fields, b"").unwrap()
    };
    assert_eq!(elect(&mut c, "set-a").code, 0);
    logged_once(
        dir.path(),
        "INFO",
        &format!("audit: controller elect from {me}: broker set set-a: OK"),
    );
    let resp = elect(&mut c, "nope");
    assert_ne!(resp.code, 0, "{resp:?}");
    let line = logged_once(
        dir.path(),
        "WARN",
        &format!("audit: controller elect from {me}: broker set nope: refused ("),
    );
    let remark = resp.remark.unwrap_or_default();
    assert!(
        !remark.is_empty() && line.ends_with(&remark),
        "{line} / {remark}"
    );

    let clean = [
        ("clusterName", "c"),
        ("brokerName", "set-a"),
        ("isCleanLivingBroker", "true"),
    ];
    let resp = c.request(1011, &clean, b"").unwrap();
    assert_eq!(resp.code, 0, "{:?}", resp.remark);
    logged_once(
        dir.path(),
        "INFO",
        &format!(
            "audit: controller clean from {me}: broker set set-a, ids (all), living brokers too: OK"
        ),
    );
    // Reads are not audited.
    assert_eq!(c.request(1010, &[], b"").unwrap().code, 0);
    let log = std::fs::read_to_string(log_path(dir.path())).unwrap();
    assert_eq!(log.matches("audit: ").count(), 4, "{log}");
    let _ = child.kill();
    let _ = child.wait();
}
