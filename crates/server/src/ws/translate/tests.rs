//! Pins every frame a turn produces against the `json!` tree it was built as before the
//! frames were typed, so the protocol cannot drift; and times one turn's frames both ways.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::Message;
use serde_json::{Value, json};
use squidbot_core::events::{RunEnd, TurnEvent, TurnEventKind};
use squidbot_types::message::Usage;
use tokio::sync::mpsc;

use super::Runs;
use crate::ws::frame::{ErrorCode, MethodError};
use crate::ws::outbox::{OUT_QUEUE, Outbox};

const RUN: &str = "run-7";
const SESSION: &str = "agent:main:main";

fn turn_event(seq: u64, kind: TurnEventKind) -> Arc<TurnEvent> {
    Arc::new(TurnEvent {
        run_id: RUN.into(),
        session_key: SESSION.into(),
        seq,
        at_ms: 1_700_000_000_000 + seq as i64,
        correlation_id: "corr-1".into(),
        kind,
    })
}

fn usage() -> Usage {
    Usage { input_tokens: 1200, output_tokens: 34, cached_input_tokens: 1000, cache_write_tokens: 0 }
}

/// A connection's translation state and the frames it queued.
struct Client {
    runs: Runs,
    out: Outbox,
    queue: mpsc::Receiver<Message>,
    protocol: u64,
}

impl Client {
    fn new(protocol: u64) -> Self {
        let (sender, queue) = mpsc::channel(OUT_QUEUE);
        Self { runs: Runs::default(), out: Outbox::new(sender), queue, protocol }
    }

    fn forward(&mut self, event: &Arc<TurnEvent>) {
        self.runs.forward(event, &mut self.out, self.protocol);
    }

    /// The frames queued so far, parsed.
    fn frames(&mut self) -> Vec<Value> {
        let mut frames = Vec::new();
        while let Ok(message) = self.queue.try_recv() {
            let Message::Text(text) = message else { panic!("not a text frame: {message:?}") };
            frames.push(serde_json::from_str(text.as_str()).unwrap_or_else(|error| panic!("{error}: {text}")));
        }
        frames
    }
}

// The frames as the code before the typed payloads built them, kept verbatim.

fn old_assistant_message(text: &str, at_ms: i64) -> Value {
    json!({"role": "assistant", "content": [{"type": "text", "text": text}], "timestamp": at_ms})
}

fn old_agent(event: &TurnEvent, stream: &str, data: Value) -> Value {
    json!({
        "runId": event.run_id, "sessionKey": event.session_key, "agentId": "main",
        "stream": stream, "data": data, "seq": event.seq, "ts": event.at_ms,
    })
}

fn old_chat(event: &TurnEvent, state: &str, extra: Value) -> Value {
    let mut payload = json!({
        "runId": event.run_id, "sessionKey": event.session_key, "agentId": "main",
        "seq": event.seq, "state": state,
    });
    if let (Some(payload), Value::Object(extra)) = (payload.as_object_mut(), extra) {
        payload.extend(extra);
    }
    payload
}

fn old_event(name: &str, payload: Value, seq: u64) -> Value {
    json!({"type": "event", "event": name, "payload": payload, "seq": seq})
}

fn old_ok(id: &str, payload: Value) -> Value {
    json!({"type": "res", "id": id, "ok": true, "payload": payload})
}

/// Wraps payloads in event envelopes numbered from 1.
fn numbered(payloads: Vec<(&str, Value)>) -> Vec<Value> {
    payloads.into_iter().zip(1..).map(|((name, payload), seq)| old_event(name, payload, seq)).collect()
}

fn assert_frames(actual: &[Value], expected: &[Value]) {
    assert_eq!(actual.len(), expected.len(), "{actual:#?}");
    for (index, (actual, expected)) in actual.iter().zip(expected).enumerate() {
        assert_eq!(actual, expected, "frame {index}");
    }
}

