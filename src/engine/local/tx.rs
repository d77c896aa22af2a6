//! The task transaction of the local engine: the task's flock held from `begin` to drop, the
//! task reconciled on entry, and `commit` as the only code that moves a ticket or writes a
//! task's records.
//!
//! Commit order (PROTOCOLS.md section 8): the commit point is one rename (the ticket's move,
//! or the delivery of a new ticket); the records follow; the events are appended last. For a
//! task that does not exist yet the record is written first and the delivery commits it (a
//! record whose message never arrived is rolled back by `reconcile`); a handoff first marks
//! the record with its message's name, so a crash in between costs one `stat` to resolve.

use super::lock::Lock;
use super::task_journal::{Leaves, Roll};
use super::{LocalEngine, board, event_log, lanes, reconcile};
use crate::boxes::Mailbox;
use crate::clock;
use crate::engine::{TaskTx, no_task};
use crate::error::{Error, Result};
use crate::event::Event;
use crate::fault::crash_point;
use crate::names::TaskId;
use crate::task::record::{self, OwnerRecord, StatusRecord};
use crate::task::{Change, Status, TaskState, Ticket};

pub(super) struct LocalTx<'a> {
    eng: &'a LocalEngine,
    task: TaskId,
    st: Option<TaskState>,
    lock: Lock,
    /// Opening it finished a change a command cut off on the task (`TaskTx::finished_cut_off`).
    finished_cut_off: bool,
}

impl<'a> LocalTx<'a> {
    /// The transaction on `task`, whose lock the caller took.
    pub(super) fn begin(eng: &'a LocalEngine, task: TaskId, lock: Lock) -> Result<LocalTx<'a>> {
        let (st, finished_cut_off) = reconcile::settled_finishing(eng, &task, &lock)?;
        Ok(LocalTx { eng, task, st, lock, finished_cut_off })
    }

    /// The first free name `base`, `base.2.md`, ... in NEW_MESSAGES.
    fn free_name(&self, base: &str) -> String {
        (1..10_000)
            .map(|n| crate::message::numbered(base, n))
            .find(|n| !self.eng.store.has_message(&Mailbox::NewMessages, n))
            .unwrap_or_else(|| base.to_string())
    }

    /// Write `.status`, `.owner` (as it follows from the status) and `.checks` when given,
    /// keeping the board in step.
    fn write(
        &self,
        rec: &StatusRecord,
        owner: Option<&OwnerRecord>,
        checks: &record::Checks,
        with_checks: bool,
    ) -> Result<()> {
        let status = rec.render();
        let owner = owner.map(OwnerRecord::render);
        let checks_text = with_checks.then(|| record::render_checks(checks));
        let mut records: Vec<(&str, Option<&str>)> =
            vec![("status", Some(&status)), ("owner", owner.as_deref())];
        if let Some(c) = &checks_text {
            records.push(("checks", Some(c)));
        }
        board::write(self.eng, &self.task, &records, Some((rec, checks)))
    }

    /// The `.owner` record for `rec`: kept from before when the same owner still holds it at
    /// the same epoch, else made now.
    fn owner_for(&self, rec: &StatusRecord) -> Option<OwnerRecord> {
        if !rec.status.is_owned() {
            return None;
        }
        let before = self.st.as_ref().and_then(|s| s.owner.as_ref());
        match before {
            Some(o) if Some(&o.owner) == rec.owner.as_ref() && o.epoch == rec.epoch => {
                let mut o = o.clone();
                o.lease_expires_at = rec.lease_expires_at.clone().unwrap_or_default();
                Some(o)
            }
            _ => rec.owner_record(
                &clock::stamp(clock::now()),
                &super::host_name(),
                std::os::unix::process::parent_id(),
            ),
        }
    }
}

/// A transaction that found no task and made none lets go of its lock as `unlock_task` does:
/// a task archived after the command saw it and before it locked it (whose lock file the
/// archive removed, and the lock made again), or an opening that failed before its commit
/// point, leaves no lock file behind. A failure to remove it leaves the file, as before:
/// nothing stands on it.
impl Drop for LocalTx<'_> {
    fn drop(&mut self) {
        if self.st.is_none() {
            let _ = self.eng.store.remove_gone_task_lock(&self.task, &self.lock);
        }
    }
}

