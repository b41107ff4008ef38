//! Percentiles of measured samples.

use std::time::Duration;

/// Samples in milliseconds, sorted once for reading percentiles.
pub struct Samples {
    sorted: Vec<f64>,
}

impl Samples {
    /// Takes the samples in any order.
    pub fn new(mut values: Vec<f64>) -> Samples {
        values.sort_by(f64::total_cmp);
        Samples { sorted: values }
    }

    /// From durations.
    pub fn of_durations(durations: &[Duration]) -> Samples {
        Samples::new(durations.iter().map(|duration| duration.as_secs_f64() * 1000.0).collect())
    }

    /// How many.
    pub fn count(&self) -> usize {
        self.sorted.len()
    }

    /// The nearest-rank percentile (`0.5` is the median); 0 without samples.
    pub fn percentile(&self, fraction: f64) -> f64 {
        if self.sorted.is_empty() {
            return 0.0;
        }
        let rank = (fraction * self.sorted.len() as f64).ceil() as usize;
        self.sorted[rank.clamp(1, self.sorted.len()) - 1]
    }

    /// The largest.
    pub fn max(&self) -> f64 {
        self.sorted.last().copied().unwrap_or(0.0)
    }

    /// The smallest.
    pub fn min(&self) -> f64 {
        self.sorted.first().copied().unwrap_or(0.0)
    }

    /// One line: count, min, p50, p90, p99, max in milliseconds with `decimals` places.
    pub fn summary(&self, decimals: usize) -> String {
        format!(
            "n={} min {:.d$} p50 {:.d$} p90 {:.d$} p99 {:.d$} max {:.d$} ms",
            self.count(),
            self.min(),
            self.percentile(0.5),
            self.percentile(0.9),
            self.percentile(0.99),
            self.max(),
            d = decimals
        )
    }
}
