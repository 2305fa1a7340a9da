//! The throughput run's report: a table of the phases (ops/s, latency percentiles, the
//! server's CPU, errors by code) and the server's RSS, or the same as one JSON object.

use super::throughput::PhaseResult;
use crate::args::Options;
use crate::report::{thousands, ProcSample};
use rmq_namesrv::remoting::json::{self, Value};
use std::time::Duration;

fn errors_text(errors: &[(i32, u64)]) -> String {
    let list: Vec<String> = errors
        .iter()
        .map(|(c, n)| format!("{n} x code {c}"))
        .collect();
    list.join(", ")
}

fn us(ns: u64) -> u64 {
    ns / 1000
}

/// The throughput run's text (or JSON) report: one row per phase, the server's RSS.
pub(super) fn throughput(
    o: &Options,
    addr: &str,
    setup: Duration,
    phases: &[PhaseResult],
    rss: [Option<ProcSample>; 3],
    cleaned: Result<(), String>,
) -> String {
    if o.json {
        return throughput_json(o, addr, setup, phases, rss, cleaned);
    }
    let mut out = format!(
        "controller {addr}: {} broker sets x 2 brokers, {} connections x depth {}, {:.1} s per phase\n",
        o.brokers,
        o.clients.min(o.brokers).max(1),
        o.depth.unwrap_or(16),
        o.duration.as_secs_f64()
    );
    out += &format!(
        "setup: {:.1} s ({} writes)\n\n",
        setup.as_secs_f64(),
        o.brokers * 5
    );
    out += &format!(
        "{:<28} {:>11} {:>10} {:>8} {:>8} {:>9} {:>11}  errors\n",
        "request", "ops", "ops/s", "p50 us", "p99 us", "max us", "server cpu"
    );
    for p in phases {
        let cpu = p.server_cpu_s.map_or("-".to_string(), |s| {
            format!("{:.0}%", 100.0 * s / p.wall.as_secs_f64().max(1e-9))
        });
        out += &format!(
            "{:<28} {:>11} {:>10} {:>8} {:>8} {:>9} {:>11}  {}\n",
            p.name,
            thousands(p.stats.ops),
            thousands(p.ops_per_s() as u64),
            us(p.stats.hist.percentile(50.0)),
            us(p.stats.hist.percentile(99.0)),
            us(p.stats.hist.max()),
            cpu,
            errors_text(&p.stats.errors_by_code)
        );
        for (what, _, n) in p.stats.failures() {
            if n > 0 {
                out += &format!("  {what}: {n}\n");
            }
        }
    }
    if let [Some(idle), Some(loaded), Some(end)] = rss {
        out += &format!(
            "\nserver RSS: {} KiB idle, {} KiB with the {} sets, {} KiB at the end (peak {} KiB)\n",
            thousands(idle.rss_kib),
            thousands(loaded.rss_kib),
            o.brokers,
            thousands(end.rss_kib),
            thousands(end.hwm_kib)
        );
    }
    if let Err(e) = cleaned {
        out += &format!("cleaning the sets failed: {e}\n");
    }
    out
}

fn throughput_json(
    o: &Options,
    addr: &str,
    setup: Duration,
    phases: &[PhaseResult],
    rss: [Option<ProcSample>; 3],
    cleaned: Result<(), String>,
) -> String {
    let int = |n: u64| Value::Int(n as i64);
    let phase_values = phases.iter().map(|p| {
        Value::Object(vec![
            ("request".into(), Value::Str(p.name.into())),
            ("ops".into(), int(p.stats.ops)),
            ("ops_per_s".into(), int(p.ops_per_s() as u64)),
            ("p50_us".into(), int(us(p.stats.hist.percentile(50.0)))),
            ("p99_us".into(), int(us(p.stats.hist.percentile(99.0)))),
            ("max_us".into(), int(us(p.stats.hist.max()))),
            (
                "server_cpu_s".into(),
                p.server_cpu_s
                    .map_or(Value::Null, |s| Value::Str(format!("{s:.2}"))),
            ),
            ("errors".into(), int(p.stats.errors() - p.stats.closed)),
            ("failed_connections".into(), int(p.stats.closed)),
        ])
    });
    let rss_kib = |s: Option<ProcSample>| s.map_or(Value::Null, |s| int(s.rss_kib));
    let doc = Value::Object(vec![
        ("workload".into(), Value::Str("controller".into())),
        ("target".into(), Value::Str(addr.into())),
        ("broker_sets".into(), int(o.brokers as u64)),
        ("setup_ms".into(), int(setup.as_millis() as u64)),
        ("phases".into(), Value::Array(phase_values.collect())),
        ("server_rss_kib_idle".into(), rss_kib(rss[0])),
        ("server_rss_kib_loaded".into(), rss_kib(rss[1])),
        ("server_rss_kib_end".into(), rss_kib(rss[2])),
        ("cleaned".into(), Value::Bool(cleaned.is_ok())),
    ]);
    let mut out = Vec::new();
    json::write_value(&mut out, &doc);
    String::from_utf8_lossy(&out).into_owned()
}
