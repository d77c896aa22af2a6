//! The tombstones of tasks a folder archived before it moved here (`schema_v7.sql`): a
//! database root keeps no archive, but an archived id is never opened again. Opening a task
//! asks them only when the opening read `meta.tombstones` (a root that never held an archive
//! pays nothing).

use tokio_postgres::types::Type;

use super::PgEngine;
use crate::archive::Tombstone;
use crate::error::Result;
use crate::names::TaskId;

impl PgEngine {
    /// `Engine::archived_task`.
    pub(super) fn tombstone(&self, task: &TaskId) -> Result<Option<Tombstone>> {
        if !self.tombstones {
            return Ok(None);
        }
        let id = task.to_string();
        let rows = self.rows(
            "reading a tombstone",
            "SELECT tombstone FROM {s}.tombstones WHERE task_id = $1",
            &[(&id, Type::TEXT)],
            |r| Ok(r.get::<_, String>(0)),
        )?;
        rows.first().map(|t| parse(&id, t)).transpose()
    }

    /// `Engine::archived_tasks`: asks the table whatever the opening read, so that a mirror
    /// watching a schema a folder then moved into writes its tombstones (a snapshot's read,
    /// never on a command's path).
    pub(super) fn all_tombstones(&self) -> Result<Vec<Tombstone>> {
        let rows = self.rows(
            "reading the tombstones",
            "SELECT task_id, tombstone FROM {s}.tombstones ORDER BY task_id",
            &[],
            |r| Ok((r.get::<_, String>(0), r.get::<_, String>(1))),
        )?;
        rows.iter().map(|(id, t)| parse(id, t)).collect()
    }
}

fn parse(id: &str, text: &str) -> Result<Tombstone> {
    Tombstone::parse(text.as_bytes(), &format!("the tombstone of task {id}"), id)
}
