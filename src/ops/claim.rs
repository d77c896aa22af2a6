//! `claim`, `claim --next`, lease expiry and `reap`.

use std::collections::HashSet;
use std::time::Duration;

use serde::Serialize;

use super::notify;
use crate::engine::TaskTx;
use crate::error::{Error, Kind, Result};
use crate::event::CIRCE;
use crate::names::{AgentName, TaskId};
use crate::task::effects::{self, MoveCtx};
use crate::task::{Actor, Status, StatusRecord};
use crate::workspace::Workspace;

/// What a claim did.
#[derive(Debug, Clone, Serialize)]
pub struct ClaimOutcome {
    #[serde(rename = "task_id")]
    pub task: TaskId,
    pub owner: AgentName,
    pub status: Status,
    pub epoch: u64,
    pub attempts: u32,
    pub lease_expires_at: Option<String>,
    pub message: String,
    /// The agent already held it: nothing changed but the lease (renewed as a heartbeat
    /// renews it when it had run out or a ttl was given).
    pub already_held: bool,
    /// The previous owner whose lease had run out, if the task was taken over.
    pub expired_owner: Option<String>,
    /// A look before claiming: what the claim would be; nothing changed.
    pub dry_run: bool,
    /// The box the task's message lies in now (the claimer's INBOX after a claim).
    pub location: String,
    /// The task's note before this claim, when it had one (why it was blocked, released,
    /// readdressed): the claim clears it, the claimer is told it.
    pub note: Option<String>,
}

/// Take task `task` for `me`: one rename of its message from NEW_MESSAGES (or from the
/// box of an owner whose lease ran out) into `me`'s INBOX, then the records.
pub fn claim(
    ws: &Workspace,
    me: &AgentName,
    role: &str,
    task: &TaskId,
    ttl: Option<Duration>,
) -> Result<ClaimOutcome> {
    claim_with(ws, me, role, Some(task), ttl, None)
}

/// A claim of `task` (or, without one, of the best waiting task) with a request id: when
/// a claim with the same id by `me` committed before (a retry after an unknown outcome),
/// its grant is returned and nothing else is taken. The engine remembers the id with the
/// grant (`Engine::granted`).
pub fn claim_with(
    ws: &Workspace,
    me: &AgentName,
    role: &str,
    task: Option<&TaskId>,
    ttl: Option<Duration>,
    request: Option<&str>,
) -> Result<ClaimOutcome> {
    if let Some(r) = request {
        crate::names::check_request_id(r)?;
    }
    if let Some(r) = request
        && let Some(found) = earlier_grant(ws, me, task, r)?
    {
        return Ok(found);
    }
    // TEST BUILDS ONLY (CIRCE_TEST_BREAK=claim-slow-pick): a scene, not a fault: the claim
    // waits 1.5 s after its first look at the agents, before it picks and locks a task.
    if crate::fault::test_break("claim-slow-pick") {
        std::thread::sleep(Duration::from_millis(1500));
    }
    match task {
        Some(task) => {
            let mut tx =
                ws.engine.begin(task, false)?.ok_or_else(|| super::missing_task(ws, task))?;
            claim_in(ws, me, role, tx.as_mut(), ttl, request, false)
        }
        None => claim_next_in(ws, me, role, ttl, request, false),
    }
}

/// What `claim` (of `task`, or without one of the best waiting task) would do for `me`,
/// without doing it: the same checks in the same transaction, nothing committed.
pub fn claim_dry(
    ws: &Workspace,
    me: &AgentName,
    role: &str,
    task: Option<&TaskId>,
    ttl: Option<Duration>,
) -> Result<ClaimOutcome> {
    match task {
        Some(task) => {
            let mut tx =
                ws.engine.begin(task, false)?.ok_or_else(|| super::missing_task(ws, task))?;
            claim_in(ws, me, role, tx.as_mut(), ttl, None, true)
        }
        None => claim_next_in(ws, me, role, ttl, None, true),
    }
}

