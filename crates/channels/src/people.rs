//! The channels under the people's policy: who wrote a message (a linked user, the
//! owner, a guest) and whom its turn acts for, the `/usage` report, the approval request
//! as admins read it, and [`ChannelNotifier`], which tells admins about requests and
//! people about theirs in their chat conversations.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Weak};

use squidbot_core::people::{People, PeopleNotifier};
use squidbot_types::people::{Actor, ApprovalRequest, BudgetLimits, Identity, UsageTotals, User};

use crate::manager::ChannelManager;
use crate::port::InboundMessage;
use crate::session::Route;

/// People whose last direct-message session is remembered; the one who wrote longest
/// ago is forgotten first (their notes then go to their first linked identity).
const MAX_REMEMBERED_PEOPLE: usize = 1024;

/// Longest arguments shown in an approval request, in characters.
const MAX_SHOWN_ARGUMENTS: usize = 600;

/// Who wrote a message, as the people's directory knows their identity
/// (`<channel>:<sender id>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Speaker {
    /// No people's policy is wired: everything works as without users.
    Unmanaged,
    /// Linked to an enabled user.
    Linked(User),
    /// Linked to a disabled user: nobody answers them.
    Disabled(User),
    /// Linked to nobody, or the directory could not be read.
    Unlinked,
}

impl Speaker {
    /// The writer of `message` under `people` (none: [`Speaker::Unmanaged`]). A failing
    /// directory is logged and the writer taken for unlinked: never for an owner.
    pub(crate) fn of(people: Option<&People>, message: &InboundMessage) -> Speaker {
        let Some(people) = people else { return Speaker::Unmanaged };
        let identity = Identity { channel: message.channel.clone(), sender_id: message.sender.id.clone() };
        match people.user_of(&identity) {
            Ok(Some(user)) if user.disabled => Speaker::Disabled(user),
            Ok(Some(user)) => Speaker::Linked(user),
            Ok(None) => Speaker::Unlinked,
            Err(error) => {
                tracing::warn!(%identity, %error, "can't look up who wrote; treating them as unlinked");
                Speaker::Unlinked
            }
        }
    }

    /// The enabled user who wrote, if any.
    pub(crate) fn user(&self) -> Option<&User> {
        match self {
            Speaker::Linked(user) => Some(user),
            Speaker::Unmanaged | Speaker::Disabled(_) | Speaker::Unlinked => None,
        }
    }
}

/// Whom a turn started by `message` (routed to `route`) acts for: `None` without a
/// people's policy; a linked user as themself; an owner id of the channel as the owner
/// (`owner` asks the policy who that is); anyone else as a guest. The actor's context is
/// the conversation's, so a person speaking in a room spends the room's memory.
pub(crate) fn actor_of(
    speaker: &Speaker,
    message: &InboundMessage,
    route: &Route,
    sender_is_owner: bool,
    owner: impl FnOnce() -> Actor,
) -> Option<Actor> {
    let actor = match speaker {
        Speaker::Unmanaged => return None,
        Speaker::Linked(user) => Actor::of(user),
        Speaker::Unlinked if sender_is_owner => owner(),
        // A disabled user never gets this far; were they to, they would be a guest.
        Speaker::Unlinked | Speaker::Disabled(_) => {
            let name = message.sender.display_name.clone().unwrap_or_else(|| message.sender.id.clone());
            Actor::stranger(name, route.context.clone())
        }
    };
    Some(Actor { context: route.context.clone(), ..actor })
}

/// The direct-message session each person last wrote from, by their memory context.
#[derive(Debug, Default)]
pub(crate) struct LastSessions {
    sessions: HashMap<String, String>,
    /// Contexts, the one that wrote longest ago first.
    order: VecDeque<String>,
}

impl LastSessions {
    /// The person of `context` wrote from `session_key`.
    pub(crate) fn note(&mut self, context: &str, session_key: &str) {
        if self.sessions.insert(context.to_owned(), session_key.to_owned()).is_some() {
            self.order.retain(|known| known != context);
        }
        self.order.push_back(context.to_owned());
        while self.order.len() > MAX_REMEMBERED_PEOPLE {
            if let Some(oldest) = self.order.pop_front() {
                self.sessions.remove(&oldest);
            }
        }
    }

