//! One line of `LOGS/events.jsonl`: the audit trail every state change appends to.

use serde::Serialize;
use serde_json::{Map, Value};

use crate::clock;
use crate::error::Result;
use crate::store::Store;

#[derive(Debug, Clone, Serialize)]
pub struct Event {
    pub ts: String,
    pub event: String,
    pub agent: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub epoch: Option<u64>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Event {
    pub fn new(event: &str, agent: &str) -> Event {
        Event {
            ts: clock::stamp_ms(clock::now()),
            event: event.into(),
            agent: agent.into(),
            task: None,
            from: None,
            to: None,
            epoch: None,
            extra: Map::new(),
        }
    }

    #[must_use]
    pub fn task(mut self, task: &str) -> Event {
        self.task = Some(task.into());
        self
    }

    #[must_use]
    pub fn moved(mut self, from: &str, to: &str, epoch: u64) -> Event {
        self.from = Some(from.into());
        self.to = Some(to.into());
        self.epoch = Some(epoch);
        self
    }

    #[must_use]
    pub fn with(mut self, key: &str, value: impl Into<Value>) -> Event {
        self.extra.insert(key.into(), value.into());
        self
    }

    pub fn append(&self, store: &Store) -> Result<()> {
        let line = serde_json::to_string(self).unwrap_or_default();
        store.append_event(&line)
    }
}
