//! Answers read ahead, in a round trip a command makes anyway, for the question it asks
//! right after: the retired agents (read with the opening) and the message a claim moved
//! (returned by the claim's commit, for its summary). Each answers once, and only within a
//! second: a long-lived process asking later reads again. An answer read ahead is what a
//! read at that moment would have said (a message's bytes never change; its box may, as it
//! may between any read and the next command); the message is dropped unread by any task
//! transaction, delivery or move this process starts after it.

use std::time::{Duration, Instant};

use super::PgEngine;
use crate::boxes::Mailbox;

pub(super) struct Prefetched<T> {
    at: Instant,
    read: T,
}

impl<T> Prefetched<T> {
    /// How long after it was read an answer stands in for the database.
    const FRESH: Duration = Duration::from_secs(1);

    pub(super) fn new(read: T) -> Prefetched<T> {
        Prefetched { at: Instant::now(), read }
    }

    pub(super) fn fresh(self) -> Option<T> {
        (self.at.elapsed() < Self::FRESH).then_some(self.read)
    }
}

/// A message as the commit that moved it left it: its box, its name, its first bytes
/// (up to the read cap and one more, as a read brings them) and its whole size.
pub(super) struct MovedMessage {
    pub(super) mailbox: String,
    pub(super) file: String,
    pub(super) bytes: Vec<u8>,
    pub(super) size: u64,
}

impl MovedMessage {
    /// What a read of it would bring: the first `cap + 1` bytes (all of them when `cap` is
    /// `None`) and the size; `None` when fewer bytes were brought than that read needs.
    fn answer(self, cap: Option<usize>) -> Option<(Vec<u8>, u64)> {
        let whole = self.bytes.len() as u64 == self.size;
        let mut bytes = self.bytes;
        match cap.map(|c| c.saturating_add(1)) {
            None if whole => {}
            Some(take) if whole || take <= bytes.len() => bytes.truncate(take),
            _ => return None,
        }
        Some((bytes, self.size))
    }
}

impl PgEngine {
    /// The first `cap + 1` bytes of `file` in `mailbox` (all of them when `cap` is `None`)
    /// and its size, when the last commit read them ahead and brought enough (once).
    pub(super) fn read_ahead(
        &self,
        mailbox: &Mailbox,
        file: &str,
        cap: Option<usize>,
    ) -> Option<(Vec<u8>, u64)> {
        let t = self.ticket_read.take()?.fresh()?;
        if t.mailbox != mailbox.label() || t.file != file {
            return None;
        }
        t.answer(cap)
    }

    /// Forget what was read ahead: this process is about to change tasks or messages.
    pub(super) fn forget_read_ahead(&self) {
        self.ticket_read.take();
    }
}

#[cfg(test)]
mod tests {
    use super::MovedMessage;

    fn moved(bytes: &[u8], size: u64) -> MovedMessage {
        MovedMessage {
            mailbox: "inbox:e1".into(),
            file: "m.md".into(),
            bytes: bytes.to_vec(),
            size,
        }
    }

    #[test]
    fn a_message_read_ahead_answers_only_the_reads_it_has_the_bytes_for() {
        let all = b"0123456789abcdef";
        // Brought whole: any read.
        assert_eq!(moved(all, 16).answer(None), Some((all.to_vec(), 16)));
        assert_eq!(moved(all, 16).answer(Some(3)), Some((b"0123".to_vec(), 16)));
        assert_eq!(moved(all, 16).answer(Some(100)), Some((all.to_vec(), 16)));
        // Brought cut (a message larger than the read cap): only reads capped within it.
        let cut = &all[..9];
        assert_eq!(moved(cut, 16).answer(Some(8)), Some((cut.to_vec(), 16)));
        assert_eq!(moved(cut, 16).answer(Some(4)), Some((b"01234".to_vec(), 16)));
        assert_eq!(moved(cut, 16).answer(Some(9)), None);
        assert_eq!(moved(cut, 16).answer(None), None);
    }
}
