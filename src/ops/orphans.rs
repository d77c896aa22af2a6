//! Retired agents and their orphans (PROTOCOLS.md section 16): `circe agent retire A` gives
//! A's held tasks back to the queue and keeps what reaches A as orphans; a coordinator sees
//! them (`circe orphans`, `circe doctor`) and hands each on (`circe orphans redeliver`).

use std::collections::HashMap;

use serde::Serialize;

use crate::boxes::Mailbox;
use crate::clock;
use crate::error::{Error, Result};
use crate::event::{Event, EventKind};
use crate::message::Message;
use crate::names::{AgentName, TaskId};
use crate::task::effects::{self, MoveCtx};
use crate::task::{Actor, Move, Status};
use crate::workspace::Workspace;

fn coordinator_only(ws: &Workspace, me: &AgentName, what: &str) -> Result<()> {
    if ws.is_coordinator(me) {
        return Ok(());
    }
    // The way on is to ask one, never to act as one.
    Err(Error::refused(format!("only a coordinator (role coordinator or rooster) may {what}")).hint(
        format!(
            "ask a coordinator to: `circe --agent {me} send --to role:coordinator --intent request_help --summary \"please {what}\"`"
        ),
    ))
}

/// What retiring an agent did.
#[derive(Debug, Clone, Serialize)]
pub struct Retired {
    pub agent: AgentName,
    /// `false`: it was retired already (what it still held is released all the same:
    /// `released`).
    pub retired: bool,
    /// Its held tasks, now back in the queue.
    pub released: Vec<TaskId>,
    /// Its orphans now: messages left in its boxes, and waiting tasks addressed to it.
    #[serde(rename = "orphan_count")]
    pub orphans: usize,
}

/// Retire `agent`: it acts no more, its held tasks go back to the queue, and what lies in its
/// boxes (or reaches it later) is kept as orphans for a coordinator.
pub fn retire(ws: &Workspace, me: &AgentName, agent: &AgentName) -> Result<Retired> {
    coordinator_only(ws, me, "retire an agent")?;
    if agent == me {
        return Err(
            Error::refused("an agent cannot retire itself").hint("another coordinator retires it")
        );
    }
    if !ws.is_agent(agent) {
        return Err(Error::not_found(format!("no agent `{agent}`"))
            .hint("`circe agent list` shows the agents"));
    }
    let retired = ws.engine.retire_agent(agent, &clock::stamp(ws.now()))?;
    crate::fault::crash_point("retire.marked");
    ws.forget_retired();
    let mut released = Vec::new();
    let mut failed = Vec::new();
    // A task the agent may be claiming right now (one waiting that it may take, or another's
    // whose lease ran out) is looked at again under its lock, where the engine's claim reads
    // the retirement under that lock too: a claim that began before the retirement either
    // committed before this look, or is refused.
    // (TEST BUILDS ONLY: `retire-unlocked` looks without the lock, the broken variant.)
    let locked_look = !crate::fault::test_break("retire-unlocked");
    let role = ws.role_of(agent).unwrap_or_default();
    let now = ws.root_now()?;
    let holds = |task: &TaskId| -> Result<bool> {
        let held = |st: &crate::task::TaskState| {
            st.rec.status.is_owned() && st.rec.owner.as_ref() == Some(agent)
        };
        let Some(st) = ws.engine.peek(task)? else { return Ok(false) };
        let r = &st.rec;
        let waiting = r.status == crate::task::Status::New
            || r.status.is_owned() && crate::task::effects::lease_expired(r, now);
        let claimable = waiting && ws.may_take(agent, &role, &r.to, &r.intent);
        if held(&st) || !locked_look || !claimable {
            return Ok(held(&st));
        }
        let Some(tx) = ws.engine.begin(task, false)? else { return Ok(false) };
        Ok(tx.state().is_some_and(held))
    };
    for task in ws.engine.task_ids()? {
        // A task that cannot be read is said once the rest is done.
        let held = match holds(&task) {
            Ok(h) => h,
            Err(e) => {
                failed.push((task, e));
                continue;
            }
        };
        if held {
            let reason = format!("{agent} retired");
            match super::release(ws, me, &task, Some(&reason), true, None) {
                Ok(_) => released.push(task),
                // Finished (or released) by its holder meanwhile: nothing left to release.
                Err(_) if matches!(holds(&task), Ok(false)) => {}
                // Go on with the others; said once the retirement is logged.
                Err(e) => failed.push((task, e)),
            }
        }
    }
    // Counted for the report (a task that cannot be read, said below, leaves it unknown: 0):
    // the messages in its boxes, and the waiting tasks addressed to it (a task it held was
    // released above, and still names it when it was addressed to it).
    let orphans = list(ws).map_or(0, |l| {
        let messages = l.messages.iter().filter(|o| o.agent == *agent).count();
        let tasks = l.tasks.iter().filter(|t| retired_addressee(ws, &t.to) == Some(agent)).count();
        messages + tasks
    });
    // Logged when it retired, when a run again released what a cut-off one left, and when
    // a run cut off between the mark and its event left the log without it.
    if retired || !released.is_empty() || !retire_logged(ws, agent)? {
        let mut ev = Event::now(EventKind::Retire, me);
        ev.owner = Some(agent.to_string());
        ev.note = Some(format!(
            "{} released, {}",
            counted(released.len(), "task", "tasks"),
            counted(orphans, "orphan", "orphans")
        ));
        ws.engine.append_events(vec![ev])?;
    }
    let all: Vec<String> = failed.iter().map(|(t, _)| t.to_string()).collect();
    if let Some((task, e)) = failed.into_iter().next() {
        return Err(Error {
            message: format!(
                "{agent} is retired, but {} task(s) could not be looked at or released ({}): {task}: {}",
                all.len(),
                all.join(", "),
                e.message
            ),
            hint: Some(format!(
                "run `circe --agent {me} agent retire {agent}` again: it releases what is left"
            )),
            ..e
        });
    }
    Ok(Retired { agent: agent.clone(), retired, released, orphans })
}

