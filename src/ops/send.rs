//! `circe send`: check a message against the registry, then deliver it. Nothing is written
//! anywhere until every check has passed.

use std::collections::BTreeSet;

use serde::Serialize;

use super::open::{OpenOutcome, TaskMessage, open_task};
use crate::boxes::Mailbox;
use crate::clock;
use crate::error::{Error, Result};
use crate::event::Event;
use crate::message::{self, Message};
use crate::names::{AgentName, CheckName, TaskId};
use crate::registry::SendCheck;
use crate::workspace::Workspace;

#[derive(Debug, Clone, Serialize)]
pub struct Delivery {
    pub msg_id: String,
    pub intent: String,
    /// The task the message is about (its `task_id`, or the one it inherited).
    pub task_id: Option<String>,
    pub in_reply_to: Option<String>,
    /// The message named no task and took the one of the message it answers.
    pub task_inherited: bool,
    /// `new` for a task message, else `inbox:<agent>` per copy.
    pub delivered: Vec<DeliveredCopy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task: Option<OpenOutcome>,
    /// The same message (same id, sender, recipient and text) was delivered before: this
    /// send changed nothing.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub already_delivered: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct DeliveredCopy {
    #[serde(rename = "box")]
    pub mailbox: String,
    pub file: String,
}

/// Who `to` reaches: (agents, the roles they have); the sender is left out of `all`.
fn resolve(
    ws: &Workspace,
    me: Option<&AgentName>,
    to: &str,
) -> Result<(Vec<AgentName>, Vec<String>)> {
    if crate::address::Address::parse(to) == crate::address::Address::All {
        let agents: Vec<AgentName> =
            ws.agents().keys().filter(|a| Some(*a) != me && !ws.is_retired(a)).cloned().collect();
        let mut roles: BTreeSet<String> = agents.iter().filter_map(|a| ws.role_of(a)).collect();
        if roles.is_empty() {
            roles = ws.registry.roles.iter().cloned().collect();
        }
        return Ok((agents, roles.into_iter().collect()));
    }
    let (agents, roles) = ws.reach(to)?;
    // A retired agent whose role was since taken out of circe.yaml: the registry would
    // refuse the role it no longer knows, but what stops the message is that nobody reads
    // it. (Its role still known, the copy is kept as an orphan, with a warning.)
    if let [agent] = agents.as_slice()
        && roles.iter().any(|r| !ws.registry.is_role(r))
        && ws.is_retired(agent)
    {
        return Err(Error::refused(format!("agent {agent} is retired")).hint(
            "a retired agent reads no more messages, and its role is no longer in circe.yaml; \
             send to an active agent or a role (`circe agent list` shows the agents)",
        ));
    }
    Ok((agents, roles))
}

/// What `send --file` would refuse of a draft's address (`validate --draft`): a recipient
/// that is none, or a role reached that may not receive its intent; and, when the sender
/// `me` is known, a sender role that may not send it. A draft without `to:` (a reply that
/// goes to whom it answers) or without a known intent is passed over: the grammar and the
/// registry's intent check say what is wrong with those. The error comes with the header
/// at fault: `to` or `intent`.
pub fn check_draft_routing(
    ws: &Workspace,
    me: Option<&AgentName>,
    msg: &Message,
) -> std::result::Result<(), (&'static str, Error)> {
    let (Some(to), Some(intent)) = (msg.to.as_deref(), msg.intent.as_deref()) else {
        return Ok(());
    };
    if ws.registry.intent(intent).is_none() {
        return Ok(());
    }
    let (_, roles) = resolve(ws, me, to).map_err(|e| ("to", e))?;
    let role_refs: Vec<&str> = roles.iter().map(String::as_str).collect();
    ws.registry.check_receivers(intent, &role_refs, to).map_err(|e| ("to", e))?;
    if let Some(r) = me.and_then(|a| ws.role_of(a)) {
        let check = SendCheck {
            intent,
            from_role: &r,
            to_roles: &role_refs,
            to_label: to,
            has_task_id: true,
        };
        ws.registry.check_send(&check).map_err(|e| ("intent", e))?;
    }
    Ok(())
}

