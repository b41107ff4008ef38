//! Does memory stay flat? Many one-turn sessions through the OpenAI-compatible API (each
//! request its own `user`, so its own session), then many turns on one session, sampling
//! the gateway's resident memory and open descriptors as it goes.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures_util::StreamExt;
use futures_util::stream;
use serde_json::json;

use crate::processes::{MODEL, Memory, Running, TOKEN};

/// Requests in flight at once (a few clients, as a household's gateway sees).
const IN_FLIGHT: usize = 8;

/// Samples taken over each part.
const SAMPLES: usize = 20;

/// One sample of the gateway's footprint.
#[derive(Debug, Clone, Copy)]
pub struct Footprint {
    /// Turns done when it was taken.
    pub turns: usize,
    /// Resident memory.
    pub memory: Memory,
    /// Open file descriptors.
    pub descriptors: usize,
}

impl Footprint {
    fn of(gateway: &Running, turns: usize) -> Result<Footprint> {
        let descriptors =
            std::fs::read_dir(format!("/proc/{}/fd", gateway.pid())).context("can't list /proc/PID/fd")?.count();
        Ok(Footprint { turns, memory: gateway.memory()?, descriptors })
    }
}

/// One part of the run: its samples and how long it took.
pub struct Part {
    /// What it did.
    pub name: String,
    /// Samples, the first before its first turn.
    pub samples: Vec<Footprint>,
    /// Wall time.
    pub wall: Duration,
}

impl Part {
    /// The spread of resident memory over the last half of the samples, as (lowest,
    /// highest) in KiB.
    pub fn last_half_resident(&self) -> (u64, u64) {
        let half = &self.samples[self.samples.len() / 2..];
        let resident = half.iter().map(|sample| sample.memory.resident_kib);
        (resident.clone().min().unwrap_or(0), resident.max().unwrap_or(0))
    }

    /// The spread of open descriptors over the last half of the samples.
    pub fn last_half_descriptors(&self) -> (usize, usize) {
        let half = &self.samples[self.samples.len() / 2..];
        let descriptors = half.iter().map(|sample| sample.descriptors);
        (descriptors.clone().min().unwrap_or(0), descriptors.max().unwrap_or(0))
    }
}

/// One non-streamed completion as `user`; fails unless it is a 200 with a reply.
async fn turn(http: &reqwest::Client, base: &str, user: &str, index: usize) -> Result<()> {
    let body = json!({
        "model": MODEL, "user": user,
        "messages": [{"role": "user", "content": format!("Note number {index}, please.")}],
    });
    let response = http.post(format!("{base}/v1/chat/completions")).bearer_auth(TOKEN).json(&body).send().await?;
    let status = response.status();
    let answer: serde_json::Value = response.json().await.context("a reply that is not JSON")?;
    if !status.is_success() || answer["choices"][0]["message"]["content"].as_str().is_none_or(str::is_empty) {
        bail!("turn {index} of {user}: {status} {answer}");
    }
    Ok(())
}

/// Runs `turns` turns, the user of each given by `user_of`, `IN_FLIGHT` at a time,
/// sampling the gateway `SAMPLES` times.
pub async fn part(
    gateway: &Running,
    name: &str,
    turns: usize,
    user_of: impl Fn(usize) -> String,
    in_flight: usize,
) -> Result<Part> {
    let http = reqwest::Client::new();
    let started = Instant::now();
    let mut samples = vec![Footprint::of(gateway, 0)?];
    let chunk = turns.div_ceil(SAMPLES).max(1);
    let mut done = 0;
    while done < turns {
        let end = (done + chunk).min(turns);
        let results: Vec<Result<()>> = stream::iter(done..end)
            .map(|index| {
                let (http, user) = (&http, user_of(index));
                async move { turn(http, &gateway.base, &user, index).await }
            })
            .buffer_unordered(in_flight)
            .collect()
            .await;
        if let Some(error) = results.into_iter().find_map(Result::err) {
            return Err(error.context(format!("{name}: a turn failed")));
        }
        done = end;
        samples.push(Footprint::of(gateway, done)?);
    }
    Ok(Part { name: name.to_owned(), samples, wall: started.elapsed() })
}

/// The two parts: `sessions` one-turn sessions, then `turns` turns on one session (one at
/// a time, as one person talks).
pub async fn run(gateway: &Running, sessions: usize, turns: usize) -> Result<Vec<Part>> {
    let many = part(gateway, "one-turn sessions", sessions, |index| format!("soak-user-{index}"), IN_FLIGHT).await?;
    let one = part(gateway, "turns on one session", turns, |_| "soak-long-talk".to_owned(), 1).await?;
    Ok(vec![many, one])
}

/// Prints a part's samples and its flatness over the last half.
pub fn print(part: &Part) {
    let mib = |kib: u64| kib as f64 / 1024.0;
    let last = part.samples.last().map_or(0, |sample| sample.turns);
    println!(
        "\n### {}: {} turns in {:.0} s ({:.0} turns/s)",
        part.name,
        last,
        part.wall.as_secs_f64(),
        last as f64 / part.wall.as_secs_f64()
    );
    for sample in &part.samples {
        println!("  after {:>7} turns: {}, {} descriptors", sample.turns, sample.memory, sample.descriptors);
    }
    let (low, high) = part.last_half_resident();
    let (fewest, most) = part.last_half_descriptors();
    println!(
        "  last half: RSS {:.1} to {:.1} MiB ({:+.1} % spread), descriptors {fewest} to {most}",
        mib(low),
        mib(high),
        if low == 0 { 0.0 } else { 100.0 * (high - low) as f64 / low as f64 }
    );
}

/// What the largest session file (the long talk) holds: its entries, its compactions, and
/// the entries from the latest compaction's first kept one on, which is what an open
/// session keeps in memory (the compactor's working set).
pub fn largest_session(directory: &std::path::Path) -> Result<Option<String>> {
    let mut largest: Option<(u64, std::path::PathBuf)> = None;
    for entry in std::fs::read_dir(directory).context("can't list the sessions")? {
        let entry = entry?;
        let size = entry.metadata()?.len();
        if largest.as_ref().is_none_or(|(biggest, _)| size > *biggest) {
            largest = Some((size, entry.path()));
        }
    }
    let Some((size, path)) = largest else { return Ok(None) };
    let text = std::fs::read_to_string(&path).with_context(|| format!("can't read {}", path.display()))?;
    let lines: Vec<serde_json::Value> = text.lines().filter_map(|line| serde_json::from_str(line).ok()).collect();
    let entries = lines.iter().filter(|line| line["type"].as_str() != Some("header")).count();
    let compactions: Vec<&serde_json::Value> =
        lines.iter().filter(|line| line["type"].as_str() == Some("compaction")).collect();
    let kept = compactions
        .last()
        .and_then(|latest| latest["first_kept"].as_str())
        .and_then(|first| lines.iter().position(|line| line["id"].as_str() == Some(first)))
        .map_or(entries, |position| lines.len() - position);
    Ok(Some(format!(
        "long session: {entries} entries ({:.1} MiB on disk), {} compactions; {kept} entries after the latest one's first kept entry (what stays in memory)",
        size as f64 / 1_048_576.0,
        compactions.len()
    )))
}
