//! What a sandbox costs per command: the `exec` tool running `true` under landlock and
//! under bubblewrap, each alternating with unconfined runs, p50 and p90. Backends that
//! don't work on this machine are reported and skipped.
//!
//! `cargo bench -p squidbot-sandbox --bench spawn` (`SANDBOX_BENCH_RUNS` sets the rounds,
//! `SANDBOX_BENCH_ONLY=landlock` or `bubblewrap` picks one backend).

#![allow(clippy::expect_used, clippy::unwrap_used, reason = "a benchmark fails loudly")]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use squidbot_core::sandbox::{HostShell, Sandbox};
use squidbot_core::tool::{Tool, ToolContext};
use squidbot_sandbox::{Active, LinuxSandbox, SandboxSettings};
use squidbot_tools::{ExecTool, PathGuard};
use squidbot_types::config::ExecConfig;
use squidbot_types::sandbox::{SandboxBackend, SandboxConfig};
use tokio_util::sync::CancellationToken;

fn percentile(sorted: &[Duration], share: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * share).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

/// Runs `true` through every tool in turn, `runs` rounds, so each variant sees the
/// same machine conditions; returns each variant's sorted samples.
async fn measure(tools: &[ExecTool], context: &ToolContext, runs: usize) -> Vec<Vec<Duration>> {
    for tool in tools {
        for _ in 0..10 {
            tool.call(json!({"command": "true"}), context).await.unwrap();
        }
    }
    let mut samples = vec![Vec::with_capacity(runs); tools.len()];
    for _ in 0..runs {
        for (tool, samples) in tools.iter().zip(&mut samples) {
            let started = Instant::now();
            let output = tool.call(json!({"command": "true"}), context).await.unwrap();
            samples.push(started.elapsed());
            assert!(output.content.ends_with("[exit code 0]"), "{}", output.content);
        }
    }
    for samples in &mut samples {
        samples.sort();
    }
    samples
}

fn main() {
    let runs: usize = std::env::var("SANDBOX_BENCH_RUNS").ok().and_then(|runs| runs.parse().ok()).unwrap_or(300);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let directory = tempfile::tempdir().unwrap();
    let home = directory.path().canonicalize().unwrap();
    let workspace = home.join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    let context = ToolContext {
        workspace: workspace.clone(),
        session_key: "bench".to_owned(),
        context: "owner".to_owned(),
        cancel: CancellationToken::new(),
        correlation_id: String::new(),
        actor: None,
        skills_in_use: Default::default(),
    };
    let exec = |sandbox: Arc<dyn Sandbox>| {
        ExecTool::new(PathGuard::restricted_to_workspace(), &ExecConfig::default()).with_sandbox(sandbox)
    };
    let only = std::env::var("SANDBOX_BENCH_ONLY").unwrap_or_default();
    println!(
        "exec of `true`: per backend, {runs} rounds alternating with an unsandboxed run (after 10 warm-up runs each)"
    );
    // One backend at a time: bubblewrap's namespace teardown keeps the kernel busy after
    // each run and would slow whatever runs next.
    for backend in [SandboxBackend::Landlock, SandboxBackend::Bubblewrap] {
        if !only.is_empty() && only != backend.as_str() {
            continue;
        }
        let sandbox = LinuxSandbox::new(SandboxSettings {
            config: SandboxConfig { backend, ..SandboxConfig::default() },
            squidbot_home: home.join(".squidbot"),
            private_files: Vec::new(),
            user_home: Some(home.clone()),
            extra_read_only: Vec::new(),
            helper: PathBuf::from(env!("CARGO_BIN_EXE_squidbot-sandbox-helper")),
        });
        if let Active::Unavailable { reason, .. } = &sandbox.selection().active {
            println!("{:<12} unavailable here: {reason}", backend.as_str());
            continue;
        }
        let tools = [exec(Arc::new(HostShell)), exec(Arc::new(sandbox))];
        let samples = runtime.block_on(measure(&tools, &context, runs));
        let (baseline, sandboxed) = (percentile(&samples[0], 0.5), percentile(&samples[1], 0.5));
        println!(
            "{:<12} p50 {:>6.2} ms  p90 {:>6.2} ms | unsandboxed p50 {:>5.2} ms | overhead at p50 {:>6.2} ms",
            backend.as_str(),
            sandboxed.as_secs_f64() * 1e3,
            percentile(&samples[1], 0.9).as_secs_f64() * 1e3,
            baseline.as_secs_f64() * 1e3,
            (sandboxed.as_secs_f64() - baseline.as_secs_f64()) * 1e3
        );
    }
}