/// `1 task`, `2 tasks`.
pub fn counted(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The agent a task's address `to` names (by its bare name or as `agent:NAME`; a bare
/// name that is a role's is the role), when that agent is retired: the task is an orphan
/// while it waits.
pub fn retired_addressee<'a>(ws: &Workspace, to: &'a str) -> Option<&'a str> {
    let agent = crate::address::Address::parse(to).agent(|n| ws.registry.is_role(n))?;
    let name = AgentName::new(agent).ok()?;
    ws.is_retired(&name).then_some(agent)
}

/// Whether the log tells of `agent`'s retirement: a retirement cut off between its mark and
/// its event has none, and the run again logs it. Reads back the `retire` lines alone, as
/// far as the retirement's time (a minute before it: the mark and the event come from one
/// process's clock). When the log still held here starts after that, later than its first
/// event (the archive took what came before), it cannot tell, and says logged: an event
/// missing stays missing rather than one logged twice.
fn retire_logged(ws: &Workspace, agent: &AgentName) -> Result<bool> {
    const BATCH: usize = 1024;
    let at = ws.engine.retirements()?.into_iter().find(|(a, _)| a == agent);
    let Some(since) =
        at.and_then(|(_, t)| clock::parse(&t)).map(|t| t - chrono::Duration::minutes(1))
    else {
        return Ok(true);
    };
    let older = |e: &Event| clock::parse(&e.ts).is_some_and(|t| t < since);
    // The log held here reaches back to its start or before the retirement, or the scan
    // cannot tell.
    let first = ws.engine.read_events(crate::event::Cursor::START, 1)?;
    if !first.first().is_some_and(|e| e.id == 1 || older(e)) {
        return Ok(true);
    }
    let naming = [format!("\"event\":\"{}\"", EventKind::Retire.as_str())];
    let mut before = None;
    loop {
        let batch = ws.engine.read_events_back_naming(before, BATCH, &naming)?;
        let of_agent =
            |e: &Event| e.event == EventKind::Retire && e.owner.as_deref() == Some(agent.as_str());
        if batch.iter().any(of_agent) {
            return Ok(true);
        }
        match batch.last() {
            Some(oldest) if batch.len() == BATCH && !older(oldest) => before = Some(oldest.id),
            _ => return Ok(false),
        }
    }
}

/// A message kept for a retired agent.
#[derive(Debug, Clone, Serialize)]
pub struct OrphanMessage {
    pub agent: AgentName,
    #[serde(rename = "box")]
    pub mailbox: String,
    pub file: String,
    pub msg_id: Option<String>,
    pub from: Option<String>,
    pub intent: Option<String>,
    pub task_id: Option<String>,
    pub created_at: Option<String>,
}