/// The grant an earlier claim with request id `request` made, if it committed.
fn earlier_grant(
    ws: &Workspace,
    me: &AgentName,
    task: Option<&TaskId>,
    request: &str,
) -> Result<Option<ClaimOutcome>> {
    let Some((got, epoch)) = ws.engine.granted(me, request)? else { return Ok(None) };
    if let Some(t) = task
        && *t != got
    {
        return Err(Error::usage(format!(
            "request id {request} was used to claim task {got}, not {t}"
        ))
        .hint("a request id names one claim: make a new one for another claim"));
    }
    let st = ws.engine.peek(&got)?.ok_or_else(|| super::missing_task(ws, &got))?;
    let held = st.rec.status.is_owned() && st.rec.owner.as_ref() == Some(me);
    if held && st.rec.epoch == epoch {
        return Ok(Some(outcome(&st.rec, true, None, false, st.location.as_ref())));
    }
    // Say what became of the grant since: moved on by its holder, or taken from it.
    let status = st.rec.status.as_str();
    let (now, since) = if st.rec.epoch == epoch {
        (format!("it is {status} now"), "it went on past its claim since (its holder moved it)")
    } else {
        (
            format!(
                "it is at epoch {} now ({status}, owner {})",
                st.rec.epoch,
                st.rec.owner.as_deref().unwrap_or("none")
            ),
            "the lease ran out or the task was released since",
        )
    };
    Err(Error::conflict(format!(
        "the claim with request id {request} got task {got} at epoch {epoch}, but {now}"
    ))
    .detail("task_id", got.to_string())
    .hint(format!("{since}; `circe show {got}` says where it is; claim again without this request id for another task")))
}

/// The claim inside the task's transaction.
fn claim_in(
    ws: &Workspace,
    me: &AgentName,
    role: &str,
    tx: &mut dyn TaskTx,
    ttl: Option<Duration>,
    request: Option<&str>,
    dry: bool,
) -> Result<ClaimOutcome> {
    let task = tx.task_id().clone();
    let st = tx.state().ok_or_else(|| super::missing_task(ws, &task))?.clone();
    let rec = &st.rec;
    let now = ws.tx_now(tx);
    match rec.status {
        s if s.is_owned() => {
            let owner = rec.owner.clone().map(String::from).unwrap_or_default();
            if owner == me.as_str() {
                // Claimed again (its lease ran out, or with --ttl): the lease is renewed as a
                // heartbeat renews it, so the holder is not told it holds a task whose lease
                // has run out. Nothing else changes.
                if dry || ttl.is_none() && !effects::lease_expired(rec, now) {
                    return Ok(outcome(&st.rec, true, None, dry, st.location.as_ref()));
                }
                let lease = ttl.unwrap_or_else(|| ws.config.lease());
                tx.commit(effects::heartbeat(&st, now, lease)?)?;
                let after = tx.state().ok_or_else(|| super::missing_task(ws, &task))?;
                return Ok(outcome(&after.rec, true, None, false, after.location.as_ref()));
            }
            // Not one this agent may take at all: said at once, not "wait for the lease".
            if !ws.may_take(me, role, &rec.to, &rec.intent) {
                return Err(not_for(ws, me, role, &task, rec));
            }
            if !effects::lease_expired(rec, now) {
                return Err(held_by(&task, &owner, rec.lease_expires_at.as_deref()));
            }
        }
        Status::New => {}
        Status::Parked => {
            return Err(Error::refused(format!(
                "task {task} is parked: its lease ran out {} times",
                rec.expiries
            ))
            .hint(parked_hint(ws, me, &task)));
        }
        s => {
            return Err(Error::refused(format!("task {task} is {}", s.as_str()))
                .hint("only new tasks can be claimed"));
        }
    }
    if !ws.may_take(me, role, &rec.to, &rec.intent) {
        return Err(not_for(ws, me, role, &task, rec));
    }
    let expired_owner = rec.status.is_owned().then(|| rec.owner.clone()).flatten();
    let ctx = MoveCtx {
        by: me.as_str(),
        actors: &[Actor::Eligible],
        now,
        lease: ttl.unwrap_or_else(|| ws.config.lease()),
        note: None,
        forced: false,
        handoff: None,
        readdress: None,
    };
    let (mut change, parked) = effects::claim(&st, &ctx, ws.config.max_attempts)?;
    if dry {
        if parked {
            return Err(Error::refused(format!(
                "task {task} would be parked: its lease ran out {} times",
                rec.expiries + 1
            ))
            .hint(parked_hint(ws, me, &task)));
        }
        // The ticket's move into the claimer's INBOX would be refused as the claim is.
        ws.engine.check_box(&crate::boxes::Mailbox::Inbox(me.clone()), "move the ticket into")?;
        let owner = expired_owner.map(String::from);
        let mut o = outcome(&change.record, false, owner, true, st.location.as_ref());
        o.note.clone_from(&st.rec.note);
        return Ok(o);
    }
    if !parked {
        change.request = request.map(str::to_string);
    }
    still_active(ws, me)?;
    notify::ride(ws, &mut change);
    tx.commit(change)?;
    let after = tx.state().ok_or_else(|| super::missing_task(ws, &task))?;
    if parked {
        return Err(Error::refused(format!(
            "task {task} is parked: its lease ran out {} times",
            after.rec.expiries
        ))
        .hint(parked_hint(ws, me, &task)));
    }
    let at = after.location.clone();
    let mut o = outcome(&after.rec, false, expired_owner.map(String::from), false, at.as_ref());
    o.note.clone_from(&st.rec.note);
    Ok(o)
}

