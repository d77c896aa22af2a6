//! The events of a delivery, kept until they are logged (PROTOCOLS.md section 6, step 6).
//!
//! A send delivers first (its commit point) and logs its events after, so a command cut off
//! in between would leave a delivered message without its `send` event. Before the delivery
//! the events are written, as they will be logged, to `tmp/events-<pid>-<id>.json`, with the
//! log's last id at that moment; once logged the file is removed. A file whose process is
//! gone is settled by `circe doctor --repair`, by a send that names its own id and by `circe
//! archive`: when the message lies in one of the boxes its event names (or moved on from
//! there) and no event of its kind, msg id and boxes was logged since, the events are logged
//! then; a message that lies nowhere was never delivered, and the file is removed; one with
//! copies still staged waits. Not fsynced: this covers a command killed, not a power cut
//! (which may cost the log's tail anyway).

use serde::{Deserialize, Serialize};

use super::atomic;
use super::event_log;
use super::root::{Store, io_err};
use crate::boxes::Mailbox;
use crate::error::{Error, Result};
use crate::event::{Cursor, Event};

/// The prefix of a journal's name in `tmp/`.
pub(super) const PREFIX: &str = "events-";
/// Settlers take this lock, so that two never log one journal twice.
const LOCK: &str = "journal";
/// Events read at a time when looking for a journal's events in the log.
const BATCH: usize = 1024;

#[derive(Serialize, Deserialize)]
struct Journal {
    msg_id: String,
    /// The log's last id before the delivery: its events, if logged, come after it.
    after: u64,
    events: Vec<Event>,
    /// A move's: the box and file the message leaves (while it lies there, the move was
    /// not made, whatever copy of the same message lies where the event says).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    from: Option<(String, String)>,
}

/// What settling a journal did.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Settled {
    /// The delivery was made and its events were not logged: they are now.
    Logged(usize),
    /// The events were in the log already.
    AlreadyLogged,
    /// The message lies nowhere: it was never delivered.
    NotDelivered,
    /// Copies of its message still wait to land (a numbered entry or a fan-out batch whose
    /// sender, or whose settling, has not finished them): it waits.
    Waiting,
    /// Another settler took it first.
    Gone,
}

impl Store {
    /// Write the journal of a delivery of `msg_id` about to be made; returns its name.
    pub(super) fn journal_events(&self, msg_id: &str, events: &[Event]) -> Result<String> {
        self.write_events_journal(msg_id, events, None)
    }

    /// Write the journal of a move of `msg_id` out of `from`/`file`; returns its name.
    pub(super) fn journal_move(
        &self,
        msg_id: &str,
        from: &Mailbox,
        file: &str,
        event: &Event,
    ) -> Result<String> {
        self.write_events_journal(
            msg_id,
            std::slice::from_ref(event),
            Some((from.label(), file.into())),
        )
    }

    fn write_events_journal(
        &self,
        msg_id: &str,
        events: &[Event],
        from: Option<(String, String)>,
    ) -> Result<String> {
        let j = Journal {
            msg_id: msg_id.to_string(),
            // A log whose end cannot be read now (its append will say so) is searched whole.
            after: event_log::last_id(self).unwrap_or(0),
            events: events.to_vec(),
            from,
        };
        let name =
            format!("{PREFIX}{}-{}.json", super::repair::stager(), crate::clock::random_suffix());
        let bytes = serde_json::to_vec(&j).map_err(|e| Error::internal(e.to_string()))?;
        let path = self.tmp_dir().join(&name);
        atomic::write_new(&path, &bytes, false).map_err(io_err("cannot write", &path))?;
        Ok(name)
    }

