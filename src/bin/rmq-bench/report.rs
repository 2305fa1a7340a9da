//! Results: one [`Report`] per run, printed as text or as the `--json` document under the same
//! names, with `/proc` samples of the server (`--pid`), the generator and the machine (so a
//! run shows whether the tool or other load was the bottleneck).

use crate::engine::{ClassStats, PhaseResult};
use rmq_namesrv::remoting::json::Value;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

/// Linux USER_HZ, the unit of utime/stime in /proc/PID/stat on every mainstream architecture.
const CLOCK_TICKS_PER_S: f64 = 100.0;

/// Cores used by other processes above which a run is flagged as disturbed.
const OTHER_LOAD_LIMIT: f64 = 0.25;

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
fn sample_machine() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    let line = text.lines().next()?;
    let fields = line.split_whitespace().skip(1);
    let v: Vec<u64> = fields.filter_map(|x| x.parse().ok()).collect();
    let total: u64 = v.iter().take(8).sum();
    let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
    Some((total - idle, total))
}

/// The /proc readings of one moment: the server (`--pid`), this process, the machine.
#[derive(Debug, Clone, Copy, Default)]
pub struct Mark {
    pub server: ProcSample,
    me: ProcSample,
    machine: (u64, u64),
}

impl Mark {
    pub fn now(pid: Option<u32>) -> Mark {
        let server = pid.and_then(|p| sample_proc(&p.to_string()));
        Mark {
            server: server.unwrap_or_default(),
            me: sample_proc("self").unwrap_or_default(),
            machine: sample_machine().unwrap_or_default(),
        }
    }
}

/// A JSON (and text) integer.
pub fn int(n: impl TryInto<i64>) -> Value {
    Value::Int(n.try_into().unwrap_or(i64::MAX))
}

/// `x` rounded to `places` decimals (the JSON writer prints the shortest form).
pub fn num(x: f64, places: i32) -> Value {
    let scale = 10f64.powi(places);
    Value::Float((x * scale).round() / scale)
}

pub fn text(t: &str) -> Value {
    Value::Str(t.to_string())
}

fn obj(fields: Vec<(&str, Value)>) -> Value {
    Value::Object(fields.into_iter().map(|(k, v)| (k.into(), v)).collect())
}

#[derive(Default)]
pub struct Report {
    pub workload: String,
    pub target: String,
    pub params: Vec<(String, Value)>,
    pub phases: Vec<PhaseResult>,
    /// Index of the phase whose first class is the headline number.
    pub main_phase: usize,
    pub pid: Option<u32>,
    /// At the start of the run (idle RSS), when the measured phases began and when they ended.
    pub marks: [Mark; 3],
    pub main_wall: Duration,
    /// Workload-specific results (name, value, unit).
    pub extra: Vec<(String, Value, &'static str)>,
    /// Workload-level failures (counted as errors).
    pub failures: Vec<String>,
    /// Ctrl-C (or SIGTERM) ended the run early: the results are those so far.
    pub interrupted: bool,
}

impl Report {
    /// A report whose /proc readings start now (`--pid`: the server's too).
    pub fn new(workload: &str, target: String, pid: Option<u32>) -> Report {
        let mut report = Report {
            workload: workload.into(),
            target,
            pid,
            ..Report::default()
        };
        report.marks[0] = Mark::now(pid);
        report
    }

    pub fn total_errors(&self) -> u64 {
        self.phases
            .iter()
            .flat_map(|p| p.classes.iter())
            .map(|(_, s)| s.errors())
            .sum::<u64>()
            + self.failures.len() as u64
    }

    /// Throughput of the headline class (first class of the main phase).
    fn headline_ops_per_s(&self) -> f64 {
        let p = self.phases.get(self.main_phase);
        p.and_then(|p| Some(p.classes.first()?.1.ops as f64 / secs(p)))
            .unwrap_or(0.0)
    }

    pub fn param(&mut self, name: &str, value: Value) {
        self.params.push((name.into(), value));
    }

    pub fn result(&mut self, name: impl Into<String>, value: Value, unit: &'static str) {
        self.extra.push((name.into(), value, unit));
    }

