//! A task change's outbox: messages sent exactly once with the change (a routing rule's
//! message, a `task-complete`). The engine writes them into the task's record with the change
//! (the change's commit point), delivers each unless a message with its msg id already lies
//! in the box, then clears them; a crash in between is finished by the next transaction on
//! the task, which finds them still in the record.

use super::record::Outgoing;
use crate::event::{CIRCE, Event, EventKind};
use crate::message::{self, Mode};
use crate::names::TaskId;

/// The event one delivered outgoing message logs: `route` (by `circe`, naming its rule),
/// `notify` (a notice of circe's own) or `send` (by its sender), with every copy's box and
/// file.
pub fn event(o: &Outgoing, files: &[(String, String)], ts: String) -> Event {
    let m = message::parse(&o.content, Mode::Draft).ok();
    let kind = match o.event.as_str() {
        "route" => EventKind::Route,
        "notify" => EventKind::Notify,
        _ => EventKind::Send,
    };
    let by = match kind {
        EventKind::Route | EventKind::Notify => CIRCE.to_string(),
        _ => m.as_ref().and_then(|m| m.from_agent().map(str::to_string)).unwrap_or_default(),
    };
    let mut ev = Event::new(kind, &by, ts);
    ev.msg_id = Some(o.msg_id.clone());
    if let Some(m) = &m {
        ev.intent.clone_from(&m.intent);
        ev.addressed_to.clone_from(&m.to);
        ev.in_reply_to.clone_from(&m.in_reply_to);
        if let Some(t) = m.task_id.as_deref().and_then(|t| TaskId::new(t).ok()) {
            ev = ev.task(&t);
        }
    }
    ev.note = o.rule.as_ref().map(|r| format!("routing {r}"));
    for (b, f) in files {
        ev = ev.file(b.clone(), f.clone());
    }
    ev
}

/// Does `content` (a message file) carry msg id `id`? A quick test before a parse: the
/// idempotence check of a delivery.
pub fn has_msg_id(content: &[u8], id: &str) -> bool {
    message::parse_bytes(content, Mode::Draft).is_ok_and(|m| m.msg_id.as_deref() == Some(id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn route_and_send_events() {
        let content = "---\nfrom: circe\nto: qa\ntype: update\ntask-id: T-1\nmsg-id: r-1\n---\nx\n";
        let o = Outgoing {
            msg_id: "r-1".into(),
            to: vec!["inbox:qa".into()],
            name: "n.md".into(),
            content: content.into(),
            event: "route".into(),
            rule: Some("engineer.complete".into()),
        };
        let ev = event(&o, &[("inbox:qa".into(), "n.md".into())], "t".into());
        assert_eq!((ev.event, ev.agent.as_str()), (EventKind::Route, "circe"));
        assert_eq!(ev.task.as_ref().map(TaskId::as_str), Some("T-1"));
        assert_eq!(ev.note.as_deref(), Some("routing engineer.complete"));
        assert!(has_msg_id(content.as_bytes(), "r-1"));
        assert!(!has_msg_id(content.as_bytes(), "r-2"));
        let send = Outgoing { event: "send".into(), rule: None, ..o };
        let ev = event(&send, &[], "t".into());
        assert_eq!((ev.event, ev.agent.as_str()), (EventKind::Send, "circe"));
    }
}
