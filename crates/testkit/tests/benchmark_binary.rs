//! The `squidbot-scripted-llm` benchmark binary answers both chat wires with its fixed reply
//! and embeddings with the fake model.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::support::{anthropic_body, openai_body, openai_chunks, read_stream};

/// Kills the server process this test started, even when an assertion fails.
struct RunningServer(Child);

impl Drop for RunningServer {
    fn drop(&mut self) {
        if let Err(error) = self.0.kill() {
            eprintln!("can't stop the benchmark server: {error}");
        }
        if let Err(error) = self.0.wait() {
            eprintln!("can't reap the benchmark server: {error}");
        }
    }
}

/// Starts the binary with `arguments` and returns it with its base URL.
fn start(arguments: &[&str]) -> (RunningServer, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_squidbot-scripted-llm"))
        .args(arguments)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    let stdout = child.stdout.take().expect("piped stdout");
    let server = RunningServer(child);
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).expect("a first line");
    let base_url = line.trim().strip_prefix("listening on ").expect("the listening line").to_owned();
    assert!(base_url.starts_with("http://127.0.0.1:") && base_url.ends_with("/v1"), "{base_url}");
    (server, base_url)
}

#[tokio::test]
async fn the_benchmark_binary_answers_every_request_with_its_reply() {
    let (server, base_url) = start(&["--port", "0", "--reply", "bench reply"]);

    let client = reqwest::Client::new();
    for _ in 0..3 {
        let completion: Value = client
            .post(format!("{base_url}/chat/completions"))
            .json(&openai_body(false))
            .send()
            .await
            .expect("response")
            .json()
            .await
            .expect("JSON");
        assert_eq!(completion["choices"][0]["message"]["content"], "bench reply");
    }
    let response =
        client.post(format!("{base_url}/chat/completions")).json(&openai_body(true)).send().await.expect("response");
    let text: String = openai_chunks(&read_stream(response).await.text)
        .iter()
        .filter_map(|chunk| chunk["choices"][0]["delta"]["content"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(text, "bench reply");
    let message: Value = client
        .post(format!("{base_url}/messages"))
        .json(&anthropic_body(false))
        .send()
        .await
        .expect("response")
        .json()
        .await
        .expect("JSON");
    assert_eq!(message["content"][0]["text"], "bench reply");
    let embeddings: Value = client
        .post(format!("{base_url}/embeddings"))
        .json(&json!({"model": "embed", "input": ["red car", "automobile"], "dimensions": 8}))
        .send()
        .await
        .expect("response")
        .json()
        .await
        .expect("JSON");
    let second: Vec<f32> = embeddings["data"][1]["embedding"]
        .as_array()
        .expect("a vector")
        .iter()
        .map(|number| number.as_f64().expect("a number") as f32)
        .collect();
    assert_eq!(second, squidbot_testkit::fake_embedding("automobile", 8));
    let response =
        client.post(format!("{base_url}/messages")).json(&json!({"messages": []})).send().await.expect("response");
    assert_eq!(response.status(), 200, "violations are logged, not fatal");
    drop(server);
}

#[tokio::test]
async fn latency_pacing_and_stamps_shape_the_answers() {
    let (server, base_url) = start(&[
        "--port",
        "0",
        "--reply",
        "one two three four",
        "--delay-ms",
        "60",
        "--token-interval-ms",
        "15",
        "--stamp-tokens",
    ]);
    let client = reqwest::Client::new();
    let started = Instant::now();
    let completion: Value = client
        .post(format!("{base_url}/chat/completions"))
        .json(&openai_body(false))
        .send()
        .await
        .expect("response")
        .json()
        .await
        .expect("JSON");
    assert!(started.elapsed() >= Duration::from_millis(60), "answered before the latency: {:?}", started.elapsed());
    assert_eq!(completion["choices"][0]["message"]["content"], "one two three four", "plain answers are not stamped");

    let before = SystemTime::now().duration_since(UNIX_EPOCH).expect("a clock after 1970").as_micros();
    let response =
        client.post(format!("{base_url}/chat/completions")).json(&openai_body(true)).send().await.expect("response");
    let stream = read_stream(response).await.text;
    assert!(stream.ends_with("data: [DONE]\n\n"), "{stream}");
    let stamps: Vec<u128> = openai_chunks(&stream)
        .iter()
        .filter_map(|chunk| chunk["choices"][0]["delta"]["content"].as_str().map(str::to_owned))
        .filter(|content| !content.is_empty())
        .map(|content| content.trim_end().parse().expect("a stamp in microseconds"))
        .collect();
    assert_eq!(stamps.len(), 4, "one stamp per word: {stream}");
    assert!(stamps[0] >= before + 60_000 + 15_000, "the first word waits for the latency and one interval");
    for pair in stamps.windows(2) {
        assert!(pair[1] - pair[0] >= 15_000, "words leave at least the interval apart: {stamps:?}");
    }
    drop(server);
}
