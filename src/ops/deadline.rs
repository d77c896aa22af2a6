//! Deadlines on what is not a task (PROTOCOLS.md section 16): an open ask whose deadline
//! passed expires and its asker is told; a message lying unread in an INBOX past its deadline
//! is filed into LOGS ("expired messages logged but not processed"). `circe reap` does both.

use serde::Serialize;

use crate::boxes::Mailbox;
use crate::clock;
use crate::error::Result;
use crate::event::{CIRCE, Event, EventKind};
use crate::message::{self, Format, Message};
use crate::names::AgentName;
use crate::workspace::Workspace;

/// What `reap_messages` did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Lapsed {
    /// Asks that expired unanswered.
    pub asks: Vec<String>,
    /// Messages filed from an INBOX into LOGS: (box, file).
    pub filed: Vec<(String, String)>,
    /// What could not be done, with why (an INBOX behind a link, an ask whose asker cannot
    /// be told): the rest was.
    #[serde(skip)]
    pub undone: Vec<(String, String)>,
}

/// Expire overdue asks (telling each asker) and file overdue INBOX messages into LOGS.
pub fn reap_messages(ws: &Workspace) -> Result<Lapsed> {
    let mut out = Lapsed::default();
    // Told before the ask expires (a run cut off between the two told it already).
    let tell = |a: &crate::tx::AskRecord| {
        ws.engine.check_box(&Mailbox::Inbox(a.from.clone()), "deliver into")?;
        tell_once(ws, &Unanswered::of_ask(a))
    };
    let (expired, kept) = super::asks::expire(ws, &tell)?;
    for (id, e) in kept {
        out.undone.push((format!("ask {id} (kept open: its asker was not told)"), e.message));
    }
    for a in expired {
        out.asks.push(a.msg_id.to_string());
    }
    let now = ws.root_now()?;
    // The open questions, read once an overdue message is a question.
    let mut open: Option<Vec<super::Question>> = None;
    for agent in ws.agents().keys().cloned().collect::<Vec<_>>() {
        let inbox = Mailbox::Inbox(agent.clone());
        let names = match ws.engine.list_box(&inbox) {
            Ok(names) => names,
            Err(e) => {
                out.undone.push((inbox.label(), e.message));
                continue;
            }
        };
        for name in names {
            let Ok(m) = super::read(ws, &inbox, &name) else { continue };
            if m.deadline.is_none_or(|d| d > now) || super::seq::is_ticket(ws, &m, &name)? {
                continue;
            }
            // The last copy of a question nobody answered: its asker is told first. A
            // question's copy is filed holding the filing lock `done` holds, so a holder
            // filing its own copy meanwhile is seen.
            let filing = if super::questions::moves_under_filing_lock(ws, &m) {
                ws.engine.hold_filing().map(Some)
            } else {
                Ok(None)
            };
            let held = match filing {
                Ok(f) => f,
                Err(e) => {
                    out.undone.push((format!("{}/{name}", inbox.label()), e.message));
                    continue;
                }
            };
            // Taken up meanwhile (`take` moves a question's copy holding the same lock).
            if held.is_some() && super::read(ws, &inbox, &name).is_err() {
                continue;
            }
            let told = last_unanswered(ws, &mut open, &agent, &m)
                .and_then(|q| q.map_or(Ok(()), |q| tell_once(ws, &q)));
            if let Err(e) = told {
                let what = format!("{}/{name} (kept: its asker was not told)", inbox.label());
                out.undone.push((what, e.message));
                continue;
            }
            let Some(used) = ws.engine.file_message(&inbox, &Mailbox::Logs, &name)? else {
                continue;
            };
            let mut ev = Event::now(EventKind::Lapse, CIRCE).file(Mailbox::Logs.label(), used);
            ev.msg_id.clone_from(&m.msg_id);
            ev.owner = Some(agent.to_string());
            ev.note = m.deadline.map(|d| format!("deadline {} passed unread", clock::format(d)));
            ws.engine.append_events(vec![ev])?;
            out.filed.push((inbox.label(), name));
        }
    }
    Ok(out)
}

/// A question or ask that lapsed unanswered, as circe tells its asker.
struct Unanswered {
    asker: AgentName,
    msg_id: String,
    intent: String,
    to: String,
    task: Option<String>,
    deadline: Option<String>,
    /// An ask expired; a question's last copy was filed unread.
    ask: bool,
}

impl Unanswered {
    fn of_ask(a: &crate::tx::AskRecord) -> Self {
        Unanswered {
            asker: a.from.clone(),
            msg_id: a.msg_id.to_string(),
            intent: a.intent.clone(),
            to: a.to.clone(),
            task: a.task.as_ref().map(ToString::to_string),
            deadline: a.deadline.clone(),
            ask: true,
        }
    }
}

