//! Sequence numbers in a local root (PROTOCOLS.md section 14): each sender's counter as the
//! entries of `seq/<agent>/`, a numbered send in flight staged inside its entry, and each
//! receiver's `lastSeen` in `seen/<agent>.json`.
//!
//! An entry is a folder `seq/<agent>/<epoch>-<n>/` (both 20 digits, so names sort by
//! number). The newest settled entry is the counter. A numbered send stages its copies in
//! `tmp/`, renames the folder to the next entry (all copies, or none, appear), then renames
//! each copy out into its box: the first copy leaving is the commit point of both the number
//! and the delivery. So under the sender's lock an entry that still holds every copy was
//! never delivered (it is removed: its number is free again), one that holds some copies was
//! (the rest are delivered), and an empty one is done. A chat line's entry holds a marker
//! instead, settled by looking for the line in the channel (`seq_chat.rs`).

use std::io;
use std::path::{Path, PathBuf};

use super::atomic;
use super::lock::Lock;
use super::root::{Store, io_err, list_all_names, list_names};
use crate::engine::Fix;
use crate::error::{Error, Result};
use crate::event::{CIRCE, Event, EventKind};
use crate::fault::test_break;
use crate::names::AgentName;
use crate::seq::Counter;

/// A sender and its counter.
pub(super) type SenderCounter = (AgentName, Counter);

/// The chat marker's name inside an entry.
pub(super) const CHAT_MARKER: &str = "chat";
/// The outbox marker's name inside an entry (a numbered message a task change carries).
pub(super) const OUTBOX_MARKER: &str = "outbox";

/// What an outbox marker says: the task whose record carries the message, and where the
/// message goes.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(super) struct OutboxMarker {
    pub task: String,
    pub msg_id: String,
    pub name: String,
    pub to: Vec<String>,
}

/// One entry of a sender's folder: a number in an epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Entry {
    pub epoch: u64,
    pub n: u64,
}

impl Entry {
    pub fn of(c: Counter) -> Entry {
        Entry { epoch: c.epoch, n: c.last }
    }

    pub fn name(self) -> String {
        format!("{:020}-{:020}", self.epoch, self.n)
    }

    fn parse(s: &str) -> Option<Entry> {
        let (e, n) = s.split_once('-')?;
        let digits = |d: &str| d.len() == 20 && d.bytes().all(|b| b.is_ascii_digit());
        if !digits(e) || !digits(n) {
            return None;
        }
        Some(Entry { epoch: e.parse().ok()?, n: n.parse().ok()? })
    }

    pub fn counter(self) -> Counter {
        Counter { epoch: self.epoch, last: self.n }
    }
}

/// What an entry holds.
enum Content {
    Empty,
    /// Staged copies `<i>-<k>~<box>~<name>` still in it, and `k`.
    Copies(Vec<String>, usize),
    /// A chat line's marker.
    Chat,
    /// A task change's outbox marker.
    Outbox,
}

/// `NEW_MESSAGES`, `AGENTS/a/INBOX`, ... as the box's label (`new`, `inbox:a`, ...).
fn label_of(rel: &str) -> String {
    match rel.split('/').collect::<Vec<_>>().as_slice() {
        ["NEW_MESSAGES"] => "new".into(),
        ["LOGS"] => "logs".into(),
        ["AGENTS", a, b] => format!("{}:{a}", b.to_ascii_lowercase()),
        _ => rel.to_string(),
    }
}

fn repair(what: String) -> Event {
    let mut e = Event::now(EventKind::Repair, CIRCE);
    e.what = Some(what);
    e
}

impl Store {
    pub(super) fn seq_dir(&self, agent: &AgentName) -> PathBuf {
        self.root.join("seq").join(agent.as_str())
    }

    fn seq_lock_path(&self, agent: &AgentName) -> PathBuf {
        self.root.join("locks").join(format!("seq-{agent}.lock"))
    }

