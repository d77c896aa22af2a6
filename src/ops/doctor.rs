//! `circe doctor`: the engine's invariants, and the domain's own: consumers' cursors.
//!
//! Invariant 7: every event-log cursor parses, can still read its next event (none was
//! archived out from under it), and is not stale (behind the log and unmoved for
//! `STALE_AFTER`: a consumer that died or hangs).

use crate::engine::Violation;
use crate::error::Result;
use crate::event::Cursor;
use crate::workspace::Workspace;

use super::stream::{KIND, SavedCursor};

/// A cursor behind the log that has not moved for this long is reported.
const STALE_AFTER: chrono::Duration = chrono::Duration::days(7);

pub fn run(ws: &Workspace, repair: bool) -> Result<Vec<Violation>> {
    let mut found = ws.engine.doctor(repair)?;
    let last = match ws.engine.last_event_id() {
        Ok(last) => last,
        // Said as what it is, with what the engine found (it may name the cause).
        Err(e) => {
            let what = format!(
                "the cursors were not checked: the log's newest id does not read ({})",
                e.message
            );
            found.push(Violation { invariant: 7, what, repaired: false });
            return Ok(found);
        }
    };
    for (kind, name) in ws.engine.cursors()? {
        if kind != KIND {
            continue;
        }
        let raw = ws.engine.read_cursor(&kind, &name)?.unwrap_or_default();
        let mut v = |what: String| found.push(Violation { invariant: 7, what, repaired: false });
        let c = match SavedCursor::parse(&name, &raw) {
            Ok(c) => c,
            Err(e) => {
                v(format!("cursor {name}: {}", e.message));
                continue;
            }
        };
        if c.after >= last {
            continue;
        }
        let next = ws.engine.read_events(Cursor::after(c.after), 1)?;
        if next.first().is_none_or(|e| e.id != c.after + 1) {
            v(format!("cursor {name} needs event {}, which is no longer in the log", c.after + 1));
            continue;
        }
        let moved = crate::clock::parse(&c.saved_at);
        if moved.is_some_and(|t| ws.now() - t > STALE_AFTER) {
            v(format!(
                "cursor {name} is {} events behind and last moved at {} (its consumer may be gone)",
                last - c.after,
                c.saved_at
            ));
        }
    }
    Ok(found)
}
