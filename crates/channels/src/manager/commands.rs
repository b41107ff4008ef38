//! The commands every channel understands: `/new` (`/reset`), `/stop`, `/status`,
//! `/fork` (ask the last message again on a new branch), `/compact`, `/model [NAME]` (the
//! owner's and admins'), and under the people's policy `/usage`, `/approve ID` and
//! `/deny ID [reason]`.

use squidbot_core::people::{People, UsageSubject, budget};
use squidbot_types::people::Actor;

use super::ChannelManager;
use crate::people::{Budget, usage_report};

/// What the people commands answer when no people's policy is wired.
const NO_PEOPLE: &str = "Users and roles are not enabled on this squidbot.";

/// The commands, as `/status` lists them.
const COMMAND_LIST: &str =
    "/new, /stop, /status, /fork, /compact, /model [NAME], /usage, /approve ID, /deny ID [reason]";

/// A command someone wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Command {
    /// A fresh conversation.
    New,
    /// Stop the running turn.
    Stop,
    /// Go back before the last message: the next one continues on a new branch.
    Fork,
    /// Condense the older turns now.
    Compact,
    /// List the models (`None`) or choose one for the session.
    Model { name: Option<String> },
    /// Model, session, channels.
    Status,
    /// What the writer used, and their budget.
    Usage,
    /// Approve a waiting request (`None`: the id is missing).
    Approve { id: Option<String> },
    /// Deny a waiting request, maybe saying why.
    Deny { id: Option<String>, reason: Option<String> },
}

/// The first word of `text` and the rest after it.
fn first_word(text: &str) -> Option<(&str, &str)> {
    let text = text.trim_start();
    if text.is_empty() {
        return None;
    }
    Some(text.split_once(char::is_whitespace).unwrap_or((text, "")))
}

/// The command `text` is, if its first word is one (`/new@bot` is `/new`, as Telegram
/// writes commands in groups).
pub(super) fn command(text: &str) -> Option<Command> {
    let (word, rest) = first_word(text)?;
    let word = word.split('@').next().unwrap_or(word).to_ascii_lowercase();
    let id_and_rest = || match first_word(rest) {
        Some((id, after)) => (Some(id.to_owned()), Some(after.trim()).filter(|after| !after.is_empty())),
        None => (None, None),
    };
    match word.as_str() {
        "/new" | "/reset" => Some(Command::New),
        "/stop" => Some(Command::Stop),
        "/fork" => Some(Command::Fork),
        "/compact" => Some(Command::Compact),
        "/model" => Some(Command::Model { name: id_and_rest().0 }),
        "/status" => Some(Command::Status),
        "/usage" => Some(Command::Usage),
        "/approve" => Some(Command::Approve { id: id_and_rest().0 }),
        "/deny" => {
            let (id, reason) = id_and_rest();
            Some(Command::Deny { id, reason: reason.map(str::to_owned) })
        }
        _ => None,
    }
}

/// An admin's answer to a request.
enum Verdict {
    /// Let it run.
    Approve,
    /// Refuse it, maybe saying why.
    Deny { reason: Option<String> },
}

impl ChannelManager {
    /// Runs `command` written in `session_key` by `actor` (none without a people's policy).
    pub(super) async fn run_command(&self, command: Command, session_key: &str, actor: Option<&Actor>) -> String {
        match command {
            Command::New => match self.runner.reset(session_key).await {
                Ok(()) => "Started a new conversation.".to_owned(),
                Err(error) => format!("can't start a new conversation: {error}"),
            },
            Command::Stop => {
                let stopped = self.runner.abort(session_key, None);
                if stopped.is_empty() { "Nothing is running.".to_owned() } else { "Stopped.".to_owned() }
            }
            Command::Fork => match self.runner.fork_before_last(session_key).await {
                Ok(Some(_)) => "Went back before your last message: what you write next starts a new branch \
                                (the old one stays in the session)."
                    .to_owned(),
                Ok(None) => "There is no earlier message to go back to.".to_owned(),
                Err(error) => format!("can't fork the conversation: {error}"),
            },
            Command::Compact => match self.runner.compact(session_key).await {
                Ok(Some(condensed)) => format!("Condensed {condensed} older messages into a summary."),
                Ok(None) => "Nothing to condense.".to_owned(),
                Err(error) => format!("can't condense the conversation: {error}"),
            },
            Command::Model { name } => self.model(session_key, actor, name).await,
            Command::Status => {
                let chosen = match self.runner.session(session_key).await {
                    Ok(session) => session.lock().await.chosen_model().map(str::to_owned),
                    Err(_) => None,
                };
                self.status(session_key, actor, chosen)
            }
            Command::Usage => match (self.runner.agent().people(), actor) {
                (Some(people), Some(actor)) => self.usage(people, actor),
                (None, _) | (_, None) => NO_PEOPLE.to_owned(),
            },
            Command::Approve { id } => self.decide(actor, id, Verdict::Approve),
            Command::Deny { id, reason } => self.decide(actor, id, Verdict::Deny { reason }),
        }
    }