    /// The sender's lock: one numbered send (or counter change) per sender at a time.
    pub(super) fn lock_seq(&self, agent: &AgentName) -> Result<Lock> {
        // TEST BUILDS ONLY: every process takes a lock of its own, so senders race.
        if test_break("seq-race") {
            let own =
                self.root.join("locks").join(format!("seq-{agent}-{}.lock", std::process::id()));
            return Lock::acquire(&own, "a broken sequence lock");
        }
        Lock::acquire(&self.seq_lock_path(agent), &format!("the sequence counter of {agent}"))
    }

    /// The sender's lock if no live sender holds it (doctor leaves a busy sender alone).
    pub(super) fn try_lock_seq(&self, agent: &AgentName) -> Result<Option<Lock>> {
        Lock::try_acquire(&self.seq_lock_path(agent))
    }

    /// Agents that have a counter folder, sorted.
    pub(super) fn seq_senders(&self) -> Result<Vec<AgentName>> {
        Ok(list_names(&self.root.join("seq"))?
            .into_iter()
            .filter_map(|n| AgentName::new(n).ok())
            .collect())
    }

    /// The entries of `agent`'s folder, oldest first.
    pub(super) fn seq_entries(&self, agent: &AgentName) -> Result<Vec<Entry>> {
        let mut v: Vec<Entry> =
            list_names(&self.seq_dir(agent))?.iter().filter_map(|n| Entry::parse(n)).collect();
        v.sort_unstable();
        Ok(v)
    }

    fn content(dir: &Path) -> Result<Content> {
        // Hidden names (a file manager's `.DS_Store`) are no copy, as in a box.
        let files = list_names(dir)?;
        if files.iter().any(|f| f == CHAT_MARKER) {
            return Ok(Content::Chat);
        }
        if files.iter().any(|f| f == OUTBOX_MARKER) {
            return Ok(Content::Outbox);
        }
        let Some(first) = files.first() else { return Ok(Content::Empty) };
        let total = first
            .split('~')
            .next()
            .and_then(|p| p.split_once('-'))
            .and_then(|(_, k)| k.parse::<usize>().ok())
            .unwrap_or(usize::MAX);
        Ok(Content::Copies(files, total))
    }

    /// Does any entry of `agent` still hold work (copies or a marker)?
    pub(super) fn seq_unsettled(&self, agent: &AgentName) -> Result<Vec<String>> {
        let mut out = Vec::new();
        for e in self.seq_entries(agent)? {
            if !matches!(Self::content(&self.seq_dir(agent).join(e.name()))?, Content::Empty) {
                out.push(e.name());
            }
        }
        Ok(out)
    }

    /// Finish or undo what an interrupted numbered send of `agent` left (hold its lock), drop
    /// the entries older than the counter, and log the repairs (each once it is made: a
    /// settle stopped part way logs those it made). Returns the counter. A log that fails
    /// after a whole settle is an error marked `committed` (the repairs stand); after a
    /// settle stopped part way, the settle's error is the one said.
    pub(super) fn seq_settle(&self, agent: &AgentName, _lock: &Lock) -> Result<Counter> {
        let mut events = Vec::new();
        let settled = self.seq_settle_entries(agent, &mut events);
        if let Ok(Some(c)) = settled {
            self.seq_prune(agent, c);
        }
        if !events.is_empty() {
            let logged = self
                .sync_dir(&self.seq_dir(agent))
                .and_then(|()| super::event_log::append(self, &mut events));
            if let (Ok(_), Err(e)) = (&settled, logged) {
                return Err(e
                    .map_message(|m| {
                        format!("{agent}'s earlier numbered send was settled, but not logged: {m}")
                    })
                    .committed());
            }
        }
        Ok(settled?.map_or_else(Counter::default, Entry::counter))
    }

