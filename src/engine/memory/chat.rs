//! The chat channel in memory: its entries in a list, appended under the mutex (with the
//! sender's counter when the message is numbered, in the same step).

use std::time::{Duration, Instant};

use super::MemoryEngine;
use crate::engine::{ChatArchived, ChatEntry, ChatLog, SeqHold, chat_cut, chat_free_name};
use crate::error::Result;

#[derive(Default)]
pub(super) struct ChatState {
    entries: Vec<ChatEntry>,
    /// The channel's size as a file: bytes and lines.
    bytes: u64,
    lines: u64,
}

fn newlines(text: &str) -> u64 {
    text.bytes().filter(|&b| b == b'\n').count() as u64
}

impl ChatLog for MemoryEngine {
    fn chat_append(&self, text: &str, number: Option<&dyn SeqHold>) -> Result<ChatEntry> {
        let mut g = self.lock();
        if let Some(h) = number {
            let me = std::thread::current().id();
            if let Some(a) =
                g.seq.active.iter_mut().find(|a| a.0 == me && !a.3 && a.1 == *h.sender())
            {
                a.3 = true;
            }
            g.seq.counters.insert(h.sender().clone(), h.next());
        }
        let c = &mut g.chat;
        let e = ChatEntry {
            id: c.entries.last().map_or(1, |e| e.id + 1),
            offset: c.bytes,
            line: c.lines + 1,
            text: text.to_string(),
            archive: None,
        };
        c.bytes += text.len() as u64;
        c.lines += newlines(text);
        c.entries.push(e.clone());
        drop(g);
        self.shared.freed.notify_all();
        Ok(e)
    }

    fn chat_read(&self, after: u64, max: usize) -> Result<Vec<ChatEntry>> {
        let g = self.lock();
        Ok(g.chat.entries.iter().filter(|e| e.id > after).take(max).cloned().collect())
    }

    fn chat_last(&self) -> Result<u64> {
        Ok(self.lock().chat.entries.last().map_or(0, |e| e.id))
    }

    fn chat_wait(&self, after: u64, timeout: Duration) -> Result<u64> {
        let until = Instant::now() + timeout;
        let mut g = self.lock();
        loop {
            let last = g.chat.entries.last().map_or(0, |e| e.id);
            let now = Instant::now();
            if last > after || now >= until {
                return Ok(last);
            }
            g = self
                .shared
                .freed
                .wait_timeout(g, until - now)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
    }

    fn chat_archive(
        &self,
        stem: &str,
        split: &dyn Fn(&[u8]) -> Result<usize>,
    ) -> Result<Option<ChatArchived>> {
        let mut g = self.lock();
        let c = &mut g.chat;
        let live: Vec<ChatEntry> =
            c.entries.iter().filter(|e| e.archive.is_none()).cloned().collect();
        let text: String = live.iter().map(|e| e.text.as_str()).collect();
        let at = split(text.as_bytes())?;
        if at == 0 {
            return Ok(None);
        }
        let (n, lines) = chat_cut(&live, at)?;
        let entries = &c.entries;
        let name =
            chat_free_name(stem, &|n| Ok(entries.iter().any(|e| e.archive.as_deref() == Some(n))))?;
        let moved: Vec<u64> = live[..n].iter().map(|e| e.id).collect();
        for e in &mut c.entries {
            if moved.contains(&e.id) {
                e.archive = Some(name.clone());
            } else if e.archive.is_none() {
                e.offset -= at as u64;
                e.line -= lines;
            }
        }
        c.bytes -= at as u64;
        c.lines -= lines;
        Ok(Some(ChatArchived { name, bytes: at as u64, lines }))
    }
}
