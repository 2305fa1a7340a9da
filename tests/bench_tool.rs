//! `rmq-bench` against a real server: every workload runs for about a second and must report
//! zero errors and non-zero throughput in its `--json` result; fleets with different tags
//! coexist on one server; name server lists; Ctrl-C; what the text and JSON reports say.

#[path = "common/child.rs"]
mod child;
mod common;

use bytes::BytesMut;
use child::ServerProcess;
use common::{cluster_info, wait_until, TestServer};
use rmq_namesrv::remoting::command::{encode_frame, DecodeLimits, Header, RemotingCommand};
use rmq_namesrv::remoting::frame::next_frame;
use rmq_namesrv::remoting::json::{self, Value};
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;
use std::time::Duration;

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

/// `workload` on `server` with the small layout, as a fleet of its own (see [`fresh_tag`]),
/// then `extra`.
fn args<'a>(workload: &'a str, server: &'a TestServer, extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec![workload, "-n", server.addr.as_str(), "--tag", fresh_tag()];
    v.extend_from_slice(&SMALL);
    v.extend_from_slice(extra);
    v
}

/// A tag no other run of this process used: a server unregisters the last run's brokers when
/// their connections close, which may come after the next run registered the same names and
/// addresses.
fn fresh_tag() -> &'static str {
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    Box::leak(format!("run{n}").into_boxed_str())
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
    // Counts are integers, in the JSON and in the text report.
    for count in ["routes_watched", "routes_left"] {
        let value = results.get(count).and_then(|r| r.get("value"));
        assert!(matches!(value, Some(Value::Int(_))), "{count}: {value:?}");
    }
    let out = Command::new(BENCH)
        .args([
            "expire",
            "-n",
            &server.addr,
            "--brokers",
            "5",
            "--topics",
            "2",
        ])
        .args(["--timeout-ms", "300", "--tag", fresh_tag(), "--quiet"])
        .output()
        .expect("runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    for count in ["routes_watched", "routes_left"] {
        let line = text.lines().map(str::trim).find(|l| l.starts_with(count));
        let value = line.and_then(|l| l.strip_prefix(count)?.strip_prefix(": value "));
        let value = value.and_then(|v| v.strip_suffix(", unit topics"));
        assert!(
            value.is_some_and(|v| v.parse::<u64>().is_ok()),
            "{count}: {text}"
        );
    }
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

/// A server for one connection that holds the requests it reads until `batch` are waiting (or
/// no more came for 20 ms) and then answers them last first, SUCCESS with no body, as a thread
/// pool may; its address and, once the client hung up, how many it answered.
fn answering_backwards(batch: usize) -> (String, JoinHandle<u64>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("address").to_string();
    let serve = move || {
        let (mut conn, _) = listener.accept().expect("accept");
        conn.set_read_timeout(Some(Duration::from_millis(20)))
            .expect("timeout");
        let (mut inb, mut chunk) = (BytesMut::new(), [0u8; 64 * 1024]);
        let (mut held, mut answered) = (Vec::new(), 0);
        loop {
            let quiet = match conn.read(&mut chunk) {
                Ok(0) => return answered,
                Ok(n) => {
                    inb.extend_from_slice(&chunk[..n]);
                    false
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => true,
                Err(e) if e.kind() == std::io::ErrorKind::TimedOut => true,
                Err(_) => return answered,
            };
            while let Some(frame) = next_frame(&mut inb, 1 << 24).expect("a frame") {
                let request = RemotingCommand::decode(frame, &DecodeLimits::default());
                held.push(request.expect("a request"));
            }
            if held.len() >= batch || quiet && !held.is_empty() {
                let mut out = Vec::new();
                for request in held.drain(..).rev() {
                    let header = Header {
                        code: 0,
                        language: "JAVA",
                        version: 479,
                        opaque: request.opaque,
                        flag: 1,
                        remark: None,
                    };
                    let no_fields: Option<[(&str, &str); 0]> = None;
                    encode_frame(&mut out, request.serialize_type, &header, no_fields, b"");
                    answered += 1;
                }
                conn.write_all(&out).expect("answers written");
            }
        }
    };
    (addr, std::thread::spawn(serve))
}

#[test]
fn answers_in_reverse_order_are_each_matched_to_their_request() {
    let (addr, server) = answering_backwards(8);
    let v = bench(&[
        "route",
        "-n",
        &addr,
        "--topic",
        "A,B,C",
        "--clients",
        "1",
        "--depth",
        "8",
        "-d",
        "1",
    ]);
    let answered = server.join().expect("the server counted its answers");
    assert_clean(&v, "main", "route");
    let route = class(&v, "main", "route");
    for key in ["bad_frames", "unanswered", "connections_closed"] {
        assert_eq!(number(route, key), 0.0, "{key}: {}", v.to_text());
    }
    assert_eq!(number(route, "ops"), answered as f64, "{}", v.to_text());
}

#[test]
fn help_and_bad_arguments() {
    let out = Command::new(BENCH).arg("help").output().expect("runs");
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("usage: rmq-bench"));
    // A usage error: one line saying what is wrong, one hint, nothing else.
    let out = Command::new(BENCH)
        .args(["route", "-n", "127.0.0.1:9876", "--nope"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "rmq-bench: unknown option \"--nope\"\nTry 'rmq-bench help' for the workloads and options.\n"
    );
    let out = Command::new(BENCH)
        .arg("route")
        .env_remove("NAMESRV_ADDR")
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 2, "{err}");
    assert!(err.contains("NAMESRV_ADDR"), "{err}");
}

