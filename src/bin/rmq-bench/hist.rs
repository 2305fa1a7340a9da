//! Latency histogram: log-linear buckets with three significant digits (the HdrHistogram
//! layout), so that recording is O(1) and a percentile is one walk over ~30k counters, never
//! a sort of millions of samples.
//!
//! Values below 2048 get one bucket each (exact). Above, every power-of-two range
//! `[2^k, 2^(k+1))` is split into 1024 equal buckets, so a reported value is at most 1/1024
//! (< 0.1 %) above the true sample. A percentile is the "highest equivalent value" of the
//! bucket holding the nearest-rank sample, clamped to the exact recorded maximum.

use std::fmt::Write as _;

/// Values at or above this are clamped (2^40 ns is about 18 minutes).
const MAX_TRACKABLE: u64 = (1 << 40) - 1;
const SUB_BITS: u32 = 10;
const SUB_HALF: u64 = 1 << SUB_BITS; // 1024
const LINEAR: u64 = 2 * SUB_HALF; // values below 2048 are exact

/// Percentile steps per halving of the distance to 100 % in [`Histogram::percentile_distribution`]
/// (HdrHistogram's and wrk2's default).
const TICKS_PER_HALF_DISTANCE: f64 = 5.0;

/// Exponents 11..=39 of the highest set bit each add SUB_HALF buckets.
const BUCKETS: usize = (LINEAR + (40 - (SUB_BITS + 1)) as u64 * SUB_HALF) as usize;

/// Index of the bucket holding `v`.
fn index_of(v: u64) -> usize {
    if v < LINEAR {
        return v as usize;
    }
    let top = 63 - v.leading_zeros(); // >= 11
    let shift = top - SUB_BITS; // >= 1
    let sub = (v >> shift) - SUB_HALF; // 0..1024
    (LINEAR + u64::from(shift - 1) * SUB_HALF + sub) as usize
}

/// Largest value that lands in bucket `i`.
fn highest_in(i: usize) -> u64 {
    let i = i as u64;
    if i < LINEAR {
        return i;
    }
    let shift = (i - LINEAR) / SUB_HALF + 1;
    let sub = (i - LINEAR) % SUB_HALF + SUB_HALF;
    ((sub + 1) << shift) - 1
}

/// 1-based rank of the `p`-th percentile among `n` samples. `p * n / 100` is computed in
/// floating point, where 99.9 % of 1000 comes out a hair above 999: a relative epsilon keeps
/// such exact ranks exact.
pub fn nearest_rank(p: f64, n: u64) -> u64 {
    let x = (p / 100.0) * n as f64;
    let rank = (x * (1.0 - 1e-12)).ceil() as u64;
    rank.clamp(1, n.max(1))
}

/// A histogram of `u64` values (the tool records nanoseconds).
#[derive(Clone)]
pub struct Histogram {
    counts: Vec<u64>,
    total: u64,
    min: u64,
    max: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: vec![0; BUCKETS],
            total: 0,
            min: u64::MAX,
            max: 0,
        }
    }
}

