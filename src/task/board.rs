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

use serde::Serialize;

use super::lifecycle::Status;
use super::record::{self, Checks, StatusRecord};
use crate::error::Result;
use crate::store;
use crate::workspace::Workspace;

const FILE: &str = "board.log";
const LOCK: &str = "board";

/// One task on the board; borrows from the log text where it can.
#[derive(Debug, Clone, Serialize)]
pub struct Row<'a> {
    pub task: Cow<'a, str>,
    pub status: Status,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<Cow<'a, str>>,
    pub created_at: Cow<'a, str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_expires_at: Option<Cow<'a, str>>,
    pub intent: Cow<'a, str>,
    pub to: Cow<'a, str>,
    pub checks_passed: usize,
    pub checks_total: usize,
}

pub fn row_of(rec: &StatusRecord, checks: &Checks) -> Row<'static> {
    Row {
        task: Cow::Owned(rec.task_id.clone()),
        status: rec.status,
        owner: rec.owner.clone().map(Cow::Owned),
        created_at: Cow::Owned(rec.created_at.clone()),
        lease_expires_at: rec.lease_expires_at.clone().map(Cow::Owned),
        intent: Cow::Owned(rec.intent.clone()),
        to: Cow::Owned(rec.to.clone()),
        checks_passed: checks.values().filter(|v| **v).count(),
        checks_total: checks.len(),
    }
}

fn header() -> String {
    format!("# circe board v2 boot={}\n", store::boot_id())
}

/// `C <task> <status> <owner|-> <created_at> <lease|-> <intent> <to> <passed> <total>`: one
/// space-separated line (no field can hold a space: names and times are allowlisted).
fn committed(r: &Row) -> String {
    format!(
        "C {} {} {} {} {} {} {} {} {}\n",
        r.task,
        r.status.as_str(),
        r.owner.as_deref().unwrap_or("-"),
        r.created_at,
        r.lease_expires_at.as_deref().unwrap_or("-"),
        r.intent,
        r.to,
        r.checks_passed,
        r.checks_total
    )
}

/// The row of a `C` line (after the `C `), or `None` when it is not one circe wrote.
fn parse_committed(line: &str) -> Option<Row<'_>> {
    let mut f = line.split(' ');
    let mut next = || f.next();
    let (task, status, owner, created, lease, intent, to, passed, total) =
        (next()?, next()?, next()?, next()?, next()?, next()?, next()?, next()?, next()?);
    Some(Row {
        task: Cow::Borrowed(task),
        status: Status::parse(status)?,
        owner: (owner != "-").then_some(Cow::Borrowed(owner)),
        created_at: Cow::Borrowed(created),
        lease_expires_at: (lease != "-").then_some(Cow::Borrowed(lease)),
        intent: Cow::Borrowed(intent),
        to: Cow::Borrowed(to),
        checks_passed: passed.parse().ok()?,
        checks_total: total.parse().ok()?,
    })
}

/// Write a task's records (as `Store::write_records`) and keep the board in step.
/// `after` is the task's state once written; `None` when the records are removed.
pub fn write(
    ws: &Workspace,
    task: &str,
    records: &[(&str, Option<&str>)],
    after: Option<(&StatusRecord, &Checks)>,
) -> Result<()> {
    let _shared = ws.store.lock_named_shared(LOCK)?;
    ws.store.queue_append(FILE, &format!("P {task}\n"))?;
    ws.store.write_records(task, records)?;
    // The records are committed; a lost C line leaves the P line, which readers verify.
    let line = after
        .map_or_else(|| format!("D {task}\n"), |(rec, checks)| committed(&row_of(rec, checks)));
    let _ = ws.store.queue_append(FILE, &line);
    Ok(())
}

/// The board log as read under the exclusive `board` lock (held until dropped, so a
/// compaction cannot lose a line appended meanwhile).
pub struct Snapshot {
    _lock: store::Lock,
    text: String,
}

/// Lock and read the board log, rebuilding it from the records when it is missing or was
/// written before the last reboot.
pub fn snapshot(ws: &Workspace) -> Result<Snapshot> {
    let lock = ws.store.lock_named(LOCK)?;
    let mut text = ws.store.queue_value(FILE).unwrap_or_default();
    if !text.starts_with(header().as_str()) {
        let mut rows = Vec::new();
        for task in ws.store.list_tasks()? {
            rows.extend(read_row(ws, &task)?);
        }
        text = save(ws, &rows)?;
    }
    Ok(Snapshot { _lock: lock, text })
}

