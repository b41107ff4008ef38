//! The processes under test: the scripted provider and the gateway, each started from its
//! release binary in a temporary home and stopped when dropped, and their memory use as
//! the kernel reports it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};

/// The bearer token of every benchmark gateway.
pub const TOKEN: &str = "bench-gateway-token";

/// The model the gateway is configured with.
pub const MODEL: &str = "local/bench-model";

/// The provider's API key in the gateway's config.
pub const API_KEY: &str = "sk-bench";

/// The gateway binary: `SQUIDBOT_BIN`, else the one cargo built for this benchmark.
pub fn gateway_binary() -> PathBuf {
    std::env::var_os("SQUIDBOT_BIN").map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_squidbot")), PathBuf::from)
}

/// The scripted provider: `SQUIDBOT_SCRIPTED_LLM`, else beside the gateway binary.
pub fn scripted_llm_binary() -> PathBuf {
    std::env::var_os("SQUIDBOT_SCRIPTED_LLM")
        .map_or_else(|| gateway_binary().with_file_name("squidbot-scripted-llm"), PathBuf::from)
}

/// A child process, killed and reaped when dropped.
pub struct Running {
    child: Child,
    /// Kept open so a late write to stdout can't fail in the child.
    _stdout: BufReader<ChildStdout>,
    /// The base URL from its `listening on` line.
    pub base: String,
}

impl Running {
    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The listening address.
    pub fn address(&self) -> Result<SocketAddr> {
        let authority = self.base.trim_start_matches("http://").split('/').next().unwrap_or_default();
        authority.parse().with_context(|| format!("can't read an address from {}", self.base))
    }

    /// The current and peak resident memory.
    pub fn memory(&self) -> Result<Memory> {
        Memory::of(self.pid())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Err(error) = self.child.kill() {
            eprintln!("can't stop process {}: {error}", self.child.id());
        }
        if let Err(error) = self.child.wait() {
            eprintln!("can't reap process {}: {error}", self.child.id());
        }
    }
}

/// Spawns `command` with stdout piped and waits for its `listening on URL` line.
pub fn spawn_listening(mut command: Command) -> Result<(Running, Duration)> {
    let started = Instant::now();
    let mut child = command.stdout(Stdio::piped()).spawn().with_context(|| format!("can't start {command:?}"))?;
    let stdout = child.stdout.take().context("stdout is piped")?;
    let mut stdout = BufReader::new(stdout);
    // A wrapper (a profiler, say) may print lines of its own first.
    let mut printed = Vec::new();
    for _ in 0..20 {
        let mut line = String::new();
        match stdout.read_line(&mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        if let Some(base) = line.trim().strip_prefix("listening on ") {
            let base = base.to_owned();
            return Ok((Running { child, _stdout: stdout, base }, started.elapsed()));
        }
        printed.push(line);
    }
    if let Err(error) = child.kill() {
        eprintln!("can't stop {command:?}: {error}");
    }
    bail!("{command:?} printed {printed:?} but no `listening on URL` line")
}

/// Starts the scripted provider with extra `options`, its stderr in `log`.
pub fn scripted_llm(options: &[&str], log: &Path) -> Result<Running> {
    let binary = scripted_llm_binary();
    if !binary.exists() {
        bail!(
            "{} is missing: build it with `cargo build --release -p squidbot-testkit --bin squidbot-scripted-llm` \
             or name it in SQUIDBOT_SCRIPTED_LLM",
            binary.display()
        );
    }
    let mut command = Command::new(binary);
    command.args(["--port", "0"]).args(options).stdin(Stdio::null()).stderr(log_file(log)?);
    Ok(spawn_listening(command)?.0)
}

/// `path` opened for appending, for a child's stderr.
pub fn log_file(path: &Path) -> Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("can't open {}", path.display()))
}

/// A squidbot home whose config points at one OpenAI-compatible provider.
pub struct Home {
    directory: tempfile::TempDir,
}

impl Home {
    /// A home using the provider at `provider_base` and token auth.
    pub fn new(provider_base: &str) -> Result<Home> {
        let directory = tempfile::tempdir().context("can't make a temporary home")?;
        let config = format!(
            "[llm]\nmodel = \"{MODEL}\"\n\n[providers.local]\nkind = \"openai\"\napi_base = \"{provider_base}\"\n\
             api_key = \"{API_KEY}\"\n\n[gateway.auth]\ntoken = \"{TOKEN}\"\n"
        );
        std::fs::write(directory.path().join("config.toml"), config).context("can't write config.toml")?;
        Ok(Home { directory })
    }

