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

    fn chat_start(&self) -> Result<u64> {
        let g = self.lock();
        Ok(g.chat.entries.iter().rev().find(|e| e.archive.is_some()).map_or(0, |e| e.id))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Engine;
    use crate::names::AgentName;

    #[test]
    fn entries_know_their_place_and_archives_move_the_rest_up() {
        let eng = MemoryEngine::new();
        let log = eng.chat_log().expect("memory keeps the channel");
        assert_eq!(log.chat_last().unwrap(), 0);
        let a = log.chat_append("[a-to-b]: one\n", None).unwrap();
        let b = log.chat_append("[a-to-b]: two\n  more\n", None).unwrap();
        let c = log.chat_append("[a-to-b]: three\n", None).unwrap();
        assert_eq!((a.id, a.offset, a.line), (1, 0, 1));
        assert_eq!((b.id, b.offset, b.line), (2, 14, 2));
        assert_eq!((c.id, c.offset, c.line), (3, 35, 4));
        assert_eq!(log.chat_read(1, 10).unwrap().len(), 2);
        assert_eq!(log.chat_start().unwrap(), 0);
        // A cut inside a message is refused and changes nothing.
        assert!(log.chat_archive("chat-x", &|_| Ok(20)).is_err());
        let done = log.chat_archive("chat-x", &|_| Ok(35)).unwrap().unwrap();
        assert_eq!((done.name.as_str(), done.bytes, done.lines), ("chat-x.md", 35, 3));
        assert_eq!(log.chat_start().unwrap(), 2);
        let all = log.chat_read(0, 10).unwrap();
        assert_eq!(all[0].archive.as_deref(), Some("chat-x.md"));
        assert_eq!((all[2].offset, all[2].line, all[2].archive.as_deref()), (0, 1, None));
        let d = log.chat_append("[a-to-b]: four\n", None).unwrap();
        assert_eq!((d.offset, d.line), (16, 2));
        // The same stem again takes the next free name; nothing left: nothing moves.
        assert_eq!(
            log.chat_archive("chat-x", &|d: &[u8]| Ok(d.len())).unwrap().unwrap().name,
            "chat-x-2.md"
        );
        assert!(log.chat_archive("chat-x", &|d: &[u8]| Ok(d.len())).unwrap().is_none());
        assert_eq!(log.chat_wait(4, std::time::Duration::from_millis(1)).unwrap(), 4);
    }

    #[test]
    fn a_numbered_line_moves_its_senders_counter_with_it() {
        let eng = MemoryEngine::new();
        let lead = AgentName::new("lead").unwrap();
        let hold = eng.seq_hold(&lead).unwrap();
        let next = hold.next();
        eng.chat_append("[lead-to-b]: (LEAD #1): hi\n", Some(hold.as_ref())).unwrap();
        assert!(hold.used());
        drop(hold);
        assert_eq!(eng.seq_counters().unwrap(), [(lead, next)]);
    }
}