/// A waiting task addressed to a retired agent by name.
#[derive(Debug, Clone, Serialize)]
pub struct OrphanTask {
    #[serde(rename = "task_id")]
    pub task: TaskId,
    pub status: Status,
    pub to: String,
    pub intent: String,
}

/// Everything waiting for a coordinator because its agent retired.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Orphans {
    pub messages: Vec<OrphanMessage>,
    pub tasks: Vec<OrphanTask>,
}

impl Orphans {
    pub fn is_empty(&self) -> bool {
        self.messages.is_empty() && self.tasks.is_empty()
    }
}

/// Every orphan: the messages in retired agents' boxes (tasks' own messages aside), and the
/// waiting tasks addressed to a retired agent.
pub fn list(ws: &Workspace) -> Result<Orphans> {
    let retired = ws.engine.retired()?;
    let mut out = Orphans::default();
    if retired.is_empty() {
        return Ok(out);
    }
    out.messages = orphan_messages(ws, &retired)?;
    ws.engine.board(&mut |r| {
        if let Some(t) = orphan_task(ws, &r)? {
            out.tasks.push(t);
        }
        Ok(())
    })?;
    Ok(out)
}

/// The messages in the boxes of the `retired` agents (tasks' own messages aside), sorted:
/// only those boxes are read.
pub fn orphan_messages(ws: &Workspace, retired: &[AgentName]) -> Result<Vec<OrphanMessage>> {
    let mut out = Vec::new();
    each_orphan_message(ws, retired, |a, b, name, m| {
        out.push(OrphanMessage {
            agent: a.clone(),
            mailbox: b.label(),
            file: name,
            msg_id: m.as_ref().and_then(|m| m.msg_id.clone()),
            from: m.as_ref().and_then(|m| m.from.clone()),
            intent: m.as_ref().and_then(|m| m.intent.clone()),
            task_id: m.as_ref().and_then(|m| m.task_id.clone()),
            created_at: m.as_ref().and_then(|m| m.created_at.map(clock::format)),
        });
    })?;
    out.sort_by(|x, y| {
        (&x.agent, &x.created_at, &x.msg_id, &x.file).cmp(&(
            &y.agent,
            &y.created_at,
            &y.msg_id,
            &y.file,
        ))
    });
    Ok(out)
}

/// How many messages `orphan_messages` lists, counted as it finds them (nothing kept, nothing
/// sorted): a coordinator's `prime`.
pub fn orphan_message_count(ws: &Workspace, retired: &[AgentName]) -> Result<usize> {
    let mut n = 0;
    each_orphan_message(ws, retired, |_, _, _, _| n += 1)?;
    Ok(n)
}

/// Each message in the boxes of the `retired` agents, as it parsed (`None`: it does not),
/// but a task's own message: one whose `task_id` names a task whose message it is (by its
/// name). Only those boxes are read, and each task named is looked up once, however many
/// messages name it.
fn each_orphan_message<F>(ws: &Workspace, retired: &[AgentName], mut each: F) -> Result<()>
where
    F: FnMut(&AgentName, &Mailbox, String, Option<Message>),
{
    // The name of each task's message (`None`: no such task), by task id.
    let mut ticket_of: HashMap<String, Option<String>> = HashMap::new();
    for a in retired {
        for b in [Mailbox::Inbox(a.clone()), Mailbox::Workspace(a.clone())] {
            for name in ws.engine.list_box(&b)? {
                let m = super::read(ws, &b, &name).ok();
                let task = m.as_ref().and_then(|m| TaskId::new(m.task_id.as_deref()?).ok());
                let ticket = match task {
                    Some(t) => {
                        if !ticket_of.contains_key(t.as_str()) {
                            let found = ws.engine.peek(&t)?.map(|st| st.rec.message);
                            ticket_of.insert(t.to_string(), found);
                        }
                        ticket_of.get(t.as_str()).is_some_and(|f| f.as_deref() == Some(&name))
                    }
                    None => false,
                };
                if !ticket {
                    each(a, &b, name, m);
                }
            }
        }
    }
    Ok(())
}

/// Board row `r` as an orphan: a waiting task addressed to a retired agent (by name, or as
/// `agent:NAME`).
pub fn orphan_task(ws: &Workspace, r: &crate::task::Row<'_>) -> Result<Option<OrphanTask>> {
    let waiting = matches!(r.status, Status::New | Status::Parked);
    if !waiting || retired_addressee(ws, &r.to).is_none() {
        return Ok(None);
    }
    Ok(Some(OrphanTask {
        task: TaskId::new(r.task.as_ref())?,
        status: r.status,
        to: r.to.to_string(),
        intent: r.intent.to_string(),
    }))
}