    /// `server` (`--pid`) and `machine`, CPU over the measured phases. Without `--pid` the
    /// server cannot be told from other processes: their sum is never called other load.
    fn sections(&self) -> Vec<(&'static str, Value)> {
        let [start, begin, end] = self.marks;
        let wall = self.main_wall.as_secs_f64();
        let cores = |cpu_s: f64| if wall > 0.0 { cpu_s / wall } else { 0.0 };
        let mut out = Vec::new();
        let server_cpu = self.pid.map(|pid| {
            let cpu = end.server.cpu_s - begin.server.cpu_s;
            out.push((
                "server",
                obj(vec![
                    ("pid", int(pid)),
                    ("rss_before_kib", int(start.server.rss_kib)),
                    ("rss_after_kib", int(end.server.rss_kib)),
                    ("rss_peak_kib", int(end.server.hwm_kib)),
                    ("cpu_s", num(cpu, 3)),
                    ("cpu_pct", num(100.0 * cores(cpu), 1)),
                ]),
            ));
            cpu
        });
        let generator_cpu = end.me.cpu_s - begin.me.cpu_s;
        let busy = end.machine.0.saturating_sub(begin.machine.0);
        let total = end.machine.1.saturating_sub(begin.machine.1);
        if total > 0 {
            let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
            let busy_pct = 100.0 * busy as f64 / total as f64;
            let busy_cores = busy_pct / 100.0 * cpus as f64;
            let known = cores(generator_cpu) + server_cpu.map_or(0.0, cores);
            let rest = num((busy_cores - known).max(0.0), 3);
            let mut fields = vec![
                ("cpus", int(cpus)),
                ("busy_pct", num(busy_pct, 1)),
                ("busy_cores", num(busy_cores, 3)),
                ("generator_cores", num(cores(generator_cpu), 3)),
            ];
            match server_cpu {
                Some(cpu) => {
                    fields.extend([("server_cores", num(cores(cpu), 3)), ("other_cores", rest)])
                }
                None => fields.push(("server_and_other_cores", rest)),
            }
            out.push(("machine", obj(fields)));
        }
        out
    }

    /// The text report: the JSON document's fields, one line per object (see [`fields_text`]).
    pub fn text(&self) -> String {
        let mut s = String::new();
        if self.interrupted {
            s.push_str("INTERRUPTED: the results below are those until Ctrl-C\n");
        }
        let doc = self.document();
        fields_text(&mut s, 0, "rmq-bench", &doc);
        let machine = doc.iter().find(|(k, _)| k == "machine");
        let other = machine.and_then(|(_, m)| m.get("other_cores"));
        if matches!(other, Some(Value::Float(x)) if *x > OTHER_LOAD_LIMIT) {
            s.push_str("(other load: numbers are not representative)\n");
        }
        s
    }

    /// `--hgrm FILE`: the latency distribution of each class of each phase that got answers,
    /// in HdrHistogram's percentile text format, in FILE with `.PHASE-CLASS` inserted before
    /// its extension (`lat.hgrm` -> `lat.main-route.hgrm`); the files written.
    pub fn write_hgrm(&self, file: &str) -> Result<Vec<String>, String> {
        let path = std::path::Path::new(file);
        let stem = path.file_stem().map_or("".into(), |s| s.to_string_lossy());
        let ext = path
            .extension()
            .map_or(String::new(), |e| format!(".{}", e.to_string_lossy()));
        let mut written = Vec::new();
        for p in &self.phases {
            for (class, st) in p.classes.iter().filter(|(_, st)| st.ops > 0) {
                let tag = format!("{}-{class}", p.name)
                    .replace(|c: char| !c.is_ascii_alphanumeric() && c != '-', "_");
                let out = path.with_file_name(format!("{stem}.{tag}{ext}"));
                std::fs::write(&out, st.hist.percentile_distribution())
                    .map_err(|e| format!("--hgrm: cannot write {}: {e}", out.display()))?;
                written.push(out.display().to_string());
            }
        }
        Ok(written)
    }

    pub fn json(&self) -> String {
        Value::Object(self.document()).to_text()
    }

