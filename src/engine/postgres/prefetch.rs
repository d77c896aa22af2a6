//! Answers read ahead, in a round trip a command makes anyway, for the question it asks
//! right after: the retired agents (read with the opening) and the message a claim moved
//! (returned by the claim's commit, for its summary). Each answers once, and only within a
//! second: a long-lived process asking later reads again. An answer read ahead is what a
//! read at that moment would have said (a message's bytes never change; its box may, as it
//! may between any read and the next command).

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

/// A message as the commit that moved it left it: its box, its name, its bytes.
pub(super) struct MovedMessage {
    pub(super) mailbox: String,
    pub(super) file: String,
    pub(super) body: Vec<u8>,
}

impl PgEngine {
    /// The bytes of `file` in `mailbox`, when the last commit read them ahead (once).
    pub(super) fn read_ahead(&self, mailbox: &Mailbox, file: &str) -> Option<Vec<u8>> {
        let t = self.ticket_read.take()?.fresh()?;
        (t.mailbox == mailbox.label() && t.file == file).then_some(t.body)
    }
}