    /// Settle each of `agent`'s entries in turn (`seq_settle`), pushing each repair to
    /// `events` as it is made. Returns the newest entry kept.
    fn seq_settle_entries(
        &self,
        agent: &AgentName,
        events: &mut Vec<Event>,
    ) -> Result<Option<Entry>> {
        let entries = self.seq_entries(agent)?;
        let mut current: Option<Entry> = None;
        for (i, e) in entries.iter().enumerate() {
            let newest = i + 1 == entries.len();
            let dir = self.seq_dir(agent).join(e.name());
            // Each repair is said once it is made (a settle stopped part way logs those).
            let (keep, said) = match Self::content(&dir)? {
                Content::Empty => (true, None),
                // TEST BUILDS ONLY (`seq-roll-forward`): a send that never committed is
                // delivered after all, as if its staging were its commit point.
                Content::Copies(files, total)
                    if newest && files.len() >= total && !test_break("seq-roll-forward") =>
                {
                    let what = format!(
                        "numbered send {agent} #{} was never delivered: the number is free again",
                        e.n
                    );
                    (false, Some(repair(what)))
                }
                Content::Copies(files, _) => {
                    (true, Some(self.seq_finish(agent, *e, &dir, &files, events)?))
                }
                Content::Outbox => {
                    let used = self.outbox_committed(&dir.join(OUTBOX_MARKER))?;
                    let what = if used || !newest { "was committed" } else { "never committed" };
                    if used || !newest {
                        let marker = dir.join(OUTBOX_MARKER);
                        atomic::remove(&marker).map_err(io_err("cannot remove", &dir))?;
                    }
                    let what = format!("numbered message {agent} #{} of a task change {what}", e.n);
                    (used || !newest, Some(repair(what)))
                }
                Content::Chat => {
                    let appended = self.chat_line_appended(&dir.join(CHAT_MARKER))?;
                    let what =
                        if appended || !newest { "was written" } else { "was never written" };
                    if appended || !newest {
                        atomic::remove(&dir.join(CHAT_MARKER))
                            .map_err(io_err("cannot remove", &dir))?;
                    }
                    (
                        appended || !newest,
                        Some(repair(format!("chat line {agent} #{} {what}", e.n))),
                    )
                }
            };
            if keep {
                current = Some(*e);
            } else {
                self.seq_discard(&dir)?;
            }
            events.extend(said);
        }
        Ok(current)
    }

    /// Take an entry that was never used out of `seq/` whole, with one rename into `tmp/`,
    /// then remove what it held: a settling cut off half-way must not leave part of the
    /// copies (read as a delivery to the others) or an empty entry (read as a number used).
    /// (TEST BUILDS ONLY: `seq-discard-in-place` removes it where it lies, file by file.)
    pub(super) fn seq_discard(&self, dir: &Path) -> Result<()> {
        if test_break("seq-discard-in-place") {
            for f in list_all_names(dir)? {
                atomic::remove(&dir.join(&f)).map_err(io_err("cannot remove", dir))?;
                crate::fault::crash_point("seq.discarding");
            }
            return std::fs::remove_dir(dir).map_err(io_err("cannot remove", dir));
        }
        let away = self.tmp_dir().join(format!(
            "seq-{}-{}.undone",
            super::repair::stager(),
            crate::clock::random_suffix()
        ));
        atomic::rename_noclobber(dir, &away).map_err(io_err("cannot move", dir))?;
        if let Some(parent) = dir.parent() {
            self.sync_dir(parent)?;
        }
        crate::fault::crash_point("seq.discarding");
        // What is left there is removed by doctor (a staging leftover of a process gone).
        let _ = std::fs::remove_dir_all(&away);
        Ok(())
    }

