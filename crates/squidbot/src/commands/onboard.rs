//! `squidbot onboard`: writes config.toml and a default workspace, by questions or flags,
//! and makes whoever runs it the first user (an admin).

use std::io::{BufRead, Write};
use std::path::Path;

use anyhow::{Context, Result, bail};

use serde_json::json;
use squidbot_core::people::{Directory, OWNER_CONTEXT};
use squidbot_types::config::VaultKeyMode;
use squidbot_types::people::AuditKind;

use crate::cli::OnboardArgs;
use crate::paths::Paths;
use crate::wiring::Environment;

/// Default workspace files written by onboard (never overwriting existing ones).
const WORKSPACE_FILES: [(&str, &str); 6] = [
    ("AGENTS.md", include_str!("../../templates/AGENTS.md")),
    ("SOUL.md", include_str!("../../templates/SOUL.md")),
    ("USER.md", include_str!("../../templates/USER.md")),
    ("IDENTITY.md", include_str!("../../templates/IDENTITY.md")),
    ("TOOLS.md", include_str!("../../templates/TOOLS.md")),
    ("HEARTBEAT.md", include_str!("../../templates/HEARTBEAT.md")),
];

/// The answers onboarding collects.
#[derive(Debug)]
struct Answers {
    provider: String,
    kind: String,
    api_base: String,
    api_key_env: Option<String>,
    api_key: Option<String>,
    model: String,
}

/// Runs onboarding.
pub fn run(arguments: &OnboardArgs) -> Result<()> {
    let paths = Paths::from_env()?;
    let answers = if arguments.non_interactive {
        if paths.config.exists() && !arguments.force {
            bail!("{} already exists; pass --force to replace it", paths.config.display());
        }
        from_flags(arguments)?
    } else {
        let mut input = std::io::stdin().lock();
        if paths.config.exists() && !arguments.force {
            let answer = ask(&mut input, &format!("{} exists. Replace it?", paths.config.display()), "no")?;
            if !answer.to_lowercase().starts_with('y') {
                println!("Keeping the existing config; checking the workspace only.");
                write_workspace(&paths.workspace(None))?;
                // An installation from before there were users gets its first admin.
                if let Err(error) = first_user(Onboarded::ConfigKept) {
                    eprintln!("warning: can't make you the first user: {error:#}");
                }
                return Ok(());
            }
        }
        interactive(arguments, &mut input)?
    };
    let mut answers = answers;
    let vault_key = choose_vault_key(&paths);
    if let Some(key) = answers.api_key.take() {
        answers.api_key = Some(store_key(&paths, vault_key, &answers.provider, &key)?);
    }
    let gateway_token = store_gateway_token(&paths, vault_key)?;
    write_config(&paths.config, &answers, &gateway_token, vault_key)?;
    println!("wrote {}", paths.config.display());
    let workspace = paths.workspace(None);
    write_workspace(&workspace)?;
    std::fs::create_dir_all(paths.sessions())
        .with_context(|| format!("can't create {}", paths.sessions().display()))?;
    if let Some(variable) = &answers.api_key_env
        && answers.api_key.is_none()
        && std::env::var_os(variable).is_none()
        && key_required(&answers.provider)
    {
        println!("note: {variable} is not set in this shell; export it before chatting");
    }
    println!("workspace {}", workspace.display());
    first_user(Onboarded::ConfigWritten(&answers))?;
    println!("Ready. Start chatting with: squidbot agent");
    Ok(())
}

/// What onboarding did with config.toml.
enum Onboarded<'a> {
    /// Wrote it from these answers.
    ConfigWritten(&'a Answers),
    /// Kept the one there.
    ConfigKept,
}

/// Makes the person onboarding the first user (an admin whose context is `owner`, with
/// every channel's `owners` linked) unless there are users already, and writes a config
/// just written to the audit trail.
fn first_user(onboarded: Onboarded<'_>) -> Result<()> {
    let environment = Environment::load()?;
    let database = crate::people::open(&environment)?;
    let people = database.policy(environment.config());
    match onboarded {
        Onboarded::ConfigWritten(answers) => people.audit_as(
            AuditKind::ConfigChange,
            "cli",
            &environment.paths.config.display().to_string(),
            true,
            json!({
                "action": "onboard",
                "provider": answers.provider,
                "model": answers.model,
                "api_base": answers.api_base,
                "api_key": answers.api_key,
            }),
        ),
        Onboarded::ConfigKept => {}
    }
    match database.ensure_owner(environment.config(), &people)? {
        Some(owner) => {
            let linked: Vec<String> =
                database.directory.identities(&owner.id)?.iter().map(ToString::to_string).collect();
            let linked = if linked.is_empty() { String::new() } else { format!("; linked {}", linked.join(", ")) };
            println!(
                "you are the first user: {} ({}), an admin whose memory context is {OWNER_CONTEXT}{linked}",
                owner.id, owner.name
            );
        }
        None => println!("users kept as they are (`squidbot users list` shows them)"),
    }
    Ok(())
}