    /// Where the person of `context` last wrote from.
    pub(crate) fn get(&self, context: &str) -> Option<&str> {
        self.sessions.get(context).map(String::as_str)
    }
}

/// The budget someone's turns are held to.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Budget {
    /// Budgets don't apply to their role.
    Exempt,
    /// These limits (their own over their role's).
    Limits(BudgetLimits),
}

/// What `/usage` answers: what `actor` used today and this month (UTC), and their budget.
pub(crate) fn usage_report(actor: &Actor, today: &UsageTotals, month: &UsageTotals, budget: &Budget) -> String {
    let limits = match budget {
        Budget::Exempt => format!("none (budgets don't apply to the role {})", actor.role),
        Budget::Limits(limits) if limits.is_empty() => "none".to_owned(),
        Budget::Limits(limits) => {
            let mut parts = Vec::new();
            if let Some(tokens) = limits.daily_tokens {
                parts.push(format!("{tokens} tokens a day"));
            }
            if let Some(tokens) = limits.monthly_tokens {
                parts.push(format!("{tokens} tokens a month"));
            }
            if let Some(cost) = limits.daily_cost {
                parts.push(format!("cost {} a day", cost_text(cost)));
            }
            if let Some(cost) = limits.monthly_cost {
                parts.push(format!("cost {} a month", cost_text(cost)));
            }
            parts.join(", ")
        }
    };
    format!(
        "Usage of {} ({}):\ntoday: {}\nthis month: {}\nlimits: {limits}",
        actor.name,
        actor.role,
        totals_text(today),
        totals_text(month)
    )
}

fn totals_text(totals: &UsageTotals) -> String {
    let calls = if totals.calls == 1 { "1 model call".to_owned() } else { format!("{} model calls", totals.calls) };
    let mut text = format!("{} tokens in {calls}", totals.tokens());
    if totals.cost > 0.0 {
        text.push_str(&format!(", cost {}", cost_text(totals.cost)));
    }
    text
}

