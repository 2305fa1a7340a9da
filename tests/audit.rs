//! The audit trail of the real binary: each request that changes shared state is logged once,
//! naming the sender's address (the client's local address), the change and its result; a
//! refused one at warn with the reason, a few lines per interval however often it is repeated.

#[path = "common/child.rs"]
mod child;
mod common;

use child::ServerProcess;
use common::*;
use rmq_namesrv::client::Client;
use rmq_namesrv::remoting::codes::{request, response};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The binary with its log in `dir/ns.log`, its config file and (unless `more` names one) KV
/// file in `dir`.
fn spawn(dir: &Path, more: &[&str]) -> ServerProcess {
    let conf = dir.join("namesrv.conf");
    std::fs::write(&conf, "listenPort=0\n").unwrap();
    let mut args = vec![
        "-c".to_string(),
        conf.to_string_lossy().into_owned(),
        "--bindAddress=127.0.0.1".into(),
        format!("--logPath={}", log_path(dir).display()),
    ];
    if !more.iter().any(|a| a.starts_with("--kvConfigPath=")) {
        args.push(format!("--kvConfigPath={}", dir.join("kv.json").display()));
    }
    args.extend(more.iter().map(|a| a.to_string()));
    ServerProcess::spawn(&args)
}

fn log_path(dir: &Path) -> PathBuf {
    dir.join("ns.log")
}

/// Waits for a line of the log holding `level` and `text`; returns it.
fn logged(dir: &Path, level: &str, text: &str) -> String {
    let mut found = None;
    let seen = wait_until(Duration::from_secs(10), || {
        let log = std::fs::read_to_string(log_path(dir)).unwrap_or_default();
        found = log
            .lines()
            .find(|l| l.contains(level) && l.contains(text))
            .map(str::to_string);
        found.is_some()
    });
    let log = std::fs::read_to_string(log_path(dir)).unwrap_or_default();
    assert!(seen, "no {level} line with {text:?} in:\n{log}");
    found.unwrap_or_default()
}

/// As [`logged`], and the line is there once (the change is not logged twice).
fn logged_once(dir: &Path, level: &str, text: &str) -> String {
    let line = logged(dir, level, text);
    let log = std::fs::read_to_string(log_path(dir)).unwrap_or_default();
    let times = log.lines().filter(|l| l.contains(text)).count();
    assert_eq!(times, 1, "{text:?} logged {times} times:\n{log}");
    line
}

fn ok(resp: rmq_namesrv::remoting::command::RemotingCommand) {
    assert_eq!(resp.code, response::SUCCESS, "{:?}", resp.remark);
}

#[test]
fn every_admin_change_is_audited_with_its_sender_and_result() {
    let dir = TempDir::new("audit");
    let server = spawn(dir.path(), &[]);
    let mut c = server.client();
    let me = c.local_addr().unwrap();
    let broker = Broker::new("c", "broker-a", "10.0.0.1:10911", 0);
    ok(register(
        &mut c,
        &broker,
        &body_with(1, &[topic("T1", 4, 6)]),
    ));

    ok(put_kv(&mut c, "NS1", "k1", "v1"));
    logged_once(
        dir.path(),
        "INFO",
        &format!("audit: KV put from {me}: NS1/k1 (2 bytes): OK"),
    );
    ok(put_kv(&mut c, "NS1", "k1", "v1"));
    logged_once(
        dir.path(),
        "INFO",
        &format!("audit: KV put from {me}: NS1/k1 (2 bytes): unchanged: OK"),
    );
    ok(delete_kv(&mut c, "NS1", "k1"));
    logged_once(
        dir.path(),
        "INFO",
        &format!("audit: KV delete from {me}: NS1/k1: OK"),
    );

    let update = |c: &mut Client, body: &str| {
        c.request(request::UPDATE_NAMESRV_CONFIG, &[], body.as_bytes())
            .unwrap()
    };
    ok(update(&mut c, "orderMessageEnable=true"));
    logged_once(
        dir.path(),
        "INFO",
        &format!("audit: config update from {me}: orderMessageEnable false -> true: OK"),
    );

    let perm = |c: &mut Client, code| c.request(code, &[("brokerName", "broker-a")], b"").unwrap();
    ok(perm(&mut c, request::WIPE_WRITE_PERM_OF_BROKER));
    logged_once(
        dir.path(),
        "INFO",
        &format!("audit: write perm wipe from {me}: broker broker-a: 1 topic(s): OK"),
    );
    ok(perm(&mut c, request::ADD_WRITE_PERM_OF_BROKER));
    logged_once(
        dir.path(),
        "INFO",
        &format!("audit: write perm add from {me}: broker broker-a: 1 topic(s): OK"),
    );

    let queues = br#"{"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":2,"topicSysFlag":0,"writeQueueNums":2}]}"#;
    let created = c
        .request(
            request::REGISTER_TOPIC_IN_NAMESRV,
            &[("topic", "Created")],
            queues,
        )
        .unwrap();
    ok(created);
    logged_once(
        dir.path(),
        "INFO",
        &format!("audit: topic register from {me}: topic Created with 1 queue entries: OK"),
    );
    let deleted = c
        .request(request::DELETE_TOPIC_IN_NAMESRV, &[("topic", "T1")], b"")
        .unwrap();
    ok(deleted);
    logged_once(
        dir.path(),
        "INFO",
        &format!("audit: topic delete from {me}: topic T1: OK"),
    );

    // An admin removing the broker is audited; the broker leaving by itself is not.
    let mut admin = server.client();
    let admin_addr = admin.local_addr().unwrap();
    let fields = [
        ("clusterName", "c"),
        ("brokerName", "broker-a"),
        ("brokerAddr", "10.0.0.1:10911"),
        ("brokerId", "0"),
    ];
    ok(admin
        .request(request::UNREGISTER_BROKER, &fields, b"")
        .unwrap());
    logged_once(
        dir.path(),
        "INFO",
        &format!(
            "audit: broker unregister from {admin_addr}: broker broker-a@10.0.0.1:10911 id 0 cluster c: OK"
        ),
    );
    let b = Broker::new("c", "broker-b", "10.0.0.2:10911", 0);
    ok(register(&mut c, &b, &body_with(1, &[])));
    let own = [
        ("clusterName", "c"),
        ("brokerName", "broker-b"),
        ("brokerAddr", "10.0.0.2:10911"),
        ("brokerId", "0"),
    ];
    ok(c.request(request::UNREGISTER_BROKER, &own, b"").unwrap());
    logged_once(
        dir.path(),
        "INFO",
        "broker removed: broker-b@10.0.0.2:10911",
    );
    let log = std::fs::read_to_string(log_path(dir.path())).unwrap();
    assert!(
        !log.contains("broker-b@10.0.0.2:10911 id 0 cluster c: OK"),
        "{log}"
    );

    // Refused: a key in configBlackList, at warn with the reason.
    let resp = update(&mut c, "configStorePath=/tmp/elsewhere");
    assert_eq!(resp.code, response::NO_PERMISSION);
    logged_once(
        dir.path(),
        "WARN",
        &format!("audit: config update from {me}: refused (NO_PERMISSION): "),
    );
}