/// `me` may not take the task `rec` is the record of (exit 3), with the way on.
fn not_for(ws: &Workspace, me: &AgentName, role: &str, task: &TaskId, rec: &StatusRecord) -> Error {
    Error::refused(format!(
        "{me} ({role}) may not take task {task}: it is addressed to {} with intent {}",
        rec.to, rec.intent
    ))
    .hint(not_for_hint(ws, me, task, rec))
}

/// The hint for a holder's move (`status`, `heartbeat`, `check`, `take`) on a task nobody
/// holds: claim it first, when `me` may take it (the claim's own eligibility); else why it
/// may not and the way on that the claim's refusal gives, never a claim that is refused.
pub(crate) fn claim_first(ws: &Workspace, me: &AgentName, rec: &StatusRecord) -> String {
    let task = &rec.task_id;
    if may_claim(ws, me, rec) {
        return format!("claim it first: `circe --agent {me} claim {task}`");
    }
    format!(
        "{me} may not claim it (it is addressed to {} with intent {}): {}",
        rec.to,
        rec.intent,
        not_for_hint(ws, me, task, rec)
    )
}

/// May `me` claim the task `rec` is the record of, as far as its address and intent go?
pub(crate) fn may_claim(ws: &Workspace, me: &AgentName, rec: &StatusRecord) -> bool {
    let role = ws.role_of(me).unwrap_or_default();
    ws.may_take(me, &role, &rec.to, &rec.intent)
}

/// Who may take a task `me` may not, and how to get it to `me` (or anyone) after all.
fn not_for_hint(ws: &Workspace, me: &AgentName, task: &TaskId, rec: &StatusRecord) -> String {
    // Addressed to one agent: nobody else takes it, whatever the registry allows.
    let one = match crate::address::Address::parse(&rec.to) {
        crate::address::Address::Agent(a) => Some(a),
        crate::address::Address::Bare(a) if !ws.registry.is_role(a) => Some(a),
        _ => None,
    };
    match one {
        Some(a) => {
            let alone = match crate::names::AgentName::new(a) {
                Ok(n) if ws.is_retired(&n) => {
                    format!(
                        "it is meant for agent {a} alone, who is retired: nobody will take it as it is"
                    )
                }
                _ => format!("it is meant for agent {a} alone"),
            };
            // A coordinator is given the commands; anyone else, the request to one.
            let c = if ws.is_coordinator(me) { format!("--agent {me} ") } else { String::new() };
            let way = if rec.status.is_owned() {
                // Held still: back in the queue first, then addressed anew.
                format!(
                    "put it back in the queue (`circe {c}release --force {task}`, or `circe reap` once its lease ran out), then address it anew: `circe {c}readdress {task} --to role:ROLE` (or `--to agent:NAME`)"
                )
            } else {
                format!(
                    "address it anew: `circe {c}readdress {task} --to role:ROLE` (or `--to agent:NAME`)"
                )
            };
            if ws.is_coordinator(me) {
                format!("{alone}; {way}")
            } else {
                format!(
                    "{alone}; a coordinator can {way}: ask one, `circe --agent {me} send --to role:coordinator --intent request_help --summary \"please readdress {task}\"`"
                )
            }
        }
        _ => "`circe registry` shows which roles may receive each intent".to_string(),
    }
}

