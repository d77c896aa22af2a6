//! A whole root as data: what `circe mirror` writes as files and `circe migrate` moves from
//! one engine to another. Read through the seam, so it works for every engine.

use crate::boxes::Mailbox;
use crate::error::Result;
use crate::event::{Cursor, Event};
use crate::names::AgentName;
use crate::seq::{Counter, Receiver};
use crate::task::TaskState;
use crate::tx::AskRecord;

use super::Engine;

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
    /// Every sender's sequence counter, and every receiver's lastSeen (section 14).
    pub counters: Vec<(AgentName, Counter)>,
    pub receivers: Vec<(AgentName, Receiver)>,
    /// What TX adds (section 16): every ask record, each agent's current prompt message,
    /// and when each retired agent was retired.
    pub asks: Vec<AskRecord>,
    pub prompts: Vec<(AgentName, Vec<u8>)>,
    pub retired: Vec<(AgentName, String)>,
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
        Ok(Snapshot {
            config,
            agents,
            boxes,
            tasks,
            events,
            counters,
            receivers,
            asks,
            prompts,
            retired,
        })
    }

    /// How many messages it holds.
    pub fn message_count(&self) -> usize {
        self.boxes.iter().map(|(_, f)| f.len()).sum()
    }
}