impl LocalTx<'_> {
    /// After the commit point and the outbox (`sent`): the change's own events, logged even
    /// while its messages wait in the outbox.
    fn after_commit(&self, events: &mut [Event], sent: Result<()>) -> Result<()> {
        let logged = event_log::append(&self.eng.store, events).map_err(Error::committed);
        match (sent, logged) {
            // Both: the log's failure, with where the messages wait.
            (Err(_), Err(l)) => Err(outbox_held(l)),
            (Err(s), Ok(())) => Err(outbox_held(s)),
            (Ok(()), logged) => logged,
        }
    }

    /// After the commit point: deliver the outbox the record carries (each message once),
    /// then clear it.
    fn send_outbox(
        &self,
        record: &mut StatusRecord,
        owner: Option<&OwnerRecord>,
        checks: &record::Checks,
        events: &mut Vec<Event>,
        numbered: Option<std::path::PathBuf>,
    ) -> Result<()> {
        if record.outbox.is_empty() {
            return Ok(());
        }
        let mut sent = super::outbox::deliver(self.eng, &record.outbox, false)?;
        record.outbox.clear();
        // The record as it is written now, without the outbox that needed its format.
        record.v = record.format_needed();
        // Their events count once the write that clears the outbox succeeded: if it fails,
        // the outbox stays in the record, and the next holder, finding its messages
        // delivered, logs them (counted here too, they would be logged twice).
        self.write(record, owner, checks, false)?;
        events.append(&mut sent);
        crash_point("outbox.cleared");
        // A numbered message among them (section 14): its entry is now the counter.
        super::seq_send::outbox_done(numbered)
    }
}

/// The outbox a change's record carries: not a change that delivers a new ticket (its
/// commit point comes before the record that would carry it). A change that moves its
/// ticket writes it after the rename, and its journal keeps it until then (`task_journal`).
fn with_outbox(
    outbox: Vec<crate::task::Outgoing>,
    ticket: &Ticket,
) -> Result<Vec<crate::task::Outgoing>> {
    if !outbox.is_empty() && matches!(ticket, Ticket::Deliver { .. }) {
        return Err(Error::internal("an outbox goes not with a change that delivers a ticket"));
    }
    Ok(outbox)
}

/// Did the task (just) become waiting in a lane it was not in: new now, and before not new,
/// or at another epoch, with another ticket or another address?
fn newly_waiting(before: Option<&StatusRecord>, after: &StatusRecord) -> bool {
    after.status == Status::New
        && before.is_none_or(|b| {
            b.status != Status::New
                || b.epoch != after.epoch
                || b.message != after.message
                || b.to != after.to
        })
}

/// Does the ticket lie where the record says it should (reconciliation makes it so)?
pub(super) fn where_record_says(rec: &StatusRecord, at: &Mailbox) -> bool {
    match rec.status {
        Status::New | Status::Parked => *at == Mailbox::NewMessages,
        s if s.is_owned() => at.agent() == rec.owner.as_ref() && *at != Mailbox::Logs,
        _ => true,
    }
}

