//! The `claim --next` index: one append-only lane per (priority, to, intent) under
//! `queue/`, with a head offset per lane. Derived data, never the truth: an entry is
//! only a hint, re-checked against the task's `.status` before it is used, and
//! `circe doctor --repair` rebuilds every lane from the records.
//!
//! Picking costs a few small reads however many tasks wait (stale entries are skipped
//! once and the head moves past them), which keeps `claim --next` flat as the queue grows.

use std::collections::{HashMap, HashSet};

use super::lifecycle::Status;
use super::record::StatusRecord;
use crate::error::Result;
use crate::store::Lock;
use crate::workspace::Workspace;

/// Rewrite a lane once its consumed prefix passes this many bytes and half the file.
const COMPACT_AT: u64 = 256 * 1024;

pub fn rank(priority: &str) -> u8 {
    match priority {
        "high" => 0,
        "low" => 2,
        _ => 1,
    }
}

fn lane_of(rec: &StatusRecord) -> String {
    format!("{}~{}~{}", rank(&rec.priority), rec.to, rec.intent)
}

/// Put a task that just became `new` at the back of its lane.
pub fn push(ws: &Workspace, rec: &StatusRecord) -> Result<()> {
    let _q = ws.store.lock_named("queue")?;
    ws.store.lane_append(
        &lane_of(rec),
        &format!("{} {} {} {}\n", rec.updated_at, rec.task_id, rec.message, rec.epoch),
    )
}

/// May `me` (with `role`) take a task addressed to `to` with `intent`?
/// An agent name means that agent only; a role means its agents; `all` means any agent
/// whose role may receive the intent.
pub fn eligible(ws: &Workspace, me: &str, role: &str, to: &str, intent: &str) -> bool {
    if ws.is_agent(to) {
        return to == me;
    }
    (to == "all" || to == role) && ws.registry.may_receive(role, intent)
}

/// A waiting task found at the head of a lane.
#[derive(Debug)]
pub struct Candidate {
    pub rank: u8,
    pub since: String,
    pub task: String,
    /// The task's lock, taken without waiting. `None`: another process holds it (most
    /// likely claiming it right now); the caller waits for the lock like a plain claim.
    pub lock: Option<Lock>,
}

