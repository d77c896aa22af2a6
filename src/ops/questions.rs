//! Open questions: a question is open until some message answers it (`in_reply_to` its
//! `msg_id`). Read from the boxes alone: nothing is recorded beside the messages.

use std::collections::{BTreeMap, HashSet};
use std::ops::ControlFlow;

use serde::Serialize;

use super::seq::Gist;
use crate::boxes::Mailbox;
use crate::error::{Error, Result};
use crate::message::Message;
use crate::names::AgentName;
use crate::workspace::Workspace;

/// A question (a message whose intent expects a reply: question, request_help, escalate,
/// approval_request, ask) that no message answers yet.
#[derive(Debug, Clone, Serialize)]
pub struct Question {
    pub msg_id: String,
    pub intent: String,
    /// The intent an answer has (`answer`, `ask-response`).
    pub expects: String,
    pub from: String,
    pub to: String,
    pub task_id: Option<String>,
    pub summary: Option<String>,
    pub created_at: Option<String>,
    /// Seconds since it was asked.
    pub age_seconds: Option<i64>,
    /// `to_me` (the acting agent has a copy), `from_me` (it asked), or `other`.
    pub direction: String,
    /// The agents holding a copy in their INBOX or WORKSPACE.
    pub holders: Vec<String>,
}

/// A message circe sent on its own to escalate a parked task.
pub fn is_circe_escalation(m: &Message) -> bool {
    m.from_agent() == Some(crate::event::CIRCE) && m.intent.as_deref() == Some("escalate")
}

/// circe's own escalation of a parked task asks for the task to be seen to: once it is no
/// longer parked (put back in the queue, addressed anew, archived), nothing waits for an
/// answer.
fn settled_escalation(ws: &Workspace, m: &Message) -> bool {
    if !is_circe_escalation(m) {
        return false;
    }
    let Some(t) = m.task_id.as_deref().and_then(|t| crate::names::TaskId::new(t).ok()) else {
        return false;
    };
    ws.engine.peek(&t).ok().flatten().is_none_or(|st| st.rec.status != crate::task::Status::Parked)
}

/// Is `m` a question: its intent expects a reply and opens no task?
pub(crate) fn is_question(ws: &Workspace, m: &Message) -> bool {
    is_question_intent(ws, m.intent.as_deref())
}

/// Does `intent` expect a reply and open no task?
fn is_question_intent(ws: &Workspace, intent: Option<&str>) -> bool {
    let expects = intent.and_then(|i| ws.registry.intent(i));
    expects.is_some_and(|i| !i.opens_task && i.expects_reply.is_some())
}

/// Is `m` a question's copy (with an id) whose moves hold the filing lock
/// (`Engine::hold_filing`): `take`, and `reap` filing a last copy while it tells the asker?
pub(crate) fn moves_under_filing_lock(ws: &Workspace, m: &Message) -> bool {
    m.msg_id.is_some() && is_question(ws, m)
}

/// How many open questions `me` holds a copy of (`prime`'s count), given the gists of its
/// INBOX (`seq::inbox_gists`). Only when its own boxes hold a question is every box read
/// (to learn which are answered; its INBOX by those gists): an agent asked nothing is
/// answered from its INBOX's gists and its WORKSPACE alone.
pub fn open_to(ws: &Workspace, me: &AgentName, inbox: &super::seq::Gists) -> Result<usize> {
    let asks = |intent: Option<&str>| intent.is_some() && is_question_intent(ws, intent);
    let mut asked_me =
        inbox.iter().any(|(_, g)| g.as_ref().is_some_and(|g| asks(g.asks.as_deref())));
    if !asked_me {
        let b = Mailbox::Workspace(me.clone());
        let names = ws.engine.list_box(&b)?;
        asked_me = names.iter().any(|name| {
            super::read(ws, &b, name).is_ok_and(|m| m.msg_id.is_some() && is_question(ws, &m))
        });
    }
    if !asked_me {
        return Ok(0);
    }
    let own = Mailbox::Inbox(me.clone());
    let open = gathered(ws, Some(me), true, Some((&own, inbox)))?;
    Ok(open.iter().filter(|q| q.direction == "to_me").count())
}

/// Every open question, oldest first; for `me`, only those it asked or holds a copy of.
pub fn questions(ws: &Workspace, me: Option<&AgentName>) -> Result<Vec<Question>> {
    gathered(ws, me, true, None)
}

