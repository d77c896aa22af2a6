//! Consumers' saved places and the events their hooks kept failing on, for the database
//! engine: a cursor is a row, held by a session advisory lock while its consumer runs.

use tokio_postgres::types::Type;

use super::PgEngine;
use crate::engine::CursorHold;
use crate::error::Result;
use crate::event::{self, Event, Line};
use crate::names::CursorName;

impl PgEngine {
    /// `Engine::hold_cursor`: a session advisory lock on the cursor, or `None` when
    /// another consumer holds it.
    pub(super) fn lock_cursor(&self, kind: &str, name: &CursorName) -> Result<Option<CursorHold>> {
        // A session advisory lock: held for as long as this process's connection lives. The
        // server lets go of an ended session's locks a moment after its client is gone, so
        // a consumer run again at once may find its last run's hold still there: tried
        // again for up to `FREED_WITHIN` before the cursor is said to be in use.
        const FREED_WITHIN: std::time::Duration = std::time::Duration::from_secs(1);
        let key = format!("{kind}/{name}");
        let start = std::time::Instant::now();
        loop {
            if self.try_session_lock(&format!("holding cursor {name}"), &key)? {
                return Ok(Some(Box::new(()) as CursorHold));
            }
            if start.elapsed() >= FREED_WITHIN {
                return Ok(None);
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }

    /// `Engine::read_cursor`: the cursor's saved value.
    pub(super) fn cursor_value(&self, kind: &str, name: &CursorName) -> Result<Option<Vec<u8>>> {
        let n = name.as_str();
        let mut v = self.rows(
            &format!("reading cursor {name}"),
            "SELECT value FROM {s}.cursors WHERE kind = $1 AND name = $2",
            &[(&kind, Type::TEXT), (&n, Type::TEXT)],
            |r| Ok(r.get::<_, Vec<u8>>(0)),
        )?;
        Ok(v.pop())
    }

    /// `Engine::write_cursor`: save the cursor's value.
    pub(super) fn save_cursor(&self, kind: &str, name: &CursorName, value: &[u8]) -> Result<()> {
        let n = name.as_str();
        self.exec(
            &format!("saving cursor {name}"),
            "INSERT INTO {s}.cursors (kind, name, value) VALUES ($1, $2, $3) ON CONFLICT (kind, name) DO UPDATE SET value = EXCLUDED.value",
            &[(&kind, Type::TEXT), (&n, Type::TEXT), (&value, Type::BYTEA)],
        )?;
        Ok(())
    }

    /// `Engine::cursors`: every saved cursor, by kind and name.
    pub(super) fn list_cursors(&self) -> Result<Vec<(String, CursorName)>> {
        self.rows(
            "listing cursors",
            "SELECT kind, name FROM {s}.cursors ORDER BY kind, name",
            &[],
            |r| Ok((r.get::<_, String>(0), CursorName::new(r.get::<_, String>(1))?)),
        )
    }

    /// `Engine::remove_cursor`: the cursor's row and, for an events cursor, its dead
    /// letters, in one statement.
    pub(super) fn drop_cursor(&self, kind: &str, name: &CursorName) -> Result<bool> {
        let n = name.as_str();
        let events = kind == crate::engine::EVENTS_CURSORS;
        let had = self.rows(
            &format!("removing cursor {name}"),
            "WITH c AS (DELETE FROM {s}.cursors WHERE kind = $1 AND name = $2 RETURNING 1),
                  d AS (DELETE FROM {s}.dead_letters WHERE $3 AND consumer = $2 RETURNING 1)
             SELECT (SELECT count(*) FROM c) + (SELECT count(*) FROM d)",
            &[(&kind, Type::TEXT), (&n, Type::TEXT), (&events, Type::BOOL)],
            |r| Ok(r.get::<_, i64>(0) > 0),
        )?;
        Ok(had.first().copied().unwrap_or(false))
    }

    /// `Engine::dead_letter`: set an event aside for `consumer`.
    pub(super) fn set_aside(&self, consumer: &CursorName, event: &Event) -> Result<()> {
        let (c, line) = (consumer.as_str(), event.to_line());
        self.exec(
            "setting an event aside",
            "INSERT INTO {s}.dead_letters (consumer, line) VALUES ($1, $2)",
            &[(&c, Type::TEXT), (&line, Type::TEXT)],
        )?;
        Ok(())
    }

    /// `Engine::dead_letter_consumers`.
    pub(super) fn set_aside_consumers(&self) -> Result<Vec<CursorName>> {
        self.rows(
            "listing dead letters",
            "SELECT DISTINCT consumer FROM {s}.dead_letters ORDER BY consumer",
            &[],
            |r| CursorName::new(r.get::<_, String>(0)),
        )
    }

    /// `Engine::dead_letters`: the events set aside for `consumer`, in order.
    pub(super) fn set_aside_events(&self, consumer: &CursorName) -> Result<Vec<Event>> {
        let c = consumer.as_str();
        let lines = self.rows(
            "reading dead letters",
            "SELECT line FROM {s}.dead_letters WHERE consumer = $1 ORDER BY n",
            &[(&c, Type::TEXT)],
            |r| Ok(r.get::<_, String>(0)),
        )?;
        Ok(lines
            .iter()
            .filter_map(|l| match event::parse_line(l) {
                Ok(Line::Event(e)) => Some(*e),
                _ => None,
            })
            .collect())
    }
}
