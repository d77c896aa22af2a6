//! The `claim --next` index: one append-only lane per (priority, to, intent, deadline) under
//! `queue/`, with a head offset per lane. Derived data, never the truth: an entry is
//! only a hint, re-checked against the task's `.status` before it is used, and
//! `circe doctor --repair` rebuilds every lane from the records.
//!
//! Picking costs a few small reads however many tasks wait (stale entries are skipped
//! once and the head moves past them), which keeps `claim --next` flat as the queue grows.

use std::collections::{HashMap, HashSet};

use super::LocalEngine;
use super::lock::{Lock, Tried};
use super::root::Store;
use crate::error::Result;
use crate::names::TaskId;
use crate::task::record::StatusRecord;
use crate::task::{Eligibility, Status};

/// Rewrite a lane once its consumed prefix passes this many bytes and half the file.
const COMPACT_AT: u64 = 256 * 1024;

pub fn rank(priority: &str) -> u8 {
    crate::message::rank_of(priority)
}

/// `<rank>~<to>~<intent>`, and `~<deadline>` for a task with one: a lane's entries share a
/// deadline, so its head is its best entry.
fn lane_of(rec: &StatusRecord) -> String {
    let base = format!("{}~{}~{}", rank(&rec.priority), rec.to, rec.intent);
    match &rec.deadline {
        Some(d) => format!("{base}~{d}"),
        None => base,
    }
}

/// Put a task that just became `new` at the back of its lane.
pub(super) fn push(eng: &LocalEngine, rec: &StatusRecord) -> Result<()> {
    let _q = eng.store.lock_named("queue")?;
    eng.store.lane_append(
        &lane_of(rec),
        &format!("{} {} {} {}\n", rec.updated_at, rec.task_id, rec.message, rec.epoch),
    )
}

/// A waiting task found at the head of a lane.
#[derive(Debug)]
pub(super) struct Candidate {
    pub rank: u8,
    /// `None`: no deadline (after every task with one).
    pub deadline: Option<String>,
    pub since: String,
    pub task: TaskId,
    /// The task's lock, taken without waiting. `None`: another process holds it (most
    /// likely claiming it right now); the caller waits for the lock like a plain claim.
    pub lock: Option<Lock>,
}

