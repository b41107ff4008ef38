//! What an open session costs in memory per turn: the heap a `Session` holds after
//! many short turns (as the soak benchmark sends them), counted by a counting
//! allocator, before and after the compacted part is released. Deterministic: no
//! timing, so the numbers do not move with the machine's load.
//!
//! `cargo bench -p squidbot-core --bench session_memory`

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

use squidbot_core::session::Session;
use squidbot_types::message::Usage;
use squidbot_types::session::{EntryBody, HeaderTag, MessageRole, SESSION_FORMAT_VERSION, SessionHeader};

/// Counts the bytes allocated and not yet freed.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// A global allocator can only be written with `unsafe`; this one is a benchmark's and
// only counts.
// SAFETY: every call is passed on to the system allocator unchanged; only a counter is kept.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract for `alloc` is the system allocator's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: `pointer` came from `alloc` above with this layout.
        unsafe { System.dealloc(pointer, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

fn message(role: MessageRole, content: String, model: Option<&str>) -> EntryBody {
    EntryBody::Message {
        role,
        content,
        images: Vec::new(),
        model: model.map(str::to_owned),
        usage: model.map(|_| Usage {
            input_tokens: 120_000,
            output_tokens: 3,
            cached_input_tokens: 0,
            cache_write_tokens: 0,
        }),
        interrupted: false,
    }
}

/// A session of `turns` turns like the soak's ("Note number N, please." / "Noted."),
/// with a compaction that keeps the last `kept` turns.
fn session(turns: usize, kept: usize) -> Session {
    let mut session = Session::new(SessionHeader {
        kind: HeaderTag::Header,
        version: SESSION_FORMAT_VERSION,
        id: "bench".into(),
        key: "openai:soak-long-talk".into(),
        context: "owner".into(),
        created: "2026-11-27T12:00:00.000Z".into(),
    });
    let timestamp = || "2026-11-27T12:00:00.000Z".to_owned();
    let mut first_kept = None;
    for turn in 0..turns {
        let user = session.push(message(MessageRole::User, format!("Note number {turn}, please."), None), timestamp());
        if turn == turns - kept {
            first_kept = Some(user.id);
        }
        session.push(message(MessageRole::Assistant, "Noted.".into(), Some("local/test-model")), timestamp());
    }
    if let Some(first_kept) = first_kept {
        let body = EntryBody::Compaction {
            summary: "The user numbered notes.".into(),
            first_kept,
            condensed: 2 * (turns - kept),
            method: "summary".into(),
        };
        session.push(body, timestamp());
    }
    session
}

fn main() {
    const TURNS: usize = 10_000;
    const KEPT: usize = 4_000;
    let before = live();
    let mut long = session(TURNS, KEPT);
    let whole = live() - before;
    let released = long.release_compacted();
    let after = live() - before;
    let per_turn = |bytes: isize, turns: usize| bytes as f64 / turns as f64;
    println!("session of {TURNS} one-line turns (\"Note number N, please.\" / \"Noted.\")");
    println!(
        "  whole tree in memory: {:.1} MiB, {:.0} bytes per turn",
        whole as f64 / 1_048_576.0,
        per_turn(whole, TURNS)
    );
    println!(
        "  after a compaction keeping {KEPT} turns and releasing {released} entries: {:.1} MiB, {:.0} bytes per kept turn",
        after as f64 / 1_048_576.0,
        per_turn(after, KEPT)
    );
    let text: usize = long.entries().iter().map(|entry| entry.id.len() + entry.timestamp.len()).sum();
    println!("  of which ids and timestamps as text: {:.0} bytes per kept turn", text as f64 / KEPT as f64);
    drop(long);
}
