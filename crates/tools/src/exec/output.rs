//! Bounded capture of a command's output: keeps the start and the end, counts what falls
//! out of the middle, so a command printing gigabytes can't exhaust memory.

use std::collections::VecDeque;

use squidbot_core::text::{truncate_middle, truncate_output};

/// Collects output, keeping at most `limit` bytes of head and `limit` bytes of tail.
#[derive(Debug)]
pub(crate) struct OutputCollector {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    dropped: usize,
    limit: usize,
}

impl OutputCollector {
    /// A collector able to render `limit` characters with the middle omitted.
    pub(crate) fn new(limit: usize) -> Self {
        Self { head: Vec::new(), tail: VecDeque::new(), dropped: 0, limit }
    }

    /// Appends a chunk of output.
    pub(crate) fn push(&mut self, mut bytes: &[u8]) {
        if self.head.len() < self.limit {
            let taken = bytes.len().min(self.limit - self.head.len());
            self.head.extend_from_slice(&bytes[..taken]);
            bytes = &bytes[taken..];
        }
        self.tail.extend(bytes);
        if self.tail.len() > self.limit {
            let excess = self.tail.len() - self.limit;
            self.tail.drain(..excess);
            self.dropped += excess;
        }
    }

    /// True when nothing was collected.
    pub(crate) fn is_empty(&self) -> bool {
        self.head.is_empty() && self.tail.is_empty()
    }

    /// The output as text of at most `limit` characters (plus the omission note).
    pub(crate) fn render(self) -> String {
        let mut bytes = self.head;
        if self.dropped == 0 {
            bytes.extend(self.tail);
            return truncate_output(&String::from_utf8_lossy(&bytes), self.limit);
        }
        let mut text = String::from_utf8_lossy(&bytes).into_owned();
        let tail: Vec<u8> = self.tail.into();
        text.push_str(&String::from_utf8_lossy(&tail));
        let dropped = self.dropped;
        truncate_middle(&text, self.limit, 0.5, 0.5, |omitted| {
            format!("\n\n[... {} characters omitted ...]\n\n", omitted + dropped)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_output_is_kept_whole() {
        let mut collector = OutputCollector::new(100);
        collector.push(b"hello ");
        collector.push(b"world");
        assert_eq!(collector.render(), "hello world");
    }

    #[test]
    fn huge_output_keeps_both_ends_and_counts_the_middle() {
        let mut collector = OutputCollector::new(100);
        collector.push(&[b'a'; 50]);
        for _ in 0..1000 {
            collector.push(&[b'b'; 100]);
        }
        collector.push(&[b'c'; 50]);
        let text = collector.render();
        assert!(text.starts_with(&"a".repeat(50)), "{text}");
        assert!(text.ends_with(&"c".repeat(50)), "{text}");
        assert!(text.contains("[... 100000 characters omitted ...]"), "{text}");
    }
}
