//! Finding what an archive run takes: the finished tasks, their messages (filed into LOGS
//! first), the loose messages of LOGS, their events in the hot log, the log segments and chat
//! files that may go. The rules are `crate::archive::select`'s; this is the file work.
//!
//! Memory stays flat whatever the size: LOGS is read as a directory stream (never listed
//! whole), and what belongs to each task is written to bucket files on disk (`Sink`), to be
//! gathered one bucket at a time when the segments are written.

use std::collections::{BTreeMap, HashSet};
use std::io::{BufRead, BufReader};

use chrono::{DateTime, Utc};

use super::LocalEngine;
use super::atomic;
use super::dir_stamp::{DirStamp, wall_ns};
use super::event_log;
use super::root::{io_err, is_message_name, list_names};
use crate::archive::select::{self, Fate, LogFacts, MessageFacts};
use crate::boxes::Mailbox;
use crate::error::{Error, Result};
use crate::event::{CIRCE, Event, EventKind};
use crate::message::{self, Mode};
use crate::names::TaskId;
use crate::task::StatusRecord;

/// A task that goes, as selected.
#[derive(Debug, Clone)]
pub(super) struct Selected {
    pub period: String,
}

/// The tasks that go, and what stays (to leave alone whatever names it).
#[derive(Default)]
pub(super) struct Selection {
    pub tasks: BTreeMap<TaskId, Selected>,
    pub staying: HashSet<String>,
    pub staying_tickets: HashSet<String>,
}

/// A rotated segment of the event log that goes.
#[derive(Debug, Clone)]
pub(super) struct LogSeg {
    pub name: String,
    pub first: u64,
    pub last: u64,
    pub bytes: u64,
    pub period: String,
    pub newest: String,
}

/// An archived chat file (and its record) that goes.
#[derive(Debug, Clone)]
pub(super) struct ChatItem {
    pub stem: String,
    pub period: String,
    pub archived_at: String,
    /// The bytes of its files when scanned (what a dry run counts).
    pub bytes: u64,
}