    fn document(&self) -> Vec<(String, Value)> {
        let params = self.params.iter().map(|(k, v)| (k.clone(), v.clone()));
        let phases = self.phases.iter().map(|p| {
            let classes = p.classes.iter().map(|(name, st)| class_json(name, st, p));
            let mut fields = vec![
                ("name", text(&p.name)),
                ("seconds", num(p.elapsed.as_secs_f64(), 3)),
                ("interrupted", Value::Bool(p.interrupted)),
                ("classes", Value::Array(classes.collect())),
            ];
            let cpu_pct = p.server_cpu_s.map(|cpu| num(100.0 * cpu / secs(p), 1));
            fields.extend(cpu_pct.map(|c| ("server_cpu_pct", c)));
            obj(fields)
        });
        let mut doc = vec![
            ("workload", text(&self.workload)),
            ("target", text(&self.target)),
            ("errors", int(self.total_errors())),
            ("ops_per_s", num(self.headline_ops_per_s(), 1)),
            ("interrupted", Value::Bool(self.interrupted)),
            ("params", Value::Object(params.collect())),
            ("phases", Value::Array(phases.collect())),
        ];
        if !self.extra.is_empty() {
            let results = self.extra.iter().map(|(k, v, unit)| {
                let result = obj(vec![("value", v.clone()), ("unit", text(unit))]);
                (k.clone(), result)
            });
            doc.push(("results", Value::Object(results.collect())));
        }
        if !self.failures.is_empty() {
            let list = self.failures.iter().map(|f| text(f));
            doc.push(("failures", Value::Array(list.collect())));
        }
        doc.extend(self.sections());
        doc.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
    }
}

/// A phase's length in seconds (never 0: a divisor).
fn secs(p: &PhaseResult) -> f64 {
    p.elapsed.as_secs_f64().max(1e-9)
}

/// The text of JSON fields: `head: key value, key value` for the scalars, then each non-empty
/// object below, indented, and each object of an array headed by its `name`.
fn fields_text(out: &mut String, indent: usize, head: &str, fields: &[(String, Value)]) {
    let nested = |v: &Value| match v {
        Value::Object(_) => true,
        Value::Array(items) => matches!(items.first(), Some(Value::Object(_))),
        _ => false,
    };
    let flat = fields.iter().filter(|(k, v)| !nested(v) && k != "name");
    let flat: Vec<String> = flat.map(|(k, v)| format!("{k} {}", v.to_text())).collect();
    let line = format!("{:indent$}{head}: {}", "", flat.join(", "));
    let _ = writeln!(out, "{}", line.trim_end());
    for (key, value) in fields {
        match value {
            Value::Object(fields) if !fields.is_empty() => {
                fields_text(out, indent + 2, key, fields)
            }
            Value::Array(items) => {
                for item in items {
                    let name = item.get("name").map_or(key.clone(), Value::to_text);
                    if let Value::Object(fields) = item {
                        fields_text(out, indent + 2, &name, fields);
                    }
                }
            }
            _ => {}
        }
    }
}

fn class_json(name: &str, st: &ClassStats, p: &PhaseResult) -> Value {
    let secs = secs(p);
    let codes = |list: &BTreeMap<i32, u64>| {
        Value::Object(list.iter().map(|(c, n)| (c.to_string(), int(*n))).collect())
    };
    let mut fields = vec![
        ("name", text(name)),
        ("ops", int(st.ops)),
        ("ops_per_s", num(st.ops as f64 / secs, 1)),
        ("tx_mb_per_s", num(st.bytes_tx as f64 / 1e6 / secs, 3)),
        ("rx_mb_per_s", num(st.bytes_rx as f64 / 1e6 / secs, 3)),
        ("errors", int(st.errors())),
        ("errors_by_code", codes(&st.errors_by_code)),
        ("expected_by_code", codes(&st.expected_by_code)),
    ];
    fields.extend(st.failures().map(|(key, n)| (key, int(n))));
    let h = &st.hist;
    let us = |ns: u64| num(ns as f64 / 1000.0, 1);
    let percentiles = [
        ("p50", 50.0),
        ("p90", 90.0),
        ("p95", 95.0),
        ("p99", 99.0),
        ("p999", 99.9),
    ];
    let mut latency = vec![("min", us(h.min()))];
    latency.extend(percentiles.map(|(key, p)| (key, us(h.percentile(p)))));
    latency.push(("max", us(h.max())));
    fields.push(("latency_us", obj(latency)));
    obj(fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_process_can_be_sampled() {
        let s = sample_proc("self").unwrap();
        assert!(s.rss_kib > 0);
        assert!(s.hwm_kib >= s.rss_kib);
    }
}
