//! Changes an owner (or a coordinator) makes to a held task: status, heartbeat, release,
//! checks. Each runs in the task's transaction and re-checks owner and epoch (fencing).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::{claim, notify};
use crate::config::Announce;
use crate::engine::TaskTx;
use crate::error::{Error, Result};
use crate::event::{Event, EventKind};
use crate::names::{AgentName, CheckName, TaskId};
use crate::task::effects::{self, MoveCtx};
use crate::task::lifecycle::move_to;
use crate::task::{Actor, Checks, Move, Notice, Outgoing, Status, StatusRecord, TaskState};
use crate::workspace::Workspace;

/// A `--reason` is the audit trail of what it allows: one that says nothing is refused.
pub(super) fn blank_reason(reason: Option<&str>) -> Result<()> {
    if reason.is_some_and(|r| r.trim().is_empty()) {
        return Err(Error::refused("--reason is blank: it is what the event log keeps of why")
            .hint("say why, e.g. --reason \"reviewed in the call\""));
    }
    Ok(())
}

/// Open the task's transaction; exit 5 when there is no such task.
fn begin<'a>(ws: &'a Workspace, task: &TaskId) -> Result<Box<dyn TaskTx + 'a>> {
    ws.engine.begin(task, false)?.ok_or_else(|| super::missing_task(ws, task))
}

/// The task as its transaction sees it, with every check its intent requires now (the
/// registry) that its `.checks` does not list counted as not passed: a record lost or cut by
/// hand, or a check the team added since the task opened, never lets a task complete
/// unproven.
fn state(ws: &Workspace, tx: &dyn TaskTx) -> Result<TaskState> {
    let mut st = tx.state().cloned().ok_or_else(|| crate::engine::no_task(tx.task_id()))?;
    ws.demand_checks(&mut st);
    Ok(st)
}

/// Who `me` is for this task, after the fencing check: owner and/or coordinator.
fn actors(
    ws: &Workspace,
    st: &TaskState,
    me: &AgentName,
    epoch: Option<u64>,
) -> Result<Vec<Actor>> {
    // Test builds only (CIRCE_TEST_BREAK=no-fence): no owner or epoch check, so the
    // fencing checkers can be shown to catch a stale owner's write.
    if crate::fault::test_break("no-fence") {
        return Ok(vec![Actor::Owner]);
    }
    if let Some(e) = epoch
        && e != st.rec.epoch
    {
        let hint = if e > st.rec.epoch {
            format!(
                "the task has never been at epoch {e}: pass the epoch your claim printed (`circe show {}` shows the current one)",
                st.rec.task_id
            )
        } else if st.rec.owner.as_ref() == Some(me) && st.rec.status.is_owned() {
            // Held by the caller still, at another epoch: its claim is a later one.
            format!(
                "you hold it at epoch {} (a later claim of yours): pass that epoch",
                st.rec.epoch
            )
        } else if st.rec.status.is_owned() {
            "another agent took the task after your lease ran out; claim it again if it is free"
                .to_string()
        } else {
            let again = if claim::may_claim(ws, me, &st.rec) {
                format!(
                    ", and a waiting task is claimed again with `circe --agent {me} claim {}`",
                    st.rec.task_id
                )
            } else {
                String::new()
            };
            format!(
                "no one holds it now (it is {}: a lease that ran out, a release or a reap put it there); `circe show {}` tells its story{again}",
                st.rec.status.as_str(),
                st.rec.task_id,
            )
        };
        let err = Error::conflict(format!(
            "stale epoch {e}: task {} is at epoch {} (owner {})",
            st.rec.task_id,
            st.rec.epoch,
            st.rec.owner.as_deref().unwrap_or("none")
        ))
        .detail("epoch", st.rec.epoch);
        // As every conflict over who holds a task says it: its holder.
        let err = match st.rec.owner.as_ref().filter(|_| st.rec.status.is_owned()) {
            Some(o) => err.detail("owner", o.to_string()),
            None => err,
        };
        return Err(err.hint(hint));
    }
    let mut a = Vec::new();
    if st.rec.owner.as_ref() == Some(me) && st.rec.status.is_owned() {
        a.push(Actor::Owner);
    }
    if ws.is_coordinator(me) {
        a.push(Actor::Coordinator);
    }
    Ok(a)
}