/// The best waiting task `me` may take, skipping `lost` (tasks it just lost a race for).
/// A task whose lock is free wins over one another process holds, so concurrent
/// `claim --next` callers spread over the head of the queue instead of all queueing for
/// the same task.
pub(super) fn best(
    eng: &LocalEngine,
    who: &Eligibility,
    lost: &HashSet<TaskId>,
) -> Result<Option<Candidate>> {
    let _q = eng.store.lock_named("queue")?;
    let mut best: Option<Candidate> = None;
    let mut busy: Option<Candidate> = None;
    // Priority, then deadline (none: last), then time waiting.
    let key = |c: &Candidate| (c.rank, c.deadline.is_none(), c.deadline.clone(), c.since.clone());
    for lane in eng.store.lanes()? {
        let mut parts = lane.splitn(4, '~');
        let (Some(r), Some(to), Some(intent)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        let deadline = parts.next();
        let rank: u8 = r.parse().unwrap_or(1);
        if best.as_ref().is_some_and(|b| b.rank < rank)
            || !who.admits(to, intent)
            || !who.in_time(deadline)
        {
            continue;
        }
        let (free, held) = head_of(eng, &lane, rank, lost)?;
        let place = |c: Option<Candidate>| {
            c.map(|c| Candidate { deadline: deadline.map(str::to_string), ..c })
        };
        if let Some(c) = place(free)
            && best.as_ref().is_none_or(|b| key(&c) < key(b))
        {
            best = Some(c);
        }
        if let Some(c) = place(held)
            && busy.as_ref().is_none_or(|b| key(&c) < key(b))
        {
            busy = Some(c);
        }
    }
    Ok(best.or(busy))
}

/// Bytes of a lane read at a time while looking for its first live entry.
const CHUNK: usize = 64 * 1024;
/// The first read from the head: a few entries (one is about 100 bytes).
const FIRST_CHUNK: usize = 4 * 1024;

/// The first live entry of a lane whose lock is free, and the first live one whose lock
/// another process holds (before it); moves the lane's head past dead entries.
fn head_of(
    eng: &LocalEngine,
    lane: &str,
    rank: u8,
    lost: &HashSet<TaskId>,
) -> Result<(Option<Candidate>, Option<Candidate>)> {
    let store = &eng.store;
    let lane_to = lane.split('~').nth(1).unwrap_or_default();
    let head = store.lane_head(lane);
    let mut consumed: u64 = 0;
    let mut can_advance = true;
    let mut found = None;
    let mut busy = None;
    let mut pos = head;
    let mut known: HashMap<TaskId, Option<Live>> = HashMap::new();
    'chunks: loop {
        // The head entry is live in the common case: read one small chunk first.
        let text = store.lane_read(lane, pos, if pos == head { FIRST_CHUNK } else { CHUNK })?;
        let mut used: u64 = 0;
        for line in text.split_inclusive('\n') {
            if !line.ends_with('\n') {
                break; // a line still being appended, or cut by the chunk
            }
            used += line.len() as u64;
            let parsed = entry(line);
            let task = parsed.and_then(|(_, t, _, _)| TaskId::new(t).ok());
            let live = match (parsed, task) {
                (Some((since, _, ticket, epoch)), Some(task)) => {
                    match judge(eng, &mut known, &task, (ticket, epoch, lane_to))? {
                        Judged::Dead => false,
                        Judged::Pending => true,
                        Judged::Live(_) if lost.contains(&task) => true,
                        Judged::Live(lock) => {
                            let lock = match lock {
                                Some(l) => Some(l),
                                None => store.try_lock_task(&task)?,
                            };
                            let c = |lock| Candidate {
                                rank,
                                deadline: None,
                                since: since.to_string(),
                                task: task.clone(),
                                lock,
                            };
                            match lock {
                                Some(lock) => {
                                    found = Some(c(Some(lock)));
                                    break 'chunks;
                                }
                                None if busy.is_none() => busy = Some(c(None)),
                                None => {}
                            }
                            true
                        }
                    }
                }
                _ => false,
            };
            // A live task this agent just lost a race for may still be waiting for others.
            can_advance &= !live;
            if can_advance {
                consumed += line.len() as u64;
            }
        }
        if used == 0 {
            break; // end of the lane (or a line longer than a chunk: damaged)
        }
        pos += used;
    }
    if consumed > 0 {
        let new_head = head + consumed;
        let total = store.lane_len(lane)?;
        let moved = if new_head > COMPACT_AT && new_head * 2 > total {
            // Head first: a crash between the two leaves head 0 on the old lane (a rescan),
            // never an old offset past the end of the new, shorter lane (entries skipped).
            let rest = store.lane_read(lane, new_head, usize::MAX)?;
            store
                .set_lane_head(lane, 0)
                .and_then(|()| store.set_queue_value(&format!("{lane}.lane"), &rest))
        } else {
            store.set_lane_head(lane, new_head)
        };
        // A root this user may not write is read as it is: the next scan reads those
        // entries again.
        match moved {
            Err(e) if e.is_not_writable() => {}
            r => r?,
        }
    }
    Ok((found, busy))
}

/// What a lane entry is checked against: the task's status, ticket, epoch and address.
type Live = (Status, String, u64, String);

/// What a lane entry is found to be.
enum Judged {
    /// A waiting task, with its lock when judging it took the lock.
    Live(Option<Lock>),
    /// Not waiting now, but a change that makes it so may be under way: kept.
    Pending,
    /// Never to be live again: the head moves past it.
    Dead,
}

/// Judge one entry. A change that makes a task waiting queues it before its commit point
/// (a cut-off change must not leave a waiting task out of every lane), so an entry that is
/// not live by its records may belong to a change under way: unless the task has moved on
/// past the entry's epoch since, its lock is tried. Held: kept for a later look. Free (or
/// no lock file): the records are read again under the lock, and say for good.
fn judge(
    eng: &LocalEngine,
    known: &mut HashMap<TaskId, Option<Live>>,
    task: &TaskId,
    entry: (&str, Option<u64>, &str),
) -> Result<Judged> {
    if is_live(eng, known, task, entry) {
        return Ok(Judged::Live(None));
    }
    let moved_on = known
        .get(task)
        .and_then(Option::as_ref)
        .is_some_and(|(_, _, current, _)| entry.1.is_some_and(|e| e < *current));
    if moved_on {
        return Ok(Judged::Dead);
    }
    let lock = match eng.store.try_lock_task_existing(task)? {
        Tried::Held => return Ok(Judged::Pending),
        Tried::Missing => None,
        // A change cut off (a handoff delivered before its records, say): offered as it is,
        // since the claimer's transaction settles and finishes it first (and loses the race
        // when the task is not waiting then).
        Tried::Got(lock) if Store::journal_left(&lock) => return Ok(Judged::Live(Some(lock))),
        Tried::Got(lock) => Some(lock),
    };
    known.remove(task);
    Ok(if is_live(eng, known, task, entry) { Judged::Live(lock) } else { Judged::Dead })
}