    /// `/model [NAME]`: the models, or the one `session_key` uses from now on. Choosing
    /// is for admins under the people's policy, else for the owner's own sessions.
    async fn model(&self, session_key: &str, actor: Option<&Actor>, name: Option<String>) -> String {
        let session = match self.runner.session(session_key).await {
            Ok(session) => session,
            Err(error) => return format!("can't read the session: {error}"),
        };
        let (chosen, context) = {
            let session = session.lock().await;
            (session.chosen_model().map(str::to_owned), session.header().context.clone())
        };
        let agent = self.runner.agent();
        let current = chosen.unwrap_or_else(|| agent.settings().model.clone());
        let Some(name) = name else {
            let others: Vec<&str> = self.models.iter().filter(|model| **model != current).map(String::as_str).collect();
            if others.is_empty() {
                return format!("model: {current}");
            }
            return format!("model: {current}\nother models: {}", others.join(", "));
        };
        let allowed = match (agent.people(), actor) {
            (Some(_), Some(actor)) => actor.is_admin(),
            (Some(_), None) => false,
            (None, _) => context == agent.settings().context,
        };
        if !allowed {
            return "Only the owner and admins may choose the model.".to_owned();
        }
        if !self.models.contains(&name) {
            return format!("There is no model {name} here; /model lists them.");
        }
        let choice = (name != agent.settings().model).then(|| name.clone());
        match self.runner.choose_model(session_key, choice).await {
            Ok(_) => format!("Model: {current} → {name} for this conversation."),
            Err(error) => format!("can't choose the model: {error}"),
        }
    }

    fn status(&self, session_key: &str, actor: Option<&Actor>, chosen_model: Option<String>) -> String {
        let agent = self.runner.agent();
        let running = self.runner.active_runs().iter().filter(|(_, session)| session == session_key).count();
        let channels: Vec<String> =
            self.health().iter().map(|health| format!("{} {}", health.name, health.state.as_str())).collect();
        let mut status = format!(
            "model: {}\nsession: {session_key}\nrunning turns here: {running}\nchannels: {}\nup for: {} s",
            chosen_model.unwrap_or_else(|| agent.settings().model.clone()),
            channels.join(", "),
            self.uptime().as_secs()
        );
        if let Some(actor) = actor {
            status.push_str(&format!("\nyou: {} ({})", actor.name, actor.role));
        }
        status.push_str(&format!("\ncommands: {COMMAND_LIST}"));
        status
    }

    /// `/usage`: what `actor` used today and this month, and their limits.
    fn usage(&self, people: &People, actor: &Actor) -> String {
        let now = self.runner.agent().clock().unix_millis();
        let subject = match &actor.user {
            Some(user) => UsageSubject::User(user.clone()),
            None => UsageSubject::Context(actor.context.clone()),
        };
        let usage = &people.stores().usage;
        let (today, month) = match (
            usage.totals(&subject, budget::day_start_ms(now)),
            usage.totals(&subject, budget::month_start_ms(now)),
        ) {
            (Ok(today), Ok(month)) => (today, month),
            (Err(error), _) | (_, Err(error)) => {
                tracing::warn!(%error, "can't read usage for /usage");
                return format!("can't show your usage: {error}");
            }
        };
        let policy = people.policy(actor);
        if !policy.budget_applies {
            return usage_report(actor, &today, &month, &Budget::Exempt);
        }
        let own = match &actor.user {
            Some(id) => match people.stores().directory.user(id) {
                Ok(user) => user.map(|user| user.budget).unwrap_or_default(),
                Err(error) => {
                    tracing::warn!(%error, "can't read a user's own budget for /usage");
                    Default::default()
                }
            },
            None => Default::default(),
        };
        usage_report(actor, &today, &month, &Budget::Limits(budget::effective(&own, &policy.budget)))
    }

