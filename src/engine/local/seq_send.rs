//! The numbered send of the local engine: a sender's hold (its flock, its next number) and
//! the delivery that commits the number with the message (PROTOCOLS.md section 14).
//!
//! `seq_hold` takes `locks/seq-<agent>.lock`, settles what a crash left, and registers the
//! next number for the calling thread in `Numbered`. The first delivery the thread makes
//! while the hold lives (`put_message` for a ticket, `put_each` for INBOX copies and the
//! messages a routing rule sends with them) asks `Numbered` and goes through `put_numbered`
//! instead of the plain staging: every copy is staged in the number's entry
//! (`seq_store.rs`), and the first copy renamed out of it is the commit point.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::ThreadId;

use super::lock::Lock;
use super::messages::Copy;
use super::root::Store;
use super::seq_store::{Entry, OUTBOX_MARKER, OutboxMarker};
use crate::engine::{SeqHold, carries_number};
use crate::error::{Error, Result};
use crate::fault::crash_point;
use crate::names::AgentName;
use crate::seq::Counter;

/// A numbered send waiting for its delivery on one thread.
#[derive(Debug, Clone)]
struct Active {
    thread: ThreadId,
    agent: AgentName,
    next: Counter,
    used: bool,
}

/// The numbered sends held, one per thread at most.
#[derive(Debug, Clone, Default)]
pub struct Numbered(Arc<Mutex<Vec<Active>>>);

impl Numbered {
    fn with<T>(&self, f: impl FnOnce(&mut Vec<Active>) -> T) -> T {
        f(&mut self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// The calling thread's numbered send, while it has not delivered yet.
    fn pending(&self) -> Option<Active> {
        let me = std::thread::current().id();
        self.with(|v| v.iter().find(|a| a.thread == me && !a.used).cloned())
    }

    fn mark_used(&self) {
        let me = std::thread::current().id();
        self.with(|v| v.iter_mut().filter(|a| a.thread == me).for_each(|a| a.used = true));
    }
}

/// A sender's hold in a local root: its lock, its next number.
pub(super) struct LocalHold<'a> {
    store: &'a Store,
    agent: AgentName,
    next: Counter,
    _lock: Lock,
}

impl SeqHold for LocalHold<'_> {
    fn sender(&self) -> &AgentName {
        &self.agent
    }

    fn next(&self) -> Counter {
        self.next
    }

    fn used(&self) -> bool {
        let me = std::thread::current().id();
        self.store.numbered.with(|v| v.iter().any(|a| a.thread == me && a.used))
    }
}

impl Drop for LocalHold<'_> {
    fn drop(&mut self) {
        let me = std::thread::current().id();
        self.store.numbered.with(|v| v.retain(|a| a.thread != me));
    }
}