/// The error for someone who is not the holder trying a holder's move.
fn not_owner(ws: &Workspace, st: &TaskState, me: &AgentName) -> Error {
    let task = &st.rec.task_id;
    match (st.rec.owner.as_deref(), st.rec.status.is_owned()) {
        // The details a claim's conflict gives, for a program acting on either.
        (Some(o), true) => {
            let lease = st.rec.lease_expires_at.clone().unwrap_or_default();
            Error::conflict(format!("task {task} is held by {o}, not {me}"))
                .detail("task_id", task.to_string())
                .detail("owner", o.to_string())
                .detail("lease_expires_at", lease.clone())
                .hint(format!("only its holder moves it; {o}'s lease runs until {lease}"))
        }
        // Waiting again after it was held: said, for an agent that held it then.
        (_, _) if st.rec.status == Status::New && st.rec.attempts > 0 => Error::refused(format!(
            "task {task} is new: no one holds it (it went back to the queue: a lease that ran out, a release or a reap put it there)"
        ))
        .hint(if claim::may_claim(ws, me, &st.rec) {
            format!("if you still work on it, {}", claim::claim_first(ws, me, &st.rec))
        } else {
            claim::claim_first(ws, me, &st.rec)
        }),
        (_, _) => Error::refused(format!("task {task} is {}", st.rec.status.as_str())).hint(
            if st.rec.status == Status::New {
                claim::claim_first(ws, me, &st.rec)
            } else {
                "it is not held by anyone; `circe show` tells its story".to_string()
            },
        ),
    }
}

/// Commit a change and send the notices it carries (and the status update `announce:
/// inbox` asks for).
fn commit(
    ws: &Workspace,
    tx: &mut dyn TaskTx,
    change: crate::task::Change,
) -> Result<StatusRecord> {
    commit_logged(ws, tx, change).map(|(rec, _)| rec)
}

/// `commit`, returning the events logged too. The notices ride in the change's outbox.
fn commit_logged(
    ws: &Workspace,
    tx: &mut dyn TaskTx,
    mut change: crate::task::Change,
) -> Result<(StatusRecord, Vec<Event>)> {
    let announce = ws.config.announce == Announce::Inbox && !change.events.is_empty();
    if announce {
        let rec = &change.record;
        change.notices.push(Notice {
            intent: "status_update",
            text: format!(
                "task {} is now {} (epoch {})",
                rec.task_id,
                rec.status.as_str(),
                rec.epoch
            ),
            also: None,
        });
    }
    notify::ride(ws, &mut change);
    let events = tx.commit(change)?;
    let st = state(ws, tx)?;
    Ok((st.rec, events))
}

/// `circe status <task> <status>`. Routing rules for `me` reaching the new status send their
/// messages with the change (exactly once).
pub fn set_status(
    ws: &Workspace,
    me: &AgentName,
    task: &TaskId,
    target: Status,
    note: Option<&str>,
    epoch: Option<u64>,
) -> Result<StatusRecord> {
    set_status_idempotent(ws, me, task, target, note, epoch).map(|(rec, _)| rec)
}

/// `set_status`, and whether the task had the status already. Asking for the status a task
/// has is no move and no error: the owner (or a coordinator) of a held task, and anyone for
/// a waiting or finished one, gets the record back unchanged and `true`.
pub fn set_status_idempotent(
    ws: &Workspace,
    me: &AgentName,
    task: &TaskId,
    target: Status,
    note: Option<&str>,
    epoch: Option<u64>,
) -> Result<(StatusRecord, bool)> {
    status_move(ws, me, task, target, note, epoch, Vec::new())
        .map(|(rec, _, already)| (rec, already))
        .map_err(|e| declared_check_hint(ws, me, task, e))
}

