//! Schemas of the streams' and the engines' commands (`watch`, `wait`, `log`, `cursors`,
//! `config`, `migrate`, `mirror`): schema-only, like `schema_defs`, and checked the same way
//! against real output by the schema test.

use schemars::JsonSchema;

use super::schema_defs::EventDef;

/// `circe config --json`: the configuration, or (with --set) that it was replaced.
#[derive(JsonSchema)]
#[serde(untagged)]
#[expect(dead_code, reason = "a schema, never built")]
pub enum ConfigOutput {
    Shown {
        /// circe.yaml's text (for a root in a database, the copy stored there).
        config: String,
        /// This text keeps the root from opening (it does not parse, or its registry is
        /// refused): shown as stored, for mending; `warnings` says why.
        broken: bool,
        /// Why it keeps the root from opening (also printed on stderr); empty otherwise.
        warnings: Vec<String>,
    },
    Replaced {
        root: String,
        replaced: bool,
        /// The circe.yaml replaced kept the root from opening (it did not parse, or its
        /// registry was refused, or a database root had none): replaced whole, unread.
        broken: bool,
        /// circe's own folders (`tmp`, `locks`, `queue`) a folder root lacked, and nothing
        /// else: made again, as `init` makes them.
        boxes_made: Vec<String>,
        /// What other commands will refuse until it is mended (an escalation or routing
        /// rule naming no agent of the root yet); also printed on stderr.
        warnings: Vec<String>,
    },
}

/// `circe migrate --json`: one shape per direction.
#[derive(JsonSchema)]
#[serde(untagged)]
#[expect(dead_code, reason = "a schema, never built")]
pub enum MigrateDef {
    ToDatabase(MigrateToDatabaseDef),
    ToFolder(MigrateToFolderDef),
}

/// `circe migrate --to URL`: a folder root moved into a database.
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[expect(dead_code, reason = "a schema, never built")]
pub struct MigrateToDatabaseDef {
    /// The root folder moved.
    from: String,
    /// The database root: its URL with its schema.
    to: String,
    task_count: usize,
    message_count: usize,
    event_count: usize,
    /// Where the old folder was moved.
    retired_to: String,
    /// The tasks the folder archived, whose archive stays in the old folder and whose ids
    /// came along (never opened again).
    archived_count: usize,
}

/// `circe migrate --to-local DIR`: a database root moved into a folder.
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[expect(dead_code, reason = "a schema, never built")]
pub struct MigrateToFolderDef {
    /// The database root: its URL with its schema.
    from: String,
    /// The root folder written (`DIR/.circe`).
    to: String,
    task_count: usize,
    message_count: usize,
    event_count: usize,
    /// The circe.yaml the database root was named through, when it lies elsewhere and
    /// still names the database (null otherwise).
    stale_pointer: Option<String>,
}

/// `circe mirror --json`.
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[expect(dead_code, reason = "a schema, never built")]
pub struct MirrorDef {
    root: String,
    dir: String,
    synced: SyncedDef,
    /// The id of the newest event written (as `cursors` names it).
    last_event_id: u64,
}

#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[expect(dead_code, reason = "a schema, never built")]
struct SyncedDef {
    #[serde(rename = "written_count")]
    written: usize,
    #[serde(rename = "removed_count")]
    removed: usize,
    #[serde(rename = "unchanged_count")]
    unchanged: usize,
}

/// `circe wait --json`: what met the condition.
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[expect(dead_code, reason = "a schema, never built")]
pub struct WaitDef {
    /// The event that met it; null when it held already.
    event: Option<EventDef>,
    already: bool,
    task_id: Option<String>,
    #[serde(rename = "box")]
    mailbox: Option<String>,
    file: Option<String>,
    /// What --claim took, as `circe claim --json` prints it.
    claimed: Option<super::claim::ClaimJson>,
}

/// `circe cursors --json`: the cursors, or (with --remove) the one removed.
#[derive(JsonSchema)]
#[serde(untagged)]
#[expect(dead_code, reason = "a schema, never built")]
pub enum CursorsDef {
    List(CursorListDef),
    Removed(CursorRemovedDef),
}

#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[expect(dead_code, reason = "a schema, never built")]
pub struct CursorListDef {
    last_event_id: u64,
    cursors: Vec<CursorDef>,
}

#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[expect(dead_code, reason = "a schema, never built")]
pub struct CursorRemovedDef {
    removed: RemovedCursorDef,
}

#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[expect(dead_code, reason = "a schema, never built")]
struct RemovedCursorDef {
    kind: String,
    name: String,
    /// The dead letters removed with it.
    dead_letters: usize,
}

#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[expect(dead_code, reason = "a schema, never built")]
struct CursorDef {
    /// `events` or `chat`.
    kind: String,
    name: String,
    /// The id of the last event handed on (events cursors).
    after: Option<u64>,
    behind: Option<u64>,
    saved_at: Option<String>,
    dead_letters: usize,
    /// Why the cursor cannot be read (damaged, or of a newer format); `null` when it can.
    problem: Option<String>,
}

/// `circe validate --json`: the message files checked, or (with --config) circe.yaml's
/// routing rules.
#[derive(JsonSchema)]
#[serde(untagged)]
#[expect(dead_code, reason = "a schema, never built")]
pub enum ValidateOutput {
    Files(super::validate::ValidateJson),
    Config(ConfigCheckDef),
}

/// `circe validate --config --json` (`ops::route::Report`).
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[expect(dead_code, reason = "a schema, never built")]
pub struct ConfigCheckDef {
    /// How many routing rules circe.yaml has.
    rules: usize,
    /// Agents that route only among themselves (no terminal state); empty when it passed.
    closed_loops: Vec<Vec<String>>,
}
