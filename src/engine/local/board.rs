//! The board index: `queue/board.log`, so `circe tasks` reads one file instead of two per
//! task, and hands its rows on one at a time (memory stays flat however many tasks there
//! are). Derived data, never the truth, and built so that it is never wrong either:
//!
//! - every change of a task's `.status` or `.checks` appends `P <task>` (pending) before the
//!   record write and `C <task> <row>` (or `D <task>` when the records went) after it, all
//!   while holding the `board` lock in shared mode;
//! - a reader takes the lock exclusively (so no write is half-way), notes the log's length
//!   and scans its tail, then lets the lock go and reads on from its own open file; it uses
//!   the last line per task, and re-reads the record files of any task whose last line is
//!   `P` (a writer that crashed between the two lines);
//! - the header names the boot: the log is not fsynced, so after a reboot it is rebuilt from
//!   the records, as it is when missing (`doctor --repair` deletes it);
//! - it is compacted (one `C` line per task, in task order: the base) when its tail grows
//!   past the base; the base's line count and byte length are in its second line, so a
//!   reader finds the tail without reading the base;
//! - a task whose `.status` does not parse, or was removed by hand (its `.owner` left, or
//!   its `.checks` with its message in a live box), keeps a `P` line (in the base too):
//!   every reader reads its records again, and passes it over saying so
//!   (`LocalEngine::passed_over`), so a damaged record never drops a task from the board
//!   without a word.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::FileExt;

use super::LocalEngine;
use crate::engine::PassedOver;
use crate::error::{Error, Result};
use crate::names::TaskId;
use crate::task::record::{self, Checks, StatusRecord};
use crate::task::{Row, Status, row_of};

const FILE: &str = "board.log";
pub(super) const LOCK: &str = "board";
/// A line circe writes is far shorter (names are at most 64 bytes).
const LINE_MAX: usize = 2048;

fn header() -> String {
    format!("# circe board v6 boot={}\n", super::boot_id())
}

/// `C <task> <status> <owner|-> <created_at> <updated_at> <lease|-> <intent> <to> <priority>
/// <passed> <total> <asserted> <deadline|-> <checks|->` (the checks: the names `.checks`
/// lists, comma separated): one space-separated line (no field can hold a
/// space: names and times are allowlisted, a priority is one word).
fn committed(r: &Row) -> String {
    format!(
        "C {} {} {} {} {} {} {} {} {} {} {} {} {} {}\n",
        r.task,
        r.status.as_str(),
        r.owner.as_deref().unwrap_or("-"),
        r.created_at,
        r.updated_at,
        r.lease_expires_at.as_deref().unwrap_or("-"),
        r.intent,
        r.to,
        r.priority,
        r.checks_passed,
        r.checks_total,
        r.checks_asserted,
        r.deadline.as_deref().unwrap_or("-"),
        if r.checks_listed.is_empty() { "-" } else { &r.checks_listed }
    )
}

/// The row of a `C` line (after the `C `), or `None` when it is not one circe wrote.
fn parse_committed(line: &str) -> Option<Row<'_>> {
    let mut f = line.trim_end_matches('\n').split(' ');
    let mut next = || f.next();
    let (task, status, owner, created, updated, lease, intent, to, priority) =
        (next()?, next()?, next()?, next()?, next()?, next()?, next()?, next()?, next()?);
    let (passed, total, asserted, deadline, listed) = (next()?, next()?, next()?, next()?, next()?);
    // A field more is no line circe wrote (a value with a space): read the records instead.
    if next().is_some() {
        return None;
    }
    Some(Row {
        task: Cow::Borrowed(task),
        status: Status::parse(status)?,
        owner: (owner != "-").then_some(Cow::Borrowed(owner)),
        created_at: Cow::Borrowed(created),
        updated_at: Cow::Borrowed(updated),
        lease_expires_at: (lease != "-").then_some(Cow::Borrowed(lease)),
        intent: Cow::Borrowed(intent),
        to: Cow::Borrowed(to),
        priority: Cow::Borrowed(priority),
        checks_passed: passed.parse().ok()?,
        checks_total: total.parse().ok()?,
        checks_asserted: asserted.parse().ok()?,
        deadline: (deadline != "-").then_some(Cow::Borrowed(deadline)),
        checks_listed: Cow::Borrowed(if listed == "-" { "" } else { listed }),
    })
}