/// Fill in what a draft may leave out, and check the sender.
fn complete(ws: &Workspace, msg: &mut Message, me: &AgentName) -> Result<()> {
    if let Some(from) = msg.from_agent() {
        if from != me.as_str() && !super::tx::speaks_for(ws, me, msg) {
            let hint = if ws.is_agent_named(from) {
                "remove the from: line: circe writes the acting agent's name (a message goes out as the agent that sends it)"
            } else if from == "system" {
                "only a `prompt` may say `from: system` (sent by a coordinator or rooster); remove the from: line"
            } else {
                "remove the from: line: circe writes the acting agent's name"
            };
            return Err(Error::refused(format!(
                "the message says it is from `{from}` but the acting agent is `{me}`"
            ))
            .hint(hint));
        }
    } else {
        msg.from = Some(me.to_string());
    }
    let now = ws.now();
    msg.created_at.get_or_insert(now);
    if msg.msg_id.is_none() {
        msg.msg_id = Some(clock::new_msg_id(now));
    }
    if msg.status.is_none() {
        msg.status = Some("new".into());
    }
    Ok(())
}

/// Check `msg` against the registry and deliver it as `me`. Task messages go to
/// NEW_MESSAGES and open (or hand off) their task; others go to each recipient's INBOX.
pub fn send(ws: &Workspace, me: &AgentName, msg: Message) -> Result<Delivery> {
    let given_id = msg.msg_id.clone();
    // Refused because the sender's counter moved while this send held it: nothing was
    // stored, and the send is numbered again.
    let draft = msg;
    crate::seq::numbered_again(me.as_str(), || send_once(ws, me, draft.clone())).map_err(|e| {
        let unknown = e.details.iter().any(|(k, v)| *k == "outcome" && *v == "unknown");
        match (&given_id, unknown) {
            (Some(id), true) => e.hint(format!(
                "send it again with the same id (--msg-id {id}): a message id is never delivered twice"
            )),
            _ => e,
        }
    })
}

/// TX types do what they mean (section 16: `ops::tx`).
fn send_once(ws: &Workspace, me: &AgentName, mut msg: Message) -> Result<Delivery> {
    let my_role = ws.role_of(me).ok_or_else(|| Error::not_found(format!("no agent `{me}`")))?;
    let own_id = msg.msg_id.clone();
    let named_task = msg.task_id.is_some();
    let plan = super::tx::prepare(ws, me, &mut msg)?;
    // A reply that named no task took the task of what it answers.
    // (A TX `task` named by its own msg-id inherited nothing.)
    let task_inherited = !named_task
        && msg.in_reply_to.is_some()
        && msg.task_id.is_some()
        && msg.task_id != msg.msg_id;
    complete(ws, &mut msg, me)?;
    let first = Draft { my_role, own_id, plan, task_inherited };
    send_completed(ws, me, msg, first)
}

/// The rules on a message from `me` (role `my_role`) to `to`: the agents it reaches, and
/// its intent, or why it may not go.
fn judge<'w>(
    ws: &'w Workspace,
    me: &AgentName,
    my_role: &str,
    to: &str,
    msg: &Message,
) -> Result<(Vec<AgentName>, &'w crate::registry::Intent)> {
    let intent = msg.intent.as_deref().unwrap_or_default();
    let (agents, roles) = resolve(ws, Some(me), to)?;
    let role_refs: Vec<&str> = roles.iter().map(String::as_str).collect();
    let intent = ws.registry.check_send(&SendCheck {
        intent,
        from_role: my_role,
        to_roles: &role_refs,
        to_label: to,
        has_task_id: msg.task_id.is_some(),
    })?;
    if intent.opens_task {
        header_status_opens(msg)?;
    } else if intent.needs_task_id
        && let Some(t) = msg.task_id.as_deref()
    {
        // About one specific task (section 5, rule 8): a task that is, or was (archived).
        let t = TaskId::new(t)?;
        if ws.engine.peek(&t)?.is_none() && ws.engine.archived_task(&t)?.is_none() {
            let name = &intent.name;
            return Err(crate::engine::no_task(&t)
                .map_message(|m| format!("{m}: a `{name}` is about a task that exists")));
        }
    }
    Ok((agents, intent))
}

