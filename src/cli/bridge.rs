//! `circe import tx DIR` and `circe export tx DIR`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use clap::{Args, Subcommand};
use serde_json::json;

use super::{Ctx, Report};
use crate::engine::local::{Written, read_message_dir, replace_own_file, write_new_file};
use crate::error::{Error, Result};
use crate::ops::bridge;

/// Bring messages in from another system.
#[derive(Debug, Subcommand)]
pub enum ImportCommand {
    /// Read a TX message folder (`.ai/tx/msgs/`) into this root: msg-ids and threads kept,
    /// the agents it names added (`mesh/agent` -> agent), answered asks and completed tasks
    /// filed as history in LOGS, open asks into their recipient's INBOX, open tasks into
    /// NEW_MESSAGES. Files that cannot be read, or whose type the registry does not know, are
    /// reported and left in the folder; the rest is imported (exit 3 when nothing could be).
    Tx(ImportTxArgs),
}

#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  circe import tx .ai/tx/msgs\n  circe import tx .ai/tx/msgs --role brain=engineer --role interviewer=qa"
)]
pub struct ImportTxArgs {
    /// The TX folder (`.ai/tx/msgs`).
    pub dir: PathBuf,
    /// The role of an agent the folder names (repeatable). Default: TX's `core` is the
    /// coordinator, every other agent gets --default-role.
    #[arg(long = "role", value_name = "AGENT=ROLE")]
    pub roles: Vec<String>,
    /// The role of the agents --role does not name.
    #[arg(long, default_value = "engineer")]
    pub default_role: String,
}

/// Write this root's messages out for another system.
#[derive(Debug, Subcommand)]
pub enum ExportCommand {
    /// Write every message (once, whatever its box) into DIR in TX's naming
    /// (`{mmddhhmmss}-{type}-{from}--{to}-{msgid}.md`, front matter): an imported message
    /// byte for byte under its original name. Existing files are never replaced.
    Tx(ExportTxArgs),
}

#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  circe export tx out/")]
pub struct ExportTxArgs {
    /// The folder to write (made when missing).
    pub dir: PathBuf,
}

pub fn run_import(ctx: &Ctx, cmd: &ImportCommand) -> Result<Report> {
    let ImportCommand::Tx(a) = cmd;
    let mut given = BTreeMap::new();
    for r in &a.roles {
        let (agent, role) = r.split_once('=').ok_or_else(|| {
            Error::usage(format!("--role `{r}` is not AGENT=ROLE"))
                .hint("e.g. --role brain=engineer")
        })?;
        if let Some(before) = given.insert(agent.to_string(), role.to_string())
            && before != role
        {
            return Err(Error::usage(format!(
                "--role gives {agent} two roles, `{before}` and `{role}`: an agent keeps one role for good"
            ))
            .hint(format!("give --role {agent}=ROLE once")));
        }
    }
    let ws = ctx.workspace_for_setup()?;
    let files = read_message_dir(&a.dir, ws.config.limits.message_bytes)?
        .into_iter()
        .map(|(name, read)| {
            let bytes =
                read.and_then(|c| match ws.config.limits.size_problem(c.size.unwrap_or(0), true) {
                    Some(p) => Err(p.message),
                    None => Ok(c.bytes),
                });
            (name, bytes)
        })
        .collect();
    let roles = bridge::Roles { given, default: a.default_role.clone() };
    let r = bridge::import_tx(&ws, files, &roles)?;
    let mut human = format!(
        "imported {} messages from {}: {} history (LOGS), {} open asks, {} open tasks\n",
        r.history + r.open_asks + r.open_tasks,
        a.dir.display(),
        r.history,
        r.open_asks,
        r.open_tasks
    );
    for a in &r.agents_added {
        human.push_str(&format!("  agent {} added ({})\n", a.agent, a.role));
    }
    let mut report = Report::new(human, json!(r));
    let mut warnings: Vec<String> =
        r.skipped.iter().map(|s| format!("{}: not imported: {}", s.file, s.reason)).collect();
    let foreign: Vec<&String> = r.meshes.iter().filter(|m| !ws.meshes().contains(m)).collect();
    if !foreign.is_empty() {
        let list: Vec<&str> = foreign.iter().map(|m| m.as_str()).collect();
        warnings.push(format!(
            "the messages address meshes {}: to send to `mesh/agent` as TX does, add `tx: {{aliases: [{}]}}` to circe.yaml",
            list.join(", "),
            list.join(", ")
        ));
    }
    report = report.warnings(warnings);
    // A folder none of whose files could be brought in (now or by an import before) is no
    // success: exit 3, each file named above with why. Some imported and some not is, with
    // the others named; so is a folder imported before, run again.
    if r.history + r.open_asks + r.open_tasks == 0 && r.there_already == 0 && !r.skipped.is_empty()
    {
        report = report.code(crate::exit_code::REFUSED);
    }
    Ok(report)
}