/// Write a task's records (as `Store::write_records`) and keep the board in step.
/// `after` is the task's state once written; `None` when the records are removed.
pub(super) fn write(
    eng: &LocalEngine,
    task: &TaskId,
    records: &[(&str, Option<&str>)],
    after: Option<(&StatusRecord, &Checks)>,
) -> Result<()> {
    let store = &eng.store;
    let _shared = store.lock_named_shared(LOCK)?;
    store.queue_append(FILE, &format!("P {task}\n"))?;
    store.write_records(task, records)?;
    // The records are committed; a lost C line leaves the P line, which readers verify.
    let line = after
        .map_or_else(|| format!("D {task}\n"), |(rec, checks)| committed(&row_of(rec, checks)));
    let _ = store.queue_append(FILE, &line);
    Ok(())
}

/// Remove tasks' records and rows (the archive), many at a time: under the board lock in
/// shared mode, one append of their `P` lines, then `remove` for all of them (it removes the
/// records and says which tasks it removed), then one append of `D` lines for those
/// removed. Like `write`, but without syncing `TASKS/`: the archive syncs it once at the end
/// of a run (its journal redoes what a power cut undid). A task `remove` kept keeps its `P`
/// line: readers re-read it.
pub(super) fn remove_batch(
    eng: &LocalEngine,
    tasks: &[TaskId],
    remove: &mut dyn FnMut(&[TaskId]) -> Result<Vec<TaskId>>,
) -> Result<Vec<TaskId>> {
    let store = &eng.store;
    let _shared = store.lock_named_shared(LOCK)?;
    let pending: String = tasks.iter().map(|t| format!("P {t}\n")).collect();
    store.queue_append(FILE, &pending)?;
    let removed = remove(tasks)?;
    let gone: String = removed.iter().map(|t| format!("D {t}\n")).collect();
    let _ = store.queue_append(FILE, &gone);
    Ok(removed)
}

/// A byte range of the open log, read with positioned reads (no shared file offset).
struct Range<'f> {
    file: &'f File,
    pos: u64,
    end: u64,
}