/// What `send_once` knows of a draft before it is completed.
struct Draft {
    my_role: String,
    /// The id the sender gave (`None`: circe made one).
    own_id: Option<String>,
    plan: super::tx::Plan,
    task_inherited: bool,
}

fn send_completed(ws: &Workspace, me: &AgentName, mut msg: Message, d: Draft) -> Result<Delivery> {
    let Draft { my_role, own_id, plan, task_inherited } = d;
    // A message that names its own id must be the only one with it (a retry of the very
    // same send is answered with the first delivery).
    let look = |msg: &Message| match &own_id {
        Some(id) => {
            // A delivery a crash left past its commit point lands first, so a retry finds it.
            ws.engine.finish_deliveries(Some(id))?;
            earlier_copy(ws, id, me, msg)
        }
        None => Ok(None),
    };
    // A draft that brings its own number is refused by the hold, unless it is the retry of a
    // delivered send, which the look answers: it looks first. (TEST BUILDS ONLY: the look
    // before the hold, so two sends of one id can both miss.)
    let unheld =
        msg.seq.is_some() || msg.seq_epoch.is_some() || crate::fault::test_break("msgid-unheld");
    let answered = |d: Delivery, msg: &Message| {
        let to: Vec<AgentName> = d
            .delivered
            .iter()
            .filter_map(|c| Mailbox::from_label(&c.mailbox)?.agent().cloned())
            .collect();
        super::tx::after_retry(ws, me, msg, &plan, &to)?;
        Ok(d)
    };
    let intent_name =
        msg.intent.clone().ok_or_else(|| Error::refused("the message has no intent"))?;
    // A TX `mesh/agent` is its agent part; `role:NAME` and `agent:NAME` are kept as written.
    let to = msg
        .to_agent()
        .ok_or_else(|| Error::refused("the message has no recipient (to)"))?
        .to_string();
    // Its file name is refused before any hold is taken (a hold makes its lock file).
    let created = msg.created_at.unwrap_or_else(|| ws.now());
    let task_id = msg.task_id.clone();
    let label = crate::address::Address::parse(&to).name();
    let name = message::file_name(created, me, label, &intent_name, task_id.as_deref(), 1);
    message::check_name_length(&name, task_id.as_deref())?;
    // The rules first, before any hold is taken (a hold makes its lock file): a refused
    // message writes nothing. A message that names its own id may be the retry of one
    // delivered before the rules changed: it looks for that delivery first, under the holds.
    let judged = match judge(ws, me, &my_role, &to, &msg) {
        Err(e) if own_id.is_none() => return Err(e),
        j => j,
    };
    // One send of an id at a time, whoever sends it: taken before the sender's hold (every
    // send takes them in this order). (TEST BUILDS ONLY: `msgid-unheld` skips it too.)
    let _id_hold = match &own_id {
        Some(id) if !crate::fault::test_break("msgid-unheld") => Some(ws.engine.hold_msg_id(id)?),
        _ => None,
    };
    if unheld && let Some(d) = look(&msg)? {
        return answered(d, &msg);
    }
    // The sender's hold: its next number, and the turn in which the look is made, so that
    // two sends of one id at once (a retry racing the first try) see each other: the second
    // finds the first's delivery.
    let numbered = super::seq::number(ws, me, &mut msg)?;
    if !unheld && let Some(d) = look(&msg)? {
        // The number goes unused: the counter moves only with a delivery.
        drop(numbered);
        return answered(d, &msg);
    }
    let (agents, intent) = judged?;
    let content = message::render(&msg);
    within_limits(ws, &content)?;
    let msg_id = msg.msg_id.clone().unwrap_or_default();

    if intent.opens_task {
        let task_id = task_id
            .clone()
            .ok_or_else(|| Error::refused(format!("intent {intent_name} needs a task_id")))?;
        let task_id = TaskId::new(task_id)?;
        let required: Vec<CheckName> =
            intent.required_checks.iter().map(CheckName::new).collect::<Result<_>>()?;
        let opened = open_task(
            ws,
            &TaskMessage {
                task_id: &task_id,
                intent: &intent_name,
                to: &to,
                priority: msg.priority.map(crate::message::Priority::as_str),
                deadline: msg.deadline.map(clock::stamp),
                sender: me,
                required_checks: &required,
                name,
                content: content.into_bytes(),
            },
        )
        .map_err(|e| delivered_anyway(e, &msg_id))?;
        return Ok(Delivery {
            msg_id,
            intent: intent_name,
            task_id: Some(task_id.to_string()),
            in_reply_to: msg.in_reply_to.clone(),
            task_inherited,
            delivered: vec![DeliveredCopy { mailbox: "new".into(), file: opened.message.clone() }],
            task: Some(opened),
            already_delivered: false,
        });
    }

    let mut d = deliver_to_inboxes(ws, me, &msg, &plan, agents, &content, &name)?;
    d.task_inherited = task_inherited;
    Ok(d)
}