/// `questions`; with `strict` false a box that cannot be listed is passed over. `known`:
/// the gists of an INBOX taken already (`seq::inbox_gists`).
fn gathered(
    ws: &Workspace,
    me: Option<&AgentName>,
    strict: bool,
    known: Option<(&Mailbox, &super::seq::Gists)>,
) -> Result<Vec<Question>> {
    let mut answered: HashSet<String> = HashSet::new();
    let mut asked: BTreeMap<String, (Message, Vec<String>)> = BTreeMap::new();
    // A question's copy is read whole; of any other message its gist says enough.
    let whole = |g: &Gist| g.id.is_some() && is_question_intent(ws, g.asks.as_deref());
    for b in ws.engine.boxes()? {
        if b == Mailbox::NewMessages {
            continue;
        }
        let gists = known.filter(|(k, _)| **k == b).map(|(_, g)| g);
        let seen = super::seq::each_message(ws, &b, gists, &whole, |_, g, m| {
            let Some(m) = m else {
                answered.extend(g.reply_to.clone());
                return ControlFlow::<()>::Continue(());
            };
            if let Some(r) = &m.in_reply_to {
                answered.insert(r.clone());
            }
            let Some(id) = m.msg_id.clone().filter(|_| is_question(ws, &m)) else {
                return ControlFlow::Continue(());
            };
            let entry = asked.entry(id).or_insert_with(|| (m, Vec::new()));
            if let Some(a) = b.agent() {
                entry.1.push(a.to_string());
            }
            ControlFlow::Continue(())
        });
        match seen {
            Ok(_) => {}
            Err(_) if !strict => {}
            Err(e) => return Err(e),
        }
    }
    let now = ws.now();
    let mut out: Vec<Question> = asked
        .into_iter()
        // An ask is open while its record says so (an `update` in reply answers nothing);
        // any other question until something replies to it.
        .filter(|(id, (m, _))| match crate::names::MsgId::new(id).ok().map(|i| ws.engine.ask(&i)) {
            Some(Ok(Some(ask))) => ask.is_open(),
            // circe's escalation: open while its task stays parked, whatever replies to it.
            _ if is_circe_escalation(m) => !settled_escalation(ws, m),
            _ => !answered.contains(id),
        })
        .filter_map(|(id, (m, holders))| {
            let from = m.from_agent().unwrap_or_default().to_string();
            let direction = match me {
                Some(a) if from == a.as_str() => "from_me",
                Some(a) if holders.iter().any(|h| h == a.as_str()) => "to_me",
                Some(_) => return None,
                None => "other",
            };
            let intent = m.intent.clone().unwrap_or_default();
            let expects = ws
                .registry
                .intent(&intent)
                .and_then(|i| i.expects_reply.clone())
                .unwrap_or_default();
            Some(Question {
                msg_id: id,
                intent,
                expects,
                from,
                to: m.to_agent().unwrap_or_default().to_string(),
                task_id: m.task_id.clone(),
                summary: m.summary(),
                created_at: m.created_at.map(crate::clock::format),
                age_seconds: m.created_at.map(|t| (now - t).num_seconds()),
                direction: direction.to_string(),
                holders,
            })
        })
        .collect();
    // Oldest first, as times (their text drops `.000`).
    let at = |q: &Question| {
        q.created_at.as_deref().and_then(|s| chrono::DateTime::parse_from_rfc3339(s).ok())
    };
    out.sort_by(|a, b| at(a).cmp(&at(b)).then(a.msg_id.cmp(&b.msg_id)));
    Ok(out)
}

/// `me` files its copies `msgs`: refused when one is a question of another agent that no
/// message answers and no other agent holds a copy of (filed, it would stay open for its
/// asker with nobody left to answer it). Only when one of them is a question is every box
/// read (a box that cannot be read is passed over), and then the returned hold is to be
/// kept until the copies are filed.
pub fn refuse_filing_unanswered<'w>(
    ws: &'w Workspace,
    me: &AgentName,
    key: &str,
    msgs: &[&Message],
) -> Result<Option<crate::engine::Held<'w>>> {
    let asked: Vec<&str> = msgs
        .iter()
        .filter(|m| m.from_agent() != Some(me.as_str()) && is_question(ws, m))
        .filter_map(|m| m.msg_id.as_deref())
        .collect();
    if asked.is_empty() {
        return Ok(None);
    }
    // Two holders filing their copies at once go one after the other.
    let held = ws.engine.hold_filing()?;
    let open = gathered(ws, None, false, None)?;
    let Some(q) = open
        .iter()
        .find(|q| asked.contains(&q.msg_id.as_str()) && q.holders.iter().all(|h| h == me.as_str()))
    else {
        return Ok(Some(held));
    };
    let id = &q.msg_id;
    if q.from == crate::event::CIRCE {
        let task = q.task_id.as_deref().unwrap_or("TASK");
        return Err(Error::refused(format!(
            "{id} is circe's escalation of parked task {task}: it stays until the task is seen to"
        ))
        .hint(format!(
            "put the task back (`circe --agent {me} release --force {task}`) or address it anew (`circe --agent {me} readdress {task} --to role:ROLE`); either closes it"
        )));
    }
    Err(Error::refused(format!(
        "{id} is {}'s {} and nothing answers it: filed, it would stay open for {} with nobody left to answer it",
        q.from, q.intent, q.from
    ))
    .hint(format!(
        "answer it first (an answer may say no): `circe --agent {me} send --intent {} --in-reply-to {id} --summary \"...\"`, then `circe --agent {me} done {key}`",
        q.expects
    )))
}
