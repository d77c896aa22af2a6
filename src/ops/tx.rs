//! What `circe send` does for TX (PROTOCOLS.md section 16): `mesh/agent` addresses,
//! deadlines, a reply's task, and the meaning of each TX type (an ask waits for its answer,
//! an ask-response closes it, a task-complete completes its task through the checks' gate, a
//! prompt becomes its recipient's current prompt), plus the messages routing rules send with
//! a message. Everything refused here is refused before anything is written.

use crate::boxes::Mailbox;
use crate::clock;
use crate::engine::Parcel;
use crate::error::{Error, Result};
use crate::event::{Event, EventKind};
use crate::message::Message;
use crate::names::{AgentName, TaskId};
use crate::task::{Outgoing, Status};
use crate::tx::{AskRecord, Semantics, check_address, semantics};
use crate::workspace::Workspace;

use super::{asks, route, thread};

/// What a send does beyond delivering.
#[derive(Debug, Clone)]
pub enum Plan {
    Plain,
    OpenAsk,
    CloseAsk(Box<AskRecord>),
    CompleteTask(TaskId),
    Prompt,
}

/// Check and fill a message before it is looked up or delivered: addresses, deadline, the
/// task it belongs to, and its type's conditions. `me` sends it.
pub fn prepare(ws: &Workspace, me: &AgentName, msg: &mut Message) -> Result<Plan> {
    let meshes = ws.meshes();
    if let Some(to) = &msg.to {
        check_address("to", to, &meshes)?;
    }
    if let Some(from) = &msg.from {
        check_address("from", from, &meshes)?;
    }
    if let Some(d) = msg.deadline
        && d <= ws.root_now()?
    {
        return Err(Error::refused(format!(
            "the message's deadline {} has passed: it would not be delivered",
            clock::format(d)
        ))
        .hint("set a later deadline, or leave it out"));
    }
    let sem = semantics(msg.intent.as_deref().unwrap_or_default());
    // Where the message answered most likely is: the answerer's own boxes, then LOGS (where
    // `done` files it), before every other box.
    let mine = [Mailbox::Inbox(me.clone()), Mailbox::Workspace(me.clone()), Mailbox::Logs];
    // An ask-response's ask answers for what it replies to (and whom it goes to).
    if sem != Semantics::ClosesAsk
        && let Some(parent) = msg.in_reply_to.clone()
    {
        let found = replied_to(ws, me, msg, &parent, &mine)?;
        if sem != Semantics::OpensTask && msg.task_id.is_none() {
            msg.task_id = found.task;
        }
    }
    prepared(ws, me, msg, sem)
}

