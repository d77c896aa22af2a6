//! `circe schema CMD`: the JSON Schema of a command's `--json` output, generated from the
//! Rust types that produce it (schemars). The one place that maps commands to their types;
//! the schema test runs every command and validates its output against this.

use std::collections::BTreeMap;

use clap::Args;
use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, Schema};
use serde::Serialize;

use super::{Ctx, Report};
use crate::error::{Error, Result};

/// Print the JSON Schema (draft 2020-12) of a command's `--json` output; without COMMAND,
/// list the commands that have one. `circe schema error` is the shape of every error (a report whose findings set its exit code, doctor's violations or a failed check, prints its own document).
/// Streaming commands (watch, log, chat watch, demo, replay) print one object per line:
/// their schema is that of one line.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  circe schema claim\n  circe schema agent list\n  circe schema error"
)]
pub struct SchemaArgs {
    /// The command, as typed after `circe` (`claim`, `agent add`, `chat watch`); `error`
    /// for the error document.
    pub command: Vec<String>,
}

/// `circe schema --json` without a command.
#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SchemaListJson {
    /// Every name `circe schema NAME` takes.
    pub commands: Vec<String>,
}

/// A JSON Schema document (what `circe schema CMD` prints).
#[derive(JsonSchema)]
#[expect(dead_code, reason = "a schema of schemas")]
pub struct SchemaDoc(BTreeMap<String, serde_json::Value>);

/// `circe schema --json`: the list of names without one, the named command's schema with
/// one.
#[derive(JsonSchema)]
#[serde(untagged)]
#[expect(dead_code, reason = "a schema, never built")]
pub enum SchemaOutput {
    List(SchemaListJson),
    Doc(SchemaDoc),
}

/// `circe --version --json`.
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[expect(dead_code, reason = "a schema, never built")]
pub struct VersionJson {
    /// `circe`.
    name: String,
    version: String,
}

/// `circe --help --json`, `circe help CMD --json`, `circe GROUP help SUB --json`.
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[expect(dead_code, reason = "a schema, never built")]
pub struct HelpJson {
    /// The help text, as `--help` prints it.
    help: String,
}

/// `circe completions --json` and `circe man --json`.
#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TextJson {
    /// What the text is for (a shell, a command).
    pub of: String,
    pub text: String,
}

/// The schema of what serializing a `T` prints: a key is `required` unless the type skips
/// it (`skip_serializing_if`), so an `Option` printed as `null` is required and nullable.
/// (The default settings describe what deserializing accepts, where every `Option` and
/// every `#[serde(default)]` key may be left out: no promise to a reader of the output.)
pub fn schema<T: JsonSchema>() -> Schema {
    SchemaSettings::draft2020_12().for_serialize().into_generator().into_root_schema_for::<T>()
}

/// Every command with JSON output, and its schema.
pub fn all() -> Vec<(&'static str, Schema)> {
    use super::{
        agent, archive_json as a, board, check, claim, doctor, inbox, init, move_msg, prime,
        questions, reap, registry, replay, schema_defs as d, schema_more as m, schema_tx as x,
        send, show, tasks, vocab,
    };
    vec![
        ("init", schema::<init::InitJson>()),
        ("agent add", schema::<agent::AgentAddJson>()),
        ("agent list", schema::<agent::AgentListJson>()),
        ("chat say", schema::<d::ChatLineDef>()),
        ("chat watch", schema::<d::ChatLineDef>()),
        ("chat archive", schema::<d::ArchivedDef>()),
        ("send", schema::<send::SendOutput>()),
        ("inbox", schema::<inbox::InboxJson>()),
        ("show", schema::<show::ShowOutput>()),
        ("validate", schema::<m::ValidateOutput>()),
        ("registry", schema::<registry::RegistryJson>()),
        ("claim", schema::<claim::ClaimOutput>()),
        ("release", schema::<vocab::TaskMoved>()),
        ("status", schema::<vocab::TaskMoved>()),
        ("heartbeat", schema::<vocab::TaskMoved>()),
        ("check", schema::<check::CheckJson>()),
        ("take", schema::<move_msg::TakeJson>()),
        ("done", schema::<move_msg::DoneJson>()),
        ("tasks", schema::<tasks::TasksJson>()),
        ("doctor", schema::<doctor::DoctorJson>()),
        ("reap", schema::<reap::ReapJson>()),
        ("demo", schema::<replay::ReplayLine>()),
        ("replay", schema::<replay::ReplayLine>()),
        ("prime", schema::<prime::PrimeJson>()),
        ("questions", schema::<questions::QuestionsJson>()),
        ("board", schema::<board::BoardJson>()),
        ("schema", schema::<SchemaOutput>()),
        ("version", schema::<VersionJson>()),
        ("help", schema::<HelpJson>()),
        ("completions", schema::<TextJson>()),
        ("man", schema::<TextJson>()),
        ("watch", schema::<d::EventDef>()),
        ("wait", schema::<m::WaitDef>()),
        ("log", schema::<d::EventDef>()),
        ("cursors", schema::<m::CursorsDef>()),
        ("config", schema::<m::ConfigOutput>()),
        ("migrate", schema::<m::MigrateDef>()),
        ("mirror", schema::<m::MirrorDef>()),
        ("agent retire", schema::<x::RetiredDef>()),
        ("asks", schema::<x::AsksDef>()),
        ("thread", schema::<x::NodeDef>()),
        ("orphans", schema::<x::OrphansDef>()),
        ("orphans redeliver", schema::<x::RedeliveredDef>()),
        ("readdress", schema::<x::RedeliveredDef>()),
        ("import tx", schema::<x::ImportDef>()),
        ("export tx", schema::<x::ExportDef>()),
        ("seq reset", schema::<x::SeqResetDef>()),
        ("seq state", schema::<x::SeqStateDef>()),
        ("seq import", schema::<x::SeqImportDef>()),
        ("archive", schema::<a::ArchiveJson>()),
        ("archive search", schema::<a::ArchiveSearchJson>()),
        ("archive restore", schema::<a::ArchiveRestoreJson>()),
        ("archive verify", schema::<a::ArchiveVerifyJson>()),
        ("error", schema::<vocab::ErrorJson>()),
    ]
}

pub fn run(_ctx: &Ctx, a: &SchemaArgs) -> Result<Report> {
    let all = all();
    if a.command.is_empty() {
        let commands: Vec<String> = all.iter().map(|(n, _)| (*n).to_string()).collect();
        let human = commands.iter().map(|c| format!("{c}\n")).collect::<String>();
        return Ok(Report::new(human, SchemaListJson { commands }));
    }
    let want = a.command.join(" ");
    let Some((_, schema)) = all.iter().find(|(n, _)| *n == want) else {
        let names: Vec<&str> = all.iter().map(|(n, _)| *n).collect();
        let e = Error::not_found(format!("no command `{want}` with JSON output"));
        return Err(match crate::suggest::closest(&want, names.iter().copied()) {
            Some(c) => e.hint(format!("did you mean `{c}`? `circe schema` lists them")),
            None => e.hint("`circe schema` lists them"),
        });
    };
    let text = serde_json::to_string_pretty(schema).unwrap_or_default();
    Ok(Report::new(text, schema))
}
