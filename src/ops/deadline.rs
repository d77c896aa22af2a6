//! Deadlines on what is not a task (PROTOCOLS.md section 16): an open ask whose deadline
//! passed expires and its asker is told; a message lying unread in an INBOX past its deadline
//! is filed into LOGS ("expired messages logged but not processed"). `circe reap` does both.

use serde::Serialize;

use crate::boxes::Mailbox;
use crate::clock;
use crate::error::Result;
use crate::event::{CIRCE, Event, EventKind};
use crate::message::{self, Format, Message};
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
        if told_already(ws, a)? {
            return Ok(());
        }
        tell_asker(ws, a)
    };
    let (expired, kept) = super::asks::expire(ws, &tell)?;
    for (id, e) in kept {
        out.undone.push((format!("ask {id} (kept open: its asker was not told)"), e.message));
    }
    for a in expired {
        out.asks.push(a.msg_id.to_string());
    }
    let now = ws.now();
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

/// Is circe's notice that ask `a` expired in its asker's INBOX or WORKSPACE already (told by
/// a run cut off before it marked the ask expired)?
fn told_already(ws: &Workspace, a: &crate::tx::AskRecord) -> Result<bool> {
    let prefix = format!("_{CIRCE}-{}_update", a.from);
    for b in [Mailbox::Inbox(a.from.clone()), Mailbox::Workspace(a.from.clone())] {
        for name in ws.engine.list_box(&b)?.into_iter().filter(|n| n.contains(&prefix)) {
            let Ok(m) = super::read(ws, &b, &name) else { continue };
            if m.from_agent() == Some(CIRCE) && m.in_reply_to.as_deref() == Some(a.msg_id.as_str())
            {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

/// An `update` from circe to the asker: its ask expired unanswered.
fn tell_asker(ws: &Workspace, a: &crate::tx::AskRecord) -> Result<()> {
    let now = ws.now();
    let mut m = Message::new(Format::FrontMatter);
    m.from = Some(CIRCE.to_string());
    m.to = Some(a.from.to_string());
    m.intent = Some("update".into());
    m.task_id = a.task.as_ref().map(ToString::to_string);
    m.status = Some("failed".into());
    m.created_at = Some(now);
    m.msg_id = Some(clock::new_msg_id(now));
    m.in_reply_to = Some(a.msg_id.to_string());
    m.headline = Some(format!("ask {} expired unanswered", a.msg_id));
    m.body = format!(
        "\nYour {} {} to {} passed its deadline {} without an answer.\n",
        a.intent,
        a.msg_id,
        a.to,
        a.deadline.as_deref().unwrap_or("-")
    );
    let name = message::fit_name(message::file_name(
        now,
        CIRCE,
        a.from.as_str(),
        "update",
        m.task_id.as_deref(),
        1,
    ));
    let inbox = Mailbox::Inbox(a.from.clone());
    let me = crate::names::AgentName::new(CIRCE)?;
    let events_of = |files: &[String]| {
        let mut ev = Event::now(EventKind::Lapse, CIRCE);
        ev.msg_id = Some(a.msg_id.to_string());
        ev.note = Some(format!("ask expired; {} told", a.from));
        for f in files {
            ev = ev.file(inbox.label(), f.clone());
        }
        vec![ev]
    };
    let own_id = m.msg_id.clone().unwrap_or_default();
    super::send::deliver_logged(ws, &own_id, std::slice::from_ref(&name), events_of, || {
        super::seq::deliver_numbered(ws, &me, &mut m, |m| {
            ws.engine.deliver(message::render(m).as_bytes(), &name, std::slice::from_ref(&inbox))
        })
    })?;
    Ok(())
}