impl Snapshot {
    /// Every task on the board, sorted by task id.
    ///
    /// A compacted log starts with `# base <n>` and n `C` lines, one per task in task order;
    /// lines appended since (the tail) override them. Only the tail is hashed, so reading
    /// a mostly compacted board costs one pass and no sort.
    pub fn rows(&self, ws: &Workspace) -> Result<Vec<Row<'_>>> {
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
                None => push_row(ws, task, line.starts_with("C "), rest, &mut out)?,
                Some(Some((committed, newer))) => push_row(ws, task, committed, newer, &mut out)?,
                Some(None) => {}
            }
        }
        let mut added: Vec<(&str, (bool, &str))> =
            tail.into_iter().filter_map(|(t, e)| e.map(|e| (t, e))).collect();
        if !added.is_empty() {
            added.sort_unstable_by_key(|(t, _)| *t);
            for (task, (committed, rest)) in added {
                push_row(ws, task, committed, rest, &mut out)?;
            }
            out.sort_by(|a, b| a.task.cmp(&b.task));
        }
        if count > 2 * out.len() + 64 {
            save(ws, &out)?;
        }
        Ok(out)
    }
}

/// The row of a task's last line: parsed from a `C` line, else (pending or unreadable) read
/// from its records.
fn push_row<'a>(
    ws: &Workspace,
    task: &str,
    committed: bool,
    rest: &'a str,
    out: &mut Vec<Row<'a>>,
) -> Result<()> {
    match committed.then(|| parse_committed(rest)).flatten() {
        Some(r) => out.push(r),
        None => out.extend(read_row(ws, task)?),
    }
    Ok(())
}

/// A task's row straight from its records (`None` when it has none).
fn read_row(ws: &Workspace, task: &str) -> Result<Option<Row<'static>>> {
    let Some(text) = ws.store.read_record(task, "status")? else { return Ok(None) };
    let Ok(rec) = StatusRecord::parse(task, &text) else { return Ok(None) };
    let checks = ws
        .store
        .read_record(task, "checks")?
        .and_then(|t| record::parse_checks(task, &t).ok())
        .unwrap_or_default();
    Ok(Some(row_of(&rec, &checks)))
}