/// `set_status` that also sends `outbox` (a `task-complete` message) with the change, each
/// message exactly once; returns the events logged. A task that has the status already is
/// refused here: what the outbox says is not sent twice, nor dropped.
pub fn set_status_sending(
    ws: &Workspace,
    me: &AgentName,
    task: &TaskId,
    target: Status,
    note: Option<&str>,
    epoch: Option<u64>,
    outbox: Vec<Outgoing>,
) -> Result<(StatusRecord, Vec<Event>)> {
    status_move(ws, me, task, target, note, epoch, outbox)
        .map(|(rec, events, _)| (rec, events))
        .map_err(|e| declared_check_hint(ws, me, task, e))
}

/// A completion refused for a check not passed tells its holder to run the check; when
/// circe.yaml declares the check's command, `--run NAME` alone (the lifecycle, which knows no
/// configuration, hints at the command to give).
fn declared_check_hint(
    ws: &Workspace,
    me: &AgentName,
    task: &TaskId,
    e: crate::error::Error,
) -> crate::error::Error {
    let first = e.details.iter().find(|(k, _)| *k == "not_passed").and_then(|(_, v)| v.get(0));
    let Some(first) = first.and_then(serde_json::Value::as_str) else { return e };
    // The lifecycle's hint to the holder, as `run_them` wrote it (another actor's differs).
    let (me, task) = (me.as_str(), task.as_str());
    let to_holder = e.hint == Some(crate::task::effects::run_them(me, task, first, false));
    if !to_holder || !declared_check(ws, first) {
        return e;
    }
    let hint = crate::task::effects::run_them(me, task, first, true);
    let mut e = e;
    e.hint = Some(hint);
    e
}

/// Does circe.yaml declare the command that proves `check`? Then it is recorded only by
/// running that command (`--run NAME`, nothing after it), and every hint says that form.
pub fn declared_check(ws: &Workspace, check: &str) -> bool {
    ws.config.checks.contains_key(check)
}

/// The command that records `check` of `task` by running it, as `me` (the completion
/// refusal's form: `--run NAME` alone for a declared check).
pub fn run_check_hint(ws: &Workspace, me: &AgentName, task: &str, check: &str) -> String {
    crate::task::effects::run_check(me.as_str(), task, check, declared_check(ws, check))
}

/// The check of `task` a hint names: its first not passed (counting one its intent requires
/// that `.checks` does not list), else its first; `None` when the task cannot be read or
/// has no checks.
pub fn check_to_run(ws: &Workspace, task: &TaskId) -> Option<CheckName> {
    let TaskState { rec, mut checks, .. } = ws.engine.peek(task).ok()??;
    if let Some(intent) = ws.registry.intent(rec.intent.as_str()) {
        for c in intent.required_checks.iter().filter_map(|c| CheckName::new(c).ok()) {
            checks.entry(c).or_insert(false);
        }
    }
    let first = checks.iter().find(|(_, v)| !**v).or_else(|| checks.iter().next());
    first.map(|(k, _)| k.clone())
}