/// Is the entry still a waiting task with this ticket, queued at its current epoch, in the
/// lane of its address? Every release re-queues a task, so older entries of it are dead for
/// good once the epoch moved on (and once it was addressed anew). Read without the task lock
/// (a hint), and at most once per task per scan (`known`).
fn is_live(
    eng: &LocalEngine,
    known: &mut HashMap<TaskId, Option<Live>>,
    task: &TaskId,
    (ticket, epoch, lane_to): (&str, Option<u64>, &str),
) -> bool {
    let rec = known.entry(task.clone()).or_insert_with(|| {
        eng.store
            .read_record(task, "status")
            .ok()
            .flatten()
            .and_then(|t| StatusRecord::parse(task, &t).ok())
            .map(|r| (r.status, r.message, r.epoch, r.to))
    });
    rec.as_ref().is_some_and(|(status, message, current, to)| {
        *status == Status::New
            && message == ticket
            && epoch.is_none_or(|e| e == *current)
            && to == lane_to
    })
}

/// One lane entry: `<since> <task> <ticket> [<epoch>]` (an older circe's carry no epoch).
fn entry(line: &str) -> Option<(&str, &str, &str, Option<u64>)> {
    let mut f = line.trim_end().splitn(4, ' ');
    let (since, task, ticket) = (f.next()?, f.next()?, f.next()?);
    Some((since, task, ticket, f.next().and_then(|e| e.parse().ok())))
}

/// The waiting tasks `claim --next` cannot find: no entry of their lane from its head on
/// names them at their epoch (the lane removed, or a link or FIFO planted in its place).
/// Reads each of their lanes once (doctor's check).
pub(super) fn unlisted(eng: &LocalEngine, waiting: &[StatusRecord]) -> Result<Vec<TaskId>> {
    let mut by_lane: std::collections::BTreeMap<String, Vec<&StatusRecord>> =
        std::collections::BTreeMap::new();
    for r in waiting {
        by_lane.entry(lane_of(r)).or_default().push(r);
    }
    let mut out = Vec::new();
    for (lane, recs) in by_lane {
        let text = eng.store.lane_read(&lane, eng.store.lane_head(&lane), usize::MAX)?;
        let entries = entries_of(&text);
        for r in recs {
            if !names(&entries, r) && !listed_now(eng, r)? {
                out.push(r.task_id.clone());
            }
        }
    }
    out.sort();
    Ok(out)
}

/// A lane's entries: each task with the epochs it is queued at (`None`: an entry without).
fn entries_of(text: &str) -> HashMap<&str, Vec<Option<u64>>> {
    let mut out: HashMap<&str, Vec<Option<u64>>> = HashMap::new();
    for (_, task, _, epoch) in text.lines().filter_map(entry) {
        out.entry(task).or_default().push(epoch);
    }
    out
}

/// Do a lane's entries name `r`'s task at its epoch (an entry without an epoch names it at
/// any)?
fn names(entries: &HashMap<&str, Vec<Option<u64>>>, r: &StatusRecord) -> bool {
    entries
        .get(r.task_id.as_str())
        .is_some_and(|epochs| epochs.iter().any(|e| e.is_none_or(|e| e == r.epoch)))
}

/// Does lane `lane`, from its head on, name `r`'s task?
fn listed(eng: &LocalEngine, lane: &str, r: &StatusRecord) -> Result<bool> {
    let text = eng.store.lane_read(lane, eng.store.lane_head(lane), usize::MAX)?;
    Ok(names(&entries_of(&text), r))
}