#[test]
fn a_finished_turn_sends_the_frames_it_always_sent() {
    for protocol in [3, 4] {
        let mut client = Client::new(protocol);
        client.runs.await_final(RUN, "req-1");
        let started = turn_event(
            1,
            TurnEventKind::Started { input: "hi".into(), origin: "openclaw".into(), model: "anthropic/claude".into() },
        );
        let first = turn_event(2, TurnEventKind::Delta { text: "Hel".into() });
        // Held back or not, the second piece goes out before the usage, with the same frame.
        let second = turn_event(3, TurnEventKind::Delta { text: "lo \"ü\"".into() });
        let call = turn_event(
            4,
            TurnEventKind::ModelCall {
                model: "anthropic/claude".into(),
                duration: Duration::from_millis(812),
                usage: usage(),
                ok: true,
            },
        );
        let finished = turn_event(
            5,
            TurnEventKind::Finished {
                reply: "Hello \"ü\"".into(),
                end: RunEnd::Completed,
                usage: usage(),
                model: "anthropic/claude".into(),
                tool_calls: 2,
                duration: Duration::from_millis(1500),
            },
        );
        for event in [&started, &first, &second, &call, &finished] {
            client.forward(event);
        }
        let delta = |event: &TurnEvent, whole: &str, piece: &str| {
            let mut extra = json!({"message": old_assistant_message(whole, event.at_ms)});
            if protocol >= 4 {
                extra["deltaText"] = Value::String(piece.into());
            }
            old_chat(event, "delta", extra)
        };
        let usage_json = json!({"input": 1200, "output": 34, "cacheRead": 1000, "total": 1234});
        let mut expected = numbered(vec![
            ("agent", old_agent(&started, "lifecycle", json!({"phase": "start", "startedAt": started.at_ms}))),
            (
                "agent",
                old_agent(&started, "lifecycle", json!({"phase": "model", "provider": "anthropic", "model": "claude"})),
            ),
            ("agent", old_agent(&first, "assistant", json!({"text": "Hel", "delta": "Hel"}))),
            ("chat", delta(&first, "Hel", "Hel")),
            ("agent", old_agent(&second, "assistant", json!({"text": "Hello \"ü\"", "delta": "lo \"ü\""}))),
            ("chat", delta(&second, "Hello \"ü\"", "lo \"ü\"")),
            (
                "agent",
                old_agent(
                    &call,
                    "usage",
                    json!({
                        "model": "anthropic/claude", "inputTokens": 1200, "outputTokens": 34,
                        "ok": true, "durationMs": 812,
                    }),
                ),
            ),
            (
                "agent",
                old_agent(
                    &finished,
                    "lifecycle",
                    json!({
                        "phase": "end", "aborted": false, "stopReason": "stop",
                        "endedAt": finished.at_ms, "toolCalls": 2,
                    }),
                ),
            ),
            (
                "chat",
                old_chat(
                    &finished,
                    "final",
                    json!({
                        "message": old_assistant_message("Hello \"ü\"", finished.at_ms), "usage": usage_json,
                        "stopReason": "stop",
                    }),
                ),
            ),
        ]);
        expected.push(old_ok(
            "req-1",
            json!({
                "runId": RUN,
                "status": "ok",
                "summary": "completed",
                "result": {
                    "payloads": [{"text": "Hello \"ü\"", "mediaUrl": null}],
                    "meta": {
                        "durationMs": 1500,
                        "stopReason": "stop",
                        "agentMeta": {
                            "sessionKey": SESSION, "provider": "anthropic", "model": "claude",
                            "usage": usage_json,
                        },
                    },
                },
            }),
        ));
        assert_frames(&client.frames(), &expected);
        assert!(client.runs.views.is_empty(), "a finished run is forgotten");
    }
}

