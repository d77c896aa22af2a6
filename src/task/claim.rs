//! `claim`, `claim --next`, lease expiry and `reap`.

use std::collections::HashSet;
use std::time::Duration;

use serde::Serialize;

use super::event::Event;
use super::lifecycle::{Actor, Move, Status, decide};
use super::queue;
use super::record::{self, OwnerRecord};
use super::state::{TaskState, load_reconciled};
use crate::clock;
use crate::error::{Error, Kind, Result};
use crate::store::{Lock, Mailbox, crash_point};
use crate::workspace::Workspace;

/// What a claim did.
#[derive(Debug, Clone, Serialize)]
pub struct ClaimOutcome {
    pub task: String,
    pub owner: String,
    pub status: Status,
    pub epoch: u64,
    pub attempts: u32,
    pub lease_expires_at: Option<String>,
    pub message: String,
    /// The agent already held it: nothing changed.
    pub already_held: bool,
    /// The previous owner whose lease had run out, if the task was taken over.
    pub expired_owner: Option<String>,
}

pub(super) fn lease_expired(rec: &record::StatusRecord) -> bool {
    rec.lease_expires_at.as_deref().and_then(clock::parse).is_some_and(|t| t <= clock::now())
}

pub(super) fn lease_until(ttl: Duration) -> Result<String> {
    clock::lease_until(clock::now(), ttl)
}

fn not_found(task: &str) -> Error {
    Error::not_found(format!("no task `{task}`")).hint("`circe tasks` lists the tasks")
}

/// Take task `task` for `me`: one rename of its message from NEW_MESSAGES (or from the
/// box of an owner whose lease ran out) into `me`'s INBOX, then the records.
pub fn claim(
    ws: &Workspace,
    me: &str,
    role: &str,
    task: &str,
    ttl: Option<Duration>,
) -> Result<ClaimOutcome> {
    crate::names::check_task_id(task)?;
    let lock = ws.store.lock_task(task)?;
    claim_locked(ws, me, role, task, ttl, lock)
}

/// `claim` with the task's lock already held (`claim --next` takes it while picking).
fn claim_locked(
    ws: &Workspace,
    me: &str,
    role: &str,
    task: &str,
    ttl: Option<Duration>,
    _lock: Lock,
) -> Result<ClaimOutcome> {
    let mut st = load_reconciled(ws, task)?.ok_or_else(|| not_found(task))?;
    let ttl = ttl.unwrap_or_else(|| ws.config.lease());
    let mut expired_owner = None;
    match st.rec.status {
        s if s.is_owned() => {
            let owner = st.rec.owner.clone().unwrap_or_default();
            if owner == me {
                return Ok(outcome(&st, true, None));
            }
            if !lease_expired(&st.rec) {
                return Err(Error::conflict(format!("task {task} is held by {owner}"))
                    .detail("owner", owner.clone())
                    .hint(format!(
                        "its lease runs until {}",
                        st.rec.lease_expires_at.clone().unwrap_or_default()
                    )));
            }
            if st.rec.attempts >= ws.config.max_attempts {
                lease_ran_out(ws, &mut st, me)?;
                return Err(Error::refused(format!(
                    "task {task} is parked: its lease ran out after {} attempts",
                    st.rec.attempts
                ))
                .hint("a coordinator can put it back with `circe release --force`"));
            }
            expired_owner = Some(owner);
        }
        Status::New => {}
        Status::Parked => {
            return Err(Error::refused(format!(
                "task {task} is parked after {} attempts",
                st.rec.attempts
            ))
            .hint("a coordinator can put it back with `circe release --force`"));
        }
        s => {
            return Err(Error::refused(format!("task {task} is {}", s.as_str()))
                .hint("only new tasks can be claimed"));
        }
    }
    if !queue::eligible(ws, me, role, &st.rec.to, &st.rec.intent) {
        return Err(Error::refused(format!(
            "{me} ({role}) may not take task {task}: it is addressed to {} with intent {}",
            st.rec.to, st.rec.intent
        ))
        .hint("`circe registry` shows which roles may receive each intent"));
    }
    let from_box = match &expired_owner {
        Some(_) => st.location.clone().ok_or_else(|| {
            Error::internal(format!("the message of task {task} is in no box"))
                .hint("run `circe doctor`")
        })?,
        None => Mailbox::NewMessages,
    };
    let from_status = st.rec.status;
    let lease = lease_until(ttl)?;
    if let Some(old) = &expired_owner {
        decide(from_status, Move::Expire, &[Actor::Lease])?;
        Event::new("expire", me)
            .task(task)
            .moved(from_status.as_str(), "new", st.rec.epoch + 1)
            .with("owner", old.as_str())
            .append(&ws.store)?;
        st.rec.epoch += 1;
    }
    let to = decide(Status::New, Move::Claim, &[Actor::Eligible])?;
    crash_point("claim.before_rename");
    if !ws.store.move_message(&from_box, &Mailbox::Inbox(me.to_string()), &st.rec.message)? {
        return Err(Error::conflict(format!("task {task} was taken by another process")));
    }
    crash_point("claim.renamed");
    let now = clock::stamp(clock::now());
    st.rec.status = to;
    st.rec.owner = Some(me.to_string());
    st.rec.epoch += 1;
    st.rec.attempts += 1;
    st.rec.started_at.get_or_insert(now.clone());
    st.rec.updated_at.clone_from(&now);
    st.rec.lease_expires_at = Some(lease);
    st.rec.note = None;
    let owner = st.rec.owner_record(&now, &super::host(), std::os::unix::process::parent_id());
    write(ws, &st, owner.as_ref())?;
    crash_point("claim.recorded");
    Event::new("claim", me)
        .task(task)
        .moved("new", to.as_str(), st.rec.epoch)
        .with("attempt", st.rec.attempts)
        .append(&ws.store)?;
    st.owner = owner;
    Ok(outcome(&st, false, expired_owner))
}