/// The claim's conflict with a live holder: exit 4, with what a program acts on.
fn held_by(task: &TaskId, owner: &str, lease: Option<&str>) -> Error {
    let lease = lease.unwrap_or_default();
    Error::conflict(format!("task {task} is held by {owner}"))
        .detail("task_id", task.to_string())
        .detail("owner", owner.to_string())
        .detail("lease_expires_at", lease.to_string())
        .hint(format!("its lease runs until {lease}"))
}

fn outcome(
    rec: &StatusRecord,
    already_held: bool,
    expired_owner: Option<String>,
    dry_run: bool,
    location: Option<&crate::boxes::Mailbox>,
) -> ClaimOutcome {
    ClaimOutcome {
        task: rec.task_id.clone(),
        owner: rec.owner.clone().unwrap_or_else(|| AgentName::new(CIRCE).expect("a legal name")),
        status: rec.status,
        epoch: rec.epoch,
        attempts: rec.attempts,
        lease_expires_at: rec.lease_expires_at.clone(),
        message: rec.message.clone(),
        already_held,
        expired_owner,
        dry_run,
        location: location.map_or_else(|| "new".to_string(), crate::boxes::Mailbox::label),
        note: None,
    }
}

/// The best waiting task this agent may take: priority, then deadline (none last; one past
/// its deadline is not taken), then time in the queue. When none waits, a task another
/// agent holds whose lease ran out is taken over (priority, then the lease that ran out
/// first), as `claim TASK` would take it over.
pub fn claim_next(
    ws: &Workspace,
    me: &AgentName,
    role: &str,
    ttl: Option<Duration>,
) -> Result<ClaimOutcome> {
    claim_with(ws, me, role, None, ttl, None)
}

fn claim_next_in(
    ws: &Workspace,
    me: &AgentName,
    role: &str,
    ttl: Option<Duration>,
    request: Option<&str>,
    dry: bool,
) -> Result<ClaimOutcome> {
    let who = ws.eligibility(me, role);
    let mut lost = HashSet::new();
    for _ in 0..10_000 {
        let Some(mut tx) = ws.engine.begin_next(&who, &lost)? else {
            return Err(Error::nothing_to_claim(format!(
                "no waiting task that {me} ({role}) may take, nor one whose lease ran out"
            ))
            .hint(format!("`circe --agent {me} wait --for claimable` waits for one; `circe tasks` shows the board")));
        };
        match claim_in(ws, me, role, tx.as_mut(), ttl, request, dry) {
            // Taken meanwhile by another command of the same agent: look on.
            Ok(o) if o.already_held && !tx.finished_cut_off() => {
                lost.insert(tx.task_id().clone());
            }
            Ok(o) => return Ok(o),
            // Retired meanwhile, or the root moved away: no other task either.
            Err(e) if e.details.iter().any(|(k, _)| *k == "retired" || *k == "moved") => {
                return Err(e);
            }
            Err(e) if matches!(e.kind, Kind::Conflict | Kind::Refused | Kind::NotFound) => {
                lost.insert(tx.task_id().clone());
            }
            Err(e) => return Err(e),
        }
    }
    Err(Error::conflict("gave up after 10000 lost races for waiting tasks").hint(format!(
        "more claimers than waiting tasks: run `circe --agent {me} claim --next` again"
    )))
}

/// Return every task whose lease ran out to the queue (or park it), and expire every task
/// whose deadline passed: for cron. (Opening each task's transaction also finishes what a
/// crashed command left on it, a pending outbox included.) The first task that cannot be
/// reaped is the error; `reap_all` goes on past it.
pub fn reap(ws: &Workspace, by: &str) -> Result<Vec<(TaskId, Status)>> {
    let (done, failed) = reap_all(ws, by)?;
    match failed.into_iter().next() {
        Some((_, e)) => Err(e),
        None => Ok(done),
    }
}

