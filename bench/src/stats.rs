//! Medians and percentiles of samples.

use std::time::Duration;

/// A summary of timed samples.
#[derive(Debug, Clone, Copy)]
pub struct Summary {
    pub n: usize,
    pub median: Duration,
    pub p90: Duration,
}

impl Summary {
    /// Summarizes `samples` (at least one).
    pub fn of(samples: &[Duration]) -> Summary {
        let mut sorted = samples.to_vec();
        sorted.sort_unstable();
        let n = sorted.len();
        if n == 0 {
            return Summary {
                n,
                median: Duration::ZERO,
                p90: Duration::ZERO,
            };
        }
        let median = if n % 2 == 1 {
            sorted[n / 2]
        } else {
            (sorted[n / 2 - 1] + sorted[n / 2]) / 2
        };
        // Nearest rank: the smallest sample with at least 90% of the samples at or below it.
        let rank = (n * 9).div_ceil(10).max(1);
        Summary {
            n,
            median,
            p90: sorted[rank - 1],
        }
    }
}

/// A signed difference `a - b` in milliseconds.
pub fn diff_ms(a: Duration, b: Duration) -> f64 {
    ms(a) - ms(b)
}

/// A duration in milliseconds.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The median and p90 of signed values.
pub fn median_p90(values: &[f64]) -> (f64, f64) {
    let mut sorted = values.to_vec();
    sorted.sort_unstable_by(f64::total_cmp);
    let n = sorted.len();
    if n == 0 {
        return (0.0, 0.0);
    }
    let median = if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    };
    let rank = (n * 9).div_ceil(10).max(1);
    (median, sorted[rank - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_p90() {
        let samples: Vec<Duration> = (1..=10).map(Duration::from_millis).collect();
        let s = Summary::of(&samples);
        assert_eq!(s.median, Duration::from_micros(5500));
        assert_eq!(s.p90, Duration::from_millis(9));
        let odd = Summary::of(&samples[..3]);
        assert_eq!(odd.median, Duration::from_millis(2));
        assert_eq!(odd.p90, Duration::from_millis(3));
    }
}