/// What a redelivery did.
#[derive(Debug, Clone, Serialize)]
pub struct Redelivered {
    /// `message` or `task`.
    pub kind: &'static str,
    /// The address it goes to now, `agent:NAME` (as a task's `to` and the events say it:
    /// a bare name would be the role when a role has that name).
    pub to: String,
    #[serde(rename = "box")]
    pub mailbox: String,
    pub file: String,
    /// It waited there already: a readdress to the address it has (nothing changed), or a
    /// message the agent held a copy of already (the orphan copy was filed into LOGS:
    /// `box`, `file`).
    pub already: bool,
    /// The task: the one addressed anew, or the one a message names; null for a message of
    /// no task.
    pub task_id: Option<String>,
    /// The message's id (a task's: its message's); null when it has none.
    pub msg_id: Option<String>,
    /// Where the agent's own copy lies (`inbox:B/FILE`), when it held one already (`box`
    /// and `file` then say where the orphan copy was filed); else null.
    #[serde(rename = "held_copy")]
    pub held: Option<String>,
}

/// The msg id of task state `st`'s message, read where it lies (one that does not read has
/// none here).
fn ticket_id(ws: &Workspace, st: &crate::task::TaskState) -> Option<String> {
    let b = st.location.as_ref()?;
    super::read(ws, b, &st.rec.message).ok()?.msg_id
}

/// Hand orphan `key` (a message's msg id or file name, or an orphaned task's id) to agent
/// `to`: the message moves into `to`'s INBOX; the task is addressed to `to`.
pub fn redeliver(ws: &Workspace, me: &AgentName, key: &str, to: &AgentName) -> Result<Redelivered> {
    coordinator_only(ws, me, "redeliver an orphan")?;
    let role = ws.role_of(to).ok_or_else(|| {
        let all = ws.agents();
        let active = all.keys().filter(|a| !ws.is_retired(a)).map(AgentName::as_str);
        crate::suggest::not_found("agent", to.as_str(), active)
            .hint_more("`circe agent list` shows the agents")
    })?;
    if ws.is_retired(to) {
        return Err(Error::refused(format!("{to} is retired too")).hint("pick an active agent"));
    }
    let orphans = list(ws)?;
    if let Some(t) = orphans.tasks.iter().find(|t| t.task.as_str() == key) {
        return readdress(ws, me, &t.task, to, &role);
    }
    let o = orphan_named(&orphans, key)?;
    let intent = o.intent.clone().unwrap_or_default();
    if !ws.registry.may_receive(&role, &intent) {
        return Err(Error::refused(format!("{to} ({role}) may not receive {intent}"))
            .hint("`circe registry` shows who may receive each intent"));
    }
    let from = Mailbox::from_label(&o.mailbox).ok_or_else(|| Error::internal("bad box label"))?;
    let m = super::read(ws, &from, &o.file).ok();
    if let Some(d) = m.as_ref().and_then(|m| m.deadline)
        && d <= ws.root_now()?
    {
        return Err(Error::refused(format!(
            "{} is past its deadline {}: it is not delivered",
            o.file,
            clock::format(d)
        ))
        .hint("`circe reap` files it into LOGS"));
    }
    let dest = Mailbox::Inbox(to.clone());
    // `agent:B`: a bare B would be the role when a role has that name.
    let address = format!("{}{to}", crate::address::AGENT);
    // `to` holds a copy of this message already (a broadcast reached it too, or it was
    // handed one before): a second copy would have one id name two messages in its boxes.
    // The orphan copy is the duplicate it is, and is filed into LOGS.
    if let Some(id) = o.msg_id.as_deref()
        && let Some(held) = copy_held(ws, to, id)?
    {
        let used = super::find::file_plain(ws, me, &from, &o.file, m.as_ref())?;
        hand_ask_on(ws, o, to)?;
        return Ok(Redelivered {
            kind: "message",
            to: address,
            mailbox: Mailbox::Logs.label(),
            file: used,
            already: true,
            task_id: o.task_id.clone(),
            msg_id: o.msg_id.clone(),
            held: Some(held),
        });
    }
    // Under a numbered name when `to` holds another message by that name already.
    let Some(used) = ws.engine.file_message(&from, &dest, &o.file)? else {
        return Err(Error::conflict(format!("{} left {} meanwhile", o.file, o.mailbox))
            .hint("another command moved it: `circe orphans` lists what is still orphaned"));
    };
    hand_ask_on(ws, o, to)?;
    // New to `to` whatever its number: marked before its event, which wakes `to`'s waits
    // and streams. Cut off in between, the copy is judged by its number (listed under
    // `stale` if it is, never lost).
    let fresh = m.as_ref().map_or(Ok(()), |m| super::seq::redelivered(ws, to, m));
    let mut ev = Event::now(EventKind::Redeliver, me).file(dest.label(), used.clone());
    ev.msg_id.clone_from(&o.msg_id);
    ev.owner = Some(o.agent.to_string());
    ev.addressed_to = Some(address.clone());
    if let Some(t) = o.task_id.as_deref().and_then(|t| TaskId::new(t).ok()) {
        ev = ev.task(&t);
    }
    ws.engine.append_events(vec![ev])?;
    fresh.map_err(|e| {
        e.map_message(|w| {
            format!(
                "{} was redelivered into {}, but may show as stale to {to}: {w}",
                used,
                dest.label()
            )
        })
        .committed()
    })?;
    Ok(Redelivered {
        kind: "message",
        to: address,
        mailbox: dest.label(),
        file: used,
        already: false,
        task_id: o.task_id.clone(),
        msg_id: o.msg_id.clone(),
        held: None,
    })
}