impl Read for Range<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let left = usize::try_from(self.end.saturating_sub(self.pos)).unwrap_or(usize::MAX);
        let want = buf.len().min(left);
        if want == 0 {
            return Ok(0);
        }
        let n = self.file.read_at(&mut buf[..want], self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

/// The log as one reader sees it: its file, its length when the reader looked, where the
/// base is, and the last tail line of every task in the tail (by offset: no text is kept).
struct View {
    file: File,
    base: (u64, u64),
    base_lines: usize,
    tail: HashMap<String, u64>,
    tail_lines: usize,
}

/// The second word of a `P`/`C`/`D` line: its task.
fn task_of(line: &str) -> Option<&str> {
    let rest = line.get(2..)?;
    Some(rest.split([' ', '\n']).next().unwrap_or(""))
}

fn io(what: &str, e: std::io::Error) -> Error {
    Error::io(what, "queue/board.log", e)
}

/// Read every whole line of `range`, handing each with its offset.
fn lines(range: Range<'_>, each: &mut dyn FnMut(u64, &str) -> Result<()>) -> Result<()> {
    let mut at = range.pos;
    let mut r = BufReader::with_capacity(64 * 1024, range);
    let mut buf = Vec::with_capacity(256);
    loop {
        buf.clear();
        let n = r.read_until(b'\n', &mut buf).map_err(|e| io("cannot read", e))?;
        // The end, or a last line without its newline (still being appended): stop.
        if n == 0 || buf.last() != Some(&b'\n') {
            return Ok(());
        }
        if let Ok(line) = std::str::from_utf8(&buf) {
            each(at, line)?;
        }
        at += n as u64;
    }
}

impl View {
    /// Open the log and scan its tail; `None` when it is missing or from another boot.
    fn open(eng: &LocalEngine) -> Result<Option<View>> {
        let Some((file, len)) = eng.store.queue_open(FILE)? else { return Ok(None) };
        let head = header();
        let mut first = vec![0u8; head.len() + 64];
        let n = file.read_at(&mut first, 0).map_err(|e| io("cannot read", e))?;
        first.truncate(n);
        if !first.starts_with(head.as_bytes()) {
            return Ok(None);
        }
        let mut base = (head.len() as u64, head.len() as u64);
        let mut base_lines = 0;
        let after = String::from_utf8_lossy(&first[head.len()..]).into_owned();
        if let Some((line, _)) = after.strip_prefix("# base ").and_then(|r| r.split_once('\n')) {
            let mut w = line.split(' ').map(|x| x.parse::<u64>().ok());
            let (Some(Some(count)), Some(Some(bytes))) = (w.next(), w.next()) else {
                return Ok(None);
            };
            let start = head.len() as u64 + "# base ".len() as u64 + line.len() as u64 + 1;
            base = (start, start + bytes);
            base_lines = usize::try_from(count).unwrap_or(0);
        }
        if base.1 > len {
            return Ok(None);
        }
        let mut tail: HashMap<String, u64> = HashMap::new();
        let mut tail_lines = 0;
        lines(Range { file: &file, pos: base.1, end: len }, &mut |at, line| {
            tail_lines += 1;
            if let Some(task) = task_of(line) {
                match tail.get_mut(task) {
                    Some(o) => *o = at,
                    None => {
                        tail.insert(task.to_string(), at);
                    }
                }
            }
            Ok(())
        })?;
        Ok(Some(View { file, base, base_lines, tail, tail_lines }))
    }

    /// Every row, in task order: the base merged with the tail's last word per task.
    fn rows(&self, eng: &LocalEngine, each: &mut Each<'_>) -> Result<()> {
        let mut keys: Vec<(&str, u64)> = self.tail.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        keys.sort_unstable();
        let mut next = 0;
        let mut line_buf = Vec::with_capacity(LINE_MAX);
        let mut from_tail = |at: u64, each: &mut Each<'_>| -> Result<()> {
            // Most lines fit in `LINE_MAX`; a task with many long check names makes a longer
            // one, read on until its end (cut short, it said nothing, and the task was
            // left out of every listing).
            line_buf.clear();
            let mut chunk = [0u8; LINE_MAX];
            let end = loop {
                let from = at + line_buf.len() as u64;
                let n = self.file.read_at(&mut chunk, from).map_err(|e| io("cannot read", e))?;
                let got = &chunk[..n];
                if let Some(i) = got.iter().position(|b| *b == b'\n') {
                    line_buf.extend_from_slice(&got[..=i]);
                    break true;
                }
                line_buf.extend_from_slice(got);
                if n == 0 {
                    break false;
                }
            };
            let line = if end { std::str::from_utf8(&line_buf).unwrap_or("") } else { "" };
            emit(eng, line, each)
        };
        let base = Range { file: &self.file, pos: self.base.0, end: self.base.1 };
        lines(base, &mut |_, line| {
            let task = task_of(line).unwrap_or("");
            while let Some(&(_, at)) = keys.get(next).filter(|(t, _)| *t < task) {
                from_tail(at, each)?;
                next += 1;
            }
            if let Some(&(_, at)) = keys.get(next).filter(|(t, _)| *t == task) {
                next += 1;
                return from_tail(at, each);
            }
            emit(eng, line, each)
        })?;
        for &(_, at) in &keys[next..] {
            from_tail(at, each)?;
        }
        Ok(())
    }
}