    /// Did the task change an outbox marker stands for commit: its record still carries the
    /// message, or the message lies in one of its recipients' boxes?
    fn outbox_committed(&self, marker: &Path) -> Result<bool> {
        let bytes = atomic::read_regular(marker).map_err(io_err("cannot read", marker))?;
        let m: OutboxMarker = serde_json::from_slice(&bytes)
            .map_err(|e| Error::internal(format!("{} does not parse: {e}", marker.display())))?;
        let task = crate::names::TaskId::new(&m.task)?;
        if let Some(text) = self.read_record(&task, "status")?
            && crate::task::StatusRecord::parse(&task, &text)
                .is_ok_and(|r| r.outbox.iter().any(|o| o.msg_id == m.msg_id))
        {
            return Ok(true);
        }
        let mut boxes = vec![crate::boxes::Mailbox::Logs];
        for label in &m.to {
            if let Some(b) = crate::boxes::Mailbox::from_label(label) {
                if let Some(a) = b.agent() {
                    boxes.push(crate::boxes::Mailbox::Workspace(a.clone()));
                }
                boxes.push(b);
            }
        }
        Ok(boxes.iter().any(|b| self.find_any_numbered_with_id(b, &m.name, &m.msg_id).is_some()))
    }

    /// Deliver the copies an interrupted send left in its entry.
    fn seq_finish(
        &self,
        agent: &AgentName,
        e: Entry,
        dir: &Path,
        files: &[String],
        events: &mut Vec<Event>,
    ) -> Result<Event> {
        let (mut delivered, mut boxes) = (Vec::new(), Vec::new());
        let mut deliver = || -> Result<()> {
            for f in files {
                let name = self.deliver_staged(dir, f)?;
                let rel = f.split('~').nth(1).unwrap_or_default().replace('+', "/");
                delivered.push((label_of(&rel), name));
                boxes.push(self.root.join(rel));
            }
            Ok(())
        };
        let mut done = deliver();
        // The boxes delivered to are synced, also when a later copy failed: the log names
        // those copies.
        boxes.sort();
        boxes.dedup();
        for b in &boxes {
            let synced = self.sync_dir(b);
            if done.is_ok() {
                done = synced;
            }
        }
        let what = match &done {
            Ok(()) => format!("numbered send {agent} #{} finished after an interruption", e.n),
            Err(_) if delivered.len() == files.len() => format!(
                "numbered send {agent} #{} finished after an interruption (a box it delivered to could not be synced)",
                e.n
            ),
            Err(_) => format!(
                "numbered send {agent} #{} partly finished after an interruption ({} of the {} copies left delivered; the rest waits)",
                e.n,
                delivered.len(),
                files.len()
            ),
        };
        let ev = delivered.into_iter().fold(repair(what), |ev, (label, name)| ev.file(label, name));
        match done {
            Ok(()) => Ok(ev),
            Err(err) => {
                // The copies delivered before the failure are in the log all the same.
                if !ev.files.is_empty() {
                    events.push(ev);
                }
                Err(err)
            }
        }
    }

    /// Remove the (settled, empty) entries older than `keep`. Best effort: a leftover entry
    /// is removed by the next send.
    pub(super) fn seq_prune(&self, agent: &AgentName, keep: Entry) {
        let Ok(entries) = self.seq_entries(agent) else { return };
        for e in entries.into_iter().filter(|e| *e < keep) {
            let dir = self.seq_dir(agent).join(e.name());
            if std::fs::remove_dir(&dir).is_err() {
                // Settled, so what is left is hidden (a file manager's `.DS_Store`).
                for n in list_all_names(&dir).unwrap_or_default() {
                    if n.starts_with('.') {
                        let _ = std::fs::remove_file(dir.join(n));
                    }
                }
                let _ = std::fs::remove_dir(&dir);
            }
        }
    }