#[test]
fn a_refused_admin_write_is_warned_with_the_reason_a_few_times_per_interval() {
    let dir = TempDir::new("audit-refused");
    let server = spawn(dir.path(), &["--adminAllowList=127.0.0.1/32"]);
    let mut outsider = connect_from([127, 0, 0, 2], &server.addr).expect("connect");
    let outsider_addr = outsider.local_addr().unwrap();
    let put = [("namespace", "NS"), ("key", "k"), ("value", "v")];
    for opaque in 1..=50 {
        let frame = request_frame(request::PUT_KV_CONFIG, opaque, &put, b"");
        outsider.write_all(&frame).unwrap();
        assert_eq!(read_command(&mut outsider).code, response::NO_PERMISSION);
    }
    let line = logged(
        dir.path(),
        "WARN",
        &format!("audit: KV put from {outsider_addr}: refused (NO_PERMISSION): "),
    );
    assert!(line.contains("(adminAllowList)"), "{line}");
    // The allowed address is served and audited as usual.
    let mut c = server.client();
    ok(put_kv(&mut c, "NS", "k", "v"));
    let me = c.local_addr().unwrap();
    logged(
        dir.path(),
        "INFO",
        &format!("audit: KV put from {me}: NS/k"),
    );
    let log = std::fs::read_to_string(log_path(dir.path())).unwrap();
    let refused = log.lines().filter(|l| l.contains(": refused (")).count();
    assert!((1..=5).contains(&refused), "{refused} lines:\n{log}");
    assert!(
        !log.contains(&format!("from {outsider_addr}: NS/k")),
        "{log}"
    );
}

#[test]
fn a_kv_put_is_audited_ok_only_once_it_is_on_disk() {
    let dir = TempDir::new("audit-kv-fails");
    let kv_dir = dir.path().join("kv");
    std::fs::create_dir(&kv_dir).unwrap();
    let kv = format!("--kvConfigPath={}", kv_dir.join("kv.json").display());
    let server = spawn(dir.path(), &[&kv]);
    // The KV file's directory becomes a regular file: every write of it fails.
    std::fs::remove_dir_all(&kv_dir).unwrap();
    std::fs::write(&kv_dir, "").unwrap();
    let mut c = server.client();
    let me = c.local_addr().unwrap();
    let resp = put_kv(&mut c, "NS", "k", "v");
    assert_eq!(resp.code, response::SYSTEM_ERROR, "{:?}", resp.remark);
    let line = logged(
        dir.path(),
        "WARN",
        &format!("audit: KV put from {me}: NS/k (1 bytes): refused (SYSTEM_ERROR): "),
    );
    assert!(line.contains("persisting the KV config failed"), "{line}");
    let log = std::fs::read_to_string(log_path(dir.path())).unwrap();
    assert!(!log.contains(": NS/k (1 bytes): OK"), "{log}");
}
