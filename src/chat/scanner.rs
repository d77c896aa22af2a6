//! The channel reader as a pure state machine: bytes in, whole messages out.
//!
//! It takes whole lines only (a last line without its `\n` is left for later, FS_RULES 16),
//! counts physical lines as `grep -n` does, drops a BOM on line 1 and a trailing `\r`, and
//! reads bytes that are not UTF-8 lossily (U+FFFD). A message's indented continuation lines
//! belong to it, so a message is complete only when the next line that is not indented has
//! begun (its first byte is enough), or when the caller knows no write is under way
//! (`finish`). With `first_line_only` every message is complete on its own line, as the
//! reference server reads it.

use super::line::{LineKind, classify};
use super::message::ChatMessage;

/// A place in the file: a byte offset at the start of a line, and that line's number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    pub offset: u64,
    pub line: u64,
}

impl Position {
    pub const START: Position = Position { offset: 0, line: 1 };
}

/// A complete message, and where a reader must start again so that nothing after it is
/// lost (the start of the line that follows it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub message: ChatMessage,
    pub resume: Position,
}

#[derive(Debug)]
struct Pending {
    message: ChatMessage,
    start: Position,
}

/// The reader's state between calls.
#[derive(Debug)]
pub struct Scanner {
    /// The first byte not yet taken as part of a whole line.
    next: Position,
    pending: Option<Pending>,
    first_line_only: bool,
}

const BOM: &[u8] = b"\xef\xbb\xbf";

impl Scanner {
    pub fn new(at: Position, first_line_only: bool) -> Scanner {
        Scanner { next: at, pending: None, first_line_only }
    }

    /// Where the next call's bytes must start.
    pub fn next(&self) -> Position {
        self.next
    }

    /// Where to resume after a restart: the pending message's first line, else `next`.
    pub fn resume(&self) -> Position {
        self.pending.as_ref().map_or(self.next, |p| p.start)
    }

    pub fn has_pending(&self) -> bool {
        self.pending.is_some()
    }

    /// Feed the bytes of the file from `self.next().offset` on. Returns how many bytes were
    /// taken (whole lines only) and the messages completed by them.
    pub fn feed(&mut self, data: &[u8], is_agent: &dyn Fn(&str) -> bool) -> (usize, Vec<Found>) {
        let mut found = Vec::new();
        let mut taken = 0;
        while let Some(nl) = data[taken..].iter().position(|&b| b == b'\n') {
            let mut raw = &data[taken..taken + nl];
            if self.next.offset == 0 && raw.starts_with(BOM) {
                raw = &raw[BOM.len()..];
            }
            let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
            let here = self.next;
            let line = String::from_utf8_lossy(raw);
            taken += nl + 1;
            self.next = Position { offset: here.offset + (nl as u64) + 1, line: here.line + 1 };
            self.take_line(&line, here, is_agent, &mut found);
        }
        // The first byte of a line still being written already says it is not indented.
        if let Some(&b) = data.get(taken)
            && b != b' '
            && b != b'\t'
        {
            self.close(&mut found);
        }
        (taken, found)
    }

    fn take_line(
        &mut self,
        line: &str,
        here: Position,
        is_agent: &dyn Fn(&str) -> bool,
        found: &mut Vec<Found>,
    ) {
        match classify(line, is_agent) {
            LineKind::Continuation(text) => {
                if let Some(p) = &mut self.pending {
                    p.message.message.push('\n');
                    p.message.message.push_str(&text);
                }
            }
            LineKind::Message(l) => {
                self.close_at(here, found);
                let message = ChatMessage::new(l, here.line);
                if self.first_line_only {
                    found.push(Found { message, resume: self.next });
                } else {
                    self.pending = Some(Pending { message, start: here });
                }
            }
            LineKind::Comment => self.close_at(here, found),
        }
    }

    /// The pending message is complete: the line at `next` has begun and is not indented.
    fn close(&mut self, found: &mut Vec<Found>) {
        self.close_at(self.next, found);
    }

    fn close_at(&mut self, resume: Position, found: &mut Vec<Found>) {
        if let Some(p) = self.pending.take() {
            found.push(Found { message: p.message, resume });
        }
    }

    /// No more bytes are coming for now and none is being written: the pending message
    /// (whose lines are all whole) is complete.
    pub fn finish(&mut self) -> Option<Found> {
        let mut found = Vec::new();
        self.close(&mut found);
        found.pop()
    }
}

/// The number of `\n` bytes in `b` (lines, as `wc -l` counts them).
#[expect(clippy::naive_bytecount, reason = "short slices; no crate for one loop")]
pub fn newlines(b: &[u8]) -> u64 {
    b.iter().filter(|&&c| c == b'\n').count() as u64
}
