//! A task change's outbox (section 16), delivered inside the task's open transaction so it
//! commits with the change.

use super::PgTx;
use crate::boxes::Mailbox;
use crate::clock;
use crate::engine::Engine;
use crate::engine::postgres::deliver::Copy;
use crate::error::{Error, Result};
use crate::event::Event;
use crate::fault::crash_point;
use crate::task::{Outgoing, Ticket};

impl PgTx<'_> {
    /// Deliver a change's outbox (if any) in the open transaction, adding the events it
    /// logs to `events`; whether it carried the pending number. On error the transaction
    /// is rolled back.
    pub(super) fn put_outbox(
        &mut self,
        outbox: &[Outgoing],
        ticket: &Ticket,
        events: &mut Vec<Event>,
    ) -> Result<bool> {
        if outbox.is_empty() {
            return Ok(false);
        }
        let sent = if matches!(ticket, Ticket::Deliver { .. }) {
            Err(Error::internal("an outbox goes not with a change that delivers a ticket"))
        } else {
            self.send_outbox(outbox)
        };
        match sent {
            Ok((more, numbered)) => {
                events.extend(more);
                crash_point("pg-task-outbox");
                Ok(numbered)
            }
            Err(e) => {
                self.eng.rollback();
                self.open = false;
                Err(e)
            }
        }
    }

    /// TEST BUILDS ONLY (CIRCE_TEST_BREAK=pg-outbox-apart): the outbox delivered and logged
    /// after the task's commit, each on its own, as a broken variant for the crash test.
    pub(super) fn outbox_apart(&self, outbox: &[Outgoing], events: &mut Vec<Event>) -> Result<()> {
        crash_point("pg-task-outbox");
        let (more, _) = self.send_outbox(outbox)?;
        events.extend(self.eng.append_events(more)?);
        Ok(())
    }

    /// Deliver a change's outbox in the open transaction (one statement); returns the
    /// events it logs and whether it carried the pending number.
    fn send_outbox(&self, outbox: &[Outgoing]) -> Result<(Vec<Event>, bool)> {
        let mut copies = Vec::new();
        for o in outbox {
            for label in &o.to {
                if Mailbox::from_label(label).is_none() {
                    return Err(Error::internal(format!(
                        "an outbox names a box `{label}` that is none"
                    )));
                }
                copies.push(Copy { to: label.clone(), name: &o.name, body: o.content.as_bytes() });
            }
        }
        let (names, numbered) = self.eng.put_copies(&copies)?;
        let mut names = names.into_iter();
        let ts = clock::stamp_ms(self.now);
        let events = outbox
            .iter()
            .map(|o| {
                let files: Vec<(String, String)> =
                    o.to.iter().cloned().zip(names.by_ref().take(o.to.len())).collect();
                crate::task::outbox::event(o, &files, ts.clone())
            })
            .collect();
        Ok((events, numbered))
    }
}
