//! The events of a task's change, kept until they are logged (PROTOCOLS.md section 8).
//!
//! A task's change commits (its ticket's rename, or its record) before its events are
//! appended, so a command cut off in between would leave the change made and unlogged.
//! Before the commit point the change's events, and the `send` events of the messages its
//! outbox carries (under the names they are meant to get), are written with the record the
//! change writes and the log's last id into the task's own lock file
//! (`locks/task-<id>.lock`, which its holder alone writes): the journal, then a mark `J`
//! before it. Once they are logged the file is emptied again. Whoever holds the lock next and
//! finds the mark knows its command is gone, and settles it before reconciling the task:
//! when the task's record is the one the change wrote (its outbox aside) and its message
//! lies in a box, the events not in the log since are logged; when the change's commit
//! point is its ticket's rename, the ticket lies where it moved it and the record is still
//! the one before, the change's records (kept in the journal, outbox and all) are written
//! and its events logged; otherwise the change never committed, or reconciling finishes it
//! and logs a `repair` event for it. The lock file is
//! open already, so the journal costs two writes and a read on it and no file made or
//! removed (a file made in `tmp/` cost a claim 0.2 to 0.35 ms: BENCHMARKS). Not fsynced, as
//! the delivery journal (`journal.rs`): a command killed, not a power cut.

use std::os::unix::fs::{FileExt, MetadataExt};

use serde::{Deserialize, Serialize};

use super::event_log;
use super::journal::Settled;
use super::lock::Lock;
use super::root::{Store, io_err};
use crate::error::{Error, Result};
use crate::event::Event;
use crate::names::TaskId;
use crate::task::{StatusRecord, TaskState};

/// The mark before a journal whose events are not logged yet.
const PENDING: u8 = b'J';

#[derive(Serialize, Deserialize)]
struct TaskJournal {
    /// The log's last id before the change: its events, if logged, come after it.
    after: u64,
    /// The task's record as the change leaves it (outbox cleared unless `exact`); empty: the
    /// change removes the task's records.
    record: String,
    /// Compare the record whole (a repair's, written once), not with its outbox aside.
    #[serde(default)]
    exact: bool,
    /// The `.checks` the change writes, when it writes them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    checks: Option<String>,
    /// Does the change rewrite `.status` (else only `.checks`, as `check --run` does)? Then
    /// `.status` alone says it was made, and `.checks` written after it are rolled forward.
    #[serde(default)]
    moves_status: bool,
    /// The box the change moves its ticket into, when it moves it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ticket_in: Option<String>,
    /// When the change's commit point is its ticket's rename: the record it writes after
    /// (outbox and all), and the status and epoch of the record before it. Cut off between
    /// the two, the ticket lies in `ticket_in` under the record before, and the change is
    /// rolled forward to this record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    rolls: Option<Rolls>,
    events: Vec<Event>,
    /// The `send` events of the change's outbox, under the names its messages are meant
    /// to get (a copy may get a numbered name: found when settled).
    sends: Vec<Event>,
}

/// What a change whose commit point is its ticket's rename rolls forward to.
#[derive(Serialize, Deserialize)]
struct Rolls {
    /// The record as the change writes it.
    record: String,
    /// The status and epoch of the record before the change.
    from: (String, u64),
}

/// A change's work left to the next holder of the task's lock, to be done before its events
/// are logged.
pub(super) enum Roll<'a> {
    /// The `.checks` a change wrote after its `.status` (lagging).
    Checks(&'a str),
    /// A change cut off between its ticket's rename (its commit point) and its records:
    /// its `.status` (outbox and all) and its `.checks`, when it writes them.
    Records { status: &'a str, checks: Option<&'a str> },
}