/// What `msg` answers (`parent`), which must be a message here or in the archive (a thread,
/// a `wait --for reply:` and the open questions follow this id); and whom the reply goes
/// to: without `to`, back to whoever sent it (not for a task message, whose address says
/// who may take it), and an `answer` must reach its asker. Nothing is written
/// for a reply refused here.
fn replied_to(
    ws: &Workspace,
    me: &AgentName,
    msg: &mut Message,
    parent: &str,
    mine: &[Mailbox],
) -> Result<thread::Parent> {
    let intent = msg.intent.clone().unwrap_or_default();
    let found = match thread::parent(ws, parent, mine)? {
        Some(p) => p,
        None => super::find::archived(ws, parent)?
            .ok_or_else(|| no_parent(ws, me, &intent, parent).unwrap_or_else(|e| e))?,
    };
    // circe's escalation of a parked task is settled by acting on the task, never answered:
    // an answer would take it off the coordinators' questions while the task stays parked.
    if intent == "answer"
        && found.from.as_deref() == Some(crate::event::CIRCE)
        && found.intent.as_deref() == Some("escalate")
    {
        let task = found.task.as_deref().unwrap_or("TASK");
        return Err(Error::refused(format!(
            "`{parent}` is circe's escalation of the parked task {task}: it takes no answer, and stays open while the task is parked"
        ))
        .hint(format!(
            "a coordinator puts the task back (`circe --agent {me} release --force {task}`) or addresses it anew (`circe --agent {me} readdress {task} --to role:ROLE`), which settles it; an `update` in reply tells the others"
        )));
    }
    let opens_task = semantics(&intent) == Semantics::OpensTask
        || ws.registry.intent(&intent).is_some_and(|i| i.opens_task);
    // Who can be answered: an agent of the root, not the sender itself, not retired.
    let sender = found.from.as_deref();
    let asker = sender
        .filter(|f| *f != me.as_str() && ws.is_agent_named(f))
        .filter(|f| AgentName::new(*f).is_ok_and(|a| !ws.is_retired(&a)));
    if msg.to.is_none() {
        let why = match (sender, asker) {
            _ if opens_task => "a task message names who may take it".to_string(),
            (_, Some(_)) => String::new(),
            (Some(s), None) if s == me.as_str() => format!("`{parent}` is your own message"),
            (Some(s), None) if ws.is_agent_named(s) => {
                format!("`{parent}` is from {s}, who is retired")
            }
            (Some(s), None) => format!("`{parent}` is from {s}, which is no agent of this root"),
            (None, _) => format!("who sent `{parent}` is not known here"),
        };
        if why.is_empty() {
            msg.to = asker.map(|a| format!("{}{a}", crate::address::AGENT));
        } else {
            return Err(Error::usage(format!("--to is required: {why}"))
                .hint("name who gets it: agent:NAME, role:NAME or all (`circe agent list`)"));
        }
    }
    if let (Some(asker), Some(to)) = (asker, msg.to.as_deref()) {
        answers_the_asker(ws, &intent, &found, asker, to, parent)?;
    }
    Ok(found)
}

/// An `answer` to a message that asks for one (`question`, `request_help`, ...) must reach
/// its asker: the question would count as answered while the asker never saw the answer.
fn answers_the_asker(
    ws: &Workspace,
    intent: &str,
    parent: &thread::Parent,
    asker: &str,
    to: &str,
    id: &str,
) -> Result<()> {
    let asks_an_answer = parent.intent.as_deref().is_some_and(|i| {
        ws.registry.intents.get(i).is_some_and(|i| i.expects_reply.as_deref() == Some("answer"))
    });
    let reaches =
        || ws.reach(to).is_ok_and(|(agents, _)| agents.iter().any(|a| a.as_str() == asker));
    if intent != "answer" || !asks_an_answer || reaches() {
        return Ok(());
    }
    Err(Error::refused(format!(
        "this answer goes to {to}, but `{id}` was asked by {asker}: {asker} would never see it, and the question would count as answered"
    ))
    .hint(format!(
        "address it to agent:{asker}, or leave --to out (a reply goes to the sender of what it answers)"
    )))
}

/// The plan for `msg` by its intent's meaning (`prepare`).
fn prepared(ws: &Workspace, me: &AgentName, msg: &mut Message, sem: Semantics) -> Result<Plan> {
    let plan = match sem {
        Semantics::OpensTask => {
            if msg.task_id.is_none() {
                let id = msg.msg_id.get_or_insert_with(|| clock::new_msg_id(ws.now())).clone();
                crate::names::check_task_id(&id).map_err(|_| {
                    Error::refused(format!(
                        "a task needs a task id, and its msg-id `{id}` is not one"
                    ))
                    .hint("add a `task-id:` line (A-Z a-z 0-9 - _), or give it such a msg-id")
                })?;
                msg.task_id = Some(id);
            }
            Plan::Plain
        }
        Semantics::ClosesAsk => {
            let rec = asks::answered_by(ws, me, msg.in_reply_to.as_deref(), msg.msg_id.as_deref())?;
            // The answer goes to the one who asked and waits (a response elsewhere would
            // close the ask while the asker never sees it).
            let asker = rec.from.as_str();
            let one = format!("{}{asker}", crate::address::AGENT);
            let to = msg.to.get_or_insert_with(|| one.clone());
            // `agent:ASKER`, or the asker's bare name (`mesh/ASKER` too). Where a role has that
            // name (as `init`'s agents do) a bare name would reach the whole role: the answer is
            // addressed to the asker alone.
            let named = match crate::address::Address::parse(to) {
                crate::address::Address::Agent(a) | crate::address::Address::Bare(a) => {
                    Some(a.to_string())
                }
                _ => None,
            };
            if named.as_deref() == Some(asker) && ws.registry.is_role(asker) {
                *to = one;
            }
            if named.as_deref() != Some(asker) {
                return Err(Error::refused(format!(
                    "an ask-response goes to the asker: ask {} was asked by {asker}, and this one is addressed to {to}",
                    rec.msg_id
                ))
                .hint(format!("address it to agent:{asker} (or leave `to` out: it goes to the asker)")));
            }
            if msg.task_id.is_none() {
                msg.task_id = rec.task.as_ref().map(ToString::to_string);
            }
            Plan::CloseAsk(Box::new(rec))
        }
        _ => {
            let intent = msg.intent.as_deref().unwrap_or_default();
            let reply =
                ws.registry.intents.values().any(|i| i.expects_reply.as_deref() == Some(intent));
            if reply {
                not_to_an_ask(ws, me, intent, msg.in_reply_to.as_deref())?;
            }
            match sem {
                Semantics::OpensAsk => Plan::OpenAsk,
                Semantics::Prompt => Plan::Prompt,
                Semantics::CompletesTask => Plan::CompleteTask(completed_task(ws, msg)?),
                _ => Plan::Plain,
            }
        }
    };
    Ok(plan)
}