/// A failure after this delivery's commit point (its events: detail `committed`): say
/// which message stands, so nobody sends it again for want of an id.
fn delivered_anyway(e: Error, msg_id: &str) -> Error {
    if e.is_committed() && !e.details.iter().any(|(k, _)| *k == "outbox") {
        let mut e = e.map_message(|m| format!("message {msg_id} was delivered, but {m}"));
        // What is left of it is finished by a repair, not by sending it again.
        e.hint = e.hint.map(|h| {
            h.replace(
                "and run the command again",
                "and `circe doctor --repair` finishes what is left of it",
            )
        });
        return e.hint_more("do not send it again");
    }
    e
}

/// Log the events of a delivery made, and close its journal. When they cannot be logged,
/// the journal is closed as failed (its events are tried again, else it stays for doctor)
/// and the delivery is said to stand ("was delivered, but").
fn log_delivered(
    ws: &Workspace,
    journal: Option<&str>,
    events: Vec<Event>,
    msg_id: &str,
) -> Result<Vec<Event>> {
    match ws.engine.append_events(events) {
        Ok(events) => {
            if let Some(j) = journal {
                // TEST BUILDS ONLY (`send.logged`): cut off after its events were logged.
                crate::fault::crash_point("send.logged");
                ws.engine.close_journal(j, true)?;
            }
            Ok(events)
        }
        Err(e) => {
            if let Some(j) = journal {
                let _ = ws.engine.close_journal(j, false);
            }
            let e = if e.is_committed() { e } else { e.detail("committed", true) };
            Err(delivered_anyway(e, msg_id))
        }
    }
}

/// A message that opens no task: one copy into each receiver's INBOX (with what its TX type
/// and the routing rules add), and its events.
fn deliver_to_inboxes(
    ws: &Workspace,
    me: &AgentName,
    msg: &Message,
    plan: &super::tx::Plan,
    agents: Vec<AgentName>,
    content: &str,
    name: &str,
) -> Result<Delivery> {
    let intent_name = msg.intent.clone().unwrap_or_default();
    let to = msg.to_agent().unwrap_or_default().to_string();
    let msg_id = msg.msg_id.clone().unwrap_or_default();
    if agents.is_empty() {
        let role = crate::address::Address::parse(&to).role(|r| ws.registry.is_role(r));
        return Err(Error::refused(format!("`{to}` reaches no agent")).hint(match role {
            Some(r) => {
                format!("no agent has role `{r}`: `circe agent add NAME --role {r}` makes one")
            }
            None => "`circe agent list` shows the agents".to_string(),
        }));
    }
    let reached: Vec<String> = agents.iter().filter_map(|a| ws.role_of(a)).collect();
    let receivers: Vec<AgentName> = agents
        .into_iter()
        .filter(|a| ws.role_of(a).is_some_and(|r| ws.registry.may_receive(&r, &intent_name)))
        .collect();
    if receivers.is_empty() {
        let mut roles: Vec<&str> = reached.iter().map(String::as_str).collect();
        roles.sort_unstable();
        roles.dedup();
        let all: Vec<&str> = ws.registry.roles.iter().map(String::as_str).collect();
        let may = ws.registry.receivers(&intent_name, &all);
        return Err(Error::refused(format!(
            "`{to}` reaches role {}, which may not receive {intent_name}",
            roles.join(", ")
        ))
        .hint(if may.is_empty() {
            format!("no role may receive {intent_name}; `circe registry` shows the rules")
        } else {
            format!("{intent_name} goes to: {}; `circe registry` shows the rules", may.join(", "))
        }));
    }
    let boxes: Vec<Mailbox> = receivers.iter().map(|a| Mailbox::Inbox(a.clone())).collect();
    let sent = super::tx::deliver(ws, me, msg, plan, content, name, &receivers)
        .map_err(|e| delivered_anyway(e, &msg_id))?;
    let delivered: Vec<DeliveredCopy> = boxes
        .iter()
        .zip(sent.files)
        .map(|(b, f)| DeliveredCopy { mailbox: b.label(), file: f })
        .collect();
    // TEST BUILDS ONLY (`send.logging`): cut off between the delivery and its events.
    crate::fault::crash_point("send.logging");
    log_delivered(ws, sent.journal.as_deref(), sent.events, &msg_id)?;
    Ok(Delivery {
        msg_id,
        intent: intent_name,
        task_id: msg.task_id.clone(),
        in_reply_to: msg.in_reply_to.clone(),
        task_inherited: false,
        delivered,
        task: None,
        already_delivered: false,
    })
}

