//! Gateway metrics in the Prometheus text exposition format. Turn, model-call and tool
//! figures come from the shared turn event stream ([`Metrics::record`]); sub-agents from
//! the delegator ([`WorkerMetrics`]); HTTP requests, WebSocket connections and errors are
//! counted where they happen; running workers and bus messages are read at render time.

use std::collections::BTreeMap;
use std::sync::{Mutex, Weak};
use std::time::Duration;

use squidbot_core::delegation::{WorkerInbox, WorkerObserver, WorkerOutcome, WorkerSnapshot};
use squidbot_core::events::{RunEnd, TurnEvent, TurnEventKind};
use squidbot_core::sync::lock;
use squidbot_types::people::UsageTotals;

/// Upper bounds (seconds) of the duration histograms.
const BUCKETS: [f64; 11] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

/// Upper bounds (seconds) of the delegation histogram: sub-agents take seconds to minutes.
const DELEGATION_BUCKETS: [f64; 11] = [0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0];

#[derive(Debug, Clone)]
struct Histogram {
    bounds: &'static [f64; BUCKETS.len()],
    counts: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self { bounds: &BUCKETS, counts: [0; BUCKETS.len()], count: 0, sum: 0.0 }
    }
}

impl Histogram {
    fn delegation() -> Self {
        Self { bounds: &DELEGATION_BUCKETS, ..Self::default() }
    }

    fn observe(&mut self, duration: Duration) {
        let seconds = duration.as_secs_f64();
        for (bound, count) in self.bounds.iter().zip(self.counts.iter_mut()) {
            if seconds <= *bound {
                *count += 1;
            }
        }
        self.count += 1;
        self.sum += seconds;
    }

    fn render(&self, output: &mut String, name: &str, labels: &str) {
        let separator = if labels.is_empty() { "" } else { "," };
        for (bound, count) in self.bounds.iter().zip(self.counts.iter()) {
            output.push_str(&format!("{name}_bucket{{{labels}{separator}le=\"{bound}\"}} {count}\n"));
        }
        output.push_str(&format!("{name}_bucket{{{labels}{separator}le=\"+Inf\"}} {}\n", self.count));
        let braces = if labels.is_empty() { String::new() } else { format!("{{{labels}}}") };
        output.push_str(&format!("{name}_sum{braces} {}\n", self.sum));
        output.push_str(&format!("{name}_count{braces} {}\n", self.count));
    }
}

