//! The board index: `queue/board.log`, so `circe tasks` reads one file instead of two per
//! task. Derived data, never the truth, and built so that it is never wrong either:
//!
//! - every change of a task's `.status` or `.checks` appends `P <task>` (pending) before the
//!   record write and `C <task> <row>` (or `D <task>` when the records went) after it, all
//!   while holding the `board` lock in shared mode;
//! - a reader takes the lock exclusively (so no write is half-way), uses the last line per
//!   task, and re-reads the record files of any task whose last line is `P` (a writer that
//!   crashed between the two lines);
//! - the header names the boot: the log is not fsynced, so after a reboot it is rebuilt from
//!   the records, as it is when missing (`doctor --repair` deletes it);
//! - it is compacted to one line per task when it grows past twice the tasks.

use std::borrow::Cow;
use std::collections::HashMap;

use super::LocalEngine;
use super::lock::Lock;
use crate::error::Result;
use crate::names::TaskId;
use crate::task::record::{self, Checks, StatusRecord};
use crate::task::{Row, Status, row_of};

const FILE: &str = "board.log";
const LOCK: &str = "board";

fn header() -> String {
    format!("# circe board v3 boot={}\n", super::boot_id())
}

/// `C <task> <status> <owner|-> <created_at> <lease|-> <intent> <to> <priority> <passed>
/// <total>`: one space-separated line (no field can hold a space: names and times are
/// allowlisted, a priority is one word).
fn committed(r: &Row) -> String {
    format!(
        "C {} {} {} {} {} {} {} {} {} {}\n",
        r.task,
        r.status.as_str(),
        r.owner.as_deref().unwrap_or("-"),
        r.created_at,
        r.lease_expires_at.as_deref().unwrap_or("-"),
        r.intent,
        r.to,
        r.priority,
        r.checks_passed,
        r.checks_total
    )
}