    /// The home's directory.
    pub fn path(&self) -> &std::path::Path {
        self.directory.path()
    }

    /// Where the gateway's stderr goes.
    pub fn log(&self) -> PathBuf {
        self.directory.path().join("gateway.log")
    }

    /// `squidbot gateway --port 0` in this home, with a clean environment.
    pub fn gateway_command(&self) -> Result<Command> {
        let mut command = Command::new(gateway_binary());
        command
            .args(["gateway", "--port", "0"])
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.directory.path())
            .env("SQUIDBOT_HOME", self.directory.path())
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stderr(log_file(&self.log())?);
        // Passed through for experiments (allocator arenas, log levels).
        for name in ["MALLOC_ARENA_MAX", "RUST_LOG"] {
            if let Some(value) = std::env::var_os(name) {
                command.env(name, value);
            }
        }
        Ok(command)
    }

    /// Starts the gateway; returns it with the time until it printed its address.
    pub fn start_gateway(&self) -> Result<(Running, Duration)> {
        spawn_listening(self.gateway_command()?)
    }
}

/// `GET /health` over a fresh connection; true on a 200.
pub fn healthy(address: SocketAddr) -> bool {
    let Ok(mut stream) = TcpStream::connect(address) else { return false };
    let request = format!("GET /health HTTP/1.1\r\nhost: {address}\r\nconnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut status = [0u8; 12];
    stream.read_exact(&mut status).is_ok() && status.starts_with(b"HTTP/1.1 200")
}

/// Polls `/health` until it answers 200.
pub fn wait_healthy(address: SocketAddr, patience: Duration) -> Result<()> {
    let deadline = Instant::now() + patience;
    while !healthy(address) {
        if Instant::now() > deadline {
            bail!("{address} was not healthy within {patience:?}");
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    Ok(())
}

/// Resident memory of a process, from `/proc/PID/status`.
#[derive(Debug, Clone, Copy)]
pub struct Memory {
    /// `VmRSS`: resident now, in KiB.
    pub resident_kib: u64,
    /// `VmHWM`: the peak so far, in KiB.
    pub peak_kib: u64,
    /// `RssAnon`: heap, stacks and other private memory, in KiB.
    pub anonymous_kib: u64,
    /// `RssFile`: mapped files, mostly the binary's own code, in KiB.
    pub file_kib: u64,
    /// `Threads`.
    pub threads: u64,
}

impl Memory {
    fn of(pid: u32) -> Result<Memory> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).context("can't read /proc/PID/status")?;
        let field = |name: &str| -> Result<u64> {
            let line = status.lines().find(|line| line.starts_with(name)).ok_or_else(|| anyhow!("no {name}"))?;
            let number = line.split_whitespace().nth(1).ok_or_else(|| anyhow!("no value in {line:?}"))?;
            number.parse().with_context(|| format!("can't read {line:?}"))
        };
        Ok(Memory {
            resident_kib: field("VmRSS:")?,
            peak_kib: field("VmHWM:")?,
            anonymous_kib: field("RssAnon:")?,
            file_kib: field("RssFile:")?,
            threads: field("Threads:")?,
        })
    }
}

impl std::fmt::Display for Memory {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mib = |kib: u64| kib as f64 / 1024.0;
        write!(
            formatter,
            "RSS {:.1} MiB = {:.1} MiB anonymous + {:.1} MiB file-backed (peak {:.1} MiB), {} threads",
            mib(self.resident_kib),
            mib(self.anonymous_kib),
            mib(self.file_kib),
            mib(self.peak_kib),
            self.threads
        )
    }
}

/// CPU time (user + system) a process has used so far; `None` once it is gone.
pub fn cpu_time(pid: Option<u32>) -> Option<Duration> {
    let path = pid.map_or_else(|| "/proc/self/stat".to_owned(), |pid| format!("/proc/{pid}/stat"));
    let stat = std::fs::read_to_string(path).ok()?;
    // Fields after the parenthesised command name, which may itself hold spaces; utime
    // and stime are fields 14 and 15 of the whole line.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // USER_HZ is 100 on every Linux this runs on.
    Some(Duration::from_millis(ticks * 10))
}

/// Lines of a log that mention a problem.
pub fn problem_lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|line| line.contains("ERROR") || line.contains("WARN") || line.contains("violation"))
        .map(str::to_owned)
        .collect()
}