    /// Make the entry `e` of `agent` appear with `files` in it, all at once: built in
    /// `tmp/seq-<pid>-<id>.part/`, synced, renamed into `seq/<agent>/` (never over an
    /// existing entry: two senders with one number is a conflict). Returns its folder.
    pub(super) fn seq_stage(
        &self,
        agent: &AgentName,
        e: Entry,
        files: &[(String, &[u8])],
    ) -> Result<PathBuf> {
        let parent = self.seq_dir(agent);
        std::fs::create_dir_all(&parent).map_err(io_err("cannot create", &parent))?;
        let part = self.tmp_dir().join(format!(
            "seq-{}-{}.part",
            super::repair::stager(),
            crate::clock::random_suffix()
        ));
        let dest = parent.join(e.name());
        let stage = || -> io::Result<()> {
            std::fs::create_dir(&part)?;
            for (name, content) in files {
                atomic::write_new(&part.join(name), content, self.sync)?;
            }
            if self.sync && !files.is_empty() {
                atomic::sync_dir(&part)?;
            }
            if test_break("seq-race") {
                // TEST BUILDS ONLY: an entry replaces one that was emptied meanwhile.
                return std::fs::rename(&part, &dest);
            }
            atomic::rename_noclobber(&part, &dest)
        };
        if let Err(err) = stage() {
            let _ = std::fs::remove_dir_all(&part);
            if err.kind() == io::ErrorKind::AlreadyExists || err.raw_os_error() == Some(39) {
                return Err(Error::conflict(format!(
                    "{agent}'s number #{} was taken by another sender meanwhile",
                    e.n
                ))
                .hint("one numbered send per sender at a time: run `circe doctor`"));
            }
            return Err(Error::io("cannot stage the numbered message in", &parent, err));
        }
        self.sync_dir(&parent)?;
        Ok(dest)
    }

    /// A settle's log failure (marked `committed`: the repairs stand) as the error of a
    /// command that goes no further: its own work was not done.
    pub(super) fn settle_stopped(e: Error) -> Error {
        if !e.is_committed() {
            return e;
        }
        e.not_committed("nothing of this command was done (the earlier send's repairs stand, only their events are missing): mend what the error names (`circe doctor` shows it) and run it again")
    }

    /// Change `agent`'s counter under its lock, after settling (a reset, an import): never
    /// back. Returns the counter.
    pub(super) fn seq_update(
        &self,
        agent: &AgentName,
        change: &mut dyn FnMut(&mut Counter) -> Result<()>,
    ) -> Result<Counter> {
        let lock = self.lock_seq(agent)?;
        let before = self.seq_settle(agent, &lock).map_err(Self::settle_stopped)?;
        let mut after = before;
        change(&mut after)?;
        if after != before {
            if Entry::of(after) < Entry::of(before) {
                return Err(Error::internal(format!("{agent}'s counter cannot go back")));
            }
            self.seq_stage(agent, Entry::of(after), &[])?;
            self.seq_prune(agent, Entry::of(after));
        }
        Ok(after)
    }

    /// Every sender's counter (settled first), leaving out those still at 0.
    pub(super) fn seq_counters(&self) -> Result<Vec<SenderCounter>> {
        let mut out = Vec::new();
        for a in self.seq_senders()? {
            let lock = self.lock_seq(&a)?;
            let c = self.seq_settle(&a, &lock).map_err(Self::settle_stopped)?;
            if c != Counter::default() {
                out.push((a, c));
            }
        }
        Ok(out)
    }

