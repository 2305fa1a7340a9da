//! Results: the human summary, the `--json` document, and the `/proc` samples of the server
//! (`--pid`) and of the generator itself (so a run shows whether the tool was the bottleneck).

use crate::engine::{ClassStats, PhaseResult};
use crate::hist::Histogram;
use rmq_namesrv::remoting::json::{self, Value};
use std::fmt::Write as _;

/// Linux USER_HZ, the unit of utime/stime in /proc/PID/stat on every mainstream architecture.
const CLOCK_TICKS_PER_S: f64 = 100.0;

/// `12345678` -> `12,345,678`.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

#[derive(Debug, Clone, Copy, Default)]
pub struct ProcSample {
    pub rss_kib: u64,
    pub hwm_kib: u64,
    pub cpu_s: f64,
}

/// Reads VmRSS, VmHWM and utime+stime of `pid` ("self" for this process).
pub fn sample_proc(pid: &str) -> Option<ProcSample> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may contain spaces) start at field 3.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some(ProcSample {
        rss_kib: field("VmRSS:"),
        hwm_kib: field("VmHWM:"),
        cpu_s: (utime + stime) / CLOCK_TICKS_PER_S,
    })
}

/// Busy and total jiffies of the whole machine (first line of /proc/stat).
pub fn sample_machine() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    let line = text.lines().next()?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let total: u64 = v.iter().take(8).sum();
    let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
    Some((total - idle, total))
}

/// Before/after samples of one process over the measured phases.
#[derive(Debug, Clone, Copy)]
pub struct ProcDelta {
    /// At the start of the run (before any connection): idle RSS.
    pub before: ProcSample,
    /// When the headline phase began: CPU time is counted from here.
    pub main_begin: ProcSample,
    pub after: ProcSample,
    pub wall_s: f64,
}

impl ProcDelta {
    pub fn cpu_s(&self) -> f64 {
        self.after.cpu_s - self.main_begin.cpu_s
    }
    pub fn cpu_pct(&self) -> f64 {
        if self.wall_s > 0.0 {
            100.0 * self.cpu_s() / self.wall_s
        } else {
            0.0
        }
    }
}

/// A run parameter: numbers stay numbers in `--json`.
#[derive(Debug, Clone, PartialEq)]
pub enum Param {
    Int(i64),
    Num(f64),
    Text(String),
}

impl Param {
    fn text(&self) -> String {
        match self {
            Param::Int(n) => n.to_string(),
            Param::Num(x) => format!("{x:.2}"),
            Param::Text(t) => t.clone(),
        }
    }

    fn json(&self) -> Value {
        match self {
            Param::Int(n) => Value::Int(*n),
            Param::Num(x) => num(*x, 3),
            Param::Text(t) => Value::Str(t.clone()),
        }
    }
}

macro_rules! int_params {
    ($($t:ty),*) => {$(
        impl From<$t> for Param {
            fn from(n: $t) -> Param {
                Param::Int(i64::try_from(n).unwrap_or(i64::MAX))
            }
        }
    )*};
}
int_params!(usize, u64, i32);

impl From<f64> for Param {
    fn from(x: f64) -> Param {
        Param::Num(x)
    }
}

impl From<String> for Param {
    fn from(t: String) -> Param {
        Param::Text(t)
    }
}

impl From<&str> for Param {
    fn from(t: &str) -> Param {
        Param::Text(t.to_string())
    }
}

#[derive(Default)]
pub struct Report {
    pub workload: String,
    pub target: String,
    /// (key, value) lines describing the parameters, in order.
    pub params: Vec<(String, Param)>,
    pub phases: Vec<PhaseResult>,
    /// Index of the phase whose first class is the headline number.
    pub main_phase: usize,
    pub server: Option<(u32, ProcDelta)>,
    pub generator: Option<ProcDelta>,
    /// Workload-specific results (name, value, unit).
    pub extra: Vec<(&'static str, Param, &'static str)>,
    /// Whole-machine CPU use during the headline phase, in % of all cores (other load on
    /// the machine shows here).
    pub machine_busy_pct: Option<f64>,
    /// Workload-level failures (counted as errors).
    pub failures: Vec<String>,
    /// Ctrl-C (or SIGTERM) ended the run early: the results are those so far.
    pub interrupted: bool,
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

impl Report {
    pub fn total_errors(&self) -> u64 {
        self.phases
            .iter()
            .flat_map(|p| p.classes.iter())
            .map(|(_, s)| s.errors())
            .sum::<u64>()
            + self.failures.len() as u64
    }