/// A delivery and its events, kept in a journal from before the delivery until they are
/// logged (PROTOCOLS.md section 6, step 6): a command cut off between the two leaves them
/// to `doctor --repair`. `events_of` makes the events of the names the copies got (the
/// journal has them under the names they want, `wanted`; the delivery may number them).
pub(super) fn deliver_logged(
    ws: &Workspace,
    msg_id: &str,
    wanted: &[String],
    events_of: impl Fn(&[String]) -> Vec<Event>,
    deliver: impl FnOnce() -> Result<Vec<String>>,
) -> Result<Vec<String>> {
    let journal = journal(ws, msg_id, &events_of(wanted))?;
    let files = deliver().map_err(|e| {
        // Whatever was delivered before the failure gets its events, and is said to stand.
        let stands =
            journal.as_ref().is_some_and(|j| ws.engine.close_journal(j, false).unwrap_or(true));
        e.standing_if(stands)
    })?;
    crate::fault::crash_point("send.logging");
    log_delivered(ws, journal.as_deref(), events_of(&files), msg_id)?;
    Ok(files)
}

/// The journal of a delivery's events (TEST BUILDS ONLY: `no-journal` keeps none, so a
/// cut-off delivery's events are lost).
pub(super) fn journal(ws: &Workspace, msg_id: &str, events: &[Event]) -> Result<Option<String>> {
    if crate::fault::test_break("no-journal") {
        return Ok(None);
    }
    ws.engine.journal_events(msg_id, events)
}

/// What is delivered, filled in, stays within the root's limits, so that every reader can
/// read it whole.
fn within_limits(ws: &Workspace, content: &str) -> Result<()> {
    let size = u64::try_from(content.len()).unwrap_or(u64::MAX);
    let parsed = message::parse_limited(
        content.as_bytes(),
        Some(size),
        message::Mode::Draft,
        &ws.config.limits,
    );
    match parsed.err().and_then(|p| p.into_iter().find(|p| p.limit.is_some())) {
        Some(p) => Err(Error::refused(p.message).hint(p.hint.unwrap_or_default())),
        None => Ok(()),
    }
}

/// A task message opens (or hands on) a task as `new`: a header saying otherwise would
/// contradict what circe records, so it is refused rather than stored.
fn header_status_opens(msg: &Message) -> Result<()> {
    let Some(written) = msg.status.as_deref() else { return Ok(()) };
    if matches!(crate::message::status::normalize(written), Some("new")) || written == "pending" {
        return Ok(());
    }
    Err(Error::refused(format!(
        "the header says `status: {written}`, but a task message opens its task as new"
    ))
    .hint("remove the status line (circe records the task's status in TASKS/), or write `status: new`"))
}

