//! Messages circe sends on its own, as sender `circe` (which no agent may be called):
//! escalations (a parked task) to the coordinators and the humans, and status updates to the
//! coordinators (`announce: inbox`).

use crate::boxes::Mailbox;
use crate::clock;
use crate::error::Result;
use crate::event::CIRCE;
use crate::message::{self, Format, Message};
use crate::names::{AgentName, TaskId};
use crate::task::{Change, Notice, Outgoing};
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

/// The outbox entries that carry `notices` about `task`, one message each to their
/// recipients' INBOXes: they ride with the task's change (its outbox), so a command cut off
/// after the change's commit point leaves them to the next command on the task, and they
/// are delivered once. Unnumbered, as routed messages riding a change are (section 14).
fn outgoing(ws: &Workspace, task: &TaskId, notices: &[Notice]) -> Vec<Outgoing> {
    let mut out = Vec::with_capacity(notices.len());
    for n in notices {
        let mut to = recipients(ws, n.intent);
        // The holder is told too (unless retired, or a coordinator already told).
        let also: Vec<AgentName> = n
            .also
            .as_deref()
            .and_then(|a| ws.reach(&format!("agent:{a}")).ok())
            .map(|(agents, _)| agents)
            .unwrap_or_default()
            .into_iter()
            .filter(|a| !to.contains(a))
            .collect();
        to.extend(also.iter().cloned());
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
        } else if !also.is_empty() {
            let cc: Vec<String> = also.iter().map(ToString::to_string).collect();
            msg.extra.push(("cc".into(), cc.join(", ")));
        }
        msg.intent = Some(n.intent.to_string());
        msg.task_id = Some(task.to_string());
        msg.status = Some("new".into());
        msg.created_at = Some(now);
        let msg_id = clock::new_msg_id(now);
        msg.msg_id = Some(msg_id.clone());
        msg.body = format!("## Summary\n{}\n", n.text);
        let name = message::fit_name(message::file_name(
            now,
            CIRCE,
            "coordinator",
            n.intent,
            Some(task),
            1,
        ));
        out.push(Outgoing {
            msg_id,
            to: to.into_iter().map(|a| Mailbox::Inbox(a).label()).collect(),
            name,
            content: message::render(&msg),
            event: "notify".into(),
            rule: None,
        });
    }
    out
}

/// Put the notices `change` carries about its task into its outbox (`outgoing`), to ride
/// with it.
pub fn ride(ws: &Workspace, change: &mut Change) {
    let out = outgoing(ws, &change.record.task_id, &change.notices);
    change.outbox.extend(out);
}