/// What the board holds for a task: its row, or a task whose records are damaged.
#[expect(
    clippy::large_enum_variant,
    reason = "handed on one at a time, never stored: boxing a row would allocate per task"
)]
enum Entry<'a> {
    Row(Row<'a>),
    Damaged(PassedOver),
}

type Each<'a> = dyn FnMut(Entry<'_>) -> Result<()> + 'a;

/// Hand on what a line says: a `C` line's row, a `P` line's (or an unreadable line's)
/// from the records, nothing for `D`.
fn emit(eng: &LocalEngine, line: &str, each: &mut Each<'_>) -> Result<()> {
    if line.starts_with("D ") {
        return Ok(());
    }
    if let Some(r) = line.strip_prefix("C ").and_then(parse_committed) {
        return each(Entry::Row(r));
    }
    match task_of(line).map(TaskId::new) {
        Some(Ok(t)) => match read_row(eng, &t)? {
            Some(e) => each(e),
            None => Ok(()),
        },
        _ => Ok(()),
    }
}

/// Hand every task's row to `each`, in task id order; a task whose records are damaged
/// (`read_row`) is passed over and named in `passed_over`. The `board` lock is held only while
/// the log is looked at (and rebuilt or compacted); rows are read from the reader's own
/// open file afterwards, so a slow consumer holds up no writer.
pub(super) fn rows(
    eng: &LocalEngine,
    passed_over: &mut Vec<PassedOver>,
    each: &mut dyn FnMut(Row<'_>) -> Result<()>,
) -> Result<()> {
    let mut hand_on = |e: Entry<'_>| match e {
        Entry::Row(r) => each(r),
        Entry::Damaged(t) => {
            passed_over.push(t);
            Ok(())
        }
    };
    // A root this user may not write (or a read-only mount) is read as it is: a log to
    // compact is read uncompacted, and one to rebuild is read from the records.
    let view = {
        let lock = eng.store.lock_named(LOCK)?;
        match View::open(eng)? {
            Some(v) if v.tail_lines <= v.base_lines + 64 => v,
            Some(v) => match compact(eng, &mut |out| v.rows(eng, out)) {
                Err(e) if e.is_not_writable() => v,
                r => {
                    r?;
                    View::open(eng)?.ok_or_else(|| Error::internal("the board log vanished"))?
                }
            },
            None => match rebuild(eng) {
                Err(e) if e.is_not_writable() => {
                    drop(lock);
                    return from_records(eng, &mut hand_on);
                }
                r => {
                    r?;
                    View::open(eng)?.ok_or_else(|| Error::internal("the board log vanished"))?
                }
            },
        }
    };
    view.rows(eng, &mut hand_on)
}

type Source<'a> = dyn FnMut(&mut Each<'_>) -> Result<()> + 'a;

/// Replace the log with a header and a base of one line per entry `source` hands on: a
/// row's `C` line, a damaged task's `P` line.
fn compact(eng: &LocalEngine, source: &mut Source<'_>) -> Result<()> {
    eng.store.queue_replace(FILE, &mut |f| {
        let head = header();
        // The base line is patched in place once the count and length are known.
        let placeholder = format!("# base {:020} {:020}\n", 0, 0);
        let mut w = std::io::BufWriter::with_capacity(64 * 1024, &*f);
        w.write_all(head.as_bytes()).map_err(|e| io("cannot write", e))?;
        w.write_all(placeholder.as_bytes()).map_err(|e| io("cannot write", e))?;
        let (mut count, mut bytes) = (0u64, 0u64);
        source(&mut |e| {
            let line = match e {
                Entry::Row(r) => committed(&r),
                Entry::Damaged(d) => format!("P {}\n", d.task),
            };
            count += 1;
            bytes += line.len() as u64;
            w.write_all(line.as_bytes()).map_err(|e| io("cannot write", e))
        })?;
        w.flush().map_err(|e| io("cannot write", e))?;
        drop(w);
        let base = format!("# base {count:020} {bytes:020}\n");
        f.write_all_at(base.as_bytes(), head.len() as u64).map_err(|e| io("cannot write", e))
    })
}

