//! What the leak scan costs a streamed reply: 2,000 deltas of 4 to 20 characters relayed
//! as the gateway relays them (each delta through the turn's `StreamRedactor`, a copy of
//! the text kept for the session, one OpenAI-compatible SSE frame serialised per piece
//! sent on), with a scanner holding 100 vault values of 24 to 40 characters, against the
//! same relay with a scanner holding none (the key shapes only, what every turn pays) and
//! with no redactor at all. The arms alternate, one reply each, so load drifts alike;
//! prints the median and p90 time per reply of each and the ratios.
//!
//! `cargo bench -p squidbot-core --bench leak_relay`; `SQUIDBOT_BENCH_ROUNDS` (default
//! 300) sets the replies timed per arm.

#![allow(clippy::expect_used, reason = "a benchmark aborts loudly on any setup failure")]

use std::hint::black_box;
use std::time::{Duration, Instant};

use serde_json::json;
use squidbot_core::leaks::{LeakScanner, StreamRedactor};

const DELTAS: usize = 2_000;
const VAULT_VALUES: usize = 100;

/// A small deterministic generator (xorshift64*), so every run relays the same reply.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, bound: usize) -> usize {
        usize::try_from(self.next() % u64::try_from(bound).expect("bound fits")).expect("index fits")
    }
}

/// A reply as a model streams it: prose, some code and numbers, cut into deltas of 4 to
/// 20 characters at arbitrary points (not at word ends).
fn reply_deltas(random: &mut Random) -> Vec<String> {
    const WORDS: &[&str] = &[
        "the",
        "gateway",
        "relays",
        "each",
        "delta",
        "to",
        "the",
        "client",
        "as",
        "soon",
        "as",
        "it",
        "arrives,",
        "and",
        "a",
        "reply",
        "of",
        "two",
        "thousand",
        "pieces",
        "is",
        "ordinary",
        "for",
        "a",
        "long",
        "answer.",
        "Here",
        "is",
        "`let",
        "value",
        "=",
        "config.get(\"model\")?;`",
        "which",
        "returns",
        "42",
        "or",
        "an",
        "error",
        "(see",
        "docs/configuration.md).",
        "Run",
        "`cargo",
        "test`",
        "then",
        "check",
        "the",
        "output:",
        "OK",
        "3.14159",
        "2026-11-27",
        "https://example.org/path?q=1",
        "skipping",
        "bot",
        "token",
        "Bearer",
        "is",
        "a",
        "word",
        "here,",
        "not",
        "a",
        "secret.",
    ];
    let mut text = String::new();
    let mut deltas = Vec::with_capacity(DELTAS);
    while deltas.len() < DELTAS {
        while text.len() < 64 {
            text.push_str(WORDS[random.below(WORDS.len())]);
            text.push(if random.below(12) == 0 { '\n' } else { ' ' });
        }
        let mut cut = 4 + random.below(17);
        while !text.is_char_boundary(cut) {
            cut += 1;
        }
        deltas.push(text[..cut].to_owned());
        text.drain(..cut);
    }
    deltas
}

/// 100 random values of 24 to 40 characters, as API keys and tokens look.
fn vault_values(random: &mut Random) -> Vec<String> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-";
    (0..VAULT_VALUES)
        .map(|_| {
            let length = 24 + random.below(17);
            (0..length).map(|_| char::from(ALPHABET[random.below(ALPHABET.len())])).collect()
        })
        .collect()
}

/// One SSE frame of the OpenAI-compatible stream, as `crates/server/src/openai.rs` makes it.
fn frame(text: &str) -> String {
    let chunk = json!({
        "id": "run-0123456789abcdef", "object": "chat.completion.chunk", "created": 1_795_800_000, "model": "local/m",
        "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}],
    });
    format!("data: {chunk}\n\n")
}

/// Relays `deltas` through `scanner`'s redactor (or none), keeping the text streamed
/// and serialising a frame per piece sent on; returns the bytes framed.
fn relay(deltas: &[String], scanner: Option<&LeakScanner>) -> usize {
    let mut streamed = String::new();
    let mut framed = 0;
    let mut send = |safe: &str, streamed: &mut String| {
        if !safe.is_empty() {
            streamed.push_str(safe);
            framed += black_box(frame(safe)).len();
        }
    };
    match scanner {
        Some(scanner) => {
            let mut redactor = StreamRedactor::new(scanner);
            for delta in deltas {
                let safe = redactor.push(delta);
                send(&safe, &mut streamed);
            }
            let rest = redactor.finish();
            send(&rest, &mut streamed);
        }
        None => {
            for delta in deltas {
                send(delta, &mut streamed);
            }
        }
    }
    black_box(streamed);
    framed
}

fn percentile(sorted: &[Duration], fraction: f64) -> Duration {
    let index = ((sorted.len() - 1) as f64 * fraction).round() as usize;
    sorted[index]
}

fn main() {
    let rounds: usize =
        std::env::var("SQUIDBOT_BENCH_ROUNDS").ok().and_then(|rounds| rounds.parse().ok()).unwrap_or(300);
    let mut random = Random(0x5EED_1234_ABCD_0001);
    let deltas = reply_deltas(&mut random);
    let values = vault_values(&mut random);
    let characters: usize = deltas.iter().map(String::len).sum();
    let shapes_only = LeakScanner::new(Vec::new());
    let with_values = LeakScanner::new(values);
    assert!(with_values.has_configured_values());
    // Every arm relays the same text unchanged (nothing in it is a secret).
    let plain: String = deltas.concat();
    for scanner in [Some(&shapes_only), Some(&with_values)] {
        let mut redactor = StreamRedactor::new(scanner.expect("a scanner"));
        let mut out: String = deltas.iter().map(|delta| redactor.push(delta)).collect();
        out.push_str(&redactor.finish());
        assert_eq!(out, plain, "the bench reply holds no secret");
    }
    let arms: [(&str, Option<&LeakScanner>); 3] = [
        ("no redactor (frames only)", None),
        ("redactor, key shapes only", Some(&shapes_only)),
        ("redactor, shapes + 100 vault values", Some(&with_values)),
    ];
    for (_, scanner) in &arms {
        for _ in 0..20 {
            black_box(relay(&deltas, *scanner));
        }
    }
    let mut times: Vec<Vec<Duration>> = vec![Vec::with_capacity(rounds); arms.len()];
    for _ in 0..rounds {
        for (index, (_, scanner)) in arms.iter().enumerate() {
            let started = Instant::now();
            black_box(relay(&deltas, *scanner));
            times[index].push(started.elapsed());
        }
    }
    println!("{DELTAS} deltas, {characters} characters, {rounds} replies per arm, arms alternating");
    let mut medians = Vec::new();
    for ((name, _), samples) in arms.iter().zip(&mut times) {
        samples.sort();
        let median = percentile(samples, 0.5);
        medians.push(median);
        println!(
            "{name:<38} median {:>8.3} ms  p90 {:>8.3} ms  per delta {:>6.2} µs",
            median.as_secs_f64() * 1e3,
            percentile(samples, 0.9).as_secs_f64() * 1e3,
            median.as_secs_f64() * 1e6 / DELTAS as f64
        );
    }
    let ratio = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64();
    println!("100 vault values / shapes only (medians): {:.3}", ratio(medians[2], medians[1]));
    println!("100 vault values / no redactor (medians): {:.3}", ratio(medians[2], medians[0]));
    println!("shapes only / no redactor (medians):      {:.3}", ratio(medians[1], medians[0]));
}
