//! Routing rules at work (circe.yaml `routing:`, PROTOCOLS.md section 16): which messages an
//! agent's act sends, and the check made when a root opens.
//!
//! Exactly once, across a crash: a task move's routed messages ride in the task's change
//! (its outbox, committed with the move); a message's ride in the same all-or-none delivery
//! as the message itself.

use serde::Serialize;

use crate::boxes::Mailbox;
use crate::clock;
use crate::engine::Parcel;
use crate::error::{Error, Result};
use crate::event::{CIRCE, Event, EventKind};
use crate::message::{self, agent_of};
use crate::names::{AgentName, TaskId};
use crate::task::{Outgoing, Status};
use crate::tx::routing::{self, RoutingKey, Trigger, firing};
use crate::workspace::Workspace;

/// One message a rule sends.
pub struct Routed {
    pub rule: String,
    pub target: String,
    pub boxes: Vec<Mailbox>,
    pub name: String,
    pub content: String,
    pub msg_id: String,
}

/// The agents a routing target reaches: the agent of that name, else every agent with that
/// role (retired ones keep theirs: a message to them is an orphan).
fn reach(ws: &Workspace, target: &str) -> Vec<AgentName> {
    let t = agent_of(target);
    match AgentName::new(t) {
        Ok(a) if ws.is_agent(&a) => vec![a],
        _ => ws.agents_with_role(t),
    }
}

/// What `me` (with `role`) reaching `key` sends, about `task` and `in_reply_to`.
pub fn routed(
    ws: &Workspace,
    me: &AgentName,
    role: &str,
    key: RoutingKey,
    task: Option<&str>,
    in_reply_to: Option<&str>,
) -> Vec<Routed> {
    let Some((rule_name, targets)) = firing(&ws.config.routing, me.as_str(), role, key) else {
        return Vec::new();
    };
    let now = ws.now();
    let trigger = Trigger { rule: &rule_name, by: me.as_str(), key, task, in_reply_to };
    let mut out = Vec::new();
    for (target, text) in targets {
        let boxes: Vec<Mailbox> = reach(ws, target).into_iter().map(Mailbox::Inbox).collect();
        if boxes.is_empty() {
            continue;
        }
        let msg_id = clock::new_msg_id(now);
        let m = routing::routed_message(&trigger, target, text, now, msg_id.clone());
        out.push(Routed {
            rule: rule_name.clone(),
            target: target.clone(),
            boxes,
            name: message::fit_name(message::file_name(now, CIRCE, target, "update", task, 1)),
            content: message::render(&m),
            msg_id,
        });
    }
    out
}

/// The outbox a task move by `me` to `status` carries.
pub fn for_move(
    ws: &Workspace,
    me: &AgentName,
    status: Status,
    task: &TaskId,
    in_reply_to: Option<&str>,
) -> Vec<Outgoing> {
    let (Some(key), Some(role)) = (RoutingKey::of_task(status), ws.role_of(me)) else {
        return Vec::new();
    };
    routed(ws, me, &role, key, Some(task.as_str()), in_reply_to)
        .into_iter()
        .map(|r| Outgoing {
            msg_id: r.msg_id,
            to: r.boxes.iter().map(Mailbox::label).collect(),
            name: r.name,
            content: r.content,
            event: "route".into(),
            rule: Some(r.rule),
        })
        .collect()
}

/// The parcels a message `me` sends with header status `status` adds to its own delivery.
pub fn for_message(
    ws: &Workspace,
    me: &AgentName,
    role: &str,
    status: Option<&str>,
    task: Option<&str>,
    msg_id: &str,
) -> Vec<Routed> {
    match status.and_then(RoutingKey::of_message) {
        Some(key) => routed(ws, me, role, key, task, Some(msg_id)),
        None => Vec::new(),
    }
}

/// Parcels for `deliver_batch`.
pub fn parcels(routed: &[Routed]) -> Vec<Parcel> {
    routed
        .iter()
        .map(|r| Parcel {
            content: r.content.clone().into_bytes(),
            name: r.name.clone(),
            to: r.boxes.clone(),
        })
        .collect()
}

/// The `route` events of delivered routed messages (`files`: the names used, per box).
pub fn events(routed: &[Routed], files: &[Vec<String>], task: Option<&str>) -> Vec<Event> {
    routed
        .iter()
        .zip(files)
        .map(|(r, names)| {
            let mut ev = Event::now(EventKind::Route, CIRCE);
            ev.msg_id = Some(r.msg_id.clone());
            ev.intent = Some("update".into());
            ev.addressed_to = Some(r.target.clone());
            ev.note = Some(format!("routing {}", r.rule));
            if let Some(t) = task.and_then(|t| TaskId::new(t).ok()) {
                ev = ev.task(&t);
            }
            for (b, f) in r.boxes.iter().zip(names) {
                ev = ev.file(b.label(), f.clone());
            }
            ev
        })
        .collect()
}

/// What `circe validate --config` reports about the rules.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub rules: usize,
    /// Agents that route only among themselves (no terminal state).
    pub closed_loops: Vec<Vec<String>>,
}

/// Every name in the rules must be an agent or a role of this root (a `mesh/` prefix must be
/// the root's mesh). Made when a root opens (`Workspace::open`): exit 3 naming the rule.
pub fn check_names(ws: &Workspace) -> Result<()> {
    let meshes = ws.meshes();
    let known = |name: &str| -> Result<()> {
        crate::tx::check_address("routing", name, &meshes).map_err(|e| {
            let err = Error::refused(format!("circe.yaml: {}", e.message));
            match e.hint {
                Some(h) => err.hint(h),
                None => err,
            }
        })?;
        let n = agent_of(name);
        if ws.is_agent_named(n) || ws.registry.is_role(n) {
            return Ok(());
        }
        let all = ws.agents();
        let names =
            all.keys().map(AgentName::as_str).chain(ws.registry.roles.iter().map(String::as_str));
        let near = crate::suggest::closest(n, names).map(|c| format!("did you mean `{c}`? "));
        Err(Error::refused(format!("circe.yaml: routing: `{name}` is no agent or role of this root"))
            .hint(format!(
                "{}`circe agent list` and `circe registry` show them; add the agent with `circe agent add` first",
                near.unwrap_or_default()
            )))
    };
    for (who, statuses) in &ws.config.routing {
        known(who)?;
        for targets in statuses.values() {
            for target in targets.keys() {
                known(target)?;
            }
        }
    }
    Ok(())
}

/// The rules' count and their closed loops.
pub fn report(ws: &Workspace) -> Report {
    let agents: Vec<(String, String)> =
        ws.agents().iter().map(|(a, r)| (a.to_string(), r.clone())).collect();
    let rules = ws
        .config
        .routing
        .values()
        .map(|s| s.values().map(std::collections::BTreeMap::len).sum::<usize>())
        .sum();
    Report { rules, closed_loops: routing::closed_loops(&ws.config.routing, &agents) }
}