#[test]
fn tools_notices_files_and_resets_send_the_frames_they_always_sent() {
    let mut client = Client::new(4);
    let events = [
        turn_event(
            1,
            TurnEventKind::ToolStarted {
                call_id: "call-1".into(),
                name: "read_file".into(),
                arguments: r#"{"path":"a.txt","lines":[1,2]}"#.into(),
            },
        ),
        turn_event(
            2,
            TurnEventKind::ToolStarted { call_id: "call-2".into(), name: "exec".into(), arguments: "not json".into() },
        ),
        turn_event(
            3,
            TurnEventKind::ToolFinished {
                call_id: "call-1".into(),
                name: "read_file".into(),
                is_error: true,
                duration: Duration::from_millis(5),
                output: "no such file".into(),
            },
        ),
        turn_event(4, TurnEventKind::Warning { message: "falling back".into() }),
        turn_event(5, TurnEventKind::Notice { message: "compacted".into() }),
        turn_event(
            6,
            TurnEventKind::File { path: "/tmp/a.png".into(), name: "a.png".into(), mime: "image/png".into() },
        ),
        turn_event(7, TurnEventKind::Delta { text: "draft".into() }),
        turn_event(8, TurnEventKind::StreamReset),
    ];
    for event in &events {
        client.forward(event);
    }
    let expected = numbered(vec![
        (
            "agent",
            old_agent(
                &events[0],
                "tool",
                json!({"phase": "start", "name": "read_file", "toolCallId": "call-1",
                       "args": {"path": "a.txt", "lines": [1, 2]}}),
            ),
        ),
        (
            "agent",
            old_agent(
                &events[1],
                "tool",
                json!({"phase": "start", "name": "exec", "toolCallId": "call-2", "args": "not json"}),
            ),
        ),
        (
            "agent",
            old_agent(
                &events[2],
                "tool",
                json!({"phase": "result", "name": "read_file", "toolCallId": "call-1", "isError": true,
                       "durationMs": 5, "result": "no such file"}),
            ),
        ),
        ("agent", old_agent(&events[3], "notice", json!({"message": "falling back"}))),
        ("agent", old_agent(&events[4], "notice", json!({"message": "compacted"}))),
        (
            "agent",
            old_agent(&events[5], "file", json!({"path": "/tmp/a.png", "name": "a.png", "mimeType": "image/png"})),
        ),
        ("agent", old_agent(&events[6], "assistant", json!({"text": "draft", "delta": "draft"}))),
        (
            "chat",
            old_chat(
                &events[6],
                "delta",
                json!({"message": old_assistant_message("draft", events[6].at_ms), "deltaText": "draft"}),
            ),
        ),
        ("agent", old_agent(&events[7], "assistant", json!({"text": "", "delta": "", "replace": true}))),
    ]);
    assert_frames(&client.frames(), &expected);
    let view = &client.runs.views[RUN];
    assert_eq!((view.text.as_str(), view.sent), ("", 0), "a reset voids the text streamed so far");
}

#[test]
fn aborted_and_failed_runs_send_the_frames_they_always_sent() {
    let mut client = Client::new(4);
    client.runs.await_final(RUN, "req-a");
    let aborted = turn_event(1, TurnEventKind::Aborted { partial: "Half".into(), duration: Duration::from_secs(2) });
    client.forward(&aborted);
    let mut expected = numbered(vec![
        (
            "agent",
            old_agent(
                &aborted,
                "lifecycle",
                json!({"phase": "end", "aborted": true, "stopReason": "aborted", "endedAt": aborted.at_ms}),
            ),
        ),
        (
            "chat",
            old_chat(
                &aborted,
                "aborted",
                json!({"message": old_assistant_message("Half", aborted.at_ms), "stopReason": "aborted"}),
            ),
        ),
    ]);
    expected.push(old_ok(
        "req-a",
        json!({
            "runId": RUN, "status": "aborted", "summary": "aborted",
            "result": {"payloads": [{"text": "Half", "mediaUrl": null}],
                       "meta": {"durationMs": 2000, "aborted": true}},
        }),
    ));
    assert_frames(&client.frames(), &expected);

    let mut client = Client::new(4);
    client.runs.await_final(RUN, "req-f");
    let failed =
        turn_event(1, TurnEventKind::Failed { error: "can't reach the model".into(), duration: Duration::ZERO });
    client.forward(&failed);
    let mut expected = numbered(vec![
        (
            "agent",
            old_agent(
                &failed,
                "lifecycle",
                json!({"phase": "error", "error": "can't reach the model", "endedAt": failed.at_ms}),
            ),
        ),
        ("chat", old_chat(&failed, "error", json!({"errorMessage": "can't reach the model", "errorKind": "agent"}))),
    ]);
    let failure = MethodError::new(ErrorCode::Unavailable, "the turn failed: can't reach the model");
    expected.push(json!({
        "type": "res", "id": "req-f", "ok": false,
        "error": {"code": failure.code.as_str(), "message": failure.message, "retryable": false},
    }));
    assert_frames(&client.frames(), &expected);
}

#[test]
fn background_results_and_bus_messages_send_the_frames_they_always_sent() {
    let mut client = Client::new(4);
    let background = turn_event(
        1,
        TurnEventKind::Background {
            worker_id: "w-1".into(),
            agent: "researcher".into(),
            status: "done".into(),
            text: "[background researcher w-1 done]\nfound it".into(),
            worker_session: "agent:researcher:w-1".into(),
        },
    );
    let bus = turn_event(
        2,
        TurnEventKind::BusMessage {
            message_id: "m-9".into(),
            from: "w-1".into(),
            role: "researcher".into(),
            priority: "urgent".into(),
            text: "(RESEARCHER #9): [FYI] done".into(),
        },
    );
    client.forward(&background);
    client.forward(&bus);
    let expected = numbered(vec![
        (
            "chat",
            old_chat(
                &background,
                "final",
                json!({
                    "message": old_assistant_message("[background researcher w-1 done]\nfound it", background.at_ms),
                    "stopReason": "background",
                    "background": {
                        "workerId": "w-1", "agent": "researcher", "status": "done",
                        "workerSession": "agent:researcher:w-1", "correlationId": "corr-1",
                    },
                }),
            ),
        ),
        (
            "chat",
            old_chat(
                &bus,
                "final",
                json!({
                    "message": old_assistant_message("(RESEARCHER #9): [FYI] done", bus.at_ms),
                    "stopReason": "bus",
                    "bus": {
                        "messageId": "m-9", "from": "w-1", "role": "researcher", "priority": "urgent",
                        "correlationId": "corr-1",
                    },
                }),
            ),
        ),
    ]);
    assert_frames(&client.frames(), &expected);
}