fn outcome(st: &TaskState, already_held: bool, expired_owner: Option<String>) -> ClaimOutcome {
    ClaimOutcome {
        task: st.rec.task_id.clone(),
        owner: st.rec.owner.clone().unwrap_or_default(),
        status: st.rec.status,
        epoch: st.rec.epoch,
        attempts: st.rec.attempts,
        lease_expires_at: st.rec.lease_expires_at.clone(),
        message: st.rec.message.clone(),
        already_held,
        expired_owner,
    }
}

/// Write `.status` then `.owner` (or remove it), in that order.
pub(super) fn write(ws: &Workspace, st: &TaskState, owner: Option<&OwnerRecord>) -> Result<()> {
    let status = st.rec.render();
    let owner = owner.map(OwnerRecord::render);
    super::board::write(
        ws,
        &st.rec.task_id,
        &[("status", Some(&status)), ("owner", owner.as_deref())],
        Some((&st.rec, &st.checks)),
    )
}

/// The best waiting task this agent may take: priority, then time in the queue.
pub fn claim_next(
    ws: &Workspace,
    me: &str,
    role: &str,
    ttl: Option<Duration>,
) -> Result<ClaimOutcome> {
    let mut lost = HashSet::new();
    for _ in 0..10_000 {
        let Some(c) = queue::best(ws, me, role, &lost)? else {
            return Err(Error::nothing_to_claim(format!(
                "no waiting task that {me} ({role}) may take"
            )));
        };
        let result = match c.lock {
            Some(lock) => claim_locked(ws, me, role, &c.task, ttl, lock),
            None => claim(ws, me, role, &c.task, ttl),
        };
        match result {
            Ok(o) => return Ok(o),
            Err(e) if matches!(e.kind, Kind::Conflict | Kind::Refused | Kind::NotFound) => {
                lost.insert(c.task);
            }
            Err(e) => return Err(e),
        }
    }
    Err(Error::conflict("gave up after 10000 lost races for waiting tasks"))
}

/// A lease ran out: the message goes back to NEW_MESSAGES and the owner is cleared. The task
/// is parked (unclaimable until a coordinator releases it) once it was claimed
/// `max_attempts` times, else it waits in the queue again.
fn lease_ran_out(ws: &Workspace, st: &mut TaskState, by: &str) -> Result<()> {
    let park = st.rec.attempts >= ws.config.max_attempts;
    let mv = if park { Move::Park } else { Move::Expire };
    let from = st.rec.status;
    let to = decide(from, mv, &[Actor::Lease])?;
    if let Some(b) = st.location.clone()
        && b != Mailbox::NewMessages
    {
        ws.store.move_message(&b, &Mailbox::NewMessages, &st.rec.message)?;
    }
    crash_point(if park { "park.renamed" } else { "expire.renamed" });
    let old = st.rec.owner.take().unwrap_or_default();
    st.rec.status = to;
    st.rec.epoch += 1;
    st.rec.lease_expires_at = None;
    st.rec.updated_at = clock::stamp(clock::now());
    write(ws, st, None)?;
    if !park {
        queue::push(ws, &st.rec)?;
    }
    Event::new(mv.as_str(), by)
        .task(&st.rec.task_id)
        .moved(from.as_str(), to.as_str(), st.rec.epoch)
        .with("owner", old.as_str())
        .with("attempts", st.rec.attempts)
        .append(&ws.store)?;
    if park {
        let text =
            format!("task parked after {} attempts; its last owner was {old}", st.rec.attempts);
        super::announce::tell_coordinators(ws, by, &st.rec.task_id, &text)?;
    }
    Ok(())
}

/// Return every task whose lease ran out to the queue (or park it): for cron.
pub fn reap(ws: &Workspace, by: &str) -> Result<Vec<(String, Status)>> {
    let mut done = Vec::new();
    for task in ws.store.list_tasks()? {
        let _lock = ws.store.lock_task(&task)?;
        let Some(mut st) = load_reconciled(ws, &task)? else { continue };
        if !st.rec.status.is_owned() || !lease_expired(&st.rec) {
            continue;
        }
        lease_ran_out(ws, &mut st, by)?;
        done.push((task, st.rec.status));
    }
    Ok(done)
}
