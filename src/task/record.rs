//! The task records in `TASKS/`: `<id>.status`, `<id>.owner`, `<id>.checks` (YAML).
//!
//! `.status` is authoritative for the task; `.owner` is a copy of the ownership part for
//! people and scripts (rewritten after `.status`, repaired from it). Where the task's
//! message lies is more authoritative still: see `task::locate`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::lifecycle::Status;
use crate::error::{Error, Result};
use crate::names::{AgentName, CheckName, TaskId};
use crate::yaml;

/// The newest record format this circe reads and writes (`v:` in `.status`). A record without
/// `v` is version 1 (no `expiries`); one with a higher version is refused, not misread.
/// Version 3 adds `deadline`, `outbox`, `asserted` and the status `expired`; a record that
/// uses none of them is written as version 2, so an older circe still reads it.
pub const RECORD_FORMAT: u32 = 3;

/// The format of a record that uses nothing version 3 added.
pub const BASE_FORMAT: u32 = 2;

fn format_1() -> u32 {
    1
}

/// `TASKS/<id>.status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusRecord {
    #[serde(default = "format_1")]
    pub v: u32,
    pub task_id: TaskId,
    pub status: Status,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<AgentName>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    pub updated_at: String,
    pub created_at: String,
    pub intent: String,
    pub priority: String,
    /// Who the task message was addressed to: an agent, a role, or `all`.
    pub to: String,
    pub opened_by: String,
    /// Fencing number: bumped by every change of owner.
    pub epoch: u64,
    /// How many times the task was claimed.
    pub attempts: u32,
    /// How many of those claims ended because the lease ran out (`max_attempts` counts these).
    #[serde(default)]
    pub expiries: u32,
    /// File name of the message that carries the task (its ticket).
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_expires_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// While a handoff is being delivered: the file name its message will have in
    /// NEW_MESSAGES (written before the delivery, cleared after).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handoff: Option<String>,
    /// With `handoff`: the checks the handoff resets (so a crashed one is finished the same).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub handoff_checks: Vec<CheckName>,
    /// Past this time the task is not claimed or completed; `circe reap` expires it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<String>,
    /// Messages the last change sends, written with it (its commit) and cleared once they
    /// are delivered: a crash in between is finished by the next command on the task.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outbox: Vec<Outgoing>,
    /// Checks whose last result was asserted (`check T NAME=true`) rather than run: the board
    /// and `show` say so.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub asserted: Vec<CheckName>,
}

/// A message a task's change sends (a routed message, a `task-complete`), kept in the record
/// until it is delivered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outgoing {
    /// Its msg id: delivery looks for it first, so it lands once.
    pub msg_id: String,
    /// The boxes it goes to (`inbox:<agent>` labels).
    pub to: Vec<String>,
    /// Its file name (the first free `name.N.md` in each box).
    pub name: String,
    pub content: String,
    /// The event its delivery logs: `send`, `route` or `notify`.
    pub event: String,
    /// For the event: the routing rule that sent it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
}

/// `TASKS/<id>.owner`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OwnerRecord {
    pub owner: AgentName,
    pub claimed_at: String,
    pub lease_expires_at: String,
    pub epoch: u64,
    pub host: String,
    pub pid: u32,
}

/// `TASKS/<id>.checks`: one boolean per check, in name order.
pub type Checks = BTreeMap<CheckName, bool>;

impl StatusRecord {
    /// The next fencing epoch: every change of owner takes one. Never wraps: a token that
    /// came round again would let a holder fenced out long ago write as the owner. The last
    /// one is `i64::MAX` on either engine (a database column is a `bigint`).
    pub fn bump_epoch(&mut self) -> Result<()> {
        let last = u64::try_from(i64::MAX).unwrap_or(u64::MAX);
        self.epoch = self.epoch.checked_add(1).filter(|e| *e <= last).ok_or_else(|| {
            Error::refused(format!(
                "task {}'s epoch is at its end ({}): its owner cannot change again",
                self.task_id, self.epoch
            ))
            .hint("no run of circe counts that far: the record was edited; open the work as a new task (its epochs start at 0)")
        })?;
        Ok(())
    }

    pub fn parse(task: &str, text: &str) -> Result<StatusRecord> {
        let rec: StatusRecord = yaml::from_str(text).map_err(|e| {
            Error::internal(format!("TASKS/{task}.status is damaged: {e}"))
                .hint(format!("put TASKS/{task}.status back from a backup; `circe log --task {task}` lists its events (its last status, owner and epoch)"))
        })?;
        if rec.v > RECORD_FORMAT {
            return Err(Error::refused(format!(
                "TASKS/{task}.status is of record format {}; this circe reads up to {RECORD_FORMAT}",
                rec.v
            ))
            .hint("upgrade circe"));
        }
        if rec.task_id.as_str() != task {
            return Err(Error::internal(format!(
                "TASKS/{task}.status is damaged: it says it is the record of task {}",
                rec.task_id
            ))
            .hint(format!("a record names its own task: put `task_id: {task}` back (or the file back from a backup); `circe log --task {task}` lists its events")));
        }
        Ok(rec)
    }

    /// The oldest format that holds this record: 3 when it uses what version 3 added.
    pub fn format_needed(&self) -> u32 {
        if self.deadline.is_some()
            || !self.outbox.is_empty()
            || !self.asserted.is_empty()
            || self.status == Status::Expired
        {
            RECORD_FORMAT
        } else {
            BASE_FORMAT
        }
    }