/// A status move, with its outbox; the record, the events logged, and whether the task had
/// the status already (only without an outbox).
fn status_move(
    ws: &Workspace,
    me: &AgentName,
    task: &TaskId,
    target: Status,
    note: Option<&str>,
    epoch: Option<u64>,
    outbox: Vec<Outgoing>,
) -> Result<(StatusRecord, Vec<Event>, bool)> {
    let mut tx = begin(ws, task)?;
    let st = state(ws, tx.as_ref())?;
    let who = actors(ws, &st, me, epoch)?;
    let from = st.rec.status;
    if from == target && outbox.is_empty() {
        if from.is_owned() && who.is_empty() {
            return Err(not_owner(ws, &st, me));
        }
        return Ok((st.rec, Vec::new(), true));
    }
    // A holder's move on a waiting task by someone who holds nothing: said as such (its
    // lease may have run out), not as a move the table lacks.
    let holders_move =
        matches!(target, Status::InProgress | Status::Blocked | Status::Completed | Status::Failed);
    if from == Status::New && who.is_empty() && holders_move {
        return Err(not_owner(ws, &st, me));
    }
    if target == Status::New && outbox.is_empty() {
        drop(tx);
        return release(ws, me, task, note, false, epoch)
            .map(|(r, already)| (r, Vec::new(), already));
    }
    let mv = move_to(from, target).map_err(|e| match target {
        // `status T claimed` is a claim: said as the claim would answer it.
        Status::Claimed if !claim::may_claim(ws, me, &st.rec) => {
            e.hint(claim::claim_first(ws, me, &st.rec))
        }
        Status::Claimed => e.hint(format!("run `circe --agent {me} claim {task}`")),
        // The lifecycle's hint names no agent or task: said for this one.
        Status::Parked => e.hint(format!(
            "`circe --agent {me} status {task} blocked` says it waits on something; `circe --agent {me} release {task}` gives it back"
        )),
        _ => e,
    })?;
    let ctx = MoveCtx {
        by: me.as_str(),
        actors: &who,
        now: ws.tx_now(tx.as_ref()),
        lease: ws.config.lease(),
        note,
        forced: false,
        handoff: None,
        readdress: None,
    };
    let change = effects::apply(mv, &st, &ctx).map_err(|e| {
        // A refusal for someone who is not the holder says who holds it.
        let acting = who.contains(&Actor::Owner) || who.contains(&Actor::Coordinator);
        if !acting && st.rec.owner.is_some() && st.rec.status.is_owned() {
            not_owner(ws, &st, me)
        } else if mv == Move::Complete && from == Status::Claimed && who.contains(&Actor::Owner) {
            Error::refused(format!("task {task} is claimed: start it before completing it")).hint(
                format!("circe --agent {me} status {task} in_progress, then circe --agent {me} status {task} completed"),
            )
        } else if let Some(mid) = crate::task::lifecycle::way_round(from, mv, &who) {
            // The commands of the way round, for this agent and task.
            e.hint(format!(
                "move it to {} first: circe --agent {me} status {task} {}, then circe --agent {me} status {task} {}",
                mid.as_str(),
                mid.as_str(),
                target.as_str()
            ))
        } else {
            e
        }
    })?;
    // The checks passed as `.checks` says: the log must not say otherwise.
    if mv == Move::Complete {
        super::proof::refuse_unproven(ws, &st, me.as_str())?;
    }
    let mut change = change;
    let reply_to = outbox.first().map(|o| o.msg_id.clone());
    change.outbox = outbox;
    change.outbox.extend(super::route::for_move(
        ws,
        me,
        change.record.status,
        task,
        reply_to.as_deref(),
    ));
    commit_logged(ws, tx.as_mut(), change).map(|(rec, events)| (rec, events, false))
}