/// A reply whose `in_reply_to` names no message: a part of an id (as `show` takes one) is
/// answered with the whole one, else the open questions are pointed at.
fn no_parent(ws: &Workspace, me: &AgentName, intent: &str, parent: &str) -> Result<Error> {
    let whole: Vec<String> = super::find::find(ws, parent)?
        .into_iter()
        .filter_map(|f| f.message?.msg_id)
        .filter(|id| id != parent)
        .collect();
    let hint = match whole.as_slice() {
        [one] => format!("--in-reply-to takes a whole msg_id: did you mean `{one}`?"),
        _ => format!("`circe --agent {me} questions` lists the open questions with their msg_ids"),
    };
    Ok(Error::not_found(format!("this `{intent}` answers `{parent}`, and no message has that id"))
        .hint(hint))
}

/// An ask takes one answer, an `ask-response` (it goes to the asker and closes the ask): a
/// reply of another intent (`answer`) to it would leave it open while the asker's
/// questions counted it answered.
fn not_to_an_ask(ws: &Workspace, me: &AgentName, intent: &str, parent: Option<&str>) -> Result<()> {
    let Some(parent) = parent else { return Ok(()) };
    let Ok(id) = crate::names::MsgId::new(parent) else { return Ok(()) };
    let Some(ask) = ws.engine.ask(&id)? else { return Ok(()) };
    Err(Error::refused(format!(
        "`{parent}` is an {}: it takes an `ask-response`, not an `{intent}`",
        ask.intent
    ))
    .hint(format!(
        "`circe --agent {me} send --to agent:{} --intent ask-response --in-reply-to {parent}` (it closes the ask); an `update` in reply says more without answering",
        ask.from
    )))
}

/// The task a `task-complete` completes: its `task-id`, or the task of what it replies to.
fn completed_task(ws: &Workspace, msg: &Message) -> Result<TaskId> {
    let Some(t) = msg.task_id.clone() else {
        return Err(Error::refused("a task-complete names no task")
            .hint("name the task: --task ID (a `task-id:` line), or --in-reply-to the task's msg-id (an `in-reply-to:` line)"));
    };
    let task = TaskId::new(t)?;
    // Opening the task's transaction finishes what a crashed completion left (its outbox),
    // so a retry of the same message finds it delivered.
    let tx = ws.engine.begin(&task, false).map_err(|e| e.about_task(task.as_str()));
    drop(tx?.ok_or_else(|| super::missing_task(ws, &task).about_task(task.as_str()))?);
    Ok(task)
}