/// The best waiting task `me` may take, skipping `lost` (tasks it just lost a race for).
/// A task whose lock is free wins over one another process holds, so concurrent
/// `claim --next` callers spread over the head of the queue instead of all queueing for
/// the same task.
pub fn best(
    ws: &Workspace,
    me: &str,
    role: &str,
    lost: &HashSet<String>,
) -> Result<Option<Candidate>> {
    let _q = ws.store.lock_named("queue")?;
    let mut best: Option<Candidate> = None;
    let mut busy: Option<Candidate> = None;
    for lane in ws.store.lanes()? {
        let mut parts = lane.splitn(3, '~');
        let (Some(r), Some(to), Some(intent)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        let rank: u8 = r.parse().unwrap_or(1);
        if best.as_ref().is_some_and(|b| b.rank < rank) || !eligible(ws, me, role, to, intent) {
            continue;
        }
        let (free, held) = head_of(ws, &lane, rank, lost)?;
        if let Some(c) = free
            && best.as_ref().is_none_or(|b| (c.rank, &c.since) < (b.rank, &b.since))
        {
            best = Some(c);
        }
        if let Some(c) = held
            && busy.as_ref().is_none_or(|b| (c.rank, &c.since) < (b.rank, &b.since))
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
    ws: &Workspace,
    lane: &str,
    rank: u8,
    lost: &HashSet<String>,
) -> Result<(Option<Candidate>, Option<Candidate>)> {
    let head = ws.store.lane_head(lane);
    let mut consumed: u64 = 0;
    let mut can_advance = true;
    let mut found = None;
    let mut busy = None;
    let mut pos = head;
    let mut known: HashMap<String, Option<(Status, String, u64)>> = HashMap::new();
    'chunks: loop {
        // The head entry is live in the common case: read one small chunk first.
        let text = ws.store.lane_read(lane, pos, if pos == head { FIRST_CHUNK } else { CHUNK })?;
        let mut used: u64 = 0;
        for line in text.split_inclusive('\n') {
            if !line.ends_with('\n') {
                break; // a line still being appended, or cut by the chunk
            }
            used += line.len() as u64;
            let mut f = line.trim_end().splitn(4, ' ');
            let (since, task, ticket) = (f.next(), f.next(), f.next());
            let epoch = f.next().and_then(|e| e.parse().ok());
            let live = match (since, task, ticket) {
                (Some(since), Some(task), Some(ticket))
                    if is_live(ws, &mut known, task, ticket, epoch) =>
                {
                    if !lost.contains(task) {
                        let c = |lock| Candidate {
                            rank,
                            since: since.to_string(),
                            task: task.to_string(),
                            lock,
                        };
                        match ws.store.try_lock_task(task)? {
                            Some(lock) => {
                                found = Some(c(Some(lock)));
                                break 'chunks;
                            }
                            None if busy.is_none() => busy = Some(c(None)),
                            None => {}
                        }
                    }
                    true
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
        let total = ws.store.lane_len(lane)?;
        if new_head > COMPACT_AT && new_head * 2 > total {
            // Head first: a crash between the two leaves head 0 on the old lane (a rescan),
            // never an old offset past the end of the new, shorter lane (entries skipped).
            let rest = ws.store.lane_read(lane, new_head, usize::MAX)?;
            ws.store.set_lane_head(lane, 0)?;
            ws.store.set_queue_value(&format!("{lane}.lane"), &rest)?;
        } else {
            ws.store.set_lane_head(lane, new_head)?;
        }
    }
    Ok((found, busy))
}

/// Is the entry still a waiting task with this ticket, queued at its current epoch? Every
/// release re-queues a task, so older entries of it are dead for good once the epoch moved
/// on. Read without the task lock (a hint), and at most once per task per scan (`known`).
fn is_live(
    ws: &Workspace,
    known: &mut HashMap<String, Option<(Status, String, u64)>>,
    task: &str,
    ticket: &str,
    epoch: Option<u64>,
) -> bool {
    if crate::names::check_task_id(task).is_err() {
        return false;
    }
    let rec = known.entry(task.to_string()).or_insert_with(|| {
        ws.store
            .read_record(task, "status")
            .ok()
            .flatten()
            .and_then(|t| StatusRecord::parse(task, &t).ok())
            .map(|r| (r.status, r.message, r.epoch))
    });
    rec.as_ref().is_some_and(|(status, message, current)| {
        *status == Status::New && message == ticket && epoch.is_none_or(|e| e == *current)
    })
}

/// Drop every lane and enqueue every waiting task again, oldest first.
pub fn rebuild(ws: &Workspace) -> Result<usize> {
    let mut waiting = Vec::new();
    for id in ws.store.list_tasks()? {
        if let Some(t) = ws.store.read_record(&id, "status")?
            && let Ok(r) = StatusRecord::parse(&id, &t)
            && r.status == Status::New
        {
            waiting.push(r);
        }
    }
    waiting.sort_by(|a, b| a.updated_at.cmp(&b.updated_at).then(a.task_id.cmp(&b.task_id)));
    let _q = ws.store.lock_named("queue")?;
    ws.store.clear_queue()?;
    let mut lanes: std::collections::BTreeMap<String, String> = std::collections::BTreeMap::new();
    for r in &waiting {
        lanes
            .entry(lane_of(r))
            .or_default()
            .push_str(&format!("{} {} {} {}\n", r.updated_at, r.task_id, r.message, r.epoch));
    }
    for (lane, text) in lanes {
        ws.store.lane_append(&lane, &text)?;
    }
    Ok(waiting.len())
}

#[cfg(test)]
mod tests {
    use crate::message::{Format, Message};
    use crate::store::Store;
    use crate::workspace::Workspace;

    fn root_with_tasks(dir: &std::path::Path, n: usize) -> Workspace {
        let (store, _) = Store::init(dir, crate::config::DEFAULT_CONFIG).unwrap();
        store.create_agent("coordinator", "role: coordinator\n").unwrap();
        store.create_agent("w1", "role: engineer\n").unwrap();
        let ws = Workspace::open(Some(store.root())).unwrap();
        for i in 0..n {
            let mut m = Message::new(Format::Circe);
            m.to = Some("all".into());
            m.intent = Some("implement_feature".into());
            m.task_id = Some(format!("T{i}"));
            crate::boxes::send(&ws, "coordinator", m).unwrap();
        }
        ws
    }

    #[test]
    fn claim_next_skips_a_task_another_process_is_claiming() {
        let dir = tempfile::tempdir().unwrap();
        let ws = root_with_tasks(dir.path(), 2);
        let held = ws.store.lock_task("T0").unwrap();
        let o = crate::task::claim_next(&ws, "w1", "engineer", None).unwrap();
        assert_eq!(o.task, "T1");
        drop(held);
        // Once free, the older task is next.
        let o = crate::task::claim_next(&ws, "w1", "engineer", None).unwrap();
        assert_eq!(o.task, "T0");
        assert!(crate::task::claim_next(&ws, "w1", "engineer", None).is_err());
    }
}

#[cfg(test)]
mod history_tests {
    use std::collections::HashSet;

    use crate::message::{Format, Message};
    use crate::store::Store;
    use crate::workspace::Workspace;

    /// Every release re-queues its task; the older entries must be dead for good, or a
    /// scan stuck behind a busy task re-reads the whole history (found by the hot race:
    /// 8 workers on 4 tasks slowed from ~1,200 to under 200 attempts/s as history grew).
    #[test]
    fn old_entries_of_a_requeued_task_are_dead() {
        let dir = tempfile::tempdir().unwrap();
        let (store, _) = Store::init(dir.path(), crate::config::DEFAULT_CONFIG).unwrap();
        store.create_agent("coordinator", "role: coordinator\n").unwrap();
        store.create_agent("w1", "role: engineer\n").unwrap();
        let ws = Workspace::open(Some(store.root())).unwrap();
        let mut m = Message::new(Format::Circe);
        m.to = Some("all".into());
        m.intent = Some("implement_feature".into());
        m.task_id = Some("T0".into());
        crate::boxes::send(&ws, "coordinator", m).unwrap();
        for _ in 0..20 {
            crate::task::claim(&ws, "w1", "engineer", "T0", None).unwrap();
            crate::task::release(&ws, "w1", "T0", None, false, None).unwrap();
        }
        let lane = ws.store.lanes().unwrap().pop().unwrap();
        let text = ws.store.lane_read(&lane, 0, usize::MAX).unwrap();
        assert_eq!(text.lines().count(), 21, "one entry per time T0 became new");
        // Another process is busy with T0: the scan finds it busy, and only its newest
        // entry is live, so the head moves past the 20 stale ones.
        let other_claimer = ws.store.lock_task("T0").unwrap();
        let (free, busy) = super::head_of(&ws, &lane, 1, &HashSet::new()).unwrap();
        drop(other_claimer);
        assert!(free.is_none() && busy.is_some());
        let offset = usize::try_from(ws.store.lane_head(&lane)).unwrap();
        let last_line_start = text.len() - text.lines().last().unwrap().len() - 1;
        assert_eq!(offset, last_line_start, "the head stops at the one live entry");
    }
}