/// `circe release`: the owner (or a coordinator with `force`) gives the task back to the
/// queue: its message goes back to NEW_MESSAGES with one rename. A task already waiting is
/// answered as it is, with `true` (released already: nothing to do, as the same status
/// again is).
pub fn release(
    ws: &Workspace,
    me: &AgentName,
    task: &TaskId,
    reason: Option<&str>,
    force: bool,
    epoch: Option<u64>,
) -> Result<(StatusRecord, bool)> {
    blank_reason(reason)?;
    let mut tx = begin(ws, task)?;
    let st = state(ws, tx.as_ref())?;
    // The fence first: a stale `--epoch` is exit 4 even on a task waiting again.
    let mut who = actors(ws, &st, me, epoch)?;
    if st.rec.status == Status::New {
        return Ok((st.rec, true));
    }
    // A task a coordinator could release (held, or parked): the flag is the coordinator's.
    // A finished one falls through to the lifecycle's refusal (final for anyone).
    let releasable = st.rec.status.is_owned() || st.rec.status == Status::Parked;
    if force && releasable && !ws.is_coordinator(me) && !who.contains(&Actor::Owner) {
        return Err(force_refused(ws, &st, me));
    }
    if !force {
        who.retain(|a| *a != Actor::Coordinator);
    }
    let from = st.rec.status;
    let mv = if from == Status::Parked { Move::Requeue } else { Move::Release };
    let forced = force && !who.contains(&Actor::Owner);
    let ctx = MoveCtx {
        by: me.as_str(),
        actors: &who,
        now: ws.tx_now(tx.as_ref()),
        lease: ws.config.lease(),
        note: reason,
        forced,
        handoff: None,
        readdress: None,
    };
    let change = effects::apply(mv, &st, &ctx).map_err(|e| {
        if from.is_owned() && !who.contains(&Actor::Owner) {
            let err = not_owner(ws, &st, me);
            if ws.is_coordinator(me) {
                err.hint(format!(
                    "as a coordinator you can take it back: circe --agent {me} release {task} --force"
                ))
            } else {
                err
            }
        } else if from == Status::Parked && !force && ws.is_coordinator(me) {
            // The coordinator it takes, without the flag that says it means it.
            Error::refused(format!("task {task} is parked: a coordinator requeues it with --force"))
                .hint(format!("circe --agent {me} release {task} --force"))
        } else if from == Status::Parked && !force {
            e.hint(super::claim::parked_hint(ws, me, task))
        } else {
            e
        }
    })?;
    commit(ws, tx.as_mut(), change).map(|rec| (rec, false))
}

/// `release --force` by an agent that is no coordinator, of a task it does not hold: the
/// flag is a coordinator's (a rule, exit 3), and the hint says who can move the task.
fn force_refused(ws: &Workspace, st: &TaskState, me: &AgentName) -> Error {
    let task = &st.rec.task_id;
    let err = Error::refused(format!(
        "`--force` is for a coordinator, and {me} is not one: it cannot release task {task}"
    ))
    .detail("task_id", task.to_string());
    match st.rec.owner.as_ref().filter(|_| st.rec.status.is_owned()) {
        Some(o) => {
            let lease = st.rec.lease_expires_at.clone().unwrap_or_default();
            let err = err.detail("owner", o.to_string()).detail("lease_expires_at", lease.clone());
            err.hint(format!(
                "{o} holds it (its lease runs until {lease}) and may release it; a coordinator may take it back: ask one, `circe --agent {me} send --to role:coordinator --intent request_help --summary \"please release {task}\"`"
            ))
        }
        None => err.hint(super::claim::parked_hint(ws, me, task)),
    }
}

/// `circe heartbeat`: the owner extends its lease. Only the lease fields change.
pub fn heartbeat(
    ws: &Workspace,
    me: &AgentName,
    task: &TaskId,
    ttl: Option<Duration>,
    epoch: Option<u64>,
) -> Result<StatusRecord> {
    let mut tx = begin(ws, task)?;
    let st = state(ws, tx.as_ref())?;
    let who = actors(ws, &st, me, epoch)?;
    if st.rec.status == Status::New && st.rec.attempts > 0 {
        return Err(not_owner(ws, &st, me));
    }
    if !st.rec.status.is_owned() {
        return Err(Error::refused(format!(
            "task {task} is {}: no lease runs, so there is none to extend",
            st.rec.status.as_str()
        ))
        .hint(if st.rec.status == Status::New {
            claim::claim_first(ws, me, &st.rec)
        } else {
            "a heartbeat extends the lease of a task you hold".to_string()
        }));
    }
    if !who.contains(&Actor::Owner) {
        return Err(not_owner(ws, &st, me));
    }
    let change =
        effects::heartbeat(&st, ws.tx_now(tx.as_ref()), ttl.unwrap_or_else(|| ws.config.lease()))?;
    tx.commit(change)?;
    Ok(state(ws, tx.as_ref())?.rec)
}