impl TaskTx for LocalTx<'_> {
    fn task_id(&self) -> &TaskId {
        &self.task
    }

    fn state(&self) -> Option<&TaskState> {
        self.st.as_ref()
    }

    fn finished_cut_off(&self) -> bool {
        self.finished_cut_off
    }

    fn commit(&mut self, change: Change) -> Result<Vec<Event>> {
        let Change { op, mut record, checks, ticket, mut events, notices: _, outbox, request } =
            change;
        record.outbox = with_outbox(outbox, &ticket)?;
        // The format it needs, as its file will say it (`StatusRecord::render`).
        record.v = record.format_needed();
        // A new ticket's name is chosen first: the journal names it.
        let ticket = match ticket {
            Ticket::Deliver { name, content } => {
                let name = self.free_name(&name);
                record.message.clone_from(&name);
                for e in &mut events {
                    for f in &mut e.files {
                        if f.mailbox == "new" {
                            f.file.clone_from(&name);
                        }
                    }
                }
                Ticket::Deliver { name, content }
            }
            t => t,
        };
        let ticket_in = match &ticket {
            Ticket::Deliver { .. } => Some(Mailbox::NewMessages),
            Ticket::MoveTo(to) => Some(to.clone()),
            Ticket::Stay => None,
        };
        let at = self.st.as_ref().and_then(|s| s.location.as_ref());
        let renames = matches!(&ticket, Ticket::MoveTo(to) if at.is_some_and(|a| a != to));
        let leaves = Leaves {
            record: Some(&record),
            exact: false,
            checks: checks.as_ref(),
            ticket_in: ticket_in.as_ref(),
            before: self.st.as_ref().map(|s| &s.rec),
            renames,
        };
        let journal = self.journal(&leaves, &events)?;
        // Queued before the commit point: a change cut off after it must not leave a waiting
        // task out of every lane (an entry that is not live yet is judged in `lanes.rs`).
        // So is a ticket moved into NEW_MESSAGES (a park): cut off before its records, the
        // task is rolled forward to waiting there.
        let queue = newly_waiting(self.st.as_ref().map(|s| &s.rec), &record)
            || (ticket_in == Some(Mailbox::NewMessages) && self.st.is_some());
        // The test-only broken variant queues after the commit point, as circe once did.
        let late = queue && crate::fault::test_break("late-queue");
        let queued = if queue && !late { lanes::push(self.eng, &record) } else { Ok(()) };
        // Failed to queue, the change is not made: its journal is settled below as any
        // change's that failed.
        let done = queued.and_then(|()| {
            self.commit_journaled(op, record, checks.as_ref(), ticket, events, request.as_deref())
        });
        if late && done.is_ok() {
            lanes::push(self.eng, &self.st.as_ref().ok_or_else(|| no_task(&self.task))?.rec)?;
        }
        if journal {
            let store = &self.eng.store;
            if done.is_ok() {
                crash_point("task.logged");
                super::root::Store::drop_task_journal(&self.lock);
            } else {
                // Failed on the way: its events are logged now if the change stands.
                let now = reconcile::load(self.eng, &self.task).ok().flatten();
                // Checks or records it left behind are not rolled forward here: the journal
                // stays for the next holder, which does.
                let later = &mut |_: Roll<'_>| Err(Error::internal("left to the next holder"));
                let _ = store.settle_task_journal(&self.lock, now.as_ref(), later);
            }
        }
        done
    }
}

