//! Many WebSocket clients at once: all connect, then all send `chat.send` together, each
//! to its own session, against a provider that answers after a fixed latency; then again
//! on the same connections and sessions.

use std::time::{Duration, Instant};

use anyhow::Result;
use futures_util::StreamExt;
use futures_util::stream;
use tokio::sync::{mpsc, watch};

use crate::client;
use crate::processes::cpu_time;

/// Handshakes in flight while connecting, so the listen backlog never overflows.
const CONNECTING_AT_ONCE: usize = 64;

/// One round: every client runs one turn.
pub struct RoundReport {
    /// From the start signal to the last final event.
    pub wall: Duration,
    /// Each completed turn, from its `chat.send` to its final event.
    pub latencies: Vec<Duration>,
    /// What went wrong, one line per failed turn.
    pub errors: Vec<String>,
    /// CPU time each watched process used during the round.
    pub cpu: Vec<(String, Duration)>,
}

/// The whole run.
pub struct LoadReport {
    /// Clients asked for.
    pub clients: usize,
    /// Time to open and authenticate every connection.
    pub connect_wall: Duration,
    /// Connections that failed.
    pub connect_errors: Vec<String>,
    /// The rounds in order.
    pub rounds: Vec<RoundReport>,
}

/// What a client reports after each round.
struct TurnResult {
    round: usize,
    outcome: Result<(Duration, Instant), String>,
}

/// Connects `clients` clients to `url` and runs `rounds` rounds, noting the CPU time the
/// `watched` processes (`None` is this one) use in each.
pub async fn run(url: &str, clients: usize, rounds: usize, watched: &[(&str, Option<u32>)]) -> Result<LoadReport> {
    let started = Instant::now();
    let connected: Vec<Result<client::Socket>> =
        stream::iter(0..clients).map(|_| client::connect(url)).buffer_unordered(CONNECTING_AT_ONCE).collect().await;
    let connect_wall = started.elapsed();
    let mut sockets = Vec::new();
    let mut connect_errors = Vec::new();
    for result in connected {
        match result {
            Ok(socket) => sockets.push(socket),
            Err(error) => connect_errors.push(format!("{error:#}")),
        }
    }
    let (go, signal) = watch::channel(0usize);
    let (report, mut results) = mpsc::unbounded_channel::<TurnResult>();
    let running = sockets.len();
    let mut tasks = Vec::new();
    for (index, mut socket) in sockets.into_iter().enumerate() {
        let mut signal = signal.clone();
        let report = report.clone();
        tasks.push(tokio::spawn(async move {
            let mut broken = None;
            for round in 1..=rounds {
                if signal.wait_for(|released| *released >= round).await.is_err() {
                    return;
                }
                let outcome = match &broken {
                    Some(error) => Err(format!("connection lost earlier: {error}")),
                    None => turn(&mut socket, index, round).await.map_err(|error| format!("{error:#}")),
                };
                if let Err(error) = &outcome {
                    broken.get_or_insert_with(|| error.clone());
                }
                if report.send(TurnResult { round, outcome }).is_err() {
                    return;
                }
            }
            if let Err(error) = socket.close(None).await {
                eprintln!("can't close client {index}: {error}");
            }
        }));
    }
    drop(report);
    let mut reports = Vec::new();
    for round in 1..=rounds {
        // Let the previous round's writes and logs settle.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let cpu_before: Vec<Option<Duration>> = watched.iter().map(|(_, pid)| cpu_time(*pid)).collect();
        let released = Instant::now();
        if go.send(round).is_err() {
            break;
        }
        let mut round_report =
            RoundReport { wall: Duration::ZERO, latencies: Vec::new(), errors: Vec::new(), cpu: Vec::new() };
        let mut last = released;
        for _ in 0..running {
            let Some(result) = results.recv().await else { break };
            debug_assert_eq!(result.round, round);
            match result.outcome {
                Ok((latency, finished)) => {
                    round_report.latencies.push(latency);
                    last = last.max(finished);
                }
                Err(error) => round_report.errors.push(error),
            }
        }
        round_report.wall = last - released;
        for ((name, pid), before) in watched.iter().zip(cpu_before) {
            if let (Some(before), Some(after)) = (before, cpu_time(*pid)) {
                round_report.cpu.push(((*name).to_owned(), after.saturating_sub(before)));
            }
        }
        reports.push(round_report);
    }
    for task in tasks {
        if let Err(error) = task.await {
            eprintln!("a client task failed: {error}");
        }
    }
    Ok(LoadReport { clients, connect_wall, connect_errors, rounds: reports })
}

/// One turn: `chat.send` to the client's own session, then its events until the final one.
async fn turn(socket: &mut client::Socket, index: usize, round: usize) -> Result<(Duration, Instant)> {
    let started = Instant::now();
    let run_id = format!("bench-load-{index}-{round}");
    client::send_chat(socket, &format!("bench-load-{index}"), "hello", &run_id).await?;
    client::until_final(socket, &run_id, |_| {}).await?;
    let finished = Instant::now();
    Ok((finished - started, finished))
}