/// What a change leaves, by which its settling tells whether it stands.
pub(super) struct Leaves<'a> {
    /// Its record (`None`: it removes the task's records).
    pub record: Option<&'a StatusRecord>,
    /// A record written once (a repair's): compared whole, outbox and all.
    pub exact: bool,
    /// The checks it writes, when it writes them.
    pub checks: Option<&'a crate::task::record::Checks>,
    /// The box it moves the ticket into, when it moves it.
    pub ticket_in: Option<&'a crate::boxes::Mailbox>,
    /// The record before it (`None`: the task is new, or the change is a repair).
    pub before: Option<&'a StatusRecord>,
    /// The change's commit point is its ticket's rename (into `ticket_in`).
    pub renames: bool,
}

impl TaskJournal {
    /// Does the task as its command left it (`st`, `None`: no record) show this change
    /// made: its record, its checks, its ticket where it put it (and lying in a box)?
    fn stands(&self, st: Option<&TaskState>) -> bool {
        let Some(s) = st else { return self.record.is_empty() };
        let text = if self.exact { s.rec.render() } else { settled_text(&s.rec) };
        text == self.record
            && (s.location.is_some() || s.rec.status.is_terminal())
            && (self.moves_status || self.checks_lag(s).is_none())
            && self
                .ticket_in
                .as_ref()
                .is_none_or(|b| s.location.as_ref().is_some_and(|l| l.label() == *b))
    }

    /// Was the change cut off between its ticket's rename and its records: the record
    /// still the one before it, the ticket already where the change put it?
    fn cut_after_rename(&self, st: Option<&TaskState>) -> Option<&Rolls> {
        // TEST BUILDS ONLY: `no-roll` leaves such a change to reconciling, which infers it
        // from where the ticket lies (a release, whatever the change was).
        if crate::fault::test_break("no-roll") || crate::fault::test_break("no-reconcile") {
            return None;
        }
        let (r, s) = (self.rolls.as_ref()?, st?);
        let before = s.rec.status.as_str() == r.from.0 && s.rec.epoch == r.from.1;
        let at = s.location.as_ref().filter(|l| self.ticket_in.as_ref() == Some(&l.label()))?;
        // The kept record must be this task's, for this ticket, and say it lies where it was
        // moved: a lock file damaged or edited by hand is no journal to roll forward.
        let fits = StatusRecord::parse(&s.rec.task_id, &r.record).is_ok_and(|k| {
            k.task_id == s.rec.task_id
                && k.message == s.rec.message
                && k.epoch >= s.rec.epoch
                && super::tx::where_record_says(&k, at)
        });
        (before && fits).then_some(r)
    }

