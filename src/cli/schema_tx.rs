//! Schemas of TX's and sequence numbers' commands (`asks`, `thread`, `orphans`, `agent
//! retire`, `import tx`, `export tx`, `seq`): schema-only, like `schema_defs`, and checked
//! the same way against real output by the schema test.

use std::collections::BTreeMap;

use schemars::JsonSchema;

use super::schema_defs::StatusDef;

/// `circe agent retire --json`.
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[expect(dead_code, reason = "a schema, never built")]
pub struct RetiredDef {
    agent: String,
    /// The agent's state: retired (as `agent list` says it).
    retired: bool,
    /// It was retired already: nothing changed but what it still held, released.
    already: bool,
    /// Its held tasks, now back in the queue.
    released: Vec<String>,
    /// Messages left in its boxes: orphans now.
    orphan_count: usize,
}

/// `circe asks --json`.
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[expect(dead_code, reason = "a schema, never built")]
pub struct AsksDef {
    /// Oldest first.
    asks: Vec<AskDef>,
}

#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[expect(dead_code, reason = "a schema, never built")]
struct AskDef {
    /// The ask record's format.
    v: u32,
    msg_id: String,
    /// `ask` or `ask-human`.
    intent: String,
    from: String,
    /// The address as written.
    to: String,
    /// The agents it was delivered to: any of them may answer.
    recipients: Vec<String>,
    task_id: Option<String>,
    /// The ask's summary line (as `inbox` and `questions` name it).
    summary: Option<String>,
    /// When it was asked (the record's `asked_at`).
    created_at: String,
    deadline: Option<String>,
    /// `open`, `answering`, `answered` or `expired`.
    state: String,
    answer: Option<String>,
    answered_by: Option<String>,
    answered_at: Option<String>,
    rev: u64,
    age_seconds: i64,
}

/// `circe thread --json`: the first message, its replies nested.
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[expect(dead_code, reason = "a schema, never built")]
pub struct NodeDef {
    msg_id: String,
    from: Option<String>,
    to: Option<String>,
    intent: Option<String>,
    task_id: Option<String>,
    status: Option<String>,
    created_at: Option<String>,
    summary: String,
    #[serde(rename = "box")]
    mailbox: String,
    file: String,
    /// The msg id it answers (null when it answers nothing).
    in_reply_to: Option<String>,
    /// Its replies in time order, nested 32 levels deep at most: the 32nd level lists its
    /// whole subthread flat, each saying what it answers.
    replies: Vec<NodeDef>,
}

/// `circe orphans --json`.
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[expect(dead_code, reason = "a schema, never built")]
pub struct OrphansDef {
    messages: Vec<OrphanMessageDef>,
    tasks: Vec<OrphanTaskDef>,
}

#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[expect(dead_code, reason = "a schema, never built")]
struct OrphanMessageDef {
    /// The retired agent.
    agent: String,
    #[serde(rename = "box")]
    mailbox: String,
    file: String,
    msg_id: Option<String>,
    from: Option<String>,
    intent: Option<String>,
    task_id: Option<String>,
    created_at: Option<String>,
}

#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[expect(dead_code, reason = "a schema, never built")]
struct OrphanTaskDef {
    task_id: String,
    status: StatusDef,
    to: String,
    intent: String,
}

/// `circe orphans redeliver --json` and `circe readdress --json`.
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[expect(dead_code, reason = "a schema, never built")]
pub struct RedeliveredDef {
    /// `message` or `task`.
    kind: String,
    /// The address it goes to now: `agent:NAME` (an orphan), or as `readdress --to` gave it.
    to: String,
    #[serde(rename = "box")]
    mailbox: String,
    file: String,
    /// It waited there already: a readdress to the address it has (nothing changed), or a
    /// message the agent held a copy of already (the orphan copy was filed into LOGS: `box`,
    /// `file`).
    already: bool,
    /// The task: the one addressed anew, or the one a message names; null for a message of
    /// no task.
    task_id: Option<String>,
    /// The message's id (a task's: its message's); null when it has none.
    msg_id: Option<String>,
    /// Where the agent's own copy lies (`inbox:B/FILE`) when it held one already (`box` and
    /// `file` then say where the orphan copy was filed); else null.
    held_copy: Option<String>,
}

/// An agent `import tx` added.
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[expect(dead_code, reason = "a schema, never built")]
struct ImportedAgentDef {
    agent: String,
    role: String,
    /// Always false (a new agent), as in `init`'s `agents_added`.
    retired: bool,
}

/// `circe import tx --json`.
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[expect(dead_code, reason = "a schema, never built")]
pub struct ImportDef {
    /// Messages filed as history into LOGS.
    history: usize,
    open_asks: usize,
    open_tasks: usize,
    /// Agents added, each with its role.
    agents_added: Vec<ImportedAgentDef>,
    /// Meshes the addresses named (`mesh/agent`).
    meshes: Vec<String>,
    skipped: Vec<SkippedDef>,
}

#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[expect(dead_code, reason = "a schema, never built")]
struct SkippedDef {
    file: String,
    reason: String,
}

/// `circe export tx --json`.
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[expect(dead_code, reason = "a schema, never built")]
pub struct ExportDef {
    dir: String,
    /// Every file name the export holds.
    files: Vec<String>,
    written_count: usize,
    /// Already there with the same bytes.
    unchanged_count: usize,
    /// Of `files`, those read from the archive.
    archived_count: usize,
    /// Names another file holds: left as they are.
    kept: Vec<String>,
    skipped: Vec<SkippedDef>,
}

/// `circe seq reset --json`.
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[expect(dead_code, reason = "a schema, never built")]
pub struct SeqResetDef {
    agent: String,
    /// The sender's new counter epoch (`seq_epoch`, as events and messages name it; a task's
    /// `epoch` is its fencing number).
    seq_epoch: u64,
    /// The next message's number: 1.
    next: u64,
}

/// `circe seq state --json`: the reference's `message-state.json` (names in upper case).
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[expect(dead_code, reason = "a schema, never built")]
pub struct SeqStateDef {
    /// The last number each sender gave.
    counters: BTreeMap<String, u64>,
    /// By receiver, by sender: the last number handed on.
    #[serde(rename = "lastSeen")]
    last_seen: BTreeMap<String, BTreeMap<String, u64>>,
}

/// `circe seq import --json`.
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[expect(dead_code, reason = "a schema, never built")]
pub struct SeqImportDef {
    /// How many counters moved up (`seq state` gives the counters themselves).
    counters_moved: usize,
    /// How many lastSeen entries moved up.
    last_seen_moved: usize,
    /// How many lastSeen entries were left as they are: of a sender reset since, numbers
    /// above what it has numbered in its new epoch (of its earlier one).
    earlier_epoch_count: usize,
}
