//! Prometheus metrics: the text exposition format 0.0.4 written into a reused buffer
//! ([`Exposition`]), fixed-bucket latency histograms cheap enough for every request
//! ([`Histogram`]), the HTTP answer of the metrics listener (`http`) and the process's own
//! figures read from `/proc/self` (`process`). What each metric means: docs/operations.md#metrics.

pub mod http;
pub mod process;

use std::fmt::Display;
use std::io::Write;
use std::time::Duration;

/// Bucket bounds in microseconds: the loop's goal is 2 ms per request, a route lookup takes
/// a few microseconds, a large registration up to ~1 ms, a durable write milliseconds.
pub const LATENCY_BOUNDS_MICROS: [u64; 14] = [
    5, 10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 100_000, 1_000_000,
];

/// Counts by bucket (not cumulative: one increment per observation) and the sum.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Histogram {
    counts: [u64; LATENCY_BOUNDS_MICROS.len() + 1],
    sum_nanos: u64,
}

impl Histogram {
    pub fn observe(&mut self, took: Duration) {
        let nanos = took.as_nanos().min(u128::from(u64::MAX)) as u64;
        // `le` is inclusive: 5 us falls in the 5 us bucket, 5.001 us in the next.
        let bucket = LATENCY_BOUNDS_MICROS.partition_point(|&bound| bound * 1000 < nanos);
        self.counts[bucket] += 1;
        self.sum_nanos = self.sum_nanos.saturating_add(nanos);
    }

    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }
}

/// Whether a family's samples are counters, gauges or a histogram (the `# TYPE` line).
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// Appends families to `out`; each begins with [`Exposition::family`], then its samples.
pub struct Exposition<'a> {
    out: &'a mut Vec<u8>,
}

/// Label values here are names from the code tables and configured addresses: escaped anyway.
fn write_labels(out: &mut Vec<u8>, labels: &[(&str, &str)]) {
    if labels.is_empty() {
        return;
    }
    out.push(b'{');
    for (i, (name, value)) in labels.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b"=\"");
        for c in value.bytes() {
            match c {
                b'\\' => out.extend_from_slice(b"\\\\"),
                b'"' => out.extend_from_slice(b"\\\""),
                b'\n' => out.extend_from_slice(b"\\n"),
                _ => out.push(c),
            }
        }
        out.push(b'"');
    }
    out.push(b'}');
}

impl<'a> Exposition<'a> {
    pub fn new(out: &'a mut Vec<u8>) -> Self {
        Exposition { out }
    }

    /// The `# HELP` and `# TYPE` lines of `name` (for a counter, with its `_total`).
    pub fn family(&mut self, name: &str, kind: Kind, help: &str) -> &mut Self {
        let (kind, name) = match kind {
            Kind::Counter => ("counter", name.strip_suffix("_total").unwrap_or(name)),
            Kind::Gauge => ("gauge", name),
            Kind::Histogram => ("histogram", name),
        };
        let _ = writeln!(self.out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        self
    }

    pub fn sample(
        &mut self,
        name: &str,
        labels: &[(&str, &str)],
        value: impl Display,
    ) -> &mut Self {
        self.out.extend_from_slice(name.as_bytes());
        write_labels(self.out, labels);
        let _ = writeln!(self.out, " {value}");
        self
    }

    /// A family of one unlabelled sample.
    pub fn single(&mut self, name: &str, kind: Kind, help: &str, value: impl Display) {
        self.family(name, kind, help).sample(name, &[], value);
    }

    /// The `_bucket`, `_sum` and `_count` samples of `h`, in seconds, or in microseconds when
    /// `micros` (the Controller's Java-named histogram).
    pub fn histogram(&mut self, name: &str, labels: &[(&str, &str)], h: &Histogram, micros: bool) {
        // Divided, not multiplied: 25 / 1e6 prints as 0.000025.
        let divisor = if micros { 1.0 } else { 1e6 };
        let mut cumulative = 0;
        let bucket = format!("{name}_bucket");
        for (i, count) in h.counts.iter().enumerate() {
            cumulative += count;
            let le = match LATENCY_BOUNDS_MICROS.get(i) {
                Some(&bound) => (bound as f64 / divisor).to_string(),
                None => "+Inf".to_string(),
            };
            let mut with_le = labels.to_vec();
            with_le.push(("le", &le));
            self.sample(&bucket, &with_le, cumulative);
        }
        let sum = h.sum_nanos as f64 / if micros { 1e3 } else { 1e9 };
        self.sample(&format!("{name}_sum"), labels, sum);
        self.sample(&format!("{name}_count"), labels, cumulative);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observations_fall_in_the_first_bucket_whose_bound_they_do_not_exceed() {
        let mut h = Histogram::default();
        h.observe(Duration::from_nanos(300));
        h.observe(Duration::from_micros(5));
        h.observe(Duration::from_nanos(5_001));
        h.observe(Duration::from_secs(5));
        assert_eq!(h.counts[0], 2);
        assert_eq!(h.counts[1], 1);
        assert_eq!(h.counts[LATENCY_BOUNDS_MICROS.len()], 1);
        assert_eq!(h.count(), 4);
    }

    #[test]
    fn a_histogram_is_written_cumulative_in_seconds() {
        let mut h = Histogram::default();
        h.observe(Duration::from_micros(7));
        h.observe(Duration::from_micros(2_000));
        let mut out = Vec::new();
        let mut e = Exposition::new(&mut out);
        e.family("x_seconds", Kind::Histogram, "test");
        e.histogram("x_seconds", &[("class", "route")], &h, false);
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains("x_seconds_bucket{class=\"route\",le=\"0.00001\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("x_seconds_bucket{class=\"route\",le=\"0.0025\"} 2\n"),
            "{text}"
        );
        assert!(
            text.contains("x_seconds_bucket{class=\"route\",le=\"+Inf\"} 2\n"),
            "{text}"
        );
        assert!(
            text.contains("x_seconds_count{class=\"route\"} 2\n"),
            "{text}"
        );
        assert!(
            text.contains("x_seconds_sum{class=\"route\"} 0.002007\n"),
            "{text}"
        );
    }

    #[test]
    fn label_values_are_escaped() {
        let mut out = Vec::new();
        Exposition::new(&mut out).sample("m", &[("a", "q\"\\\n")], 1);
        assert_eq!(out, b"m{a=\"q\\\"\\\\\\n\"} 1\n");
    }
}
