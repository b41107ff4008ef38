//! `squidbot gateway`: serves the OpenClaw protocol, the OpenAI-compatible API, the web
//! UI, `/health` and `/metrics` on one port until Ctrl-C or SIGTERM, then finishes running
//! turns; `gateway hash-password` makes the
//! hash for password auth.

use std::io::IsTerminal as _;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result, anyhow, bail};
use squidbot_core::events::EventHub;
use squidbot_core::runs::Runner;
use squidbot_core::scheduler::JobControl;
use squidbot_llm::ConfigIssue;
use squidbot_server::tls::{Tls, TlsFiles};
use squidbot_server::{Auth, Gateway, JobServices, ProviderSummary, Services};
use squidbot_types::Secret;
use squidbot_types::config::{GatewayAuthMode, GatewayConfig};
use squidbot_types::sandbox::SandboxBackend;
use tokio_util::sync::CancellationToken;

use crate::cli::{GatewayAction, GatewayArgs};
use crate::wiring::Environment;

fn auth(environment: &Environment) -> Result<Auth> {
    auth_of(&environment.config().gateway.auth)
}

/// The gateway's auth from `[gateway.auth]`, or why the gateway would refuse to start.
pub fn auth_of(config: &squidbot_types::config::GatewayAuthConfig) -> Result<Auth> {
    match config.mode {
        GatewayAuthMode::None => Ok(Auth::None),
        GatewayAuthMode::Token => {
            if let Some(token) = config.token.clone().filter(|token| !token.is_empty()) {
                return Ok(Auth::Token(token));
            }
            if let Some(variable) = &config.token_env {
                let value = std::env::var(variable)
                    .with_context(|| format!("gateway.auth.token_env names {variable}, which is not set"))?;
                return Ok(Auth::Token(Secret::new(value)));
            }
            bail!("gateway.auth.mode is token but neither gateway.auth.token nor gateway.auth.token_env is set")
        }
        GatewayAuthMode::Password => {
            let (key, hash) = if let Some(hash) = config.password_hash.clone().filter(|hash| !hash.is_empty()) {
                ("gateway.auth.password_hash", hash)
            } else if let Some(variable) = &config.password_hash_env {
                let value = std::env::var(variable)
                    .with_context(|| format!("gateway.auth.password_hash_env names {variable}, which is not set"))?;
                ("gateway.auth.password_hash_env", Secret::new(value))
            } else {
                bail!(
                    "gateway.auth.mode is password but neither gateway.auth.password_hash nor \
                     gateway.auth.password_hash_env is set (`squidbot gateway hash-password` makes a hash)"
                )
            };
            Auth::from_password_hash(hash.expose()).map_err(|problem| anyhow!("can't use {key}: {problem}"))
        }
    }
}

/// Why listening on `address` with `auth` is refused: no authentication off loopback.
pub fn unauthenticated_bind(auth: &Auth, address: IpAddr) -> Option<String> {
    (matches!(auth, Auth::None) && !address.is_loopback()).then(|| {
        format!(
            "refusing to listen on {address} without authentication: set gateway.auth.mode = \"token\" or bind to 127.0.0.1"
        )
    })
}

/// The files of `[gateway.tls]` (relative paths under `home`, `~/` expanded), `None`
/// when TLS is off; one without the other is a problem.
pub fn tls_files(config: &GatewayConfig, home: &Path) -> Result<Option<TlsFiles>, ConfigIssue> {
    let resolve = |path: &str| home.join(crate::paths::expand_tilde(path));
    let missing = |key: &str| ConfigIssue { key: key.into(), problem: "not set: TLS needs both cert and key".into() };
    match (&config.tls.cert, &config.tls.key) {
        (None, None) => Ok(None),
        (Some(cert), Some(key)) => Ok(Some(TlsFiles { cert: resolve(cert), key: resolve(key) })),
        (Some(_), None) => Err(missing("gateway.tls.key")),
        (None, Some(_)) => Err(missing("gateway.tls.cert")),
    }
}

/// Reads and checks `[gateway.tls]`'s certificate and key, `None` when TLS is off.
pub fn load_tls(config: &GatewayConfig, home: &Path) -> Result<Option<Tls>, ConfigIssue> {
    let Some(files) = tls_files(config, home)? else { return Ok(None) };
    Tls::load(files).map(Some).map_err(|error| ConfigIssue { key: error.key().into(), problem: error.to_string() })
}

