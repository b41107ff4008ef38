//! What an executable `before_tool` hook adds to a tool call: a no-op hook (a shell
//! script answering `{"decision":"allow"}`) run through `ExecutableHooks` in the sandbox
//! backend in force (landlock when it works here, else what the probe picks), against the
//! call path with no hooks configured (finding none that match), and against the same hook
//! run with no sandbox (what starting a program costs on this machine at this moment).
//! Alternating, one call each, so all see the same machine; p50 and p99 and the added
//! time per call.
//!
//! `cargo bench -p squidbot-sandbox --bench hooks`; `HOOK_BENCH_RUNS` (default 300) sets
//! the rounds.

#![allow(clippy::expect_used, clippy::unwrap_used, reason = "a benchmark fails loudly")]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use squidbot_core::sandbox::Sandbox;
use squidbot_sandbox::{Active, LinuxSandbox, SandboxSettings};
use squidbot_tools::hooks::ExecutableHooks;
use squidbot_types::hooks::{HookConfig, HookEvent};
use squidbot_types::sandbox::{SandboxBackend, SandboxConfig};

fn percentile(sorted: &[Duration], share: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * share).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

fn milliseconds(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

/// One tool call's hook step: every matching `before_tool` hook run, in order.
async fn before_tool(hooks: &ExecutableHooks, input: &serde_json::Value) -> usize {
    let mut allowed = 0;
    for hook in hooks.matching(HookEvent::BeforeTool, "read_file") {
        hooks.run(hook, input).await.expect("the hook answers");
        allowed += 1;
    }
    allowed
}

fn main() {
    let runs: usize = std::env::var("HOOK_BENCH_RUNS").ok().and_then(|runs| runs.parse().ok()).unwrap_or(300);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let directory = tempfile::tempdir().unwrap();
    let home = directory.path().canonicalize().unwrap();
    std::fs::create_dir_all(home.join("workspace")).unwrap();
    // Outside the user's home, which the sandbox hides, as an installed hook would be.
    let programs = tempfile::tempdir().unwrap();
    let script = programs.path().join("allow.sh");
    std::fs::write(&script, "#!/bin/sh\nprintf '{\"decision\":\"allow\"}'\n").unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let sandbox = LinuxSandbox::new(SandboxSettings {
        config: SandboxConfig { backend: SandboxBackend::Auto, ..SandboxConfig::default() },
        squidbot_home: home.join(".squidbot"),
        private_files: Vec::new(),
        user_home: Some(home.clone()),
        extra_read_only: Vec::new(),
        helper: PathBuf::from(env!("CARGO_BIN_EXE_squidbot-sandbox-helper")),
    });
    let selection = sandbox.selection();
    if let Active::Unavailable { reason, .. } = &selection.active {
        println!("the sandbox does not work here ({reason}); hooks would refuse to run");
        return;
    }
    println!("backend in force: {} ({})", selection.active.name(), selection.reason);
    let sandbox: Arc<dyn Sandbox> = Arc::new(sandbox);
    let hook = HookConfig {
        event: "before_tool".to_owned(),
        command: vec![script.display().to_string()],
        timeout_ms: 5_000,
        tools: Vec::new(),
        fail_open: false,
        write: Vec::new(),
    };
    let with_hook = ExecutableHooks::new(std::slice::from_ref(&hook), sandbox.clone()).unwrap();
    // The same hook unconfined: what starting any program costs here, beside the rest.
    let unconfined = ExecutableHooks::new(&[hook], Arc::new(squidbot_core::sandbox::HostShell)).unwrap();
    let without = ExecutableHooks::new(&[], sandbox).unwrap();
    let input = json!({
        "tool": "read_file", "arguments": {"path": "notes/todo.txt"},
        "session": "bench", "context": "owner", "user": "ann",
    });
    let samples = runtime.block_on(async {
        for _ in 0..10 {
            assert_eq!(before_tool(&with_hook, &input).await, 1);
        }
        let mut samples = [Vec::with_capacity(runs), Vec::with_capacity(runs), Vec::with_capacity(runs)];
        for _ in 0..runs {
            for (hooks, samples) in [&without, &with_hook, &unconfined].into_iter().zip(&mut samples) {
                let started = Instant::now();
                std::hint::black_box(before_tool(hooks, &input).await);
                samples.push(started.elapsed());
            }
        }
        samples
    });
    let [mut baseline, mut hooked, mut bare] = samples;
    baseline.sort();
    hooked.sort();
    bare.sort();
    println!("{runs} tool calls each, alternating, after 10 warm-up calls");
    println!(
        "no hooks           p50 {:>8.4} ms  p99 {:>8.4} ms",
        milliseconds(percentile(&baseline, 0.5)),
        milliseconds(percentile(&baseline, 0.99))
    );
    println!(
        "no-op before_tool  p50 {:>8.3} ms  p99 {:>8.3} ms",
        milliseconds(percentile(&hooked, 0.5)),
        milliseconds(percentile(&hooked, 0.99))
    );
    println!(
        "same hook, no sandbox p50 {:>8.3} ms  p99 {:>8.3} ms (what starting a program costs here)",
        milliseconds(percentile(&bare, 0.5)),
        milliseconds(percentile(&bare, 0.99))
    );
    println!(
        "confined / unconfined p50 ratio {:.2}",
        milliseconds(percentile(&hooked, 0.5)) / milliseconds(percentile(&bare, 0.5))
    );
    println!(
        "added per call     p50 {:>8.3} ms  p99 {:>8.3} ms",
        milliseconds(percentile(&hooked, 0.5)) - milliseconds(percentile(&baseline, 0.5)),
        milliseconds(percentile(&hooked, 0.99)) - milliseconds(percentile(&baseline, 0.99))
    );
}