/// The row of a `C` line (after the `C `), or `None` when it is not one circe wrote.
fn parse_committed(line: &str) -> Option<Row<'_>> {
    let mut f = line.split(' ');
    let mut next = || f.next();
    let (task, status, owner, created, lease, intent, to, priority, passed, total) =
        (next()?, next()?, next()?, next()?, next()?, next()?, next()?, next()?, next()?, next()?);
    Some(Row {
        task: Cow::Borrowed(task),
        status: Status::parse(status)?,
        owner: (owner != "-").then_some(Cow::Borrowed(owner)),
        created_at: Cow::Borrowed(created),
        lease_expires_at: (lease != "-").then_some(Cow::Borrowed(lease)),
        intent: Cow::Borrowed(intent),
        to: Cow::Borrowed(to),
        priority: Cow::Borrowed(priority),
        checks_passed: passed.parse().ok()?,
        checks_total: total.parse().ok()?,
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
/// shared mode, one append of their `P` lines, then `remove` for each (it removes the records
/// and says whether it did), then one append of `D` lines for those removed. Like `write`, but
/// without syncing `TASKS/`: the archive syncs it once at the end of a run (its journal redoes
/// what a power cut undid). A task `remove` kept keeps its `P` line: readers re-read it.
pub(super) fn remove_batch(
    eng: &LocalEngine,
    tasks: &[TaskId],
    remove: &mut dyn FnMut(&TaskId) -> Result<bool>,
) -> Result<Vec<TaskId>> {
    let store = &eng.store;
    let _shared = store.lock_named_shared(LOCK)?;
    let pending: String = tasks.iter().map(|t| format!("P {t}\n")).collect();
    store.queue_append(FILE, &pending)?;
    let mut removed = Vec::new();
    for t in tasks {
        if remove(t)? {
            removed.push(t.clone());
        }
    }
    let gone: String = removed.iter().map(|t| format!("D {t}\n")).collect();
    let _ = store.queue_append(FILE, &gone);
    Ok(removed)
}

/// The board log as read under the exclusive `board` lock (held until dropped, so a
/// compaction cannot lose a line appended meanwhile).
pub(super) struct Snapshot {
    _lock: Lock,
    text: String,
}

/// Lock and read the board log, rebuilding it from the records when it is missing or was
/// written before the last reboot.
pub(super) fn snapshot(eng: &LocalEngine) -> Result<Snapshot> {
    let lock = eng.store.lock_named(LOCK)?;
    let mut text = eng.store.queue_value(FILE).unwrap_or_default();
    if !text.starts_with(header().as_str()) {
        let mut rows = Vec::new();
        for task in eng.store.list_tasks()? {
            rows.extend(read_row(eng, &task)?);
        }
        text = save(eng, &rows)?;
    }
    Ok(Snapshot { _lock: lock, text })
}

impl Snapshot {
    /// Every task on the board, sorted by task id.
    ///
    /// A compacted log starts with `# base <n>` and n `C` lines, one per task in task order;
    /// lines appended since (the tail) override them. Only the tail is hashed, so reading
    /// a mostly compacted board costs one pass and no sort.
    pub(super) fn rows(&self, eng: &LocalEngine) -> Result<Vec<Row<'_>>> {
        let mut body = &self.text[header().len()..];
        let mut base_len = 0usize;
        if let Some((n, rest)) = body.strip_prefix("# base ").and_then(|r| r.split_once('\n')) {
            base_len = n.parse().unwrap_or(0);
            body = rest;
        }
        let mut lines = body.lines();
        let base: Vec<&str> = lines.by_ref().take(base_len).collect();
        // The last tail line per task decides: `Some((committed, rest))`, or `None` if deleted.
        let mut tail: HashMap<&str, Option<(bool, &str)>> = HashMap::new();
        let mut count = base.len();
        for line in lines {
            count += 1;
            let (Some(kind), Some(rest)) = (line.get(..2), line.get(2..)) else { continue };
            let task = rest.split(' ').next().unwrap_or("");
            match kind {
                "C " | "P " => {
                    tail.insert(task, Some((kind == "C ", rest)));
                }
                "D " => {
                    tail.insert(task, None);
                }
                _ => {}
            }
        }
        let mut out = Vec::with_capacity(base.len() + tail.len());
        for line in base {
            let rest = line.get(2..).unwrap_or("");
            let task = rest.split(' ').next().unwrap_or("");
            match tail.remove(task) {
                None => push_row(eng, task, line.starts_with("C "), rest, &mut out)?,
                Some(Some((committed, newer))) => push_row(eng, task, committed, newer, &mut out)?,
                Some(None) => {}
            }
        }
        let mut added: Vec<(&str, (bool, &str))> =
            tail.into_iter().filter_map(|(t, e)| e.map(|e| (t, e))).collect();
        if !added.is_empty() {
            added.sort_unstable_by_key(|(t, _)| *t);
            for (task, (committed, rest)) in added {
                push_row(eng, task, committed, rest, &mut out)?;
            }
            out.sort_by(|a, b| a.task.cmp(&b.task));
        }
        if count > 2 * out.len() + 64 {
            save(eng, &out)?;
        }
        Ok(out)
    }
}

/// The row of a task's last line: parsed from a `C` line, else (pending or unreadable) read
/// from its records.
fn push_row<'a>(
    eng: &LocalEngine,
    task: &str,
    committed: bool,
    rest: &'a str,
    out: &mut Vec<Row<'a>>,
) -> Result<()> {
    match committed.then(|| parse_committed(rest)).flatten() {
        Some(r) => out.push(r),
        None => {
            if let Ok(t) = TaskId::new(task) {
                out.extend(read_row(eng, &t)?);
            }
        }
    }
    Ok(())
}

/// A task's row straight from its records (`None` when it has none).
fn read_row(eng: &LocalEngine, task: &TaskId) -> Result<Option<Row<'static>>> {
    let Some(text) = eng.store.read_record(task, "status")? else { return Ok(None) };
    let Ok(rec) = StatusRecord::parse(task, &text) else { return Ok(None) };
    let checks = eng
        .store
        .read_record(task, "checks")?
        .and_then(|t| record::parse_checks(task, &t).ok())
        .unwrap_or_default();
    Ok(Some(row_of(&rec, &checks)))
}

/// Replace the log with one `C` line per row; returns the new text.
fn save(eng: &LocalEngine, rows: &[Row<'_>]) -> Result<String> {
    let mut text = header();
    text.push_str(&format!("# base {}\n", rows.len()));
    for r in rows {
        text.push_str(&committed(r));
    }
    eng.store.set_queue_value(FILE, &text)?;
    Ok(text)
}

#[cfg(test)]
#[path = "board_tests.rs"]
mod tests;
