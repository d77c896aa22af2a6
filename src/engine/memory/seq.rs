//! Sequence numbers in memory: each sender's counter, each receiver's lastSeen, and the
//! numbered send held on each thread. A hold marks its sender busy (others wait on the
//! condition variable); the delivery that uses the number sets the counter under the same
//! mutex guard that stores the message, so the two commit together.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::thread::ThreadId;

use super::{Inner, MemoryEngine, Shared, lock};
use crate::engine::SeqHold;
use crate::error::{Error, Result};
use crate::names::AgentName;
use crate::seq::{Counter, Receiver};

#[derive(Default)]
pub(super) struct SeqState {
    pub counters: BTreeMap<AgentName, Counter>,
    pub busy: HashSet<AgentName>,
    /// Thread -> (sender, its next number, used).
    pub active: Vec<(ThreadId, AgentName, Counter, bool)>,
    pub seen: BTreeMap<AgentName, Receiver>,
}

impl Inner {
    /// Called with every delivery (each message's `content`): when this thread holds an
    /// unused numbered send and this is its message, the counter moves now, in the same step.
    pub(super) fn use_number(&mut self, content: &[u8]) {
        let me = std::thread::current().id();
        let s = &mut self.seq;
        if let Some(a) = s
            .active
            .iter_mut()
            .find(|a| a.0 == me && !a.3 && crate::engine::carries_number(content, &a.1, a.2))
        {
            a.3 = true;
            s.counters.insert(a.1.clone(), a.2);
        }
    }
}

struct MemHold {
    shared: Arc<Shared>,
    agent: AgentName,
    next: Counter,
}

impl SeqHold for MemHold {
    fn sender(&self) -> &AgentName {
        &self.agent
    }

    fn next(&self) -> Counter {
        self.next
    }

    fn used(&self) -> bool {
        let me = std::thread::current().id();
        lock(&self.shared).seq.active.iter().any(|a| a.0 == me && a.3)
    }
}

impl Drop for MemHold {
    fn drop(&mut self) {
        let me = std::thread::current().id();
        let mut g = lock(&self.shared);
        g.seq.busy.remove(&self.agent);
        g.seq.active.retain(|a| a.0 != me);
        drop(g);
        self.shared.freed.notify_all();
    }
}

impl MemoryEngine {
    /// Wait until no hold has `agent`, then mark it busy.
    fn seq_take(&self, agent: &AgentName) -> std::sync::MutexGuard<'_, Inner> {
        let mut g = self.lock();
        while g.seq.busy.contains(agent) {
            g = self.shared.freed.wait(g).unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        g.seq.busy.insert(agent.clone());
        g
    }

    pub(super) fn hold(&self, agent: &AgentName) -> Result<Box<dyn SeqHold + '_>> {
        let mut g = self.seq_take(agent);
        let c = g.seq.counters.get(agent).copied().unwrap_or_default();
        let Some(last) = c.last.checked_add(1) else {
            g.seq.busy.remove(agent);
            return Err(Error::refused(format!("{agent}'s sequence counter is at its end")));
        };
        let next = Counter { epoch: c.epoch, last };
        let me = std::thread::current().id();
        g.seq.active.retain(|a| a.0 != me);
        g.seq.active.push((me, agent.clone(), next, false));
        Ok(Box::new(MemHold { shared: Arc::clone(&self.shared), agent: agent.clone(), next }))
    }

    pub(super) fn update(
        &self,
        agent: &AgentName,
        change: &mut dyn FnMut(&mut Counter) -> Result<()>,
    ) -> Result<Counter> {
        let mut g = self.seq_take(agent);
        let before = g.seq.counters.get(agent).copied().unwrap_or_default();
        let mut after = before;
        let r = change(&mut after);
        if r.is_ok() {
            g.seq.counters.insert(agent.clone(), after);
        }
        g.seq.busy.remove(agent);
        drop(g);
        self.shared.freed.notify_all();
        r.map(|()| after)
    }

    pub(super) fn see(
        &self,
        agent: &AgentName,
        change: &mut dyn FnMut(&mut Receiver) -> Result<()>,
    ) -> Result<(Receiver, Receiver)> {
        let mut g = self.lock();
        let before = g.seq.seen.get(agent).cloned().unwrap_or_default();
        let mut after = before.clone();
        change(&mut after)?;
        g.seq.seen.insert(agent.clone(), after.clone());
        Ok((before, after))
    }
}

impl MemoryEngine {
    pub(super) fn counters(&self) -> Vec<(AgentName, Counter)> {
        let g = self.lock();
        let all = g.seq.counters.iter();
        all.filter(|(_, c)| **c != Counter::default()).map(|(a, c)| (a.clone(), *c)).collect()
    }

    pub(super) fn receivers(&self) -> Vec<(AgentName, Receiver)> {
        let g = self.lock();
        let all = g.seq.seen.iter();
        all.filter(|(_, r)| !r.senders.is_empty()).map(|(a, r)| (a.clone(), r.clone())).collect()
    }
}
