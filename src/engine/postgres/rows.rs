//! A `tasks` row (read as `to_jsonb(row)`) as circe's task model: the `.status` fields
//! share their record names with the columns, so the record deserialises as it is.

use serde::Deserialize;

use crate::boxes::Mailbox;
use crate::error::{Error, Result};
use crate::task::record::{Checks, OwnerRecord, StatusRecord};
use crate::task::{Row, TaskState, row_of};

/// One task row.
#[derive(Deserialize)]
pub struct TaskRow {
    #[serde(flatten)]
    pub rec: StatusRecord,
    #[serde(default)]
    pub checks: Checks,
    pub claimed_at: Option<String>,
    pub host: Option<String>,
    pub pid: Option<u32>,
    pub ticket: String,
    pub rev: u64,
}

impl TaskRow {
    pub fn parse(json: &str) -> Result<TaskRow> {
        let row: TaskRow = serde_json::from_str(json)
            .map_err(|e| Error::internal(format!("a task row does not read as a record: {e}")))?;
        if row.rec.v > crate::task::record::RECORD_FORMAT {
            return Err(Error::refused(format!(
                "task {} is of record format {}; this circe reads up to {}",
                row.rec.task_id,
                row.rec.v,
                crate::task::record::RECORD_FORMAT
            ))
            .hint("upgrade circe"));
        }
        Ok(row)
    }

    /// The `.owner` record: while the task is held.
    fn owner(&self) -> Option<OwnerRecord> {
        if !self.rec.status.is_owned() {
            return None;
        }
        Some(OwnerRecord {
            owner: self.rec.owner.clone()?,
            claimed_at: self.claimed_at.clone()?,
            lease_expires_at: self.rec.lease_expires_at.clone().unwrap_or_default(),
            epoch: self.rec.epoch,
            host: self.host.clone().unwrap_or_default(),
            pid: self.pid.unwrap_or_default(),
        })
    }

    pub fn state(self) -> TaskState {
        let owner = self.owner();
        let location = Mailbox::from_label(&self.ticket);
        // Read in the format it needs, as a record file says it (rows written before the
        // commit stored it say 2 for every record).
        let rec = StatusRecord { v: self.rec.format_needed(), ..self.rec };
        TaskState { rec, owner, checks: self.checks, location }
    }

    pub fn board_row(&self) -> Row<'static> {
        row_of(&self.rec, &self.checks)
    }
}