impl ChatItem {
    /// Its files in `LOGS/chat/`, `<stem>.<ext>`: the archive and its record. A run takes
    /// both and counts each as a chat file; a dry run counts the same.
    pub(super) const EXTS: [&'static str; 2] = ["md", "json"];
}

/// Where the scan puts what it finds.
pub(super) trait Sink {
    /// Does this sink count bytes (a dry run)? Then each message is `stat`ed.
    fn wants_sizes(&self) -> bool {
        false
    }
    fn task_message(&mut self, task: &TaskId, name: &str, bytes: u64) -> Result<()>;
    fn task_event(&mut self, task: &TaskId, line: &str) -> Result<()>;
    fn loose(&mut self, period: &str, name: &str, bytes: u64) -> Result<()>;
}

/// Read every task's `.status`; the finished ones older than the cutoff go.
pub(super) fn select(eng: &LocalEngine, cutoff: DateTime<Utc>) -> Result<Selection> {
    let mut sel = Selection::default();
    for id in eng.store.list_tasks()? {
        let rec =
            eng.store.read_record(&id, "status")?.and_then(|t| StatusRecord::parse(&id, &t).ok());
        match rec {
            Some(rec) if select::task_goes(&rec, cutoff) => {
                let period = select::task_period(&rec);
                sel.tasks.insert(id, Selected { period });
            }
            // A task that stays (a damaged record too: never touched).
            other => {
                if let Some(r) = other {
                    sel.staying_tickets.insert(r.message.clone());
                }
                sel.staying.insert(id.to_string());
            }
        }
    }
    Ok(sel)
}

/// The task a message belongs to and when it was written: its headers, else its file name.
fn facts_of(eng: &LocalEngine, b: &Mailbox, name: &str) -> (Option<String>, Option<DateTime<Utc>>) {
    let by_name = message::parse_file_name(name);
    let head = eng.store.read_message_capped(b, name, 64 * 1024).ok().and_then(|c| {
        let valid = match std::str::from_utf8(&c.bytes) {
            Ok(s) => s.len(),
            Err(e) => e.valid_up_to(),
        };
        message::parse_bytes(&c.bytes[..valid], Mode::Draft).ok()
    });
    let task = head
        .as_ref()
        .and_then(|m| m.task_id.clone())
        .or_else(|| by_name.as_ref().and_then(|f| f.task_id.clone()));
    let created = head.and_then(|m| m.created_at).or_else(|| by_name.map(|f| f.stamp.and_utc()));
    (task, created)
}

/// File the messages of finished tasks that still lie in agents' boxes (INBOX, WORKSPACE)
/// into LOGS, under each task's lock, with a `done` event by circe: the reference's
/// "WORKSPACE: archive on completion". Returns how many (would) move.
pub(super) fn file_messages(eng: &LocalEngine, sel: &Selection, dry_run: bool) -> Result<u64> {
    let mut moved = 0u64;
    let agents = eng.store.list_agents()?;
    // Every box is looked at before any is filed: one behind a link refuses the run before
    // it moves anything.
    let mut listed = Vec::new();
    for (agent, _) in agents {
        for b in [Mailbox::Inbox(agent.clone()), Mailbox::Workspace(agent)] {
            let names = eng.store.list_box(&b)?;
            listed.push((b, names));
        }
    }
    // No task goes: no message is read to learn its task.
    if sel.tasks.is_empty() {
        return Ok(0);
    }
    for (b, names) in listed {
        for name in names {
            let (task, _) = facts_of(eng, &b, &name);
            let Some(id) =
                task.and_then(|t| TaskId::new(t).ok()).filter(|t| sel.tasks.contains_key(t))
            else {
                continue;
            };
            if dry_run {
                moved += 1;
                continue;
            }
            let _lock = eng.store.lock_task(&id)?;
            // Copies of one message (a broadcast, an escalation to every coordinator) share a
            // name: the second is filed as `NAME.2.md`, as `done` files it.
            if let Some(used) = eng.store.file_message(&b, &Mailbox::Logs, &name)? {
                moved += 1;
                let mut e =
                    Event::now(EventKind::Done, CIRCE).task(&id).file(Mailbox::Logs.label(), used);
                e.note = Some(format!("filed from {} by the archive", b.label()));
                event_log::append(&eng.store, &mut [e])?;
            }
        }
    }
    Ok(moved)
}

/// What one pass over LOGS saw besides the messages it handed on.
#[derive(Default)]
pub(super) struct LogsSeen {
    /// The rotated segments of the event log lying there, oldest first.
    pub segments: Vec<event_log::Segment>,
    /// The earliest time a message that stays becomes old enough to go on its own (one of
    /// no task, kept only for its age).
    pub next_due: Option<DateTime<Utc>>,
}

/// Stream LOGS (one pass, whatever its size): each message goes with its task, goes loose,
/// or stays; the log segments are noted on the way.
pub(super) fn scan_messages(
    eng: &LocalEngine,
    sel: &Selection,
    cutoff: DateTime<Utc>,
    sink: &mut dyn Sink,
) -> Result<LogsSeen> {
    let dir = eng.store.box_dir(&Mailbox::Logs);
    let rd = std::fs::read_dir(&dir).map_err(io_err("cannot list", &dir))?;
    let goes = |t: &str| TaskId::new(t).is_ok_and(|id| sel.tasks.contains_key(&id));
    let stays = |t: &str| sel.staying.contains(t);
    let mut seen = LogsSeen::default();
    for entry in rd {
        let entry = entry.map_err(io_err("cannot list", &dir))?;
        let Some(name) = entry.file_name().to_str().map(str::to_string) else { continue };
        if let Some(s) = event_log::segment_named(&eng.store, &name) {
            seen.segments.push(s);
            continue;
        }
        if name.starts_with('.')
            || !is_message_name(&name)
            || !entry.file_type().is_ok_and(|t| t.is_file())
        {
            continue;
        }
        let bytes = if sink.wants_sizes() { entry.metadata().map_or(0, |m| m.len()) } else { 0 };
        // circe's file names carry the task id: one that names a task going now or a task
        // that stays decides without a read (the headers are checked when the file is
        // written into the segment: a message whose header says otherwise stays in LOGS).
        let by_name = message::parse_file_name(&name).and_then(|f| f.task_id);
        if let Some(t) = by_name.as_deref() {
            if let Ok(id) = TaskId::new(t)
                && sel.tasks.contains_key(&id)
                && !sel.staying_tickets.contains(&name)
            {
                sink.task_message(&id, &name, bytes)?;
                continue;
            }
            if stays(t) {
                continue;
            }
        }
        let (task, created_at) = facts_of(eng, &Mailbox::Logs, &name);
        let facts = MessageFacts {
            task: task.as_deref(),
            created_at,
            is_live_ticket: sel.staying_tickets.contains(&name),
        };
        match select::message_fate(&facts, cutoff, &goes, &stays) {
            Fate::WithTask(t) => sink.task_message(&TaskId::new(t)?, &name, bytes)?,
            Fate::Loose => sink.loose(
                &crate::archive::period_of(created_at.unwrap_or_default()),
                &name,
                bytes,
            )?,
            Fate::Stays => {
                let by_age = !facts.is_live_ticket && !task.as_deref().is_some_and(stays);
                if let Some(c) = created_at.filter(|_| by_age) {
                    seen.next_due = Some(seen.next_due.map_or(c, |n| n.min(c)));
                }
            }
        }
    }
    seen.segments.sort_by_key(|s| s.first);
    Ok(seen)
}

/// What the scan reads of an event line: its task (`task_id` in format 3, `task` before)
/// and its time.
#[derive(serde::Deserialize)]
struct Head {
    #[serde(default, rename = "task_id", alias = "task")]
    task: Option<String>,
    #[serde(default)]
    ts: Option<String>,
}

/// The rotated log segments that may go, and (when tasks go) every event of those tasks,
/// handed to the sink. Whether a segment may go is read backwards from its end, stopping at
/// the first line that keeps it (too young, or naming a task that stays): a run with nothing
/// to do reads a few lines per segment, not the whole log.
pub(super) fn scan_events(
    eng: &LocalEngine,
    sel: &Selection,
    cutoff: DateTime<Utc>,
    cursors_after: &[u64],
    segs: &[event_log::Segment],
    sink: &mut dyn Sink,
) -> Result<Vec<LogSeg>> {
    let mut out = Vec::new();
    for s in segs {
        let (newest, pinned, bytes) = if cursors_after.iter().all(|a| *a >= s.last) {
            read_back(&s.path, sel, cutoff)?
        } else {
            (None, false, 0) // a cursor needs it: not even read
        };
        let facts = LogFacts { first: s.first, last: s.last, newest, names_staying_task: pinned };
        if select::log_goes(&facts, cutoff, cursors_after) {
            let newest = newest.unwrap_or_default();
            out.push(LogSeg {
                name: s.path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string(),
                first: s.first,
                last: s.last,
                bytes,
                period: crate::archive::period_of(newest),
                newest: crate::clock::stamp(newest),
            });
        }
    }
    if sel.tasks.is_empty() {
        return Ok(out);
    }
    let files = segs.iter().map(|s| s.path.clone()).chain([event_log::current(&eng.store)]);
    for path in files {
        let (f, len) = match atomic::open_regular(&path) {
            Ok(x) => x,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::io("cannot read", &path, e)),
        };
        let mut read = 0u64;
        for line in BufReader::new(f).split(b'\n') {
            let line = line.map_err(io_err("cannot read", &path))?;
            read += line.len() as u64 + 1;
            if read > len {
                break; // a line still being written
            }
            let Ok(text) = std::str::from_utf8(&line) else { continue };
            let Ok(h) = serde_json::from_str::<Head>(text) else { continue };
            if let Some(id) =
                h.task.and_then(|t| TaskId::new(t).ok()).filter(|t| sel.tasks.contains_key(t))
            {
                sink.task_event(&id, text)?;
            }
        }
    }
    Ok(out)
}