/// Replace the log with one `C` line per row; returns the new text.
fn save(ws: &Workspace, rows: &[Row<'_>]) -> Result<String> {
    let mut text = header();
    text.push_str(&format!("# base {}\n", rows.len()));
    for r in rows {
        text.push_str(&committed(r));
    }
    ws.store.set_queue_value(FILE, &text)?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{Format, Message};

    fn root() -> (tempfile::TempDir, Workspace) {
        let dir = tempfile::tempdir().unwrap();
        let (store, _) = store::Store::init(dir.path(), crate::config::DEFAULT_CONFIG).unwrap();
        for role in ["coordinator", "engineer"] {
            store.create_agent(role, &format!("role: {role}\n")).unwrap();
        }
        let ws = Workspace::open(Some(dir.path())).unwrap();
        (dir, ws)
    }

    fn open(ws: &Workspace, task: &str) {
        let mut m = Message::new(Format::Circe);
        m.to = Some("all".into());
        m.intent = Some("implement_feature".into());
        m.task_id = Some(task.into());
        crate::boxes::send(ws, "coordinator", m).unwrap();
    }

    /// The board as the records say it is.
    fn truth(ws: &Workspace) -> Vec<(String, Status, Option<String>, usize)> {
        ws.store
            .list_tasks()
            .unwrap()
            .into_iter()
            .filter_map(|t| read_row(ws, &t).unwrap())
            .map(|r| (r.task.into_owned(), r.status, r.owner.map(Cow::into_owned), r.checks_passed))
            .collect()
    }

    fn board(ws: &Workspace) -> Vec<(String, Status, Option<String>, usize)> {
        let snap = snapshot(ws).unwrap();
        snap.rows(ws)
            .unwrap()
            .into_iter()
            .map(|r| (r.task.into_owned(), r.status, r.owner.map(Cow::into_owned), r.checks_passed))
            .collect()
    }

    #[test]
    fn follows_every_change() {
        let (_d, ws) = root();
        for t in ["A-1", "A-2", "A-3"] {
            open(&ws, t);
        }
        assert_eq!(board(&ws), truth(&ws));
        super::super::claim(&ws, "engineer", "engineer", "A-2", None).unwrap();
        super::super::set_status(&ws, "engineer", "A-2", Status::InProgress, None, None).unwrap();
        super::super::check_set(&ws, "engineer", "A-2", "tests_passed", true, None).unwrap();
        super::super::release(&ws, "engineer", "A-2", None, false, None).unwrap();
        super::super::claim(&ws, "engineer", "engineer", "A-3", None).unwrap();
        let b = board(&ws);
        assert_eq!(b, truth(&ws));
        assert_eq!(b[1], ("A-2".into(), Status::New, None, 1));
        assert_eq!(b[2].1, Status::Claimed);
    }

    /// A writer that died between its record write and its C line leaves a P line; the
    /// reader must believe the records, not the older C line.
    #[test]
    fn a_crash_between_record_and_board_is_read_from_the_records() {
        let (_d, ws) = root();
        open(&ws, "B-1");
        assert_eq!(board(&ws)[0].1, Status::New);
        // What a claim that crashed after its record write leaves behind.
        let mut rec =
            StatusRecord::parse("B-1", &ws.store.read_record("B-1", "status").unwrap().unwrap())
                .unwrap();
        rec.status = Status::Claimed;
        rec.owner = Some("engineer".into());
        ws.store.queue_append(FILE, "P B-1\n").unwrap();
        ws.store.write_records("B-1", &[("status", Some(&rec.render()))]).unwrap();
        assert_eq!(board(&ws), truth(&ws));
        assert_eq!(board(&ws)[0].1, Status::Claimed);
        // Without the P line the stale C line would be believed: the check can fail.
        let text = ws.store.queue_value(FILE).unwrap().replace("P B-1\n", "");
        ws.store.set_queue_value(FILE, &text).unwrap();
        assert_ne!(board(&ws), truth(&ws));
    }

    /// After compaction the base is read in order and later lines override it: a task
    /// changed, one deleted and one added after compaction all show correctly.
    #[test]
    fn base_and_tail() {
        let (_d, ws) = root();
        for t in ["E-1", "E-2", "E-3"] {
            open(&ws, t);
        }
        // Compact now (as a reboot would): the log becomes a sorted base.
        let text = ws.store.queue_value(FILE).unwrap().replace(&store::boot_id(), "old-boot");
        ws.store.set_queue_value(FILE, &text).unwrap();
        assert_eq!(board(&ws), truth(&ws));
        assert!(ws.store.queue_value(FILE).unwrap().contains("# base 3\n"));
        super::super::claim(&ws, "engineer", "engineer", "E-2", None).unwrap();
        open(&ws, "E-0");
        write(&ws, "E-3", &[("status", None), ("checks", None)], None).unwrap();
        let b = board(&ws);
        assert_eq!(b, truth(&ws));
        let ids: Vec<&str> = b.iter().map(|r| r.0.as_str()).collect();
        assert_eq!(ids, ["E-0", "E-1", "E-2"]);
        assert_eq!(b[2].1, Status::Claimed);
    }

    #[test]
    fn another_boot_or_no_log_rebuilds() {
        let (_d, ws) = root();
        open(&ws, "C-1");
        let mut rec =
            StatusRecord::parse("C-1", &ws.store.read_record("C-1", "status").unwrap().unwrap())
                .unwrap();
        rec.status = Status::Failed;
        ws.store.write_records("C-1", &[("status", Some(&rec.render()))]).unwrap();
        let text =
            ws.store.queue_value(FILE).unwrap().replace(&store::boot_id(), "an-earlier-boot");
        ws.store.set_queue_value(FILE, &text).unwrap();
        assert_eq!(board(&ws)[0].1, Status::Failed, "a log from another boot is not trusted");
        ws.store.clear_queue().unwrap();
        assert_eq!(board(&ws), truth(&ws));
    }

    #[test]
    fn compaction_keeps_the_board() {
        let (_d, ws) = root();
        open(&ws, "D-1");
        for i in 0..80 {
            super::super::claim(&ws, "engineer", "engineer", "D-1", None).unwrap();
            super::super::check_set(&ws, "engineer", "D-1", &format!("c{i}"), true, None).unwrap();
            super::super::release(&ws, "engineer", "D-1", None, false, None).unwrap();
        }
        let before = ws.store.queue_value(FILE).unwrap().lines().count();
        assert_eq!(board(&ws), truth(&ws));
        let after = ws.store.queue_value(FILE).unwrap().lines().count();
        assert!(
            after < before && after == 3,
            "compacted to header, base count and one row: {before} -> {after}"
        );
        assert_eq!(board(&ws), truth(&ws));
    }
}