    /// The journal's events are logged: remove it.
    pub(super) fn drop_journal(&self, name: &str) -> Result<()> {
        let path = self.tmp_dir().join(name);
        match atomic::remove(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(Error::io("cannot remove", &path, e))
            }
            _ => Ok(()),
        }
    }

    /// Log a journal's events when its delivery was made and they are not in the log yet,
    /// then remove it. For a journal whose command is gone (or failed before logging).
    pub(super) fn settle_journal(&self, name: &str) -> Result<Settled> {
        let _lock = self.lock_named(LOCK)?;
        let path = self.tmp_dir().join(name);
        let bytes = match atomic::read_regular(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Settled::Gone),
            Err(e) => return Err(Error::io("cannot read", &path, e)),
        };
        let Ok(mut j) = serde_json::from_slice::<Journal>(&bytes) else {
            // Cut off while it was written: its delivery had not begun.
            self.drop_journal(name)?;
            return Ok(Settled::NotDelivered);
        };
        let settled = if self.still_staged(&j)? {
            return Ok(Settled::Waiting);
        } else if self.not_moved(&j) || !self.delivered(&mut j) {
            Settled::NotDelivered
        } else if self.logged_since(&j)? {
            Settled::AlreadyLogged
        } else {
            let n = j.events.len();
            for e in &mut j.events {
                e.what =
                    Some("logged late: the command that made it stopped before logging it".into());
            }
            event_log::append(self, &mut j.events)?;
            Settled::Logged(n)
        };
        self.drop_journal(name)?;
        Ok(settled)
    }

    /// Do copies of the journal's message still wait in a numbered entry of its sender or
    /// in a fan-out batch (staged as `<n>~<box>~<name>`)? Their delivery is not finished: a
    /// live sender, or the next settling, lands them.
    fn still_staged(&self, j: &Journal) -> Result<bool> {
        let Some(first) = j.events.first() else { return Ok(false) };
        let wanted: Vec<&str> = first.files.iter().map(|f| f.file.as_str()).collect();
        let holds = |dir: &std::path::Path| -> Result<bool> {
            Ok(super::root::list_all_names(dir)?
                .iter()
                .any(|n| n.splitn(3, '~').nth(2).is_some_and(|name| wanted.contains(&name))))
        };
        let mut dirs = Vec::new();
        if let Ok(agent) = crate::names::AgentName::new(&first.agent) {
            let seq = self.seq_dir(&agent);
            dirs.extend(self.seq_entries(&agent)?.into_iter().map(|e| seq.join(e.name())));
        }
        for n in super::root::list_all_names(&self.tmp_dir())? {
            if n.starts_with("batch-") && !n.contains(".part") {
                dirs.push(self.tmp_dir().join(n));
            }
        }
        for d in dirs {
            if holds(&d)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// A move's message still lies where it was moved from: the move was not made.
    fn not_moved(&self, j: &Journal) -> bool {
        j.from.as_ref().is_some_and(|(label, file)| {
            Mailbox::from_label(label)
                .is_some_and(|b| self.find_any_numbered_with_id(&b, file, &j.msg_id).is_some())
        })
    }

    /// Does the journal's message lie where its first event put it, or where it moves on to
    /// (the agent's WORKSPACE, LOGS)? Every event's files are set to the names the copies
    /// got where they still lie (a copy may have taken a numbered name, `x.2.md`).
    fn delivered(&self, j: &mut Journal) -> bool {
        // A move's message is looked for where it was moved to, not further: had it moved on
        // (a `done` after a `take`), a `done` straight from the INBOX would pass for the
        // `take` that was cut off before its move.
        let moved_on = j.from.is_none();
        self.lies_where_said(&j.msg_id, &mut j.events, moved_on)
    }

    /// Does the message `msg_id` (or the one an event names) lie where the first of `events`
    /// put it, or (`moved_on`) where it moves on to? Every event's files are set to the names
    /// found.
    pub(super) fn lies_where_said(
        &self,
        msg_id: &str,
        events: &mut [Event],
        moved_on: bool,
    ) -> bool {
        let mut found = false;
        for (i, e) in events.iter_mut().enumerate() {
            // A copy holds its own message's id: the event's (a send, a route), or the
            // journal's (an expired ask's notice names the ask).
            let ids: Vec<String> = e.msg_id.iter().cloned().chain([msg_id.to_string()]).collect();
            for f in &mut e.files {
                let Some(b) = Mailbox::from_label(&f.mailbox) else { continue };
                // Where it landed, else where it moved on to (taken: the same name).
                let mut places = vec![b.clone()];
                if moved_on {
                    if let Some(a) = b.agent() {
                        places.push(Mailbox::Workspace(a.clone()));
                    }
                    places.push(Mailbox::Logs);
                }
                let copy = places.iter().find_map(|p| {
                    ids.iter().find_map(|id| self.find_any_numbered_with_id(p, &f.file, id))
                });
                if let Some(n) = copy {
                    f.file = n;
                    found |= i == 0;
                }
            }
        }
        found
    }

    /// Is the journal's first event in the log after `after`: one of its kind, about its msg
    /// id, putting files into the same boxes (an expired ask's notice and the filing of the
    /// ask are both `lapse` events about the ask, into different boxes)?
    fn logged_since(&self, j: &Journal) -> Result<bool> {
        let Some(first) = j.events.first() else { return Ok(true) };
        self.in_log_since(j.after, first, false)
    }

    /// Is an event like `like` in the log after `after`: its kind, agent, task, msg id, epoch,
    /// move and boxes (and, `same_time`, its `ts`: the very event, not one like it)?
    pub(super) fn in_log_since(&self, after: u64, like: &Event, same_time: bool) -> Result<bool> {
        let boxes = |e: &Event| e.files.iter().map(|f| f.mailbox.clone()).collect::<Vec<_>>();
        let same = |e: &Event| {
            e.event == like.event
                && e.agent == like.agent
                && e.task == like.task
                && e.msg_id == like.msg_id
                && e.epoch == like.epoch
                && (e.from, e.to) == (like.from, like.to)
                && boxes(e) == boxes(like)
                && (!same_time || e.ts == like.ts)
        };
        let mut from = Cursor::after(after);
        loop {
            let batch = event_log::read(self, from, BATCH)?;
            let Some(last) = batch.last() else { return Ok(false) };
            if batch.iter().any(same) {
                return Ok(true);
            }
            from = Cursor::after(last.id);
        }
    }

    /// Settle the journals in `tmp/` whose commands are gone; returns (name, outcome) each.
    /// Only the journals are looked up (is their process gone?), not every staged file.
    /// With `of`, only those of that agent (their first event is the agent's), which it
    /// settles under its hold before its next send logs anything, so that a sender's events
    /// reach the log in the order of its numbers (a watcher handed #2 before a late #1 would
    /// judge #1 stale); one that cannot be read now is left to the settling that reads it
    /// whole.
    pub(super) fn settle_journals(
        &self,
        of: Option<&crate::names::AgentName>,
    ) -> Result<Vec<(String, Settled)>> {
        let mut out = Vec::new();
        for name in self.tmp_leftovers_of(PREFIX)? {
            if let Some(agent) = of {
                let Ok(bytes) = atomic::read_regular(&self.tmp_dir().join(&name)) else {
                    continue;
                };
                let of_agent = serde_json::from_slice::<Journal>(&bytes)
                    .is_ok_and(|j| j.events.first().is_some_and(|e| e.agent == agent.as_str()));
                if !of_agent {
                    continue;
                }
            }
            let s = self.settle_journal(&name)?;
            out.push((name, s));
        }
        Ok(out)
    }
}