impl Histogram {
    #[inline]
    pub fn record(&mut self, v: u64) {
        let v = v.min(MAX_TRACKABLE);
        self.counts[index_of(v)] += 1;
        self.total += 1;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    pub fn min(&self) -> u64 {
        if self.total == 0 {
            0
        } else {
            self.min
        }
    }

    pub fn max(&self) -> u64 {
        self.max
    }

    /// The `p` percentile since `earlier` was a copy of this histogram (the last second's).
    pub fn percentile_since(&self, earlier: &Histogram, p: f64) -> u64 {
        let n = self.total.saturating_sub(earlier.total);
        let new = self.counts.iter().zip(&earlier.counts);
        nearest(new.map(|(now, then)| now.saturating_sub(*then)), p, n).min(self.max)
    }

    /// Nearest-rank percentile (`p` in 0..=100), to bucket precision; 0 when empty.
    pub fn percentile(&self, p: f64) -> u64 {
        let v = nearest(self.counts.iter().copied(), p, self.total);
        v.min(self.max).max(self.min())
    }

    /// The distribution in HdrHistogram's percentile text format as wrk2 prints it, which its
    /// plotters read: milliseconds, a row per percentile step (finer as 100 % nears: each
    /// halving of the distance gets as many rows) and the 100 % row, then a `#[...]` footer.
    pub fn percentile_distribution(&self) -> String {
        let ms = |ns: f64| ns / 1e6;
        let mut out = String::from("       Value   Percentile   TotalCount 1/(1-Percentile)\n\n");
        let mut row = |value: u64, level: f64, count: u64| {
            let p = level / 100.0;
            let (value, inverse) = (ms(value as f64), 1.0 / (1.0 - p));
            let _ = writeln!(out, "{value:12.3} {p:12.6} {count:12} {inverse:12.2}");
        };
        let (mut level, mut seen, mut sum) = (0.0f64, 0u64, 0.0);
        for (i, &count) in self.counts.iter().enumerate().filter(|(_, c)| **c > 0) {
            seen += count;
            sum += count as f64 * median_in(i);
            let value = highest_in(i);
            while 100.0 * seen as f64 / self.total as f64 >= level {
                row(value, level, seen);
                if seen == self.total {
                    row(value, 100.0, seen);
                    break;
                }
                let halvings = (100.0 / (100.0 - level)).log2() as i32 + 1;
                level += 100.0 / (TICKS_PER_HALF_DISTANCE * 2f64.powi(halvings));
            }
        }
        let mean = sum / self.total.max(1) as f64;
        let squares = self.counts.iter().enumerate().filter(|(_, c)| **c > 0);
        let squares = squares.map(|(i, &c)| c as f64 * (median_in(i) - mean).powi(2));
        let deviation = (squares.sum::<f64>() / self.total.max(1) as f64).sqrt();
        let (mean, deviation, max) = (ms(mean), ms(deviation), ms(self.max as f64));
        let (total, buckets) = (self.total, BUCKETS as u64 / SUB_HALF - 1);
        let _ = write!(
            out,
            "#[Mean    = {mean:12.3}, StdDeviation   = {deviation:12.3}]\n\
             #[Max     = {max:12.3}, Total count    = {total:12}]\n\
             #[Buckets = {buckets:12}, SubBuckets     = {LINEAR:12}]\n"
        );
        out
    }
}

/// The middle of bucket `i` (its lowest value plus half its width), HdrHistogram's stand-in
/// for the values in it when it computes a mean.
fn median_in(i: usize) -> f64 {
    let lowest = if i == 0 { 0 } else { highest_in(i - 1) + 1 };
    let width = highest_in(i) - lowest + 1;
    (lowest + width / 2) as f64
}

/// The highest value of the bucket holding the nearest-rank `p` percentile; 0 when `n` is 0.
fn nearest(counts: impl Iterator<Item = u64>, p: f64, n: u64) -> u64 {
    if n == 0 {
        return 0;
    }
    let rank = nearest_rank(p, n);
    let mut seen = 0u64;
    for (i, c) in counts.enumerate() {
        seen += c;
        if seen >= rank {
            return highest_in(i);
        }
    }
    u64::MAX
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Histogram {
        fn merge(&mut self, other: &Histogram) {
            for (a, b) in self.counts.iter_mut().zip(&other.counts) {
                *a += *b;
            }
            self.total += other.total;
            self.min = self.min.min(other.min);
            self.max = self.max.max(other.max);
        }

        fn count(&self) -> u64 {
            self.total
        }
    }

    #[test]
    fn every_value_maps_into_a_bucket_whose_bounds_contain_it() {
        let mut v = 1u64;
        while v < MAX_TRACKABLE {
            for x in [v - 1, v, v + 1, v + v / 3] {
                let i = index_of(x);
                assert!(i < BUCKETS, "{x}");
                assert!(highest_in(i) >= x, "{x} above its bucket");
                if i > 0 {
                    assert!(highest_in(i - 1) < x, "{x} fits an earlier bucket");
                }
            }
            v *= 2;
        }
        assert_eq!(index_of(MAX_TRACKABLE), BUCKETS - 1);
    }

    #[test]
    fn nearest_rank_is_exact_for_round_percentiles() {
        assert_eq!(nearest_rank(99.9, 1000), 999);
        assert_eq!(nearest_rank(99.0, 100), 99);
        assert_eq!(nearest_rank(50.0, 3), 2);
        assert_eq!(nearest_rank(0.0, 10), 1);
        assert_eq!(nearest_rank(100.0, 10), 10);
        assert_eq!(nearest_rank(99.99, 1000), 1000);
    }

    #[test]
    fn small_values_are_exact() {
        let mut h = Histogram::default();
        for v in 1..=100u64 {
            h.record(v);
        }
        assert_eq!(h.count(), 100);
        assert_eq!(h.min(), 1);
        assert_eq!(h.max(), 100);
        assert_eq!(h.percentile(50.0), 50);
        assert_eq!(h.percentile(90.0), 90);
        assert_eq!(h.percentile(99.0), 99);
        assert_eq!(h.percentile(99.9), 100);
        assert_eq!(h.percentile(100.0), 100);
        assert_eq!(h.percentile(0.0), 1);
    }

    #[test]
    fn percentiles_of_a_skewed_latency_set_match_nearest_rank() {
        // 990 fast requests at 100 us, 9 at 5 ms, one outlier at 250 ms.
        let mut h = Histogram::default();
        for _ in 0..990 {
            h.record(100_000);
        }
        for _ in 0..9 {
            h.record(5_000_000);
        }
        h.record(250_000_000);
        let close = |got: u64, want: u64| got >= want && got - want <= want / 1024;
        assert!(close(h.percentile(50.0), 100_000), "{}", h.percentile(50.0));
        assert!(close(h.percentile(99.0), 100_000), "{}", h.percentile(99.0));
        assert!(close(h.percentile(99.1), 5_000_000));
        assert!(close(h.percentile(99.9), 5_000_000));
        assert_eq!(h.percentile(100.0), 250_000_000);
        assert_eq!(h.max(), 250_000_000);
    }

    #[test]
    fn percentiles_agree_with_a_sorted_reference_within_a_tenth_of_a_percent() {
        // Deterministic pseudo-random samples spanning 1 us .. 100 ms.
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        let mut samples = Vec::new();
        let mut h = Histogram::default();
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let v = 1_000 + (x % 1_000) * (x % 100_000);
            samples.push(v);
            h.record(v);
        }
        samples.sort_unstable();
        for p in [1.0, 25.0, 50.0, 90.0, 99.0, 99.9, 99.99, 100.0] {
            let rank = nearest_rank(p, samples.len() as u64) as usize;
            let want = samples[rank - 1];
            let got = h.percentile(p);
            assert!(
                got >= want && got - want <= want / 1024,
                "p{p}: got {got}, want {want}"
            );
        }
        assert_eq!(h.min(), samples[0]);
        assert_eq!(h.max(), *samples.last().unwrap());
    }