/// May `me` send a message that says it is from someone else? Only a TX prompt `from:
/// system`, sent by a coordinator (who plays TX's system).
pub fn speaks_for(ws: &Workspace, me: &AgentName, msg: &Message) -> bool {
    msg.from.as_deref() == Some("system")
        && semantics(msg.intent.as_deref().unwrap_or_default()) == Semantics::Prompt
        && ws.is_coordinator(me)
}

/// What the delivery did.
pub struct Sent {
    /// The names used, one per receiver.
    pub files: Vec<String>,
    /// The events to log: the send's own, then routes and orphans (none when the task's
    /// change logged them: a task-complete's).
    pub events: Vec<Event>,
    /// The journal keeping `events` until they are logged (`Engine::journal_events`).
    pub journal: Option<String>,
}

/// Deliver `content` (named `name`) to `receivers` as `plan` says, with what routing rules
/// send along. The events are kept in a journal before the delivery, so a command cut off
/// before it logs them leaves them to `doctor --repair` (PROTOCOLS.md section 6, step 6).
pub fn deliver(
    ws: &Workspace,
    me: &AgentName,
    msg: &Message,
    plan: &Plan,
    content: &str,
    name: &str,
    receivers: &[AgentName],
) -> Result<Sent> {
    let msg_id = msg.msg_id.clone().unwrap_or_default();
    let boxes: Vec<Mailbox> = receivers.iter().map(|a| Mailbox::Inbox(a.clone())).collect();
    if let Plan::CompleteTask(task) = plan {
        return complete(ws, me, task, &msg_id, content, name, &boxes);
    }
    let role = ws.role_of(me).unwrap_or_default();
    let routed =
        route::for_message(ws, me, &role, msg.status.as_deref(), msg.task_id.as_deref(), &msg_id);
    let mut parcels =
        vec![Parcel { content: content.as_bytes().to_vec(), name: name.to_string(), to: boxes }];
    parcels.extend(route::parcels(&routed));
    // The events, given the names each parcel's copies got.
    let events_of = |names: &[Vec<String>]| {
        let files = names.first().map(Vec::as_slice).unwrap_or_default();
        let mut events = vec![send_event(me, msg, &parcels[0].to, files)];
        events.extend(route::events(
            &routed,
            names.get(1..).unwrap_or_default(),
            msg.task_id.as_deref(),
        ));
        events.extend(orphans(ws, receivers, files, &msg_id));
        events
    };
    let wanted: Vec<Vec<String>> =
        parcels.iter().map(|p| vec![p.name.clone(); p.to.len()]).collect();
    let journal = super::send::journal(ws, &msg_id, &events_of(&wanted))?;
    match deliver_parcels(ws, me, msg, plan, &parcels, receivers) {
        Ok(mut names) => {
            let events = events_of(&names);
            Ok(Sent { files: names.swap_remove(0), events, journal })
        }
        Err(e) => {
            // Whatever was delivered before the failure gets its events, and is said to
            // stand (`committed`), so nobody sends it again.
            let stands =
                journal.is_some_and(|j| ws.engine.close_journal(&j, false).unwrap_or(true));
            // An ask that stands (a box refused its copy, which waits) is an ask all the
            // same: recorded, so that it can be answered and expire.
            if stands && matches!(plan, Plan::OpenAsk) {
                asks::record(ws, me, msg, receivers)?;
            }
            Err(e.standing_if(stands))
        }
    }
}

/// The delivery itself, with what the plan does around it.
fn deliver_parcels(
    ws: &Workspace,
    me: &AgentName,
    msg: &Message,
    plan: &Plan,
    parcels: &[Parcel],
    receivers: &[AgentName],
) -> Result<Vec<Vec<String>>> {
    let msg_id = msg.msg_id.clone().unwrap_or_default();
    let names = match plan {
        Plan::CloseAsk(rec) => {
            // Held from the mark to the close: meanwhile the mark is an answer under way.
            let _held = asks::hold(ws, &rec.msg_id)?;
            let marked = asks::answering(ws, me, rec, &msg_id)?;
            asks::slow_answer();
            let names = ws.engine.deliver_batch(parcels)?;
            asks::answered(ws, &marked)?;
            names
        }
        Plan::Prompt => {
            // Stored first: a retry of the same prompt stores the same again.
            for r in receivers {
                ws.engine.set_prompt(r, msg_content(parcels))?;
            }
            ws.engine.deliver_batch(parcels)?
        }
        _ => ws.engine.deliver_batch(parcels)?,
    };
    if matches!(plan, Plan::OpenAsk) {
        asks::record(ws, me, msg, receivers)?;
    }
    Ok(names)
}

