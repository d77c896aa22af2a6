//! The JSON vocabulary shared by commands' `--json` output (PROTOCOLS.md section 11): a
//! task's id is always `task_id`, a task's record is an object under `task`, a message's
//! place is `{box, file}`, and every document is an object at the top.

use schemars::JsonSchema;
use serde::Serialize;

use super::schema_defs::StatusRecordDef;
use crate::task::StatusRecord;

/// A message file and the box it lies in (`new`, `inbox:<agent>`, `workspace:<agent>`,
/// `logs`).
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BoxFile {
    #[serde(rename = "box")]
    pub mailbox: String,
    pub file: String,
}

/// An agent and its role.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentRole {
    pub agent: String,
    pub role: String,
    /// A retired agent acts no more; what reaches it is kept as an orphan.
    pub retired: bool,
}

/// What `status`, `release` and `heartbeat` print: the task after the change.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskMoved {
    pub task_id: String,
    /// The task's status now.
    #[schemars(with = "super::schema_defs::StatusDef")]
    pub status: crate::task::Status,
    pub epoch: u64,
    pub lease_expires_at: Option<String>,
    /// The task already had the status asked for: nothing changed.
    pub already: bool,
    /// The whole record.
    #[schemars(with = "StatusRecordDef")]
    pub task: StatusRecord,
}

impl TaskMoved {
    pub fn new(rec: StatusRecord, already: bool) -> TaskMoved {
        TaskMoved {
            task_id: rec.task_id.to_string(),
            status: rec.status,
            epoch: rec.epoch,
            lease_expires_at: rec.lease_expires_at.clone(),
            already,
            task: rec,
        }
    }
}

/// `{"error": {...}}`: what every command prints on stdout with `--json` when it fails.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ErrorJson {
    pub error: ErrorBody,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ErrorBody {
    #[schemars(with = "super::schema_defs::KindDef")]
    pub kind: String,
    pub exit_code: u8,
    pub message: String,
    pub hint: Option<String>,
    /// Machine-readable facts, each of its own type (`owner` on a conflict, `epoch` a
    /// number, `committed` a boolean, ...).
    pub details: std::collections::BTreeMap<String, serde_json::Value>,
}
