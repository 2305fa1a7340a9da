//! The Prometheus endpoint (`metricsExporterType=PROM`) over real TCP: scrapes taken during a
//! load of registrations and route lookups read with Prometheus's own parser, counters moving
//! as the load says; the HTTP answers; hostile requests bounded like any peer's; and the
//! Grafana dashboard's queries naming only metrics a scrape has.

mod common;

use common::prom::{self, Samples};
use common::{body_with, register, route, topic, Broker, TestServer};
use rmq_namesrv::client::Client;
use rmq_namesrv::config::NamesrvConfig;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

const BROKERS: usize = 12;
const TOPICS_PER_BROKER: usize = 5;
const LOOKUPS: usize = 600;

fn with_metrics(tweak: impl FnOnce(&mut NamesrvConfig)) -> (TestServer, SocketAddr) {
    let server = TestServer::start_with(|c| {
        c.metrics_exporter_type = "PROM".into();
        c.metrics_prom_exporter_port = 0;
        tweak(c);
    });
    let addr = server.handle.metrics_addr().expect("the metrics listener");
    (server, addr)
}

fn counters(s: &Samples) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    for (name, labels, value) in &s.samples {
        let family = name.strip_suffix("_total").unwrap_or(name);
        if s.families.get(family).map(String::as_str) == Some("counter") {
            out.push((format!("{name}{labels:?}"), *value));
        }
    }
    out
}

/// Registrations (each broker twice, the second unchanged) and route lookups from two clients.
/// The registering connection is returned open: its brokers go when it closes.
fn run_load(server: &TestServer) -> (u64, u64, [Client; 2]) {
    let mut registrar = server.client();
    let mut reader = server.client();
    let lookups = std::thread::spawn(move || {
        let mut found = 0;
        for _ in 0..LOOKUPS {
            found += u64::from(route(&mut reader, "load-0-0").code == 0);
        }
        (found, reader)
    });
    for round in 0..2 {
        for b in 0..BROKERS {
            let broker = Broker::new("c", &format!("b{b}"), &format!("10.0.0.{b}:10911"), 0);
            let topics: Vec<_> = (0..TOPICS_PER_BROKER)
                .map(|t| topic(&format!("load-{b}-{t}"), 4, 6))
                .collect();
            let answer = register(&mut registrar, &broker, &body_with(1, &topics));
            assert_eq!(
                answer.code, 0,
                "round {round} broker {b}: {:?}",
                answer.remark
            );
        }
    }
    let (found, reader) = lookups.join().expect("lookups");
    (2 * BROKERS as u64, found, [registrar, reader])
}