/// The message's own bytes (the first parcel's).
fn msg_content(parcels: &[Parcel]) -> &[u8] {
    parcels.first().map(|p| p.content.as_slice()).unwrap_or_default()
}

/// The `send` event of a message delivered as `files` into `boxes`.
fn send_event(me: &AgentName, msg: &Message, boxes: &[Mailbox], files: &[String]) -> Event {
    let mut ev = Event::now(EventKind::Send, me);
    ev.msg_id.clone_from(&msg.msg_id);
    ev.intent.clone_from(&msg.intent);
    ev.addressed_to = msg.to_agent().map(str::to_string);
    ev.in_reply_to.clone_from(&msg.in_reply_to);
    if let Some(t) = msg.task_id.as_deref().and_then(|t| TaskId::new(t).ok()) {
        ev = ev.task(&t);
    }
    for (b, f) in boxes.iter().zip(files) {
        ev = ev.file(b.label(), f.clone());
    }
    ev
}

/// A `task-complete`: the task completes (owner or coordinator, checks passed, in time) and
/// the message goes out with the change, exactly once.
fn complete(
    ws: &Workspace,
    me: &AgentName,
    task: &TaskId,
    msg_id: &str,
    content: &str,
    name: &str,
    boxes: &[Mailbox],
) -> Result<Sent> {
    let out = Outgoing {
        msg_id: msg_id.to_string(),
        to: boxes.iter().map(Mailbox::label).collect(),
        name: name.to_string(),
        content: content.to_string(),
        event: "send".into(),
        rule: None,
    };
    let done =
        super::update::set_status_sending(ws, me, task, Status::Completed, None, None, vec![out]);
    let (_, events) = done.map_err(|e| {
        // A second completion message: the task completes once (unlike `status T completed`,
        // which is a state to reach, this is a message that says it happened).
        let now = ws.engine.peek(task).ok().flatten().map(|st| st.rec.status);
        let e = if e.kind == crate::error::Kind::Refused && now == Some(Status::Completed) {
            Error::refused(format!("task {task} is completed already: a task completes once")).hint(
                format!("say more with an `update` in reply to it: --intent update --task {task}"),
            )
        } else {
            e
        };
        e.about_task(task.as_str())
    })?;
    let files = events
        .iter()
        .find(|e| e.event == EventKind::Send && e.msg_id.as_deref() == Some(msg_id))
        .map(|e| e.files.iter().map(|f| f.file.clone()).collect())
        .unwrap_or_default();
    Ok(Sent { files, events: Vec::new(), journal: None })
}

/// `orphan` events for the copies that reached retired agents.
fn orphans(ws: &Workspace, receivers: &[AgentName], files: &[String], msg_id: &str) -> Vec<Event> {
    receivers
        .iter()
        .zip(files)
        .filter(|(a, _)| ws.is_retired(a))
        .map(|(a, f)| {
            let mut ev = Event::now(EventKind::Orphan, crate::event::CIRCE)
                .file(Mailbox::Inbox(a.clone()).label(), f.clone());
            ev.msg_id = Some(msg_id.to_string());
            ev.owner = Some(a.to_string());
            ev
        })
        .collect()
}

/// A send found delivered before (a retry): finish what its first run may have left (an ask
/// delivered but not recorded, an answer delivered but its ask not closed).
pub fn after_retry(
    ws: &Workspace,
    me: &AgentName,
    msg: &Message,
    plan: &Plan,
    to: &[AgentName],
) -> Result<()> {
    match plan {
        Plan::OpenAsk => asks::record(ws, me, msg, to).map(|_| ()),
        Plan::CloseAsk(rec) => {
            if let Some(r) = ws.engine.ask(&rec.msg_id)? {
                asks::settle(ws, r)?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}
