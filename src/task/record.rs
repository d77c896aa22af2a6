//! The task records in `TASKS/`: `<id>.status`, `<id>.owner`, `<id>.checks` (YAML).
//!
//! `.status` is authoritative for the task; `.owner` is a copy of the ownership part for
//! people and scripts (rewritten after `.status`, repaired from it). Where the task's
//! message lies is more authoritative still: see `task::locate`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::lifecycle::Status;
use crate::error::{Error, Result};
use crate::yaml;

/// `TASKS/<id>.status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusRecord {
    pub task_id: String,
    pub status: Status,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
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
}

/// `TASKS/<id>.owner`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OwnerRecord {
    pub owner: String,
    pub claimed_at: String,
    pub lease_expires_at: String,
    pub epoch: u64,
    pub host: String,
    pub pid: u32,
}

/// `TASKS/<id>.checks`: one boolean per check, in name order.
pub type Checks = BTreeMap<String, bool>;

impl StatusRecord {
    pub fn parse(task: &str, text: &str) -> Result<StatusRecord> {
        yaml::from_str(text).map_err(|e| {
            Error::internal(format!("TASKS/{task}.status is damaged: {e}"))
                .hint("run `circe doctor`; the record can be rebuilt from the task's message")
        })
    }

    pub fn render(&self) -> String {
        yaml::to_string(self).unwrap_or_default()
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
            task_id: "AUTH-012".into(),
            status: Status::InProgress,
            owner: Some("engineer".into()),
            started_at: Some("2025-11-21T17:05:00Z".into()),
            updated_at: "2025-11-21T17:06:00Z".into(),
            created_at: "2025-11-21T17:00:00Z".into(),
            intent: "implement_feature".into(),
            priority: "normal".into(),
            to: "all".into(),
            opened_by: "coordinator".into(),
            epoch: 3,
            attempts: 1,
            message: "20251121_170000_coordinator-all_implement-feature_AUTH-012.md".into(),
            lease_expires_at: Some("2025-11-21T17:20:00Z".into()),
            note: Some("tests first: yes".into()),
            handoff: None,
        };
        let text = r.render();
        assert!(text.contains("status: in_progress"), "{text}");
        assert_eq!(StatusRecord::parse("AUTH-012", &text).unwrap(), r);
        assert!(StatusRecord::parse("X", "status: [").is_err());
    }

    #[test]
    fn checks_round_trip() {
        let mut c = Checks::new();
        c.insert("tests_passed".into(), false);
        c.insert("peer_reviewed".into(), true);
        let text = render_checks(&c);
        assert_eq!(text, "peer_reviewed: true\ntests_passed: false\n");
        assert_eq!(parse_checks("X", &text).unwrap(), c);
        assert!(parse_checks("X", "tests_passed: maybe").is_err());
        assert!(parse_checks("X", "{}\n").unwrap().is_empty());
    }
}