/// Runs a `squidbot gateway …` helper that needs no config.
pub fn helper(action: &GatewayAction) -> Result<()> {
    match action {
        GatewayAction::HashPassword => hash_password(),
    }
}

/// Prints the argon2id hash of the password read from standard input.
fn hash_password() -> Result<()> {
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        eprintln!("password (typed text is visible; pipe it in to avoid that):");
    }
    let mut line = String::new();
    stdin.read_line(&mut line).context("can't read the password from standard input")?;
    let password = line.strip_suffix('\n').map_or(line.as_str(), |rest| rest.strip_suffix('\r').unwrap_or(rest));
    if password.is_empty() {
        bail!("can't hash an empty password: give one line on standard input");
    }
    let hash = Auth::hash_password(password).map_err(|problem| anyhow!(problem))?;
    println!("{hash}");
    eprintln!("hint: in config.toml under [gateway.auth] set mode = \"password\" and password_hash = \"{hash}\"");
    Ok(())
}

/// Lists the skills the prompt sees, discovered afresh (cheap when nothing changed).
fn skill_lister(environment: &Environment) -> squidbot_server::SkillLister {
    let catalog = environment.skill_catalog();
    let enabled = environment.config().skills.enabled;
    Arc::new(move || {
        if !enabled {
            return Vec::new();
        }
        catalog.discover().skills.iter().map(squidbot_skills::Skill::summary).collect()
    })
}

/// Runs the gateway.
pub async fn run(environment: &Environment, arguments: &GatewayArgs) -> Result<()> {
    let config = &environment.config().gateway;
    let bind = arguments.bind.clone().unwrap_or_else(|| config.bind.clone());
    let port = arguments.port.unwrap_or(config.port);
    let address: IpAddr = bind.parse().with_context(|| format!("--bind: {bind:?} is not an IP address"))?;
    let auth = auth(environment)?;
    if let Some(problem) = unauthenticated_bind(&auth, address) {
        bail!("{problem}");
    }
    let tls = load_tls(config, &environment.paths.home).map_err(|issue| anyhow!("can't start the gateway: {issue}"))?;
    for warning in crate::channels::settings::warnings(environment.config()) {
        eprintln!("warning: {warning}");
        tracing::warn!("{warning}");
    }
    let agent = Arc::new(environment.ready_assistant(None, true, "gateway")?);
    let people = environment.people()?;
    let people_database = environment.people_database()?;
    let directory = people_database.directory.clone();
    refuse_unconfined_people(environment, &people)?;
    let mut models = vec![agent.settings().model.clone()];
    models.extend(environment.config().llm.fallbacks.iter().cloned());
    models.extend(environment.config().agents.keys().map(|role| format!("squidbot/{role}")));
    models.dedup();
    let providers = environment
        .router()?
        .describe()
        .into_iter()
        .map(|info| ProviderSummary {
            name: info.name,
            kind: format!("{:?}", info.kind),
            api_base: info.api_base,
            vision: info.vision,
        })
        .collect();
    let mut services = Services {
        memories: Some(Arc::new(environment.memories()?)),
        documents: Some(environment.documents()),
        memory_context: crate::wiring::OWNER_CONTEXT.to_owned(),
        document_cap: environment.config().memory.document_cap,
        providers,
        config: Some(environment.config().clone()),
        skills: Some(skill_lister(environment)),
        bus: Some(environment.bus()?),
        jobs: None,
        channels: None,
        people: Some(people.clone()),
        audit_key: Some(people_database.key.clone()),
        token_issued: Some(Arc::new(move |user: &str| directory.token_created_ms(user))),
        session_search: Some(Arc::new(environment.session_search()?)),
        attachments: Some(Arc::new(squidbot_store::SessionFiles::new(environment.paths.sessions()))),
    };
    let listener = tokio::net::TcpListener::bind(SocketAddr::new(address, port))
        .await
        .with_context(|| format!("can't listen on {address}:{port}"))?;
    let runner = Runner::with_limits(agent, EventHub::new(), environment.open_session_limits());
    let shutdown = CancellationToken::new();
    let scheduler = crate::jobs::start(environment, &runner, shutdown.clone()).await?;
    services.jobs = Some(JobServices {
        store: match &scheduler {
            Some(running) => running.store.clone(),
            None => Arc::new(squidbot_store::SqliteJobStore::new(environment.database()?)),
        },
        control: scheduler.as_ref().map(|running| Arc::new(running.handle.clone()) as Arc<dyn JobControl>),
        owner_context: crate::wiring::OWNER_CONTEXT.to_owned(),
        default_zone: environment.job_zone(),
    });
    let channels = crate::channels::start(environment, &runner, shutdown.clone())?;
    services.channels = channels.as_ref().map(|running| running.services.clone());
    // Turns that waited for an admin when squidbot last stopped are gone: end their
    // requests and tell their people (the channels are up to carry the note).
    spawn_audit_retention(&people_database, environment.config().audit.retention_days, shutdown.clone());
    let abandoned = people.abandon_pending();
    if !abandoned.is_empty() {
        tracing::info!(count = abandoned.len(), "ended approval requests left pending by the last run");
    }
    let hooks = runner.agent().hooks().clone();
    let gateway = Gateway::new(runner, auth, models, services);
    let local = listener.local_addr()?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    println!("listening on {scheme}://{local}");
    let signals = shutdown.clone();
    tokio::spawn(async move {
        wait_for_signal().await;
        signals.cancel();
    });
    let served = match tls {
        Some(tls) => squidbot_server::run_tls(listener, tls, gateway, shutdown.clone()).await,
        None => squidbot_server::run(listener, gateway, shutdown.clone()).await,
    };
    shutdown.cancel();
    if let Some(scheduler) = scheduler {
        scheduler.stopped().await;
    }
    if let Some(channels) = channels
        && let Err(error) = channels.done.await
    {
        tracing::warn!(%error, "the channel manager ended abnormally");
    }
    // Hooks still observing (each bounded by its timeout) finish before the process ends.
    hooks.close().await;
    served.context("the gateway stopped")?;
    eprintln!("gateway stopped");
    Ok(())
}