#[test]
fn held_back_text_goes_out_once_its_window_passed() {
    let mut client = Client::new(4);
    client.forward(&turn_event(1, TurnEventKind::Delta { text: "a".into() }));
    let last = turn_event(2, TurnEventKind::Delta { text: "b".into() });
    client.forward(&last);
    let sent = client.frames().len();
    // Unless the machine stalled for the whole window, "b" is held back.
    if sent == 2 {
        assert!(client.runs.next_flush().is_some());
        std::thread::sleep(super::DELTA_WINDOW + Duration::from_millis(5));
        client.runs.flush_due(&mut client.out, client.protocol);
        let frames = client.frames();
        assert_eq!(frames.len(), 2);
        assert_eq!(frames[0]["payload"]["data"], json!({"text": "ab", "delta": "b"}));
        assert_eq!(frames[1]["payload"]["deltaText"], "b");
        assert_eq!(frames[1]["payload"]["seq"], last.seq);
    }
    assert_eq!(client.runs.next_flush(), None);
}

/// One `chat.send` turn the way the code before the typed frames built it: `json!`
/// payloads, wrapped in a `json!` envelope, printed through `Display`.
fn old_turn(events: &[Arc<TurnEvent>], out: &mpsc::Sender<Message>, mut seq: u64) -> u64 {
    let mut send_event = |name: &str, payload: Value| {
        seq += 1;
        let text = json!({"type": "event", "event": name, "payload": payload, "seq": seq}).to_string();
        let _queued = out.try_send(Message::Text(text.into())).is_ok();
    };
    let accepted = json!({"runId": RUN, "sessionKey": SESSION, "status": "started"});
    let text = json!({"type": "res", "id": "req-1", "ok": true, "payload": accepted}).to_string();
    let _queued = out.try_send(Message::Text(text.into())).is_ok();
    let mut views: std::collections::HashMap<String, String> = std::collections::HashMap::new();
    for event in events {
        // The old code looked the run up to flush held-back text before any other event.
        if !matches!(event.kind, TurnEventKind::Delta { .. }) {
            std::hint::black_box(views.get(&event.run_id));
        }
        let view = views.entry(event.run_id.clone()).or_default();
        match &event.kind {
            TurnEventKind::Started { model, .. } => {
                let (provider, model) = super::split_model(model);
                let (provider, model) = (provider.to_owned(), model.to_owned());
                send_event("agent", old_agent(event, "lifecycle", json!({"phase": "start", "startedAt": event.at_ms})));
                let data = json!({"phase": "model", "provider": provider, "model": model});
                send_event("agent", old_agent(event, "lifecycle", data));
            }
            TurnEventKind::Delta { text } => {
                view.push_str(text);
                let delta = text.clone();
                let whole = view.clone();
                send_event("agent", old_agent(event, "assistant", json!({"text": whole, "delta": delta})));
                let mut extra = json!({"message": old_assistant_message(&whole, event.at_ms)});
                extra["deltaText"] = Value::String(delta);
                send_event("chat", old_chat(event, "delta", extra));
            }
            TurnEventKind::ModelCall { model, usage, ok, duration } => {
                let data = json!({
                    "model": model, "inputTokens": usage.input_tokens, "outputTokens": usage.output_tokens,
                    "ok": ok, "durationMs": duration.as_millis() as u64,
                });
                send_event("agent", old_agent(event, "usage", data));
            }
            TurnEventKind::Finished { reply, usage, tool_calls, .. } => {
                views.remove(&event.run_id);
                let usage_json = json!({
                    "input": usage.input_tokens, "output": usage.output_tokens,
                    "cacheRead": usage.cached_input_tokens, "total": usage.total(),
                });
                let lifecycle = json!({
                    "phase": "end", "aborted": false, "stopReason": "stop",
                    "endedAt": event.at_ms, "toolCalls": tool_calls,
                });
                send_event("agent", old_agent(event, "lifecycle", lifecycle));
                let extra = json!({
                    "message": old_assistant_message(reply, event.at_ms), "usage": usage_json, "stopReason": "stop",
                });
                send_event("chat", old_chat(event, "final", extra));
            }
            TurnEventKind::StreamReset
            | TurnEventKind::ToolStarted { .. }
            | TurnEventKind::ToolFinished { .. }
            | TurnEventKind::Warning { .. }
            | TurnEventKind::Notice { .. }
            | TurnEventKind::Waiting { .. }
            | TurnEventKind::File { .. }
            | TurnEventKind::Aborted { .. }
            | TurnEventKind::Failed { .. }
            | TurnEventKind::Background { .. }
            | TurnEventKind::BusMessage { .. } => unreachable!("the timed turn has no {:?}", event.kind),
        }
    }
    seq
}