/// The one orphaned message `key` names. A copy is named by its msg id, its file name, or
/// (copies of one broadcast share both) by where it lies: `inbox:AGENT/FILE`, or its path
/// `AGENTS/AGENT/INBOX/FILE`.
fn orphan_named<'a>(orphans: &'a Orphans, key: &str) -> Result<&'a OrphanMessage> {
    let at = |o: &OrphanMessage| format!("{}/{}", o.mailbox, o.file);
    let path = |o: &OrphanMessage| {
        Mailbox::from_label(&o.mailbox).map(|b| format!("{}/{}", b.rel_path(), o.file))
    };
    let hits: Vec<&OrphanMessage> = orphans
        .messages
        .iter()
        .filter(|o| {
            o.file == key
                || o.msg_id.as_deref() == Some(key)
                || at(o) == key
                || path(o).is_some_and(|p| p == key)
        })
        .collect();
    match hits.as_slice() {
        [one] => Ok(one),
        [] => Err(Error::not_found(format!("no orphan `{key}`"))
            .hint("`circe orphans` lists them (msg ids, file names, task ids)")),
        many => {
            let each: Vec<String> = many.iter().map(|o| at(o)).collect();
            Err(Error::usage(format!("`{key}` names several orphans"))
                .hint(format!("name one by where it lies: {}", each.join(", "))))
        }
    }
}

/// Where `to` holds a copy of message `id` (`inbox:B/FILE` or `workspace:B/FILE`), if it
/// holds one.
fn copy_held(ws: &Workspace, to: &AgentName, id: &str) -> Result<Option<String>> {
    let boxes = [Mailbox::Inbox(to.clone()), Mailbox::Workspace(to.clone())];
    // A key of 8 characters or more also matches the start or end of an id: only the id
    // itself is a copy.
    let found = super::find::find_in(ws, &boxes, id)?;
    Ok(found
        .iter()
        .find(|f| f.message.as_ref().and_then(|m| m.msg_id.as_deref()) == Some(id))
        .map(|f| format!("{}/{}", f.mailbox, f.file)))
}

/// An open ask goes with its orphaned message: its new recipient (`to`) may answer it, and
/// the retired agent is no longer waited for.
fn hand_ask_on(ws: &Workspace, o: &OrphanMessage, to: &AgentName) -> Result<()> {
    if let Some(id) = o.msg_id.as_deref().and_then(|i| crate::names::MsgId::new(i).ok())
        && let Some(ask) = ws.engine.ask(&id)?
        && ask.is_open()
    {
        let mut recipients: Vec<AgentName> =
            ask.recipients.iter().filter(|r| **r != o.agent).cloned().collect();
        if !recipients.contains(to) {
            recipients.push(to.clone());
        }
        ws.engine.put_ask(&crate::tx::AskRecord { recipients, ..ask.clone() }, Some(ask.rev))?;
    }
    Ok(())
}

