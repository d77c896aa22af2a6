//! The events of a task's change, kept until they are logged (PROTOCOLS.md section 8).
//!
//! A task's change commits (its ticket's rename, or its record) before its events are
//! appended, so a command cut off in between would leave the change made and unlogged.
//! Before the commit point the change's events, and the `send` events of the messages its
//! outbox carries (under the names they are meant to get), are written to
//! `tmp/task-events-<task>.json` with the record the change writes and the log's last id;
//! once they are logged the file is removed. One file per task, written and removed under
//! the task's lock: whoever holds the lock next and finds it knows its command is gone, and
//! settles it before reconciling the task. When the task's record is the one the change
//! wrote (its outbox aside) and its message lies in a box, the events not in the log since
//! are logged; otherwise the change never committed, or reconciling finishes it and logs a
//! `repair` event for it, and the file is removed. Not fsynced, as the delivery journal (`journal.rs`).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::atomic;
use super::event_log;
use super::journal::Settled;
use super::root::{Store, io_err};
use crate::error::{Error, Result};
use crate::event::Event;
use crate::names::TaskId;
use crate::task::{StatusRecord, TaskState};

/// The prefix of a task journal's name in `tmp/`.
pub(super) const PREFIX: &str = "task-events-";

#[derive(Serialize, Deserialize)]
struct TaskJournal {
    /// The log's last id before the change: its events, if logged, come after it.
    after: u64,
    /// The task's record as the change leaves it, outbox cleared.
    record: String,
    events: Vec<Event>,
    /// The `send` events of the change's outbox, under the names its messages are meant
    /// to get (a copy may get a numbered name: found when settled).
    sends: Vec<Event>,
}

/// A record as it reads once its outbox is delivered.
fn settled_text(rec: &StatusRecord) -> String {
    if rec.outbox.is_empty() {
        return rec.render();
    }
    let mut r = rec.clone();
    r.outbox.clear();
    r.render()
}

/// The task a journal's name in `tmp/` is of.
pub(super) fn task_of(name: &str) -> Option<TaskId> {
    let id = name.strip_prefix(PREFIX)?.strip_suffix(".json")?;
    TaskId::new(id).ok()
}

impl Store {
    fn task_journal_path(&self, task: &TaskId) -> PathBuf {
        self.tmp_dir().join(format!("{PREFIX}{task}.json"))
    }

    /// Write the journal of a change about to commit `record` (call under the task's lock).
    /// Nothing to log, no journal: `false`.
    pub(super) fn journal_task(
        &self,
        task: &TaskId,
        record: &StatusRecord,
        events: &[Event],
        sends: Vec<Event>,
    ) -> Result<bool> {
        if events.is_empty() && sends.is_empty() {
            return Ok(false);
        }
        let j = TaskJournal {
            // A log whose end cannot be read now (its append will say so) is searched whole.
            after: event_log::last_id(self).unwrap_or(0),
            record: settled_text(record),
            events: events.to_vec(),
            sends,
        };
        let bytes = serde_json::to_vec(&j).map_err(|e| Error::internal(e.to_string()))?;
        let path = self.task_journal_path(task);
        let written = match atomic::write_new(&path, &bytes, false) {
            // One a failed settling left (the lock is ours: its command is gone).
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                atomic::remove(&path).and_then(|()| atomic::write_new(&path, &bytes, false))
            }
            r => r,
        };
        written.map_err(io_err("cannot write", &path))?;
        Ok(true)
    }

    /// Is there an entry `name` in `tmp/`?
    pub(super) fn has_tmp(&self, name: &str) -> bool {
        self.tmp_dir().join(name).symlink_metadata().is_ok()
    }

    /// The change's events are logged: remove its journal (one left is settled later).
    pub(super) fn drop_task_journal(&self, task: &TaskId) {
        let _ = atomic::remove(&self.task_journal_path(task));
    }

    /// Settle the journal a cut-off change of `task` left, if any, against the task as its
    /// command left it (`st`, before reconciling: `None`, no record). Call under its lock.
    /// The change stands when the record is the one it wrote and its message lies in a box.
    pub(super) fn settle_task_journal(
        &self,
        task: &TaskId,
        st: Option<&TaskState>,
    ) -> Result<Option<Settled>> {
        let path = self.task_journal_path(task);
        let bytes = match atomic::read_regular(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io("cannot read", &path, e)),
        };
        let journal = serde_json::from_slice::<TaskJournal>(&bytes).ok();
        // Cut off while it was written (its change had not begun), or a change that did not
        // commit, or one that reconciling finishes (its `repair` event says so).
        let stands = |j: &TaskJournal| {
            st.is_some_and(|s| {
                (s.location.is_some() || s.rec.status.is_terminal())
                    && settled_text(&s.rec) == j.record
            })
        };
        let Some(j) = journal.filter(stands) else {
            atomic::remove(&path).map_err(io_err("cannot remove", &path))?;
            return Ok(Some(Settled::NotDelivered));
        };
        let mut late = Vec::new();
        if let Some(first) = j.events.first()
            && !self.in_log_since(j.after, first, true)?
        {
            late.extend(j.events);
        }
        // Messages its outbox still holds are the reconciling's to send and log.
        let sends = if st.is_some_and(|s| s.rec.outbox.is_empty()) { j.sends } else { Vec::new() };
        for s in sends {
            let mut one = [s];
            let id = one[0].msg_id.clone().unwrap_or_default();
            // A message its outbox sent (its event names the copies as they lie), not logged.
            if self.lies_where_said(&id, &mut one) && !self.in_log_since(j.after, &one[0], false)? {
                late.extend(one);
            }
        }
        let n = late.len();
        for e in &mut late {
            e.what.get_or_insert_with(|| {
                "logged late: the command that made it stopped before logging it".into()
            });
        }
        event_log::append(self, &mut late)?;
        atomic::remove(&path).map_err(io_err("cannot remove", &path))?;
        Ok(Some(if n == 0 { Settled::AlreadyLogged } else { Settled::Logged(n) }))
    }
}
