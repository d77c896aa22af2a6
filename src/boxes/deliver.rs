//! `circe send`: check a message against the registry, then deliver it. Nothing is written
//! anywhere until every check has passed.

use std::collections::BTreeSet;

use serde::Serialize;

use crate::clock;
use crate::error::{Error, Result};
use crate::message::{self, Format, Message, Mode};
use crate::registry::SendCheck;
use crate::store::Mailbox;
use crate::task::{self, OpenOutcome, OpenSpec};
use crate::workspace::Workspace;

#[derive(Debug, Clone, Serialize)]
pub struct Delivery {
    pub msg_id: String,
    pub intent: String,
    /// `new` for a task message, else `inbox:<agent>` per copy.
    pub delivered: Vec<DeliveredCopy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task: Option<OpenOutcome>,
}

#[derive(Debug, Clone, Serialize)]
pub struct DeliveredCopy {
    #[serde(rename = "box")]
    pub mailbox: String,
    pub file: String,
}

/// Who `to` reaches: (agents, the roles they have). An agent name wins over a role name.
fn resolve(ws: &Workspace, me: &str, to: &str) -> Result<(Vec<String>, Vec<String>)> {
    if to == "all" {
        let agents: Vec<String> =
            ws.agents().keys().filter(|a| a.as_str() != me).cloned().collect();
        let mut roles: BTreeSet<String> = agents.iter().filter_map(|a| ws.role_of(a)).collect();
        if roles.is_empty() {
            roles = ws.registry.roles.iter().cloned().collect();
        }
        return Ok((agents, roles.into_iter().collect()));
    }
    if let Some(role) = ws.role_of(to) {
        return Ok((vec![to.to_string()], vec![role]));
    }
    if ws.registry.is_role(to) {
        return Ok((ws.agents_with_role(to), vec![to.to_string()]));
    }
    Err(Error::not_found(format!("no agent or role `{to}`")).hint(
        "`circe agent list` shows the agents, `circe registry` the roles; `all` reaches everyone",
    ))
}

/// Fill in what a draft may leave out, and check the sender.
fn complete(msg: &mut Message, me: &str) -> Result<()> {
    if let Some(from) = msg.from_agent() {
        if from != me {
            return Err(Error::refused(format!(
                "the message says it is from `{from}` but the acting agent is `{me}`"
            ))
            .hint("remove the from: line, or act as that agent with --agent"));
        }
    } else {
        msg.from = Some(me.to_string());
    }
    let now = clock::now();
    msg.created_at.get_or_insert(now);
    if msg.msg_id.is_none() {
        msg.msg_id = Some(clock::new_msg_id(now));
    }
    if msg.status.is_none() {
        msg.status = Some("new".into());
    }
    Ok(())
}

/// What is delivered, filled in, stays within the root's limits, so that every reader
/// can read it whole.
fn within_limits(ws: &Workspace, content: &str) -> Result<()> {
    let size = u64::try_from(content.len()).unwrap_or(u64::MAX);
    let parsed =
        message::parse_limited(content.as_bytes(), Some(size), Mode::Draft, &ws.config.limits);
    match parsed.err().and_then(|p| p.into_iter().find(|p| p.limit.is_some())) {
        Some(p) => Err(Error::refused(p.message).hint(p.hint.unwrap_or_default())),
        None => Ok(()),
    }
}

