//! Changes an owner (or a coordinator) makes to a held task: status, heartbeat, release,
//! checks. Each re-checks owner and epoch under the task lock (fencing).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::claim::{lease_until, write};
use super::event::Event;
use super::lifecycle::{Actor, Move, Status, decide, move_to};
use super::queue;
use super::record::{self, Checks, StatusRecord};
use super::state::{TaskState, load_reconciled};
use crate::clock;
use crate::error::{Error, Result};
use crate::store::{Mailbox, crash_point};
use crate::workspace::Workspace;

fn load_task(ws: &Workspace, task: &str) -> Result<TaskState> {
    crate::names::check_task_id(task)?;
    load_reconciled(ws, task)?.ok_or_else(|| {
        Error::not_found(format!("no task `{task}`")).hint("`circe tasks` lists the tasks")
    })
}

/// Who `me` is for this task, after the fencing check: owner and/or coordinator.
fn actors(ws: &Workspace, st: &TaskState, me: &str, epoch: Option<u64>) -> Result<Vec<Actor>> {
    if let Some(e) = epoch
        && e != st.rec.epoch
    {
        return Err(Error::conflict(format!(
            "stale epoch {e}: task {} is at epoch {} (owner {})",
            st.rec.task_id,
            st.rec.epoch,
            st.rec.owner.as_deref().unwrap_or("none")
        ))
        .hint(
            "another agent took the task after your lease ran out; claim it again if it is free",
        ));
    }
    let mut a = Vec::new();
    if st.rec.owner.as_deref() == Some(me) {
        a.push(Actor::Owner);
    }
    if ws.is_coordinator(me) {
        a.push(Actor::Coordinator);
    }
    Ok(a)
}

/// The error for a non-owner trying an owner's move.
fn not_owner(st: &TaskState, me: &str) -> Error {
    match st.rec.owner.as_deref() {
        Some(o) => Error::conflict(format!("task {} is held by {o}, not {me}", st.rec.task_id))
            .detail("owner", o.to_string()),
        None => Error::refused(format!(
            "task {} is {} and has no owner",
            st.rec.task_id,
            st.rec.status.as_str()
        ))
        .hint(format!("claim it first: circe --agent {me} claim {}", st.rec.task_id)),
    }
}

/// `circe status <task> <status>`.
pub fn set_status(
    ws: &Workspace,
    me: &str,
    task: &str,
    target: Status,
    note: Option<&str>,
    epoch: Option<u64>,
) -> Result<StatusRecord> {
    if target == Status::New {
        return release(ws, me, task, note, false, epoch);
    }
    let _lock = ws.store.lock_task(task)?;
    let mut st = load_task(ws, task)?;
    let who = actors(ws, &st, me, epoch)?;
    let from = st.rec.status;
    let mv = move_to(from, target)?;
    // A refusal for someone who is not the holder says who holds it.
    let acting_for_task =
        who.contains(&Actor::Owner) || who.contains(&Actor::Coordinator) && from == Status::Parked;
    let to = decide(from, mv, &who).map_err(|e| {
        if !acting_for_task && st.rec.owner.is_some() { not_owner(&st, me) } else { e }
    })?;
    if to == Status::Completed {
        let missing: Vec<&str> =
            st.checks.iter().filter(|(_, v)| !**v).map(|(k, _)| k.as_str()).collect();
        if !missing.is_empty() {
            return Err(Error::refused(format!("task {task} cannot be completed: checks not passed: {}", missing.join(", ")))
                .hint(format!("record them with `circe check {task} --run {} -- <command>` or `circe check {task} NAME=true`", missing[0])));
        }
    }
    let now = clock::stamp(clock::now());
    st.rec.status = to;
    st.rec.updated_at.clone_from(&now);
    if let Some(n) = note {
        st.rec.note = Some(n.to_string());
    }
    if to.is_terminal() {
        st.rec.lease_expires_at = None;
    }
    let owner = if to.is_terminal() { None } else { st.owner.clone() };
    write(ws, &st, owner.as_ref())?;
    crash_point("status.recorded");
    let mut ev =
        Event::new(mv.as_str(), me).task(task).moved(from.as_str(), to.as_str(), st.rec.epoch);
    if let Some(n) = note {
        ev = ev.with("note", n);
    }
    ev.append(&ws.store)?;
    super::announce::status_changed(ws, me, &st.rec)?;
    Ok(st.rec)
}

/// `circe release`: the owner (or a coordinator with `force`) gives the task back to the
/// queue: its message goes back to NEW_MESSAGES with one rename.
pub fn release(
    ws: &Workspace,
    me: &str,
    task: &str,
    reason: Option<&str>,
    force: bool,
    epoch: Option<u64>,
) -> Result<StatusRecord> {
    let _lock = ws.store.lock_task(task)?;
    let mut st = load_task(ws, task)?;
    let mut who = actors(ws, &st, me, epoch)?;
    if !force {
        who.retain(|a| *a != Actor::Coordinator);
    }
    let from = st.rec.status;
    let mv = if from == Status::Parked { Move::Requeue } else { Move::Release };
    let to = decide(from, mv, &who).map_err(|e| {
        if st.rec.owner.is_some() && !who.contains(&Actor::Owner) {
            let err = not_owner(&st, me);
            if ws.is_coordinator(me) {
                err.hint("a coordinator can take it back with --force")
            } else {
                err
            }
        } else if from == Status::Parked && !force {
            e.hint("a parked task goes back with `circe release --force` by a coordinator")
        } else {
            e
        }
    })?;
    if let Some(b) = st.location.clone()
        && b != Mailbox::NewMessages
    {
        ws.store.move_message(&b, &Mailbox::NewMessages, &st.rec.message)?;
    }
    crash_point("release.renamed");
    let old = st.rec.owner.take();
    st.rec.status = to;
    st.rec.epoch += 1;
    st.rec.lease_expires_at = None;
    st.rec.updated_at = clock::stamp(clock::now());
    if mv == Move::Requeue {
        st.rec.attempts = 0;
    }
    st.rec.note = reason.map(str::to_string);
    write(ws, &st, None)?;
    crash_point("release.recorded");
    queue::push(ws, &st.rec)?;
    let mut ev =
        Event::new(mv.as_str(), me).task(task).moved(from.as_str(), to.as_str(), st.rec.epoch);
    if let Some(o) = old {
        ev = ev.with("owner", o);
    }
    if let Some(r) = reason {
        ev = ev.with("reason", r);
    }
    if force {
        ev = ev.with("forced", true);
    }
    ev.append(&ws.store)?;
    super::announce::status_changed(ws, me, &st.rec)?;
    Ok(st.rec)
}