pub fn run_export(ctx: &Ctx, cmd: &ExportCommand) -> Result<Report> {
    let ExportCommand::Tx(a) = cmd;
    let ws = ctx.workspace()?;
    super::outside_the_root(
        &ws,
        &a.dir,
        "an export",
        "export into a folder outside the root (a TX message folder is one of the project's own)",
    )?;
    crate::engine::local::folder_can_be(&a.dir)?;
    // Each file is written as the export makes it (one message in memory at a time). What
    // each name got, in name order: two messages exported under one name leave the one
    // found last, as a file this export wrote is replaced by it and one there before is
    // judged against it.
    let mut done: BTreeMap<String, (Written, bool, bool)> = BTreeMap::new();
    let skipped = bridge::export_tx(&ws, &mut |f| {
        let w = match done.get(&f.name) {
            Some((Written::New, ..)) => {
                replace_own_file(&a.dir, &f.name, &f.bytes)?;
                Written::New
            }
            _ => write_new_file(&a.dir, &f.name, &f.bytes)?,
        };
        done.insert(f.name, (w, f.original, f.archived));
        Ok(())
    })?;
    let count = |w: Written| done.values().filter(|(x, ..)| *x == w).count();
    let (new, same) = (count(Written::New), count(Written::Same));
    let kept: Vec<String> =
        done.iter().filter(|(_, (w, ..))| *w == Written::Kept).map(|(n, _)| n.clone()).collect();
    let originals = done.values().filter(|(_, original, _)| *original).count();
    let archived = done.values().filter(|(.., archived)| *archived).count();
    let human = format!(
        "exported {} messages to {} ({new} written, {same} there already; {archived} from the archive; {originals} as imported, byte for byte)\n",
        done.len(),
        a.dir.display()
    );
    let mut warnings: Vec<String> =
        kept.iter().map(|k| format!("{k}: another file has this name; left as it is")).collect();
    warnings.extend(skipped.iter().map(|s| format!("{}: not exported: {}", s.file, s.reason)));
    // A database root keeps no archive: one moved from a folder left it there. Said, so
    // that such an export is not taken for the whole history.
    if !ws.engine.keeps_archive() {
        let gone = ws.engine.archived_tasks()?;
        if !gone.is_empty() {
            warnings.push(format!(
                "the messages of {} archived task(s) (and the loose messages archived with them) are not exported: their archive stayed in the folder this root came from",
                gone.len()
            ));
        }
    }
    let names: Vec<&str> = done.keys().map(String::as_str).collect();
    Ok(Report::new(human, json!({"dir": a.dir, "files": names, "written_count": new, "unchanged_count": same, "archived_count": archived, "kept": kept, "skipped": skipped.iter().map(|s| json!({"file": s.file, "reason": s.reason})).collect::<Vec<_>>()}))
        .warnings(warnings))
}