impl Store {
    /// Hold `agent`'s counter: lock, settle, and register the next number for this thread.
    /// Returns the hold and the repairs settling made (to be logged).
    pub(super) fn seq_hold(&self, agent: &AgentName) -> Result<LocalHold<'_>> {
        let lock = self.lock_seq(agent)?;
        let c = self.seq_settle(agent, &lock).map_err(|e| {
            // What failed is logging an earlier send the hold settled, not this one.
            if e.is_committed() {
                return Self::settle_stopped(e).not_delivered();
            }
            e.map_message(|m| {
                format!("{agent}'s earlier numbered message is not finished, and nothing of this command was sent: {m}")
            })
            .not_delivered()
            .hint_more("once that is mended, the next command of a user who may write there (or `circe doctor --repair`) finishes the earlier message; then run this one again")
        })?;
        // The events of the sender's earlier commands cut off before they logged them are
        // logged now, before this one's: a sender's events follow its numbers. (TEST BUILDS
        // ONLY: `no-sender-settle` leaves them to followers and doctor.)
        if !crate::fault::test_break("no-sender-settle") {
            self.settle_journals(Some(agent)).map_err(|e| {
                e.map_message(|m| {
                    format!("{agent}'s earlier message is delivered but not logged, and nothing of this command was sent: {m}")
                })
                .not_delivered()
            })?;
        }
        let last = c.last.checked_add(1).ok_or_else(|| {
            Error::refused(format!("{agent}'s sequence counter is at its end ({})", c.last))
                .hint(format!("`circe seq reset --agent {agent}` starts a new epoch at #1"))
        })?;
        let next = Counter { epoch: c.epoch, last };
        let me = std::thread::current().id();
        self.numbered.with(|v| {
            v.retain(|a| a.thread != me);
            v.push(Active { thread: me, agent: agent.clone(), next, used: false });
        });
        Ok(LocalHold { store: self, agent: agent.clone(), next, _lock: lock })
    }

    /// When this thread holds a numbered send that has not delivered yet: deliver `content`
    /// to `targets` as that numbered message. `None` when there is none.
    pub(super) fn route_numbered(&self, targets: &[Copy<'_>]) -> Option<Result<Vec<String>>> {
        let a = self.numbered.pending()?;
        if !targets.iter().any(|(_, _, c)| carries_number(c, &a.agent, a.next)) {
            return None;
        }
        let r = self.put_numbered(&a.agent, a.next, targets);
        if r.is_ok() {
            self.numbered.mark_used();
        }
        Some(r)
    }

    /// A task change about to commit a record whose outbox carries the numbered message (a
    /// `task-complete`): the record write is its commit point, so the number's entry is
    /// staged first with a marker naming the task and the message (`seq_store.rs` settles it
    /// by looking for either), and the outbox's later delivery goes the plain way. Returns
    /// the entry, whose marker `seq_outbox_done` removes once the outbox is delivered.
    pub(super) fn seq_outbox_stage(
        &self,
        task: &crate::names::TaskId,
        outbox: &[crate::task::Outgoing],
    ) -> Result<Option<PathBuf>> {
        let Some(a) = self.numbered.pending() else { return Ok(None) };
        let Some(o) =
            outbox.iter().find(|o| carries_number(o.content.as_bytes(), &a.agent, a.next))
        else {
            return Ok(None);
        };
        let marker = OutboxMarker {
            task: task.to_string(),
            msg_id: o.msg_id.clone(),
            name: o.name.clone(),
            to: o.to.clone(),
        };
        let text = serde_json::to_vec(&marker).unwrap_or_default();
        let dir = self.seq_stage(&a.agent, Entry::of(a.next), &[(OUTBOX_MARKER.into(), &text)])?;
        self.numbered.mark_used();
        crash_point("seq.outbox.staged");
        Ok(Some(dir))
    }

    /// Stage every copy in the number's entry, then rename each into its box (the first
    /// rename is the commit point), sync the boxes, and drop the older entries.
    fn put_numbered(
        &self,
        agent: &AgentName,
        next: Counter,
        targets: &[Copy<'_>],
    ) -> Result<Vec<String>> {
        let k = targets.len();
        let files: Vec<(String, &[u8])> = targets
            .iter()
            .enumerate()
            .map(|(i, (m, name, content))| {
                (format!("{i:05}-{k:05}~{}~{}", m.rel_path().replace('/', "+"), name(1)), *content)
            })
            .collect();
        let entry = Entry::of(next);
        let dir = self.seq_stage(agent, entry, &files)?;
        crash_point("seq.staged");
        let mut names = Vec::with_capacity(k);
        // After the first copy (the commit point) a box that refuses its copy keeps no other
        // box from its own: the refused copy waits in the entry.
        let mut refused: Option<Error> = None;
        for (f, _) in &files {
            match self.deliver_staged(&dir, f) {
                Ok(name) => names.push(name),
                // The first copy did not land: nothing was delivered, and the number stays
                // free. The entry goes now (its settling would discard it too), so that the
                // send is said to have failed as a whole and may be sent again.
                Err(e) if names.is_empty() => {
                    return Err(match self.seq_discard(&dir) {
                        Ok(()) => e.not_delivered(),
                        Err(_) => e.not_delivered().hint_more(
                            "its staged copy is removed by the sender's next send or `circe doctor --repair`",
                        ),
                    });
                }
                Err(e) => {
                    refused.get_or_insert(e);
                    continue;
                }
            }
            if names.len() == 1 {
                crash_point("seq.committed");
            }
        }
        let mut dirs: Vec<PathBuf> = targets.iter().map(|(m, _, _)| self.box_dir(m)).collect();
        dirs.sort();
        dirs.dedup();
        for d in dirs {
            self.sync_dir(&d)?;
        }
        if let Some(e) = refused {
            let place =
                "the sender's counter entry (seq/; the sender's next numbered send waits for it)";
            return Err(e.hint_more(super::messages::copy_waits(place)));
        }
        crash_point("seq.delivered");
        self.seq_prune(agent, entry);
        Ok(names)
    }
}

/// The outbox carrying the numbered message was delivered: its entry is the counter.
pub(super) fn outbox_done(dir: Option<PathBuf>) -> Result<()> {
    let Some(dir) = dir else { return Ok(()) };
    super::atomic::remove(&dir.join(OUTBOX_MARKER))
        .map_err(super::root::io_err("cannot remove", &dir))
}
