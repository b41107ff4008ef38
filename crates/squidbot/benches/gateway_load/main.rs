//! Gateway benchmarks against the real release binaries: start to healthy, idle memory,
//! relay overhead per streamed token (SSE API and WebSocket protocol), and many
//! WebSocket clients each running a turn at once against a provider with fixed latency,
//! then the same clients against a null gateway that only relays (the machine's floor).
//!
//! Run: `scripts/bench-gateway` (builds the binaries, then runs this with
//! `cargo bench -p squidbot --bench gateway_load`). Environment: `GATEWAY_BENCH_CLIENTS`
//! (1000), `GATEWAY_BENCH_STARTS` (20), `GATEWAY_BENCH_RELAY_REQUESTS` (20),
//! `GATEWAY_BENCH_LATENCY_MS` (200), `GATEWAY_BENCH_PHASES`
//! (`startup,relay,load,floor`),
//! `GATEWAY_BENCH_HOLD_SECS` (keep the loaded gateway running that long, to attach a
//! profiler), `GATEWAY_BENCH_SOAK_SESSIONS` (100000) and `GATEWAY_BENCH_SOAK_TURNS` (10000)
//! for the `soak` phase (not in the default phases: it runs for many minutes), the
//! `leakscan` phase (the relay with an empty vault against one of 100 values), `SQUIDBOT_BIN` and `SQUIDBOT_SCRIPTED_LLM` to measure other builds;
//! `MALLOC_ARENA_MAX` and `RUST_LOG` are passed on to the gateway.

mod client;
mod leak_scan;
mod load;
mod null_gateway;
mod processes;
mod relay;
mod soak;
mod startup;
mod stats;

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};

use load::LoadReport;
use processes::{Home, Running, problem_lines, scripted_llm, wait_healthy};
use stats::Samples;

/// What to run, from the environment.
struct Settings {
    clients: usize,
    starts: usize,
    relay_requests: usize,
    latency: Duration,
    phases: Vec<String>,
    /// How long to keep the loaded gateway running for a profiler or debugger.
    hold: Option<Duration>,
    /// One-turn sessions, then turns on one session, of the soak phase.
    soak_sessions: usize,
    soak_turns: usize,
}

impl Settings {
    fn from_environment() -> Result<Settings> {
        let number = |name: &str, default: usize| -> Result<usize> {
            match std::env::var(name) {
                Ok(value) => value.parse().with_context(|| format!("{name}={value:?} is not a number")),
                Err(_) => Ok(default),
            }
        };
        let phases = std::env::var("GATEWAY_BENCH_PHASES").unwrap_or_else(|_| "startup,relay,load,floor".to_owned());
        Ok(Settings {
            clients: number("GATEWAY_BENCH_CLIENTS", 1000)?,
            starts: number("GATEWAY_BENCH_STARTS", 20)?,
            relay_requests: number("GATEWAY_BENCH_RELAY_REQUESTS", 20)?,
            latency: Duration::from_millis(number("GATEWAY_BENCH_LATENCY_MS", 200)? as u64),
            phases: phases.split(',').map(|phase| phase.trim().to_owned()).collect(),
            hold: std::env::var("GATEWAY_BENCH_HOLD_SECS")
                .ok()
                .map(|seconds| seconds.parse().map(Duration::from_secs))
                .transpose()
                .context("GATEWAY_BENCH_HOLD_SECS is not a number")?,
            soak_sessions: number("GATEWAY_BENCH_SOAK_SESSIONS", 100_000)?,
            soak_turns: number("GATEWAY_BENCH_SOAK_TURNS", 10_000)?,
        })
    }

    fn runs(&self, phase: &str) -> bool {
        self.phases.iter().any(|wanted| wanted == phase)
    }
}

