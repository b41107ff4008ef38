//! Server-sent-event framing and the HTTP bodies that carry streamed, garbage and cut answers.

use std::io;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::stream;

/// How a streamed answer ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ending {
    /// The HTTP body ends normally after the last frame.
    Complete,
    /// The connection drops after the last frame, as when a provider's stream is cut mid-answer.
    Cut,
    /// The connection stays open after the last frame and nothing more is sent.
    Stall,
}

/// How long a cut stream waits before failing, so the frames before the cut reach the client.
const CUT_GRACE: Duration = Duration::from_millis(20);

/// An OpenAI-style frame: `data: <json>`.
pub(crate) fn data_frame(value: &serde_json::Value) -> String {
    format!("data: {value}\n\n")
}

/// An Anthropic-style frame: `event: <name>` then `data: <json>`.
pub(crate) fn event_frame(event: &str, value: &serde_json::Value) -> String {
    format!("event: {event}\ndata: {value}\n\n")
}

/// A 200 `text/event-stream` response sending `frames` one body chunk each.
pub(crate) fn stream_response(frames: Vec<String>, ending: Ending) -> Response {
    let frames = stream::iter(frames.into_iter().map(|frame| Ok::<Bytes, io::Error>(Bytes::from(frame))));
    let body = match ending {
        Ending::Complete => Body::from_stream(frames),
        Ending::Cut => {
            let cut = stream::once(async {
                tokio::time::sleep(CUT_GRACE).await;
                Err(io::Error::new(io::ErrorKind::ConnectionAborted, "scripted stream cut"))
            });
            Body::from_stream(frames.chain(cut))
        }
        Ending::Stall => Body::from_stream(frames.chain(stream::pending())),
    };
    event_stream_response(body)
}

/// A 200 `text/event-stream` response with `body`.
pub(crate) fn event_stream_response(body: Body) -> Response {
    let mut response = Response::new(body);
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// A 200 response whose headers and first body bytes arrive, and then nothing more.
pub(crate) fn stalled_body_response(content_type: &'static str, start: String) -> Response {
    let start = stream::once(async move { Ok::<Bytes, io::Error>(Bytes::from(start)) });
    let mut response = Response::new(Body::from_stream(start.chain(stream::pending())));
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// A 200 stream of `data: <garbage>` lines that never forms a valid event.
pub(crate) fn garbage_stream_response(garbage: &str) -> Response {
    let frames = garbage.lines().map(|line| format!("data: {line}\n\n")).collect();
    stream_response(frames, Ending::Complete)
}

/// A response with the given status, content type and raw body.
pub(crate) fn raw_response(status: StatusCode, content_type: &'static str, body: String) -> Response {
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// Text split into word-sized deltas that keep their trailing whitespace, as models stream it.
pub(crate) fn split_words(text: &str) -> Vec<&str> {
    text.split_inclusive(char::is_whitespace).collect()
}

/// Argument text split into at least three fragments (fewer only when it has fewer characters).
pub(crate) fn split_fragments(text: &str) -> Vec<&str> {
    let starts: Vec<usize> = text.char_indices().map(|(start, _)| start).collect();
    let characters = starts.len();
    if characters == 0 {
        return Vec::new();
    }
    let pieces = characters.div_ceil(12).max(3).min(characters);
    (0..pieces)
        .map(|piece| {
            let start = starts[piece * characters / pieces];
            let end = starts.get((piece + 1) * characters / pieces).copied().unwrap_or(text.len());
            &text[start..end]
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fragments_cover_the_text_in_at_least_three_pieces() {
        for text in ["{\"path\":\"a.txt\"}", "abc", "{\"é\":\"ünïcödé ✓\"}", &"x".repeat(100)] {
            let fragments = split_fragments(text);
            assert!(fragments.len() >= 3, "{text}: {fragments:?}");
            assert!(fragments.iter().all(|fragment| !fragment.is_empty()));
            assert_eq!(fragments.concat(), text);
        }
        assert_eq!(split_fragments("{}"), vec!["{", "}"]);
        assert!(split_fragments("").is_empty());
    }

    #[test]
    fn words_keep_their_whitespace() {
        assert_eq!(split_words("Hello there,\nworld"), vec!["Hello ", "there,\n", "world"]);
        assert!(split_words("").is_empty());
    }
}