    /// A stranger asked to talk (pairing): every admin is told, with the code to approve.
    pub(super) fn tell_admins_about_pairing(&self, people: &People, message: &crate::InboundMessage, code: &str) {
        let who = message.sender.display_name.as_deref().unwrap_or(&message.sender.id);
        let text = format!(
            "👋 {who} ({}:{}) asks to talk to the assistant. Reply /approve {code} to let them in as a guest, or run \
             `squidbot users approve {code} --as USER` (or `--new ID --role ROLE`) to make them someone.",
            message.channel, message.sender.id
        );
        let admins = match people.stores().directory.users() {
            Ok(users) => users.into_iter().filter(|user| user.role == squidbot_types::people::ADMIN && !user.disabled),
            Err(error) => {
                tracing::warn!(%error, "can't tell the admins about a pairing request");
                return;
            }
        };
        for admin in admins {
            self.notify_person(&admin, code, &text);
        }
        people.audit_as(
            squidbot_types::people::AuditKind::ApprovalRequested,
            &format!("{}:{}", message.channel, message.sender.id),
            "pairing",
            true,
            serde_json::json!({"code": code, "name": who}),
        );
    }

    /// `/approve CODE` by an admin for a pairing code (not an approval request): the
    /// stranger is let in as a guest. `None` when no channel knows the code.
    fn approve_pairing(&self, people: &People, actor: &Actor, code: &str) -> Option<String> {
        if people.stores().approvals.get(code).ok().flatten().is_some() {
            return None;
        }
        for entry in self.channels.values() {
            match entry.policy.approve(code) {
                Ok(sender) => {
                    people.audit(
                        squidbot_types::people::AuditKind::ApprovalDecided,
                        actor,
                        "pairing",
                        true,
                        serde_json::json!({"code": code, "sender": format!("{}:{}", sender.channel, sender.sender_id)}),
                    );
                    return Some(format!(
                        "approved {}:{}; they are answered from their next message (as a guest)",
                        sender.channel, sender.sender_id
                    ));
                }
                Err(crate::pairing::PairingError::UnknownCode { .. }) => {}
                Err(error) => return Some(format!("can't approve {code}: {error}")),
            }
        }
        None
    }

    /// `/approve` and `/deny`: decides request `id` as `actor`, in one line.
    fn decide(&self, actor: Option<&Actor>, id: Option<String>, verdict: Verdict) -> String {
        let (Some(people), Some(actor)) = (self.runner.agent().people(), actor) else {
            return NO_PEOPLE.to_owned();
        };
        let (approve, reason, verb) = match verdict {
            Verdict::Approve => (true, None, "approve"),
            Verdict::Deny { reason } => (false, reason, "deny"),
        };
        let Some(id) = id else {
            return format!("Which request? Write /{verb} ID with the id from the request.");
        };
        if approve
            && actor.is_admin()
            && let Some(answer) = self.approve_pairing(people, actor, &id)
        {
            return answer;
        }
        match people.decide(&id, actor, approve, reason) {
            Ok(request) => format!(
                "{} {}: {} for {}",
                if approve { "approved" } else { "denied" },
                request.id,
                request.tool,
                request.actor.name
            ),
            Err(error) => {
                tracing::info!(id, by = %actor.name, %error, "approval decision refused");
                format!("can't {verb} {id}: {error}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_recognised_by_their_first_word() {
        assert_eq!(command("/new"), Some(Command::New));
        assert_eq!(command("  /NEW please"), Some(Command::New));
        assert_eq!(command("/reset"), Some(Command::New));
        assert_eq!(command("/new@squidbot"), Some(Command::New));
        assert_eq!(command("/stop"), Some(Command::Stop));
        assert_eq!(command("/status"), Some(Command::Status));
        assert_eq!(command("/usage"), Some(Command::Usage));
        assert_eq!(command("/fork"), Some(Command::Fork));
        assert_eq!(command("/compact@squidbot"), Some(Command::Compact));
        assert_eq!(command("/model"), Some(Command::Model { name: None }));
        assert_eq!(command("/model fast/one"), Some(Command::Model { name: Some("fast/one".into()) }));
        assert_eq!(command("/newer"), None);
        assert_eq!(command("tell me about /new"), None);
        assert_eq!(command(""), None);
    }

    #[test]
    fn approve_and_deny_take_an_id_and_deny_a_reason() {
        assert_eq!(command("/approve ABC123"), Some(Command::Approve { id: Some("ABC123".into()) }));
        assert_eq!(command("/approve"), Some(Command::Approve { id: None }));
        assert_eq!(command("/deny abc123"), Some(Command::Deny { id: Some("abc123".into()), reason: None }));
        assert_eq!(
            command("/deny ABC123   not  tonight \n"),
            Some(Command::Deny { id: Some("ABC123".into()), reason: Some("not  tonight".into()) })
        );
        assert_eq!(command("/deny"), Some(Command::Deny { id: None, reason: None }));
    }
}
