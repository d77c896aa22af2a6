//! The JSON Schema side of the domain types that `--json` prints inside a command's output
//! (records, events, messages, problems): schema-only mirrors, so that `schemars` stays in
//! `src/cli/`. Each mirrors its type's serde output field for field and denies other
//! fields; a key the type leaves out when empty carries the same `skip_serializing_if`
//! (the schema's `required` lists every other key: `schema::schema`). The schema test
//! (tests/cli/schema.rs) validates real output against them, so a mirror that drifts from
//! its type fails there.

use std::collections::BTreeMap;

use schemars::JsonSchema;

/// `TASKS/<id>.status`, as `task` in command output (`task::StatusRecord`).
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[expect(dead_code, reason = "a schema, never built")]
pub struct StatusRecordDef {
    /// The record format: 2, or 3 when the record has a deadline, an outbox, asserted
    /// checks or the status `expired`.
    v: u32,
    task_id: String,
    status: StatusDef,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    owner: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    started_at: Option<String>,
    updated_at: String,
    created_at: String,
    intent: String,
    priority: PriorityDef,
    /// The address the task message was sent to: `all`, `role:NAME`, `agent:NAME`, a name.
    to: String,
    opened_by: String,
    epoch: u64,
    attempts: u32,
    expiries: u32,
    /// The file name of the task's current message (its ticket).
    message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lease_expires_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    note: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    handoff: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    handoff_checks: Vec<String>,
    /// When the task must be completed by (RFC 3339); past it, `reap` expires the task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    deadline: Option<String>,
    /// Messages the task's last change sends, kept until they are delivered.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    outbox: Vec<OutgoingDef>,
    /// Passed checks that were asserted, not run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    asserted: Vec<String>,
}

/// A message a task's change sends (`task::record::Outgoing`).
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[expect(dead_code, reason = "a schema, never built")]
pub struct OutgoingDef {
    msg_id: String,
    /// The boxes it goes to (`inbox:<agent>`).
    to: Vec<String>,
    name: String,
    content: String,
    /// The event its delivery logs: `send` or `route`.
    event: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    rule: Option<String>,
}

/// A task's status.
#[derive(JsonSchema)]
#[serde(rename_all = "snake_case")]
#[expect(dead_code, reason = "a schema, never built")]
pub enum StatusDef {
    New,
    Claimed,
    InProgress,
    Blocked,
    Completed,
    Failed,
    Parked,
    /// Its deadline passed before it was completed.
    Expired,
}

/// A task's priority, as its record keeps it (a message keeps the word it was sent with).
#[derive(JsonSchema)]
#[serde(rename_all = "snake_case")]
#[expect(dead_code, reason = "a schema, never built")]
pub enum PriorityDef {
    High,
    Normal,
    Low,
}

/// How a check was recorded: its command run, or asserted by a coordinator with a reason.
#[derive(JsonSchema)]
#[serde(rename_all = "snake_case")]
#[expect(dead_code, reason = "a schema, never built")]
pub enum HowDef {
    Run,
    Asserted,
}

/// An error's kind (its exit code follows from it).
#[derive(JsonSchema)]
#[serde(rename_all = "snake_case")]
#[expect(dead_code, reason = "a schema, never built")]
pub enum KindDef {
    Internal,
    Usage,
    Refused,
    Conflict,
    NotFound,
    NothingToClaim,
    TimedOut,
}

/// `TASKS/<id>.owner` (`task::OwnerRecord`).
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[expect(dead_code, reason = "a schema, never built")]
pub struct OwnerRecordDef {
    owner: String,
    claimed_at: String,
    lease_expires_at: String,
    epoch: u64,
    host: String,
    pid: u32,
}

/// One task on the board (`task::Row`).
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[expect(dead_code, reason = "a schema, never built")]
pub struct RowDef {
    task_id: String,
    status: StatusDef,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    owner: Option<String>,
    created_at: String,
    /// The last change of status: for a waiting task, when it started waiting.
    updated_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lease_expires_at: Option<String>,
    intent: String,
    to: String,
    priority: PriorityDef,
    checks_passed: usize,
    /// The checks its completion demands: those `.checks` lists, and for a task not finished
    /// each the registry requires of its intent now that `.checks` does not list yet.
    checks_total: usize,
    /// Of the passed checks, how many were asserted rather than run.
    checks_asserted: usize,
    /// When it must be completed by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    deadline: Option<String>,
}

/// A box and a file in it (`new`, `inbox:<agent>`, `workspace:<agent>`, `logs`).
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[expect(dead_code, reason = "a schema, never built")]
pub struct FileRefDef {
    #[serde(rename = "box")]
    mailbox: String,
    file: String,
}