fn main() -> ExitCode {
    // The floor phase runs this binary again as the null gateway.
    if let Ok(provider_base) = std::env::var(null_gateway::ENVIRONMENT_VARIABLE) {
        return null_gateway::main(&provider_base);
    }
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<()> {
    let settings = Settings::from_environment()?;
    let work = tempfile::tempdir().context("can't make a work directory")?;
    println!("gateway: {}", processes::gateway_binary().display());
    println!("scripted provider: {}", processes::scripted_llm_binary().display());
    println!("cores: {}", std::thread::available_parallelism().map_or(0, usize::from));
    // Other work on the machine skews every number below; say how busy it was.
    println!("load average: {}", std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim());
    if settings.runs("startup") {
        startup_phase(&settings, work.path())?;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("can't start tokio")?;
    if settings.runs("idle") {
        runtime.block_on(idle_phase(work.path()))?;
    }
    if settings.runs("relay") {
        runtime.block_on(relay_phase(&settings, work.path()))?;
    }
    if settings.runs("leakscan") {
        runtime.block_on(leak_scan_phase(&settings, work.path()))?;
    }
    if settings.runs("load") {
        open_files_suffice(settings.clients)?;
        runtime.block_on(load_phase(&settings, work.path()))?;
    }
    if settings.runs("floor") {
        open_files_suffice(settings.clients)?;
        runtime.block_on(floor_phase(&settings, work.path()))?;
    }
    if settings.runs("soak") {
        runtime.block_on(soak_phase(&settings, work.path()))?;
    }
    Ok(())
}

/// Many one-turn sessions, then many turns on one session, against a provider that
/// answers at once: the gateway's memory and descriptors must come back to flat.
async fn soak_phase(settings: &Settings, work: &std::path::Path) -> Result<()> {
    let provider_log = work.join("provider-soak.log");
    let provider = scripted_llm(&["--reply", "Noted."], &provider_log)?;
    let (home, gateway) = healthy_gateway(&provider)?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let idle = gateway.memory()?;
    println!("\n## soak: memory and descriptors over many sessions and a long one (default config)");
    println!("idle (healthy + 1 s): {idle}");
    let parts = soak::run(&gateway, settings.soak_sessions, settings.soak_turns).await?;
    for part in &parts {
        soak::print(part);
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let end = gateway.memory()?;
    println!(
        "at the end (+ 2 s): {end}; {:+.1} MiB over idle",
        (end.resident_kib as f64 - idle.resident_kib as f64) / 1024.0
    );
    if let Some(long) = soak::largest_session(&home.path().join("sessions"))? {
        println!("{long}");
    }
    report_problems("gateway", &home.log());
    report_problems("provider", &provider_log);
    drop(gateway);
    Ok(())
}

/// Starts a gateway in a fresh home against `provider` and waits until it is healthy.
fn healthy_gateway(provider: &Running) -> Result<(Home, Running)> {
    let home = Home::new(&provider.base)?;
    let (gateway, _) = home.start_gateway()?;
    wait_healthy(gateway.address()?, Duration::from_secs(10))?;
    Ok((home, gateway))
}

fn startup_phase(settings: &Settings, work: &std::path::Path) -> Result<()> {
    let provider = scripted_llm(&[], &work.join("provider-startup.log"))?;
    let home = Home::new(&provider.base)?;
    let report = startup::measure(&home, settings.starts)?;
    println!("\n## start to healthy ({} runs after a first one that creates the database)", settings.starts);
    println!("first start: {:.1} ms", report.first.as_secs_f64() * 1000.0);
    println!("spawn to `listening on`: {}", report.listening.summary(1));
    println!("spawn to /health 200:    {}", report.healthy.summary(1));
    println!("median start to healthy: {:.1} ms (target < 100 ms)", report.healthy.percentile(0.5));
    Ok(())
}

async fn relay_phase(settings: &Settings, work: &std::path::Path) -> Result<()> {
    let options = relay::provider_options();
    let options: Vec<&str> = options.iter().map(String::as_str).collect();
    let provider = scripted_llm(&options, &work.join("provider-relay.log"))?;
    let (home, gateway) = healthy_gateway(&provider)?;
    let report = relay::measure(&provider.base, &gateway.base, settings.relay_requests).await?;
    println!(
        "\n## relay overhead per token ({} replies of {} words, {} ms apart; provider send stamp to client receipt)",
        settings.relay_requests,
        relay::WORDS,
        relay::WORD_INTERVAL.as_millis()
    );
    println!("client <- provider directly:     {}", report.direct.summary(3));
    println!("client <- gateway SSE API:       {}", report.sse.summary(3));
    println!("client <- gateway WebSocket:     {}", report.websocket.summary(3));
    println!(
        "added by the gateway (SSE minus direct): p50 {:.3} ms, p99 {:.3} ms (target p99 < 1 ms)",
        report.sse.percentile(0.5) - report.direct.percentile(0.5),
        report.sse.percentile(0.99) - report.direct.percentile(0.99)
    );
    report_problems("gateway", &home.log());
    report_problems("provider", &work.join("provider-relay.log"));
    drop(gateway);
    Ok(())
}

/// The streaming relay with an empty vault against one holding 100 values.
async fn leak_scan_phase(settings: &Settings, work: &std::path::Path) -> Result<()> {
    let options = relay::provider_options();
    let options: Vec<&str> = options.iter().map(String::as_str).collect();
    let provider = scripted_llm(&options, &work.join("provider-leakscan.log"))?;
    println!(
        "\n## leak scan with {} vault values: relay per token ({} rounds of {} replies each way)",
        leak_scan::VAULT_VALUES,
        5,
        settings.relay_requests
    );
    leak_scan::measure(&provider, 5, settings.relay_requests).await
}

/// The resident memory of a gateway that has started and done nothing, alone (the load
/// phase reports it too, before its clients connect).
async fn idle_phase(work: &std::path::Path) -> Result<()> {
    let provider = scripted_llm(&["--reply", "Noted."], &work.join("provider-idle.log"))?;
    let (_home, gateway) = healthy_gateway(&provider)?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    println!("\n## idle gateway memory");
    println!("after start (healthy + 1 s): {} (target < 15 MB)", gateway.memory()?);
    Ok(())
}

/// The provider of the load phases: one short reply after the configured latency.
fn load_provider(settings: &Settings, log: &std::path::Path) -> Result<Running> {
    let latency = settings.latency.as_millis().to_string();
    scripted_llm(&["--reply", "Done, all good.", "--delay-ms", &latency], log)
}

async fn load_phase(settings: &Settings, work: &std::path::Path) -> Result<()> {
    let provider_log = work.join("provider-load.log");
    let provider = load_provider(settings, &provider_log)?;
    let (home, gateway) = healthy_gateway(&provider)?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let idle = gateway.memory()?;
    println!("\n## idle gateway memory");
    println!("after start (healthy + 1 s): {idle} (target < 15 MB)");
    let url = gateway.base.replace("http://", "ws://");
    let watched = [("gateway", Some(gateway.pid())), ("provider", Some(provider.pid())), ("clients", None)];
    let report = load::run(&url, settings.clients, 2, &watched).await?;
    println!(
        "\n## {} concurrent WebSocket clients, one turn each per round, provider latency {} ms",
        report.clients,
        settings.latency.as_millis()
    );
    print_load(&report, settings.latency);
    tokio::time::sleep(Duration::from_secs(2)).await;
    println!("after the load (clients gone + 2 s): {} (target < 15 MB)", gateway.memory()?);
    if let Some(hold) = settings.hold {
        println!("holding the gateway (pid {}) for {} s for inspection", gateway.pid(), hold.as_secs());
        tokio::time::sleep(hold).await;
        println!("after holding: {}", gateway.memory()?);
    }
    report_problems("gateway", &home.log());
    report_problems("provider", &provider_log);
    drop(gateway);
    fail_on_errors(&report)
}

/// The load phase against the null gateway: what the network hops alone cost with the same
/// clients and provider on this machine, the most any gateway here can reach.
async fn floor_phase(settings: &Settings, work: &std::path::Path) -> Result<()> {
    let provider_log = work.join("provider-floor.log");
    let provider = load_provider(settings, &provider_log)?;
    let null_gateway_log = work.join("null-gateway.log");
    let null_gateway = null_gateway::start(&provider.base, &null_gateway_log)?;
    wait_healthy(null_gateway.address()?, Duration::from_secs(10))?;
    let url = null_gateway.base.replace("http://", "ws://");
    let watched = [("null gateway", Some(null_gateway.pid())), ("provider", Some(provider.pid())), ("clients", None)];
    let report = load::run(&url, settings.clients, 2, &watched).await?;
    println!(
        "\n## floor: the same clients against a relay that does nothing else ({} clients, provider latency {} ms)",
        report.clients,
        settings.latency.as_millis()
    );
    print_load(&report, settings.latency);
    report_problems("null gateway", &null_gateway_log);
    report_problems("provider", &provider_log);
    drop(null_gateway);
    fail_on_errors(&report)
}

/// The connection line and, per round, throughput against the ideal of every turn done
/// in one provider `latency`, turn latencies and each watched process's CPU time.
fn print_load(report: &LoadReport, latency: Duration) {
    println!(
        "connect + handshake of all clients: {:.0} ms, {} failed",
        report.connect_wall.as_secs_f64() * 1000.0,
        report.connect_errors.len()
    );
    for error in report.connect_errors.iter().take(5) {
        println!("  connect error: {error}");
    }
    let ideal = latency.as_secs_f64();
    for (number, round) in report.rounds.iter().enumerate() {
        let wall = round.wall.as_secs_f64();
        let throughput = round.latencies.len() as f64 / wall;
        println!(
            "round {}: {} completed, {} errors, wall {:.0} ms, {:.0} turns/s = {:.0} % of ideal ({:.0} turns/s)",
            number + 1,
            round.latencies.len(),
            round.errors.len(),
            wall * 1000.0,
            throughput,
            100.0 * ideal / wall * round.latencies.len() as f64 / report.clients as f64,
            report.clients as f64 / ideal
        );
        println!("  turn latency: {}", Samples::of_durations(&round.latencies).summary(1));
        let cpu: Vec<String> =
            round.cpu.iter().map(|(name, time)| format!("{name} {:.0} ms", time.as_secs_f64() * 1000.0)).collect();
        println!("  CPU time during the round: {}", cpu.join(", "));
        for error in round.errors.iter().take(5) {
            println!("  error: {error}");
        }
    }
}

fn fail_on_errors(report: &LoadReport) -> Result<()> {
    if report.rounds.iter().any(|round| !round.errors.is_empty()) || !report.connect_errors.is_empty() {
        bail!("the load run had errors");
    }
    Ok(())
}

fn report_problems(name: &str, log: &std::path::Path) {
    let problems = problem_lines(log);
    if !problems.is_empty() {
        println!("{name} log: {} warning/error lines, first: {}", problems.len(), problems[0]);
    }
}

/// Each client needs a descriptor here and two in the gateway (its socket and the
/// provider connection); the limit is inherited, so the shell's `ulimit -n` decides.
fn open_files_suffice(clients: usize) -> Result<()> {
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap_or_default();
    let soft: Option<usize> = limits
        .lines()
        .find(|line| line.starts_with("Max open files"))
        .and_then(|line| line.split_whitespace().nth(3))
        .and_then(|value| value.parse().ok());
    match soft {
        Some(soft) if soft < clients * 2 + 256 => {
            bail!("the open-file limit is {soft}; raise it first, e.g. `ulimit -n {}`", clients * 2 + 1024)
        }
        _ => Ok(()),
    }
}