    #[test]
    fn merged_histograms_equal_one_that_saw_everything() {
        let mut a = Histogram::default();
        let mut b = Histogram::default();
        let mut all = Histogram::default();
        for v in 0..5_000u64 {
            let x = v * 37 + 11;
            if v % 3 == 0 {
                a.record(x);
            } else {
                b.record(x);
            }
            all.record(x);
        }
        a.merge(&b);
        for p in [10.0, 50.0, 99.0, 99.9] {
            assert_eq!(a.percentile(p), all.percentile(p));
        }
        assert_eq!(a.count(), all.count());
        assert_eq!(a.min(), all.min());
        assert_eq!(a.max(), all.max());
    }

    #[test]
    fn percentile_since_sees_only_the_newer_samples() {
        let mut h = Histogram::default();
        for v in 0..1000 {
            h.record(1_000_000 + v); // about 1 ms
        }
        let earlier = h.clone();
        assert_eq!(h.percentile_since(&earlier, 99.0), 0);
        for v in 1..=100 {
            h.record(v * 10); // 10..1000 ns
        }
        assert_eq!(h.percentile_since(&earlier, 99.0), 990);
        assert_eq!(h.percentile_since(&earlier, 100.0), 1000);
        assert!(h.percentile(99.0) >= 1_000_000);
    }

    #[test]
    fn one_sample_prints_hdrhistograms_percentile_distribution() {
        let mut h = Histogram::default();
        h.record(1_000); // 1 us
        assert_eq!(
            h.percentile_distribution(),
            "       Value   Percentile   TotalCount 1/(1-Percentile)\n\
             \n       0.001     0.000000            1         1.00\n\
             \x20      0.001     1.000000            1          inf\n\
             #[Mean    =        0.001, StdDeviation   =        0.000]\n\
             #[Max     =        0.001, Total count    =            1]\n\
             #[Buckets =           30, SubBuckets     =         2048]\n"
        );
    }

    #[test]
    fn percentile_rows_step_finer_towards_100_percent() {
        let mut h = Histogram::default();
        for ms in 1..=1000u64 {
            h.record(ms * 1_000_000);
        }
        let text = h.percentile_distribution();
        let rows: Vec<Vec<f64>> = text
            .lines()
            .skip(2)
            .take_while(|l| !l.starts_with('#'))
            .map(|l| l.split_whitespace().map(|w| w.parse().unwrap()).collect())
            .collect();
        let levels: Vec<f64> = rows.iter().take(13).map(|r| r[1]).collect();
        let steps = [
            0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.775, 0.8,
        ];
        assert_eq!(levels, steps);
        assert!(rows
            .windows(2)
            .all(|w| w[0][0] <= w[1][0] && w[0][1] <= w[1][1]));
        let last = rows.last().unwrap();
        // A row's value is the highest of its bucket: within 0.1 % above the sample.
        assert!(last[0] >= 1000.0 && last[0] <= 1001.0, "{last:?}");
        assert_eq!((last[1], last[2]), (1.0, 1000.0));
        assert!(last[3].is_infinite());
        let median = &rows[5];
        assert_eq!((median[1], median[2]), (0.5, 500.0));
        assert!(median[0] >= 500.0 && median[0] <= 500.5, "{median:?}");
        assert!(text.contains("#[Max     =     1000.000, Total count    =         1000]"));
        let mean = text.lines().find(|l| l.starts_with("#[Mean")).unwrap();
        let mean: f64 = mean[12..24].trim().parse().unwrap();
        assert!((mean - 500.5).abs() < 0.5, "{mean}");
    }

    #[test]
    fn empty_histogram_reports_zeros() {
        let h = Histogram::default();
        assert_eq!(h.percentile(99.0), 0);
        assert_eq!(h.min(), 0);
        assert_eq!(h.max(), 0);
    }
}
