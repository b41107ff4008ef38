//! The writer task against a recording sink (how it batches, when it stops) and against a
//! real client over a real socket (every frame of a burst arrives intact and in order).

use std::io::{BufRead, BufReader, Read, Write as _};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocketUpgrade};
use futures_util::{Sink, StreamExt};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::{BATCH, OUT_QUEUE, Outbox, write};

/// What the writer did to the sink.
#[derive(Debug, Clone, PartialEq)]
enum Call {
    /// A text frame with this `seq`.
    Fed(u64),
    FedClose,
    Flushed,
}

/// A sink that records the calls, and fails every feed after `fail_after` of them.
#[derive(Clone, Default)]
struct Recording {
    calls: Arc<Mutex<Vec<Call>>>,
    fail_after: Option<usize>,
}

impl Recording {
    fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }

    fn fed(&self) -> usize {
        self.calls().iter().filter(|call| **call != Call::Flushed).count()
    }
}

impl Sink<Message> for Recording {
    type Error = &'static str;

    fn poll_ready(self: Pin<&mut Self>, _context: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        match self.fail_after {
            Some(limit) if self.fed() >= limit => Poll::Ready(Err("connection reset")),
            _ => Poll::Ready(Ok(())),
        }
    }

    fn start_send(self: Pin<&mut Self>, message: Message) -> Result<(), Self::Error> {
        let call = match message {
            Message::Text(text) => {
                let frame: Value = serde_json::from_str(text.as_str()).unwrap();
                Call::Fed(frame["seq"].as_u64().unwrap())
            }
            Message::Close(_) => Call::FedClose,
            other => panic!("unexpected {other:?}"),
        };
        self.calls.lock().unwrap().push(call);
        Ok(())
    }

    fn poll_flush(self: Pin<&mut Self>, _context: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.calls.lock().unwrap().push(Call::Flushed);
        Poll::Ready(Ok(()))
    }

    fn poll_close(self: Pin<&mut Self>, _context: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }
}

fn outbox() -> (Outbox, mpsc::Receiver<Message>) {
    let (sender, queue) = mpsc::channel(OUT_QUEUE);
    (Outbox::new(sender), queue)
}

fn tick(out: &mut Outbox, count: u64) {
    for ts in 0..count {
        out.send_event("tick", &json!({"ts": ts}));
    }
}

fn close() -> Message {
    Message::Close(Some(CloseFrame { code: 1000, reason: Utf8Bytes::from_static("done") }))
}

async fn finished(writer: impl Future<Output = ()>) {
    tokio::time::timeout(Duration::from_secs(5), writer).await.unwrap_or_else(|_| panic!("the writer did not stop"));
}

#[tokio::test]
async fn frames_queued_together_are_fed_in_order_and_flushed_once() {
    let (mut out, queue) = outbox();
    tick(&mut out, 8);
    drop(out);
    let sink = Recording::default();
    finished(write(sink.clone(), queue)).await;
    let mut expected: Vec<Call> = (1..=8).map(Call::Fed).collect();
    expected.push(Call::Flushed);
    assert_eq!(sink.calls(), expected);
}

#[tokio::test]
async fn a_long_queue_is_flushed_every_batch() {
    let (mut out, queue) = outbox();
    tick(&mut out, 100);
    drop(out);
    let sink = Recording::default();
    finished(write(sink.clone(), queue)).await;
    let mut expected: Vec<Call> = (1..=BATCH as u64).map(Call::Fed).collect();
    expected.push(Call::Flushed);
    expected.extend((BATCH as u64 + 1..=100).map(Call::Fed));
    expected.push(Call::Flushed);
    assert_eq!(sink.calls(), expected);
}

