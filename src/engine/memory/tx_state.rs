//! What TX adds (PROTOCOLS.md section 16), in memory: ask records written by
//! compare-and-set, the answers under way, prompts and retirement.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{MemoryEngine, Shared, lock};
use crate::engine::Held;
use crate::error::{Error, Result};
use crate::names::{AgentName, MsgId};
use crate::tx::AskRecord;

/// How long `hold_ask` and `hold_msg_id` wait for another holder.
const ANSWER_WAIT: Duration = Duration::from_secs(10);

/// An answer (or a send) under way: released when dropped.
struct Answering {
    shared: Arc<Shared>,
    key: String,
}

impl Drop for Answering {
    fn drop(&mut self) {
        lock(&self.shared).answering.remove(&self.key);
        self.shared.freed.notify_all();
    }
}

impl MemoryEngine {
    pub(super) fn store_ask(&self, rec: &AskRecord, seen: Option<u64>) -> Result<AskRecord> {
        let mut g = self.lock();
        let now = g.asks.get(&rec.msg_id).map(|r| r.rev);
        if now != seen {
            return Err(Error::conflict(format!("ask {} changed meanwhile", rec.msg_id))
                .hint("look again: `circe asks --all`"));
        }
        let stored = AskRecord { rev: seen.map_or(1, |r| r + 1), ..rec.clone() };
        g.asks.insert(rec.msg_id.clone(), stored.clone());
        Ok(stored)
    }

    /// `Engine::hold_ask`: waits at most `ANSWER_WAIT` for another answer, then a conflict.
    pub(super) fn hold_answer(&self, id: &MsgId, wait: bool) -> Result<Option<Held<'_>>> {
        self.hold_key(format!("ask/{id}"), wait, || {
            Error::conflict(format!("an answer to ask {id} has been under way for over 10s"))
                .hint("retry once the other answer is done")
        })
    }

    /// `Engine::hold_msg_id`: one send of message id `id` at a time.
    pub(super) fn hold_sending(&self, id: &str) -> Result<Held<'_>> {
        let held = self.hold_key(format!("send/{id}"), true, || {
            Error::conflict(format!("a send of message id {id} has been under way for over 10s"))
                .hint("retry once the other send is done")
        })?;
        held.ok_or_else(|| Error::internal("a held send came back empty"))
    }

    /// Hold `key` until the guard drops; `wait`: for at most 10 s, then `late`'s error.
    fn hold_key(
        &self,
        key: String,
        wait: bool,
        late: impl Fn() -> Error,
    ) -> Result<Option<Held<'_>>> {
        let until = Instant::now() + ANSWER_WAIT;
        let mut g = self.lock();
        while wait && g.answering.contains(&key) {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(late());
            }
            g = self
                .shared
                .freed
                .wait_timeout(g, left)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
        if !g.answering.insert(key.clone()) {
            return Ok(None);
        }
        Ok(Some(Box::new(Answering { shared: Arc::clone(&self.shared), key })))
    }

    pub(super) fn store_prompt(&self, agent: &AgentName, message: &[u8]) -> Result<()> {
        let mut g = self.lock();
        if !g.agents.contains_key(agent) {
            return Err(Error::not_found(format!("no agent `{agent}`")));
        }
        g.prompts.insert(agent.clone(), message.to_vec());
        Ok(())
    }

    pub(super) fn mark_retired(&self, agent: &AgentName, at: &str) -> Result<bool> {
        let mut g = self.lock();
        if !g.agents.contains_key(agent) {
            return Err(Error::not_found(format!("no agent `{agent}`")));
        }
        if g.retired.contains_key(agent) {
            return Ok(false);
        }
        g.retired.insert(agent.clone(), at.to_string());
        Ok(true)
    }
}