    /// Throughput of the headline class (first class of the main phase).
    pub fn headline_ops_per_s(&self) -> f64 {
        self.phases
            .get(self.main_phase)
            .and_then(|p| p.classes.first().map(|(_, s)| rate(s.ops, p)))
            .unwrap_or(0.0)
    }

    pub fn text(&self) -> String {
        let params: Vec<String> = self
            .params
            .iter()
            .map(|(k, v)| format!("{k}={}", v.text()))
            .collect();
        let mut s = format!(
            "rmq-bench {} -> {}  ({})\n",
            self.workload,
            self.target,
            params.join(", ")
        );
        if self.interrupted {
            s.push_str("INTERRUPTED: the results below are those until Ctrl-C\n");
        }
        for phase in &self.phases {
            let cut = if phase.interrupted { ", cut short" } else { "" };
            let _ = writeln!(
                s,
                "phase {} ({:.2} s{cut}):",
                phase.name,
                phase.elapsed.as_secs_f64()
            );
            for (name, st) in &phase.classes {
                s.push_str(&class_text(name, st, phase));
            }
        }
        for (name, v, unit) in &self.extra {
            let v = match v {
                Param::Num(x) => format!("{x:.3}"),
                v => v.text(),
            };
            let _ = writeln!(s, "{name}: {v} {unit}");
        }
        for f in &self.failures {
            let _ = writeln!(s, "FAILED: {f}");
        }
        if let Some((pid, d)) = &self.server {
            let _ = writeln!(
                s,
                "server pid {pid}: rss {:.1} MiB at start -> {:.1} MiB after (peak {:.1} MiB); main phase cpu {:.2} s = {:.0}% of one core",
                d.before.rss_kib as f64 / 1024.0,
                d.after.rss_kib as f64 / 1024.0,
                d.after.hwm_kib as f64 / 1024.0,
                d.cpu_s(),
                d.cpu_pct()
            );
        }
        if let Some(m) = self.machine() {
            s.push_str(&m.text());
        }
        if let Some(d) = &self.generator {
            let _ = writeln!(
                s,
                "generator: main phase cpu {:.2} s = {:.0}% of one core over {:.2} s",
                d.cpu_s(),
                d.cpu_pct(),
                d.wall_s
            );
        }
        s
    }

    /// How the machine's busy cores split between server, generator and the rest.
    fn machine(&self) -> Option<MachineLoad> {
        let busy_pct = self.machine_busy_pct?;
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        Some(MachineLoad {
            cpus,
            busy_pct,
            busy_cores: busy_pct / 100.0 * cpus as f64,
            server_cores: self.server.map(|(_, d)| d.cpu_pct() / 100.0),
            generator_cores: self.generator.map_or(0.0, |d| d.cpu_pct() / 100.0),
        })
    }

