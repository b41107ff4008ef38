//! `[channels.<name>]` read for use: checked (a channel has what its kind needs), its
//! credentials resolved from the config or the environment, its access policy built.

use squidbot_channels::{AccessConfig, DirectPolicy, GroupPolicy};
use squidbot_llm::ConfigIssue;
use squidbot_types::Secret;
use squidbot_types::config::{CHANNEL_KINDS, ChannelConfig, Config};

/// The kinds this build can run (each adapter is a cargo feature of the binary).
pub fn compiled_kinds() -> Vec<&'static str> {
    let mut kinds = vec!["webhook"];
    if cfg!(feature = "telegram") {
        kinds.push("telegram");
    }
    if cfg!(feature = "discord") {
        kinds.push("discord");
    }
    if cfg!(feature = "slack") {
        kinds.push("slack");
    }
    if cfg!(feature = "matrix") {
        kinds.push("matrix");
    }
    if cfg!(feature = "email") {
        kinds.push("email");
    }
    kinds
}

/// A credential given inline or by the name of an environment variable.
pub fn credential(inline: Option<&Secret>, variable: Option<&String>) -> Result<Option<Secret>, String> {
    if let Some(value) = inline.filter(|value| !value.is_empty()) {
        return Ok(Some(value.clone()));
    }
    match variable {
        Some(variable) => match std::env::var(variable) {
            Ok(value) if !value.is_empty() => Ok(Some(Secret::new(value))),
            _ => Err(format!("names {variable}, which is not set")),
        },
        None => Ok(None),
    }
}

/// The access policy settings of a channel.
pub fn access(config: &ChannelConfig) -> AccessConfig {
    AccessConfig {
        owners: config.owners.clone(),
        direct: match config.policy.as_str() {
            "allowlist" => DirectPolicy::Allowlist,
            "pairing" => DirectPolicy::Pairing,
            "open" => DirectPolicy::Open,
            _ => DirectPolicy::OwnerOnly,
        },
        groups: match config.groups.as_str() {
            "always" => GroupPolicy::Always,
            "allowlist" => GroupPolicy::Allowlist,
            _ => GroupPolicy::Mention,
        },
        allowed_senders: config.allow_from.clone(),
        allowed_rooms: config.allow_rooms.clone(),
        refusal: config.refusal.clone(),
    }
}

fn is_loopback_host(host: &str) -> bool {
    host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|address| address.is_loopback())
}

/// Problems of `[channels.*]`: unknown kinds or values, kinds this build lacks, missing
/// credentials, plain-text mail to another machine.
/// Settings that are valid but don't do what they seem to: `allow_from` under the
/// default `owner_only` policy is ignored for messages.
pub fn warnings(config: &Config) -> Vec<ConfigIssue> {
    config
        .channels
        .iter()
        .filter(|(_, channel)| channel.enabled && channel.policy == "owner_only" && !channel.allow_from.is_empty())
        .map(|(name, _)| ConfigIssue {
            key: format!("channels.{name}.allow_from"),
            problem: format!(
                "set, but channels.{name}.policy is owner_only, so nobody in it is answered: set policy = \
                 \"allowlist\" (or \"pairing\") to let them in"
            ),
        })
        .collect()
}