#[tokio::test]
async fn a_frame_alone_is_not_held_back_for_a_batch() {
    let (mut out, queue) = outbox();
    let sink = Recording::default();
    let writer = tokio::spawn(write(sink.clone(), queue));
    for seq in 1..=3 {
        tick(&mut out, 1);
        for _attempt in 0..100 {
            if sink.calls().ends_with(&[Call::Fed(seq), Call::Flushed]) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(sink.calls().ends_with(&[Call::Fed(seq), Call::Flushed]), "{:?}", sink.calls());
    }
    drop(out);
    finished(async { writer.await.unwrap() }).await;
}

#[tokio::test]
async fn close_ends_the_writer_once_flushed_and_nothing_after_it_is_written() {
    let (mut out, queue) = outbox();
    tick(&mut out, 2);
    out.push(close());
    tick(&mut out, 1);
    let sink = Recording::default();
    // The outbox stays open: the close alone stops the writer.
    finished(write(sink.clone(), queue)).await;
    assert_eq!(sink.calls(), [Call::Fed(1), Call::Fed(2), Call::FedClose, Call::Flushed]);
    drop(out);
}

#[tokio::test]
async fn a_failing_socket_ends_the_writer() {
    let (mut out, queue) = outbox();
    tick(&mut out, 5);
    let sink = Recording { fail_after: Some(2), ..Recording::default() };
    finished(write(sink.clone(), queue)).await;
    assert_eq!(sink.calls(), [Call::Fed(1), Call::Fed(2)]);
    drop(out);
}

#[test]
fn a_full_queue_marks_the_client_as_not_reading_and_drops_what_follows() {
    let (mut out, mut queue) = outbox();
    tick(&mut out, OUT_QUEUE as u64);
    assert!(!out.not_reading());
    tick(&mut out, 1);
    assert!(out.not_reading());
    // Once cut off, nothing more is queued, not even after the queue drained.
    while queue.try_recv().is_ok() {}
    tick(&mut out, 1);
    assert!(queue.try_recv().is_err());
}

/// The frames of the burst: tiny ones, one over the WebSocket layer's write buffer, and
/// text that needs escaping and is not ASCII.
fn burst_payload(index: u64) -> Value {
    let text = match index {
        10 => "x".repeat(3 * super::WRITE_BUFFER),
        index if index % 3 == 0 => format!("line \"{index}\"\n\u{1F991} ünïcödé"),
        index => format!("piece {index}"),
    };
    json!({"runId": "run-1", "text": text, "index": index})
}

const BURST: u64 = 100;

/// A WebSocket client of just what the test needs: the upgrade, then server frames
/// (unmasked, unfragmented) until a close.
fn read_text_frames(address: std::net::SocketAddr) -> Vec<String> {
    let mut socket = std::net::TcpStream::connect(address).unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    socket
        .write_all(
            b"GET / HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
              Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
        )
        .unwrap();
    let mut reader = BufReader::new(socket);
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    assert!(line.starts_with("HTTP/1.1 101"), "{line}");
    while line != "\r\n" {
        line.clear();
        reader.read_line(&mut line).unwrap();
    }
    let mut texts = Vec::new();
    loop {
        let mut head = [0; 2];
        reader.read_exact(&mut head).unwrap();
        assert_eq!((head[0] & 0x80, head[1] & 0x80), (0x80, 0), "unfragmented and unmasked");
        let length = match head[1] & 0x7f {
            126 => {
                let mut length = [0; 2];
                reader.read_exact(&mut length).unwrap();
                u64::from(u16::from_be_bytes(length))
            }
            127 => {
                let mut length = [0; 8];
                reader.read_exact(&mut length).unwrap();
                u64::from_be_bytes(length)
            }
            length => u64::from(length),
        };
        let mut payload = vec![0; usize::try_from(length).unwrap()];
        reader.read_exact(&mut payload).unwrap();
        match head[0] & 0x0f {
            0x1 => texts.push(String::from_utf8(payload).unwrap()),
            0x8 => return texts,
            opcode => panic!("unexpected opcode {opcode}"),
        }
    }
}

#[tokio::test]
async fn a_burst_of_frames_reaches_a_real_client_intact_and_in_order() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let app = axum::Router::new().route(
        "/",
        axum::routing::get(|upgrade: WebSocketUpgrade| async move {
            crate::ws::configured(upgrade).on_upgrade(|socket| async move {
                let (sink, _stream) = socket.split();
                let (mut out, queue) = outbox();
                // All of it is queued before the writer first runs: one burst.
                for index in 1..=BURST {
                    out.send_event("agent", &burst_payload(index));
                }
                out.push(close());
                write(sink, queue).await;
            })
        }),
    );
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    let texts = tokio::task::spawn_blocking(move || read_text_frames(address)).await.unwrap();
    server.abort();
    assert_eq!(texts.len(), BURST as usize);
    for (text, seq) in texts.iter().zip(1..) {
        let frame: Value = serde_json::from_str(text).unwrap();
        assert_eq!(frame, json!({"type": "event", "event": "agent", "payload": burst_payload(seq), "seq": seq}));
    }
}