/// Prunes audit rows older than `retention_days` (0: keep everything) at start and once a
/// day; the head is re-sealed so the kept rows still verify.
fn spawn_audit_retention(people: &crate::people::PeopleDatabase, retention_days: u64, shutdown: CancellationToken) {
    if retention_days == 0 {
        return;
    }
    let audit = people.audit.clone();
    tokio::spawn(async move {
        let mut daily = tokio::time::interval(std::time::Duration::from_secs(24 * 60 * 60));
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                _ = daily.tick() => {}
            }
            let keep_ms = i64::try_from(retention_days.saturating_mul(86_400_000)).unwrap_or(i64::MAX);
            let before = squidbot_core::clock::unix_millis(std::time::SystemTime::now()).saturating_sub(keep_ms);
            let audit = audit.clone();
            match tokio::task::spawn_blocking(move || audit.prune_before(before)).await {
                Ok(Ok(0)) => {}
                Ok(Ok(pruned)) => tracing::info!(pruned, retention_days, "pruned old audit rows"),
                Ok(Err(error)) => tracing::warn!(%error, "can't prune the audit trail"),
                Err(error) => tracing::warn!(%error, "the audit pruning task failed"),
            }
        }
    });
}

/// Refuses to start while a person whose people's role may run `exec` would have their
/// commands run unconfined (only admins may).
fn refuse_unconfined_people(environment: &Environment, people: &squidbot_core::people::People) -> Result<()> {
    use squidbot_core::sandbox::Sandbox as _;
    let sandbox = environment.sandbox();
    if sandbox.confinement().isolates_host {
        return Ok(());
    }
    let users = people.stores().directory.users().map_err(|error| anyhow!(error))?;
    let problems = crate::people::unconfined_exec(environment.config(), SandboxBackend::None, &users);
    if problems.is_empty() {
        return Ok(());
    }
    bail!("refusing to start: commands run unconfined here ({}): {}", sandbox.backend(), problems.join("; "))
}

async fn wait_for_signal() {
    let mut terminate = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(terminate) => terminate,
        Err(error) => {
            tracing::warn!(%error, "can't watch SIGTERM; Ctrl-C still stops the gateway");
            if tokio::signal::ctrl_c().await.is_err() {
                std::future::pending::<()>().await;
            }
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
}