/// How long onboarding waits for a Secret Service to answer on the session bus.
#[cfg(feature = "keyring")]
const KEYRING_PROBE: std::time::Duration = std::time::Duration::from_secs(1);

/// Where the vault key of the new config lives, said in the output: where the config
/// being replaced kept it, the key file when there is one already (a vault sealed with
/// it), else the OS keyring when a Secret Service answers on the session bus within a
/// second, else a key file (a headless server).
fn choose_vault_key(paths: &Paths) -> VaultKeyMode {
    let kept = crate::config::load_unresolved(&paths.config).ok().map(|loaded| loaded.config.vault.key);
    if let Some(mode @ (VaultKeyMode::Keyring | VaultKeyMode::Passphrase)) = kept {
        println!("vault key: kept as the config being replaced has it ({})", vault_key_name(mode));
        return mode;
    }
    let key_file = crate::config::vault::key_path(&paths.home);
    if key_file.exists() {
        println!("vault key: the key file {} (it exists already)", key_file.display());
        return VaultKeyMode::File;
    }
    match keyring_answers() {
        Ok(()) => {
            println!(
                "vault key: the OS keyring (a Secret Service answered on the session bus); [vault] key = \"keyring\""
            );
            VaultKeyMode::Keyring
        }
        Err(reason) => {
            println!("vault key: the key file {} (no OS keyring: {reason})", key_file.display());
            VaultKeyMode::File
        }
    }
}

fn vault_key_name(mode: VaultKeyMode) -> &'static str {
    match mode {
        VaultKeyMode::File => "file",
        VaultKeyMode::Keyring => "keyring",
        VaultKeyMode::Passphrase => "passphrase",
    }
}

#[cfg(feature = "keyring")]
fn keyring_answers() -> Result<(), String> {
    squidbot_store::keyring_reachable(KEYRING_PROBE)
}

#[cfg(not(feature = "keyring"))]
fn keyring_answers() -> Result<(), String> {
    Err("this squidbot was built without its `keyring` feature".to_owned())
}

/// Stores a pasted API key in the vault as `provider.<name>.api_key` and returns the
/// `secret:` reference config.toml gets instead of the key.
fn store_key(paths: &Paths, vault_key: VaultKeyMode, provider: &str, key: &str) -> Result<String> {
    let name = format!("provider.{provider}.api_key");
    let database = squidbot_store::Database::open(&paths.database())?;
    let vault = crate::config::vault::open(&paths.home, database, vault_key)?;
    vault.set(&name, key)?;
    println!("stored the API key in the vault as {name}");
    Ok(format!("{}{name}", crate::config::vault::SECRET_PREFIX))
}

/// Makes the gateway's token (so the gateway never starts without authentication),
/// stores it in the vault as `gateway.token`, shows it once, and returns the reference
/// config.toml gets.
fn store_gateway_token(paths: &Paths, vault_key: VaultKeyMode) -> Result<String> {
    let name = "gateway.token";
    let database = squidbot_store::Database::open(&paths.database())?;
    let vault = crate::config::vault::open(&paths.home, database, vault_key)?;
    let token = match vault.get(name)? {
        Some(_) => {
            println!("the gateway keeps its token (vault secret {name}; `squidbot secrets rotate {name}` replaces it)");
            return Ok(format!("{}{name}", crate::config::vault::SECRET_PREFIX));
        }
        None => {
            let mut bytes = [0_u8; 24];
            squidbot_core::random::RandomSource::fill(&mut squidbot_core::random::SystemRandom, &mut bytes);
            bytes.iter().map(|byte| format!("{byte:02x}")).collect::<String>()
        }
    };
    vault.set(name, &token)?;
    println!("gateway token (for the web UI and clients; shown once, kept in the vault as {name}): {token}");
    Ok(format!("{}{name}", crate::config::vault::SECRET_PREFIX))
}