    pub fn json(&self) -> String {
        let params = self.params.iter().map(|(k, v)| (k.clone(), v.json()));
        let phases = self.phases.iter().map(|p| {
            let classes = p.classes.iter().map(|(name, st)| class_json(name, st, p));
            obj(vec![
                ("name", Value::Str(p.name.clone())),
                ("seconds", num(p.elapsed.as_secs_f64(), 3)),
                ("interrupted", Value::Bool(p.interrupted)),
                ("classes", Value::Array(classes.collect())),
            ])
        });
        let mut doc = vec![
            ("workload", Value::Str(self.workload.clone())),
            ("target", Value::Str(self.target.clone())),
            ("errors", int(self.total_errors())),
            ("ops_per_s", num(self.headline_ops_per_s(), 1)),
            ("interrupted", Value::Bool(self.interrupted)),
            ("params", Value::Object(params.collect())),
            ("phases", Value::Array(phases.collect())),
        ];
        if !self.extra.is_empty() {
            let results = self.extra.iter().map(|(k, v, unit)| {
                let v = match v {
                    Param::Num(x) => num(*x, 6),
                    v => v.json(),
                };
                let unit = Value::Str(unit.to_string());
                (k.to_string(), obj(vec![("value", v), ("unit", unit)]))
            });
            doc.push(("results", Value::Object(results.collect())));
        }
        if !self.failures.is_empty() {
            let list = self.failures.iter().map(|f| Value::Str(f.clone()));
            doc.push(("failures", Value::Array(list.collect())));
        }
        if let Some((pid, d)) = &self.server {
            doc.push((
                "server",
                obj(vec![
                    ("pid", int(u64::from(*pid))),
                    ("rss_before_kib", int(d.before.rss_kib)),
                    ("rss_after_kib", int(d.after.rss_kib)),
                    ("rss_peak_kib", int(d.after.hwm_kib)),
                    ("cpu_s", num(d.cpu_s(), 3)),
                    ("cpu_pct", num(d.cpu_pct(), 1)),
                ]),
            ));
        }
        if let Some(m) = self.machine() {
            doc.push(("machine", m.json()));
        }
        if let Some(d) = &self.generator {
            doc.push((
                "generator",
                obj(vec![
                    ("cpu_s", num(d.cpu_s(), 3)),
                    ("cpu_pct", num(d.cpu_pct(), 1)),
                    ("wall_s", num(d.wall_s, 3)),
                ]),
            ));
        }
        json_text(&obj(doc))
    }
}

/// Whole-machine CPU during the headline phase, in cores. Without `--pid` the server's share
/// is unknown, so it is reported together with other processes and never called "other load".
struct MachineLoad {
    cpus: usize,
    busy_pct: f64,
    busy_cores: f64,
    server_cores: Option<f64>,
    generator_cores: f64,
}

/// Cores used by processes other than the server and the generator above which a run is
/// flagged as disturbed.
const OTHER_LOAD_LIMIT: f64 = 0.25;

impl MachineLoad {
    /// Cores left after the generator (and the server, when known).
    fn rest(&self) -> f64 {
        (self.busy_cores - self.generator_cores - self.server_cores.unwrap_or(0.0)).max(0.0)
    }

    fn text(&self) -> String {
        let head = format!(
            "machine: {} cpus, {:.0}% busy during the main phase = {:.2} cores: ",
            self.cpus, self.busy_pct, self.busy_cores
        );
        match self.server_cores {
            Some(server) => format!(
                "{head}server {server:.2}, generator {:.2}, other processes {:.2}{}\n",
                self.generator_cores,
                self.rest(),
                if self.rest() > OTHER_LOAD_LIMIT {
                    "  (other load: numbers are not representative)"
                } else {
                    ""
                }
            ),
            None => format!(
                "{head}generator {:.2}, server and other processes {:.2} (--pid tells them apart)\n",
                self.generator_cores,
                self.rest()
            ),
        }
    }

