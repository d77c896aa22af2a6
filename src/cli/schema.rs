//! `circe schema CMD`: the JSON Schema of a command's `--json` output, generated from the
//! Rust types that produce it (schemars). The one place that maps commands to their types;
//! the schema test runs every command and validates its output against this.

use std::collections::BTreeMap;

use clap::Args;
use schemars::{JsonSchema, Schema, schema_for};
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

/// Every command with JSON output, and its schema.
pub fn all() -> Vec<(&'static str, Schema)> {
    use super::{
        agent, archive_json as a, board, check, claim, doctor, inbox, init, move_msg, prime,
        questions, reap, registry, replay, schema_defs as d, schema_more as m, schema_tx as x,
        send, show, tasks, vocab,
    };
    vec![
        ("init", schema_for!(init::InitJson)),
        ("agent add", schema_for!(agent::AgentAddJson)),
        ("agent list", schema_for!(agent::AgentListJson)),
        ("chat say", schema_for!(d::ChatLineDef)),
        ("chat watch", schema_for!(d::ChatLineDef)),
        ("chat archive", schema_for!(d::ArchivedDef)),
        ("send", schema_for!(send::SendOutput)),
        ("inbox", schema_for!(inbox::InboxJson)),
        ("show", schema_for!(show::ShowOutput)),
        ("validate", schema_for!(m::ValidateOutput)),
        ("registry", schema_for!(registry::RegistryJson)),
        ("claim", schema_for!(claim::ClaimOutput)),
        ("release", schema_for!(vocab::TaskMoved)),
        ("status", schema_for!(vocab::TaskMoved)),
        ("heartbeat", schema_for!(vocab::TaskMoved)),
        ("check", schema_for!(check::CheckJson)),
        ("take", schema_for!(move_msg::TakeJson)),
        ("done", schema_for!(move_msg::DoneJson)),
        ("tasks", schema_for!(tasks::TasksJson)),
        ("doctor", schema_for!(doctor::DoctorJson)),
        ("reap", schema_for!(reap::ReapJson)),
        ("demo", schema_for!(replay::ReplayLine)),
        ("replay", schema_for!(replay::ReplayLine)),
        ("prime", schema_for!(prime::PrimeJson)),
        ("questions", schema_for!(questions::QuestionsJson)),
        ("board", schema_for!(board::BoardJson)),
        ("schema", schema_for!(SchemaOutput)),
        ("version", schema_for!(VersionJson)),
        ("help", schema_for!(HelpJson)),
        ("completions", schema_for!(TextJson)),
        ("man", schema_for!(TextJson)),
        ("watch", schema_for!(d::EventDef)),
        ("wait", schema_for!(m::WaitDef)),
        ("log", schema_for!(d::EventDef)),
        ("cursors", schema_for!(m::CursorsDef)),
        ("config", schema_for!(m::ConfigOutput)),
        ("migrate", schema_for!(m::MigrateDef)),
        ("mirror", schema_for!(m::MirrorDef)),
        ("agent retire", schema_for!(x::RetiredDef)),
        ("asks", schema_for!(x::AsksDef)),
        ("thread", schema_for!(x::NodeDef)),
        ("orphans", schema_for!(x::OrphansDef)),
        ("orphans redeliver", schema_for!(x::RedeliveredDef)),
        ("readdress", schema_for!(x::RedeliveredDef)),
        ("import tx", schema_for!(x::ImportDef)),
        ("export tx", schema_for!(x::ExportDef)),
        ("seq reset", schema_for!(x::SeqResetDef)),
        ("seq state", schema_for!(x::SeqStateDef)),
        ("seq import", schema_for!(x::SeqImportDef)),
        ("archive", schema_for!(a::ArchiveJson)),
        ("archive search", schema_for!(a::ArchiveSearchJson)),
        ("archive restore", schema_for!(a::ArchiveRestoreJson)),
        ("archive verify", schema_for!(a::ArchiveVerifyJson)),
        ("error", schema_for!(vocab::ErrorJson)),
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
