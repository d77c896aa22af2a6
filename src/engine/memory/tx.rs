//! The in-memory task transaction: the task marked taken, a snapshot, and one commit under
//! the mutex (its ticket's move or delivery, its records, its outbox, its events).

use super::MemoryEngine;
use crate::boxes::Mailbox;
use crate::engine::{TaskTx, no_task};
use crate::error::{Error, Result};
use crate::event::Event;
use crate::names::TaskId;
use crate::task::{Change, TaskState, Ticket};

pub(super) struct MemTx<'a> {
    pub(super) eng: &'a MemoryEngine,
    pub(super) task: TaskId,
    pub(super) st: Option<TaskState>,
}

impl Drop for MemTx<'_> {
    fn drop(&mut self) {
        self.eng.lock().busy.remove(&self.task);
        self.eng.shared.freed.notify_all();
    }
}

impl TaskTx for MemTx<'_> {
    fn task_id(&self) -> &TaskId {
        &self.task
    }

    fn state(&self) -> Option<&TaskState> {
        self.st.as_ref()
    }

    fn commit(&mut self, change: Change) -> Result<Vec<Event>> {
        let Change { mut record, checks, ticket, mut events, outbox, request, .. } = change;
        record.v = record.format_needed();
        let mut g = self.eng.lock();
        if let (Some(r), Some(o)) = (request, &record.owner) {
            g.grants.insert((o.clone(), r), (self.task.clone(), record.epoch));
        }
        let before = self.st.as_ref();
        let location = match ticket {
            Ticket::Deliver { name, content } => {
                let name = g.free_name(&Mailbox::NewMessages, &name);
                record.message.clone_from(&name);
                for f in events.iter_mut().flat_map(|e| e.files.iter_mut()) {
                    if f.mailbox == "new" {
                        f.file.clone_from(&name);
                    }
                }
                g.use_number(&content);
                g.boxes.entry(Mailbox::NewMessages).or_default().insert(name, content);
                Mailbox::NewMessages
            }
            Ticket::MoveTo(to) => {
                let st = before.ok_or_else(|| no_task(&self.task))?;
                let from = st.location.clone().ok_or_else(|| {
                    Error::internal(format!("the message of task {} is in no box", self.task))
                })?;
                let body = g.boxes.get_mut(&from).and_then(|b| b.remove(&st.rec.message));
                let Some(body) = body else {
                    let t = &self.task;
                    return Err(Error::conflict(format!("task {t} was taken meanwhile"))
                        .hint(format!("`circe show {t}` says who holds it now")));
                };
                g.boxes.entry(to.clone()).or_default().insert(st.rec.message.clone(), body);
                to
            }
            Ticket::Stay => {
                before.and_then(|s| s.location.clone()).ok_or_else(|| no_task(&self.task))?
            }
        };
        // The outbox is delivered in the same step: nothing can come between.
        for o in &outbox {
            let mut files = Vec::with_capacity(o.to.len());
            for label in &o.to {
                let b = Mailbox::from_label(label)
                    .ok_or_else(|| Error::internal(format!("no box `{label}`")))?;
                let n = g.free_name(&b, &o.name);
                g.boxes.entry(b).or_default().insert(n.clone(), o.content.clone().into_bytes());
                files.push((label.clone(), n));
            }
            g.use_number(o.content.as_bytes());
            events.push(crate::task::outbox::event(
                o,
                &files,
                crate::clock::stamp_ms(crate::clock::now()),
            ));
        }
        record.outbox.clear();
        let checks = checks.unwrap_or_else(|| before.map(|s| s.checks.clone()).unwrap_or_default());
        let st = TaskState { rec: record, owner: None, checks, location: Some(location) };
        g.tasks.insert(self.task.clone(), st.clone());
        g.append(&mut events);
        drop(g);
        self.eng.shared.freed.notify_all();
        self.st = Some(st);
        Ok(events)
    }
}
