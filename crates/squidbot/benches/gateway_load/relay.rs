//! Relay overhead per streamed token: the scripted provider stamps every word with the
//! time it handed it to its connection, and the client subtracts that from the time the
//! word reached it, straight from the provider, through the gateway's SSE API, and
//! through the gateway's WebSocket protocol.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use futures_util::StreamExt;
use serde_json::{Value, json};

use crate::client;
use crate::processes::{MODEL, TOKEN};
use crate::stats::Samples;

/// Words per reply.
pub const WORDS: usize = 100;

/// Pause between words at the provider.
pub const WORD_INTERVAL: Duration = Duration::from_millis(5);

/// The provider's options for stamped, paced words.
pub fn provider_options() -> Vec<String> {
    let reply = vec!["word"; WORDS].join(" ");
    vec![
        "--reply".to_owned(),
        reply,
        "--token-interval-ms".to_owned(),
        WORD_INTERVAL.as_millis().to_string(),
        "--stamp-tokens".to_owned(),
    ]
}

/// What each path adds between the provider's send and the client's receipt, in ms.
pub struct RelayReport {
    /// Client straight to the provider: the loopback and HTTP floor.
    pub direct: Samples,
    /// Through `POST /v1/chat/completions` with `stream: true`.
    pub sse: Samples,
    /// Through `chat` events of the WebSocket protocol (coalesced by design).
    pub websocket: Samples,
}

fn unix_micros() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |elapsed| elapsed.as_micros())
}

/// Milliseconds from each stamp in `text` to `arrived` (both Unix microseconds).
fn delays(text: &str, arrived: u128, skip: usize, samples: &mut Vec<f64>) -> Result<usize> {
    let mut count = 0;
    for stamp in text.split_whitespace().skip(skip) {
        let sent: u128 = stamp.parse().with_context(|| format!("{stamp:?} is not a send stamp"))?;
        samples.push(arrived.saturating_sub(sent) as f64 / 1000.0);
        count += 1;
    }
    Ok(count)
}

/// Reads an OpenAI SSE response, taking each chunk's arrival time before parsing it.
async fn stamped_stream(response: reqwest::Response, samples: &mut Vec<f64>) -> Result<usize> {
    if !response.status().is_success() {
        bail!("status {}: {}", response.status(), response.text().await.unwrap_or_default());
    }
    let mut body = response.bytes_stream();
    let mut buffer = String::new();
    let mut words = 0;
    while let Some(chunk) = body.next().await {
        let arrived = unix_micros();
        buffer.push_str(&String::from_utf8_lossy(&chunk.context("can't read the stream")?));
        while let Some(end) = buffer.find("\n\n") {
            let event: String = buffer.drain(..end + 2).collect();
            let Some(data) = event.trim().strip_prefix("data: ") else { continue };
            if data == "[DONE]" {
                return Ok(words);
            }
            let chunk: Value = serde_json::from_str(data).context("an SSE chunk that is not JSON")?;
            if let Some(content) = chunk["choices"][0]["delta"]["content"].as_str() {
                words += delays(content, arrived, 0, samples)?;
            }
        }
    }
    bail!("the stream ended without [DONE]")
}

/// Measures `requests` replies on each path.
pub async fn measure(provider_base: &str, gateway_base: &str, requests: usize) -> Result<RelayReport> {
    let http = reqwest::Client::new();
    let mut direct = Vec::new();
    for request in 0..requests {
        let body = json!({
            "model": "bench-model", "stream": true,
            "messages": [{"role": "system", "content": "You are a benchmark."}, {"role": "user", "content": "go"}],
        });
        let response = http.post(format!("{provider_base}/chat/completions")).bearer_auth("sk-bench").json(&body);
        let words = stamped_stream(response.send().await?, &mut direct).await?;
        check_words(words, "direct", request)?;
    }
    let mut sse = Vec::new();
    for request in 0..requests {
        let body = json!({
            "model": MODEL, "stream": true, "user": format!("bench-relay-{request}"),
            "messages": [{"role": "user", "content": "go"}],
        });
        let response = http.post(format!("{gateway_base}/v1/chat/completions")).bearer_auth(TOKEN).json(&body);
        let words = stamped_stream(response.send().await?, &mut sse).await?;
        check_words(words, "SSE", request)?;
    }
    let mut websocket = Vec::new();
    let mut socket = client::connect(&gateway_base.replace("http://", "ws://")).await?;
    for request in 0..requests {
        let run_id = format!("bench-relay-ws-{request}");
        client::send_chat(&mut socket, &format!("bench-relay-ws-{request}"), "go", &run_id).await?;
        let mut seen = 0;
        let mut failure = None;
        client::until_final(&mut socket, &run_id, |text| {
            let arrived = unix_micros();
            match delays(text, arrived, seen, &mut websocket) {
                Ok(count) => seen += count,
                Err(error) => failure = Some(error),
            }
        })
        .await?;
        if let Some(error) = failure {
            return Err(error);
        }
        check_words(seen, "WebSocket", request)?;
    }
    Ok(RelayReport { direct: Samples::new(direct), sse: Samples::new(sse), websocket: Samples::new(websocket) })
}

fn check_words(words: usize, path: &str, request: usize) -> Result<()> {
    if words != WORDS {
        bail!("{path} request {request} carried {words} stamped words instead of {WORDS}");
    }
    Ok(())
}