/// Check `msg` against the registry and deliver it as `me`. Task messages go to
/// NEW_MESSAGES and open (or hand off) their task; others go to each recipient's INBOX.
pub fn send(ws: &Workspace, me: &str, mut msg: Message) -> Result<Delivery> {
    let my_role = ws.role_of(me).ok_or_else(|| Error::not_found(format!("no agent `{me}`")))?;
    complete(&mut msg, me)?;
    let intent_name =
        msg.intent.clone().ok_or_else(|| Error::refused("the message has no intent"))?;
    let to = msg
        .to_agent()
        .ok_or_else(|| Error::refused("the message has no recipient (to)"))?
        .to_string();
    let (agents, roles) = resolve(ws, me, &to)?;
    let role_refs: Vec<&str> = roles.iter().map(String::as_str).collect();
    let intent = ws.registry.check_send(&SendCheck {
        intent: &intent_name,
        from_role: &my_role,
        to_roles: &role_refs,
        to_label: &to,
        has_task_id: msg.task_id.is_some(),
    })?;
    let created = msg.created_at.unwrap_or_else(clock::now);
    let task_id = msg.task_id.clone();
    let name = |n: u32| message::file_name(created, me, &to, &intent_name, task_id.as_deref(), n);
    let content = message::render(&msg);
    within_limits(ws, &content)?;
    let msg_id = msg.msg_id.clone().unwrap_or_default();

    if intent.opens_task {
        let task_id = task_id
            .clone()
            .ok_or_else(|| Error::refused(format!("intent {intent_name} needs a task_id")))?;
        let priority = msg.priority.map_or("normal", |p| p.as_str());
        let spec = OpenSpec {
            task_id: &task_id,
            intent: &intent_name,
            to: &to,
            priority,
            sender: me,
            required_checks: &intent.required_checks,
        };
        let opened = task::open_task(ws, &spec, content.as_bytes(), &name)?;
        return Ok(Delivery {
            msg_id,
            intent: intent_name,
            delivered: vec![DeliveredCopy { mailbox: "new".into(), file: opened.message.clone() }],
            task: Some(opened),
        });
    }

    let receivers: Vec<String> = agents
        .into_iter()
        .filter(|a| ws.role_of(a).is_some_and(|r| ws.registry.may_receive(&r, &intent_name)))
        .collect();
    if receivers.is_empty() {
        return Err(Error::refused(format!(
            "no agent reached by `{to}` may receive {intent_name}"
        ))
        .hint(
            "`circe registry` shows who may receive each intent; `circe agent add` makes agents",
        ));
    }
    let boxes: Vec<Mailbox> = receivers.iter().map(|a| Mailbox::Inbox(a.clone())).collect();
    let targets: Vec<(Mailbox, &dyn Fn(u32) -> String)> =
        boxes.iter().map(|b| (b.clone(), &name as &dyn Fn(u32) -> String)).collect();
    let files = ws.store.put_messages(&targets, content.as_bytes())?;
    let delivered: Vec<DeliveredCopy> = boxes
        .iter()
        .zip(files)
        .map(|(b, f)| DeliveredCopy { mailbox: b.label(), file: f })
        .collect();
    let mut ev = task::Event::new("send", me)
        .with("msg_id", msg_id.as_str())
        .with("intent", intent_name.as_str())
        .with("addressed_to", to.as_str());
    if let Some(t) = &msg.task_id {
        ev = ev.task(t);
    }
    ev.with("recipients", receivers).append(&ws.store)?;
    Ok(Delivery { msg_id, intent: intent_name, delivered, task: None })
}

/// A notice from circe on behalf of `by` to every coordinator's INBOX (no registry check:
/// these are circe's own announcements, see `announce` in circe.yaml).
pub fn notify_coordinators(
    ws: &Workspace,
    by: &str,
    intent: &str,
    task: &str,
    text: &str,
) -> Result<()> {
    let coordinators = ws.agents_with_role("coordinator");
    if coordinators.is_empty() {
        return Ok(());
    }
    let now = clock::now();
    let mut msg = Message::new(Format::Circe);
    msg.from = Some(by.to_string());
    msg.to = Some("coordinator".into());
    msg.intent = Some(intent.to_string());
    msg.task_id = Some(task.to_string());
    msg.status = Some("new".into());
    msg.created_at = Some(now);
    msg.msg_id = Some(clock::new_msg_id(now));
    msg.body = format!("## Summary\n{text}\n");
    let content = message::render(&msg);
    let name = |n: u32| message::file_name(now, by, "coordinator", intent, Some(task), n);
    let boxes: Vec<Mailbox> = coordinators.into_iter().map(Mailbox::Inbox).collect();
    let targets: Vec<(Mailbox, &dyn Fn(u32) -> String)> =
        boxes.iter().map(|b| (b.clone(), &name as &dyn Fn(u32) -> String)).collect();
    ws.store.put_messages(&targets, content.as_bytes())?;
    Ok(())
}