/// A cost with at most four decimals, without trailing zeros.
fn cost_text(cost: f64) -> String {
    let text = format!("{cost:.4}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    text.to_owned()
}

/// The note admins get about a waiting request.
pub(crate) fn approval_text(request: &ApprovalRequest) -> String {
    let arguments = if request.arguments.chars().count() > MAX_SHOWN_ARGUMENTS {
        let kept: String = request.arguments.chars().take(MAX_SHOWN_ARGUMENTS).collect();
        format!("{kept}…")
    } else {
        request.arguments.clone()
    };
    format!(
        "🔐 {} ({}) asks to run {}: {} — rule: {}. Reply /approve {id} or /deny {id} [reason]",
        request.actor.name,
        request.actor.role,
        request.tool,
        code_span(&arguments),
        request.rule,
        id = request.id
    )
}

/// `text` as a Markdown code span, so the platform shows it as it is (JSON arguments
/// hold `*` and `_`): fenced with one more backtick than its longest run of them.
fn code_span(text: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for character in text.chars() {
        run = if character == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat(longest + 1);
    let padding = if text.starts_with('`') || text.ends_with('`') { " " } else { "" };
    format!("{fence}{padding}{text}{padding}{fence}")
}

/// Whether a platform reaches a person's direct conversation by their sender id, so a
/// note can go to someone who has not written since the gateway started: Telegram (a
/// private chat's id is the user's), Slack (a user id posts to the app's direct
/// messages) and email (the address starts a new thread). Discord and Matrix need a
/// conversation that is not derived from the sender (a DM channel, a room), and the
/// webhook answers only its own requests.
pub(crate) fn reaches_sender_directly(kind: &str) -> bool {
    matches!(kind, "telegram" | "slack" | "email")
}

/// Tells people things outside their turns' replies, over the chat channels: admins
/// about approval requests (in the direct conversation they last wrote from, else the
/// direct conversation of their first linked identity on a channel that runs here),
/// and people about what became of theirs. Hand it to the people's policy with
/// `people.set_notifier(Arc::new(ChannelNotifier::new(&manager)))`.
#[derive(Debug, Clone)]
pub struct ChannelNotifier {
    /// Weak: the manager holds the runner, whose agent holds the policy holding this.
    manager: Weak<ChannelManager>,
}

impl ChannelNotifier {
    /// A notifier over the channels `manager` runs.
    pub fn new(manager: &Arc<ChannelManager>) -> ChannelNotifier {
        ChannelNotifier { manager: Arc::downgrade(manager) }
    }
}

impl PeopleNotifier for ChannelNotifier {
    fn approval_requested(&self, request: &ApprovalRequest, admins: &[User]) {
        let Some(manager) = self.manager.upgrade() else {
            tracing::warn!(id = %request.id, "can't tell the admins about an approval request: the channels have stopped");
            return;
        };
        let text = approval_text(request);
        for admin in admins {
            manager.notify_person(admin, &request.id, &text);
        }
    }

    fn tell(&self, actor: &Actor, session_key: &str, text: &str) {
        let Some(manager) = self.manager.upgrade() else {
            tracing::warn!(session = %session_key, "can't tell someone about their request: the channels have stopped");
            return;
        };
        manager.tell_session(actor, session_key, text);
    }
}

#[cfg(test)]
mod tests {
    use jiff::Timestamp;
    use squidbot_types::people::{ApprovalStatus, GUEST};

    use super::*;
    use crate::port::{Conversation, ConversationKind, Sender};

    fn user(id: &str, role: &str) -> User {
        User {
            id: id.to_owned(),
            name: id.to_uppercase(),
            role: role.to_owned(),
            context: format!("user:{id}"),
            created_ms: 0,
            disabled: false,
            budget: BudgetLimits::default(),
        }
    }

    fn message(kind: ConversationKind, sender: &str, display_name: Option<&str>) -> InboundMessage {
        InboundMessage {
            channel: "telegram".to_owned(),
            platform_message_id: "1".to_owned(),
            conversation: Conversation { id: "chat".to_owned(), kind, thread: None },
            sender: Sender { id: sender.to_owned(), display_name: display_name.map(str::to_owned) },
            text: String::new(),
            mentions_bot: true,
            attachments: Vec::new(),
            received_at: Timestamp::UNIX_EPOCH,
        }
    }

    fn route(context: &str) -> Route {
        Route { context: context.to_owned(), session_key: "telegram:chat".to_owned() }
    }

    fn never() -> Actor {
        panic!("the owner is asked for only for an owner id")
    }

    #[test]
    fn without_people_there_is_no_actor() {
        let message = message(ConversationKind::Direct, "1", None);
        assert_eq!(actor_of(&Speaker::Unmanaged, &message, &route("owner"), true, never), None);
    }

    #[test]
    fn a_linked_user_acts_as_themself_in_their_context_or_the_rooms() {
        let bob = user("bob", "user");
        let direct = message(ConversationKind::Direct, "1", None);
        let actor = actor_of(&Speaker::Linked(bob.clone()), &direct, &route("user:bob"), false, never).unwrap();
        assert_eq!(actor, Actor::of(&bob));
        let room = message(ConversationKind::Group, "1", None);
        let actor = actor_of(&Speaker::Linked(bob.clone()), &room, &route("group:telegram:chat"), true, never).unwrap();
        assert_eq!((actor.user.as_deref(), actor.role.as_str()), (Some("bob"), "user"));
        assert_eq!(actor.context, "group:telegram:chat", "usage and memory stay in the room");
    }

    #[test]
    fn an_unlinked_owner_is_the_owner_and_anyone_else_a_guest_named_by_their_display_name() {
        let direct = message(ConversationKind::Direct, "1000", None);
        let owner =
            || Actor { user: None, name: "owner".into(), role: "admin".into(), context: "owner".into(), session: None };
        let actor = actor_of(&Speaker::Unlinked, &direct, &route("owner"), true, owner).unwrap();
        assert_eq!((actor.role.as_str(), actor.context.as_str()), ("admin", "owner"));
        let stranger = message(ConversationKind::Direct, "555", Some("Eve"));
        let actor = actor_of(&Speaker::Unlinked, &stranger, &route("user:telegram:555"), false, never).unwrap();
        assert_eq!(actor, Actor::stranger("Eve", "user:telegram:555"));
        assert_eq!(actor.role, GUEST);
        let nameless = message(ConversationKind::Group, "556", None);
        let actor = actor_of(&Speaker::Unlinked, &nameless, &route("group:telegram:chat"), false, never).unwrap();
        assert_eq!(actor, Actor::stranger("556", "group:telegram:chat"));
    }

    #[test]
    fn last_sessions_follow_the_latest_message_and_are_bounded() {
        let mut last = LastSessions::default();
        last.note("user:bob", "telegram:1");
        last.note("user:bob", "slack:U1");
        assert_eq!(last.get("user:bob"), Some("slack:U1"));
        for number in 0..MAX_REMEMBERED_PEOPLE {
            last.note(&format!("user:{number}"), "telegram:2");
        }
        assert_eq!(last.get("user:bob"), None, "the one who wrote longest ago is forgotten");
        assert_eq!(last.get("user:0"), Some("telegram:2"));
        assert_eq!(last.order.len(), MAX_REMEMBERED_PEOPLE);
        assert_eq!(last.sessions.len(), MAX_REMEMBERED_PEOPLE);
    }

    #[test]
    fn the_usage_report_shows_tokens_cost_and_limits() {
        let bob = Actor::of(&user("bob", "user"));
        let today = UsageTotals { calls: 1, input_tokens: 10, output_tokens: 5, cost: 0.0, ..UsageTotals::default() };
        let month =
            UsageTotals { calls: 3, input_tokens: 100, output_tokens: 20, cost: 0.012, ..UsageTotals::default() };
        let limits = BudgetLimits { daily_tokens: Some(1000), monthly_cost: Some(2.5), ..BudgetLimits::default() };
        assert_eq!(
            usage_report(&bob, &today, &month, &Budget::Limits(limits)),
            "Usage of BOB (user):\ntoday: 15 tokens in 1 model call\nthis month: 120 tokens in 3 model calls, cost \
             0.012\nlimits: 1000 tokens a day, cost 2.5 a month"
        );
        let text = usage_report(&bob, &today, &month, &Budget::Limits(BudgetLimits::default()));
        assert!(text.ends_with("limits: none"), "{text}");
        let admin = Actor::of(&user("ann", "admin"));
        let text = usage_report(&admin, &today, &month, &Budget::Exempt);
        assert!(text.ends_with("limits: none (budgets don't apply to the role admin)"), "{text}");
    }

    #[test]
    fn the_approval_text_names_who_what_why_and_how_to_answer() {
        let request = ApprovalRequest {
            id: "ABC123".into(),
            created_ms: 0,
            expires_ms: 0,
            actor: Actor::of(&user("bob", "user")),
            session_key: "telegram:1".into(),
            tool: "exec".into(),
            arguments: r#"{"command":"ls"}"#.into(),
            rule: "exec for user".into(),
            status: ApprovalStatus::Pending,
            decided_ms: None,
        };
        assert_eq!(
            approval_text(&request),
            r#"🔐 BOB (user) asks to run exec: `{"command":"ls"}` — rule: exec for user. Reply /approve ABC123 or /deny ABC123 [reason]"#
        );
        let stars = ApprovalRequest { arguments: r#"{"command":"rm *.txt *.md"}"#.into(), ..request.clone() };
        assert_eq!(
            crate::markdown::render(&approval_text(&stars), crate::markdown::MarkdownFlavor::TelegramHtml),
            r#"🔐 BOB (user) asks to run exec: <code>{"command":"rm *.txt *.md"}</code> — rule: exec for user. Reply /approve ABC123 or /deny ABC123 [reason]"#
        );
        let long = ApprovalRequest { arguments: "x".repeat(2_000), ..request };
        assert!(approval_text(&long).contains(&format!("{}…` — rule", "x".repeat(MAX_SHOWN_ARGUMENTS))));
    }

    #[test]
    fn code_spans_hold_backticks() {
        assert_eq!(code_span("ls"), "`ls`");
        assert_eq!(code_span("echo `date`"), "`` echo `date` ``");
        assert_eq!(code_span("a``b"), "```a``b```");
    }

    #[test]
    fn only_platforms_that_address_people_by_their_id_are_written_to_first() {
        for kind in ["telegram", "slack", "email"] {
            assert!(reaches_sender_directly(kind), "{kind}");
        }
        for kind in ["discord", "matrix", "webhook", "scripted"] {
            assert!(!reaches_sender_directly(kind), "{kind}");
        }
    }
}