/// Only the holder records checks, and only while it holds the task.
fn require_holder(
    ws: &Workspace,
    st: &TaskState,
    me: &AgentName,
    epoch: Option<u64>,
) -> Result<()> {
    if actors(ws, st, me, epoch)?.contains(&Actor::Owner) {
        return Ok(());
    }
    if st.rec.status.is_owned() {
        Err(not_owner(ws, st, me))
    } else {
        let id = &st.rec.task_id;
        let hint = match st.rec.status {
            Status::New => claim::claim_first(ws, me, &st.rec),
            _ => format!("`circe show {id}` says what became of it"),
        };
        Err(Error::refused(format!(
            "task {id} is {}: checks are recorded while it is held",
            st.rec.status.as_str()
        ))
        .hint(hint))
    }
}

/// A check must be one of the task's (`.checks`): a mistyped name is refused with the list.
fn require_check(st: &TaskState, name: &CheckName) -> Result<()> {
    if st.checks.contains_key(name) {
        return Ok(());
    }
    let names: Vec<&str> = st.checks.keys().map(CheckName::as_str).collect();
    let task = &st.rec.task_id;
    let e = Error::refused(format!("task {task} has no check `{name}`"));
    Err(match crate::suggest::closest(name.as_str(), names.iter().copied()) {
        Some(c) => e.hint(format!("did you mean `{c}`? its checks: {}", names.join(", "))),
        None if names.is_empty() => e.hint("it has no checks: its intent requires none"),
        None => e.hint(format!("its checks: {}", names.join(", "))),
    })
}

/// `circe check <task> NAME=true|false`: record a check by assertion (no reason given).
pub fn check_set(
    ws: &Workspace,
    me: &AgentName,
    task: &TaskId,
    name: &CheckName,
    value: bool,
    epoch: Option<u64>,
) -> Result<Checks> {
    check_assert(ws, me, task, name, value, None, epoch)
}

/// Record a check by assertion. A check declared in circe.yaml with its command is recorded
/// only by running it, unless a coordinator asserts it with a reason (logged in the event);
/// a coordinator with a reason may also assert a check of a task it does not hold.
pub fn check_assert(
    ws: &Workspace,
    me: &AgentName,
    task: &TaskId,
    name: &CheckName,
    value: bool,
    reason: Option<&str>,
    epoch: Option<u64>,
) -> Result<Checks> {
    blank_reason(reason)?;
    let mut tx = begin(ws, task)?;
    let st = state(ws, tx.as_ref())?;
    let coordinator = ws.is_coordinator(me) && reason.is_some();
    if !coordinator {
        require_holder(ws, &st, me, epoch).map_err(|e| {
            // A coordinator lacks only the reason that makes the assertion its to make (one
            // that named an epoch is told of it as any holder is).
            if !ws.is_coordinator(me) || epoch.is_some() {
                return e;
            }
            let v = if value { "true" } else { "false" };
            Error::refused(format!(
                "a coordinator records a check of a task it does not hold only with a reason: task {task} is {}",
                st.rec.status.as_str()
            ))
            .hint(format!("say why: circe --agent {me} check {task} {name}={v} --reason \"...\""))
        })?;
    }
    require_check(&st, name)?;
    if let Some(d) = ws.config.checks.get(name.as_str())
        && !coordinator
    {
        return Err(Error::refused(format!(
            "check {name} is declared in circe.yaml with its command: it is recorded by running it"
        ))
        .hint(format!("circe --agent {me} check {task} --run {name}   (runs `{}`)", d.run)));
    }
    // The transaction's time: the root's clock (a database server's), as every move's.
    let mut ev = Event::new(EventKind::Check, me.as_str(), crate::clock::stamp_ms(tx.now()));
    ev.how = Some("asserted".into());
    ev.reason = reason.map(str::to_string);
    tx.commit(effects::record_check(&st, name, value, ev))?;
    Ok(state(ws, tx.as_ref())?.checks)
}