fn key_required(provider: &str) -> bool {
    squidbot_llm::preset(provider).is_none_or(|preset| preset.key_required)
}

fn from_flags(arguments: &OnboardArgs) -> Result<Answers> {
    let provider = arguments.provider.clone().context("--provider is required with --non-interactive")?;
    let preset = squidbot_llm::preset(&provider);
    let kind = arguments
        .kind
        .clone()
        .or_else(|| preset.map(|preset| preset.kind.as_str().to_owned()))
        .unwrap_or_else(|| "openai".to_owned());
    let api_base = arguments
        .api_base
        .clone()
        .or_else(|| preset.map(|preset| preset.api_base.to_owned()))
        .with_context(|| format!("--api-base is required: {provider} is not a known preset"))?;
    let model = arguments.model.clone().context("--model is required with --non-interactive")?;
    let api_key_env = arguments.api_key_env.clone().or_else(|| preset.map(|preset| preset.api_key_env.to_owned()));
    let answers = Answers { model: qualify(&provider, &model), provider, kind, api_base, api_key_env, api_key: None };
    check(&answers)?;
    Ok(answers)
}

fn check(answers: &Answers) -> Result<()> {
    if !matches!(answers.kind.as_str(), "openai" | "anthropic") {
        bail!("--kind must be openai or anthropic, not {:?}", answers.kind);
    }
    if !(answers.api_base.starts_with("http://") || answers.api_base.starts_with("https://")) {
        bail!("--api-base must be an http(s) URL, not {:?}", answers.api_base);
    }
    if answers.provider.is_empty() || answers.provider.contains(['/', '.', ' ']) {
        bail!("--provider must be a simple name such as openai or local, not {:?}", answers.provider);
    }
    Ok(())
}

/// `gpt-4o` with provider `openai` → `openai/gpt-4o`; an id already starting with the
/// provider is kept.
fn qualify(provider: &str, model: &str) -> String {
    if model.starts_with(&format!("{provider}/")) { model.to_owned() } else { format!("{provider}/{model}") }
}

fn ask(input: &mut impl BufRead, question: &str, default: &str) -> Result<String> {
    if default.is_empty() {
        print!("{question}: ");
    } else {
        print!("{question} [{default}]: ");
    }
    std::io::stdout().flush()?;
    let mut line = String::new();
    if input.read_line(&mut line)? == 0 {
        bail!("onboarding cancelled (end of input)");
    }
    let answer = line.trim();
    Ok(if answer.is_empty() { default.to_owned() } else { answer.to_owned() })
}

fn interactive(arguments: &OnboardArgs, input: &mut impl BufRead) -> Result<Answers> {
    println!("Welcome to squidbot. A few questions and you are ready (Enter keeps the default).");
    let names: Vec<&str> = squidbot_llm::presets().iter().map(|preset| preset.name).collect();
    println!("Known providers: {} (or any other name for a custom endpoint)", names.join(", "));
    let provider = ask(input, "Provider", arguments.provider.as_deref().unwrap_or("openai"))?;
    let preset = squidbot_llm::preset(&provider);
    let kind_default = arguments.kind.clone().or_else(|| preset.map(|preset| preset.kind.as_str().to_owned()));
    let kind = match (preset, &arguments.kind) {
        (Some(_), None) => kind_default.unwrap_or_default(),
        _ => ask(input, "Wire protocol (openai or anthropic)", kind_default.as_deref().unwrap_or("openai"))?,
    };
    let base_default =
        arguments.api_base.clone().or_else(|| preset.map(|preset| preset.api_base.to_owned())).unwrap_or_default();
    let api_base = ask(input, "API base URL", &base_default)?;
    let env_default = arguments
        .api_key_env
        .clone()
        .or_else(|| preset.map(|preset| preset.api_key_env.to_owned()))
        .unwrap_or_else(|| format!("{}_API_KEY", provider.to_uppercase().replace('-', "_")));
    let api_key_env = ask(input, "Environment variable with the API key", &env_default)?;
    let mut api_key = None;
    if std::env::var_os(&api_key_env).is_none() && key_required(&provider) {
        let pasted =
            ask(input, &format!("{api_key_env} is not set. Paste a key to store in the vault (or leave empty)"), "")?;
        if !pasted.is_empty() {
            api_key = Some(pasted);
        }
    }
    let model_default = arguments.model.clone().unwrap_or_else(|| default_model(&provider).to_owned());
    let model = loop {
        let model = ask(input, "Model", &model_default)?;
        if !model.is_empty() {
            break model;
        }
        println!("A model is needed, e.g. gpt-4o-mini or claude-sonnet-4-5.");
    };
    let answers = Answers {
        model: qualify(&provider, &model),
        provider,
        kind,
        api_base,
        api_key_env: Some(api_key_env),
        api_key,
    };
    check(&answers)?;
    Ok(answers)
}