    /// The record in the format it needs (`v: 2`, or `v: 3`).
    pub fn render(&self) -> String {
        let v = self.format_needed();
        if self.v == v {
            yaml::to_string(self).unwrap_or_default()
        } else {
            yaml::to_string(&StatusRecord { v, ..self.clone() }).unwrap_or_default()
        }
    }

    /// The `.owner` record that matches this status, if the task is owned.
    pub fn owner_record(&self, claimed_at: &str, host: &str, pid: u32) -> Option<OwnerRecord> {
        let owner = self.owner.clone()?;
        Some(OwnerRecord {
            owner,
            claimed_at: claimed_at.to_string(),
            lease_expires_at: self.lease_expires_at.clone().unwrap_or_default(),
            epoch: self.epoch,
            host: host.to_string(),
            pid,
        })
    }
}

impl OwnerRecord {
    pub fn parse(text: &str) -> Option<OwnerRecord> {
        yaml::from_str(text).ok()
    }

    pub fn render(&self) -> String {
        yaml::to_string(self).unwrap_or_default()
    }
}

pub fn parse_checks(task: &str, text: &str) -> Result<Checks> {
    if text.trim().is_empty() {
        return Ok(Checks::new());
    }
    yaml::from_str(text).map_err(|e| {
        Error::internal(format!("TASKS/{task}.checks is damaged: {e}"))
            .hint("each line must be `name: true` or `name: false`")
    })
}

pub fn render_checks(checks: &Checks) -> String {
    if checks.is_empty() {
        return "{}\n".into();
    }
    checks.iter().map(|(k, v)| format!("{k}: {v}\n")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_round_trip() {
        let r = StatusRecord {
            v: BASE_FORMAT,
            task_id: TaskId::new("AUTH-012").unwrap(),
            status: Status::InProgress,
            owner: Some(AgentName::new("engineer").unwrap()),
            started_at: Some("2025-11-21T17:05:00Z".into()),
            updated_at: "2025-11-21T17:06:00Z".into(),
            created_at: "2025-11-21T17:00:00Z".into(),
            intent: "implement_feature".into(),
            priority: "normal".into(),
            to: "all".into(),
            opened_by: "coordinator".into(),
            epoch: 3,
            attempts: 1,
            expiries: 0,
            message: "20251121_170000_coordinator-all_implement-feature_AUTH-012.md".into(),
            lease_expires_at: Some("2025-11-21T17:20:00Z".into()),
            note: Some("tests first: yes".into()),
            handoff: None,
            handoff_checks: Vec::new(),
            deadline: None,
            outbox: Vec::new(),
            asserted: Vec::new(),
        };
        let text = r.render();
        assert!(text.contains("status: in_progress"), "{text}");
        assert_eq!(StatusRecord::parse("AUTH-012", &text).unwrap(), r);
        assert!(StatusRecord::parse("X", "status: [").is_err());
        let newer = text.replace("v: 2", "v: 4");
        assert_eq!(StatusRecord::parse("X", &newer).unwrap_err().kind, crate::error::Kind::Refused);
        let other = StatusRecord::parse("AUTH-013", &text).unwrap_err();
        assert!(other.message.contains("it says it is the record of task AUTH-012"), "{other:?}");
        let v1 = text.replace("v: 2\n", "").replace("expiries: 0\n", "");
        let old = StatusRecord::parse("AUTH-012", &v1).unwrap();
        assert_eq!((old.v, old.expiries), (1, 0), "a record without v is format 1");
        assert!(old.render().starts_with("v: 2\n"), "written back in the current format");
        assert!(
            StatusRecord::parse("X", &text.replace("owner: engineer", "owner: ../x")).is_err(),
            "names in records are checked"
        );
        // A deadline or an outbox needs format 3 (an older circe refuses it, not misreads it).
        let mut r3 = r.clone();
        r3.deadline = Some("2025-11-22T00:00:00Z".into());
        r3.outbox.push(Outgoing {
            msg_id: "m-1".into(),
            to: vec!["inbox:qa".into()],
            name: "x.md".into(),
            content: "---\nto: qa\n---\nline one\n  two: \"quoted\"\n".into(),
            event: "route".into(),
            rule: Some("engineer.complete".into()),
        });
        let t3 = r3.render();
        assert!(t3.starts_with("v: 3\n"), "{t3}");
        let back = StatusRecord::parse("AUTH-012", &t3).unwrap();
        assert_eq!(back.outbox, r3.outbox);
        assert_eq!(back.deadline, r3.deadline);
        let mut r2 = back.clone();
        r2.outbox.clear();
        r2.deadline = None;
        assert!(r2.render().starts_with("v: 2\n"), "back to format 2 once cleared");
    }

    #[test]
    fn checks_round_trip() {
        let mut c = Checks::new();
        c.insert(CheckName::new("tests_passed").unwrap(), false);
        c.insert(CheckName::new("peer_reviewed").unwrap(), true);
        let text = render_checks(&c);
        assert_eq!(text, "peer_reviewed: true\ntests_passed: false\n");
        assert_eq!(parse_checks("X", &text).unwrap(), c);
        assert!(parse_checks("X", "tests_passed: maybe").is_err());
        assert!(parse_checks("X", "{}\n").unwrap().is_empty());
        assert!(parse_checks("X", "Bad-Name: true").is_err(), "check names are checked");
    }
}
