//! A whole root as data: what `circe mirror` writes as files and `circe migrate` moves from
//! one engine to another. Read through the seam, so it works for every engine.

use crate::boxes::Mailbox;
use crate::error::Result;
use crate::event::{Cursor, Event};
use crate::names::{AgentName, CursorName};
use crate::seq::{Counter, Receiver};
use crate::task::TaskState;
use crate::tx::AskRecord;

use super::{ChatLog, Engine};

/// A box and its messages (file name, bytes), in name order.
pub type BoxContent = (Mailbox, Vec<(String, Vec<u8>)>);

/// Everything a root holds.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// circe.yaml as the root keeps it.
    pub config: String,
    pub agents: Vec<(AgentName, String)>,
    /// Every box with its messages (file name, bytes), boxes and names in order.
    pub boxes: Vec<BoxContent>,
    /// Every task, in task id order.
    pub tasks: Vec<TaskState>,
    /// The event log, oldest first.
    pub events: Vec<Event>,
    /// The newest event id ever given (above the log's last when the archive took the
    /// newest events): the next root goes on after it.
    pub last_event_id: u64,
    /// Every sender's sequence counter, and every receiver's lastSeen (section 14).
    pub counters: Vec<(AgentName, Counter)>,
    pub receivers: Vec<(AgentName, Receiver)>,
    /// What TX adds (section 16): every ask record, each agent's current prompt message,
    /// and when each retired agent was retired.
    pub asks: Vec<AskRecord>,
    pub prompts: Vec<(AgentName, Vec<u8>)>,
    pub retired: Vec<(AgentName, String)>,
    /// The chat channel, when the engine keeps it and something was said in it.
    pub chat: Option<ChatCopy>,
    /// Every event consumer's saved place (`events` cursors: event ids go along unchanged,
    /// so a consumer goes on where it was), and the events each one's hook set aside.
    pub cursors: Vec<(CursorName, Vec<u8>)>,
    pub dead_letters: Vec<(CursorName, Vec<Event>)>,
    /// The tombstone of every task the root archived (its archive stays where it is; the
    /// ids go along, so none is opened again).
    pub tombstones: Vec<crate::archive::Tombstone>,
}

/// The chat channel as the local layout holds it: `chat.md`, and each archive in
/// `LOGS/chat/` (name, text), in the order they were made.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChatCopy {
    pub channel: Vec<u8>,
    pub archives: Vec<(String, Vec<u8>)>,
}

impl ChatCopy {
    /// Read the channel an engine keeps; `None` when nothing was ever said in it.
    fn read(log: &dyn ChatLog) -> Result<Option<ChatCopy>> {
        if log.chat_last()? == 0 {
            return Ok(None);
        }
        let mut copy = ChatCopy::default();
        let mut after = 0;
        loop {
            let more = log.chat_read(after, 10_000)?;
            let Some(last) = more.last() else { break };
            after = last.id;
            for e in more {
                match e.archive {
                    None => copy.channel.extend_from_slice(e.text.as_bytes()),
                    Some(name) => match copy.archives.iter_mut().find(|(n, _)| *n == name) {
                        Some((_, text)) => text.extend_from_slice(e.text.as_bytes()),
                        None => copy.archives.push((name, e.text.into_bytes())),
                    },
                }
            }
        }
        Ok(Some(copy))
    }
}

impl Snapshot {
    /// Read `engine` whole. While other commands run the parts may be of different moments;
    /// after quiescence it is exact.
    pub fn read(engine: &dyn Engine) -> Result<Snapshot> {
        let config = engine.config_text()?;
        let agents = engine.agents()?;
        let mut boxes = Vec::new();
        for b in engine.boxes()? {
            let mut files = Vec::new();
            for name in engine.list_box(&b)? {
                // A message moved away between the listing and the read is in its new box.
                if let Ok(bytes) = engine.read_message(&b, &name) {
                    files.push((name, bytes));
                }
            }
            boxes.push((b, files));
        }
        let mut tasks = Vec::new();
        for id in engine.task_ids()? {
            if let Some(st) = engine.peek(&id)? {
                tasks.push(st);
            }
        }
        let mut events = Vec::new();
        loop {
            let after = events.last().map_or(Cursor::START, |e: &Event| Cursor::after(e.id));
            let more = engine.read_events(after, 10_000)?;
            if more.is_empty() {
                break;
            }
            events.extend(more);
        }
        let last_event_id = engine.last_event_id()?.max(events.last().map_or(0, |e| e.id));
        let counters = engine.seq_counters()?;
        let receivers = engine.seq_receivers()?;
        let asks = engine.asks()?;
        let mut prompts = Vec::new();
        for (a, _) in &agents {
            if let Some(p) = engine.prompt(a)? {
                prompts.push((a.clone(), p));
            }
        }
        let retired = engine.retirements()?;
        let chat = match engine.chat_log() {
            Some(log) => ChatCopy::read(log)?,
            None => None,
        };
        let kind = crate::engine::EVENTS_CURSORS;
        let mut cursors = Vec::new();
        for (k, name) in engine.cursors()? {
            if k == kind
                && let Some(value) = engine.read_cursor(kind, &name)?
            {
                cursors.push((name, value));
            }
        }
        let mut dead_letters = Vec::new();
        for name in engine.dead_letter_consumers()? {
            let events = engine.dead_letters(&name)?;
            if !events.is_empty() {
                dead_letters.push((name, events));
            }
        }
        let tombstones = engine.archived_tasks()?;
        Ok(Snapshot {
            config,
            agents,
            boxes,
            tasks,
            events,
            last_event_id,
            counters,
            receivers,
            asks,
            prompts,
            retired,
            chat,
            cursors,
            dead_letters,
            tombstones,
        })
    }

    /// How many messages it holds.
    pub fn message_count(&self) -> usize {
        self.boxes.iter().map(|(_, f)| f.len()).sum()
    }
}