/// `m`, overdue in `agent`'s INBOX, as the last copy of a question nobody answered, asked
/// by an agent of the root: its asker is to be told. `open` (which questions are open) is
/// read on the first question; who holds a copy is looked up for each (hold the filing
/// lock).
fn last_unanswered(
    ws: &Workspace,
    open: &mut Option<Vec<super::Question>>,
    agent: &AgentName,
    m: &Message,
) -> Result<Option<Unanswered>> {
    let Some(id) = m.msg_id.as_deref() else { return Ok(None) };
    let Some(asker) = m.from_agent().and_then(|a| AgentName::new(a).ok()) else {
        return Ok(None);
    };
    if asker.as_str() == CIRCE || !ws.agents().contains_key(&asker) {
        return Ok(None);
    }
    // An ask's asker is told when the ask expires, from its record.
    if !super::questions::is_question(ws, m)
        || crate::names::MsgId::new(id).is_ok_and(|i| ws.engine.ask(&i).is_ok_and(|a| a.is_some()))
    {
        return Ok(None);
    }
    if open.is_none() {
        *open = Some(super::questions(ws, None)?);
    }
    let Some(q) = open.as_ref().and_then(|qs| qs.iter().find(|q| q.msg_id == id)) else {
        return Ok(None);
    };
    // Who holds a copy now (the open questions were read at the run's start; copies may
    // have been filed since): another holder left, the asker is not told.
    let others =
        ws.engine.find_msg_id(id)?.into_iter().any(|(b, _)| b.agent().is_some_and(|a| a != agent));
    if others {
        return Ok(None);
    }
    Ok(Some(Unanswered {
        asker,
        msg_id: id.to_string(),
        intent: q.intent.clone(),
        to: q.to.clone(),
        task: q.task_id.clone(),
        deadline: m.deadline.map(clock::format),
        ask: false,
    }))
}

/// Tell the asker, unless circe's notice is in its INBOX or WORKSPACE already (told by a
/// run cut off before it went on, or by another `reap` at the same moment: a question's
/// notice is told holding the filing lock, an ask's under the ask's own lock), or, for a
/// question, an answer reached the asker since the run read the boxes (an answer goes to
/// its asker).
fn tell_once(ws: &Workspace, q: &Unanswered) -> Result<()> {
    let prefix = format!("_{CIRCE}-{}_update", q.asker);
    for b in [Mailbox::Inbox(q.asker.clone()), Mailbox::Workspace(q.asker.clone())] {
        let names = ws.engine.list_box(&b)?;
        // An ask's notice is found by its name; a question's answer may lie under any.
        for name in names.into_iter().filter(|n| !q.ask || n.contains(&prefix)) {
            let Ok(m) = super::read(ws, &b, &name) else { continue };
            if m.in_reply_to.as_deref() == Some(&q.msg_id)
                && (m.from_agent() == Some(CIRCE) || !q.ask)
            {
                return Ok(());
            }
        }
    }
    tell_asker(ws, q)
}

/// An `update` from circe to the asker: its ask expired unanswered, or its question's last
/// copy was filed unread past its deadline.
fn tell_asker(ws: &Workspace, q: &Unanswered) -> Result<()> {
    let now = ws.now();
    let mut m = Message::new(Format::FrontMatter);
    m.from = Some(CIRCE.to_string());
    m.to = Some(q.asker.to_string());
    m.intent = Some("update".into());
    m.task_id.clone_from(&q.task);
    m.status = Some("failed".into());
    m.created_at = Some(now);
    m.msg_id = Some(clock::new_msg_id(now));
    m.in_reply_to = Some(q.msg_id.clone());
    let deadline = q.deadline.as_deref().unwrap_or("-");
    let (headline, body, note) = if q.ask {
        (
            format!("ask {} expired unanswered", q.msg_id),
            format!("passed its deadline {deadline} without an answer"),
            format!("ask expired; {} told", q.asker),
        )
    } else {
        (
            format!("{} {} filed unread", q.intent, q.msg_id),
            format!(
                "passed its deadline {deadline} unread and unanswered: it is filed in LOGS; ask again if it still matters"
            ),
            format!("{} filed unread; {} told", q.intent, q.asker),
        )
    };
    m.headline = Some(headline);
    m.body = format!("\nYour {} {} to {} {body}.\n", q.intent, q.msg_id, q.to);
    let name = message::fit_name(message::file_name(
        now,
        CIRCE,
        q.asker.as_str(),
        "update",
        m.task_id.as_deref(),
        1,
    ));
    let inbox = Mailbox::Inbox(q.asker.clone());
    let me = AgentName::new(CIRCE)?;
    let events_of = |files: &[String]| {
        let mut ev = Event::now(EventKind::Lapse, CIRCE);
        ev.msg_id = Some(q.msg_id.clone());
        // circe's notice answers nothing, but a wait for a reply learns from it that none
        // will come.
        ev.in_reply_to = (!q.ask).then(|| q.msg_id.clone());
        ev.note = Some(note.clone());
        for f in files {
            ev = ev.file(inbox.label(), f.clone());
        }
        vec![ev]
    };
    let own_id = m.msg_id.clone().unwrap_or_default();
    // Logged under the hold, as a send's are: the next numbered message of circe logs
    // nothing before this one's events (PROTOCOLS.md section 6, step 6).
    super::seq::deliver_numbered(ws, &me, &mut m, |m| {
        super::send::deliver_logged(ws, &own_id, std::slice::from_ref(&name), events_of, || {
            ws.engine.deliver(message::render(m).as_bytes(), &name, std::slice::from_ref(&inbox))
        })
    })?;
    Ok(())
}