/// The tasks whose row in the log is not what their records say (a record edited by hand:
/// `tasks` and `board` would show it as it was). Read under the board lock, records last.
pub(super) fn stale_rows(eng: &LocalEngine) -> Result<Vec<String>> {
    let _lock = eng.store.lock_named_shared(LOCK)?;
    let Some(view) = View::open(eng)? else { return Ok(Vec::new()) };
    let mut shown = std::collections::HashMap::new();
    view.rows(eng, &mut |e| {
        if let Entry::Row(r) = e {
            shown.insert(r.task.to_string(), committed(&r));
        }
        Ok(())
    })?;
    let mut out = Vec::new();
    // A record that cannot be read is doctor's to report elsewhere: passed over here.
    let listed = eng.store.list_tasks()?;
    for t in &listed {
        if let Ok(Some(Entry::Row(r))) = read_row(eng, t)
            && shown.get(r.task.as_ref()).is_some_and(|s| *s != committed(&r))
        {
            out.push(r.task.to_string());
        }
    }
    // A row shown for a task with no `.status` left (removed by hand; an archive writes
    // `D`).
    let listed: std::collections::HashSet<&str> = listed.iter().map(TaskId::as_str).collect();
    let mut gone: Vec<String> =
        shown.into_keys().filter(|t| !listed.contains(t.as_str())).collect();
    gone.sort();
    out.extend(gone);
    Ok(out)
}

/// Build the log again from the records, under its lock (`doctor --repair`).
pub(super) fn rebuild_locked(eng: &LocalEngine) -> Result<()> {
    let _lock = eng.store.lock_named(LOCK)?;
    rebuild(eng)
}

/// Build the log from the records (missing, or written before the last reboot).
fn rebuild(eng: &LocalEngine) -> Result<()> {
    compact(eng, &mut |out| from_records(eng, out))
}

/// Every task's row from its records, in task order, with a task whose `.status` was
/// removed by hand passed over.
fn from_records(eng: &LocalEngine, out: &mut Each<'_>) -> Result<()> {
    let mut tasks = eng.store.list_tasks()?;
    tasks.extend(eng.store.without_status("owner")?);
    tasks.extend(eng.store.without_status("checks")?);
    tasks.sort();
    tasks.dedup();
    for t in &tasks {
        if let Some(e) = read_row(eng, t)? {
            out(e)?;
        }
    }
    Ok(())
}

/// A task's row straight from its records (`None` when it has none, or only what an older
/// circe's cut-off send left: `Store::without_status`). A `.status` that does not parse (or
/// is not UTF-8), or one removed by hand, is damaged: its task is passed over, and its line
/// in the log says to read the records again next time (doctor names the record).
fn read_row(eng: &LocalEngine, task: &TaskId) -> Result<Option<Entry<'static>>> {
    let damaged =
        |problem: String| Ok(Some(Entry::Damaged(PassedOver { task: task.clone(), problem })));
    let unparsed = || format!("TASKS/{task}.status does not parse");
    let text = match eng.store.read_record_text(task, "status")? {
        Some(Ok(text)) => text,
        Some(Err(_)) => return damaged(unparsed()),
        None => {
            return match super::reconcile::left_without_status(eng, task) {
                Some(kind) => damaged(format!(
                    "TASKS/{task}.status is missing while TASKS/{task}.{kind} is there"
                )),
                None => Ok(None),
            };
        }
    };
    let Ok(rec) = StatusRecord::parse(task, &text) else {
        return damaged(unparsed());
    };
    let checks = eng
        .store
        .read_record(task, "checks")?
        .and_then(|t| record::parse_checks(task, &t).ok())
        .unwrap_or_default();
    Ok(Some(Entry::Row(row_of(&rec, &checks))))
}

#[cfg(test)]
#[path = "board_tests.rs"]
mod tests;