/// Read a rotated segment from its end: (newest time, whether a line keeps it, its size).
/// Stops at the first line younger than the cutoff or naming a task that stays.
fn read_back(
    path: &std::path::Path,
    sel: &Selection,
    cutoff: DateTime<Utc>,
) -> Result<(Option<DateTime<Utc>>, bool, u64)> {
    use std::os::unix::fs::FileExt;
    const STEP: u64 = 64 * 1024;
    let (f, len) = match atomic::open_regular(path) {
        Ok(x) => x,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((None, true, 0)),
        Err(e) => return Err(Error::io("cannot read", path, e)),
    };
    let mut newest: Option<DateTime<Utc>> = None;
    let mut pos = len;
    let mut carry: Vec<u8> = Vec::new();
    while pos > 0 {
        let start = pos.saturating_sub(STEP);
        let mut buf = vec![0u8; usize::try_from(pos - start).unwrap_or(0)];
        f.read_exact_at(&mut buf, start).map_err(io_err("cannot read", path))?;
        buf.extend_from_slice(&carry);
        pos = start;
        let mut pieces: Vec<&[u8]> = buf.split(|b| *b == b'\n').collect();
        // The first piece may be cut by the chunk's start: keep it for the next read.
        let first = if pos > 0 { pieces.remove(0).to_vec() } else { Vec::new() };
        for line in pieces.into_iter().rev() {
            let Ok(h) = serde_json::from_slice::<Head>(line) else { continue };
            if let Some(ts) = h.ts.as_deref().and_then(crate::clock::parse) {
                if ts >= cutoff {
                    return Ok((Some(ts), false, len));
                }
                newest = Some(newest.map_or(ts, |n| n.max(ts)));
            }
            if h.task.is_some_and(|t| sel.staying.contains(&t)) {
                return Ok((newest, true, len));
            }
        }
        carry = first;
    }
    Ok((newest, false, len))
}