/// `circe heartbeat`: the owner extends its lease. Only the lease fields change.
pub fn heartbeat(
    ws: &Workspace,
    me: &str,
    task: &str,
    ttl: Option<Duration>,
    epoch: Option<u64>,
) -> Result<StatusRecord> {
    let _lock = ws.store.lock_task(task)?;
    let mut st = load_task(ws, task)?;
    let who = actors(ws, &st, me, epoch)?;
    if !who.contains(&Actor::Owner) || !st.rec.status.is_owned() {
        return Err(not_owner(&st, me));
    }
    st.rec.lease_expires_at = Some(lease_until(ttl.unwrap_or_else(|| ws.config.lease()))?);
    let mut owner =
        st.owner.clone().or_else(|| st.rec.owner_record(&st.rec.updated_at, &super::host(), 0));
    if let Some(o) = owner.as_mut() {
        o.lease_expires_at = st.rec.lease_expires_at.clone().unwrap_or_default();
    }
    write(ws, &st, owner.as_ref())?;
    crash_point("heartbeat.recorded");
    Ok(st.rec)
}

/// `circe check <task> NAME=true|false`: record a check by assertion.
pub fn check_set(
    ws: &Workspace,
    me: &str,
    task: &str,
    name: &str,
    value: bool,
    epoch: Option<u64>,
) -> Result<Checks> {
    let _lock = ws.store.lock_task(task)?;
    let mut st = load_task(ws, task)?;
    actors(ws, &st, me, epoch)?;
    record_check(ws, &mut st, me, name, value, Event::new("check", me).with("how", "asserted"))?;
    Ok(st.checks)
}

/// Write one check's result into `.checks` and log it (`ev` carries how it was decided).
fn record_check(
    ws: &Workspace,
    st: &mut TaskState,
    me: &str,
    name: &str,
    passed: bool,
    ev: Event,
) -> Result<()> {
    require_writer(st, me, &actors(ws, st, me, None)?)?;
    st.checks.insert(name.to_string(), passed);
    let task = st.rec.task_id.clone();
    super::board::write(
        ws,
        &task,
        &[("checks", Some(&record::render_checks(&st.checks)))],
        Some((&st.rec, &st.checks)),
    )?;
    crash_point("check.recorded");
    ev.task(&task).with("check", name).with("passed", passed).append(&ws.store)
}

fn require_writer(st: &TaskState, me: &str, who: &[Actor]) -> Result<()> {
    if who.contains(&Actor::Owner) && st.rec.status.is_owned() {
        return Ok(());
    }
    if st.rec.status.is_owned() {
        Err(not_owner(st, me))
    } else {
        Err(Error::refused(format!(
            "task {} is {}: checks are recorded while it is held",
            st.rec.task_id,
            st.rec.status.as_str()
        )))
    }
}

/// The result of `circe check --run`.
#[derive(Debug, Clone, Serialize)]
pub struct CheckRun {
    pub task: String,
    pub check: String,
    pub passed: bool,
    pub exit_code: Option<i32>,
    pub command: Vec<String>,
    pub seconds: f64,
    pub checks: Checks,
}

/// `circe check <task> --run NAME -- CMD...`: run the command (no lock held while it
/// runs), then record pass/fail under the lock only if the task still has the same owner
/// and epoch: a holder whose lease ran out meanwhile is fenced out.
pub fn check_run(
    ws: &Workspace,
    me: &str,
    task: &str,
    name: &str,
    cmd: &[String],
    epoch: Option<u64>,
) -> Result<CheckRun> {
    let start_epoch = {
        let _lock = ws.store.lock_task(task)?;
        let st = load_task(ws, task)?;
        let who = actors(ws, &st, me, epoch)?;
        require_writer(&st, me, &who)?;
        st.rec.epoch
    };
    let (prog, args) = cmd.split_first().ok_or_else(|| {
        Error::usage("no command after --").hint("circe check TASK --run NAME -- cargo test")
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
    crash_point("check.ran");
    let _lock = ws.store.lock_task(task)?;
    let mut st = load_task(ws, task)?;
    actors(ws, &st, me, Some(start_epoch)).map_err(|e| {
        e.hint("the check ran, but the task changed hands meanwhile: its result was not recorded")
    })?;
    let ev = Event::new("check", me)
        .with("how", "run")
        .with("command", cmd.to_vec())
        .with("exit_code", status.code())
        .with("seconds", (seconds * 1000.0).round() / 1000.0);
    record_check(ws, &mut st, me, name, passed, ev)?;
    Ok(CheckRun {
        task: task.to_string(),
        check: name.to_string(),
        passed,
        exit_code: status.code(),
        command: cmd.to_vec(),
        seconds,
        checks: st.checks,
    })
}