fn default_model(provider: &str) -> &'static str {
    match provider {
        "openai" => "gpt-4o-mini",
        "anthropic" => "claude-sonnet-4-5",
        "openrouter" => "openai/gpt-4o-mini",
        "groq" => "llama-3.3-70b-versatile",
        "deepseek" => "deepseek-chat",
        "ollama" => "llama3.2",
        _ => "",
    }
}

fn toml_string(value: &str) -> String {
    toml::Value::String(value.to_owned()).to_string()
}

fn write_config(path: &Path, answers: &Answers, gateway_token: &str, vault_key: VaultKeyMode) -> Result<()> {
    let mut text =
        String::from("# squidbot configuration. Reference: docs/configuration.md in the squidbot repository.\n\n");
    text.push_str(&format!("[llm]\nmodel = {}\n\n", toml_string(&answers.model)));
    text.push_str(&format!("[providers.{}]\n", answers.provider));
    text.push_str(&format!("kind = {}\n", toml_string(&answers.kind)));
    text.push_str(&format!("api_base = {}\n", toml_string(&answers.api_base)));
    if let Some(key) = &answers.api_key {
        text.push_str(&format!("api_key = {}\n", toml_string(key)));
    } else if let Some(variable) = &answers.api_key_env {
        text.push_str(&format!("api_key_env = {}\n", toml_string(variable)));
    }
    text.push_str(&format!("\n[gateway.auth]\nmode = \"token\"\ntoken = {}\n", toml_string(gateway_token)));
    match vault_key {
        VaultKeyMode::File => {}
        VaultKeyMode::Keyring | VaultKeyMode::Passphrase => {
            text.push_str(&format!("\n[vault]\nkey = \"{}\"\n", vault_key_name(vault_key)));
        }
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).with_context(|| format!("can't create {}", parent.display()))?;
    }
    let temporary = path.with_extension("toml.tmp");
    std::fs::write(&temporary, text).with_context(|| format!("can't write {}", temporary.display()))?;
    restrict_permissions(&temporary)?;
    std::fs::rename(&temporary, path).with_context(|| format!("can't write {}", path.display()))?;
    Ok(())
}

#[cfg(unix)]
fn restrict_permissions(path: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("can't restrict permissions of {}", path.display()))
}

#[cfg(not(unix))]
fn restrict_permissions(_path: &Path) -> Result<()> {
    Ok(())
}

fn write_workspace(workspace: &Path) -> Result<()> {
    std::fs::create_dir_all(workspace).with_context(|| format!("can't create {}", workspace.display()))?;
    for (name, content) in WORKSPACE_FILES {
        let path = workspace.join(name);
        if path.exists() {
            println!("kept {}", path.display());
            continue;
        }
        std::fs::write(&path, content).with_context(|| format!("can't write {}", path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_ids_are_qualified_once() {
        assert_eq!(qualify("local", "test-model"), "local/test-model");
        assert_eq!(qualify("local", "local/test-model"), "local/test-model");
        assert_eq!(qualify("openrouter", "meta-llama/llama-3"), "openrouter/meta-llama/llama-3");
    }

    #[test]
    fn interactive_answers_are_read_in_order() {
        let arguments = OnboardArgs {
            non_interactive: false,
            provider: None,
            kind: None,
            api_base: None,
            api_key_env: None,
            model: None,
            force: false,
        };
        let mut input =
            std::io::Cursor::new("mybox\nopenai\nhttp://127.0.0.1:9/v1\nMYBOX_KEY_UNSET_FOR_TEST\nsk-pasted\nqwen\n");
        let answers = interactive(&arguments, &mut input).unwrap();
        assert_eq!(answers.provider, "mybox");
        assert_eq!(answers.api_base, "http://127.0.0.1:9/v1");
        assert_eq!(answers.api_key.as_deref(), Some("sk-pasted"));
        assert_eq!(answers.model, "mybox/qwen");
    }
}