#[derive(Debug, Default)]
struct Data {
    turns: BTreeMap<(String, String), u64>,
    turn_seconds: BTreeMap<String, Histogram>,
    tokens: BTreeMap<(String, &'static str), u64>,
    tool_calls: BTreeMap<(String, &'static str), u64>,
    tool_seconds: BTreeMap<String, Histogram>,
    requests: BTreeMap<(&'static str, u16), u64>,
    llm_calls: BTreeMap<(String, String, &'static str), u64>,
    llm_seconds: BTreeMap<(String, String), Histogram>,
    errors: BTreeMap<&'static str, u64>,
    ws_connections_total: u64,
    workers_started: BTreeMap<String, u64>,
    workers_finished: BTreeMap<(String, &'static str), u64>,
    delegation_seconds: BTreeMap<String, Histogram>,
    /// Per provider: whether its last model call succeeded, and when (ms since the epoch).
    last_llm_call: BTreeMap<String, LastCall>,
}

/// A provider's most recent model call, for `status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LastCall {
    /// It answered.
    pub ok: bool,
    /// When it ended, ms since the Unix epoch.
    pub at_ms: i64,
}

/// Gauges read at render time.
#[derive(Debug, Default, Clone)]
pub struct Gauges {
    /// Sessions loaded in memory.
    pub open_sessions: usize,
    /// Turns running now.
    pub active_runs: usize,
    /// Open WebSocket connections.
    pub ws_connections: usize,
    /// Channel adapters, their health and counters.
    pub channels: Vec<squidbot_types::channel::ChannelHealth>,
    /// Time since start.
    pub uptime: Duration,
    /// Sub-agents running now.
    pub workers_running: usize,
    /// Bus messages so far by delivery result (read from the bus).
    pub bus_results: Vec<(String, u64)>,
    /// The people's usage and approvals, read from their stores for a scrape only; `None`
    /// without a people policy (and in `status`/`health`, which don't show them).
    pub people: Option<PeopleGauges>,
}

/// What `/metrics` shows of the people's stores.
#[derive(Debug, Default, Clone)]
pub struct PeopleGauges {
    /// Usage since the ledger began, per user (`context:<context>` without one).
    pub usage_by_user: Vec<(String, UsageTotals)>,
    /// Approval requests waiting for an admin.
    pub approvals_pending: usize,
}

/// `provider` and `model` of a `provider/model` name.
fn split_model(name: &str) -> (String, String) {
    match name.split_once('/') {
        Some((provider, model)) => (provider.to_owned(), model.to_owned()),
        None => (String::new(), name.to_owned()),
    }
}

/// Counters and histograms shared by the handlers.
#[derive(Debug, Default)]
pub struct Metrics {
    data: Mutex<Data>,
}

/// Escapes a label value.
fn label(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

impl Metrics {
    fn with(&self, change: impl FnOnce(&mut Data)) {
        change(&mut lock(&self.data));
    }

    /// Accounts one event of the turn stream.
    pub fn record(&self, event: &TurnEvent) {
        self.with(|data| match &event.kind {
            TurnEventKind::ModelCall { model, duration, usage, ok } => {
                let (provider, model) = split_model(model);
                let result = if *ok { "ok" } else { "error" };
                *data.llm_calls.entry((provider.clone(), model.clone(), result)).or_default() += 1;
                data.last_llm_call.insert(provider.clone(), LastCall { ok: *ok, at_ms: event.at_ms });
                data.llm_seconds.entry((provider.clone(), model.clone())).or_default().observe(*duration);
                let name = if provider.is_empty() { model } else { format!("{provider}/{model}") };
                *data.tokens.entry((name.clone(), "input")).or_default() += usage.input_tokens;
                *data.tokens.entry((name, "output")).or_default() += usage.output_tokens;
                if !ok {
                    *data.errors.entry("llm").or_default() += 1;
                }
            }
            TurnEventKind::ToolFinished { name, is_error, duration, .. } => {
                let result = if *is_error { "error" } else { "ok" };
                *data.tool_calls.entry((name.clone(), result)).or_default() += 1;
                data.tool_seconds.entry(name.clone()).or_default().observe(*duration);
            }
            TurnEventKind::Finished { model, end, duration, .. } => {
                let outcome = match end {
                    RunEnd::Completed => "completed",
                    RunEnd::MaxTurns => "max_turns",
                };
                *data.turns.entry((model.clone(), outcome.to_owned())).or_default() += 1;
                data.turn_seconds.entry(model.clone()).or_default().observe(*duration);
            }
            TurnEventKind::Aborted { duration, .. } => {
                *data.turns.entry((String::new(), "cancelled".to_owned())).or_default() += 1;
                data.turn_seconds.entry(String::new()).or_default().observe(*duration);
            }
            TurnEventKind::Failed { duration, .. } => {
                *data.turns.entry((String::new(), "error".to_owned())).or_default() += 1;
                data.turn_seconds.entry(String::new()).or_default().observe(*duration);
                *data.errors.entry("turn").or_default() += 1;
            }
            _ => {}
        });
    }

    /// A sub-agent of `role` started.
    pub fn worker_started(&self, role: &str) {
        self.with(|data| *data.workers_started.entry(role.to_owned()).or_default() += 1);
    }

    /// A sub-agent of `role` ended after `duration`.
    pub fn worker_finished(&self, role: &str, outcome: WorkerOutcome, duration: Duration) {
        self.with(|data| {
            *data.workers_finished.entry((role.to_owned(), outcome.as_str())).or_default() += 1;
            data.delegation_seconds.entry(role.to_owned()).or_insert_with(Histogram::delegation).observe(duration);
        });
    }

    /// An error outside turns (`ws_frame`, `auth`, ...).
    pub fn error(&self, kind: &'static str) {
        self.with(|data| *data.errors.entry(kind).or_default() += 1);
    }

    /// A WebSocket connection was accepted.
    pub fn ws_connected(&self) {
        self.with(|data| data.ws_connections_total += 1);
    }

    /// Tokens and turns so far: (turns, input tokens, output tokens).
    pub fn usage_totals(&self) -> (u64, u64, u64) {
        let data = lock(&self.data);
        let turns = data.turns.values().sum();
        let input = data.tokens.iter().filter(|((_, direction), _)| *direction == "input").map(|(_, n)| n).sum();
        let output = data.tokens.iter().filter(|((_, direction), _)| *direction == "output").map(|(_, n)| n).sum();
        (turns, input, output)
    }

    /// `provider`'s most recent model call, if it had one since the start.
    pub fn last_call(&self, provider: &str) -> Option<LastCall> {
        lock(&self.data).last_llm_call.get(provider).copied()
    }

    /// An answered HTTP request.
    pub fn request(&self, route: &'static str, status: u16) {
        self.with(|data| *data.requests.entry((route, status)).or_default() += 1);
    }

    /// The exposition text, with the gauges given by the caller.
    pub fn render(&self, gauges: &Gauges) -> String {
        let mut output = String::new();
        let data = lock(&self.data);
        let family = |output: &mut String, name: &str, kind: &str, help: &str| {
            output.push_str(&format!("# HELP {name} {help}\n# TYPE {name} {kind}\n"));
        };
        family(&mut output, "squidbot_uptime_seconds", "gauge", "Seconds since the gateway started.");
        output.push_str(&format!("squidbot_uptime_seconds {}\n", gauges.uptime.as_secs_f64()));
        family(&mut output, "squidbot_sessions_open", "gauge", "Sessions loaded in memory.");
        output.push_str(&format!("squidbot_sessions_open {}\n", gauges.open_sessions));
        family(&mut output, "squidbot_turns_active", "gauge", "Turns running now.");
        output.push_str(&format!("squidbot_turns_active {}\n", gauges.active_runs));
        family(&mut output, "squidbot_ws_connections", "gauge", "Open WebSocket connections.");
        output.push_str(&format!("squidbot_ws_connections {}\n", gauges.ws_connections));
        family(&mut output, "squidbot_ws_connections_total", "counter", "WebSocket connections accepted.");
        output.push_str(&format!("squidbot_ws_connections_total {}\n", data.ws_connections_total));
        family(&mut output, "squidbot_channel_up", "gauge", "1 when a channel adapter is connected.");
        for channel in &gauges.channels {
            output.push_str(&format!(
                "squidbot_channel_up{{channel=\"{}\",kind=\"{}\"}} {}\n",
                label(&channel.name),
                label(&channel.kind),
                u8::from(channel.is_up())
            ));
        }
        family(&mut output, "squidbot_channel_restarts_total", "counter", "Channel adapter restarts after failures.");
        for channel in &gauges.channels {
            output.push_str(&format!(
                "squidbot_channel_restarts_total{{channel=\"{}\"}} {}\n",
                label(&channel.name),
                channel.restarts
            ));
        }
        family(&mut output, "squidbot_channel_messages_total", "counter", "Inbound channel messages by outcome.");
        for channel in &gauges.channels {
            for (outcome, count) in [
                ("received", channel.received),
                ("answered", channel.answered),
                ("denied", channel.denied),
                ("duplicate", channel.duplicates),
            ] {
                output.push_str(&format!(
                    "squidbot_channel_messages_total{{channel=\"{}\",outcome=\"{outcome}\"}} {count}\n",
                    label(&channel.name)
                ));
            }
        }
        family(
            &mut output,
            "squidbot_channel_sent_total",
            "counter",
            "Messages and edits sent to channels, by result.",
        );
        for channel in &gauges.channels {
            for (result, count) in [("ok", channel.sent), ("failed", channel.send_failures)] {
                output.push_str(&format!(
                    "squidbot_channel_sent_total{{channel=\"{}\",result=\"{result}\"}} {count}\n",
                    label(&channel.name)
                ));
            }
        }
        family(&mut output, "squidbot_errors_total", "counter", "Errors by kind.");
        for (kind, count) in &data.errors {
            output.push_str(&format!("squidbot_errors_total{{kind=\"{kind}\"}} {count}\n"));
        }
        family(&mut output, "squidbot_llm_calls_total", "counter", "Model calls by provider, model and result.");
        for ((provider, model, result), count) in &data.llm_calls {
            output.push_str(&format!(
                "squidbot_llm_calls_total{{provider=\"{}\",model=\"{}\",result=\"{result}\"}} {count}\n",
                label(provider),
                label(model)
            ));
        }
        family(
            &mut output,
            "squidbot_llm_call_duration_seconds",
            "histogram",
            "Model call latency by provider and model.",
        );
        for ((provider, model), histogram) in &data.llm_seconds {
            let labels = format!("provider=\"{}\",model=\"{}\"", label(provider), label(model));
            histogram.render(&mut output, "squidbot_llm_call_duration_seconds", &labels);
        }
        family(&mut output, "squidbot_turns_total", "counter", "Finished turns by model and outcome.");
        for ((model, outcome), count) in &data.turns {
            output.push_str(&format!(
                "squidbot_turns_total{{model=\"{}\",outcome=\"{}\"}} {count}\n",
                label(model),
                label(outcome)
            ));
        }
        family(&mut output, "squidbot_turn_duration_seconds", "histogram", "Turn duration by model.");
        for (model, histogram) in &data.turn_seconds {
            histogram.render(&mut output, "squidbot_turn_duration_seconds", &format!("model=\"{}\"", label(model)));
        }
        family(&mut output, "squidbot_llm_tokens_total", "counter", "Tokens by model and direction.");
        for ((model, direction), count) in &data.tokens {
            output.push_str(&format!(
                "squidbot_llm_tokens_total{{model=\"{}\",direction=\"{direction}\"}} {count}\n",
                label(model)
            ));
        }
        family(&mut output, "squidbot_tool_calls_total", "counter", "Tool calls by tool and result.");
        for ((tool, result), count) in &data.tool_calls {
            output.push_str(&format!(
                "squidbot_tool_calls_total{{tool=\"{}\",result=\"{result}\"}} {count}\n",
                label(tool)
            ));
        }
        family(&mut output, "squidbot_tool_duration_seconds", "histogram", "Tool call duration by tool.");
        for (tool, histogram) in &data.tool_seconds {
            histogram.render(&mut output, "squidbot_tool_duration_seconds", &format!("tool=\"{}\"", label(tool)));
        }
        family(&mut output, "squidbot_workers_running", "gauge", "Sub-agents running now.");
        output.push_str(&format!("squidbot_workers_running {}\n", gauges.workers_running));
        family(&mut output, "squidbot_workers_started_total", "counter", "Sub-agents started by role.");
        for (role, count) in &data.workers_started {
            output.push_str(&format!("squidbot_workers_started_total{{role=\"{}\"}} {count}\n", label(role)));
        }
        family(
            &mut output,
            "squidbot_workers_finished_total",
            "counter",
            "Sub-agents ended by role and outcome (done, failed, cancelled, timeout).",
        );
        for ((role, outcome), count) in &data.workers_finished {
            output.push_str(&format!(
                "squidbot_workers_finished_total{{role=\"{}\",outcome=\"{outcome}\"}} {count}\n",
                label(role)
            ));
        }
        family(
            &mut output,
            "squidbot_delegation_duration_seconds",
            "histogram",
            "Sub-agent run time from delegation to its end, by role.",
        );
        for (role, histogram) in &data.delegation_seconds {
            histogram.render(&mut output, "squidbot_delegation_duration_seconds", &format!("role=\"{}\"", label(role)));
        }
        family(&mut output, "squidbot_bus_messages_total", "counter", "Agent bus attempts by delivery result.");
        for (result, count) in &gauges.bus_results {
            output.push_str(&format!("squidbot_bus_messages_total{{result=\"{}\"}} {count}\n", label(result)));
        }
        family(&mut output, "squidbot_http_requests_total", "counter", "HTTP requests by route and status.");
        for ((route, status), count) in &data.requests {
            output
                .push_str(&format!("squidbot_http_requests_total{{route=\"{route}\",status=\"{status}\"}} {count}\n"));
        }
        if let Some(people) = &gauges.people {
            render_people(&mut output, people, family);
        }
        output
    }
}

/// The per-user usage from the ledger and the approvals waiting.
fn render_people(output: &mut String, people: &PeopleGauges, family: impl Fn(&mut String, &str, &str, &str)) {
    family(output, "squidbot_usage_tokens_total", "counter", "Tokens used per user, from the usage ledger.");
    for (user, totals) in &people.usage_by_user {
        output.push_str(&format!("squidbot_usage_tokens_total{{user=\"{}\"}} {}\n", label(user), totals.tokens()));
    }
    family(output, "squidbot_usage_cost_total", "counter", "Cost of the priced model calls per user.");
    for (user, totals) in &people.usage_by_user {
        output.push_str(&format!("squidbot_usage_cost_total{{user=\"{}\"}} {}\n", label(user), totals.cost));
    }
    family(output, "squidbot_approvals_pending", "gauge", "Approval requests waiting for an admin.");
    output.push_str(&format!("squidbot_approvals_pending {}\n", people.approvals_pending));
}

/// Counts the delegator's workers into the gateway's metrics.
pub(crate) struct WorkerMetrics(pub(crate) Weak<crate::Gateway>);

impl WorkerObserver for WorkerMetrics {
    fn worker_started(&self, worker: &WorkerSnapshot, _inbox: &WorkerInbox) {
        if let Some(gateway) = self.0.upgrade() {
            gateway.metrics.worker_started(&worker.role);
        }
    }

    fn worker_ended(&self, worker: &WorkerSnapshot, outcome: WorkerOutcome) {
        if let Some(gateway) = self.0.upgrade() {
            gateway.metrics.worker_finished(&worker.role, outcome, worker.elapsed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(kind: TurnEventKind) -> TurnEvent {
        TurnEvent { run_id: "r".into(), session_key: "s".into(), seq: 1, at_ms: 0, correlation_id: String::new(), kind }
    }

    #[test]
    fn histograms_are_cumulative_and_labels_escaped() {
        let metrics = Metrics::default();
        let usage =
            |input_tokens, output_tokens| squidbot_types::Usage { input_tokens, output_tokens, ..Default::default() };
        for (millis, input, output) in [(30, 10, 2), (3000, 5, 1)] {
            metrics.record(&event(TurnEventKind::ModelCall {
                model: "a/\"b\"".into(),
                duration: Duration::from_millis(millis),
                usage: usage(input, output),
                ok: true,
            }));
            metrics.record(&event(TurnEventKind::Finished {
                reply: String::new(),
                end: RunEnd::Completed,
                usage: usage(input, output),
                model: "a/\"b\"".into(),
                tool_calls: 0,
                duration: Duration::from_millis(millis),
            }));
        }
        metrics.record(&event(TurnEventKind::Failed { error: "x".into(), duration: Duration::from_millis(1) }));
        let text = metrics.render(&Gauges {
            ws_connections: 3,
            channels: vec![squidbot_types::channel::ChannelHealth {
                name: "matrix".into(),
                kind: "matrix".into(),
                state: squidbot_types::channel::ChannelState::Running,
                last_error: None,
                last_error_at: None,
                restarts: 2,
                received: 5,
                answered: 4,
                denied: 1,
                duplicates: 1,
                sent: 7,
                send_failures: 0,
            }],
            ..Gauges::default()
        });
        assert!(text.contains("squidbot_turns_total{model=\"a/\\\"b\\\"\",outcome=\"completed\"} 2"), "{text}");
        assert!(text.contains("le=\"0.05\"} 1\n"), "{text}");
        assert!(text.contains("le=\"+Inf\"} 2\n"), "{text}");
        assert!(text.contains("squidbot_llm_tokens_total{model=\"a/\\\"b\\\"\",direction=\"input\"} 15"), "{text}");
        assert!(
            text.contains("squidbot_llm_calls_total{provider=\"a\",model=\"\\\"b\\\"\",result=\"ok\"} 2"),
            "{text}"
        );
        assert!(text.contains("squidbot_ws_connections 3\n"), "{text}");
        assert!(text.contains("squidbot_channel_up{channel=\"matrix\",kind=\"matrix\"} 1\n"), "{text}");
        assert!(text.contains("squidbot_channel_restarts_total{channel=\"matrix\"} 2\n"), "{text}");
        assert!(text.contains("squidbot_channel_messages_total{channel=\"matrix\",outcome=\"denied\"} 1\n"), "{text}");
        assert!(text.contains("squidbot_channel_sent_total{channel=\"matrix\",result=\"ok\"} 7\n"), "{text}");
        assert!(text.contains("squidbot_errors_total{kind=\"turn\"} 1\n"), "{text}");
        assert_eq!(metrics.usage_totals(), (3, 15, 3));
    }

    #[test]
    fn delegations_and_bus_messages_are_counted() {
        let metrics = Metrics::default();
        metrics.worker_started("coder");
        metrics.worker_started("coder");
        metrics.worker_finished("coder", WorkerOutcome::Done, Duration::from_secs(20));
        metrics.worker_finished("coder", WorkerOutcome::TimedOut, Duration::from_secs(400));
        let gauges = Gauges {
            workers_running: 1,
            bus_results: vec![("delivered.verified".into(), 3), ("owner_binding_violation".into(), 1)],
            ..Gauges::default()
        };
        let text = metrics.render(&gauges);
        for line in [
            "squidbot_workers_running 1\n",
            "squidbot_workers_started_total{role=\"coder\"} 2\n",
            "squidbot_workers_finished_total{role=\"coder\",outcome=\"done\"} 1\n",
            "squidbot_workers_finished_total{role=\"coder\",outcome=\"timeout\"} 1\n",
            "squidbot_delegation_duration_seconds_bucket{role=\"coder\",le=\"30\"} 1\n",
            "squidbot_delegation_duration_seconds_bucket{role=\"coder\",le=\"900\"} 2\n",
            "squidbot_delegation_duration_seconds_count{role=\"coder\"} 2\n",
            "squidbot_bus_messages_total{result=\"owner_binding_violation\"} 1\n",
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
    }
}