#[test]
fn scrapes_during_load_parse_as_prometheus_text_and_counters_follow_the_load() {
    if !prom::parser_available() {
        return;
    }
    let (server, addr) = with_metrics(|_| {});
    let scraper = std::thread::spawn(move || {
        let mut scrapes = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(60);
        while scrapes.len() < 6 && Instant::now() < deadline {
            scrapes.push(prom::parse(&prom::scrape(addr)));
        }
        scrapes
    });
    let (registrations, found, _clients) = run_load(&server);
    let during = scraper.join().expect("scrapes");
    let after = prom::parse(&prom::scrape(addr));
    // Counters never go back, scrape to scrape.
    let all: Vec<&Samples> = during.iter().chain([&after]).collect();
    for pair in all.windows(2) {
        let earlier: std::collections::BTreeMap<_, _> = counters(pair[0]).into_iter().collect();
        for (key, later) in counters(pair[1]) {
            assert!(
                later >= earlier.get(&key).copied().unwrap_or(0.0),
                "{key} went back"
            );
        }
    }
    let v = |name: &str, labels: &[(&str, &str)]| after.value(name, labels).unwrap_or(-1.0);
    let route_code = [("code", "GET_ROUTEINFO_BY_TOPIC")];
    assert_eq!(v("rmq_namesrv_requests_total", &route_code), LOOKUPS as f64);
    let route_ok = [("code", "GET_ROUTEINFO_BY_TOPIC"), ("result", "SUCCESS")];
    assert_eq!(v("rmq_namesrv_requests_total", &route_ok), found as f64);
    let register_ok = [("code", "REGISTER_BROKER"), ("result", "SUCCESS")];
    assert_eq!(
        v("rmq_namesrv_requests_total", &register_ok),
        registrations as f64
    );
    // Route lookups are timed one in 16: the 1st, the 17th...
    let timed = LOOKUPS.div_ceil(16) as f64;
    let route_class = [("class", "route")];
    assert_eq!(
        v("rmq_namesrv_request_duration_seconds_count", &route_class),
        timed
    );
    let slowest_bucket = [("class", "route"), ("le", "+Inf")];
    assert_eq!(
        v(
            "rmq_namesrv_request_duration_seconds_bucket",
            &slowest_bucket
        ),
        timed
    );
    let registration_class = [("class", "registration")];
    assert_eq!(
        v(
            "rmq_namesrv_request_duration_seconds_count",
            &registration_class
        ),
        registrations as f64
    );
    assert_eq!(
        v("rmq_namesrv_registrations_total", &[("result", "changed")]),
        BROKERS as f64
    );
    assert_eq!(
        v(
            "rmq_namesrv_registrations_total",
            &[("result", "unchanged")]
        ),
        BROKERS as f64
    );
    assert_eq!(v("rmq_namesrv_brokers", &[]), BROKERS as f64);
    assert_eq!(v("rmq_namesrv_broker_groups", &[]), BROKERS as f64);
    let topics = (BROKERS * TOPICS_PER_BROKER) as f64;
    assert_eq!(v("rmq_namesrv_topics", &[]), topics);
    assert_eq!(v("rmq_namesrv_queue_entries", &[]), topics);
    assert_eq!(v("rmq_namesrv_connections", &[("kind", "broker")]), 1.0);
    assert_eq!(v("rmq_namesrv_connections", &[("kind", "client")]), 1.0);
    assert_eq!(
        v("rmq_namesrv_connections", &[("kind", "metrics")]),
        1.0,
        "this scrape"
    );
    assert!(v("rmq_namesrv_buffered_bytes_limit", &[]) > 0.0);
    assert!(v("process_resident_memory_bytes", &[]) > 1e6);
    assert!(v("process_cpu_seconds_total", &[]) >= 0.0);
    assert!(v("process_open_fds", &[]) >= 5.0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let started = v("process_start_time_seconds", &[]);
    assert!(started <= now + 1.0 && started > now - 3600.0, "{started}");
    for (family, kind) in [
        ("rmq_namesrv_requests", "counter"),
        ("rmq_namesrv_request_duration_seconds", "histogram"),
        ("rmq_namesrv_brokers", "gauge"),
        ("rmq_namesrv_loop_long_turns", "counter"),
        ("rmq_namesrv_durable_write_duration_seconds", "histogram"),
    ] {
        assert_eq!(
            after.families.get(family).map(String::as_str),
            Some(kind),
            "{family}"
        );
    }
    // The stats extension counts from the same counters.
    let mut client = server.client();
    let stats = common::stats(&mut client);
    let by_code = stats
        .get("requests")
        .and_then(|r| r.get("105"))
        .and_then(|n| n.as_i64());
    assert_eq!(by_code, Some(LOOKUPS as i64));
}

#[test]
fn only_get_of_the_metrics_path_is_answered() {
    let (_server, addr) = with_metrics(|_| {});
    assert_eq!(prom::get(addr, "/").status, 404);
    assert_eq!(prom::get(addr, "/metrics/x").status, 404);
    let post =
        prom::exchange(addr, b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n").unwrap();
    assert_eq!(post.status, 405);
    assert!(post.head.contains("Allow: GET"), "{}", post.head);
    let garbage = prom::exchange(addr, b"\x00\x00\x00\x20{\"code\":105}\r\n\r\n").unwrap();
    assert_eq!(garbage.status, 400);
    let text = prom::scrape(addr);
    assert!(
        text.contains("# TYPE rmq_namesrv_requests counter\n"),
        "{text}"
    );
}

#[test]
fn the_endpoint_is_off_unless_configured_and_its_keys_are_javas() {
    let server = TestServer::start();
    assert_eq!(server.handle.metrics_addr(), None);
    let mut c = NamesrvConfig::default();
    assert_eq!(c.metrics_prom_exporter_port, 5557);
    assert!(matches!(
        c.set("metricsExporterType", "prom"),
        rmq_namesrv::config::SetOutcome::Applied
    ));
    assert_eq!(c.metrics_exporter_type, "PROM");
    assert!(matches!(
        c.set("metricsExporterType", "OTLP_GRPC"),
        rmq_namesrv::config::SetOutcome::Invalid(_)
    ));
}

#[test]
fn an_oversized_request_head_is_answered_431_and_closed() {
    let (_server, addr) = with_metrics(|_| {});
    let mut huge = b"GET /metrics HTTP/1.1\r\nX-Filler: ".to_vec();
    huge.extend(std::iter::repeat(b'a').take(20_000));
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // The server may close before all of it is sent.
    let _ = s.write_all(&huge);
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 431 "), "{text}");
}

#[test]
fn a_slow_request_is_closed_by_the_frame_timeout_like_any_peer() {
    let (server, addr) = with_metrics(|c| c.frame_read_timeout_millis = 1_000);
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let began = Instant::now();
    // A byte every 300 ms, never a whole head (slowloris).
    let head = b"GET /metrics HTTP/1.1\r\nHost: a\r\nX-Slow: ";
    let closed_after = 'sending: loop {
        for byte in head {
            assert!(
                began.elapsed() < Duration::from_secs(10),
                "still open after 10 s"
            );
            if s.write_all(&[*byte]).is_err() {
                break 'sending began.elapsed();
            }
            let mut buf = [0u8; 64];
            match s.read(&mut buf) {
                Ok(0) => break 'sending began.elapsed(),
                Ok(n) => panic!("answered a partial head: {:?}", &buf[..n]),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(_) => break 'sending began.elapsed(),
            }
        }
    };
    assert!(
        closed_after >= Duration::from_millis(900),
        "closed after {closed_after:?}"
    );
    if prom::parser_available() {
        let after = prom::parse(&prom::scrape(addr));
        assert!(
            after
                .value("rmq_namesrv_frame_timeouts_total", &[])
                .unwrap_or(0.0)
                >= 1.0
        );
    }
    drop(server);
}

#[test]
fn metrics_connections_count_against_the_same_connection_and_memory_limits() {
    let (_server, addr) = with_metrics(|c| c.max_connections_per_address = 2);
    // Two held open with part of a head each, the second one's 5,000 bytes buffered.
    let mut first = TcpStream::connect(addr).unwrap();
    first.write_all(b"GET /met").unwrap();
    let mut second = TcpStream::connect(addr).unwrap();
    second.write_all(&[b'a'; 5_000]).unwrap();
    // The third from the same address is refused: closed without an answer.
    let mut third = TcpStream::connect(addr).unwrap();
    third
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut buf = [0u8; 16];
    assert!(
        matches!(third.read(&mut buf), Ok(0) | Err(_)),
        "third connection kept"
    );
    drop(first);
    // A scrape fits again once one is closed (the close may take a moment to be seen).
    let mut answer = None;
    assert!(common::wait_until(Duration::from_secs(5), || {
        answer = prom::exchange(addr, b"GET /metrics HTTP/1.1\r\n\r\n")
            .ok()
            .filter(|a| a.status == 200);
        answer.is_some()
    }));
    let text = answer.unwrap().body;
    let line = |name: &str| -> f64 {
        let prefix = format!("{name} ");
        let line = text
            .lines()
            .find(|l| l.starts_with(&prefix))
            .unwrap_or_else(|| panic!("{name}"));
        line[prefix.len()..].parse().unwrap()
    };
    assert!(line("rmq_namesrv_connections_refused_total") >= 1.0);
    assert!(line("rmq_namesrv_buffered_bytes") >= 5_000.0, "{text}");
    drop(second);
}

/// Names the dashboard's queries use, each checked against a scrape of this build (panels
/// titled "Controller ..." need the controller feature: tests/controller_metrics.rs).
#[test]
fn every_metric_the_dashboard_uses_is_in_a_scrape() {
    let dashboard = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/grafana-dashboard.json"),
    )
    .expect("deploy/grafana-dashboard.json");
    let queries = prom::dashboard_queries(&dashboard);
    assert!(queries.len() >= 10, "{queries:?}");
    let (server, addr) = with_metrics(|_| {});
    // Something in every family, so that every histogram bucket and label is there.
    let mut client = server.client();
    let broker = Broker::new("c", "b0", "10.0.0.1:10911", 0);
    assert_eq!(
        register(&mut client, &broker, &body_with(1, &[topic("t", 1, 6)])).code,
        0
    );
    route(&mut client, "t");
    let text = prom::scrape(addr);
    let present: std::collections::BTreeSet<&str> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split(['{', ' ']).next())
        .collect();
    let mut checked = 0;
    for (title, expr) in &queries {
        let names = prom::metric_names(expr);
        assert!(!names.is_empty(), "{title}: no metric in {expr}");
        if title.starts_with("Controller") {
            continue;
        }
        for name in names {
            assert!(
                present.contains(name.as_str()),
                "{title}: {name} is not in a scrape"
            );
            checked += 1;
        }
    }
    assert!(checked >= 15, "{checked}");
}

#[test]
fn metric_names_are_read_from_promql() {
    let names = prom::metric_names(
        r#"histogram_quantile(0.99, sum by (le, class) (rate(a_bucket{class=~"x|y"}[5m]))) / on (instance) b_total offset 5m"#,
    );
    assert_eq!(names, ["a_bucket", "b_total"]);
    assert_eq!(
        prom::metric_names("sum by (kind) (c{k=\"v\"}) or d"),
        ["c", "d"]
    );
}