    /// The checks the change wrote, when `.checks` does not hold them (yet).
    fn checks_lag(&self, s: &TaskState) -> Option<&str> {
        let c = self.checks.as_deref()?;
        (c != crate::task::record::render_checks(&s.checks)).then_some(c)
    }
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

/// What a task's lock file holds.
enum Held {
    Empty,
    /// No mark: a journal cut off before its mark was written (its change had not begun).
    Unmarked,
    /// The line of a journal whose events are not logged.
    Pending(Vec<u8>),
}

/// Read a task's lock file: one byte when it is empty (a claim's usual case).
fn held(f: &std::fs::File) -> std::io::Result<Held> {
    let mut mark = [0u8; 1];
    if f.read_at(&mut mark, 0)? == 0 {
        return Ok(Held::Empty);
    }
    if mark[0] != PENDING {
        return Ok(Held::Unmarked);
    }
    let len = f.metadata()?.len();
    let mut bytes = vec![0u8; usize::try_from(len.saturating_sub(1)).unwrap_or(0)];
    f.read_exact_at(&mut bytes, 1)?;
    // The journal is one line (a mark before a whole line: it was written first).
    Ok(match bytes.iter().position(|&b| b == b'\n') {
        Some(end) => {
            bytes.truncate(end);
            Held::Pending(bytes)
        }
        None => Held::Unmarked,
    })
}

impl Store {
    /// Write the journal of a change about to commit `record` into the task's lock file
    /// (`lock`, held). Nothing to log, no journal: `false`.
    pub(super) fn journal_task(
        &self,
        lock: &Lock,
        leaves: &Leaves<'_>,
        events: &[Event],
        sends: Vec<Event>,
    ) -> Result<bool> {
        // TEST BUILDS ONLY: `no-task-journal` keeps none, so a cut-off change's events are lost.
        if (events.is_empty() && sends.is_empty()) || crate::fault::test_break("no-task-journal") {
            return Ok(false);
        }
        // Written into a lock file linked elsewhere too (a snapshot by hard links), it would
        // write there: no journal then.
        let links = lock
            .file()
            .metadata()
            .map_err(io_err("cannot read a lock file in", &self.root().join("locks")))?;
        if links.nlink() > 1 {
            return Ok(false);
        }
        let record = match leaves.record {
            Some(r) if leaves.exact => r.render(),
            Some(r) => settled_text(r),
            None => String::new(),
        };
        let moves_status = leaves.before.is_none_or(|b| settled_text(b) != record);
        let rolls = match (leaves.renames, leaves.record, leaves.before) {
            (true, Some(r), Some(b)) => {
                Some(Rolls { record: r.render(), from: (b.status.as_str().to_string(), b.epoch) })
            }
            _ => None,
        };
        let j = TaskJournal {
            // A log whose end cannot be read now (its append will say so) is searched whole.
            after: event_log::last_id(self).unwrap_or(0),
            record,
            exact: leaves.exact,
            checks: leaves.checks.map(crate::task::record::render_checks),
            moves_status,
            ticket_in: leaves.ticket_in.map(crate::boxes::Mailbox::label),
            rolls,
            events: events.to_vec(),
            sends,
        };
        let mut bytes = serde_json::to_vec(&j).map_err(|e| Error::internal(e.to_string()))?;
        bytes.push(b'\n');
        // The journal first, then its mark: a journal cut off half-way is never marked.
        let f = lock.file();
        let path = self.root().join("locks");
        f.write_all_at(&bytes, 1)
            .and_then(|()| f.write_all_at(&[PENDING], 0))
            // A lock file this user may not write was opened to read (`lock.rs`): said as
            // what it lacks, a writable mount or the permission.
            .map_err(|e| match e.raw_os_error() {
                Some(b) if b == rustix::io::Errno::BADF.raw_os_error() => {
                    let ro = rustix::fs::statvfs(&path)
                        .is_ok_and(|s| s.f_flag.contains(rustix::fs::StatVfsMountFlags::RDONLY));
                    if ro {
                        std::io::Error::from_raw_os_error(rustix::io::Errno::ROFS.raw_os_error())
                    } else {
                        std::io::Error::from(std::io::ErrorKind::PermissionDenied)
                    }
                }
                _ => e,
            })
            .map_err(io_err("cannot write the journal of a change into a lock file in", &path))?;
        Ok(true)
    }

    /// The change's events are logged: empty the lock file again. Emptied, not just
    /// unmarked: a lock file with data takes a block of the disk per task, and one emptied
    /// before it is written back never takes one. One that cannot be emptied stays marked,
    /// and the next holder settles it again, finding its events in the log.
    pub(super) fn drop_task_journal(lock: &Lock) {
        let _ = lock.file().set_len(0);
    }