    /// Invariant 1 for numbered sends: no entry of a sender that is not sending right now
    /// still holds copies or a chat marker. With `repair`, settle it (the next send by that
    /// sender would; its repairs are logged as they are made). Returns the settles whose
    /// repairs stand but could not be logged (said as violations too).
    pub(super) fn seq_doctor(
        &self,
        repair: bool,
        v: &mut dyn FnMut(u8, String, Fix),
    ) -> Result<Vec<Error>> {
        let mut unlogged = Vec::new();
        for agent in self.seq_senders()? {
            // A live sender holds its lock: its entry is work in progress.
            let Some(lock) = self.try_lock_seq(&agent)? else { continue };
            let unsettled = self.seq_unsettled(&agent)?;
            // Said repaired only once it is: a send that cannot be settled is said once,
            // with why and what mends it.
            let settled = if repair { Some(self.seq_settle(&agent, &lock)) } else { None };
            let (why, left) = match settled {
                Some(Ok(_)) => (None, Vec::new()),
                // Settled, but its repairs are not in the log: said, by hand.
                Some(Err(e)) if e.is_committed() => {
                    v(1, format!("seq/{agent}: {}", e.message), Fix::Hand);
                    unlogged.push(e);
                    (None, Vec::new())
                }
                // The entries settled before the one that stopped it are repaired; those
                // left are said with why (and the other senders are still looked at).
                Some(Err(e)) => {
                    let why = match &e.hint {
                        Some(h) => format!(" (not settled: {}; {h})", e.message),
                        None => format!(" (not settled: {})", e.message),
                    };
                    (Some(why), self.seq_unsettled(&agent)?)
                }
                // What would stop `--repair` is said now, on the entries from the one it
                // would stop at (those before it, `--repair` settles).
                None => match self.seq_blocked(&agent, &unsettled)? {
                    Some((at, why)) => (Some(why), unsettled[at..].to_vec()),
                    None => (None, unsettled.clone()),
                },
            };
            if let (Some(why), true) = (&why, unsettled.is_empty()) {
                v(1, format!("seq/{agent}: a numbered send by {agent}{why}"), Fix::Hand);
            }
            for e in &unsettled {
                let open = left.contains(e);
                let fix = if repair && !open {
                    Fix::Done
                } else if open && why.is_some() {
                    Fix::Hand
                } else {
                    Fix::Repair
                };
                let why = why.as_deref().filter(|_| open).unwrap_or_default();
                v(
                    1,
                    format!("seq/{agent}/{e}: a numbered send by {agent} was interrupted{why}"),
                    fix,
                );
            }
        }
        Ok(unlogged)
    }
}

impl Store {
    /// Where settling `agent`'s `unsettled` entries would stop (the index of the entry) and
    /// why, as `--repair` would say it (`None`: nothing stops it): a copy that is no copy
    /// circe staged, or whose box is behind a link. Looked at without moving anything.
    fn seq_blocked(
        &self,
        agent: &AgentName,
        unsettled: &[String],
    ) -> Result<Option<(usize, String)>> {
        for (at, name) in unsettled.iter().enumerate() {
            let dir = self.seq_dir(agent).join(name);
            let Content::Copies(files, _) = Self::content(&dir)? else { continue };
            if let Some(e) = files.iter().find_map(|f| self.staged_target(&dir, f).err()) {
                return Ok(Some((
                    at,
                    match &e.hint {
                        Some(h) => format!(" (`--repair` cannot settle it: {}; {h})", e.message),
                        None => format!(" (`--repair` cannot settle it: {})", e.message),
                    },
                )));
            }
        }
        Ok(None)
    }
}

/// Where a counter lives in a root's layout: `seq/<agent>/<epoch>-<n>` (a folder).
pub(super) fn counter_rel(agent: &AgentName, c: Counter) -> String {
    format!("seq/{agent}/{}", Entry::of(c).name())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_names_sort_by_number() {
        let a = Entry { epoch: 0, n: 9 };
        let b = Entry { epoch: 0, n: 10 };
        let c = Entry { epoch: 1, n: 0 };
        assert!(a.name() < b.name() && b.name() < c.name());
        assert_eq!(Entry::parse(&b.name()), Some(b));
        for bad in ["1-2", "x", "00000000000000000001-0000000000000000000x", ".part"] {
            assert_eq!(Entry::parse(bad), None, "{bad}");
        }
        assert_eq!(label_of("AGENTS/qa/INBOX"), "inbox:qa");
        assert_eq!(label_of("NEW_MESSAGES"), "new");
    }
}
