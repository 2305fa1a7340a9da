//! Remote config cannot lock the operator out: the allow lists and the limits that protect
//! the server are in the default `configBlackList`, so an anonymous UPDATE_NAMESRV_CONFIG
//! cannot change them, before or after a restart; a limit below its floor is refused.

#[path = "common/child.rs"]
mod child;
mod common;

use child::ServerProcess;
use common::*;
use rmq_namesrv::client::Client;
use rmq_namesrv::config::JAVA_CONFIG_BLACK_LIST;
use rmq_namesrv::remoting::codes::{request, response};
use std::path::Path;

const OPERATOR_FILE: &str = "# operator's file\nlistenPort=0\n";

fn spawn(dir: &Path, conf: &Path) -> ServerProcess {
    ServerProcess::spawn(&[
        "-c".into(),
        conf.to_string_lossy().into_owned(),
        "--bindAddress=127.0.0.1".into(),
        format!("--logPath={}", dir.join("ns.log").display()),
        format!("--kvConfigPath={}", dir.join("kv.json").display()),
    ])
}

fn update(c: &mut Client, body: &str) -> (i32, String) {
    let resp = c
        .request(request::UPDATE_NAMESRV_CONFIG, &[], body.as_bytes())
        .unwrap();
    (resp.code, resp.remark.unwrap_or_default())
}

fn config_text(c: &mut Client) -> String {
    let resp = c.request(request::GET_NAMESRV_CONFIG, &[], b"").unwrap();
    String::from_utf8(resp.body.to_vec()).unwrap()
}

/// What the attack broke: a registration larger than 1 KiB, and the operator's admin request
/// from loopback.
fn operator_and_brokers_are_served(server: &ServerProcess, round: i64) {
    let mut c = server.client();
    let topics: Vec<_> = (0..100).map(|i| topic(&format!("T{i}"), 8, 6)).collect();
    let b = Broker::new("c", "lock-a", "10.0.0.1:10911", 0);
    assert_eq!(register(&mut c, &b, &body_with(round, &topics)).code, 0);
    assert!(route_data(&mut c, "T99").is_some());
    let resp = put_kv(&mut c, "NS", "k", "v");
    assert_eq!(resp.code, response::SUCCESS, "{:?}", resp.remark);
    let text = config_text(&mut c);
    assert!(text.contains("\nframeMaxLength=16777216\n"), "{text}");
    assert!(text.lines().any(|l| l == "adminAllowList="), "{text}");
}

#[test]
fn anonymous_update_cannot_lock_the_operator_out_before_or_after_a_restart() {
    let dir = TempDir::new("lockout");
    let conf = dir.path().join("namesrv.conf");
    std::fs::write(&conf, OPERATOR_FILE).unwrap();
    let mut server = spawn(dir.path(), &conf);
    let mut attacker = server.client();
    for (body, key) in [
        ("frameMaxLength=1024", "frameMaxLength"),
        ("adminAllowList=192.0.2.1/32", "adminAllowList"),
    ] {
        let (code, remark) = update(&mut attacker, body);
        assert_eq!(code, response::NO_PERMISSION, "{body}: {remark}");
        assert!(
            remark.contains(&format!("{key} is in configBlackList")),
            "{remark}"
        );
    }
    // Refusals are logged a few lines per interval, not one per request.
    for _ in 0..200 {
        assert_eq!(update(&mut attacker, "maxConnections=1").0, 16);
    }
    let log = std::fs::read_to_string(dir.path().join("ns.log")).unwrap();
    let refused = |l: &&str| l.contains("audit: config update from") && l.contains(": refused");
    let lines = log.lines().filter(refused).count();
    assert!((1..=5).contains(&lines), "{lines} lines");
    assert_eq!(std::fs::read_to_string(&conf).unwrap(), OPERATOR_FILE);
    operator_and_brokers_are_served(&server, 1);
    server.kill();
    let server = spawn(dir.path(), &conf);
    operator_and_brokers_are_served(&server, 2);
}

#[test]
fn a_limit_below_its_floor_is_refused_with_the_reason() {
    let dir = TempDir::new("floor");
    let conf = dir.path().join("namesrv.conf");
    // The operator opted out of the protection: only Java's list.
    let file = format!("{OPERATOR_FILE}configBlackList={JAVA_CONFIG_BLACK_LIST}\n");
    std::fs::write(&conf, &file).unwrap();
    let server = spawn(dir.path(), &conf);
    let mut c = server.client();
    assert_eq!(
        update(&mut c, "frameMaxLength=1024"),
        (
            response::SYSTEM_ERROR,
            "frameMaxLength: 1024 is outside 8388608..=1073741824".into()
        )
    );
    assert_eq!(std::fs::read_to_string(&conf).unwrap(), file);
    assert_eq!(update(&mut c, "frameMaxLength=8388608"), (0, String::new()));
    assert!(config_text(&mut c).contains("\nframeMaxLength=8388608\n"));
}