    /// Settle the journal a cut-off change of `task` left in its lock file (`lock`, held),
    /// if any, against the task as its command left it (`st`, before reconciling: `None`,
    /// no record). The change stands when the record is the one it wrote and its message
    /// lies in a box.
    ///
    /// A change that rewrote `.status` stands by it; `.checks` it wrote after that and that
    /// lag are handed to `roll` (to be written) before its events are logged. So are the
    /// records of a change cut off right after its ticket's rename (its commit point).
    pub(super) fn settle_task_journal(
        &self,
        lock: &Lock,
        st: Option<&TaskState>,
        roll: &mut dyn FnMut(Roll<'_>) -> Result<()>,
    ) -> Result<Option<Settled>> {
        let path = self.root().join("locks");
        let bytes = match held(lock.file()).map_err(io_err("cannot read a lock file in", &path))? {
            Held::Empty => return Ok(None),
            Held::Unmarked => {
                // Nothing to settle; emptied, so an idle lock file stays empty.
                Self::drop_task_journal(lock);
                return Ok(None);
            }
            Held::Pending(bytes) => bytes,
        };
        let journal = serde_json::from_slice::<TaskJournal>(&bytes).ok();
        let stands = journal.as_ref().is_some_and(|j| j.stands(st));
        let cut = journal.as_ref().filter(|_| !stands);
        let cut = cut.and_then(|j| Some((j.cut_after_rename(st)?, j)));
        let rolled = cut.is_some();
        if let Some((r, j)) = cut {
            roll(Roll::Records { status: &r.record, checks: j.checks.as_deref() })?;
        }
        // A change that did not commit, or one that reconciling finishes (its `repair`
        // event says so, kept in a journal of its own).
        let Some(j) = journal.filter(|_| rolled || stands) else {
            Self::drop_task_journal(lock);
            return Ok(Some(Settled::NotDelivered));
        };
        if let Some(c) = st.and_then(|s| j.checks_lag(s)).filter(|_| !rolled) {
            roll(Roll::Checks(c))?;
        }
        let mut late = Vec::new();
        if let Some(first) = j.events.first()
            && !self.in_log_since(j.after, first, true)?
        {
            late.extend(j.events);
        }
        // Messages its outbox still holds are the reconciling's to send and log (a change
        // rolled forward holds all of its own).
        let kept = rolled || st.is_none_or(|s| !s.rec.outbox.is_empty());
        let sends = if kept { Vec::new() } else { j.sends };
        for s in sends {
            let mut one = [s];
            let id = one[0].msg_id.clone().unwrap_or_default();
            // A message its outbox sent (its event names the copies as they lie), not logged.
            if self.lies_where_said(&id, &mut one, true)
                && !self.in_log_since(j.after, &one[0], false)?
            {
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
        Self::drop_task_journal(lock);
        Ok(Some(if n == 0 { Settled::AlreadyLogged } else { Settled::Logged(n) }))
    }

    /// Task lock files with more than one link (a snapshot made with hard links): their
    /// tasks' changes keep no journal while the other link stands. Name and link count each.
    pub(super) fn linked_task_locks(&self) -> Result<Vec<(String, u64)>> {
        let dir = self.root().join("locks");
        let mut out = Vec::new();
        for name in super::root::list_all_names(&dir)? {
            if name.strip_prefix("task-").and_then(|n| n.strip_suffix(".lock")).is_none() {
                continue;
            }
            if let Ok(m) = std::fs::symlink_metadata(dir.join(&name))
                && m.is_file()
                && m.nlink() > 1
            {
                out.push((name, m.nlink()));
            }
        }
        Ok(out)
    }

    /// Does the task's lock file (`lock`, held) hold the journal of a change cut off?
    pub(super) fn journal_left(lock: &Lock) -> bool {
        matches!(held(lock.file()), Ok(Held::Pending(_)))
    }

    /// The tasks whose lock file holds the journal of a change cut off (no command holds
    /// the lock now), each with its lock, taken: for doctor and the archive. One look at
    /// every task lock file.
    pub(super) fn task_journals_left(&self) -> Result<Vec<(TaskId, Lock)>> {
        let dir = self.root().join("locks");
        let mut out = Vec::new();
        for name in super::root::list_all_names(&dir)? {
            let Some(task) = name
                .strip_prefix("task-")
                .and_then(|n| n.strip_suffix(".lock"))
                .and_then(|t| TaskId::new(t).ok())
            else {
                continue;
            };
            // Empty (nothing pending: one `stat`, no lock taken), or no regular file (doctor's
            // invariant 2, not this).
            let meta = std::fs::symlink_metadata(dir.join(&name));
            if !meta.is_ok_and(|m| m.is_file() && m.len() > 0) {
                continue;
            }
            // Without making the file: one removed since the look above stays removed.
            if let super::lock::Tried::Got(lock) = self.try_lock_task_existing(&task)?
                && matches!(
                    held(lock.file()).map_err(io_err("cannot read", &dir.join(&name)))?,
                    Held::Pending(_)
                )
            {
                out.push((task, lock));
            }
        }
        Ok(out)
    }
}