/// The oldest event time in the log's current file (to decide on rotation).
pub(super) fn oldest_current(eng: &LocalEngine) -> Result<Option<DateTime<Utc>>> {
    let path = event_log::current(&eng.store);
    let f = match atomic::open_regular(&path) {
        Ok((f, _)) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("cannot read", &path, e)),
    };
    for line in BufReader::new(f).lines().take(64) {
        let line = line.map_err(io_err("cannot read", &path))?;
        if let Ok(h) = serde_json::from_str::<Head>(&line)
            && let Some(t) = h.ts.as_deref().and_then(crate::clock::parse)
        {
            return Ok(Some(t));
        }
    }
    Ok(None)
}

/// Where each saved event cursor stands (`after`); a cursor that does not read counts as 0
/// (it keeps every segment: the safe side).
pub(super) fn event_cursors(eng: &LocalEngine) -> Result<Vec<u64>> {
    let mut out = Vec::new();
    // TEST BUILDS ONLY: `archive-ignore-cursors` shows the watcher's checker failing.
    if crate::fault::test_break("archive-ignore-cursors") {
        return Ok(out);
    }
    for (kind, name) in eng.store.list_cursors()? {
        if kind != "events" {
            continue;
        }
        let bytes = eng.store.read_cursor(&kind, &name)?.unwrap_or_default();
        let v: Option<serde_json::Value> = serde_json::from_slice(&bytes).ok();
        let after = v.as_ref().and_then(|v| {
            v.get("after").and_then(serde_json::Value::as_u64).or_else(|| v.as_u64())
        });
        out.push(after.unwrap_or(0));
    }
    Ok(out)
}

/// Archived chat files in `LOGS/chat/` whose archive is older than the cutoff and that no
/// chat watcher still reads.
pub(super) fn chat_items(
    eng: &LocalEngine,
    cutoff: DateTime<Utc>,
    needed: &[String],
) -> Result<Vec<ChatItem>> {
    let dir = eng.store.root.join("LOGS").join("chat");
    let mut out = Vec::new();
    for n in list_names(&dir)? {
        let Some(stem) = n.strip_suffix(".json") else { continue };
        if needed.iter().any(|x| x == stem) || !atomic::is_regular(&dir.join(format!("{stem}.md")))
        {
            continue;
        }
        let Ok(bytes) = atomic::read_regular(&dir.join(&n)) else { continue };
        let at = serde_json::from_slice::<serde_json::Value>(&bytes)
            .ok()
            .and_then(|v| v.get("archived_at").and_then(|a| a.as_str()).map(str::to_string));
        if let Some(at) = at
            && let Some(t) = crate::clock::parse(&at)
            && t < cutoff
        {
            let md = atomic::open_regular(&dir.join(format!("{stem}.md"))).map_or(0, |(_, l)| l);
            out.push(ChatItem {
                stem: stem.to_string(),
                period: crate::archive::period_of(t),
                archived_at: at,
                bytes: md + bytes.len() as u64,
            });
        }
    }
    Ok(out)
}

