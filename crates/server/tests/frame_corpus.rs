//! Replays the frame parser's fuzz corpus and named seeds (`fuzz/`) through
//! `ws::frame::parse` on stable, so every input the fuzzer kept is checked in CI.

#![allow(clippy::expect_used, clippy::unwrap_used, reason = "test helpers outside #[test] fail loudly")]

use std::path::{Path, PathBuf};

use serde_json::Value;
use squidbot_server::ws::frame::{ClientFrame, FrameError, MAX_FRAME_BYTES, MAX_PRE_AUTH_BYTES, parse};

/// The corpus must stay small enough to keep in the repository.
const MAX_CORPUS_FILES: usize = 2000;
const MAX_CORPUS_BYTES: u64 = 2 * 1024 * 1024;

fn fuzz_directory(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz").join(name).join("ws_frame")
}

/// Every file of a directory with its name and text (decoded lossily, as the fuzzer does).
fn inputs(directory: &Path) -> Vec<(String, String)> {
    let mut inputs: Vec<(String, String)> = std::fs::read_dir(directory)
        .unwrap_or_else(|error| panic!("can't read {}: {error}", directory.display()))
        .map(|entry| {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let bytes = std::fs::read(&path).unwrap();
            (name, String::from_utf8_lossy(&bytes).into_owned())
        })
        .collect();
    inputs.sort();
    inputs
}

/// The invariants the fuzz target asserts, in their stable-toolchain form.
fn check(name: &str, text: &str) -> [Result<ClientFrame, FrameError>; 2] {
    let results = [parse(text, MAX_PRE_AUTH_BYTES), parse(text, MAX_FRAME_BYTES)];
    for (limit, result) in [MAX_PRE_AUTH_BYTES, MAX_FRAME_BYTES].into_iter().zip(&results) {
        match result {
            Ok(ClientFrame::Request { id, method, .. }) => {
                assert!(!id.is_empty() && !method.is_empty(), "{name}: empty id or method");
                let value: Value = serde_json::from_str(text).unwrap();
                assert_eq!(
                    (value["id"].as_str(), value["method"].as_str()),
                    (Some(id.as_str()), Some(method.as_str()))
                );
            }
            Ok(ClientFrame::Cancel { id }) => assert!(!id.is_empty(), "{name}: empty id"),
            Err(error) => {
                assert!(!error.to_string().is_empty(), "{name}: {error:?} renders empty");
                if let FrameError::TooLarge { size, .. } = error {
                    assert!(*size > limit, "{name}: refused within the limit");
                }
            }
        }
    }
    if text.len() <= MAX_PRE_AUTH_BYTES {
        assert_eq!(results[0], results[1], "{name}: the limit alone changed the verdict");
    }
    results
}

#[test]
fn every_corpus_input_parses_or_fails_cleanly() {
    let directory = fuzz_directory("corpus");
    let corpus = inputs(&directory);
    assert!(!corpus.is_empty(), "the corpus in {} is empty", directory.display());
    assert!(corpus.len() < MAX_CORPUS_FILES, "the corpus has {} files; run `cargo fuzz cmin`", corpus.len());
    let bytes: u64 = corpus.iter().map(|(_, text)| text.len() as u64).sum();
    assert!(bytes < MAX_CORPUS_BYTES, "the corpus holds {bytes} bytes; run `cargo fuzz cmin`");
    let accepted = corpus.iter().filter(|(name, text)| check(name, text)[1].is_ok()).count();
    assert!(accepted > 0, "no corpus input is a valid frame: the corpus lost the protocol's shape");
    assert!(accepted < corpus.len(), "no corpus input is refused: the corpus lost the bad frames");
}

#[test]
fn the_captured_client_frames_parse_as_their_requests() {
    let seeds = inputs(&fuzz_directory("seeds"));
    let fixtures: Vec<_> = seeds.iter().filter(|(name, _)| name.starts_with("fixture-")).collect();
    assert!(fixtures.len() >= 6, "expected the six captured client frames, found {}", fixtures.len());
    for (name, text) in fixtures {
        // `fixture-<capture>-<n>-<method>.json`
        let expected = name.trim_end_matches(".json").rsplit('-').next().unwrap();
        match &check(name, text)[0] {
            Ok(ClientFrame::Request { method, .. }) => assert_eq!(method, expected, "{name}"),
            other => panic!("{name}: {other:?}"),
        }
    }
}

#[test]
fn good_seeds_parse_and_bad_seeds_are_refused_by_content() {
    let seeds = inputs(&fuzz_directory("seeds"));
    let mut counts = (0, 0);
    for (name, text) in &seeds {
        let [before_connect, after_connect] = check(name, text);
        if name.starts_with("good-") {
            assert!(before_connect.is_ok(), "{name}: {before_connect:?}");
            counts.0 += 1;
        } else if name.starts_with("bad-") {
            assert!(
                matches!(after_connect, Err(FrameError::NotJson(_) | FrameError::Invalid { .. })),
                "{name}: {after_connect:?}"
            );
            counts.1 += 1;
        } else if name.starts_with("large-") {
            assert!(matches!(before_connect, Err(FrameError::TooLarge { .. })), "{name}: {before_connect:?}");
            assert!(after_connect.is_ok(), "{name} fits the limit after connect: {after_connect:?}");
        }
    }
    assert!(counts.0 >= 5 && counts.1 >= 10, "too few named seeds: {counts:?}");
}

#[test]
fn a_request_error_keeps_the_readable_id() {
    let seeds = inputs(&fuzz_directory("seeds"));
    let text = &seeds.iter().find(|(name, _)| name == "bad-method-with-space.json").unwrap().1;
    assert_eq!(parse(text, MAX_FRAME_BYTES).unwrap_err().request_id(), Some("1"));
}
