//! Sequence numbers in the chat channel (PROTOCOLS.md section 14): a line from `lead`
//! whose text starts `(LEAD #N): ` (or `(LEAD #N eE): `) carries `lead`'s number N. A
//! watcher acting as an agent judges the numbered lines meant for that agent (to it, to
//! `all`, or copied to it) by the agent's `lastSeen`, the same one its messages move: a
//! stale line is not printed. With a cursor the watcher is a durable consumer: a printed line
//! moves `lastSeen` and a stale one is logged as skipped; without one it judges with what
//! it has printed itself and stores nothing.

use super::message::ChatMessage;
use crate::engine::Engine;
use crate::error::Result;
use crate::event::{Event, EventKind};
use crate::names::AgentName;
use crate::seq::{Receiver, Verdict, parse_line};

/// The receiver side of one watcher.
pub struct ChatSeq {
    me: AgentName,
    receiver: Receiver,
    durable: bool,
}

/// A numbered line: (sender, number, epoch, its identity for `lastSeen`).
struct Number {
    sender: String,
    seq: u64,
    epoch: u64,
    id: String,
}

impl ChatSeq {
    /// Judge for `me`, starting from its stored `lastSeen`; `durable` (a cursor) moves it.
    pub fn new(engine: &dyn Engine, me: AgentName, durable: bool) -> Result<ChatSeq> {
        let receiver = engine.seq_seen(&me)?;
        Ok(ChatSeq { me, receiver, durable })
    }

    /// The number `m` carries when it is meant for this watcher's agent.
    fn number(&self, m: &ChatMessage) -> Option<Number> {
        let me = self.me.as_str();
        let for_me = m.sender != me
            && (m.recipient == me || m.recipient == "all" || m.broadcast.iter().any(|b| b == me));
        let first = m.message.lines().next().unwrap_or_default();
        let l = parse_line(first)
            .filter(|l| for_me && l.role_key() == m.sender.to_ascii_uppercase())?;
        Some(Number {
            sender: m.sender.clone(),
            seq: l.seq?,
            epoch: l.epoch,
            id: format!("chat:{}", m.line_number),
        })
    }

    /// `Some(lastSeen)` when `m` is stale for this watcher's agent.
    pub fn stale(&mut self, engine: &dyn Engine, m: &ChatMessage) -> Result<Option<u64>> {
        let Some(n) = self.number(m) else { return Ok(None) };
        if self.durable {
            self.receiver = engine.seq_seen(&self.me)?;
        }
        Ok(match self.receiver.judge(&n.sender, Some(n.seq), n.epoch, Some(&n.id)) {
            Verdict::Stale { last_seen } => Some(last_seen),
            Verdict::Process => None,
        })
    }

    /// `m` was printed: it moves `lastSeen` (stored when durable).
    pub fn printed(&mut self, engine: &dyn Engine, m: &ChatMessage) -> Result<()> {
        let Some(n) = self.number(m) else { return Ok(()) };
        let mut see = |r: &mut Receiver| {
            r.receive_msg(&n.sender, Some(n.seq), n.epoch, Some(&n.id));
            Ok(())
        };
        if self.durable {
            self.receiver = engine.seq_see(&self.me, &mut see)?.1;
        } else {
            see(&mut self.receiver)?;
        }
        Ok(())
    }

    /// `m` was skipped as stale: logged when durable.
    pub fn skipped(&self, engine: &dyn Engine, m: &ChatMessage, last_seen: u64) -> Result<()> {
        let Some(n) = self.number(m).filter(|_| self.durable) else { return Ok(()) };
        let mut e = Event::now(EventKind::Skip, self.me.as_str());
        e.sender = Some(n.sender);
        e.seq = Some(n.seq);
        e.seq_epoch = (n.epoch > 0).then_some(n.epoch);
        e.last_seen = Some(last_seen);
        e.note = Some(format!("chat line {}", m.line_number));
        // A skip changes nothing but the log: "the change stands" would not be so.
        engine.append_events(vec![e]).map_err(|err| {
            err.not_committed(&format!(
                "chat line {} was passed over as stale: only its `skip` event is missing from the log",
                m.line_number
            ))
        })?;
        Ok(())
    }
}
