//! `circe seq reset|state|import`: sequence numbers (PROTOCOLS.md section 14).

use std::path::PathBuf;

use clap::{Args, Subcommand};
use serde_json::json;

use super::output::Out;
use super::{Ctx, Report};
use crate::error::{Error, Result};
use crate::ops::seq_state;
use crate::seq::MessageState;

/// Sequence numbers (shared/reference 003): reset a sender, show or import the state.
///
/// Every message circe sends carries `seq:`, its sender's next number (one counter per
/// sender, whatever the recipient). Each agent keeps `lastSeen` per sender; a message
/// numbered at or below it is stale: `inbox` shows it apart and never as new.
#[derive(Debug, Subcommand)]
pub enum SeqCommand {
    Reset(ResetArgs),
    State(StateArgs),
    Import(ImportArgs),
}

/// Start a new epoch of the acting agent's counter (`circe seq reset --agent A`): its next
/// message is #1 again, and receivers take it as new; its older messages stay stale.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  circe --agent lead seq reset")]
pub struct ResetArgs {}

/// Print every counter and every lastSeen; with --json in the reference's
/// `message-state.json` shape (`counters`, `lastSeen`; names in upper case).
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  circe seq state\n  circe seq state --json > message-state.json"
)]
pub struct StateArgs {}

/// Take a `message-state.json` (from the reference's tool): counters and lastSeen move up to
/// its numbers. Names are agents in upper case; nothing goes back.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  circe seq import .ai/message-state.json")]
pub struct ImportArgs {
    /// The file.
    pub file: PathBuf,
}

/// The largest state file read.
const MAX_STATE: usize = 16 << 20;

pub fn run(ctx: &Ctx, cmd: &SeqCommand) -> Result<Report> {
    match cmd {
        SeqCommand::Reset(_) => {
            let (ws, me, _) = ctx.acting()?;
            let c = seq_state::reset(&ws, &me)?;
            Ok(Report::new(
                format!("{me}: epoch {}, the next message is #1\n", c.epoch),
                json!({"agent": me, "seq_epoch": c.epoch, "next": 1}),
            ))
        }
        SeqCommand::State(_) => state(ctx),
        SeqCommand::Import(a) => {
            let ws = ctx.workspace()?;
            let c = crate::engine::local::read_input_file_capped(&a.file, MAX_STATE)?;
            if c.bytes.len() > MAX_STATE {
                return Err(Error::refused(format!("{}: over 16 MiB", a.file.display()))
                    .hint("a message-state.json holds one number per sender and receiver: is it the right file?"));
            }
            let text = std::str::from_utf8(&c.bytes)
                .map_err(|_| Error::not_utf8(a.file.display(), &c.bytes))?;
            // A byte-order mark (Windows PowerShell writes one) is passed over, as in messages.
            let text = text.strip_prefix('\u{feff}').unwrap_or(text);
            let s = MessageState::parse(text).map_err(|e| {
                Error::refused(format!("{}: not a message-state.json: {e}", a.file.display())).hint(
                    "the file holds {\"counters\": {NAME: N}, \"lastSeen\": {NAME: {NAME: N}}}",
                )
            })?;
            let done = seq_state::import(&ws, &s)?;
            let mut human = format!(
                "imported: {} counters and {} lastSeen entries moved up\n",
                done.counters_moved, done.last_seen_moved
            );
            if done.earlier_epoch_count > 0 {
                human.push_str(&format!(
                    "left: {} lastSeen entries of a sender reset since (their numbers are of its earlier epoch)\n",
                    done.earlier_epoch_count
                ));
            }
            Ok(Report::new(human, &done))
        }
    }
}

fn state(ctx: &Ctx) -> Result<Report> {
    let ws = ctx.workspace()?;
    let (s, counters) = seq_state::state(&ws)?;
    if ctx.json {
        // The reference's own layout, byte for byte: `circe seq state --json > file` and
        // `circe seq import file` go round.
        let mut out = Out::new(false);
        out.line(s.render().trim_end());
        return Ok(Report::streamed());
    }
    let mut human = String::from("counters (the last number each sender gave):\n");
    if counters.is_empty() {
        human.push_str("  none yet\n");
    }
    for (a, c) in &counters {
        human.push_str(&format!("  {a}: #{} (epoch {})\n", c.last, c.epoch));
    }
    human.push_str("lastSeen (what each receiver last handed on, by sender):\n");
    if s.last_seen.0.is_empty() {
        human.push_str("  none yet\n");
    }
    for (r, m) in &s.last_seen.0 {
        let seen: Vec<String> = m.0.iter().map(|(k, n)| format!("{k} #{n}")).collect();
        human.push_str(&format!("  {}: {}\n", r.to_ascii_lowercase(), seen.join(", ")));
    }
    Ok(Report::new(human, json!(null)))
}