/// Looked at again under the task's lock (a claim or release may have been under way): is
/// the task no longer waiting as `r` says, or now listed?
fn listed_now(eng: &LocalEngine, r: &StatusRecord) -> Result<bool> {
    let _lock = eng.store.lock_task(&r.task_id)?;
    let now = eng
        .store
        .read_record(&r.task_id, "status")?
        .and_then(|t| StatusRecord::parse(&r.task_id, &t).ok());
    match now {
        Some(now) if now.status == Status::New => listed(eng, &lane_of(&now), &now),
        _ => Ok(true),
    }
}

/// Drop every lane and enqueue every waiting task again, oldest first.
pub(super) fn rebuild(store: &Store) -> Result<usize> {
    let mut waiting = Vec::new();
    // Tasks whose record does not read (doctor names them): what the lanes say of them now
    // is kept, so that once the record is mended by hand the task is found again (every
    // line is checked against the record before it is used).
    let mut unread = HashSet::new();
    for id in store.list_tasks()? {
        match store.read_record(&id, "status").map(|t| t.map(|t| StatusRecord::parse(&id, &t))) {
            Ok(Some(Ok(r))) if r.status == Status::New => waiting.push(r),
            Ok(Some(Ok(_)) | None) => {}
            Ok(Some(Err(_))) | Err(_) => {
                unread.insert(id.to_string());
            }
        }
    }
    let _q = store.lock_named("queue")?;
    // (lane, updated_at, task, line): each lane's lines in the order tasks began waiting.
    let mut entries: Vec<(String, String, String, String)> = waiting
        .iter()
        .map(|r| {
            let line = format!("{} {} {} {}\n", r.updated_at, r.task_id, r.message, r.epoch);
            (lane_of(r), r.updated_at.clone(), r.task_id.to_string(), line)
        })
        .collect();
    // Kept too: the lines queued since the records were read above (a change queues its
    // task, under the task's lock, before it writes the record): a line that names its
    // task at a lane and epoch no record read gave, when the task's lock is held now or its
    // record says waiting now. Dropped, such a task would wait in no lane, passed over by
    // `claim --next`. Lines that name a dead state are harmless: each is judged against the
    // record before it is used.
    let rebuilt: HashSet<(String, String, String)> =
        waiting.iter().map(|r| (lane_of(r), r.task_id.to_string(), r.epoch.to_string())).collect();
    // TEST BUILDS ONLY (CIRCE_TEST_BREAK=rebuild-drops-queued): the broken variant, which
    // keeps none of them.
    let broken = crate::fault::test_break("rebuild-drops-queued");
    let since = |task: &str| {
        let Ok(id) = TaskId::new(task) else { return false };
        if broken {
            return false;
        }
        // Never made here: an archived task's lock file is gone for good.
        match store.try_lock_task_existing(&id) {
            Ok(Tried::Held) => true,
            Ok(Tried::Got(_lock)) => store
                .read_record(&id, "status")
                .ok()
                .flatten()
                .and_then(|t| StatusRecord::parse(&id, &t).ok())
                .is_some_and(|r| r.status == Status::New),
            Ok(Tried::Missing) | Err(_) => false,
        }
    };
    for lane in store.lanes()? {
        // Lines a claim passed (before the head) name no task that began waiting since.
        let from = if unread.is_empty() { store.lane_head(&lane) } else { 0 };
        for l in store.lane_read(&lane, from, usize::MAX)?.lines() {
            let f: Vec<&str> = l.split(' ').collect();
            let (at, task) =
                (f.first().copied().unwrap_or_default(), f.get(1).copied().unwrap_or_default());
            let epoch = f.get(3).copied().unwrap_or_default().to_string();
            let known = rebuilt.contains(&(lane.clone(), task.to_string(), epoch));
            if unread.contains(task) || !known && since(task) {
                entries.push((lane.clone(), at.to_string(), task.to_string(), format!("{l}\n")));
            }
        }
    }
    entries.sort();
    entries.dedup();
    store.clear_queue()?;
    let mut lanes: std::collections::BTreeMap<String, String> = std::collections::BTreeMap::new();
    for (lane, _, _, line) in entries {
        lanes.entry(lane).or_default().push_str(&line);
    }
    for (lane, text) in lanes {
        store.lane_append(&lane, &text)?;
    }
    Ok(waiting.len())
}

#[cfg(test)]
#[path = "lanes_tests.rs"]
mod tests;