impl LocalTx<'_> {
    /// The journal of a change about to leave what `leaves` says, with `events` (and the
    /// `send` events of its record's outbox): `task_journal.rs`.
    fn journal(&self, leaves: &Leaves<'_>, events: &[Event]) -> Result<bool> {
        let sends = leaves.record.map(|r| super::outbox::meant(&r.outbox)).unwrap_or_default();
        self.eng.store.journal_task(&self.lock, leaves, events, sends)
    }

    /// The change, once its journal is written: the commit point, the records, the outbox
    /// and the events.
    fn commit_journaled(
        &mut self,
        op: &str,
        mut record: StatusRecord,
        checks: Option<&record::Checks>,
        ticket: Ticket,
        mut events: Vec<Event>,
        request: Option<&str>,
    ) -> Result<Vec<Event>> {
        if let (Some(r), Some(owner)) = (request, &record.owner) {
            super::requests::record(&self.eng.store, owner.as_str(), r, &self.task, record.epoch)?;
        }
        let all_checks = checks
            .cloned()
            .unwrap_or_else(|| self.st.as_ref().map(|s| s.checks.clone()).unwrap_or_default());
        let owner = self.owner_for(&record);
        let store = &self.eng.store;
        let mut numbered = None; // a numbered message in the outbox commits with the record
        let location = match ticket {
            Ticket::Deliver { name, content } => {
                let fixed = |_n: u32| name.clone();
                match &self.st {
                    None => {
                        // Opening: the record first, then the message (the commit point).
                        // Failed before it, the records written are taken back (`.status`
                        // last: no task is seen without it while another record is left).
                        let undo = |e: Error| {
                            let gone: [(&str, Option<&str>); 2] =
                                [("checks", None), ("status", None)];
                            let _ = board::write(self.eng, &self.task, &gone, None);
                            Err(e)
                        };
                        if let Err(e) = self.write(&record, None, &all_checks, true) {
                            return undo(e);
                        }
                        crash_point("send.recorded");
                        if let Err(e) = store.put_message(&Mailbox::NewMessages, &fixed, &content) {
                            return undo(e);
                        }
                        crash_point("send.committed");
                    }
                    Some(st) => {
                        // A handoff: mark, deliver (the commit point), then the records.
                        let mut marked = st.rec.clone();
                        marked.handoff = Some(name.clone());
                        marked.handoff_checks = all_checks
                            .iter()
                            .filter(|(_, passed)| !**passed)
                            .map(|(k, _)| k.clone())
                            .collect();
                        self.write(&marked, st.owner.as_ref(), &st.checks, false)?;
                        crash_point("handoff.recorded");
                        if let Err(e) = store.put_message(&Mailbox::NewMessages, &fixed, &content) {
                            let _ = self.write(&st.rec, st.owner.as_ref(), &st.checks, false);
                            return Err(e);
                        }
                        crash_point("handoff.delivered");
                        self.write(&record, owner.as_ref(), &all_checks, true)
                            .map_err(|e| unrecorded(e, "its message was delivered"))?;
                    }
                }
                Mailbox::NewMessages
            }
            Ticket::MoveTo(to) => {
                let st = self.st.as_ref().ok_or_else(|| no_task(&self.task))?;
                let from = st.location.clone().ok_or_else(|| {
                    // Not found (a hand moved or hid it): `claim --next` passes over it.
                    Error::not_found(format!("the message of task {} is in no box", self.task))
                        .hint("run `circe doctor`: it says where the message may be")
                })?;
                if !where_record_says(&st.rec, &from) {
                    return Err(Error::conflict(format!(
                        "the message of task {} is in {from}, not where its record says",
                        self.task
                    ))
                    .hint("another command is half-way through it; run `circe doctor`"));
                }
                if from != to {
                    crash_point(&format!("{op}.before_rename"));
                    if !store.move_message(&from, &to, &st.rec.message)? {
                        let t = &self.task;
                        return Err(Error::conflict(format!("task {t} was taken meanwhile"))
                            .hint(format!("`circe show {t}` says who holds it now")));
                    }
                    crash_point(&format!("{op}.renamed"));
                }
                self.write(&record, owner.as_ref(), &all_checks, checks.is_some()).map_err(
                    |e| {
                        if from == to { e } else { unrecorded(e, "its message moved") }
                    },
                )?;
                crash_point(&format!("{op}.recorded"));
                to
            }
            Ticket::Stay => {
                let st = self.st.as_ref().ok_or_else(|| no_task(&self.task))?;
                numbered = store.seq_outbox_stage(&self.task, &record.outbox)?;
                self.write(&record, owner.as_ref(), &all_checks, checks.is_some())?;
                crash_point(&format!("{op}.recorded"));
                st.location.clone().unwrap_or(Mailbox::NewMessages)
            }
        };
        let sent =
            self.send_outbox(&mut record, owner.as_ref(), &all_checks, &mut events, numbered);
        self.after_commit(&mut events, sent)?;
        self.st =
            Some(TaskState { rec: record, owner, checks: all_checks, location: Some(location) });
        Ok(events)
    }
}

/// A change whose ticket's rename or delivery (its commit point: `done` says which) was made
/// but whose records could not be written: it stands, and the next command on the task
/// writes them (from its journal, or a handoff's mark).
fn unrecorded(e: Error, done: &str) -> Error {
    e.detail("committed", true).hint_more(format!(
        "the task's change was made and stands ({done}); the next command on the task, or `circe doctor --repair`, writes its records once this is mended"
    ))
}

/// A change's messages that could not be delivered after its commit point: they wait in its
/// record's outbox, and the change stands.
fn outbox_held(e: Error) -> Error {
    e.detail("committed", true).detail("outbox", true).hint_more(
        "the task's change was made and stands; the messages it sends wait in its record (`outbox`) and go with the next command on the task, or `circe doctor --repair`, once this is mended",
    )
}

#[cfg(test)]
#[path = "tx_tests.rs"]
mod tests;
