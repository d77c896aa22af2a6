//! Messages circe sends on its own, as sender `circe` (which no agent may be called):
//! escalations (a parked task) to the coordinators and the humans, and status updates to the
//! coordinators (`announce: inbox`).

use crate::boxes::Mailbox;
use crate::clock;
use crate::error::Result;
use crate::event::{CIRCE, Event, EventKind};
use crate::message::{self, Format, Message};
use crate::names::{AgentName, TaskId};
use crate::task::Notice;
use crate::workspace::Workspace;

/// Who a notice of `intent` reaches: for `escalate`, everyone circe.yaml's `escalation`
/// names (default coordinator and rooster); otherwise every coordinator. An entry that is a
/// role means every agent with that role (whatever agents are named), else the agent.
fn recipients(ws: &Workspace, intent: &str) -> Vec<AgentName> {
    let targets: Vec<&str> = if intent == "escalate" {
        ws.config.escalation.iter().map(String::as_str).collect()
    } else {
        vec!["coordinator"]
    };
    let mut out: Vec<AgentName> = Vec::new();
    for t in targets {
        // An address as in `to:` (a role name means the role); an unknown one reaches nobody.
        if let Ok((agents, _)) = ws.reach(t) {
            out.extend(agents);
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Every entry of circe.yaml's `escalation` must reach someone: an agent or a role of this
/// root (a typo would silently turn off the one alarm for parked tasks). Checked when a
/// root opens, as routing is: exit 3 naming the entry, with the closest name.
pub fn check_escalation(ws: &Workspace) -> Result<()> {
    for t in &ws.config.escalation {
        let name = crate::address::Address::parse(t).name();
        let known = name == crate::registry::BROADCAST
            || ws.registry.is_role(name)
            || ws.is_agent_named(name);
        if known {
            continue;
        }
        let all = ws.agents();
        let names =
            all.keys().map(AgentName::as_str).chain(ws.registry.roles.iter().map(String::as_str));
        let near = crate::suggest::closest(name, names).map(|c| format!("did you mean `{c}`? "));
        return Err(crate::error::Error::refused(format!(
            "circe.yaml: escalation: `{t}` is no agent or role of this root: a parked task would alert nobody there"
        ))
        .hint(format!(
            "{}`circe agent list` and `circe registry` show them (the default is [coordinator, rooster])",
            near.unwrap_or_default()
        )));
    }
    Ok(())
}

/// Deliver `notices` about `task`, one message each, to their recipients' INBOXes.
pub fn send(ws: &Workspace, task: &TaskId, notices: &[Notice]) -> Result<()> {
    for n in notices {
        let to = recipients(ws, n.intent);
        if to.is_empty() {
            continue;
        }
        let now = ws.now();
        let mut msg = Message::new(Format::Circe);
        msg.from = Some(CIRCE.to_string());
        // Addressed to the coordinators; an escalation's copies to the humans say so in `cc`.
        msg.to = Some("coordinator".to_string());
        if n.intent == "escalate" {
            let cc: Vec<String> = to.iter().map(ToString::to_string).collect();
            msg.extra.push(("cc".into(), cc.join(", ")));
        }
        msg.intent = Some(n.intent.to_string());
        msg.task_id = Some(task.to_string());
        msg.status = Some("new".into());
        msg.created_at = Some(now);
        msg.msg_id = Some(clock::new_msg_id(now));
        msg.body = format!("## Summary\n{}\n", n.text);
        let name = message::fit_name(message::file_name(
            now,
            CIRCE,
            "coordinator",
            n.intent,
            Some(task),
            1,
        ));
        let boxes: Vec<Mailbox> = to.into_iter().map(Mailbox::Inbox).collect();
        // After the task's commit: a notice that cannot be delivered does not undo it.
        let msg_id = msg.msg_id.clone().unwrap_or_default();
        let events_of = |files: &[String]| {
            let mut ev = Event::now(EventKind::Notify, CIRCE).task(task);
            ev.msg_id = Some(msg_id.clone());
            ev.intent = Some(n.intent.to_string());
            for (b, f) in boxes.iter().zip(files) {
                ev = ev.file(b.label(), f.clone());
            }
            vec![ev]
        };
        let wanted = vec![name.clone(); boxes.len()];
        let me = AgentName::new(CIRCE)?;
        super::send::deliver_logged(ws, &msg_id, &wanted, events_of, || {
            super::seq::deliver_numbered(ws, &me, &mut msg, |m| {
                ws.engine.deliver(message::render(m).as_bytes(), &name, &boxes)
            })
            .map_err(|e| {
                e.detail("committed", "true").hint_more(format!(
                    "the change to task {task} was made and stands; only its `{}` notice to the coordinators was not delivered",
                    n.intent
                ))
            })
        })?;
    }
    Ok(())
}