/// The answer to a send of `msg` that was delivered before, as `delivered` (an idempotent
/// retry: nothing changes).
fn delivered_before(id: &str, msg: &Message, delivered: Vec<DeliveredCopy>) -> Delivery {
    Delivery {
        msg_id: id.to_string(),
        intent: msg.intent.clone().unwrap_or_default(),
        task_id: msg.task_id.clone(),
        in_reply_to: msg.in_reply_to.clone(),
        task_inherited: false,
        delivered,
        task: None,
        already_delivered: true,
    }
}

/// A message with id `id` that `circe archive` took: the same send again (same sender,
/// recipient, intent, task and summary, as the archive's index keeps them) is answered as
/// delivered before, with where it lies now; anything else with the id is a conflict. Not
/// sent again either way.
fn archived_copy(
    ws: &Workspace,
    id: &str,
    me: &AgentName,
    msg: &Message,
) -> Result<Option<Delivery>> {
    if !ws.engine.keeps_archive() {
        return Ok(None);
    }
    let q = crate::archive::query::Query { id: Some(id.to_string()), ..Default::default() };
    let mut hits = Vec::new();
    ws.engine.archive_search(&q, &mut |h| {
        if h.entry.msg_id.as_deref() == Some(id) {
            hits.push(h);
        }
        Ok(true)
    })?;
    let Some(first) = hits.first() else { return Ok(None) };
    let same = |h: &crate::archive::Hit| {
        h.entry.from.as_deref().map(crate::message::agent_of) == Some(me.as_str())
            && h.entry.to == msg.to
            && h.entry.intent == msg.intent
            && h.entry.task == msg.task_id
            && h.entry.summary.as_deref()
                == Some(
                    crate::archive::summary::summary_line(msg.headline.as_deref(), &msg.body)
                        .as_str(),
                )
    };
    let at = |h: &crate::archive::Hit| DeliveredCopy {
        mailbox: format!("archive:{}/{}", h.period, h.segment),
        file: h.entry.origin.clone().unwrap_or_else(|| h.entry.member.clone()),
    };
    if hits.iter().all(same) {
        return Ok(Some(delivered_before(id, msg, hits.iter().map(at).collect())));
    }
    let at = at(first);
    let held = format!("the archive holds another message with it ({} in {})", at.file, at.mailbox);
    Err(id_taken(id, &held, at))
}

/// A send's msg id that another message holds (`held` says where): a conflict naming its
/// place.
fn id_taken(id: &str, held: &str, at: DeliveredCopy) -> Error {
    Error::conflict(format!("message id {id} is taken: {held}"))
        .detail("box", at.mailbox)
        .detail("file", at.file)
        .hint("leave the id out (no --msg-id, no msg_id line in the draft) and circe makes a fresh one, or give the message an id of its own")
}

/// Where a message with id `id` already lies, if one does. The same send again (same sender,
/// recipient, intent, task and body) is answered with that delivery; anything else with the
/// same id is a conflict.
fn earlier_copy(
    ws: &Workspace,
    id: &str,
    me: &AgentName,
    msg: &Message,
) -> Result<Option<Delivery>> {
    let found: Vec<super::Found> = ws
        .engine
        .find_msg_id(id)?
        .into_iter()
        .map(|(b, file)| super::Found {
            mailbox: b.label(),
            message: super::read(ws, &b, &file).ok(),
            file,
            location: b,
        })
        .collect();
    let Some(first) = found.first() else { return archived_copy(ws, id, me, msg) };
    let same = |m: &Message| {
        m.from_agent() == Some(me.as_str())
            && m.to == msg.to
            && m.intent == msg.intent
            && m.task_id == msg.task_id
            && m.body == msg.body
    };
    if found.iter().all(|f| f.message.as_ref().is_some_and(same)) {
        let copies = found
            .iter()
            .map(|f| DeliveredCopy { mailbox: f.mailbox.clone(), file: f.file.clone() })
            .collect();
        return Ok(Some(delivered_before(id, msg, copies)));
    }
    let held = format!("{}/{} holds another message with it", first.mailbox, first.file);
    let at = DeliveredCopy { mailbox: first.mailbox.clone(), file: first.file.clone() };
    Err(id_taken(id, &held, at))
}