/// The broker addresses registered on `server`, by broker name.
fn broker_addrs(server: &TestServer) -> Vec<(String, String)> {
    let info = cluster_info(&mut server.client());
    let mut out: Vec<(String, String)> = info
        .broker_addr_table
        .values()
        .flat_map(|b| {
            b.broker_addrs
                .values()
                .map(|a| (b.broker_name.clone(), a.clone()))
        })
        .collect();
    out.sort();
    out
}

/// A register fleet in the background (`-d 60`, ended with SIGINT by the caller).
fn fleet(server: &TestServer, tag: &str) -> Child {
    Command::new(BENCH)
        .args([
            "register",
            "-n",
            &server.addr,
            "--brokers",
            "3",
            "--topics",
            "2",
        ])
        .args(["--tag", tag, "-d", "60", "--quiet", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("rmq-bench starts")
}

/// Ctrl-C: SIGINT to `child` by its pid.
fn interrupt(child: &Child) {
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
}

#[test]
fn fleets_with_different_tags_register_distinct_addresses_side_by_side() {
    let server = TestServer::start();
    let steady_of = |all: &[(String, String)]| -> Vec<(String, String)> {
        let only = all
            .iter()
            .filter(|(name, _)| name.starts_with("bench-broker-steady-"));
        only.cloned().collect()
    };
    let mut steady = fleet(&server, "steady");
    assert!(wait_until(Duration::from_secs(30), || broker_addrs(
        &server
    )
    .len()
        == 3));
    let steady_addrs = steady_of(&broker_addrs(&server));

    let mut ex1 = fleet(&server, "ex1");
    assert!(
        wait_until(Duration::from_secs(30), || broker_addrs(&server).len() == 6),
        "{:?}",
        broker_addrs(&server)
    );
    let both = broker_addrs(&server);
    let distinct: BTreeSet<&String> = both.iter().map(|(_, a)| a).collect();
    assert_eq!(distinct.len(), 6, "fleets share addresses: {both:?}");

    // The second fleet leaves; the first keeps its brokers and addresses.
    interrupt(&ex1);
    assert_eq!(ex1.wait().expect("ex1 ends").code(), Some(130));
    assert!(wait_until(Duration::from_secs(30), || broker_addrs(
        &server
    )
    .len()
        == 3));
    assert_eq!(broker_addrs(&server), steady_addrs);
    interrupt(&steady);
    assert_eq!(steady.wait().expect("steady ends").code(), Some(130));
    // Its brokers' unregistrations are applied before the next run starts: otherwise a late
    // one could remove the new run's brokers (same addresses) right after they register.
    assert!(wait_until(Duration::from_secs(30), || broker_addrs(
        &server
    )
    .is_empty()));

    // The same tag gets the same addresses on the next run.
    let mut again = fleet(&server, "steady");
    assert!(wait_until(Duration::from_secs(30), || broker_addrs(
        &server
    )
    .len()
        == 3));
    assert_eq!(broker_addrs(&server), steady_addrs);
    interrupt(&again);
    let _ = again.wait();
}

/// Reads `child`'s stderr until the first progress line of the main phase, which means the
/// timed run is under way; the rest of stderr and that line.
fn wait_for_main_phase(child: &mut Child) -> (BufReader<std::process::ChildStderr>, String) {
    let mut progress = BufReader::new(child.stderr.take().expect("stderr"));
    let mut line = String::new();
    while !line.starts_with("[main") {
        line.clear();
        assert!(
            progress.read_line(&mut line).expect("stderr") > 0,
            "no progress line"
        );
    }
    (progress, line)
}

#[test]
fn ctrl_c_during_a_timed_run_prints_the_summary_so_far() {
    let server = TestServer::start();
    let mut child = Command::new(BENCH)
        .args([
            "route",
            "-n",
            &server.addr,
            "--brokers",
            "4",
            "--topics",
            "4",
        ])
        .args(["--clients", "2", "-d", "60"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("rmq-bench starts");
    // Progress lines (one a second) show the live p99.
    let (_progress, line) = wait_for_main_phase(&mut child);
    assert!(
        line.contains(" ops/s, p99 ") && line.contains(" us, 0 errors"),
        "{line}"
    );
    interrupt(&child);
    let out = child.wait_with_output().expect("rmq-bench ends");
    assert_eq!(out.status.code(), Some(130));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("INTERRUPTED"), "{text}");
    assert!(text.contains("  main: seconds "), "{text}");
    assert!(text.contains("interrupted true"), "{text}");
    assert!(text.contains("  route: ops "), "{text}");
}

#[test]
fn a_dead_server_ends_the_run_with_an_error_within_seconds() {
    let dir = common::TempDir::new("bench-dead");
    let mut server = ServerProcess::spawn(&[
        "--listenPort=0".into(),
        "--bindAddress=127.0.0.1".into(),
        format!(
            "--configStorePath={}",
            dir.path().join("ns.properties").display()
        ),
        format!("--kvConfigPath={}", dir.path().join("kv.json").display()),
        "--logPath=".into(),
    ]);
    let mut child = Command::new(BENCH)
        .args([
            "route",
            "-n",
            &server.addr,
            "--brokers",
            "4",
            "--topics",
            "4",
        ])
        .args(["--clients", "2", "-d", "600"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("rmq-bench starts");
    let (mut progress, _) = wait_for_main_phase(&mut child);
    server.kill();
    let mut status = None;
    let ended = wait_until(Duration::from_secs(10), || {
        status = child.try_wait().expect("try_wait");
        status.is_some()
    });
    if !ended {
        let _ = child.kill();
    }
    let out = child.wait_with_output().expect("rmq-bench ends");
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut progress, &mut stderr).expect("stderr");
    assert!(
        ended,
        "rmq-bench still running 10 s after the server died:\n{stderr}"
    );
    assert_eq!(status.and_then(|s| s.code()), Some(1), "{stderr}");
    let gone = format!("rmq-bench: every connection to {} closed", server.addr);
    assert!(stderr.contains(&gone), "{stderr}");
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        report.contains("failures [\"every connection to"),
        "{report}"
    );
}

#[test]
fn text_report_shows_min_and_p95_and_never_calls_the_server_other_load() {
    let server = TestServer::start();
    let out = Command::new(BENCH)
        .args(args("route", &server, &["--clients", "2", "--quiet"]))
        .output()
        .expect("runs");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let latency = text
        .lines()
        .find(|l| l.trim_start().starts_with("latency_us:"))
        .unwrap_or_else(|| panic!("no latency line:\n{text}"));
    let words: Vec<&str> = latency.split_whitespace().collect();
    for key in ["min", "p50", "p90", "p95", "p99", "p999", "max"] {
        assert!(words.contains(&key), "{key} missing: {latency}");
    }
    // Without --pid the server's CPU cannot be told from other processes': said so, and no
    // "other load" verdict built on it.
    let machine = text
        .lines()
        .find(|l| l.trim_start().starts_with("machine:"))
        .expect("machine line");
    assert!(machine.contains("server_and_other_cores"), "{machine}");
    assert!(!text.contains("other load"), "{text}");
    let v = bench(&args("route", &server, &["--clients", "2"]));
    let m = v.get("machine").expect("machine");
    assert!(m.get("server_and_other_cores").is_some() && m.get("other_cores").is_none());

    // With --pid (the test server runs in this process) the split is there.
    let pid = std::process::id().to_string();
    let v = bench(&args("route", &server, &["--clients", "2", "--pid", &pid]));
    let m = v.get("machine").expect("machine");
    // The server served the whole run in this process: it used some CPU; other processes may
    // have used none.
    assert!(number(m, "server_cores") > 0.0 && number(m, "other_cores") >= 0.0);
}

/// The rows (value, percentile, total count) and the footer's total count of an `--hgrm` file.
fn hgrm_rows(path: &std::path::Path) -> (Vec<(f64, f64, u64)>, u64) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let mut lines = text.lines();
    let head = lines.next().unwrap_or_default();
    assert_eq!(
        head,
        "       Value   Percentile   TotalCount 1/(1-Percentile)"
    );
    assert_eq!(lines.next(), Some(""), "{text}");
    let (rows, footer): (Vec<&str>, Vec<&str>) = lines.partition(|l| !l.starts_with("#["));
    let rows = rows.iter().map(|l| {
        let w: Vec<&str> = l.split_whitespace().collect();
        assert_eq!(w.len(), 4, "{l}");
        (
            w[0].parse().unwrap(),
            w[1].parse().unwrap(),
            w[2].parse().unwrap(),
        )
    });
    assert_eq!(footer.len(), 3, "{text}");
    assert!(footer[0].starts_with("#[Mean    = ") && footer[0].contains(", StdDeviation   = "));
    assert!(footer[2].starts_with("#[Buckets = "), "{text}");
    let total = footer[1]
        .split("Total count    =")
        .nth(1)
        .expect("a total count");
    let total = total
        .trim()
        .trim_end_matches(']')
        .trim()
        .parse()
        .expect("count");
    (rows.collect(), total)
}

#[test]
fn hgrm_files_hold_each_phases_latency_distribution() {
    let server = TestServer::start();
    let dir = common::TempDir::new("hgrm");
    let file = dir.path().join("lat.hgrm");
    let file = file.to_str().expect("a UTF-8 path");
    let v = bench(&args("route", &server, &["--clients", "2", "--hgrm", file]));
    assert_clean(&v, "main", "route");
    for (phase, class) in [("main", "route"), ("setup", "register")] {
        let path = dir.path().join(format!("lat.{phase}-{class}.hgrm"));
        let (rows, total) = hgrm_rows(&path);
        let ops = number(self::class(&v, phase, class), "ops") as u64;
        assert_eq!(total, ops, "{path:?}");
        assert!(rows.len() > 2, "{rows:?}");
        let increasing = rows
            .windows(2)
            .all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1);
        assert!(
            increasing && rows.windows(2).all(|w| w[0].2 <= w[1].2),
            "{rows:?}"
        );
        assert_eq!(rows[0].1, 0.0);
        assert_eq!(
            rows.last().map(|r| (r.1, r.2)),
            Some((1.0, ops)),
            "{rows:?}"
        );
    }
}

#[test]
fn json_numbers_are_numbers() {
    let server = TestServer::start();
    let v = bench(&args(
        "register",
        &server,
        &["--rate", "100", "--tag", "json"],
    ));
    let params = v.get("params").expect("params");
    assert_eq!(params.get("brokers"), Some(&Value::Int(20)));
    assert_eq!(params.get("depth"), Some(&Value::Int(1)));
    assert_eq!(number(params, "rate_per_s"), 100.0);
    assert_eq!(params.get("mode").and_then(Value::as_str), Some("steady"));
    assert_eq!(params.get("tag").and_then(Value::as_str), Some("json"));
    assert_eq!(v.get("interrupted"), Some(&Value::Bool(false)));
    let lat = class(&v, "main", "register")
        .get("latency_us")
        .expect("latency");
    assert!(number(lat, "min") <= number(lat, "p95") && number(lat, "p95") <= number(lat, "p99"));
}

#[test]
fn a_name_server_list_gets_every_broker_and_shares_the_route_clients() {
    let a = TestServer::start();
    let b = TestServer::start();
    let list = format!("{};{}", a.addr, b.addr);
    let v = bench(&[
        "route",
        "-n",
        &list,
        "--brokers",
        "4",
        "--topics",
        "4",
        "--clients",
        "4",
        "-d",
        "1",
    ]);
    assert_clean(&v, "main", "route");
    assert_eq!(v.get("target").and_then(Value::as_str), Some(list.as_str()));
    assert_eq!(
        number(v.get("params").expect("params"), "name_servers"),
        2.0
    );
    // Every broker registered with both servers.
    assert_eq!(number(class(&v, "setup", "register"), "ops"), 8.0);
    for server in [&a, &b] {
        let served = common::stats(&mut server.client());
        let requests = served.get("requests").expect("requests");
        assert_eq!(
            number(requests, "103"),
            4.0,
            "registrations on {}",
            server.addr
        );
        assert!(
            number(requests, "105") > 0.0,
            "no route lookups on {}",
            server.addr
        );
    }

    // $NAMESRV_ADDR stands in for -n.
    let out = Command::new(BENCH)
        .args([
            "register",
            "--brokers",
            "2",
            "--topics",
            "2",
            "-d",
            "1",
            "--quiet",
            "--json",
        ])
        .env("NAMESRV_ADDR", &a.addr)
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json::parse(&out.stdout).expect("json");
    assert_eq!(
        v.get("target").and_then(Value::as_str),
        Some(a.addr.as_str())
    );
}

/// Route lookups (105) `server` has served.
fn lookups(server: &TestServer) -> f64 {
    let served = common::stats(&mut server.client());
    match served.get("requests").and_then(|r| r.get("105")) {
        Some(Value::Int(n)) => *n as f64,
        _ => 0.0,
    }
}

/// A route run with four clients over `list` and `extra` options. Each run is a fleet of its
/// own (`--tag`): the servers unregister the last run's brokers when its connections close,
/// which may come after the next run registered the same names and addresses.
fn route_over(list: &str, extra: &[&str]) -> Value {
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let tag = format!(
        "run{}",
        RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    let mut args = vec![
        "route",
        "-n",
        list,
        "--tag",
        &tag,
        "--brokers",
        "2",
        "--topics",
        "2",
        "--clients",
        "4",
        "-d",
        "0.5",
    ];
    args.extend_from_slice(extra);
    let v = bench(&args);
    assert_clean(&v, "main", "route");
    v
}

fn clients_per_server(v: &Value) -> String {
    let params = v.get("params").expect("params");
    params
        .get("clients_per_server")
        .and_then(Value::as_str)
        .expect("clients_per_server")
        .to_string()
}

#[test]
fn route_clients_pick_their_name_server_by_strategy() {
    let a = TestServer::start();
    let b = TestServer::start();
    let list = format!("{};{}", a.addr, b.addr);

    // The default deals them out in turn, as before the option existed.
    let v = route_over(&list, &[]);
    assert_eq!(clients_per_server(&v), "2,2");
    let params = v.get("params").expect("params");
    assert_eq!(
        params.get("strategy").and_then(Value::as_str),
        Some("round-robin")
    );

    // Pinned: every lookup goes to b.
    let before_a = lookups(&a);
    let v = route_over(&list, &["--strategy", &format!("pinned:{}", b.addr)]);
    assert_eq!(clients_per_server(&v), "0,4");
    assert_eq!(lookups(&a), before_a, "no lookup may reach a");

    // Random: every client somewhere.
    let v = route_over(&list, &["--strategy", "random"]);
    let counts: Vec<usize> = clients_per_server(&v)
        .split(',')
        .map(|n| n.parse().expect("a count"))
        .collect();
    assert_eq!(counts.iter().sum::<usize>(), 4);

    // Fewest: with a holding ten more connections, all four (and b's four) fit below it.
    let _busy: Vec<_> = (0..10).map(|_| a.client()).collect();
    assert!(wait_until(Duration::from_secs(10), || {
        common::stats(&mut a.client())
            .get("connections")
            .and_then(Value::as_i64)
            .is_some_and(|n| n >= 11)
    }));
    let v = route_over(&list, &["--strategy", "fewest"]);
    assert_eq!(clients_per_server(&v), "0,4");

    // A strategy that does not fit the list is a usage error (exit 2).
    let out = Command::new(BENCH)
        .args(["route", "-n", &list, "--strategy", "pinned:2"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn expire_watches_the_routes_of_the_servers_its_clients_use() {
    let a = TestServer::start_with(|c| c.scan_not_active_broker_interval = 100);
    let b = TestServer::start_with(|c| c.scan_not_active_broker_interval = 100);
    let list = format!("{};{}", a.addr, b.addr);
    let v = bench(&[
        "expire",
        "-n",
        &list,
        "--brokers",
        "10",
        "--topics",
        "2",
        "--timeout-ms",
        "300",
        "--route-rate",
        "2000",
        "--strategy",
        "pinned:1",
        "--max-wait",
        "60s",
    ]);
    let results = v.get("results").expect("results");
    // The topics of one server (10 brokers x 2 topics, each shared by 2 brokers), not both.
    assert_eq!(
        number(results.get("routes_watched").expect("watched"), "value"),
        10.0
    );
    assert_eq!(
        number(results.get("routes_left").expect("left"), "value"),
        0.0
    );
}