/// LOGS and TASKS as a run found them before it read anything, and the wall clock then.
pub(super) struct Stamps {
    logs: DirStamp,
    tasks: DirStamp,
    wall_ns: i128,
}

pub(super) fn stamps(eng: &LocalEngine) -> Result<Stamps> {
    Ok(Stamps {
        wall_ns: wall_ns(),
        logs: DirStamp::of(&eng.store.root.join("LOGS"))?,
        tasks: DirStamp::of(&eng.store.root.join("TASKS"))?,
    })
}

/// What a run that found nothing to do remembers (`locks/archive.scan`), so that the next
/// such run need not read LOGS again while neither LOGS nor TASKS changed: the segments
/// lying in LOGS and when its first message becomes old enough to go. A cache: a file that
/// is missing, stale or unreadable only costs one full pass.
#[derive(serde::Serialize, serde::Deserialize)]
struct ScanHint {
    v: u32,
    logs: DirStamp,
    tasks: DirStamp,
    next_due: Option<String>,
    segments: Vec<String>,
}

const HINT_VERSION: u32 = 1;

fn hint_path(eng: &LocalEngine) -> std::path::PathBuf {
    eng.store.root.join("locks").join("archive.scan")
}

/// What LOGS holds for a run that takes no task, from the hint, when the hint still holds:
/// LOGS and TASKS are as they were, and no message it left becomes due by `cutoff`.
pub(super) fn quiet_logs(
    eng: &LocalEngine,
    st: &Stamps,
    cutoff: DateTime<Utc>,
) -> Option<LogsSeen> {
    // TEST BUILDS ONLY: `archive-trust-hint` trusts a hint whatever changed since.
    let trust = crate::fault::test_break("archive-trust-hint");
    let bytes = atomic::read_regular(&hint_path(eng)).ok()?;
    let h: ScanHint = serde_json::from_slice(&bytes).ok()?;
    let next_due = match h.next_due.as_deref() {
        Some(t) => Some(crate::clock::parse(t)?),
        None => None,
    };
    let holds = h.v == HINT_VERSION
        && (trust || (h.logs == st.logs && h.tasks == st.tasks))
        && next_due.is_none_or(|t| t >= cutoff);
    if !holds {
        return None;
    }
    let mut segments: Vec<event_log::Segment> =
        h.segments.iter().filter_map(|n| event_log::segment_named(&eng.store, n)).collect();
    segments.sort_by_key(|s| s.first);
    Some(LogsSeen { segments, next_due })
}

/// Remember a full pass that found nothing to do, when both folders had been left alone
/// long enough before it and did not change during it. Best effort: a hint that cannot be
/// written is no hint.
pub(super) fn remember(eng: &LocalEngine, before: &Stamps, seen: &LogsSeen) {
    let Ok(after) = stamps(eng) else { return };
    if !before.logs.settled(before.wall_ns)
        || !before.tasks.settled(before.wall_ns)
        || after.logs != before.logs
        || after.tasks != before.tasks
    {
        let _ = atomic::remove(&hint_path(eng));
        return;
    }
    let h = ScanHint {
        v: HINT_VERSION,
        logs: before.logs,
        tasks: before.tasks,
        next_due: seen.next_due.map(crate::clock::stamp),
        segments: seen
            .segments
            .iter()
            .filter_map(|s| s.path.file_name()?.to_str().map(str::to_string))
            .collect(),
    };
    let text = serde_json::to_string(&h).unwrap_or_default() + "\n";
    let _ = eng.store.archive_replace(&hint_path(eng), text.as_bytes(), false);
}
