//! Gateway metrics in the Prometheus text exposition format: turns, their duration,
//! tokens per model, tool calls and durations, HTTP requests, open sessions, uptime.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

/// Upper bounds (seconds) of the duration histograms.
const BUCKETS: [f64; 11] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

#[derive(Debug, Default, Clone)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

impl Histogram {
    fn observe(&mut self, duration: Duration) {
        let seconds = duration.as_secs_f64();
        for (bound, count) in BUCKETS.iter().zip(self.counts.iter_mut()) {
            if seconds <= *bound {
                *count += 1;
            }
        }
        self.count += 1;
        self.sum += seconds;
    }

    fn render(&self, output: &mut String, name: &str, labels: &str) {
        let separator = if labels.is_empty() { "" } else { "," };
        for (bound, count) in BUCKETS.iter().zip(self.counts.iter()) {
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
        if let Ok(mut data) = self.data.lock() {
            change(&mut data);
        }
    }

    /// A finished turn: its model, outcome (`completed`, `max_turns`, `cancelled`, `error`),
    /// duration and tokens.
    pub fn turn(&self, model: &str, outcome: &str, duration: Duration, input_tokens: u64, output_tokens: u64) {
        self.with(|data| {
            *data.turns.entry((model.to_owned(), outcome.to_owned())).or_default() += 1;
            data.turn_seconds.entry(model.to_owned()).or_default().observe(duration);
            *data.tokens.entry((model.to_owned(), "input")).or_default() += input_tokens;
            *data.tokens.entry((model.to_owned(), "output")).or_default() += output_tokens;
        });
    }

    /// A finished tool call.
    pub fn tool(&self, name: &str, failed: bool, duration: Duration) {
        self.with(|data| {
            *data.tool_calls.entry((name.to_owned(), if failed { "error" } else { "ok" })).or_default() += 1;
            data.tool_seconds.entry(name.to_owned()).or_default().observe(duration);
        });
    }

    /// An answered HTTP request.
    pub fn request(&self, route: &'static str, status: u16) {
        self.with(|data| *data.requests.entry((route, status)).or_default() += 1);
    }

    /// The exposition text, with the gauges given by the caller.
    pub fn render(&self, open_sessions: usize, uptime: Duration) -> String {
        let mut output = String::new();
        let Ok(data) = self.data.lock() else { return output };
        let family = |output: &mut String, name: &str, kind: &str, help: &str| {
            output.push_str(&format!("# HELP {name} {help}\n# TYPE {name} {kind}\n"));
        };
        family(&mut output, "squidbot_uptime_seconds", "gauge", "Seconds since the gateway started.");
        output.push_str(&format!("squidbot_uptime_seconds {}\n", uptime.as_secs_f64()));
        family(&mut output, "squidbot_sessions_open", "gauge", "Sessions loaded in memory.");
        output.push_str(&format!("squidbot_sessions_open {open_sessions}\n"));
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
        family(&mut output, "squidbot_http_requests_total", "counter", "HTTP requests by route and status.");
        for ((route, status), count) in &data.requests {
            output
                .push_str(&format!("squidbot_http_requests_total{{route=\"{route}\",status=\"{status}\"}} {count}\n"));
        }
        output
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_are_cumulative_and_labels_escaped() {
        let metrics = Metrics::default();
        metrics.turn("a/\"b\"", "completed", Duration::from_millis(30), 10, 2);
        metrics.turn("a/\"b\"", "completed", Duration::from_secs(3), 5, 1);
        let text = metrics.render(1, Duration::from_secs(2));
        assert!(text.contains("squidbot_turns_total{model=\"a/\\\"b\\\"\",outcome=\"completed\"} 2"), "{text}");
        assert!(text.contains("le=\"0.05\"} 1\n"), "{text}");
        assert!(text.contains("le=\"+Inf\"} 2\n"), "{text}");
        assert!(text.contains("squidbot_llm_tokens_total{model=\"a/\\\"b\\\"\",direction=\"input\"} 15"), "{text}");
    }
}
