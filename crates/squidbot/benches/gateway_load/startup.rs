//! Start to healthy: from spawning the gateway to its first `200` from `/health`.

use std::time::{Duration, Instant};

use anyhow::Result;

use crate::processes::{Home, wait_healthy};
use crate::stats::Samples;

/// Start times over several runs in one home.
pub struct StartupReport {
    /// The first run, which also creates the home's database.
    pub first: Duration,
    /// Until the gateway printed its address, later runs.
    pub listening: Samples,
    /// Until `/health` answered 200, later runs.
    pub healthy: Samples,
}

/// Starts and stops the gateway `runs + 1` times.
pub fn measure(home: &Home, runs: usize) -> Result<StartupReport> {
    let mut first = Duration::ZERO;
    let (mut listening, mut healthy) = (Vec::new(), Vec::new());
    for run in 0..=runs {
        let started = Instant::now();
        let (gateway, printed) = home.start_gateway()?;
        wait_healthy(gateway.address()?, Duration::from_secs(10))?;
        let elapsed = started.elapsed();
        drop(gateway);
        if run == 0 {
            first = elapsed;
        } else {
            listening.push(printed);
            healthy.push(elapsed);
        }
    }
    Ok(StartupReport { first, listening: Samples::of_durations(&listening), healthy: Samples::of_durations(&healthy) })
}
