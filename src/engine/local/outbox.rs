//! Delivering a task's outbox (`task::outbox`): each message once, into each of its boxes.

use super::LocalEngine;
use crate::boxes::Mailbox;
use crate::clock;
use crate::error::{Error, Result};
use crate::event::Event;
use crate::fault::crash_point;
use crate::task::Outgoing;

/// Deliver every message of `outbox` that is not in its box yet (found by its msg id under
/// its name or a numbered one); returns the events to log. `retry`: a cut-off change's
/// outbox, whose copies may lie under any numbered name by now (the names before it freed
/// since), so the box is listed; the first try looks at the names in order.
pub(super) fn deliver(eng: &LocalEngine, outbox: &[Outgoing], retry: bool) -> Result<Vec<Event>> {
    let store = &eng.store;
    let mut events = Vec::with_capacity(outbox.len());
    for o in outbox {
        let mut files = Vec::with_capacity(o.to.len());
        for label in &o.to {
            let b = Mailbox::from_label(label).ok_or_else(|| {
                Error::internal(format!("an outbox names a box `{label}` that is none"))
            })?;
            let earlier = if retry {
                store.find_any_numbered_with_id(&b, &o.name, &o.msg_id)
            } else {
                store.find_numbered_with_id(&b, &o.name, &o.msg_id)
            };
            let name = if let Some(n) = earlier {
                n
            } else {
                let numbered = |n: u32| crate::message::numbered(&o.name, n);
                let n = store.put_message(&b, &numbered, o.content.as_bytes())?;
                crash_point("outbox.delivered");
                n
            };
            files.push((label.clone(), name));
        }
        events.push(crate::task::outbox::event(o, &files, clock::stamp_ms(clock::now())));
    }
    Ok(events)
}

/// The `send` events of `outbox` under the names its messages are meant to get (a copy may
/// get a numbered one), for the journal of the change that carries it.
pub(super) fn meant(outbox: &[Outgoing]) -> Vec<Event> {
    let ts = clock::stamp_ms(clock::now());
    outbox
        .iter()
        .map(|o| {
            let files: Vec<(String, String)> =
                o.to.iter().map(|l| (l.clone(), o.name.clone())).collect();
            crate::task::outbox::event(o, &files, ts.clone())
        })
        .collect()
}
