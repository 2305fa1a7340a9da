//! `rmq-bench` against a real server: every workload runs for about a second and must report
//! zero errors and non-zero throughput in its `--json` result.

mod common;

use common::TestServer;
use rmq_namesrv::remoting::json::{self, Value};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

const BENCH: &str = env!("CARGO_BIN_EXE_rmq-bench");

/// Runs rmq-bench with `args` and returns its JSON result.
fn bench(args: &[&str]) -> Value {
    let out = Command::new(BENCH)
        .args(args)
        .args(["--json", "--quiet"])
        .output()
        .expect("rmq-bench runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "rmq-bench {args:?} failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    json::parse(stdout.trim().as_bytes())
        .unwrap_or_else(|e| panic!("rmq-bench printed no JSON ({e}):\n{stdout}\n{stderr}"))
}

fn number(v: &Value, key: &str) -> f64 {
    match v.get(key) {
        Some(Value::Int(n)) => *n as f64,
        Some(Value::Float(n)) => *n,
        other => panic!("{key} missing or not a number: {other:?}"),
    }
}

/// The named class of the named phase.
fn class<'a>(v: &'a Value, phase: &str, name: &str) -> &'a Value {
    let Some(Value::Array(phases)) = v.get("phases") else {
        panic!("no phases in {}", v.to_text());
    };
    let p = phases
        .iter()
        .find(|p| p.get("name").and_then(|n| n.as_str()) == Some(phase))
        .unwrap_or_else(|| panic!("no phase {phase}"));
    let Some(Value::Array(classes)) = p.get("classes") else {
        panic!("phase {phase} has no classes");
    };
    classes
        .iter()
        .find(|c| c.get("name").and_then(|n| n.as_str()) == Some(name))
        .unwrap_or_else(|| panic!("phase {phase} has no class {name}"))
}

fn assert_clean(v: &Value, phase: &str, name: &str) {
    assert_eq!(number(v, "errors"), 0.0, "{}", v.to_text());
    assert!(number(v, "ops_per_s") > 0.0, "{}", v.to_text());
    let c = class(v, phase, name);
    assert_eq!(number(c, "errors"), 0.0, "{}", v.to_text());
    assert!(number(c, "ops") > 0.0, "{}", v.to_text());
    assert!(number(c, "ops_per_s") > 0.0);
    let lat = c.get("latency_us").expect("latency");
    assert!(number(lat, "p50") <= number(lat, "p99"));
    assert!(number(lat, "p99") <= number(lat, "max"));
}

const SMALL: [&str; 6] = ["--brokers", "20", "--topics", "20", "-d", "1"];

fn args<'a>(workload: &'a str, server: &'a TestServer, extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec![workload, "-n", server.addr.as_str()];
    v.extend_from_slice(&SMALL);
    v.extend_from_slice(extra);
    v
}

#[test]
fn register_steady_reports_throughput_and_server_usage() {
    let server = TestServer::start();
    let pid = std::process::id().to_string();
    let v = bench(&args("register", &server, &["--pid", &pid]));
    assert_clean(&v, "main", "register");
    assert_clean(&v, "setup", "register");
    let srv = v.get("server").expect("server section");
    assert!(number(srv, "rss_after_kib") > 0.0);
}

#[test]
fn register_churn_changes_bodies_without_errors() {
    let server = TestServer::start();
    let v = bench(&args("register", &server, &["--churn", "--conns", "5"]));
    assert_clean(&v, "main", "register");
}

#[test]
fn register_at_a_target_rate_stays_near_it() {
    let server = TestServer::start();
    let v = bench(&args("register", &server, &["--rate", "200"]));
    assert_clean(&v, "main", "register");
    let ops = number(class(&v, "main", "register"), "ops");
    // Open-loop pacing never sends ahead of the schedule: 200/s for ~1 s.
    assert!(ops <= 200.0 + 20.0, "{ops} ops at 200/s");
}

#[test]
fn heartbeat_and_query_data_version_loops() {
    let server = TestServer::start();
    let v = bench(&args("heartbeat", &server, &[]));
    assert_clean(&v, "main", "heartbeat");
    let v = bench(&args(
        "heartbeat",
        &server,
        &["--op", "query", "--depth", "4"],
    ));
    assert_clean(&v, "main", "query");
}

#[test]
fn route_lookups_in_both_dialects_and_header_codecs() {
    let server = TestServer::start();
    let v = bench(&args("route", &server, &["--clients", "4"]));
    assert_clean(&v, "main", "route");
    let v = bench(&args(
        "route",
        &server,
        &["--clients", "4", "--version", "317", "--header", "rocketmq"],
    ));
    assert_clean(&v, "main", "route");
}

#[test]
fn mixed_measures_routes_quiet_and_during_a_storm() {
    let server = TestServer::start();
    let v = bench(&args(
        "mixed",
        &server,
        &["--clients", "4", "--route-rate", "2000", "--churn"],
    ));
    assert_clean(&v, "storm", "route");
    assert_clean(&v, "storm", "register");
    assert_clean(&v, "quiet", "route");
}

#[test]
fn expire_waits_until_every_route_is_gone() {
    let server = TestServer::start_with(|c| c.scan_not_active_broker_interval = 100);
    let v = bench(&[
        "expire",
        "-n",
        server.addr.as_str(),
        "--brokers",
        "50",
        "--topics",
        "4",
        "--timeout-ms",
        "300",
        "--route-rate",
        "2000",
        "--max-wait",
        "60s",
    ]);
    assert_eq!(number(&v, "errors"), 0.0, "{}", v.to_text());
    assert!(number(&v, "ops_per_s") > 0.0);
    let results = v.get("results").expect("results");
    let gone = number(results.get("all_routes_gone_after").expect("gone"), "value");
    assert!(gone > 0.0, "{}", v.to_text());
    assert_eq!(
        number(results.get("routes_left").expect("left"), "value"),
        0.0
    );
    let probe = class(&v, "expire", "route");
    assert!(number(probe.get("expected_by_code").expect("codes"), "17") > 0.0);
}

/// Starts `rmq-bench canned` and returns it with its address.
fn canned(extra: &[&str]) -> (Child, String) {
    let mut child = Command::new(BENCH)
        .arg("canned")
        .args(extra)
        .stdout(Stdio::piped())
        .spawn()
        .expect("canned starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("address line");
    let addr = line
        .trim()
        .strip_prefix("canned listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_string();
    (child, addr)
}

#[test]
fn canned_server_answers_every_workload_frame() {
    let (mut child, addr) = canned(&["--body-bytes", "200"]);
    let v = bench(&[
        "route",
        "-n",
        &addr,
        "--topic",
        "A,B,C",
        "--clients",
        "2",
        "-d",
        "1",
    ]);
    assert_clean(&v, "main", "route");
    let v = bench(&["register", "-n", &addr, "--brokers", "5", "-d", "1"]);
    assert_clean(&v, "main", "register");
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn help_and_bad_arguments() {
    let out = Command::new(BENCH).arg("help").output().expect("runs");
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("usage: rmq-bench"));
    let out = Command::new(BENCH)
        .args(["route", "--nope"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
}