/// A waiting task addressed to a retired agent, addressed to `to` instead.
fn readdress(
    ws: &Workspace,
    me: &AgentName,
    task: &TaskId,
    to: &AgentName,
    role: &str,
) -> Result<Redelivered> {
    // `agent:B`: a bare B would be the role when a role has that name.
    let address = format!("{}{to}", crate::address::AGENT);
    address_task(ws, me, task, &address, None, &|intent| {
        if ws.registry.may_receive(role, intent) {
            return Ok(());
        }
        Err(Error::refused(format!("{to} ({role}) may not take a {intent} task"))
            .hint("`circe registry` shows who may receive each intent"))
    })
}

/// `circe readdress TASK --to ADDRESS`: a coordinator addresses a waiting (or parked) task
/// anew: one sent to the wrong agent or role, or to an agent who is away. At least one
/// active agent at the new address must be allowed to take the task's intent.
pub fn readdress_task(
    ws: &Workspace,
    me: &AgentName,
    task: &TaskId,
    to: &str,
    reason: Option<&str>,
) -> Result<Redelivered> {
    coordinator_only(ws, me, "readdress a task")?;
    super::update::blank_reason(reason)?;
    crate::address::check(to)
        .map_err(|e| Error { message: format!("--to: {}", e.message), ..e })?;
    let (agents, _) = ws.reach(to)?;
    let may_take = |intent: &str| {
        let takers = agents.iter().filter(|a| {
            !ws.is_retired(a) && ws.role_of(a).is_some_and(|r| ws.registry.may_receive(&r, intent))
        });
        if takers.count() > 0 {
            return Ok(());
        }
        Err(Error::refused(format!("no active agent at {to} may take a task of intent {intent}"))
            .hint("`circe registry` shows which roles may receive each intent; `circe agent list` the agents"))
    };
    // Waiting for that address already, and someone there may take it: nothing to change,
    // and no event says it changed. (An address nobody there may take is refused as any.)
    if let Some(st) = ws.engine.peek(task)?
        && st.rec.status == crate::task::Status::New
        && st.rec.to == to
    {
        may_take(&st.rec.intent)?;
        let msg_id = ticket_id(ws, &st);
        return Ok(Redelivered {
            kind: "task",
            to: to.to_string(),
            mailbox: "new".into(),
            file: st.rec.message,
            already: true,
            task_id: Some(task.to_string()),
            msg_id,
            held: None,
        });
    }
    let reason = reason.map_or_else(|| format!("readdressed by {me}"), str::to_string);
    address_task(ws, me, task, to, Some(&reason), &may_take)
}

/// Address `task` to `address` (lifecycle move `readdress`), once `may_take` accepts its
/// intent; `reason` (else what it was addressed to before) is its note.
fn address_task(
    ws: &Workspace,
    me: &AgentName,
    task: &TaskId,
    address: &str,
    reason: Option<&str>,
    may_take: &dyn Fn(&str) -> Result<()>,
) -> Result<Redelivered> {
    let mut tx = ws.engine.begin(task, false)?.ok_or_else(|| super::missing_task(ws, task))?;
    let st = tx.state().cloned().ok_or_else(|| super::missing_task(ws, task))?;
    may_take(&st.rec.intent)?;
    let reason = reason.map_or_else(|| format!("{} retired", st.rec.to), str::to_string);
    let ctx = MoveCtx {
        by: me.as_str(),
        actors: &[Actor::Coordinator],
        now: ws.now(),
        lease: ws.config.lease(),
        note: Some(&reason),
        forced: false,
        handoff: None,
        readdress: Some(address),
    };
    // A held task goes back to the queue first (its holder may be at work on it): said, with
    // the command, not only which statuses a readdress needs.
    let change = effects::apply(Move::Readdress, &st, &ctx).map_err(|e| {
        if st.rec.status.is_owned() {
            e.hint(format!(
                "it is held by {}: put it back in the queue first (`circe --agent {me} release --force {task} --reason ...`), then address it anew",
                st.rec.owner.as_deref().unwrap_or("its holder")
            ))
        } else {
            e
        }
    })?;
    tx.commit(change)?;
    let msg_id = ticket_id(ws, &st);
    Ok(Redelivered {
        kind: "task",
        to: address.to_string(),
        mailbox: "new".into(),
        file: st.rec.message,
        already: false,
        task_id: Some(task.to_string()),
        msg_id,
        held: None,
    })
}
