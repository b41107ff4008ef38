//! The gateway's chat channels: `[channels.<name>]` turned into adapters (each platform
//! a cargo feature), their access policies over the database, and the channel manager
//! that runs them.

mod adapters;
pub mod settings;

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Result, anyhow};
use squidbot_channels::{
    AccessPolicy, ApprovedSenders, ChannelEntry, ChannelManager, DynChannel, ManagerSettings, PairingCodes,
    SystemRandom, WebhookChannel, Webhooks,
};
use squidbot_core::clock::SystemClock;
use squidbot_core::runs::Runner;
use squidbot_core::webhook::DynWebhookHandler;
use squidbot_server::ChannelServices;
use squidbot_store::{ChannelAccessStore, SessionFiles, SqliteChannelAccess};
use tokio_util::sync::CancellationToken;

use crate::wiring::Environment;

/// The channels of a running gateway.
pub struct RunningChannels {
    /// What the server shows and the webhook route.
    pub services: ChannelServices,
    /// Ends when the manager has stopped every adapter.
    pub done: tokio::task::JoinHandle<()>,
}

/// Starts the enabled channels of the config on `runner`; `None` when there are none.
pub fn start(
    environment: &Environment,
    runner: &Arc<Runner>,
    shutdown: CancellationToken,
) -> Result<Option<RunningChannels>> {
    let config = environment.config();
    let enabled: Vec<_> = config.channels.iter().filter(|(_, channel)| channel.enabled).collect();
    if enabled.is_empty() {
        return Ok(None);
    }
    let access = SqliteChannelAccess::new(ChannelAccessStore::new(environment.database()?));
    let pairing = Arc::new(PairingCodes::with_store(Box::new(SystemRandom), Arc::new(access.clone())));
    let approved: Arc<dyn ApprovedSenders> = Arc::new(access);
    let mut entries = Vec::new();
    let mut webhooks = Webhooks::default();
    for (name, channel) in enabled {
        let kind = channel.kind_of(name).to_owned();
        let adapter: Arc<dyn DynChannel> = if kind == "webhook" {
            let secret = settings::credential(channel.secret.as_ref(), channel.secret_env.as_ref())
                .map_err(|problem| anyhow!("channels.{name}.secret_env {problem}"))?
                .ok_or_else(|| anyhow!("channels.{name}: a webhook channel needs secret or secret_env"))?;
            let reply_timeout = Duration::from_secs(channel.reply_timeout_secs.max(1));
            let hook = Arc::new(WebhookChannel::new(name, secret, reply_timeout, Arc::new(SystemClock)));
            webhooks.add(hook.clone());
            hook
        } else {
            adapters::build(environment, name, &kind, channel)?
        };
        let policy = Arc::new(AccessPolicy::new(
            name.clone(),
            settings::access(channel),
            approved.clone(),
            pairing.clone(),
            Arc::new(SystemClock),
        ));
        entries.push(ChannelEntry { channel: adapter, kind, policy });
    }
    let attachments = Arc::new(SessionFiles::new(environment.paths.sessions()));
    let manager = Arc::new(
        ChannelManager::new(runner.clone(), entries, attachments, Box::new(SystemRandom), ManagerSettings::default())
            .with_models(configured_models(environment, &runner.agent().settings().model)),
    );
    if let Some(people) = runner.agent().people() {
        people.set_notifier(Arc::new(squidbot_channels::ChannelNotifier::new(&manager)));
    }
    let listed = manager.clone();
    let list = Arc::new(move || listed.health());
    let webhooks = (!webhooks.is_empty()).then(|| Arc::new(webhooks) as Arc<dyn DynWebhookHandler>);
    let done = tokio::spawn(manager.run(shutdown));
    Ok(Some(RunningChannels { services: ChannelServices { list, webhooks }, done }))
}

/// The models the configuration names (the assistant's, its fallbacks, each role's), the
/// one in use first: what `/model` may choose in a chat.
pub fn configured_models(environment: &Environment, current: &str) -> Vec<String> {
    let config = environment.config();
    let mut models = vec![current.to_owned(), config.llm.model.clone()];
    models.extend(config.llm.fallbacks.iter().cloned());
    models.extend(config.agents.values().filter_map(|agent| agent.model.clone()));
    models.retain(|model| !model.is_empty());
    let mut seen = std::collections::HashSet::new();
    models.retain(|model| seen.insert(model.clone()));
    models
}