    fn json(&self) -> Value {
        let mut fields = vec![
            ("cpus", int(self.cpus as u64)),
            ("busy_pct", num(self.busy_pct, 1)),
            ("busy_cores", num(self.busy_cores, 3)),
            ("generator_cores", num(self.generator_cores, 3)),
        ];
        match self.server_cores {
            Some(server) => fields.extend([
                ("server_cores", num(server, 3)),
                ("other_cores", num(self.rest(), 3)),
            ]),
            None => fields.push(("server_and_other_cores", num(self.rest(), 3))),
        }
        obj(fields)
    }
}

/// A class's latency figures in microseconds: (text label, JSON key, value), mean last.
fn latency_us(h: &Histogram) -> [(&'static str, &'static str, f64); 8] {
    let p = |q: f64| us(h.percentile(q));
    [
        ("min", "min", us(h.min())),
        ("p50", "p50", p(50.0)),
        ("p90", "p90", p(90.0)),
        ("p95", "p95", p(95.0)),
        ("p99", "p99", p(99.0)),
        ("p99.9", "p999", p(99.9)),
        ("max", "max", us(h.max())),
        ("mean", "mean", h.mean() / 1000.0),
    ]
}

/// Three lines per class: throughput, latency, errors.
fn class_text(name: &str, st: &ClassStats, phase: &PhaseResult) -> String {
    let secs = phase.elapsed.as_secs_f64().max(1e-9);
    let mut s = format!(
        "  {:<9} {:>12} ops/s  ({} ops)  tx {:.1} MB/s  rx {:.1} MB/s\n  {:<9} latency us:",
        name,
        thousands(rate(st.ops, phase) as u64),
        thousands(st.ops),
        st.bytes_tx as f64 / 1e6 / secs,
        st.bytes_rx as f64 / 1e6 / secs,
        "",
    );
    for (label, _, v) in latency_us(&st.hist) {
        match label {
            "mean" => write!(s, "  ({label} {v:.0})"),
            "min" => write!(s, " {label} {v:.0}"),
            _ => write!(s, "  {label} {v:.0}"),
        }
        .ok();
    }
    let mut errs = format!("errors {}", st.errors());
    for (code, n) in &st.errors_by_code {
        let _ = write!(errs, ", code {code}: {n}");
    }
    for (what, _, n) in st.failures() {
        if n > 0 {
            let _ = write!(errs, ", {what}: {n}");
        }
    }
    for (code, n) in &st.expected_by_code {
        let _ = write!(errs, " (expected code {code}: {n})");
    }
    let _ = writeln!(s, "\n  {:<9} {errs}", "");
    s
}

fn rate(ops: u64, p: &PhaseResult) -> f64 {
    let secs = p.elapsed.as_secs_f64();
    if secs > 0.0 {
        ops as f64 / secs
    } else {
        0.0
    }
}

/// `x` rounded to `places` decimals (the JSON writer prints the shortest form).
fn num(x: f64, places: i32) -> Value {
    let scale = 10f64.powi(places);
    Value::Float((x * scale).round() / scale)
}

fn int(n: u64) -> Value {
    Value::Int(i64::try_from(n).unwrap_or(i64::MAX))
}

fn obj(fields: Vec<(&str, Value)>) -> Value {
    Value::Object(fields.into_iter().map(|(k, v)| (k.into(), v)).collect())
}

pub fn json_text(v: &Value) -> String {
    let mut out = Vec::new();
    json::write_value(&mut out, v);
    String::from_utf8_lossy(&out).into_owned()
}

fn class_json(name: &str, st: &ClassStats, p: &PhaseResult) -> Value {
    let secs = p.elapsed.as_secs_f64().max(1e-9);
    let codes = |list: &[(i32, u64)]| {
        Value::Object(list.iter().map(|(c, n)| (c.to_string(), int(*n))).collect())
    };
    let mut fields = vec![
        ("name", Value::Str(name.into())),
        ("ops", int(st.ops)),
        ("ops_per_s", num(st.ops as f64 / secs, 1)),
        ("tx_mb_per_s", num(st.bytes_tx as f64 / 1e6 / secs, 3)),
        ("rx_mb_per_s", num(st.bytes_rx as f64 / 1e6 / secs, 3)),
        ("errors", int(st.errors())),
        ("errors_by_code", codes(&st.errors_by_code)),
        ("expected_by_code", codes(&st.expected_by_code)),
    ];
    fields.extend(st.failures().map(|(_, key, n)| (key, int(n))));
    let latency = latency_us(&st.hist).map(|(_, key, v)| (key, num(v, 1)));
    fields.push(("latency_us", obj(latency.to_vec())));
    obj(fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_groups_digits() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(12_345_678), "12,345,678");
    }

    #[test]
    fn own_process_can_be_sampled() {
        let s = sample_proc("self").unwrap();
        assert!(s.rss_kib > 0);
        assert!(s.hwm_kib >= s.rss_kib);
    }
}