/// The same turn through the typed frames.
fn new_turn(events: &[Arc<TurnEvent>], runs: &mut Runs, out: &mut Outbox) {
    out.respond_ok("req-1", &json!({"runId": RUN, "sessionKey": SESSION, "status": "started"}));
    for event in events {
        runs.forward(event, out, 4);
    }
}

fn drain(queue: &mut mpsc::Receiver<Message>) -> Vec<String> {
    std::iter::from_fn(|| queue.try_recv().ok())
        .map(|message| match message {
            Message::Text(text) => text.as_str().to_owned(),
            other => panic!("not a text frame: {other:?}"),
        })
        .collect()
}

/// `cargo test --release -p squidbot-server -- --ignored --nocapture one_turn_of_frames`
#[test]
#[ignore = "a timing loop; run in release mode"]
fn one_turn_of_frames_costs_less_typed_than_as_json_trees() {
    let reply = "Sure! Here is a short answer of a few sentences, as a typical reply would be. ".repeat(3);
    let events = vec![
        turn_event(
            1,
            TurnEventKind::Started {
                input: "hello".into(),
                origin: "openclaw".into(),
                model: "anthropic/claude-sonnet".into(),
            },
        ),
        turn_event(2, TurnEventKind::Delta { text: reply.clone() }),
        turn_event(
            3,
            TurnEventKind::ModelCall {
                model: "anthropic/claude-sonnet".into(),
                duration: Duration::from_millis(900),
                usage: usage(),
                ok: true,
            },
        ),
        turn_event(
            4,
            TurnEventKind::Finished {
                reply,
                end: RunEnd::Completed,
                usage: usage(),
                model: "anthropic/claude-sonnet".into(),
                tool_calls: 0,
                duration: Duration::from_millis(950),
            },
        ),
    ];
    let (sender, mut old_queue) = mpsc::channel(OUT_QUEUE);
    let mut runs = Runs::default();
    let (new_sender, mut new_queue) = mpsc::channel(OUT_QUEUE);
    let mut out = Outbox::new(new_sender);

    old_turn(&events, &sender, 0);
    new_turn(&events, &mut runs, &mut out);
    let (old_frames, new_frames) = (drain(&mut old_queue), drain(&mut new_queue));
    assert_eq!(old_frames.len(), 8);
    let parse = |frames: &[String]| frames.iter().map(|text| serde_json::from_str::<Value>(text).unwrap()).collect();
    let (old_values, new_values): (Vec<Value>, Vec<Value>) = (parse(&old_frames), parse(&new_frames));
    assert_eq!(old_values, new_values);
    let bytes: usize = new_frames.iter().map(String::len).sum();
    let identical = old_frames == new_frames;

    const TURNS: u32 = 50_000;
    let mut best = [Duration::MAX; 2];
    for _round in 0..5 {
        let started = std::time::Instant::now();
        let mut seq = 0;
        for _turn in 0..TURNS {
            seq = old_turn(&events, &sender, seq);
            while old_queue.try_recv().is_ok() {}
        }
        best[0] = best[0].min(started.elapsed());
        let started = std::time::Instant::now();
        for _turn in 0..TURNS {
            new_turn(&events, &mut runs, &mut out);
            while new_queue.try_recv().is_ok() {}
        }
        best[1] = best[1].min(started.elapsed());
    }
    let per_turn = best.map(|total| total.as_nanos() as f64 / f64::from(TURNS));
    println!(
        "one turn, 8 frames, {bytes} bytes (byte-identical: {identical}): json! trees {:.0} ns, typed {:.0} ns \
         ({:.2}x)",
        per_turn[0],
        per_turn[1],
        per_turn[0] / per_turn[1]
    );
}