/// What `reap_all` did: the tasks reaped with their new status, and those it could not
/// reap with why.
pub type Reaped = (Vec<(TaskId, Status)>, Vec<(TaskId, Error)>);

/// `reap`, going on past a task it cannot reap (a box behind a link, a task another
/// command holds): the tasks reaped, and those that could not be with why. A task whose
/// change was made but whose notice was not delivered counts as reaped, and as failed.
pub fn reap_all(ws: &Workspace, by: &str) -> Result<Reaped> {
    let (mut done, mut failed) = (Vec::new(), Vec::new());
    for task in ws.engine.lease_candidates()? {
        match reap_one(ws, by, &task, &mut done) {
            Ok(()) => {}
            Err(e) => failed.push((task, e)),
        }
    }
    Ok((done, failed))
}

fn reap_one(
    ws: &Workspace,
    by: &str,
    task: &TaskId,
    done: &mut Vec<(TaskId, Status)>,
) -> Result<()> {
    let Some(mut tx) = ws.engine.begin(task, false)? else { return Ok(()) };
    let Some(st) = tx.state().cloned() else { return Ok(()) };
    let now = ws.tx_now(tx.as_ref());
    let lapsed = !st.rec.status.is_terminal() && effects::deadline_passed(&st.rec, now);
    if !lapsed && (!st.rec.status.is_owned() || !effects::lease_expired(&st.rec, now)) {
        return Ok(());
    }
    let (mv, actor) = if lapsed {
        (crate::task::Move::Lapse, Actor::Deadline)
    } else {
        (effects::lease_ran_out(&st.rec, ws.config.max_attempts), Actor::Lease)
    };
    let ctx = MoveCtx {
        by,
        actors: &[actor],
        now,
        lease: ws.config.lease(),
        note: None,
        forced: false,
        handoff: None,
        readdress: None,
    };
    let mut change = effects::apply(mv, &st, &ctx)?;
    notify::ride(ws, &mut change);
    let status = change.record.status;
    let committed = tx.commit(change);
    // A commit whose change stands though what followed it failed (its events, its
    // outbox) reaped the task all the same.
    if committed.as_ref().is_err_and(|e| !e.is_committed()) {
        return committed.map(|_| ());
    }
    done.push((task.clone(), status));
    drop(tx);
    if committed.is_ok() {
        crate::fault::crash_point("reap.committed");
    }
    committed.map(|_| ())
}

/// Where a parked task goes from here: a coordinator (the root's first, when it has one)
/// puts it back.
/// How a parked task goes back to the queue, said to `me`: a coordinator runs it, anyone
/// else asks one (never acts as one).
pub(crate) fn parked_hint(ws: &Workspace, me: &AgentName, task: &crate::names::TaskId) -> String {
    if ws.is_coordinator(me) {
        return format!("put it back: circe --agent {me} release {task} --force");
    }
    format!(
        "a coordinator puts it back (`release {task} --force`): ask one, `circe --agent {me} send --to role:coordinator --intent request_help --summary \"please requeue {task}\"`"
    )
}

/// Refused when `me` was retired after this command looked (`agent retire` racing the
/// claim): its pass over the tasks takes each task's lock, so one that passed this task
/// already was before this claim's lock, and the retirement is read here, under it. (The
/// database engine reads it in the claim's commit statement instead: `retired_now` is
/// `None` there.)
fn still_active(ws: &Workspace, me: &AgentName) -> Result<()> {
    // TEST BUILDS ONLY (CIRCE_TEST_BREAK=claim-unchecked): the claim does not read the
    // retirement again (on either engine), the broken variant.
    let unchecked = crate::fault::test_break("claim-unchecked");
    if !unchecked && ws.engine.retired_now(me)? == Some(true) {
        return Err(crate::engine::retired_claimer(me));
    }
    // TEST BUILDS ONLY (CIRCE_TEST_BREAK=claim-slow-commit): a scene, not a fault: the claim
    // waits between that look and its commit, holding the task's lock.
    if crate::fault::test_break("claim-slow-commit") {
        std::thread::sleep(Duration::from_millis(1500));
    }
    Ok(())
}