/// The result of `circe check --run`.
#[derive(Debug, Clone, Serialize)]
pub struct CheckRun {
    pub task: TaskId,
    pub check: CheckName,
    pub passed: bool,
    pub exit_code: Option<i32>,
    pub command: Vec<String>,
    pub seconds: f64,
    pub checks: Checks,
}

/// `circe check <task> --run NAME -- CMD...`: run the command (no transaction open while it
/// runs), then record pass/fail only if the task still has the same owner and epoch: a
/// holder whose lease ran out meanwhile is fenced out.
pub fn check_run(
    ws: &Workspace,
    me: &AgentName,
    task: &TaskId,
    name: &CheckName,
    cmd: &[String],
    epoch: Option<u64>,
) -> Result<CheckRun> {
    let start_epoch = {
        let tx = begin(ws, task)?;
        let st = state(ws, tx.as_ref())?;
        require_holder(ws, &st, me, epoch)?;
        require_check(&st, name)?;
        st.rec.epoch
    };
    // A declared check runs its declared command, and only that.
    let declared: Option<Vec<String>> = ws
        .config
        .checks
        .get(name.as_str())
        .map(|d| vec!["sh".to_string(), "-c".to_string(), d.run.clone()]);
    let cmd: &[String] = match (&declared, cmd.is_empty()) {
        (Some(d), true) => d,
        (Some(d), false) => {
            return Err(Error::refused(format!(
                "check {name} is declared in circe.yaml with its own command (`{}`)",
                d[2]
            ))
            .hint(format!(
                "circe --agent {me} check {task} --run {name}   (no command after it)"
            )));
        }
        (None, _) => cmd,
    };
    let (prog, args) = cmd.split_first().ok_or_else(|| {
        Error::usage(format!("--run {name} needs a command after --"))
            .hint(format!("circe --agent {me} check {task} --run {name} -- cargo test"))
    })?;
    let started = Instant::now();
    // stdout is circe's data channel: the command's output goes to stderr.
    let status = Command::new(prog)
        .args(args)
        .stdin(Stdio::null())
        .stdout(std::io::stderr())
        .status()
        .map_err(|e| {
            Error::not_found(format!("cannot run `{prog}`: {e}")).hint("check the command after --")
        })?;
    let seconds = started.elapsed().as_secs_f64();
    let passed = status.success();
    crate::fault::crash_point("check.ran");
    let mut tx = begin(ws, task)?;
    let st = state(ws, tx.as_ref())?;
    require_holder(ws, &st, me, Some(start_epoch)).map_err(|e| {
        e.hint("the check ran, but the task changed hands meanwhile: its result was not recorded")
    })?;
    // The transaction's time: the root's clock (a database server's), as every move's.
    let mut ev = Event::new(EventKind::Check, me.as_str(), crate::clock::stamp_ms(tx.now()));
    ev.how = Some("run".into());
    ev.command = Some(cmd.to_vec());
    ev.exit_code = status.code();
    // To the millisecond, as every time circe writes: the event and the command's answer
    // say the same.
    let seconds = (seconds * 1000.0).round() / 1000.0;
    ev.seconds = Some(seconds);
    tx.commit(effects::record_check(&st, name, passed, ev))?;
    Ok(CheckRun {
        task: task.clone(),
        check: name.clone(),
        passed,
        exit_code: status.code(),
        command: cmd.to_vec(),
        seconds,
        checks: state(ws, tx.as_ref())?.checks,
    })
}