/// One line of the event log (`event::Event`, PROTOCOLS.md section 10).
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[expect(dead_code, reason = "a schema, never built")]
pub struct EventDef {
    id: u64,
    v: u32,
    ts: String,
    /// The kind: open, send, claim, start, ... (a newer circe may add kinds).
    event: String,
    agent: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    task_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    from: Option<StatusDef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    to: Option<StatusDef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    epoch: Option<u64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    files: Vec<FileRefDef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    msg_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    intent: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    addressed_to: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    in_reply_to: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    owner: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    attempts: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    expiries: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    note: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    forced: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    check: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    passed: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    how: Option<HowDef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    command: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    exit_code: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    seconds: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    what: Option<String>,
    /// The consumer (cursor name) a `dead_letter` is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    consumer: Option<String>,
    /// A `skip`: the stale message's sender, number and epoch, and the receiver's lastSeen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sender: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    seq: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    seq_epoch: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    last_seen: Option<u64>,
}

/// A parsed message (`message::Message`); absent fields are `null`.
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[expect(dead_code, reason = "a schema, never built")]
pub struct MessageDef {
    /// `circe` (`# MESSAGE` headers) or `front_matter` (TX).
    format: String,
    msg_id: Option<String>,
    from: Option<String>,
    to: Option<String>,
    intent: Option<String>,
    task_id: Option<String>,
    status: Option<String>,
    created_at: Option<String>,
    in_reply_to: Option<String>,
    headline: Option<String>,
    priority: Option<String>,
    deadline: Option<String>,
    tags: Vec<String>,
    seq: Option<u64>,
    /// The sender's counter epoch the number belongs to, after a `seq reset` (section 14).
    seq_epoch: Option<u64>,
    extra: BTreeMap<String, String>,
    body: String,
}

/// A problem with a message (`message::Problem`).
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[expect(dead_code, reason = "a schema, never built")]
pub struct ProblemDef {
    line_number: Option<usize>,
    field: Option<String>,
    message: String,
    hint: Option<String>,
    /// `limits.message_bytes` or `limits.header_lines` when the message is over a limit;
    /// null otherwise.
    limit: Option<String>,
}

/// Something `doctor` found (`engine::Violation`).
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[expect(dead_code, reason = "a schema, never built")]
pub struct ViolationDef {
    invariant: u8,
    what: String,
    repaired: bool,
    /// Still open, and `circe doctor --repair` acts on it (false on a `--repair` run).
    repairable: bool,
}

/// One chat message as `chat watch` prints it (the reference server's fields).
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[expect(dead_code, reason = "a schema, never built")]
pub struct ChatLineDef {
    timestamp: String,
    sender: String,
    recipient: String,
    broadcast: Vec<String>,
    message: String,
    line_number: u64,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    ambiguous: bool,
}

/// What `chat archive` did (`chat::archive::Archived`).
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[expect(dead_code, reason = "a schema, never built")]
pub struct ArchivedDef {
    archive: Option<String>,
    bytes: u64,
    lines: u64,
}

#[cfg(test)]
mod tests {
    use crate::event::{Event, EventKind, FileRef};
    use crate::names::TaskId;
    use crate::task::Status;

    /// Every field an event line can carry is in the schema of `watch` and `log`: an event
    /// with all of them set validates. (The literal names every field: a new one fails to
    /// build here until the schema has it too.)
    #[test]
    fn the_event_schema_admits_every_field_of_an_event() {
        let e = Event {
            id: 7,
            v: crate::event::FORMAT,
            ts: "2026-01-01T00:00:00.000Z".into(),
            event: EventKind::Skip,
            agent: "qa".into(),
            task: Some(TaskId::new("T-1").unwrap()),
            from: Some(Status::New),
            to: Some(Status::Claimed),
            epoch: Some(1),
            files: vec![FileRef { mailbox: "inbox:qa".into(), file: "m.md".into() }],
            msg_id: Some("m".into()),
            intent: Some("inform".into()),
            addressed_to: Some("all".into()),
            in_reply_to: Some("r".into()),
            owner: Some("qa".into()),
            attempts: Some(1),
            expiries: Some(0),
            note: Some("n".into()),
            reason: Some("r".into()),
            forced: true,
            check: Some("tests".into()),
            passed: Some(true),
            how: Some("run".into()),
            command: Some(vec!["true".into()]),
            exit_code: Some(0),
            seconds: Some(0.5),
            what: Some("w".into()),
            consumer: Some("c".into()),
            sender: Some("lead".into()),
            seq: Some(3),
            seq_epoch: Some(2),
            last_seen: Some(4),
        };
        let schema = serde_json::to_value(crate::cli::schema::schema::<super::EventDef>()).unwrap();
        let v = jsonschema::validator_for(&schema).unwrap();
        let line = serde_json::to_value(&e).unwrap();
        let errors: Vec<String> = v.iter_errors(&line).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{errors:?}\n{line}");
    }
}
