//! A `tasks` row (read as `to_jsonb(row)`) as circe's task model: the `.status` fields
//! share their record names with the columns, so the record deserialises as it is.

use serde::Deserialize;
use tokio_postgres::types::{FromSql, Type};

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

/// The server's `now()` as a `timestamptz` value, in microseconds since the Unix epoch. Read
/// in its binary form (microseconds since 2000-01-01 UTC): asking the server for
/// `extract(epoch ...)` instead makes a fresh server session look up the `numeric` type's
/// casts and operators, 44 catalog reads, a fifth of a claim's pick.
pub struct ServerTime(pub i64);

/// 2000-01-01T00:00:00Z, PostgreSQL's epoch, in microseconds since the Unix epoch.
const PG_EPOCH_US: i64 = 946_684_800_000_000;

impl<'a> FromSql<'a> for ServerTime {
    fn from_sql(
        _: &Type,
        raw: &'a [u8],
    ) -> std::result::Result<ServerTime, Box<dyn std::error::Error + Sync + Send>> {
        let since: [u8; 8] = raw.try_into()?;
        i64::from_be_bytes(since)
            .checked_add(PG_EPOCH_US)
            .map(ServerTime)
            .ok_or_else(|| "a timestamp out of range (infinity)".into())
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::TIMESTAMPTZ
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(raw: &[u8]) -> std::result::Result<i64, String> {
        ServerTime::from_sql(&Type::TIMESTAMPTZ, raw).map(|t| t.0).map_err(|e| e.to_string())
    }

    #[test]
    fn a_server_timestamp_reads_as_unix_microseconds() {
        assert!(ServerTime::accepts(&Type::TIMESTAMPTZ));
        assert!(!ServerTime::accepts(&Type::INT8) && !ServerTime::accepts(&Type::TIMESTAMP));
        // PostgreSQL's epoch itself, 2026-11-29T21:19:07.208Z, and a moment before 2000.
        assert_eq!(read(&0i64.to_be_bytes()), Ok(946_684_800_000_000));
        let unix_us = 1_795_987_147_208_000_i64;
        assert_eq!(read(&(unix_us - 946_684_800_000_000).to_be_bytes()), Ok(unix_us));
        assert_eq!(read(&(-1i64).to_be_bytes()), Ok(946_684_799_999_999));
        // `infinity` is i64::MAX: out of range, not a wrapped time.
        assert!(read(&i64::MAX.to_be_bytes()).unwrap_err().contains("infinity"));
        assert!(read(&[0, 1, 2]).is_err());
    }
}