pub fn issues(config: &Config) -> Vec<ConfigIssue> {
    let mut issues = Vec::new();
    let compiled = compiled_kinds();
    for (name, channel) in config.channels.iter().filter(|(_, channel)| channel.enabled) {
        let issue = |issues: &mut Vec<ConfigIssue>, field: &str, problem: String| {
            issues.push(ConfigIssue { key: format!("channels.{name}.{field}"), problem });
        };
        let kind = channel.kind_of(name);
        if !CHANNEL_KINDS.contains(&kind) {
            let field = if channel.kind.is_some() { "kind" } else { "kind (unset: the table's name)" };
            issue(&mut issues, field, format!("{kind:?} is not one of {}", CHANNEL_KINDS.join(", ")));
            continue;
        }
        if !compiled.contains(&kind) {
            issue(
                &mut issues,
                "kind",
                format!("this squidbot was built without the {kind} channel (cargo feature {kind:?})"),
            );
            continue;
        }
        if !["owner_only", "allowlist", "pairing", "open"].contains(&channel.policy.as_str()) {
            issue(&mut issues, "policy", format!("{:?} is not owner_only, allowlist, pairing or open", channel.policy));
        }
        if !["mention", "always", "allowlist"].contains(&channel.groups.as_str()) {
            issue(&mut issues, "groups", format!("{:?} is not mention, always or allowlist", channel.groups));
        }
        if name.is_empty()
            || name.contains(|character: char| !(character.is_ascii_alphanumeric() || "-_".contains(character)))
        {
            issue(&mut issues, "", "a channel's name is letters, digits, - and _".to_owned());
        }
        let secret =
            |inline: Option<&Secret>, variable: Option<&String>, field: &str, issues: &mut Vec<ConfigIssue>| {
                match credential(inline, variable) {
                    Ok(value) => value.is_some(),
                    Err(problem) => {
                        issues.push(ConfigIssue { key: format!("channels.{name}.{field}_env"), problem });
                        true
                    }
                }
            };
        match kind {
            "telegram" | "discord" => {
                let token = secret(channel.token.as_ref(), channel.token_env.as_ref(), "token", &mut issues);
                need_field(&mut issues, name, kind, "token", token);
            }
            "slack" => {
                let token = secret(channel.token.as_ref(), channel.token_env.as_ref(), "token", &mut issues);
                need_field(&mut issues, name, kind, "token", token);
                let app = secret(channel.app_token.as_ref(), channel.app_token_env.as_ref(), "app_token", &mut issues);
                need_field(&mut issues, name, kind, "app_token", app);
            }
            "matrix" => {
                let token = secret(channel.token.as_ref(), channel.token_env.as_ref(), "token", &mut issues);
                let password =
                    secret(channel.password.as_ref(), channel.password_env.as_ref(), "password", &mut issues);
                need_field(&mut issues, name, kind, "homeserver", channel.homeserver.is_some());
                need_field(&mut issues, name, kind, "user_id", channel.user_id.is_some());
                need_field(&mut issues, name, kind, "token (or password)", token || password);
                if !["allowed", "all", "none"].contains(&channel.auto_join.as_str()) {
                    issues.push(ConfigIssue {
                        key: format!("channels.{name}.auto_join"),
                        problem: format!("{:?} is not allowed, all or none", channel.auto_join),
                    });
                }
            }
            "email" => {
                let password =
                    secret(channel.password.as_ref(), channel.password_env.as_ref(), "password", &mut issues);
                need_field(&mut issues, name, kind, "address", channel.address.is_some());
                need_field(&mut issues, name, kind, "imap_host", channel.imap_host.is_some());
                need_field(&mut issues, name, kind, "smtp_host", channel.smtp_host.is_some());
                need_field(&mut issues, name, kind, "password", password);
                for (field, security, host) in [
                    ("imap_security", &channel.imap_security, &channel.imap_host),
                    ("smtp_security", &channel.smtp_security, &channel.smtp_host),
                ] {
                    if !["tls", "starttls", "plain"].contains(&security.as_str()) {
                        issues.push(ConfigIssue {
                            key: format!("channels.{name}.{field}"),
                            problem: format!("{security:?} is not tls, starttls or plain"),
                        });
                    } else if security == "plain" && host.as_deref().is_some_and(|host| !is_loopback_host(host)) {
                        issues.push(ConfigIssue {
                            key: format!("channels.{name}.{field}"),
                            problem: "plain (unencrypted) is only allowed to a server on this machine".to_owned(),
                        });
                    }
                }
            }
            _ => {
                let secret = secret(channel.secret.as_ref(), channel.secret_env.as_ref(), "secret", &mut issues);
                need_field(&mut issues, name, kind, "secret", secret);
            }
        }
        if channel.max_attachment_mb == 0 {
            issue(&mut issues, "max_attachment_mb", "must be at least 1".to_owned());
        }
    }
    issues
}

fn need_field(issues: &mut Vec<ConfigIssue>, name: &str, kind: &str, field: &str, present: bool) {
    if !present {
        issues.push(ConfigIssue {
            key: format!("channels.{name}.{field}"),
            problem: format!("a {kind} channel needs it"),
        });
    }
}

/// Every secret value of the channels (for the leak scanner).
pub fn secret_values(config: &Config) -> Vec<String> {
    let mut values = Vec::new();
    for channel in config.channels.values() {
        for (inline, variable) in [
            (&channel.token, &channel.token_env),
            (&channel.app_token, &channel.app_token_env),
            (&channel.password, &channel.password_env),
            (&channel.secret, &channel.secret_env),
        ] {
            if let Ok(Some(value)) = credential(inline.as_ref(), variable.as_ref()) {
                values.push(value.expose().to_owned());
            }
        }
    }
    values
}
